"""The policy engine and the built-in Rego bundle."""

from __future__ import annotations

import gc
import sys
import threading

import pytest

from memsvc.core import policy
from memsvc.core.errors import InvalidArgument
from memsvc.core.policy import CompiledPolicies, PolicyBundle, compile_bundle, default_bundle

USER_OPERATIONS = ["read", "write", "delete", "search", "list", "events"]
ALL_OPERATIONS = USER_OPERATIONS + ["admin"]


def ctx(user_id: str = "alice", roles: list[str] | None = None, client_id: str | None = "agent-1", **extra) -> dict:
    return {
        "tenant_id": "t1",
        "user_id": user_id,
        "client_id": client_id,
        "roles": ["user"] if roles is None else roles,
        "principal_type": "user",
        "jwt_claims": {"sub": user_id},
        **extra,
    }


@pytest.fixture(scope="module")
def pol() -> CompiledPolicies:
    return compile_bundle(default_bundle())


# --- the default bundle -------------------------------------------------------------------------


def test_default_bundle_loads_four_files_and_is_a_copy():
    bundle = default_bundle()
    assert set(bundle) == {"authz.rego", "attributes.rego", "search.rego", "governance.rego"}
    assert "package memories.authz" in bundle["authz.rego"]
    bundle["authz.rego"] = "changed"
    assert default_bundle()["authz.rego"] != "changed"
    assert policy.DEFAULT_BUNDLE == default_bundle()


def test_default_bundle_version_is_builtin(pol):
    assert pol.bundle == PolicyBundle(version="builtin", policies=default_bundle())
    assert compile_bundle(default_bundle(), version="v7").bundle.version == "v7"


# --- authz ----------------------------------------------------------------------------------------


@pytest.mark.parametrize("operation", USER_OPERATIONS)
@pytest.mark.parametrize("namespace", [["user", "alice"], ["user", "alice", "memories"], ["user", "alice", "a", "b"]])
def test_owner_is_allowed_every_user_operation(pol, operation, namespace):
    assert pol.allow(operation, namespace, "k", ctx("alice")) is True


@pytest.mark.parametrize("operation", USER_OPERATIONS)
def test_other_users_subtree_is_denied(pol, operation):
    assert pol.allow(operation, ["user", "bob", "memories"], "k", ctx("alice")) is False
    assert pol.allow(operation, ["user", "alicea"], None, ctx("alice")) is False


@pytest.mark.parametrize(
    "namespace",
    [["users", "alice"], ["User", "alice"], ["alice", "user"], ["shared", "alice"], ["user"], []],
)
def test_namespaces_outside_own_subtree_are_denied(pol, namespace):
    for operation in USER_OPERATIONS:
        assert pol.allow(operation, namespace, None, ctx("alice")) is False


def test_admin_operation_is_denied_to_plain_users(pol):
    assert pol.allow("admin", ["user", "alice"], None, ctx("alice")) is False
    assert pol.allow("admin", [], None, ctx("alice")) is False


def test_unknown_operation_is_denied_to_users(pol):
    assert pol.allow("purge", ["user", "alice"], None, ctx("alice")) is False


@pytest.mark.parametrize("role", ["admin", "service"])
@pytest.mark.parametrize("operation", ALL_OPERATIONS)
@pytest.mark.parametrize("namespace", [[], ["user"], ["user", "bob", "x"], ["users", "x"], ["shared"]])
def test_admin_and_service_are_allowed_everything(pol, role, operation, namespace):
    assert pol.allow(operation, namespace, "k", ctx("root", roles=["user", role])) is True


def test_iam_service_principal_is_allowed(pol):
    iam = ctx("arn:aws:iam::123456789012:role/backend", roles=["service"], principal_type="iam", client_id=None)
    assert pol.allow("admin", [], None, iam) is True


