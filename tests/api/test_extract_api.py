"""POST /v1/memories/extract and sessions that extract, over HTTP, on `memsvc serve` (the
deterministic extractor with the real local model) and on the AWS backend (the Bedrock Converse
adapter, answered by `tests/fakes/converse.py` with the same patterns): an agent learns a
preference from conversation alone and recalls it; repeats, corrections, the queue, bad input and
isolation."""

from __future__ import annotations

import time

import httpx

from tests.api.helpers import assert_error, ns_query

CHAT = [
    {"role": "user", "content": "Hi! I just moved to Lisbon and I am vegetarian."},
    {"role": "assistant", "content": "Welcome to Lisbon! You should try the vegan place on Rua Augusta."},
    {"role": "user", "content": "Thanks. What's the weather like there in winter?"},
]


def extract(client: httpx.Client, messages=CHAT, **body) -> httpx.Response:
    return client.post("/v1/memories/extract", json={"messages": messages, **body})


def learnt(client: httpx.Client, uid: str) -> dict[str, dict]:
    r = client.post("/v1/memories/search", json={"namespace_prefix": ["user", uid, "memories"], "limit": 100})
    assert r.status_code == 200, r.text
    return {m["value"]["content"]: m for m in r.json()["items"]}


def eventually(check, timeout: float = 30.0):
    """The background worker's outcome (it polls every 0.2-0.5 s): wait for it, generously."""
    deadline = time.monotonic() + timeout
    while True:
        found = check()
        if found or time.monotonic() > deadline:
            return found
        time.sleep(0.2)


def test_an_agent_learns_from_conversation_alone(me, uid):
    r = extract(me)
    assert r.status_code == 200, r.text
    body = r.json()
    assert set(body) == {"extractor", "memories"} and body["extractor"] != ""
    got = {m["candidate"]["content"]: m for m in body["memories"]}
    assert set(got) == {"User lives in Lisbon", "User is vegetarian"}  # not the assistant's tip, not the question
    veg = got["User is vegetarian"]
    assert veg["action"] == "created" and veg["candidate"]["source_seqs"] == [0]
    assert veg["memory"]["namespace"] == ["user", uid, "memories"]
    assert veg["memory"]["value"]["provenance"]["seqs"] == [0]
    recalled = me.post("/v1/memories/recall", json={"query": "is the user vegetarian?"}).json()["memories"]
    assert recalled and recalled[0]["content"] == "User is vegetarian"

    again = extract(me).json()["memories"]
    assert {m["action"] for m in again} == {"unchanged"}
    moved = extract(me, [{"role": "user", "content": "Actually, I moved to Porto last month."}]).json()["memories"]
    assert [(m["action"], m["candidate"]["content"]) for m in moved] == [("superseded", "User lives in Porto")]
    mine = learnt(me, uid)
    assert "superseded" in mine["User lives in Lisbon"]["value"]["tags"]


def test_the_timeline_tells_each_candidate_without_its_content(me, uid):
    assert extract(me).status_code == 200
    r = me.get("/v1/memories/events", params=[("ns", "user"), ("ns", uid), ("kinds", "candidate")])
    assert r.status_code == 200, r.text
    found = r.json()["events"]
    assert [(e["kind"], e["version"], e["value"]) for e in found] == [("candidate", 0, None)] * 2
    assert {e["reason"] for e in found} == {"a fact extracted by " + extract(me).json()["extractor"]}
    assert "Lisbon" not in r.text and "vegetarian" not in r.text


def test_wait_false_is_extracted_in_the_background(me, uid):
    r = extract(me, wait=False)
    assert r.status_code == 202, r.text
    assert set(r.json()) == {"job_id", "status"} and r.json()["status"] == "accepted"
    expected = {"User lives in Lisbon", "User is vegetarian"}
    assert eventually(lambda: set(learnt(me, uid)) == expected)


def test_a_session_extracts_when_it_closes(me, uid):
    r = me.post("/v1/memory/sessions", json={"session_id": "trip", "extract": "on_close"})
    assert r.status_code == 201, r.text
    assert (r.json()["extract"], r.json()["extracted_seq"]) == ("on_close", 0)
    for message in CHAT:
        assert me.post("/v1/memory/sessions/trip/messages", json=message).status_code == 201
    assert learnt(me, uid) == {}
    assert me.post("/v1/memory/sessions/trip/close").status_code == 200
    assert set(learnt(me, uid)) == {"User lives in Lisbon", "User is vegetarian"}
    assert me.get("/v1/memory/sessions/trip").json()["extracted_seq"] == 3


def test_bad_input_changes_nothing(me, uid):
    cases = [
        ({"messages": []}, 400), ({}, 400), ({"messages": CHAT, "wait": "no"}, 400),
        ({"messages": [{"role": "robot", "content": "hi"}]}, 400),
        ({"messages": [{"role": "user", "content": ""}]}, 400),
        ({"messages": [{"role": "user", "content": "I am vegetarian", "extra": 1}]}, 400),
        ({"messages": CHAT, "layer": "galaxy"}, 400), ({"messages": CHAT, "layer": "session"}, 400),
        ({"messages": [{"role": "user", "content": "I am vegetarian."}] * 101}, 400),
        ({"messages": [{"role": "user", "content": "I am vegetarian. " * 2000}]}, 413),
    ]
    for body, status in cases:
        assert_error(me.post("/v1/memories/extract", json=body), status)
    assert learnt(me, uid) == {}


def test_users_and_tenants_are_walled_off(me, uid, make_client, tenant):
    other = make_client(uid + "-other", tenant=tenant)
    assert_error(extract(other, identifiers={"user_id": uid}), 403, "FORBIDDEN")
    stranger = make_client(uid, tenant=tenant + "-other")  # the same user id in another tenant
    assert extract(stranger).status_code == 200
    assert learnt(me, uid) == {}
    assert extract(me).status_code == 200
    r = other.get("/v1/memories", params=ns_query(["user", uid, "memories"], "x"))
    assert r.status_code in (403, 404)
    assert set(learnt(stranger, uid)) == {"User lives in Lisbon", "User is vegetarian"}
