"""Sessions, messages, semantic upsert and close over HTTP, on both live servers (seed 004's
User Story 2, API-AGENT.md "Agent workflow state"): shapes and status codes, isolation, ids
that need encoding, bad input, concurrent appends from real threads, and a real restart."""

from __future__ import annotations

import threading
import time
from urllib.parse import quote

import pytest

from tests.api.helpers import ERROR_KEYS, client_for, delete, keys_of, search_ok, sync_index, unique_tenant
from tests.conftest import start_server, stop_server

SESSION_KEYS = {"session_id", "agent_id", "title", "metadata", "created_at", "updated_at", "last_interaction",
                "version", "message_count", "closed_at", "delete_after"}


def path(session_id: str, *rest: str) -> str:
    return "/v1/memory/sessions/" + quote(session_id, safe="").replace(".", "%2E") + "".join("/" + r for r in rest)


def create(client, session_id: str, **body) -> dict:
    r = client.post("/v1/memory/sessions", json={"session_id": session_id, **body})
    assert r.status_code == 201, r.text
    return r.json()


def say(client, session_id: str, content: str, role: str = "user") -> dict:
    r = client.post(path(session_id, "messages"), json={"role": role, "content": content})
    assert r.status_code == 201, r.text
    return r.json()


def error_code(r) -> str:
    assert set(r.json()["error"]) == ERROR_KEYS
    return r.json()["error"]["code"]


def test_session_lifecycle(me):
    created = create(me, "chat-1", agent_id="helper", title="Trip", metadata={"lang": "en"})
    assert set(created) >= SESSION_KEYS and created["version"] == 1 and created["message_count"] == 0
    assert error_code(me.post("/v1/memory/sessions", json={"session_id": "chat-1"})) == "CONFLICT"
    first = say(me, "chat-1", "I want to visit Lisbon in May")
    second = say(me, "chat-1", "Lisbon in May is lovely", role="assistant")
    assert set(first) == {"message_id", "seq", "created_at"} and (first["seq"], second["seq"]) == (1, 2)
    got = me.get(path("chat-1", "messages"), params={"after_seq": 1}).json()
    assert [(m["seq"], m["role"], m["content"]) for m in got["messages"]] == [(2, "assistant", "Lisbon in May is lovely")]
    listed = me.get("/v1/memory/sessions", params={"agent_id": "helper"}).json()
    assert [s["session_id"] for s in listed["sessions"]] == ["chat-1"] and listed["count"] == 1
    assert me.get(path("chat-1")).json()["message_count"] == 2
    # PUT with If-Match
    r = me.put(path("chat-1"), json={"title": "Lisbon trip"}, headers={"If-Match": "1"})
    assert r.status_code == 200 and r.json()["version"] == 2 and r.json()["title"] == "Lisbon trip"
    r = me.put(path("chat-1"), json={"title": "stale"}, headers={"If-Match": "1"})
    assert r.status_code == 412 and error_code(r) == "PRECONDITION_FAILED"
    assert error_code(me.put(path("chat-1"), json={}, headers={"If-Match": "one"})) == "INVALID_ARGUMENT"
    # close, then delete: the messages go with it
    closed = me.post(path("chat-1", "close"))
    assert closed.status_code == 200 and set(closed.json()) >= {"promoted", "blocked", "deleted"}
    assert me.delete(path("chat-1")).status_code == 204
    assert me.delete(path("chat-1")).status_code == 204
    assert me.get(path("chat-1")).status_code == 404
    assert me.get(path("chat-1", "messages")).status_code == 404


def test_messages_are_found_by_search(me, admin, uid):
    create(me, "s")
    say(me, "s", "my dog Biscuit loves the beach")
    sync_index(admin)
    found = search_ok(me, ["user", uid, "sessions"], query="Biscuit beach", mode="keyword")
    assert [(i["namespace"], i["key"]) for i in found] == [(["user", uid, "sessions", "s", "messages"], "000000000001")]