@pytest.mark.parametrize(
    "context",
    [
        ctx("alice", roles=[]),
        {**ctx("alice"), "roles": None},
        {k: v for k, v in ctx("alice").items() if k != "roles"},
        {**ctx("alice"), "roles": "admin"},  # a string is not a role list
    ],
)
def test_odd_roles_do_not_break_the_owner_rule(pol, context):
    assert pol.allow("read", ["user", "alice"], None, context) is True
    assert pol.allow("read", ["user", "bob"], None, context) is False
    assert pol.allow("admin", [], None, context) is False


def test_missing_or_empty_user_id_is_denied(pol):
    assert pol.allow("read", ["user", ""], None, ctx("")) is False
    assert pol.allow("read", ["user", "alice"], None, {"roles": ["user"]}) is False


def test_roles_only_count_from_context_not_jwt_claims(pol):
    context = {**ctx("alice"), "jwt_claims": {"sub": "alice", "roles": ["admin"]}}
    assert pol.allow("admin", [], None, context) is False


# --- attribute extraction -------------------------------------------------------------------------


def test_attributes_depth_one(pol):
    assert pol.extract_attributes(["team"], "k", {"text": "x"}, None, ctx()) == {"namespace": "team"}


def test_attributes_depth_two_and_three(pol):
    expected = {"namespace": "user", "sub": "alice"}
    assert pol.extract_attributes(["user", "alice"], "k", {}, {}, ctx()) == expected
    assert pol.extract_attributes(["user", "alice", "memories"], "k", {"text": "x"}, {"color": "blue"}, ctx()) == expected


def test_attributes_undefined_is_empty_object():
    bundle = {**default_bundle(), "attributes.rego": "package memories.attributes\n\nattributes := {} if false\n"}
    assert compile_bundle(bundle).extract_attributes(["user", "alice"], "k", {}, {}, ctx()) == {}


def test_custom_attributes_keep_numbers_and_lists():
    source = """package memories.attributes

attributes := {"namespace": input.namespace[0], "year": 2024, "score": 0.5, "tags": input.value.tags, "pinned": true}
"""
    pol = compile_bundle({**default_bundle(), "attributes.rego": source})
    got = pol.extract_attributes(["user", "alice"], "k", {"tags": ["a", "b"]}, None, ctx())
    assert got == {"namespace": "user", "year": 2024, "score": 0.5, "tags": ["a", "b"], "pinned": True}
    assert type(got["year"]) is int


def test_every_valid_number_reaches_the_attribute_and_search_policies():
    # regorus cannot hold the top of a double's range nor an integer beyond it: the policies see
    # those as +-1e308. What it holds exactly (64-bit integers, most doubles) comes back as sent.
    source = 'package memories.attributes\n\nattributes := {"n": input.value.n, "a": input.attributes.a}\n'
    pol = compile_bundle({**default_bundle(), "attributes.rego": source})
    for sent, seen in [(1.7976931348623157e308, 1e308), (-(10**4299), -1e308), (2**63, 2**63), (-(2**63), -(2**63)),
                       (5e-324, 5e-324), (-0.0, -0.0), (1e-310, 1e-310), (0.1, 0.1)]:
        got = pol.extract_attributes(["user", "alice"], "k", {"n": sent}, {"a": [sent]}, ctx())
        assert got == {"n": seen, "a": [seen]} and type(got["n"]) is type(seen), sent
    extreme = {"n": {"gt": 1.7976931348623157e308}, "m": {"in": [10**4299, -5e-324]}}
    assert pol.inject_search("search", ["user"], extreme, ctx("alice")) == (
        ["user", "alice"], {"namespace": "user", "sub": "alice"})


