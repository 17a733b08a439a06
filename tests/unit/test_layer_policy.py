"""The built-in policies for the shared layers (API-AGENT.md "Layers"): project, team and org
namespaces for the members the token's `projects`, `teams` and `orgs` claims name; the company
layer read by everyone and written by admin and service. Claims go through `Identity`, as in a
request, so every form a token can carry them in is covered."""

from __future__ import annotations

import pytest

from memsvc.api.identity import Identity, parse_ids
from memsvc.core.policy import CompiledPolicies, compile_bundle, default_bundle

USER_OPERATIONS = ["read", "write", "delete", "search", "list", "events"]
READ_OPERATIONS = ["read", "search", "list", "events"]
SHARED = [("project", "projects"), ("team", "teams"), ("org", "orgs")]


@pytest.fixture(scope="module")
def pol() -> CompiledPolicies:
    return compile_bundle(default_bundle())


def ctx(sub: str = "alice", **claims) -> dict:
    """The policy context of a JWT caller whose token holds these claims."""
    event = {"requestContext": {"authorizer": {"jwt": {"claims": {"sub": sub, "tenant_id": "t1", **claims}}}}}
    return Identity()(event).policy_context()


# --- the claims, as identity reads them ----------------------------------------------------------


@pytest.mark.parametrize("raw,ids", [
    (["p1", "p2"], ["p1", "p2"]),
    (["my project"], ["my project"]),       # a list element is one id, whatever it holds
    (["p1", 5, None, ""], ["p1"]),          # only non-empty strings are ids
    ("[p1 p2]", ["p1", "p2"]),              # API Gateway's array form: split on whitespace
    ("[p1]", ["p1"]),
    ("[]", []),
    ("p1", ["p1"]),                         # one plain id
    ("p1 p2", ["p1 p2"]),                   # ... never split: a single-valued claim holds one id
    ("", []), (None, []), (7, []), ({"p1": True}, []),
])
def test_parse_ids(raw, ids):
    assert parse_ids(raw) == ids


def test_identity_puts_the_membership_claims_as_lists_and_leaves_absent_ones_absent():
    claims = ctx(projects="[p1 p2]", teams="t1", orgs=["o1"])["jwt_claims"]
    assert (claims["projects"], claims["teams"], claims["orgs"]) == (["p1", "p2"], ["t1"], ["o1"])
    assert not {"projects", "teams", "orgs"} & set(ctx()["jwt_claims"])


# --- project, team and org ---------------------------------------------------------------------


@pytest.mark.parametrize("layer,claim", SHARED)
@pytest.mark.parametrize("form", [["x1", "x2"], "[x1 x2]"], ids=["list", "api-gateway"])
@pytest.mark.parametrize("operation", USER_OPERATIONS)
def test_a_member_may_do_every_user_operation_in_the_layer(pol, layer, claim, form, operation):
    context = ctx(**{claim: form})
    for namespace in ([layer, "x1"], [layer, "x2", "notes"], [layer, "x1", "a", "b"]):
        assert pol.allow(operation, namespace, "k", context) is True


@pytest.mark.parametrize("layer,claim", SHARED)
def test_a_single_plain_string_claim_is_one_id(pol, layer, claim):
    assert pol.allow("write", [layer, "x1"], "k", ctx(**{claim: "x1"})) is True
    assert pol.allow("write", [layer, "x1"], "k", ctx(**{claim: "x1 x2"})) is False


@pytest.mark.parametrize("layer,claim", SHARED)
@pytest.mark.parametrize("operation", USER_OPERATIONS)
def test_a_non_member_is_denied(pol, layer, claim, operation):
    assert pol.allow(operation, [layer, "x1"], "k", ctx()) is False                       # no claim
    assert pol.allow(operation, [layer, "x1"], "k", ctx(**{claim: ["x2"]})) is False      # another id
    assert pol.allow(operation, [layer, "x1"], "k", ctx(**{claim: []})) is False          # an empty list


@pytest.mark.parametrize("layer,claim", SHARED)
def test_ids_match_exactly_never_by_prefix(pol, layer, claim):
    assert pol.allow("read", [layer, "p10"], "k", ctx(**{claim: ["p1"]})) is False
    assert pol.allow("read", [layer, "p1"], "k", ctx(**{claim: ["p10"]})) is False
    assert pol.allow("read", [layer, "p1"], "k", ctx(**{claim: "[p10 xp1]"})) is False
    assert pol.allow("read", [layer, "[p1"], "k", ctx(**{claim: "[p1 p2]"})) is False


