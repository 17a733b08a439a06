"""POST /v1/memories/feedback over HTTP, on `memsvc serve` and on the AWS backend (moto): the
answer's shape, recall before and after, the error envelope for bad input (which changes
nothing), the id rules, isolation between users and tenants, and the timeline."""

from __future__ import annotations

import time

import httpx
import pytest

from tests.api.helpers import GET_KEYS, assert_error, ns_query

CONTENT = "My favourite hiking trail is the Kalalau trail on Kauai"
NOTE = "quokka-feedback-note-5521"


def remember(client: httpx.Client, **body) -> dict:
    r = client.post("/v1/memories/remember", json={"content": CONTENT, **body})
    assert r.status_code == 200, r.text
    return r.json()["memory"]


def feedback(client: httpx.Client, **body) -> httpx.Response:
    return client.post("/v1/memories/feedback", json=body)


def recalled_ids(client: httpx.Client, **body) -> list[str]:
    r = client.post("/v1/memories/recall", json={"query": "favourite hiking trail Kalalau", **body})
    assert r.status_code == 200, r.text
    return [m["id"] for m in r.json()["memories"]]


def stored(client: httpx.Client, memory: dict) -> dict:
    r = client.get("/v1/memories", params=ns_query(memory["namespace"], memory["key"]))
    assert r.status_code == 200, r.text
    return r.json()


def without_accesses(memory: dict) -> dict:
    """Without recall's access counters, which a typed memory's value shows too (and the
    background flush may or may not have written by the time it is read)."""
    return {k: without_accesses(v) if k == "value" and isinstance(v, dict) else v
            for k, v in memory.items() if k not in ("access_count", "last_accessed_at")}


def test_useful_then_wrong(me):
    memory = remember(me)
    assert recalled_ids(me) == [memory["id"]]
    r = feedback(me, id=memory["id"], signal="useful", note=NOTE)
    assert r.status_code == 200, r.text
    body = r.json()
    assert set(body) == {"signal", "memory", "previous_id"}
    assert (body["signal"], body["previous_id"]) == ("useful", memory["id"])
    useful = body["memory"]
    assert GET_KEYS <= set(useful) and useful["version"] == 2 and useful["key"] == memory["key"]
    # The recall above may have been counted on the row already (in the background), or not yet.
    assert without_accesses(useful["value"]) == {**memory["value"], "importance": 0.6}
    assert useful["value"].get("access_count", 1) == 1
    assert recalled_ids(me) == [useful["id"]]

    wrong = feedback(me, id=useful["id"], signal="wrong").json()["memory"]
    assert "superseded" in wrong["value"]["tags"] and wrong["version"] == 3
    assert recalled_ids(me) == []
    assert recalled_ids(me, include_superseded=True) == [wrong["id"]]
    # Recall's access counts reach the row in the background (`AccessRecorder`), whenever their flush runs.
    assert without_accesses(stored(me, memory)) == without_accesses(wrong)


def test_the_same_id_twice_is_applied_once(me):
    memory = remember(me)
    assert feedback(me, id=memory["id"], signal="useful").status_code == 200
    assert_error(feedback(me, id=memory["id"], signal="useful"), 404, "NOT_FOUND")
    assert stored(me, memory)["value"]["importance"] == 0.6


def test_a_plain_item_is_a_409(me, home):
    put = me.put("/v1/memories", json={"namespace": home + ["notes"], "key": "k", "value": {"text": "hi"}})
    assert put.status_code == 200, put.text
    err = assert_error(feedback(me, id=put.json()["id"], signal="useful"), 409, "CONFLICT")
    assert err["retryable"] is False and "typed memories" in err["message"]


@pytest.mark.parametrize("body, field", [
    ({"signal": "useful"}, "id"),
    ({"id": "not-a-uuid", "signal": "useful"}, "id"),
    ({"id": None, "signal": "useful"}, "id"),
    ({"id": "{id}", "signal": "great"}, "signal"),
    ({"id": "{id}"}, "signal"),
    ({"id": "{id}", "signal": "useful", "extra": 1}, "extra"),
    ({"id": "{id}", "signal": "useful", "note": "x" * 2001}, "note"),
    ({"id": "{id}", "signal": "useful", "note": 5}, "note"),
])
def test_bad_input_is_a_400_and_changes_nothing(me, body, field):
    memory = remember(me)
    body = {k: memory["id"] if v == "{id}" else v for k, v in body.items()}
    err = assert_error(feedback(me, **body), 400, "INVALID_ARGUMENT")
    assert err["details"].get("field") == field
    assert "pydantic" not in err["message"].lower() and "validation error" not in err["message"].lower()
    assert stored(me, memory) == {**memory}


def test_not_json_and_no_token(me, make_client):
    assert_error(me.post("/v1/memories/feedback", content=b"{not json"), 400, "INVALID_ARGUMENT")
    assert_error(make_client(None).post("/v1/memories/feedback", json={}), 401, "UNAUTHORIZED")


def test_other_users_and_tenants_get_404_and_change_nothing(me, make_client, tenant, uid):
    memory = remember(me)
    strangers = [
        make_client("someone-else", tenant=tenant),
        make_client(uid, tenant=tenant + "-other"),  # the same user id in another tenant
        make_client("root", tenant=tenant + "-other", roles=["admin"]),
    ]
    unknown = assert_error(feedback(me, id="00000000-0000-4000-8000-000000000000", signal="useful"), 404)
    for client in strangers:
        for signal in ("useful", "wrong", "outdated"):
            err = assert_error(feedback(client, id=memory["id"], signal=signal), 404, "NOT_FOUND")
            assert err["message"] == unknown["message"]
    assert stored(me, memory) == memory
    assert recalled_ids(me) == [memory["id"]]


def test_the_timeline_records_the_signal_not_the_note(me, uid, live_server):
    memory = remember(me)
    useful = feedback(me, id=memory["id"], signal="useful", note=NOTE).json()["memory"]
    feedback(me, id=useful["id"], signal="outdated", note=NOTE)
    params = [("ns", "user"), ("ns", uid), ("kinds", "update")]
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        r = me.get("/v1/memories/events", params=params)
        found = r.json()["events"]
        if len(found) == 2:
            break
        time.sleep(0.2)
    assert [(e["action"], e["version"]) for e in found] == [("feedback_useful", 2), ("feedback_outdated", 3)]
    assert NOTE not in r.text
    logs = "".join(p.read_text(errors="replace") for p in live_server.data_dir.parent.glob("serve-*.log"))
    assert NOTE not in logs
    events_files = list(live_server.data_dir.glob("*.jsonl"))
    assert all(NOTE not in p.read_text(errors="replace") for p in events_files)


def test_openapi_has_the_route(me):
    doc = me.get("/openapi.json").json()
    op = doc["paths"]["/v1/memories/feedback"]["post"]
    assert {"200", "400", "404", "409"} <= set(op["responses"])