@pytest.mark.parametrize(
    "expr",
    ['"just a string"', '{"nested": {"a": 1}}', '{"list_of_objects": [{"a": 1}]}', '{"nothing": null}', "[1, 2]"],
)
def test_attributes_of_wrong_type_are_rejected(expr):
    source = (
        "package memories.attributes\n\n"
        'attributes := {"namespace": "x"} if input.key != "bad"\n\n'
        f'attributes := {expr} if input.key == "bad"\n'
    )
    pol = compile_bundle({**default_bundle(), "attributes.rego": source})
    assert pol.extract_attributes(["user", "alice"], "ok", {}, None, ctx()) == {"namespace": "x"}
    with pytest.raises(InvalidArgument, match="attribute extraction policy") as info:
        pol.extract_attributes(["user", "alice"], "bad", {}, None, ctx())
    assert "must return" in info.value.message or "is not a scalar" in info.value.message


def test_an_attribute_of_the_wrong_type_is_named_without_its_content():
    source = 'package memories.attributes\n\nattributes := {"copy": input.value} if input.key == "bad"\n'
    pol = compile_bundle({**default_bundle(), "attributes.rego": source})
    with pytest.raises(InvalidArgument) as info:
        pol.extract_attributes(["user", "alice"], "bad", {"secret": "hunter2"}, None, ctx())
    assert info.value.details == {"attribute": "copy"}
    assert "hunter2" not in repr(info.value.to_body())


def test_attributes_policy_that_fails_to_compile_on_sample_is_rejected():
    source = 'package memories.attributes\n\nattributes := {"n": 1} if true\n\nattributes := {"n": 2} if true\n'
    with pytest.raises(InvalidArgument):
        compile_bundle({**default_bundle(), "attributes.rego": source})


# --- search filter injection ----------------------------------------------------------------------


@pytest.mark.parametrize("requested", [[], ["user"], ["user", "alice"]])
def test_search_ancestors_of_own_subtree_are_narrowed(pol, requested):
    for operation in ("search", "list", "events"):
        prefix, attribute_filter = pol.inject_search(operation, requested, {"topic": "python"}, ctx("alice"))
        assert prefix == ["user", "alice"]
        assert attribute_filter == {"namespace": "user", "sub": "alice"}


def test_search_inside_own_subtree_is_unchanged(pol):
    prefix, attribute_filter = pol.inject_search("search", ["user", "alice", "memories"], {}, ctx("alice"))
    assert prefix == ["user", "alice", "memories"]
    assert attribute_filter == {"namespace": "user", "sub": "alice"}


@pytest.mark.parametrize("requested", [["user", "bob"], ["user", "bob", "x"], ["shared"], ["users"], ["user", "alicea"]])
def test_search_disjoint_prefix_is_left_for_authz_to_deny(pol, requested):
    prefix, attribute_filter = pol.inject_search("search", requested, {}, ctx("alice"))
    assert prefix == requested
    assert attribute_filter == {"namespace": "user", "sub": "alice"}
    assert pol.allow("search", prefix, None, ctx("alice")) is False


@pytest.mark.parametrize("role", ["admin", "service"])
@pytest.mark.parametrize("requested", [[], ["user"], ["user", "bob", "x"], ["shared"]])
def test_search_admin_and_service_keep_the_requested_prefix(pol, role, requested):
    assert pol.inject_search("list", requested, {"a": 1}, ctx("root", roles=[role])) == (requested, {})


def test_search_accepts_tuples(pol):
    assert pol.inject_search("search", ("user",), None, ctx("alice"))[0] == ["user", "alice"]


def test_search_result_of_wrong_type_is_rejected():
    source = (
        "package memories.search\n\n"
        'result := {"namespace_prefix": input.namespace_prefix, "attribute_filter": {}} if input.operation != "list"\n\n'
        'result := {"namespace_prefix": "user/alice", "attribute_filter": {}} if input.operation == "list"\n'
    )
    pol = compile_bundle({**default_bundle(), "search.rego": source})
    with pytest.raises(InvalidArgument, match="namespace_prefix"):
        pol.inject_search("list", ["user"], {}, ctx())


def test_search_undefined_keeps_the_requested_prefix():
    source = "package memories.search\n\nresult := {} if false\n"
    pol = compile_bundle({**default_bundle(), "search.rego": source})
    assert pol.inject_search("search", ["user"], {}, ctx()) == (["user"], {})


