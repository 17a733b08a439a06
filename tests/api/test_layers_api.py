"""Layer namespaces and governance over HTTP, on both live backends: the store routes with
["project", P], ["team", T], ["org", O] and ["company"] namespaces, tokens carrying the
`projects` / `teams` / `orgs` claims in each form, the 422 of the governance policy, and tenant
bundles with and without their own governance package."""

from __future__ import annotations

import httpx
import pytest

from tests.api.helpers import (
    assert_error,
    delete,
    get,
    namespaces,
    namespaces_ok,
    put,
    put_ok,
    search,
    search_ok,
    signed_token,
    unique_tenant,
)

pytestmark = pytest.mark.slow

AKIA = "AKIA" + "IOSFODNN7EXAMPLE"  # AWS's documented example access key id
HEAVY = "count([x | some x in numbers.range(1, 1000); some y in numbers.range(1, 1000)])"


@pytest.fixture
def as_claims(live_server, make_client):
    """`as_claims(sub, tenant, **claims)` -> a client whose token carries exactly these claims."""

    def make(sub: str, tenant: str, **claims) -> httpx.Client:
        client = make_client(None)
        client.headers["Authorization"] = "Bearer " + signed_token(live_server, sub=sub, tenant_id=tenant, **claims)
        return client

    return make


def events(client: httpx.Client, prefix: list[str]) -> httpx.Response:
    return client.get("/v1/memories/events", params=[("ns", s) for s in prefix])


@pytest.mark.parametrize("layer,claim", [("project", "projects"), ("team", "teams"), ("org", "orgs")])
def test_members_share_a_layer_and_everyone_else_is_refused(as_claims, tenant, uid, layer, claim):
    x = "x" + uid
    ns = [layer, x, "notes"]
    alice = as_claims("alice-" + uid, tenant, **{claim: [x]})
    carol = as_claims("carol-" + uid, tenant, **{claim: f"[other {x}]"})  # API Gateway's array form
    dave = as_claims("dave-" + uid, tenant, **{claim: x})                  # one plain id
    written = put_ok(alice, ns, "plan", {"text": "ship the release on friday"}, sync_index=True)
    for member in (carol, dave):
        assert get(member, ns, "plan").json()["value"] == {"text": "ship the release on friday"}
        assert [i["id"] for i in search_ok(member, [layer, x], query="release friday")] == [written["id"]]
        assert namespaces_ok(member, prefix=[layer, x]) == [ns]
        assert events(member, [layer, x]).status_code == 200
    put_ok(carol, ns, "plan", {"text": "ship on monday"})

    outsiders = [as_claims("bob-" + uid, tenant), as_claims("erin-" + uid, tenant, **{claim: [x + "0", x[:-1]]}),
                 as_claims("frank-" + uid, tenant, **{c: [x] for c in ("projects", "teams", "orgs") if c != claim})]
    for outsider in outsiders:
        assert_error(get(outsider, ns, "plan"), 403, "FORBIDDEN")
        assert_error(put(outsider, ns, "plan", {"text": "mine now"}), 403, "FORBIDDEN")
        assert_error(delete(outsider, ns, "plan"), 403, "FORBIDDEN")
        assert_error(search(outsider, [layer, x]), 403, "FORBIDDEN")
        assert_error(namespaces(outsider, prefix=[layer, x]), 403, "FORBIDDEN")
        assert_error(events(outsider, [layer, x]), 403, "FORBIDDEN")
    assert get(alice, ns, "plan").json()["value"] == {"text": "ship on monday"}
    assert delete(dave, ns, "plan").status_code == 204
    assert_error(get(alice, ns, "plan"), 404, "NOT_FOUND")


def test_company_is_read_by_everyone_and_written_by_admins(as_claims, admin, tenant, uid):
    ns = ["company", "handbook-" + uid]
    written = put_ok(admin, ns, "holidays", {"text": "the office closes in august"}, sync_index=True)
    bob = as_claims("bob-" + uid, tenant)
    assert get(bob, ns, "holidays").json()["id"] == written["id"]
    assert [i["id"] for i in search_ok(bob, ns, query="office closes august")] == [written["id"]]
    assert_error(put(bob, ns, "holidays", {"text": "closed all year"}), 403, "FORBIDDEN")
    assert_error(delete(bob, ns, "holidays"), 403, "FORBIDDEN")
    assert get(bob, ns, "holidays").json()["value"] == {"text": "the office closes in august"}


def test_the_empty_prefix_stays_the_callers_own_subtree(as_claims, admin, tenant, uid):
    x = "x" + uid
    put_ok(admin, ["project", x], "shared", {"text": "project note"})
    put_ok(admin, ["company"], "shared-" + uid, {"text": "company note"})
    alice = as_claims("alice-" + uid, tenant, projects=[x])
    put_ok(alice, ["user", "alice-" + uid, "memories"], "mine", {"text": "my note"})
    assert [i["key"] for i in search_ok(alice, [])] == ["mine"]
    assert namespaces_ok(alice) == [["user", "alice-" + uid, "memories"]]


