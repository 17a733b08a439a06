"""The governance policy (API-AGENT.md "Governance and limits"): the built-in credential check,
what bundles without a governance package get, the evaluation budget, and the 422 it becomes.

Credentials here are built by concatenation, so this file does not itself look like a leak."""

from __future__ import annotations

from typing import Any

import pytest

from memsvc.core import policy
from memsvc.core.errors import InvalidArgument, PolicyViolation
from memsvc.core.models import Caller
from memsvc.core.policy import CompiledPolicies, compile_bundle, default_bundle
from memsvc.service.access import Access
from memsvc.service.tenant_config import PolicyRegistry, SettingsRegistry

AKIA = "AKIA" + "IOSFODNN7EXAMPLE"  # AWS's documented example access key id
ASIA = "ASIA" + "Y34FZKBOKMUTVV7A"
SECRET = "wJalrXUtnFEMI/K7MDENG/" + "bPxRfiCYEXAMPLEKEY"  # AWS's documented example, 40 characters
def pem_header(kind: str = "", block: str = "") -> str:
    """A PEM private-key header, assembled here so that no key-shaped line sits in the repository."""
    return "-----" + "BEGIN " + kind + "PRIVATE" + " KEY" + block + "-----"


PEM_BODY = "\nMIIEowIBAAKCAQEAu1SU1LfVLPHCozMxH2Mo4lgOEePzNm0tRgeLezV6ffAt0gun\n"
GITHUB = "gh" + "p_" + "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8"
SLACK = "xo" + "xb-" + "123456789012-1234567890123-" + "AbCdEfGhIjKlMnOpQrStUvWx"
STRIPE = "sk" + "_live_" + "4eC39HqLyjWDarjtT1zdp7dc"

BUILTIN_POLICY = "no_credentials"


@pytest.fixture(scope="module")
def pol() -> CompiledPolicies:
    return compile_bundle(default_bundle())


def ctx() -> dict:
    return Caller(tenant_id="t1", user_id="alice", roles=("user",)).policy_context()


def violations(pol: CompiledPolicies, value: Any = None, *, attributes: dict | None = None,
               namespace: list[str] | None = None, key: str = "k") -> list[dict[str, str]]:
    return pol.violations(namespace or ["user", "alice", "notes"], key, value if value is not None else {},
                          attributes, ctx())


def kinds(found: list[dict[str, str]]) -> set[str]:
    """What each violation says it found ("value holds an AWS access key id: ..." -> the kind)."""
    assert {v["policy"] for v in found} <= {BUILTIN_POLICY}
    return {v["message"].split(" holds ")[1].split(":")[0] for v in found}


# --- the built-in credential check ---------------------------------------------------------------

CREDENTIALS = [
    ("an AWS access key id", {"text": f"use {AKIA} for the deploy"}),
    ("an AWS access key id", {"text": ASIA}),
    ("an AWS access key id", {"text": f"first line\n{AKIA}\nlast line"}),  # after a newline (`\n` in JSON)
    ("an AWS access key id", {"text": f"tab\t{AKIA}"}),
    ("an AWS access key id", {"text": f"bell\x07{AKIA}"}),  # after a \u0007 escape
    ("an AWS access key id", {"notes": ["ok", {"deep": [f"id={AKIA}"]}]}),
    ("an AWS access key id", {AKIA: "as an object key"}),
    ("an AWS secret access key", {"aws_secret_access_key": SECRET}),
    ("an AWS secret access key", {"SecretAccessKey": SECRET, "AccessKeyId": "redacted"}),  # the CLI's JSON
    ("an AWS secret access key", {"text": f"[default]\naws_secret_access_key = {SECRET}\n"}),
    ("an AWS secret access key", {"text": f"export AWS_SECRET_ACCESS_KEY={SECRET}"}),
    ("an AWS secret access key", {"text": f'secret_access_key: "{SECRET}"'}),
    ("a private key", {"text": pem_header("RSA ") + PEM_BODY}),
    ("a private key", {"text": pem_header() + PEM_BODY}),
    ("a private key", {"text": pem_header("OPENSSH ") + PEM_BODY}),
    ("a private key", {"text": pem_header("ENCRYPTED ") + PEM_BODY}),
    ("a private key", {"text": pem_header("EC ") + PEM_BODY}),
    ("a private key", {"text": pem_header("PGP ", " BLOCK") + PEM_BODY}),
    ("a GitHub token", {"token": GITHUB}),
    ("a GitHub token", {"token": "gh" + "s_" + "x" * 36}),
    ("a GitHub token", {"token": "github" + "_pat_" + "11ABCDEFG0" + "a_b" * 24}),
    ("a Slack token", {"text": f"bot: {SLACK}"}),
    ("a Slack token", {"text": "xo" + "xp-" + "2345678901-2345678901-3456789012-" + "0123456789abcdef" * 2}),
    ("a Stripe secret key", {"text": STRIPE}),
    ("a Stripe secret key", {"text": "rk" + "_live_" + "51H8abcdefghijklmnopqrstuvwxyz"}),
]