# --- bundle validation ----------------------------------------------------------------------------


# What regorus's own messages hold, and ours never may: its pointer into the source, the source line
# it quotes, its words, its stack.
ENGINE_TEXT = ("-->", ".rego:", "  |", "error:", "Caused by", "backtrace", "regorus", "anyhow", "expecting")


def assert_in_our_words(error: InvalidArgument, *quoted: str) -> None:
    body = repr(error.to_body())
    for text in (*ENGINE_TEXT, *quoted):
        assert text not in body, f"{text!r} in {body}"


def test_a_syntax_error_names_file_line_and_column_in_our_words():
    bundle = {**default_bundle(), "authz.rego": "package memories.authz\n\nallow := \n"}
    with pytest.raises(InvalidArgument) as info:
        compile_bundle(bundle)
    assert info.value.message == ("the policy bundle is not valid Rego: a syntax error, in authz.rego at line 4, "
                                  "column 1")
    assert info.value.details == {"policy_file": "authz.rego", "line": 4, "column": 1}
    assert_in_our_words(info.value, "allow :=")


@pytest.mark.parametrize(("source", "reason"), [
    ("allow := true\n", "the file must start with a package declaration"),
    ("package memories.authz\n\nallow { true }\n", "a rule body needs the `if` keyword (Rego v1)"),
    ("package memories.authz\n\nallow if { true with input.x as 1 }\n", "`with` is not supported"),
    ("package memories.authz\n\nallow if { x == 1 }\n", "a variable that is never bound"),
    ("package memories.authz\n\nallow := no_such_fn(1)\n", "a call to a function that does not exist"),
    ("package memories.authz\n\nallow := true\nallow := false\n", "conflicting definitions of a rule"),
    ("package memories.authz\n\nallow if 1 / (count(input.namespace) - 3) > 0\n", "a division by zero"),
    ('package memories.authz\n\nallow if regex.match("(", input.key)\n', "an invalid regular expression"),
])
def test_each_compile_or_sample_failure_is_said_in_our_words(source, reason):
    with pytest.raises(InvalidArgument) as info:
        compile_bundle({**default_bundle(), "authz.rego": source})
    assert info.value.message.split(": ", 1)[1].startswith(reason + ", in authz.rego at line ")
    assert info.value.details["policy_file"] == "authz.rego"
    assert {"line", "column"} <= info.value.details.keys()
    assert_in_our_words(info.value, source.splitlines()[-1])


def test_rego_v0_syntax_is_rejected():
    bundle = {**default_bundle(), "authz.rego": "package memories.authz\n\nallow { true }\n"}
    with pytest.raises(InvalidArgument, match="if"):
        compile_bundle(bundle)


def test_missing_package_is_rejected():
    bundle = {k: v for k, v in default_bundle().items() if k != "search.rego"}
    with pytest.raises(InvalidArgument, match="memories.search") as info:
        compile_bundle(bundle)
    assert info.value.details == {"missing_packages": ["memories.search"]}


def test_missing_rule_is_rejected():
    bundle = {**default_bundle(), "authz.rego": "package memories.authz\n\npermit := true\n"}
    with pytest.raises(InvalidArgument, match="authz policy failed"):
        compile_bundle(bundle)


def test_runtime_error_on_the_sample_input_is_rejected():
    bundle = {**default_bundle(), "authz.rego": "package memories.authz\n\nallow if input.context.user_id + 1 > 0\n"}
    with pytest.raises(InvalidArgument) as info:
        compile_bundle(bundle)
    assert info.value.message == ("authz policy failed: a built-in function given an argument of the wrong type, "
                                  "in authz.rego at line 3, column 23")
    assert info.value.details == {"policy_file": "authz.rego", "line": 3, "column": 23}
    assert_in_our_words(info.value, "alice")


