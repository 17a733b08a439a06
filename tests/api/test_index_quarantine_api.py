"""The quarantine's admin routes over HTTP, on the live server of each backend: the status's shape,
the retry route's answers, its auth and its refusals. (Quarantining a memory needs a poison the
real model would meet: those tests are in tests/contract/test_quarantine.py, through each
backend's router, with the fake embedder's poison.)"""

from __future__ import annotations

from memsvc_client import MemsvcClient

from tests.api.helpers import assert_error, put_ok, sync_index, unique_tenant

RETRY = "/admin/v1/memories/index/retry"
ID = "0b5ad3c4-1f7e-4c5e-9a53-5d1f3f1c2a10"  # no memory's


def test_the_status_lists_no_quarantine_for_a_healthy_tenant(admin, me, home):
    put_ok(me, home + ["facts"], "f", {"text": "The Danube flows into the Black Sea"})
    sync_index(admin)
    status = admin.get("/admin/v1/memories/index/status").json()
    assert (status["pending"], status["quarantined"], status["quarantined_items"]) == (0, 0, [])


def test_a_retry_answers_each_id_and_reaches_only_the_callers_tenant(admin, me, home, make_client):
    mine = put_ok(me, home + ["facts"], "f", {"text": "Lake Baikal is the deepest lake"})
    sync_index(admin)
    theirs = put_ok(make_client("u-other", tenant=unique_tenant()), ["user", "u-other"], "k",
                    {"text": "another tenant's memory"})
    r = admin.post(RETRY, json={"ids": [mine["id"], theirs["id"], ID]})

    assert r.status_code == 202, r.text
    assert r.json() == {"retried": [], "failed": [{"id": mine["id"], "code": "NOT_QUARANTINED"},
                                                  {"id": theirs["id"], "code": "NOT_FOUND"},
                                                  {"id": ID, "code": "NOT_FOUND"}]}


def test_a_user_may_neither_see_nor_retry_the_quarantine(me):
    assert_error(me.get("/admin/v1/memories/index/status"), 403, "FORBIDDEN")
    assert_error(me.post(RETRY, json={"ids": [ID]}), 403, "FORBIDDEN")


def test_a_retry_outside_its_schema_is_a_400(admin):
    for body in ({}, {"ids": []}, {"ids": ["nope"]}, {"ids": [ID, ID]}):
        assert_error(admin.post(RETRY, json=body), 400, "INVALID_ARGUMENT")


def test_the_client_retries_by_id(live_server, tenant):
    with MemsvcClient(live_server.url, live_server.token("root-" + tenant, tenant=tenant, roles=["admin"])) as c:
        assert c.index_status()["quarantined_items"] == []
        assert c.index_retry([ID]) == {"retried": [], "failed": [{"id": ID, "code": "NOT_FOUND"}]}