@pytest.mark.parametrize("what,value", CREDENTIALS)
def test_each_credential_shape_is_found_in_the_value(pol, what, value):
    found = violations(pol, value)
    assert kinds(found) == {what}
    assert [v["message"].split(" holds ")[0] for v in found] == ["value"]


NEAR_MISSES = [
    "AKIA" + "IOSFODNN7EXAMPL",            # 15 characters after AKIA
    "AKIA" + "IOSFODNN7EXAMPLEX",          # 17: part of a longer word
    "X" + AKIA,                            # glued on the left
    AKIA.lower(),
    "AKIA-" + "IOSFODNN7EXAMPLE",
    "AIDA" + "IOSFODNN7EXAMPLE",           # an IAM user id, not a secret
    "Asia is the largest continent; ASIAN markets opened",
    "-----BEGIN PUBLIC KEY-----" + PEM_BODY,
    "-----BEGIN CERTIFICATE-----" + PEM_BODY,
    "rotate the private key every 90 days",
    "aws_secret_access_key = <redacted>",
    "aws_secret_access_key: ${AWS_SECRET_ACCESS_KEY}",
    "aws_secret_access_key = " + SECRET[:39],
    "aws_secret_access_key = " + SECRET + "Z",
    "the secret is that " + SECRET + " is just 40 characters",  # no key name: could be anything
    "gh" + "p_" + "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r",  # 35
    "gh" + "p_" + "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8s9",  # 38: longer than a token
    "gh" + "x_" + "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8",
    "github" + "_pat_tooshort",
    "xo" + "xb-not-a-token",
    "xo" + "xa-" + "123456789012-1234567890123-abcdefgh",
    "sk" + "_test_" + "4eC39HqLyjWDarjtT1zdp7dc",
    "sk" + "_live_" + "short",
]


@pytest.mark.parametrize("text", NEAR_MISSES)
def test_near_misses_pass(pol, text):
    assert violations(pol, {"text": text}, attributes={"note": text}) == []


def test_ordinary_values_pass(pol):
    value = {"text": "Python uses indentation", "stars": 5, "ok": True, "none": None, "nested": {"l": [1.5, "ü€"]},
             "date": "2026-03-14", "uuid": "0f8fad5b-d9cb-469f-a165-70867728950e", "hash": "a" * 64}
    assert violations(pol, value, attributes={"source": "chat"}) == []


def test_attributes_key_and_namespace_are_searched_too(pol):
    found = violations(pol, {"text": "fine"}, attributes={"creds": AKIA}, key=GITHUB,
                       namespace=["user", "alice", STRIPE])
    assert {v["message"].split(" holds ")[0] for v in found} == {"attributes", "key", "namespace"}
    assert kinds(found) == {"an AWS access key id", "a GitHub token", "a Stripe secret key"}


def test_every_kind_in_one_value_is_named_once(pol):
    value = {"a": AKIA, "b": AKIA, "c": pem_header(), "d": SLACK}
    found = violations(pol, value)
    assert len(found) == 3
    assert kinds(found) == {"an AWS access key id", "a private key", "a Slack token"}


@pytest.mark.parametrize("what,value", CREDENTIALS)
def test_a_violation_never_quotes_the_credential(pol, what, value):
    text = repr(violations(pol, value))
    for secret in (AKIA, ASIA, SECRET, GITHUB, SLACK, STRIPE, PEM_BODY.strip()[:20]):
        assert secret not in text


def test_the_largest_value_is_searched_within_the_budget(pol):
    # 20,000 fields, about 250 KB: iterating them would cost far more than the budget
    value = {f"field{i}": "some ordinary words" for i in range(20_000)}
    assert violations(pol, value) == []
    value["field19999"] = f"hidden {AKIA}"
    assert kinds(violations(pol, value)) == {"an AWS access key id"}


# --- every valid number ---------------------------------------------------------------------------

# What the body parser accepts (docs/api.md, "The API in brief"): any finite double, an integer of up to
# 4,300 digits. regorus itself cannot hold the top of a double's range nor a longer integer.
EXTREME_NUMBERS = [1.7976931348623157e308, -1.7976931348623157e308, 5e-324, -5e-324, 1e-310, -0.0, 1e308,
                   2**63, 2**64 + 1, -(2**63) - 1, 10**308, 10**4299 + 7, -(10**4299) - 7]