def test_an_error_at_run_time_never_quotes_the_input(caplog):
    source = ('package memories.attributes\n\n'
              'attributes := {"n": input.value.secret + 1} if input.key == "boom"\n')
    pol = compile_bundle({**default_bundle(), "attributes.rego": source})
    with pytest.raises(InvalidArgument) as info:
        pol.extract_attributes(["user", "alice"], "boom", {"secret": "hunter2"}, None, ctx())
    assert info.value.message.startswith("attribute extraction policy failed: a built-in function given an argument")
    assert info.value.details == {"policy_file": "attributes.rego", "line": 3, "column": 32}
    assert_in_our_words(info.value, "hunter2", "input.value")
    assert "policy failed" in caplog.text and "hunter2" not in caplog.text  # nor in the log


def test_unknown_function_is_rejected():
    bundle = {**default_bundle(), "search.rego": "package memories.search\n\nresult := no_such_fn(1)\n"}
    with pytest.raises(InvalidArgument, match="a call to a function that does not exist") as info:
        compile_bundle(bundle)
    assert info.value.details == {"policy_file": "search.rego", "line": 3, "column": 21}


def test_non_boolean_allow_is_rejected():
    bundle = {**default_bundle(), "authz.rego": 'package memories.authz\n\nallow := "yes"\n'}
    with pytest.raises(InvalidArgument, match="boolean"):
        compile_bundle(bundle)


@pytest.mark.parametrize(
    "policies",
    [
        {},
        None,
        ["authz.rego"],
        {"authz.txt": "package memories.authz"},
        {"../authz.rego": "package memories.authz"},
        {".rego": "package memories.authz"},
        {"authz.rego": 42},
        {f"p{i}.rego": "package x" for i in range(65)},
        {"authz.rego": "# " + "x" * (256 * 1024)},
    ],
)
def test_malformed_bundles_are_rejected(policies):
    with pytest.raises(InvalidArgument):
        compile_bundle(policies)


def test_a_bundle_of_exactly_the_size_limit_is_accepted_and_one_byte_more_is_not():
    bundle = default_bundle()
    others = sum(len(source.encode()) for name, source in bundle.items() if name != "authz.rego")
    source = bundle["authz.rego"]
    padded = source + "#" * (policy.MAX_BUNDLE_BYTES - others - len(source.encode()) - 1) + "\n"
    assert sum(len(s.encode()) for s in {**bundle, "authz.rego": padded}.values()) == policy.MAX_BUNDLE_BYTES
    compile_bundle({**bundle, "authz.rego": padded})
    with pytest.raises(InvalidArgument) as refused:
        compile_bundle({**bundle, "authz.rego": padded + "#"})
    assert refused.value.details["max_bytes"] == policy.MAX_BUNDLE_BYTES


def test_custom_bundle_shares_a_namespace_with_agents():
    shared_rule = """
# Agents can read the shared namespace
allow if {
	input.namespace[0] == "shared"
	input.operation == "read"
	is_string(input.context.client_id)
	input.context.client_id != ""
}
"""
    bundle = {**default_bundle(), "authz.rego": default_bundle()["authz.rego"] + shared_rule}
    pol = compile_bundle(bundle)
    assert len(pol.bundle.version) == 16 and pol.bundle.version != "builtin"
    assert pol.bundle.policies == bundle
    assert pol.allow("read", ["shared", "faq"], "k", ctx("alice", client_id="agent-1")) is True
    assert pol.allow("read", ["shared", "faq"], "k", ctx("alice", client_id=None)) is False
    assert pol.allow("read", ["shared", "faq"], "k", ctx("alice", client_id="")) is False
    assert pol.allow("write", ["shared", "faq"], "k", ctx("alice", client_id="agent-1")) is False
    assert pol.allow("read", ["user", "alice"], "k", ctx("alice")) is True  # default rules still apply
    assert compile_bundle(dict(bundle)).bundle.version == pol.bundle.version