def test_a_named_turn_is_found_by_what_it_answers(me, admin, uid):
    """Issue 23, with the real model: the answer does not say "adopt"; its turn before does."""
    create(me, "pets")
    for name, content in (("Maria", "I went to the shelter on Saturday."), ("Dev", "Did you end up adopting?"),
                          ("Maria", "Yes! A beagle named Rufus."), ("Dev", "My neighbour's dog barks all night."),
                          ("Maria", "Mostly cleaning this weekend, to be honest.")):
        r = me.post(path("pets", "messages"), json={"role": "user", "name": name, "content": content})
        assert r.status_code == 201, r.text
    got = me.get(path("pets", "messages")).json()["messages"]
    assert [(m["name"], m["role"]) for m in got[:2]] == [("Maria", "user"), ("Dev", "user")]
    sync_index(admin)
    for mode in ("semantic", "hybrid"):
        found = search_ok(me, ["user", uid, "sessions"], query="what dog did Maria adopt", mode=mode)
        assert (found[0]["key"], found[0]["value"]["content"]) == ("000000000003", "Yes! A beagle named Rufus."), mode
    r = me.post("/v1/memories/recall", json={"query": "what dog did Maria adopt", "min_score": 0,
                                             "namespace_prefix": ["user", uid, "sessions"]})
    assert r.status_code == 200 and r.json()["memories"][0]["content"] == "Yes! A beagle named Rufus."


def test_a_deleted_turn_leaves_the_next_turns_index_entries(me, admin, uid):
    """DELETE /v1/memories on a message: once the feed has indexed the deletion, the next message,
    which was indexed quoting it, is found by its own words only."""
    create(me, "trip")
    for content in ("How was the trip?", "We saw flamingos at the lagoon.", "Lovely, send pictures."):
        say(me, "trip", content)
    sync_index(admin)
    prefix = ["user", uid, "sessions"]
    deadline = time.monotonic() + 30
    # The feed may still be re-indexing the turn after a written one (its follower) in the
    # background once nothing is pending; its keyword document is replaced, not edited, meanwhile.
    while {i["key"] for i in search_ok(me, prefix, query="flamingos", mode="keyword")} != {
            "000000000002", "000000000003"}:
        assert time.monotonic() < deadline, "the turn after the flamingos is not found by the words it quotes"
        time.sleep(0.05)
    assert delete(me, [*prefix, "trip", "messages"], "000000000002").status_code == 204
    deadline = time.monotonic() + 30

    def indexed_again() -> bool:  # the feed's workers run in the background
        return (search_ok(me, prefix, query="flamingos", mode="keyword") == []
                and keys_of(search_ok(me, prefix, query="send pictures", mode="keyword")) == ["000000000003"])

    while not indexed_again():
        assert time.monotonic() < deadline, "the next turn still holds the deleted one's words"
        time.sleep(0.05)


@pytest.mark.parametrize("session_id", ["a/b", "a%2Fb", "ünïcödé ☕", "..", "x?y#z"])
def test_ids_that_need_encoding(me, session_id):
    create(me, session_id)
    say(me, session_id, "hello")
    assert me.get(path(session_id)).json()["session_id"] == session_id
    assert [m["content"] for m in me.get(path(session_id, "messages")).json()["messages"]] == ["hello"]
    assert me.delete(path(session_id)).status_code == 204
    assert me.get(path(session_id)).status_code == 404


def test_another_user_or_tenant_gets_404_and_changes_nothing(me, make_client, tenant):
    create(me, "mine", metadata={"x": 1})
    say(me, "mine", "private words")
    bob = make_client("bob-" + tenant, tenant=tenant)
    stranger = make_client("mine-owner", tenant=unique_tenant())
    for other in (bob, stranger):
        for method, url, body in (("GET", path("mine"), None), ("PUT", path("mine"), {"title": "x"}),
                                  ("GET", path("mine", "messages"), None),
                                  ("POST", path("mine", "messages"), {"role": "user", "content": "x"}),
                                  ("POST", path("mine", "close"), None)):
            r = other.request(method, url, json=body)
            assert r.status_code == 404 and error_code(r) == "NOT_FOUND", (method, url)
        assert other.delete(path("mine")).status_code == 204
        assert other.get("/v1/memory/sessions").json()["sessions"] == []
        assert other.get("/v1/memory/semantic", params={"external_id": "e"}).status_code == 404
    mine = me.get(path("mine")).json()
    assert (mine["version"], mine["message_count"], mine["metadata"]) == (1, 1, {"x": 1})


