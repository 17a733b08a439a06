"""`MemsvcClient` / `AsyncMemsvcClient`'s session, message and semantic-upsert methods against
the live servers (both backends)."""

from __future__ import annotations

import asyncio
import time

import pytest

from memsvc_client import AsyncMemsvcClient, MemsvcClient
from memsvc_client import InvalidArgumentError, MemsvcError, NotFoundError

pytestmark = pytest.mark.slow


@pytest.fixture
def client(live_server, uid):
    with MemsvcClient(live_server.url, live_server.token(uid)) as client:
        yield client


def test_sessions_and_messages(client):
    created = client.create_session("trip/2026", agent_id="planner", title="Trip", metadata={"budget": 900})
    assert created["version"] == 1
    assert client.add_message("trip/2026", "user", "Find me a hotel in Kyoto")["seq"] == 1
    assert client.add_message("trip/2026", "assistant", "Hotel Gion, 3 nights", correlation_id="c1",
                              name="Planner")["seq"] == 2
    got = client.get_messages("trip/2026", after_seq=1)
    assert [(m["seq"], m["correlation_id"], m["name"]) for m in got["messages"]] == [(2, "c1", "Planner")]
    assert [s["session_id"] for s in client.list_sessions(agent_id="planner")["sessions"]] == ["trip/2026"]
    updated = client.update_session("trip/2026", title="Kyoto", if_match=1)
    assert (updated["title"], updated["version"]) == ("Kyoto", 2)
    with pytest.raises(MemsvcError) as stale:
        client.update_session("trip/2026", title="stale", if_match=1)
    assert stale.value.status == 412
    assert client.close_session("trip/2026")["promoted"] == 0
    assert client.delete_session("trip/2026") is None
    with pytest.raises(NotFoundError):
        client.get_session("trip/2026")


def test_semantic_upsert(client):
    first = client.upsert_semantic("Allergic to shellfish", external_id="allergy", metadata={"src": "intake"})
    assert first["action"] == "created"
    assert client.upsert_semantic("Allergic to shellfish", external_id="allergy",
                                  metadata={"src": "intake"})["action"] == "unchanged"
    assert client.get_semantic(content_hash=first["content_hash"])["external_id"] == "allergy"
    client.delete_semantic(external_id="allergy")
    with pytest.raises(NotFoundError):
        client.get_semantic(external_id="allergy")
    with pytest.raises(InvalidArgumentError):
        client.get_semantic()


def test_async_client(live_server, uid):
    async def run() -> list[int]:
        async with AsyncMemsvcClient(live_server.url, live_server.token(uid)) as client:
            await client.create_session("async")
            seqs = await asyncio.gather(*(client.add_message("async", "user", f"m{i}") for i in range(5)))
            listed = await client.get_messages("async")
            assert [m["seq"] for m in listed["messages"]] == [1, 2, 3, 4, 5]
            return sorted(s["seq"] for s in seqs)

    assert asyncio.run(run()) == [1, 2, 3, 4, 5]


def test_feedback(client, live_server, uid):
    memory = client.remember("My favourite hiking trail is the Kalalau trail")["memory"]
    useful = client.feedback(memory["id"], "useful", note="it helped")
    assert (useful["previous_id"], useful["memory"]["value"]["importance"]) == (memory["id"], 0.6)
    with pytest.raises(NotFoundError):  # the id is no longer the current version
        client.feedback(memory["id"], "useful")
    with pytest.raises(InvalidArgumentError):
        client.feedback(useful["memory"]["id"], "great")  # type: ignore[arg-type]

    async def run() -> dict:
        async with AsyncMemsvcClient(live_server.url, live_server.token(uid)) as aclient:
            return await aclient.feedback(useful["memory"]["id"], "outdated")

    outdated = asyncio.run(run())
    assert "superseded" in outdated["memory"]["value"]["tags"]
    assert client.recall("favourite hiking trail Kalalau")["memories"] == []


def test_extract_and_profile(client, live_server, uid):
    chat = [{"role": "user", "content": "I am vegetarian and I live in Lisbon."},
            {"role": "assistant", "content": "Noted! Any allergies?"}]
    learnt = client.extract(chat)
    assert {m["candidate"]["content"] for m in learnt["memories"]} == {"User is vegetarian", "User lives in Lisbon"}
    assert {m["action"] for m in client.extract(chat)["memories"]} == {"unchanged"}
    queued = client.extract([{"role": "user", "content": "I work at Siemens."}], wait=False)
    assert queued["status"] == "accepted" and queued["job_id"]
    with pytest.raises(ValueError):
        client.extract([{"role": "robot", "content": "beep"}])  # refused before any request

    async def run() -> tuple[dict, dict]:
        async with AsyncMemsvcClient(live_server.url, live_server.token(uid)) as aclient:
            return await aclient.extract(chat[:1]), await aclient.profile(token_budget=200)

    again, profile = asyncio.run(run())
    assert {m["action"] for m in again["memories"]} == {"unchanged"}
    assert "User is vegetarian" in [item["content"] for item in profile["items"]]


def test_restore_and_include_archived(client):
    memory = client.remember("My favourite tea is genmaicha")["memory"]
    answer = client.restore(memory["id"])
    assert (answer["restored"], answer["memory"]["id"]) == (False, memory["id"])  # it was not archived
    found = client.recall("favourite tea genmaicha", include_archived=True)["memories"]
    assert [m["id"] for m in found] == [memory["id"]]
    with pytest.raises(NotFoundError):
        client.restore("00000000-0000-0000-0000-000000000000")


def test_reflect_as_an_admin(live_server, uid):
    with MemsvcClient(live_server.url, live_server.token(uid)) as client:
        client.remember("The user prefers green tea", type="preference")
        with pytest.raises(MemsvcError):  # a user may not trigger it
            client.reflect(uid)
    with MemsvcClient(live_server.url, live_server.token("root-" + uid, roles=["admin"])) as admin:
        run = admin.reflect(uid)
    assert (run["user_id"], run["examined"], run["done"]) == (uid, 1, True)


def _on_the_timeline(client: MemsvcClient, prefix: list[str]) -> None:
    """Wait until a write under `prefix` is on the timeline (on AWS it arrives through the stream, a
    moment later): one arriving after an erasure is a write that a repeated DELETE erases."""
    for _ in range(300):
        if client.events(prefix)["events"]:
            return
        time.sleep(0.1)
    raise AssertionError(f"nothing under {prefix} reached the timeline")


def test_erase_user_as_an_admin(live_server, uid):
    with MemsvcClient(live_server.url, live_server.token(uid)) as client:
        client.remember("The user prefers green tea", type="preference")
        _on_the_timeline(client, ["user", uid])
        with pytest.raises(MemsvcError):  # a user may not erase anyone
            client.erase_user(uid)
    with MemsvcClient(live_server.url, live_server.token("root-" + uid, roles=["admin"])) as admin:
        receipt = admin.erase_user(uid)
        assert admin.user_erasure(uid) == receipt == admin.erase_user(uid)
        with pytest.raises(InvalidArgumentError):
            admin.erase_user("x" * 257)
    assert (receipt["user_id"], receipt["status"], receipt["erased"]["memories"]) == (uid, "completed", 1)
    with MemsvcClient(live_server.url, live_server.token(uid)) as client:
        assert client.recall("green tea")["memories"] == []