def test_extra_files_and_helper_packages_are_allowed():
    helper = 'package memories.lib\n\nowner_segment := "user"\n'
    authz = default_bundle()["authz.rego"].replace(
        'input.namespace[0] == "user"', "input.namespace[0] == data.memories.lib.owner_segment"
    )
    pol = compile_bundle({**default_bundle(), "authz.rego": authz, "lib.rego": helper})
    assert pol.allow("read", ["user", "alice"], None, ctx("alice")) is True


# --- failing closed ------------------------------------------------------------------------------


def test_evaluation_error_fails_closed_and_the_engine_recovers():
    # An error only on key "boom", so the bundle passes the smoke evaluation.
    authz = default_bundle()["authz.rego"] + '\nallow if {\n\tinput.key == "boom"\n\tinput.key + 1 > 0\n}\n'
    pol = compile_bundle({**default_bundle(), "authz.rego": authz})
    assert pol.allow("read", ["user", "alice"], "fine", ctx("alice")) is True
    assert pol.allow("read", ["user", "alice"], "boom", ctx("alice")) is False
    assert pol.allow("read", ["user", "alice"], "boom", ctx("root", roles=["admin"])) is False
    assert pol.allow("read", ["user", "alice"], "fine", ctx("alice")) is True


def test_unserializable_context_fails_closed(pol):
    assert pol.allow("read", ["user", "alice"], None, {**ctx("alice"), "jwt_claims": {"exp": object()}}) is False


def test_evaluation_error_in_extraction_raises_invalid_argument():
    source = (
        "package memories.attributes\n\n"
        'attributes := {"size": count(input.value.items)} if input.key == "count"\n'
    )
    pol = compile_bundle({**default_bundle(), "attributes.rego": source})
    with pytest.raises(InvalidArgument, match="attribute extraction policy failed"):
        pol.extract_attributes(["user", "alice"], "count", {"items": 5}, None, ctx())


# --- threads ------------------------------------------------------------------------------------


