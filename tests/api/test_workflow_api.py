"""Seed 003's workflow state over HTTP, on both live servers: the worker flow, isolation on
every route (other users, other tenants, tricky ids), bad input, and concurrency with threads."""

from __future__ import annotations

import threading
import time
from concurrent.futures import ThreadPoolExecutor
from urllib.parse import quote

import pytest

from tests.api.helpers import assert_error, parse_ts

TC = "/v1/memory/task-context"


def q(part: str) -> str:
    return quote(part, safe="")


def create_task(client, task_id, **fields):
    r = client.post(TC, json={"task_id": task_id, "event_type": "research.requested", **fields})
    assert r.status_code == 201, r.text
    return r.json()


# -- seed 003's integration flow ---------------------------------------------------------------------


def test_worker_flow_receive_save_delegate_restore_complete_delete(me, uid):
    task_id = f"task-{uid}"
    created = create_task(me, task_id, response_event="research.completed", data={"query": "AI trends"})
    assert set(created) == {"task_id", "created_at", "version"} and created["version"] == 1
    parse_ts(created["created_at"])
    subs = [f"{uid}-search", f"{uid}-summarise"]
    r = me.post(f"{TC}/{q(task_id)}/sub-tasks", json={"add": subs})
    assert r.status_code == 200 and r.json()["remaining"] == 2, r.text
    for n, sub in enumerate(subs):  # results arrive: restore by sub-task, then mark it done
        r = me.get(f"{TC}/by-subtask/{q(sub)}")
        assert r.status_code == 200 and r.json()["task_id"] == task_id and r.json()["data"] == {"query": "AI trends"}
        r = me.put(f"{TC}/{q(task_id)}", json={"state": {"results": n + 1}})
        assert r.status_code == 200, r.text
        r = me.post(f"{TC}/{q(task_id)}/sub-tasks", json={"remove": [sub]})
        assert r.json()["remaining"] == 1 - n and r.json()["removed"] == [sub]
    assert me.get(f"{TC}/{q(task_id)}").json()["state"] == {"results": 2}
    assert me.delete(f"{TC}/{q(task_id)}").status_code == 204
    assert me.delete(f"{TC}/{q(task_id)}").status_code == 204
    assert_error(me.get(f"{TC}/{q(task_id)}"), 404, "NOT_FOUND")
    assert_error(me.get(f"{TC}/by-subtask/{q(subs[0])}"), 404, "NOT_FOUND")


def test_plans_and_working_memory_over_http(me, uid):
    for n, status in enumerate(["running", "completed", "running"]):
        r = me.post("/v1/memory/plans", json={"plan_id": f"p{n}-{uid}", "goal_event": "research.goal",
                                              "goal_data": {"topic": "AI"}, "status": status})
        assert r.status_code == 201, r.text
    r = me.get("/v1/memory/plans", params={"status": "active", "limit": 1})
    body = r.json()
    assert r.status_code == 200 and body["count"] == 1 and body["plans"][0]["plan_id"] == f"p2-{uid}"
    r = me.get("/v1/memory/plans", params={"status": "active", "limit": 1, "cursor": body["next_cursor"]})
    assert [p["plan_id"] for p in r.json()["plans"]] == [f"p0-{uid}"] and r.json()["next_cursor"] is None
    plan = f"/v1/memory/plans/{q(f'p0-{uid}')}"
    r = me.put(plan, json={"status": "completed", "state": {"step": 3}}, headers={"If-Match": "1"})
    assert r.status_code == 200 and r.json()["version"] == 2 and r.json()["goal_data"] == {"topic": "AI"}
    assert_error(me.put(plan, json={"status": "failed"}, headers={"If-Match": "1"}), 412, "PRECONDITION_FAILED")
    wm = f"/v1/memory/working/{q(f'p0-{uid}')}"
    assert me.put(f"{wm}/a", json={"value": {"x": 1}}).json()["version"] == 1
    assert_error(me.put(f"{wm}/a", json={"value": "lost"}, headers={"If-Match": "7"}), 412, "PRECONDITION_FAILED")
    assert_error(me.put(f"{wm}/a", json={"value": "lost"}, headers={"If-Match": "one"}), 400, "INVALID_ARGUMENT")
    assert me.get(f"{wm}/a").json()["value"] == {"x": 1}
    r = me.put(f"{wm}/b", json={"value": "two", "ttl_seconds": 3600})
    assert r.status_code == 200 and r.json()["expires_at"] is not None
    assert me.get(f"{wm}/a").json()["value"] == {"x": 1}
    assert [i["key"] for i in me.get(wm).json()["items"]] == ["a", "b"]
    assert me.delete(f"{wm}/a").status_code == 204
    assert_error(me.delete(f"{wm}/a"), 404, "NOT_FOUND")
    assert me.delete(wm).json() == {"deleted_count": 1, "plan_id": f"p0-{uid}"}
    me.put(f"{wm}/c", json={"value": 3})
    assert me.delete(plan).status_code == 204
    assert me.get(wm).json() == {"items": [], "next_cursor": None}  # the plan's working memory went with it
    assert_error(me.get(plan), 404, "NOT_FOUND")
    assert_error(me.put(f"{wm}/c", json={"value": 3}), 404, "NOT_FOUND")  # no plan, no working memory