@pytest.mark.parametrize("number", EXTREME_NUMBERS, ids=lambda n: repr(n)[:24])
def test_every_valid_number_is_governed(pol, number):
    nested: object = [number]
    for _ in range(30):  # within the API's 32 levels
        nested = [nested, {"n": number}]
    value = {"n": number, "nested": nested, "text": "nothing secret"}
    assert violations(pol, value, attributes={"n": number}, key="k") == []


def test_a_credential_next_to_extreme_numbers_is_still_found(pol):
    value = {"max": 1.7976931348623157e308, "long": 10**4299, "tiny": 5e-324, "text": f"use {AKIA}"}
    assert kinds(violations(pol, value)) == {"an AWS access key id"}


def test_a_policy_sees_a_number_beyond_1e308_as_1e308_with_its_sign():
    source = ('package memories.governance\n\n'
              'violations contains {"policy": "huge", "message": "m"} if input.value.n >= 1e308\n'
              'violations contains {"policy": "tiny", "message": "m"} if input.value.n <= -1e308\n'
              'violations contains {"policy": "number", "message": "m"} if not is_number(input.value.n)\n')
    compiled = compile_bundle({**THREE_FILES, "governance.rego": source})
    for number, policies in [(1.7976931348623157e308, ["huge"]), (10**4299, ["huge"]), (-(10**4299), ["tiny"]),
                             (-1.7976931348623157e308, ["tiny"]), (9.9e307, []), (5e-324, [])]:
        assert [v["policy"] for v in compiled.violations(["user", "alice"], "k", {"n": number}, None, ctx())] \
            == policies, number


# --- the 422 -------------------------------------------------------------------------------------


class DictConfigStore:
    """An in-memory TenantConfigStore."""

    def __init__(self) -> None:
        self.docs: dict[tuple[str, str], dict] = {}

    def get_config(self, tenant: str, name: str) -> dict | None:
        return self.docs.get((tenant, name))

    def put_config(self, tenant: str, name: str, doc: dict) -> None:
        self.docs[(tenant, name)] = doc


def access(store: DictConfigStore | None = None) -> Access:
    store = store or DictConfigStore()
    return Access(PolicyRegistry(store), SettingsRegistry(store))


def test_govern_raises_a_422_that_names_the_policy_not_the_value():
    caller = Caller(tenant_id="t1", user_id="alice")
    with pytest.raises(PolicyViolation) as info:
        access().govern(caller, ("user", "alice"), "k", {"a": AKIA, "b": SLACK}, {"source": "chat"})
    err = info.value
    assert (err.status, err.code, err.retryable) == (422, "POLICY_VIOLATION", False)
    assert err.details["policies"] == [BUILTIN_POLICY]
    assert [v["policy"] for v in err.details["violations"]] == [BUILTIN_POLICY] * 2
    assert BUILTIN_POLICY in err.message and "AWS access key id" in err.message and "Slack token" in err.message
    assert AKIA not in repr(err.to_body()) and SLACK not in repr(err.to_body())


def test_govern_lets_a_clean_value_through():
    access().govern(Caller(tenant_id="t1", user_id="alice"), ("user", "alice"), "k", {"text": "hi"}, None)


# --- bundles -------------------------------------------------------------------------------------

THREE_FILES = {name: source for name, source in default_bundle().items() if name != "governance.rego"}


def test_a_bundle_without_a_governance_package_gets_the_built_in_one(pol):
    compiled = compile_bundle(THREE_FILES)
    assert compiled.bundle.policies == default_bundle()
    assert compiled.bundle.version == "builtin"
    assert kinds(violations(compiled, {"t": AKIA})) == {"an AWS access key id"}
    custom_authz = {**THREE_FILES, "authz.rego": THREE_FILES["authz.rego"] + "\n# a comment\n"}
    compiled = compile_bundle(custom_authz)
    assert compiled.bundle.policies["governance.rego"] == default_bundle()["governance.rego"]
    assert compiled.bundle.version not in ("builtin", pol.bundle.version)
    assert kinds(violations(compiled, {"t": AKIA})) == {"an AWS access key id"}


def test_a_stored_bundle_from_before_governance_is_governed_and_keeps_its_version():
    store = DictConfigStore()
    store.put_config("t1", "policies", {"version": "0123456789abcdef", "policies": THREE_FILES})
    compiled = PolicyRegistry(store).get("t1")
    assert compiled.bundle.version == "0123456789abcdef"
    assert "governance.rego" in compiled.bundle.policies
    with pytest.raises(PolicyViolation):
        access(store).govern(Caller(tenant_id="t1", user_id="alice"), ("user", "alice"), "k", {"t": AKIA}, None)


def test_a_bundle_may_ship_its_own_governance_package_instead():
    rules = ('package memories.governance\n\n'
             'violations contains {"policy": "no_confidential", "message": "value is labelled confidential"} if {\n'
             '\tinput.value.label == "confidential"\n}\n')
    compiled = compile_bundle({**THREE_FILES, "rules.rego": rules})
    assert "governance.rego" not in compiled.bundle.policies
    assert violations(compiled, {"t": AKIA}) == []  # the built-in check is replaced, not added to
    assert violations(compiled, {"label": "confidential"}) == [
        {"policy": "no_confidential", "message": "value is labelled confidential"}]


