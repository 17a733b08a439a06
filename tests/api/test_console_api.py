"""The API the console uses (issue 27), over HTTP on both live servers: `GET /v1/identity`,
namespace counts, recall's `explain` and a dry run of a policy bundle."""

from __future__ import annotations

import httpx
import pytest

from tests.api.helpers import assert_error, put, signed_token, unique_tenant
from tests.conftest import shared_ssl_context


def bearer(server, token: str) -> httpx.Client:
    return httpx.Client(base_url=server.url, headers={"Authorization": f"Bearer {token}"}, timeout=30.0,
                        verify=shared_ssl_context())


def test_identity_repeats_the_tokens_claims(live_server):
    tenant = unique_tenant()
    token = signed_token(live_server, sub="ida", tenant_id=tenant, roles=["editor", "admin"], projects=["p1"],
                         favourite="tea", level=3)
    with bearer(live_server, token) as ida:
        r = ida.get("/v1/identity")
    assert r.status_code == 200, r.text
    me = r.json()
    assert {k: me[k] for k in ("tenant_id", "user_id", "roles", "auth")} == {
        "tenant_id": tenant, "user_id": "ida", "roles": ["editor", "admin"], "auth": "jwt"}
    claims = me["claims"]
    # As the authorizer passes them on: scalars as strings, every claim the token has.
    assert (claims["sub"], claims["tenant_id"], claims["favourite"], claims["level"]) == ("ida", tenant, "tea", "3")
    assert claims["projects"] == ["p1"] and {"iss", "aud", "iat", "exp"} <= claims.keys()


def test_each_tenants_token_sees_its_own_identity(make_client):
    first, second = unique_tenant(), unique_tenant()
    a = make_client("same-sub", tenant=first).get("/v1/identity").json()
    b = make_client("same-sub", tenant=second).get("/v1/identity").json()
    assert (a["tenant_id"], b["tenant_id"]) == (first, second)
    assert a["user_id"] == b["user_id"] == "same-sub" and a["roles"] == b["roles"] == []


def test_identity_needs_a_caller(make_client):
    assert_error(make_client(None).get("/v1/identity"), 401, "UNAUTHORIZED")


def test_namespace_counts_over_http(me, make_client, uid, tenant):
    home = ["user", uid]
    for key in ("1", "2"):
        assert put(me, home + ["a"], key, {"text": key}).status_code == 200
    assert put(me, home + ["a", "b"], "3", {"text": "3"}).status_code == 200
    assert put(make_client("other", tenant=tenant), ["user", "other", "a"], "x", {"text": "x"}).status_code == 200
    prefix = [("prefix", s) for s in home]
    counted = me.get("/v1/memories/namespaces", params=prefix + [("counts", "true")])
    assert counted.status_code == 200, counted.text
    assert counted.json() == {"namespaces": [home + ["a"], home + ["a", "b"]], "counts": [3, 1], "count_cap": 1000}
    whole = me.get("/v1/memories/namespaces", params=prefix + [("max_depth", "2"), ("counts", "true")]).json()
    assert whole == {"namespaces": [home], "counts": [3], "count_cap": 1000}
    assert me.get("/v1/memories/namespaces", params=prefix).json() == {"namespaces": [home + ["a"], home + ["a", "b"]]}
    big_page = me.get("/v1/memories/namespaces", params=prefix + [("counts", "true"), ("limit", "1000")]).json()
    assert (big_page["counts"], big_page["count_cap"]) == ([3, 1], 100)
    assert_error(me.get("/v1/memories/namespaces", params=prefix + [("counts", "yes")]), 400, "INVALID_ARGUMENT")