# -- isolation -------------------------------------------------------------------------------------


TRICKY_IDS = ["plain", "a/b", "a%2Fb", "задача-ü-🙂", "by-subtask", "..", "a#T#b"]


@pytest.mark.parametrize("ident", TRICKY_IDS)
def test_every_route_hides_one_users_objects_from_others(make_client, me, uid, tenant, ident):
    ident = f"{ident}-{uid}"
    other_user = make_client(uid + "-other", tenant=tenant)
    other_tenant = make_client(uid, tenant=tenant + "-x")  # the same user name in another tenant
    create_task(me, ident, sub_tasks=[ident + "/sub"], data={"d": 1})
    assert me.post("/v1/memory/plans", json={"plan_id": ident, "goal_event": "g"}).status_code == 201
    assert me.put(f"/v1/memory/working/{q(ident)}/{q(ident)}", json={"value": 1}).status_code == 200
    assert me.get(f"{TC}/{q(ident)}").json()["task_id"] == ident
    assert me.get(f"{TC}/by-subtask/{q(ident + '/sub')}").json()["task_id"] == ident
    # A task context is the tenant's name for a task: another user of the tenant is told it is not
    # theirs (403); for another tenant there is nothing by that name (404).
    for who, status, code in ((other_user, 403, "FORBIDDEN"), (other_tenant, 404, "NOT_FOUND")):
        for r in (
            who.get(f"{TC}/{q(ident)}"),
            who.put(f"{TC}/{q(ident)}", json={"state": {"x": 1}}),
            who.get(f"{TC}/by-subtask/{q(ident + '/sub')}"),
            who.post(f"{TC}/{q(ident)}/sub-tasks", json={"remove": [ident + "/sub"]}),
        ):
            assert_error(r, status, code)
        r = who.delete(f"{TC}/{q(ident)}")
        assert r.status_code == (204 if status == 404 else 403)
    for who in (other_user, other_tenant):
        for r in (
            who.get(f"/v1/memory/plans/{q(ident)}"),
            who.put(f"/v1/memory/plans/{q(ident)}", json={"status": "cancelled"}),
            who.get(f"/v1/memory/working/{q(ident)}/{q(ident)}"),
            who.delete(f"/v1/memory/working/{q(ident)}/{q(ident)}"),
            who.put(f"/v1/memory/working/{q(ident)}/{q(ident)}", json={"value": 2}),
        ):
            assert_error(r, 404, "NOT_FOUND")
        assert who.delete(f"/v1/memory/plans/{q(ident)}").status_code == 204
        assert who.get(f"/v1/memory/working/{q(ident)}").json() == {"items": [], "next_cursor": None}
        assert who.delete(f"/v1/memory/working/{q(ident)}").json()["deleted_count"] == 0
        assert ident not in who.get("/v1/memory/plans").text
    # The creator still has everything, unchanged.
    got = me.get(f"{TC}/{q(ident)}").json()
    assert (got["sub_tasks"], got["state"], got["version"]) == ([ident + "/sub"], {}, 1)
    assert me.get(f"/v1/memory/plans/{q(ident)}").json()["status"] == "running"
    assert me.get(f"/v1/memory/working/{q(ident)}/{q(ident)}").json()["value"] == 1