def test_concurrent_evaluation_is_correct_and_engines_stay_on_their_thread(monkeypatch):
    pol = compile_bundle(default_bundle())  # compiled here, evaluated only on other threads
    unraisable: list = []
    monkeypatch.setattr(sys, "unraisablehook", unraisable.append)
    failures: list[str] = []

    def worker(n: int) -> None:
        me, other = f"user-{n}", f"user-{(n + 1) % 8}"
        gc.collect()  # frees any garbage left by other tests, on this thread
        try:
            for i in range(500):
                target = me if i % 2 == 0 else other
                if pol.allow("write", ["user", target, "m"], f"k{i}", ctx(me)) is not (target == me):
                    failures.append(f"{me} allow {target}")
                if pol.inject_search("search", ["user"], {}, ctx(me)) != (
                    ["user", me],
                    {"namespace": "user", "sub": me},
                ):
                    failures.append(f"{me} search")
                if i % 50 == 0 and pol.extract_attributes(["user", me, "m"], "k", {}, None, ctx(me)) != {
                    "namespace": "user",
                    "sub": me,
                }:
                    failures.append(f"{me} attributes")
        except BaseException as exc:  # a pyo3 PanicException is a BaseException
            failures.append(f"{me} raised {type(exc).__name__}: {exc}")

    threads = [threading.Thread(target=worker, args=(n,)) for n in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    del pol
    assert failures == []
    assert unraisable == []  # no engine was dropped on a thread other than its own


def test_errors_do_not_keep_engines_alive(monkeypatch):
    # A Rust panic follows if an engine is freed on a thread other than its own, e.g. by the
    # garbage collector collecting a traceback cycle whose frames still hold an engine.
    unraisable: list = []
    monkeypatch.setattr(sys, "unraisablehook", unraisable.append)
    authz = default_bundle()["authz.rego"] + '\nallow if {\n\tinput.key == "boom"\n\tinput.key + 1 > 0\n}\n'
    attributes = 'package memories.attributes\n\nattributes := {"n": count(input.value)} if input.key == "boom"\n'
    pol = compile_bundle({**default_bundle(), "authz.rego": authz, "attributes.rego": attributes})

    def fail_into_a_cycle(fn) -> None:
        try:
            fn()
        except InvalidArgument as exc:
            exc.cycle = exc  # only the garbage collector can free it, on whichever thread runs it

    fail_into_a_cycle(lambda: compile_bundle({**default_bundle(), "authz.rego": "package memories.authz\nallow :=\n"}))
    fail_into_a_cycle(lambda: pol.extract_attributes(["user", "a"], "boom", 5, None, ctx("a")))
    assert pol.allow("read", ["user", "a"], "boom", ctx("a")) is False
    collector = threading.Thread(target=gc.collect)
    collector.start()
    collector.join()
    assert unraisable == []


def test_per_thread_engine_cache_is_bounded():
    bundles = [
        compile_bundle({**default_bundle(), "extra.rego": f"package memories.extra\n\nn := {i}\n"}) for i in range(6)
    ]
    for _ in range(2):
        for pol in bundles:
            assert pol.allow("read", ["user", "alice"], None, ctx("alice")) is True
    assert policy.engines_on_this_thread() <= policy.ENGINES_PER_THREAD


# --- the evaluation budget -----------------------------------------------------------------------

# A million iterations: far past the budget, whatever the machine's speed.
HEAVY = "count([x | some x in numbers.range(1, 1000); some y in numbers.range(1, 1000)])"


def test_a_bundle_over_budget_on_the_smoke_evaluation_is_rejected():
    attributes = f'package memories.attributes\n\nattributes := {{"n": {HEAVY}}}\n'
    with pytest.raises(policy.PolicyBudgetExceeded, match="evaluation budget of 25000"):
        compile_bundle({**default_bundle(), "attributes.rego": attributes})


def test_an_evaluation_over_budget_fails_alone_and_others_are_unaffected():
    # Heavy only on key "boom", so the bundle passes the smoke evaluation.
    authz = default_bundle()["authz.rego"] + f'\nallow if {{\n\tinput.key == "boom"\n\t{HEAVY} > 0\n}}\n'
    attributes = ('package memories.attributes\n\ndefault attributes := {}\n\n'
                  f'attributes := {{"n": n}} if {{\n\tinput.key == "boom"\n\tn := {HEAVY}\n}}\n')
    heavy = compile_bundle({**default_bundle(), "authz.rego": authz, "attributes.rego": attributes})
    other = compile_bundle(default_bundle())
    with pytest.raises(policy.PolicyBudgetExceeded) as info:
        heavy.extract_attributes(["user", "alice"], "boom", {}, None, ctx("alice"))
    assert info.value.details == {"rule": "data.memories.attributes.attributes", "budget_instructions": 25_000}
    with pytest.raises(policy.PolicyBudgetExceeded):  # an error that says why, not a silent deny
        heavy.allow("read", ["user", "bob"], "boom", ctx("alice"))
    assert heavy.allow("read", ["user", "alice"], "fine", ctx("alice")) is True
    assert heavy.extract_attributes(["user", "alice"], "fine", {}, None, ctx("alice")) == {}
    assert other.allow("read", ["user", "alice"], "boom", ctx("alice")) is True


def test_iterating_a_large_input_counts_against_the_budget():
    attributes = 'package memories.attributes\n\nattributes := {"n": count([k | some k, _ in input.value])}\n'
    pol = compile_bundle({**default_bundle(), "attributes.rego": attributes})
    assert pol.extract_attributes(["user", "a"], "k", {f"f{i}": i for i in range(100)}, None, ctx("a")) == {"n": 100}
    with pytest.raises(policy.PolicyBudgetExceeded):
        pol.extract_attributes(["user", "a"], "k", {f"f{i}": i for i in range(50_000)}, None, ctx("a"))


# --- remembered decisions ------------------------------------------------------------------------


def _count_evaluations(monkeypatch) -> list[str]:
    """The rules evaluated from now on, by any bundle (each takes the thread's engine once)."""
    evaluated: list[str] = []
    run = CompiledPolicies._run

    def counted(self, rule: str, input_json: str) -> str:
        evaluated.append(rule)
        return run(self, rule, input_json)

    monkeypatch.setattr(CompiledPolicies, "_run", counted)
    return evaluated


def test_a_repeated_decision_or_scope_is_evaluated_once(monkeypatch):
    evaluated = _count_evaluations(monkeypatch)
    pol = compile_bundle(default_bundle())
    evaluated.clear()  # the smoke evaluation's
    for _ in range(3):
        assert pol.allow("read", ["user", "alice", "m"], "k", ctx("alice")) is True
        assert pol.allow("read", ["user", "bob", "m"], "k", ctx("alice")) is False
        assert pol.inject_search("search", ["user"], {}, ctx("alice")) == (
            ["user", "alice"], {"namespace": "user", "sub": "alice"})
    assert pol.allow("read", ["user", "alice", "m"], "other key", ctx("alice")) is True  # another input
    assert evaluated == ["data.memories.authz.allow"] * 2 + ["data.memories.search.result"] + [
        "data.memories.authz.allow"]


def test_a_remembered_scope_is_a_fresh_copy_each_time(pol):
    prefix, attribute_filter = pol.inject_search("search", ["user"], {}, ctx("carol"))
    prefix.append("changed")
    attribute_filter["sub"] = "mallory"
    assert pol.inject_search("search", ["user"], {}, ctx("carol")) == (
        ["user", "carol"], {"namespace": "user", "sub": "carol"})


def test_writes_are_evaluated_every_time(monkeypatch):
    evaluated = _count_evaluations(monkeypatch)
    pol = compile_bundle(default_bundle())
    evaluated.clear()
    for _ in range(2):
        pol.extract_attributes(["user", "alice"], "k", {"text": "hi"}, None, ctx("alice"))
        pol.violations(["user", "alice"], "k", {"text": "hi"}, None, ctx("alice"))
    assert evaluated == ["data.memories.attributes.attributes", "data.memories.governance.violations"] * 2


def test_a_bundle_that_reads_the_clock_is_evaluated_every_time(monkeypatch):
    evaluated = _count_evaluations(monkeypatch)
    authz = default_bundle()["authz.rego"] + '\nallow if {\n\tinput.operation == "read"\n\ttime.now_ns() < 0\n}\n'
    pol = compile_bundle({**default_bundle(), "authz.rego": authz})
    evaluated.clear()
    for _ in range(3):
        assert pol.allow("read", ["user", "alice"], "k", ctx("alice")) is True
    assert evaluated == ["data.memories.authz.allow"] * 3


def test_failures_are_evaluated_and_fail_every_time():
    authz = (default_bundle()["authz.rego"] + '\nallow if {\n\tinput.key == "boom"\n\tinput.key + 1 > 0\n}\n'
             + f'\nallow if {{\n\tinput.key == "heavy"\n\t{HEAVY} > 0\n}}\n')
    pol = compile_bundle({**default_bundle(), "authz.rego": authz})
    for _ in range(3):
        assert pol.allow("read", ["user", "alice"], "boom", ctx("root", roles=["admin"])) is False
        with pytest.raises(policy.PolicyBudgetExceeded):
            pol.allow("read", ["user", "alice"], "heavy", ctx("root", roles=["admin"]))


def test_an_uploaded_bundle_decides_afresh():
    # What the registry does on an upload: a new compiled bundle, so none of the old decisions.
    builtin = compile_bundle(default_bundle())
    assert builtin.allow("read", ["user", "alice"], "k", ctx("alice")) is True
    authz = "package memories.authz\n\nallow if \"admin\" in input.context.roles\n"
    uploaded = compile_bundle({**default_bundle(), "authz.rego": authz})
    assert uploaded.allow("read", ["user", "alice"], "k", ctx("alice")) is False
    assert builtin.allow("read", ["user", "alice"], "k", ctx("alice")) is True
