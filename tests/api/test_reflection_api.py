"""Reflection's routes over HTTP, on `memsvc serve` and on the AWS backend (moto): the profile,
restore and the admin trigger, their error envelopes, and the walls between users and tenants."""

from __future__ import annotations

from tests.api.helpers import assert_error, ns_query


def test_the_profile_is_the_callers_own(me, uid, make_client, tenant):
    r = me.post("/v1/memories/remember", json={"content": "The user prefers window seats on flights",
                                               "type": "preference", "importance": 0.9})
    assert r.status_code == 200, r.text
    got = me.get("/v1/memory/profile")
    assert got.status_code == 200, got.text
    body = got.json()
    assert set(body) == {"user_id", "built_at", "items", "token_count"} and body["user_id"] == uid
    assert [i["content"] for i in body["items"]] == ["The user prefers window seats on flights"]
    assert me.get("/v1/memory/profile", params={"token_budget": 1}).json()["items"] == []
    assert_error(me.get("/v1/memory/profile", params={"token_budget": 0}), 400, "INVALID_ARGUMENT")
    # There is no user parameter (query parameters a route does not declare are ignored): one's own.
    # Another user's profile cannot be asked for: the parameter is refused, not ignored.
    assert_error(me.get("/v1/memory/profile", params={"user_id": "someone"}), 400, "INVALID_ARGUMENT")
    for other in (make_client(uid + "-other", tenant=tenant), make_client(uid, tenant=tenant + "-other")):
        assert other.get("/v1/memory/profile").json()["items"] == []


def test_restore_names_a_current_version_of_ones_own(me, uid, make_client, tenant):
    memory = me.post("/v1/memories/remember", json={"content": "My favourite tea is genmaicha"}).json()["memory"]
    r = me.post("/v1/memories/restore", json={"id": memory["id"]})
    assert r.status_code == 200, r.text
    assert (r.json()["restored"], r.json()["memory"]["id"]) == (False, memory["id"])  # not archived: as it is
    assert_error(me.post("/v1/memories/restore", json={"id": "not-a-uuid"}), 400, "INVALID_ARGUMENT")
    assert_error(me.post("/v1/memories/restore", json={}), 400, "INVALID_ARGUMENT")
    for other in (make_client("someone-else", tenant=tenant), make_client(uid, tenant=tenant + "-other")):
        assert_error(other.post("/v1/memories/restore", json={"id": memory["id"]}), 404, "NOT_FOUND")
    assert me.get("/v1/memories", params=ns_query(memory["namespace"], memory["key"])).json()["id"] == memory["id"]


def test_the_admin_trigger(me, uid, admin, make_client, tenant):
    me.post("/v1/memories/remember", json={"content": "The user prefers green tea", "type": "preference"})
    assert_error(me.post("/admin/v1/memories/reflect", json={"user_id": uid}), 403, "FORBIDDEN")
    r = admin.post("/admin/v1/memories/reflect", json={"user_id": uid})
    assert r.status_code == 200, r.text
    assert r.json()["user_id"] == uid and r.json()["examined"] == 1 and r.json()["done"] is True
    for bad in ({"user_id": "a\nb"}, {"user_id": " "}, {"user_id": ""}, {}, {"user_id": uid, "x": 1}):
        assert_error(admin.post("/admin/v1/memories/reflect", json=bad), 400, "INVALID_ARGUMENT")
    stranger = make_client("root-x", tenant=tenant + "-other", roles=["admin"])
    assert stranger.post("/admin/v1/memories/reflect", json={"user_id": uid}).json()["examined"] == 0