def test_bad_input_is_400_or_413_and_changes_nothing(me):
    for body in ({"session_id": ""}, {"session_id": 5}, {"session_id": "s", "metadata": []},
                 {"session_id": "s", "unknown": 1}, {"session_id": "s\u0000"}):
        r = me.post("/v1/memory/sessions", json=body)
        assert r.status_code == 400 and error_code(r) == "INVALID_ARGUMENT", body
    r = me.post("/v1/memory/sessions", json={"session_id": "s", "metadata": {"x": "y" * 70_000}})
    assert r.status_code == 413 and r.json()["error"]["details"]["max_bytes"] == 65536
    assert me.get("/v1/memory/sessions").json()["count"] == 0
    create(me, "s")
    for body in ({"role": "robot", "content": "x"}, {"role": "user", "content": ""}, {"role": "user"},
                 {"role": "user", "content": "x", "seq": 5}, {"role": "user", "content": "x", "name": " "},
                 {"role": "user", "content": "x", "name": "n" * 65}, {"role": "user", "content": "x", "name": 1}):
        r = me.post(path("s", "messages"), json=body)
        assert r.status_code == 400 and error_code(r) == "INVALID_ARGUMENT", body
    r = me.post(path("s", "messages"), json={"role": "user", "content": "x" * (128 * 1024 + 1)})
    assert r.status_code == 413 and r.json()["error"]["details"]["max_bytes"] == 128 * 1024
    for params in ({"after_seq": "-1"}, {"after_seq": str(10**12)}, {"limit": "0"}, {"limit": "x"}):
        assert me.get(path("s", "messages"), params=params).status_code == 400
    assert me.get("/v1/memory/sessions", params={"cursor": "forged"}).status_code == 400
    assert me.get(path("s")).json()["message_count"] == 0
    assert me.get(path("%ZZ")).status_code == 404