def test_recall_explains_when_asked_and_only_then(me, uid):
    home = ["user", uid]
    for key, text in (("tea", "green tea every morning"), ("paint", "green paint dries slowly")):
        assert put(me, home + ["notes"], key, {"text": text}, sync_index=True).status_code == 200
    body = {"query": "green tea in the morning", "namespace_prefix": home, "min_score": 0, "limit": 1}
    plain = me.post("/v1/memories/recall", json=body)
    explained = me.post("/v1/memories/recall", json={**body, "explain": True})
    assert plain.status_code == explained.status_code == 200, explained.text
    assert "cut" not in plain.json()["metadata"] and all("explain" not in m for m in plain.json()["memories"])
    memory, = explained.json()["memories"]
    e = memory["explain"]
    assert set(e) == {"keyword", "semantic", "fused", "match", "importance", "recency", "pinned", "weights",
                      "relevance"}
    parts = sum(e["weights"][p] * e[p] for p in ("match", "importance", "recency", "pinned"))
    assert abs(parts - e["relevance"]) < 1e-5 and e["relevance"] == memory["relevance"]
    cut, = explained.json()["metadata"]["cut"]
    assert (cut["key"], cut["namespace"]) == ("paint", home + ["notes"])
    # Past limit, unless the tenant's relative cut (a minimum score) left it out first.
    assert cut["reason"] in ("over_limit", "below_min_score") and cut["relevance"] <= memory["relevance"]
    without = {k: v for k, v in memory.items() if k != "explain"}
    assert without == plain.json()["memories"][0]


def test_a_policy_dry_run_checks_and_stores_nothing(admin, me):
    before = admin.get("/admin/v1/memories/policies").json()
    broken = {**before["policies"], "authz.rego": "package memories.authz\n\nallow if {\n"}
    r = admin.put("/admin/v1/memories/policies", params={"dry_run": "true"}, json={"policies": broken})
    err = assert_error(r, 400, "INVALID_ARGUMENT")
    assert err["details"]["policy_file"] == "authz.rego" and {"line", "column"} <= err["details"].keys()
    assert admin.get("/admin/v1/memories/policies").json() == before

    only_admins = {**before["policies"], "authz.rego": 'package memories.authz\n\nallow if "admin" in '
                                                       'input.context.roles\n'}
    r = admin.put("/admin/v1/memories/policies", params={"dry_run": "true"}, json={"policies": only_admins})
    assert (r.status_code, r.json()) == (200, {"valid": True})
    assert admin.get("/admin/v1/memories/policies").json() == before
    locked_out = {**before["policies"], "authz.rego": "package memories.authz\n\nallow := false\n"}
    err = assert_error(admin.put("/admin/v1/memories/policies", params={"dry_run": "true"},
                                 json={"policies": locked_out}), 400, "INVALID_ARGUMENT")
    assert err["details"] == {"field": "policies"}
    assert_error(me.put("/admin/v1/memories/policies", params={"dry_run": "true"}, json={"policies": only_admins}),
                 403, "FORBIDDEN")
    assert admin.get("/admin/v1/memories/policies").json() == before


def test_the_python_client_speaks_the_console_routes(live_server, uid):
    from memsvc_client import InvalidArgumentError, MemsvcClient, PreconditionFailedError

    tenant = unique_tenant()
    ns = ["user", uid, "client"]
    with MemsvcClient(live_server.url, live_server.token(uid, tenant=tenant)) as me, \
            MemsvcClient(live_server.url, live_server.token("root", tenant=tenant, roles=["admin"])) as admin:
        assert (me.identity()["user_id"], me.identity()["tenant_id"]) == (uid, tenant)
        me.put(ns, "tea", {"text": "green tea every morning"}, sync_index=True)
        assert me.list_namespaces(prefix=ns, counts=True) == {"namespaces": [ns], "counts": [1], "count_cap": 1000}
        assert "counts" not in me.list_namespaces(prefix=ns)
        bundle = admin.get_policies()
        assert admin.put_policies(bundle["policies"], dry_run=True) == {"valid": True}
        with pytest.raises(InvalidArgumentError) as refused:
            admin.put_policies({**bundle["policies"], "authz.rego": "package memories.authz\n\nallow if {\n"},
                               dry_run=True)
        assert refused.value.details["policy_file"] == "authz.rego"
        assert admin.get_policies() == bundle
        edited = {**bundle["policies"], "authz.rego": bundle["policies"]["authz.rego"] + "\n# edited\n"}
        landed = admin.put_policies(edited, replacing=bundle["version"])
        with pytest.raises(PreconditionFailedError) as stale:
            admin.put_policies(bundle["policies"], replacing=bundle["version"])
        assert stale.value.details == {"expected_version": bundle["version"], "current_version": landed["version"]}
        assert admin.get_policies() == landed
        recalled = me.recall("green tea", namespace_prefix=ns, min_score=0, explain=True)
        assert recalled["memories"][0]["explain"]["relevance"] == recalled["memories"][0]["relevance"]
        assert recalled["metadata"]["cut"] == []
