"""`DELETE /admin/v1/users/{user_id}` and `GET /admin/v1/users/{user_id}/erasure` over HTTP, on both
live servers: the receipt, what the user can still see afterwards (nothing), what others keep,
repeats, and the refusals. The raw storage is searched in tests/contract/test_user_erasure.py."""

from __future__ import annotations

from urllib.parse import quote

import pytest

from tests.api.helpers import assert_error, sync_index, wait_for_events


def _write_some(client, uid: str) -> None:
    r = client.put("/v1/memories", json={"namespace": ["user", uid, "notes"], "key": "home",
                                         "value": {"text": "lives in Quintessa"}})
    assert r.status_code == 200, r.text
    assert client.post("/v1/memories/remember", json={"content": "I prefer marzipan"}).status_code == 200
    assert client.post("/v1/memory/sessions", json={"session_id": "trip"}).status_code == 201
    assert client.post("/v1/memory/sessions/trip/messages", json={"role": "user", "content": "hi"}).status_code == 201
    assert client.post("/v1/memory/plans", json={"plan_id": "p1", "goal_event": "done"}).status_code == 201
    # The writes' events are on the timeline before the erasure: on AWS they arrive a moment later
    # through the stream, and one arriving after the erasure is a write a repeated DELETE strips.
    wait_for_events(client, ["user", uid], 3)


def _memories(client, uid: str) -> int:
    r = client.post("/v1/memories/search", json={"namespace_prefix": ["user", uid], "limit": 100})
    assert r.status_code == 200, r.text
    return len(r.json()["items"])


def test_erasing_a_user_answers_a_receipt_and_leaves_them_nothing(make_client, me, admin, uid, tenant):
    _write_some(me, uid)
    other = make_client(uid + "-other", tenant=tenant)
    _write_some(other, uid + "-other")

    r = admin.delete(f"/admin/v1/users/{quote(uid, safe='')}")

    assert r.status_code == 200, r.text
    receipt = r.json()
    assert set(receipt) == {"user_id", "erasure_id", "status", "started_at", "completed_at", "erased"}
    assert receipt["user_id"] == uid and receipt["status"] == "completed" and receipt["completed_at"]
    assert receipt["erased"]["memories"] == 3 and receipt["erased"]["sessions"] == 1
    assert _memories(me, uid) == 0
    assert me.get("/v1/memory/sessions").json()["sessions"] == []
    assert me.get("/v1/memory/plans").json()["plans"] == []
    assert _memories(other, uid + "-other") == 3 and len(other.get("/v1/memory/plans").json()["plans"]) == 1


def test_a_repeated_erasure_and_the_status_route_answer_the_same_receipt(me, admin, uid):
    _write_some(me, uid)
    # An indexing batch still running when the erasure sweeps writes the user's vectors after it
    # (docs/data-ownership.md, "Races"): the repeated DELETE would find them, a new receipt.
    sync_index(admin)
    first = admin.delete(f"/admin/v1/users/{uid}").json()

    again = admin.delete(f"/admin/v1/users/{uid}")
    shown = admin.get(f"/admin/v1/users/{uid}/erasure")

    assert again.status_code == 200 and again.json() == first
    assert shown.status_code == 200 and shown.json() == first


def test_a_user_with_nothing_is_erased_with_zero_counts(admin, uid):
    r = admin.delete(f"/admin/v1/users/{uid}-never")
    assert r.status_code == 200 and r.json()["status"] == "completed"
    assert set(r.json()["erased"].values()) == {0}


def test_a_user_never_erased_has_no_receipt(admin, uid):
    assert_error(admin.get(f"/admin/v1/users/{uid}/erasure"), 404, "NOT_FOUND")


def test_only_the_tenants_admin_erases_its_users(make_client, me, uid, tenant):
    _write_some(me, uid)
    assert_error(me.delete(f"/admin/v1/users/{uid}"), 403, "FORBIDDEN")
    assert_error(me.get(f"/admin/v1/users/{uid}/erasure"), 403, "FORBIDDEN")
    other_admin = make_client("root", tenant=tenant + "-x", roles=["admin"])
    assert other_admin.delete(f"/admin/v1/users/{uid}").status_code == 200  # its own tenant's user of that id
    assert _memories(me, uid) == 3


@pytest.mark.parametrize("user_id", ["%00", "a%0Ab", "x" * 257, "%C2%85"])
def test_a_user_id_no_token_could_carry_is_a_400(admin, user_id):
    r = admin.delete(f"/admin/v1/users/{user_id}")
    assert_error(r, 400, "INVALID_ARGUMENT")
    assert r.json()["error"]["details"]["field"] == "user_id"


def test_an_export_or_import_in_the_queue_does_not_stop_an_erasure(me, admin, uid):
    """Their steps share the remember queue without a sealed caller: an erasure passes them over."""
    _write_some(me, uid)
    started = admin.post("/admin/v1/exports", json={"passphrase": "correct horse battery staple"})
    assert started.status_code in (200, 201, 202), started.text

    r = admin.delete(f"/admin/v1/users/{uid}")

    assert r.status_code == 200, r.text
    assert r.json()["status"] == "completed" and r.json()["erased"]["memories"] == 3