def test_someone_elses_sub_task_id_is_refused_and_cannot_be_taken(make_client, me, uid, tenant):
    other = make_client(uid + "-other", tenant=tenant)
    create_task(me, f"mine-{uid}", sub_tasks=[f"sub-{uid}"])
    refused = other.get(f"{TC}/by-subtask/{q(f'sub-{uid}')}")
    assert_error(refused, 403, "FORBIDDEN")
    assert f"mine-{uid}" not in refused.text  # the parent's task id is never told
    create_task(other, f"theirs-{uid}")
    assert_error(other.post(f"{TC}/{q(f'theirs-{uid}')}/sub-tasks", json={"add": [f"sub-{uid}"]}), 409, "CONFLICT")
    assert me.get(f"{TC}/by-subtask/{q(f'sub-{uid}')}").json()["task_id"] == f"mine-{uid}"


def test_services_and_admins_see_task_contexts_of_their_tenant(make_client, me, uid, tenant):
    create_task(me, f"t-{uid}", sub_tasks=[f"s-{uid}"])
    for roles in (["service"], ["admin"]):
        worker = make_client(f"worker-{uid}", tenant=tenant, roles=roles)
        assert worker.get(f"{TC}/by-subtask/{q(f's-{uid}')}").json()["task_id"] == f"t-{uid}"
    outsider = make_client(f"worker-{uid}", tenant=tenant + "-x", roles=["service"])
    assert_error(outsider.get(f"{TC}/{q(f't-{uid}')}"), 404, "NOT_FOUND")


# -- bad input ---------------------------------------------------------------------------------------


def test_bad_input_is_400_and_changes_nothing(me, uid):
    task_id = f"t-{uid}"
    create_task(me, task_id, data={"keep": True})
    path = f"{TC}/{q(task_id)}"
    for r in (
        me.post(TC, json={"task_id": "", "event_type": "e"}),
        me.post(TC, json={"task_id": f"n-{uid}", "event_type": "e", "surprise": 1}),
        me.post(TC, json={"task_id": f"n-{uid}", "event_type": "e", "sub_tasks": "s1"}),
        me.post(TC, json={"task_id": f"n-{uid}", "event_type": "e", "data": []}),
        me.post(TC, json={"task_id": "x" * 257, "event_type": "e"}),
        me.put(path, json={"state": None}),
        me.put(path, json={"data": {"a": 1}}, headers={"If-Match": "one"}),
        me.post(f"{path}/sub-tasks", json={"add": ["s"], "remove": ["s"]}),
        me.post(f"{path}/sub-tasks", json={"add": [1]}),
        me.get(f"{TC}/%FF"),
        me.post("/v1/memory/plans", json={"plan_id": f"p-{uid}", "goal_event": "g", "status": "paused"}),
        me.get("/v1/memory/plans", params={"status": "paused"}),
        me.get("/v1/memory/plans", params={"limit": 0}),
        me.get("/v1/memory/plans", params={"cursor": "not-a-cursor"}),
        me.put(f"/v1/memory/working/p-{uid}/k", json={"value": 1, "ttl_seconds": 0}),
        me.put(f"/v1/memory/working/p-{uid}/k", json={}),
    ):
        assert_error(r, 400)
    got = me.get(path).json()
    assert (got["data"], got["version"], got["sub_tasks"]) == ({"keep": True}, 1, [])
    assert_error(me.get(f"/v1/memory/plans/{q(f'p-{uid}')}"), 404)
    assert_error(me.get(f"/v1/memory/working/p-{uid}/k"), 404)
    assert_error(me.get(f"{TC}/{q(f'n-{uid}')}"), 404)


