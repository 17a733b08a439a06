"""POST /v1/memories/remember over HTTP, on `memsvc serve` and on the AWS backend (moto): the
200 and 202 shapes, the error envelope, 429 with Retry-After, and the outcome on the timeline.
The live servers embed with MiniLM, so the thresholds are the calibrated defaults."""

from __future__ import annotations

import time

import httpx

from tests.api.helpers import GET_KEYS, assert_error


def remember(client: httpx.Client, **body) -> httpx.Response:
    return client.post("/v1/memories/remember", json=body)


def test_created_then_unchanged(me, uid):
    r = remember(me, content="My favourite editor is Helix", tags=["tools"])
    assert r.status_code == 200, r.text
    body = r.json()
    assert set(body) == {"action", "memory", "neighbors", "judge"}
    assert body["action"] == "created" and body["neighbors"] == []
    assert {"asked", "same_fact"} <= set(body["judge"]) and body["judge"]["asked"] is False
    memory = body["memory"]
    assert GET_KEYS <= set(memory) and memory["namespace"] == ["user", uid, "memories"]
    assert memory["value"]["content"] == "My favourite editor is Helix" and memory["value"]["tags"] == ["tools"]

    again = remember(me, content="My favourite editor is Helix")
    assert again.status_code == 200 and again.json()["action"] == "unchanged"
    assert again.json()["memory"]["version"] == 1

    got = me.get("/v1/memories", params=[("ns", s) for s in memory["namespace"]] + [("key", memory["key"])])
    assert got.status_code == 200 and got.json()["value"] == memory["value"]


def test_same_fact_is_updated(me):
    first = remember(me, content="The user prefers Python for scripting").json()
    second = remember(me, content="User prefers Python for scripting tasks").json()
    assert second["action"] == "updated"
    assert second["memory"]["key"] == first["memory"]["key"] and second["memory"]["version"] == 2
    assert second["neighbors"][0]["key"] == first["memory"]["key"] and second["neighbors"][0]["score"] >= 0.9


def test_contradiction_is_superseded(me, uid):
    first = remember(me, content="I live in Berlin").json()
    second = remember(me, content="I live in Munich").json()
    assert second["action"] == "superseded", second
    assert second["judge"] == {"asked": True, "same_fact": False, "contradiction": True, "failed": False}
    old = me.get("/v1/memories", params=[("ns", "user"), ("ns", uid), ("ns", "memories"),
                                         ("key", first["memory"]["key"])]).json()
    assert old["value"]["superseded_by"] == second["memory"]["key"] and "superseded" in old["value"]["tags"]


def test_wait_false_is_decided_in_the_background(me, uid):
    r = remember(me, content="The standup is at 9:30", wait=False)
    assert r.status_code == 202, r.text
    assert set(r.json()) == {"candidate_id"}
    params = [("ns", "user"), ("ns", uid), ("kinds", "add")]
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        found = me.get("/v1/memories/events", params=params).json()["events"]
        if found:
            break
        time.sleep(0.2)
    assert [(e["key"], e["action"], e["value"]["content"]) for e in found] == [
        (r.json()["candidate_id"], "created", "The standup is at 9:30")]


def test_rate_limited_with_retry_after(me, admin):
    assert admin.put("/admin/v1/memories/settings", json={"remember_per_hour": 1}).status_code == 200
    assert remember(me, content="one").status_code == 200
    r = remember(me, content="two")
    assert_error(r, 429, "RATE_LIMITED")
    retry_after = int(r.headers["retry-after"])
    assert 1 <= retry_after <= 3600 and r.json()["error"]["details"]["retry_after_seconds"] == retry_after
    assert r.json()["error"]["retryable"] is True


def test_bad_input(me, uid):
    assert_error(remember(me), 400, "INVALID_ARGUMENT")
    assert_error(remember(me, content="x", layer="galaxy"), 400, "INVALID_LAYER")
    r = remember(me, content="x", layer="team")
    assert_error(r, 400, "MISSING_IDENTIFIER")
    assert r.json()["error"]["details"] == {"layer": "team", "missing": ["team_id"]}
    assert_error(remember(me, content="x", namespace=["user", "someone-else", "memories"]), 403, "FORBIDDEN")
    r = remember(me, content="x" * 8001)
    assert_error(r, 413, "CONTENT_TOO_LONG")
    assert r.json()["error"]["details"]["max_chars"] == 8000
    listed = me.get("/v1/memories/namespaces", params=[("prefix", "user"), ("prefix", uid)]).json()
    assert listed["namespaces"] == []