def test_another_tenant_with_the_same_claims_sees_nothing(as_claims, tenant, uid):
    x = "x" + uid
    ns = ["project", x]
    put_ok(as_claims("alice-" + uid, tenant, projects=[x]), ns, "k", {"text": "acme roadmap"}, sync_index=True)
    twin = as_claims("alice-" + uid, unique_tenant(), projects=[x])  # same user, same claim, other tenant
    assert_error(get(twin, ns, "k"), 404, "NOT_FOUND")
    assert search_ok(twin, ns) == []
    assert search_ok(twin, ns, query="acme roadmap") == []
    assert namespaces_ok(twin, prefix=ns) == []


# -- governance ----------------------------------------------------------------------------------


def test_a_value_carrying_a_credential_is_a_422_that_writes_nothing(me, home):
    ns = [*home, "ops"]
    r = put(me, ns, "deploy", {"text": "use these", "keys": {"id": AKIA}})
    err = assert_error(r, 422, "POLICY_VIOLATION")
    assert err["retryable"] is False
    assert err["details"]["policies"] == ["no_credentials"]
    assert err["details"]["violations"] == [{
        "policy": "no_credentials",
        "message": "value holds an AWS access key id: store where the secret is kept, never the secret itself"}]
    assert "no_credentials" in err["message"] and "AWS access key id" in err["message"]
    assert AKIA not in r.text
    assert_error(get(me, ns, "deploy"), 404, "NOT_FOUND")
    put_ok(me, ns, "deploy", {"text": "use the ci role"})


def test_a_bundle_without_governance_gets_the_built_in_one(admin, me, home):
    bundle = admin.get("/admin/v1/memories/policies").json()
    assert bundle["version"] == "builtin" and "governance.rego" in bundle["policies"]
    old = {name: src for name, src in bundle["policies"].items() if name != "governance.rego"}
    old["authz.rego"] += "\n# uploaded before governance existed\n"
    r = admin.put("/admin/v1/memories/policies", json={"policies": old})
    assert r.status_code == 200, r.text
    assert r.json()["policies"] == {**old, "governance.rego": bundle["policies"]["governance.rego"]}
    assert_error(put(me, home, "k", {"text": AKIA}), 422, "POLICY_VIOLATION")


def test_a_bundle_may_replace_the_governance_policy(admin, me, home):
    policies = dict(admin.get("/admin/v1/memories/policies").json()["policies"])
    policies["governance.rego"] = (
        'package memories.governance\n\n'
        'violations contains {"policy": "no_confidential", "message": "the value is labelled confidential"} if {\n'
        '\tinput.value.label == "confidential"\n}\n')
    assert admin.put("/admin/v1/memories/policies", json={"policies": policies}).status_code == 200
    err = assert_error(put(me, home, "k", {"label": "confidential"}), 422, "POLICY_VIOLATION")
    assert err["details"]["policies"] == ["no_confidential"]
    put_ok(me, home, "k", {"text": AKIA})  # the built-in check is replaced, as the tenant chose


def test_a_governance_policy_over_budget_is_refused_or_fails_only_its_request(make_client, uid):
    bad, good = unique_tenant(), unique_tenant()
    bad_admin = make_client("root", tenant=bad, roles=["admin"])
    policies = dict(bad_admin.get("/admin/v1/memories/policies").json()["policies"])
    always = f'package memories.governance\n\nviolations contains {{"policy": "p", "message": "m"}} if {HEAVY} < 0\n'
    r = bad_admin.put("/admin/v1/memories/policies", json={"policies": {**policies, "governance.rego": always}})
    err = assert_error(r, 400, "INVALID_ARGUMENT")
    assert err["details"]["rule"] == "data.memories.governance.violations"
    on_boom = ('package memories.governance\n\n'
               'violations contains {"policy": "p", "message": "m"} if {\n'
               f'\tinput.key == "boom"\n\t{HEAVY} < 0\n}}\n')
    r = bad_admin.put("/admin/v1/memories/policies", json={"policies": {**policies, "governance.rego": on_boom}})
    assert r.status_code == 200, r.text
    ns = ["user", uid]
    mine, theirs = make_client(uid, tenant=bad), make_client(uid, tenant=good)
    err = assert_error(put(mine, ns, "boom", {"x": 1}), 400, "INVALID_ARGUMENT")
    assert "budget" in err["message"] and err["details"]["budget_instructions"] == 25_000
    assert_error(get(mine, ns, "boom"), 404, "NOT_FOUND")
    put_ok(mine, ns, "fine", {"x": 2})
    put_ok(theirs, ns, "boom", {"x": 3})