def test_an_empty_violations_set_turns_governance_off_and_a_missing_rule_is_refused():
    compiled = compile_bundle({**THREE_FILES, "governance.rego": "package memories.governance\n\nviolations := set()\n"})
    assert violations(compiled, {"t": AKIA}) == []
    with pytest.raises(InvalidArgument, match="governance policy failed"):  # as for the other three policies
        compile_bundle({**THREE_FILES, "governance.rego": "package memories.governance\n\nenabled := false\n"})


def test_a_governance_file_holding_another_package_is_refused():
    with pytest.raises(InvalidArgument, match="governance.rego must hold package memories.governance") as info:
        compile_bundle({**THREE_FILES, "governance.rego": "package memories.extra\n\nn := 1\n"})
    assert info.value.details == {"policy_file": "governance.rego"}


@pytest.mark.parametrize("expr", ['{"just a string"}', '{{"policy": "p"}}', '{{"policy": 1, "message": "m"}}',
                                  '"text"', "[1]"])
def test_violations_of_the_wrong_shape_are_refused_at_upload(expr):
    with pytest.raises(InvalidArgument, match="governance policy must return"):
        compile_bundle({**THREE_FILES, "governance.rego": f"package memories.governance\n\nviolations := {expr}\n"})


def test_a_wrong_shape_at_run_time_is_a_400_that_does_not_echo_the_value():
    source = ('package memories.governance\n\n'
              'violations := {input.value.secret} if input.key == "bad"\n')
    compiled = compile_bundle({**THREE_FILES, "governance.rego": source})
    with pytest.raises(InvalidArgument, match="governance policy must return") as info:
        compiled.violations(["user", "alice"], "bad", {"secret": "hunter2"}, None, ctx())
    assert "hunter2" not in repr(info.value.to_body())


def test_only_policy_and_message_of_a_violation_are_reported():
    source = ('package memories.governance\n\n'
              'violations contains {"policy": "p", "message": "m", "found": input.value.secret} if input.value.secret\n')
    compiled = compile_bundle({**THREE_FILES, "governance.rego": source})
    assert compiled.violations(["user", "alice"], "k", {"secret": "hunter2"}, None, ctx()) == [
        {"policy": "p", "message": "m"}]


def test_a_governance_policy_that_fails_refuses_the_write():
    source = ('package memories.governance\n\n'
              'violations contains {"policy": "p", "message": "m"} if input.value.n + 1 > 0\n')
    compiled = compile_bundle({**THREE_FILES, "governance.rego": source})
    assert compiled.violations(["user", "alice"], "k", {"n": 1}, None, ctx()) == [{"policy": "p", "message": "m"}]
    with pytest.raises(InvalidArgument) as info:
        compiled.violations(["user", "alice"], "k", {"n": "hunter2"}, None, ctx())
    assert info.value.message == ("governance policy failed: a built-in function given an argument of the wrong "
                                  "type, in governance.rego at line 3, column 67")
    assert info.value.details == {"policy_file": "governance.rego", "line": 3, "column": 67}
    assert "hunter2" not in repr(info.value.to_body())


# --- the evaluation budget -----------------------------------------------------------------------

HEAVY = "count([x | some x in numbers.range(1, 1000); some y in numbers.range(1, 1000)])"


def test_a_governance_policy_over_budget_on_the_smoke_evaluation_is_refused():
    source = f'package memories.governance\n\nviolations contains {{"policy": "p", "message": "m"}} if {HEAVY} < 0\n'
    with pytest.raises(policy.PolicyBudgetExceeded, match="evaluation budget of 25000") as info:
        compile_bundle({**THREE_FILES, "governance.rego": source})
    assert info.value.details["rule"] == "data.memories.governance.violations"


def test_a_runaway_governance_evaluation_fails_that_write_alone(pol):
    source = ('package memories.governance\n\n'
              f'violations contains {{"policy": "p", "message": "m"}} if {{\n\tinput.key == "boom"\n\t{HEAVY} < 0\n}}\n')
    heavy = compile_bundle({**THREE_FILES, "governance.rego": source})
    with pytest.raises(policy.PolicyBudgetExceeded) as info:
        heavy.violations(["user", "alice"], "boom", {}, None, ctx())
    assert info.value.details == {"rule": "data.memories.governance.violations", "budget_instructions": 25_000}
    assert heavy.violations(["user", "alice"], "fine", {}, None, ctx()) == []
    assert pol.violations(["user", "alice"], "boom", {}, None, ctx()) == []  # another tenant's bundle