@pytest.mark.parametrize("layer,claim", SHARED)
def test_a_claim_grants_its_own_layer_only(pol, layer, claim):
    others = [other for other, _ in SHARED if other != layer]
    context = ctx(**{claim: ["x1"]})
    for other in others:
        assert pol.allow("read", [other, "x1"], "k", context) is False
    assert pol.allow("read", ["user", "x1"], "k", context) is False
    assert pol.allow("read", ["company"], "k", context) is True  # everyone's, claim or not


@pytest.mark.parametrize("layer,claim", SHARED)
def test_the_layer_root_and_the_admin_operation_stay_denied_to_members(pol, layer, claim):
    context = ctx(**{claim: ["x1"]})
    for operation in USER_OPERATIONS:
        assert pol.allow(operation, [layer], None, context) is False
    assert pol.allow("admin", [layer, "x1"], None, context) is False


def test_membership_counts_only_from_the_tokens_claims(pol):
    context = {**ctx(), "projects": ["x1"]}  # not under jwt_claims: not a claim
    assert pol.allow("read", ["project", "x1"], "k", context) is False


def test_a_claim_that_reached_the_policy_unparsed_is_a_deny(pol):
    context = ctx()
    context["jwt_claims"] = {**context["jwt_claims"], "projects": "x1"}  # a string, not Identity's list
    assert pol.allow("read", ["project", "x1"], "k", context) is False


@pytest.mark.parametrize("role", ["admin", "service"])
@pytest.mark.parametrize("layer", ["project", "team", "org", "company"])
def test_admin_and_service_reach_every_layer_without_claims(pol, role, layer):
    for operation in USER_OPERATIONS:
        assert pol.allow(operation, [layer, "x1"], "k", ctx("root", roles=[role])) is True


# --- company -------------------------------------------------------------------------------------


@pytest.mark.parametrize("namespace", [["company"], ["company", "handbook"], ["company", "a", "b"]])
def test_everyone_reads_the_company_layer(pol, namespace):
    for operation in READ_OPERATIONS:
        assert pol.allow(operation, namespace, "k", ctx()) is True


@pytest.mark.parametrize("namespace", [["company"], ["company", "handbook"]])
def test_only_admin_and_service_write_or_delete_the_company_layer(pol, namespace):
    for operation in ("write", "delete"):
        assert pol.allow(operation, namespace, "k", ctx(projects=["company"])) is False
        assert pol.allow(operation, namespace, "k", ctx("root", roles=["admin"])) is True
        assert pol.allow(operation, namespace, "k", ctx("svc", roles=["service"])) is True


def test_only_the_company_segment_itself_is_the_company_layer(pol):
    for namespace in (["companyx"], ["Company"], ["org", "company"], ["user", "bob", "company"]):
        assert pol.allow("read", namespace, "k", ctx()) is False


# --- search filter injection ----------------------------------------------------------------------


@pytest.mark.parametrize("layer,claim", SHARED)
def test_search_inside_a_shared_layer_keeps_the_prefix_and_filters_on_its_attributes(pol, layer, claim):
    context = ctx(**{claim: ["x1"]})
    for requested in ([layer, "x1"], [layer, "x1", "notes"]):
        for operation in ("search", "list", "events"):
            prefix, attribute_filter = pol.inject_search(operation, requested, {}, context)
            assert prefix == requested
            # the filter is exactly what the attribute policy extracts for a write there
            assert attribute_filter == pol.extract_attributes(requested, "k", {}, None, context)
            assert pol.allow(operation, prefix, None, context) is True
            assert pol.allow(operation, prefix, None, ctx()) is False  # a non-member is refused, not narrowed


def test_search_in_the_company_layer_is_kept_and_filtered_to_it(pol):
    for requested in (["company"], ["company", "handbook"]):
        prefix, attribute_filter = pol.inject_search("search", requested, {}, ctx())
        assert prefix == requested
        assert attribute_filter == {"namespace": "company"}
        assert pol.allow("search", prefix, None, ctx()) is True


@pytest.mark.parametrize("requested", [[], ["user"]])
def test_search_of_an_ancestor_stays_narrowed_to_the_own_subtree_even_for_members(pol, requested):
    context = ctx(projects=["x1"], teams=["x1"], orgs=["x1"])
    assert pol.inject_search("search", requested, {}, context) == (
        ["user", "alice"], {"namespace": "user", "sub": "alice"})


@pytest.mark.parametrize("layer,claim", SHARED)
def test_search_of_a_layer_root_is_left_for_authz_to_deny(pol, layer, claim):
    context = ctx(**{claim: ["x1"]})
    prefix, attribute_filter = pol.inject_search("search", [layer], {}, context)
    assert (prefix, attribute_filter) == ([layer], {"namespace": "user", "sub": "alice"})
    assert pol.allow("search", prefix, None, context) is False