def test_concurrent_appends_from_threads(live_server, uid, tenant):
    with client_for(live_server, uid, tenant=tenant) as me:
        create(me, "busy")
    results: list[int] = []
    failures: list[str] = []
    lock = threading.Lock()

    def worker(n: int) -> None:
        with client_for(live_server, uid, tenant=tenant) as c:
            for i in range(6):
                r = c.post(path("busy", "messages"), json={"role": "user", "content": f"{n}-{i}"})
                with lock:
                    (results.append(r.json()["seq"]) if r.status_code == 201 else failures.append(r.text))

    threads = [threading.Thread(target=worker, args=(n,)) for n in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert failures == []
    assert sorted(results) == list(range(1, 49))
    with client_for(live_server, uid, tenant=tenant) as me:
        got = me.get(path("busy", "messages"), params={"limit": 100}).json()["messages"]
    assert [m["seq"] for m in got] == list(range(1, 49))
    assert len({m["content"] for m in got}) == 48


def test_semantic_upsert(me):
    first = me.post("/v1/memory/semantic", json={"content": "Prefers aisle seats", "metadata": {"src": "crm"}})
    assert first.status_code == 200 and first.json()["action"] == "created"
    again = me.post("/v1/memory/semantic", json={"content": "prefers  AISLE seats", "metadata": {"src": "crm"}})
    assert again.json()["action"] == "unchanged" and again.json()["id"] == first.json()["id"]
    by_hash = me.get("/v1/memory/semantic", params={"content_hash": first.json()["content_hash"]})
    assert by_hash.status_code == 200 and by_hash.json()["content"] == "Prefers aisle seats"
    a = me.post("/v1/memory/semantic", json={"content": "Lives in Oslo", "external_id": "home"}).json()
    b = me.post("/v1/memory/semantic", json={"content": "Lives in Bergen", "external_id": "home"}).json()
    assert (a["action"], b["action"], b["external_id"]) == ("created", "updated", "home")
    assert me.get("/v1/memory/semantic", params={"external_id": "home"}).json()["content"] == "Lives in Bergen"
    assert me.delete("/v1/memory/semantic", params={"external_id": "home"}).status_code == 204
    assert me.get("/v1/memory/semantic", params={"external_id": "home"}).status_code == 404
    assert me.get("/v1/memory/semantic").status_code == 400
    assert me.get("/v1/memory/semantic", params={"content_hash": "xyz"}).status_code == 400


def test_close_promotes_redacted_and_blocks_sensitive(me, uid):
    create(me, "s")
    ns = ["user", uid, "sessions", "s"]
    for key, value in (("contact", {"content": "Email me at dana@example.org", "importance": 0.9}),
                       ("secret", {"content": "Dana's diagnosis", "importance": 0.9, "private": True}),
                       ("minor", {"content": "likes jazz", "importance": 0.3})):
        assert me.put("/v1/memories", json={"namespace": ns, "key": key, "value": value}).status_code == 200
    first = me.post(path("s", "close")).json()
    assert (first["promoted"], first["blocked"], first["deleted"]) == (1, 1, False)
    again = me.post(path("s", "close")).json()
    assert (again["promoted"], again["blocked"]) == (0, 1)
    found = me.post("/v1/memories/search", json={"namespace_prefix": ["user", uid, "memories"]}).json()["items"]
    assert [i["value"]["content"] for i in found] == ["Email me at [REDACTED_EMAIL]"]
    assert found[0]["value"]["promoted_from"]["key"] == "contact"
    assert me.post(path("s", "messages"), json={"role": "user", "content": "late"}).status_code == 409


def test_a_message_written_over_through_the_store_api_lists_without_its_odd_fields(me, uid):
    create(me, "odd")
    assert me.post(path("odd", "messages"), json={"role": "user", "content": "hi"}).status_code in (200, 201)
    ns = ["user", uid, "sessions", "odd", "messages"]
    odd = {"role": ["user"], "content": {"text": "x"}, "name": 5, "correlation_id": 7}
    assert me.put("/v1/memories", json={"namespace": ns, "key": "000000000002", "value": odd}).status_code == 200
    r = me.get(path("odd", "messages"))
    assert r.status_code == 200, r.text
    listed = r.json()["messages"]
    assert [(m["seq"], m["role"], m["content"], m["name"], m["correlation_id"]) for m in listed] == [
        (1, "user", "hi", None, None), (2, "", "", None, None)]


@pytest.mark.slow
def test_the_conversation_survives_a_restart(tmp_path):
    """Seed 004 US2: the conversation and its messages are persisted; a new session later finds
    the previous conversation. (A store that fails is a 503 with nothing written: the contract
    suite injects the failure, tests/contract/test_sessions.py.)"""
    data_dir = tmp_path / "data"
    tenant, user = unique_tenant("conv"), "carol"
    server = start_server(data_dir)
    try:
        with client_for(server, user, tenant=tenant) as me:
            create(me, "monday", title="Planning")
            say(me, "monday", "Book the Porto hotel for the 12th")
            say(me, "monday", "Booked: Hotel Ribeira, 12th to 14th", role="assistant")
    finally:
        stop_server(server)
    server = start_server(data_dir)
    try:
        with client_for(server, user, tenant=tenant) as me:
            create(me, "tuesday")  # a new session; the previous conversation is still there
            listed = [s["session_id"] for s in me.get("/v1/memory/sessions").json()["sessions"]]
            assert listed == ["tuesday", "monday"]
            got = me.get(path("monday", "messages")).json()["messages"]
            assert [(m["seq"], m["role"], m["content"]) for m in got] == [
                (1, "user", "Book the Porto hotel for the 12th"),
                (2, "assistant", "Booked: Hotel Ribeira, 12th to 14th")]
            assert say(me, "monday", "Thanks!")["seq"] == 3
    finally:
        stop_server(server)