def test_too_large_is_413_with_max_bytes(me, uid):
    r = me.post(TC, json={"task_id": f"t-{uid}", "event_type": "e", "data": {"x": "y" * 300_000}})
    assert assert_error(r, 413, "CONTENT_TOO_LONG")["details"]["max_bytes"] == 256 * 1024
    r = me.put(f"/v1/memory/working/p-{uid}/k", json={"value": "y" * 300_000})
    assert assert_error(r, 413)["details"]["max_bytes"] == 256 * 1024
    assert_error(me.get(f"{TC}/{q(f't-{uid}')}"), 404)


# -- concurrency -------------------------------------------------------------------------------------


def _retrying(send):
    """A client's retry of a retryable 409 (the service gave up its own retries under the race)."""
    for attempt in range(30):
        r = send()
        if r.status_code != 409:
            return r
        assert assert_error(r, 409)["retryable"] is True
        time.sleep(0.01 * attempt)
    raise AssertionError("still 409 after 30 attempts")


@pytest.mark.slow
def test_of_n_workers_removing_the_last_n_sub_tasks_exactly_one_sees_zero(make_client, uid, tenant):
    workers = 8
    clients = [make_client(uid, tenant=tenant) for _ in range(workers)]
    subs = [f"{uid}-s{n}" for n in range(workers)]
    create_task(clients[0], f"t-{uid}", sub_tasks=subs)
    start = threading.Barrier(workers)

    def finish(n: int) -> int:
        start.wait()
        r = _retrying(lambda: clients[n].post(f"{TC}/{q(f't-{uid}')}/sub-tasks", json={"remove": [subs[n]]}))
        assert r.status_code == 200, r.text
        assert r.json()["removed"] == [subs[n]]
        return r.json()["remaining"]

    with ThreadPoolExecutor(workers) as pool:
        remaining = list(pool.map(finish, range(workers)))
    assert sorted(remaining) == list(range(workers))  # each saw its own step: one saw 0
    got = clients[0].get(f"{TC}/{q(f't-{uid}')}").json()
    assert (got["sub_tasks"], got["version"]) == ([], 1 + workers)


@pytest.mark.slow
def test_if_match_lets_exactly_one_of_racing_writers_win(make_client, uid, tenant):
    writers = 8
    clients = [make_client(uid, tenant=tenant) for _ in range(writers)]
    create_task(clients[0], f"t-{uid}")
    assert clients[0].post("/v1/memory/plans", json={"plan_id": f"p-{uid}", "goal_event": "g"}).status_code == 201
    working = f"/v1/memory/working/{q(f'p-{uid}')}/k"
    assert clients[0].put(working, json={"value": "first"}).json()["version"] == 1
    for path, body in ((f"{TC}/{q(f't-{uid}')}", "state"), (f"/v1/memory/plans/{q(f'p-{uid}')}", "state"),
                       (working, "value")):
        start = threading.Barrier(writers)

        def write(n: int) -> int:
            start.wait()
            return clients[n].put(path, json={body: {"writer": n}}, headers={"If-Match": "1"}).status_code

        with ThreadPoolExecutor(writers) as pool:
            statuses = list(pool.map(write, range(writers)))
        assert sorted(statuses) == [200] + [412] * (writers - 1), statuses
        got = clients[0].get(path).json()
        assert got["version"] == 2 and statuses[got[body]["writer"]] == 200
