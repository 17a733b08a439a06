"""The agent tools against the live servers (both backends), through the real routes:
`query_memory` needs `POST /v1/memories/recall`, `remember` needs `POST /v1/memories/remember`."""

from __future__ import annotations

import asyncio

import pytest

from memsvc_client import MemsvcClient, tool_specs
from memsvc_client.tools import MemoryTools, langchain_tools

pytestmark = pytest.mark.slow


def typed(content: str, type: str) -> dict:
    return {"content": content, "type": type, "kind": "semantic", "importance": 0.5, "pinned": False, "tags": [],
            "category": None, "source": None}


@pytest.fixture
def client(live_server, uid):
    with MemsvcClient(live_server.url, live_server.token(uid)) as client:
        yield client


def test_query_memory_recalls_typed_memories_by_meaning(client, uid):
    """Needs the `recall` route."""
    memories = ("user", uid, "memories")
    client.store.put(memories, "seat", typed("I prefer window seats on flights", "preference"))
    client.store.put(memories, "allergy", typed("I am allergic to peanuts", "fact"))
    tools = MemoryTools(client)

    found = tools.query_memory("Which seat should I book on my flight?")
    assert "error" not in found["metadata"]
    assert found["memories"][0]["content"] == "I prefer window seats on flights"
    assert (found["memories"][0]["namespace"], found["memories"][0]["key"]) == (list(memories), "seat")
    assert found["metadata"]["count"] == len(found["memories"])
    assert 0 < found["memories"][0]["relevance"] <= 1

    only_facts = tools.query_memory("Which seat should I book on my flight?", types=["fact"])
    assert "I prefer window seats on flights" not in [m["content"] for m in only_facts["memories"]]

    asked = asyncio.run(tools.aquery_memory("What food should I avoid?"))
    assert asked["memories"][0]["content"] == "I am allergic to peanuts"


def test_query_memory_fails_closed_on_the_services_own_errors(client, live_server):
    """Needs the `recall` route: the agent layer's identifier is missing, so the service answers
    400 MISSING_IDENTIFIER, and the tool an empty answer naming it."""
    assert MemoryTools(client, layers=["agent"]).query_memory("anything") == {
        "memories": [], "metadata": {"count": 0, "error": "MISSING_IDENTIFIER"}}
    with MemsvcClient(live_server.url, "not-a-jwt") as stranger:
        query_memory, _ = langchain_tools(stranger)
        assert query_memory.invoke({"query": "anything"}) == {
            "memories": [], "metadata": {"count": 0, "error": "UNAUTHORIZED"}}


def test_what_remember_saves_query_memory_finds(client, uid):
    """Needs the `remember` and `recall` routes."""
    query_memory, remember = tool_specs(client)
    saved = remember["call"]({"content": "Our team deploys on Tuesdays only", "type": "decision",
                              "tags": ["deploy"], "importance": 0.8})
    assert saved["action"] == "created" and saved["namespace"] == ["user", uid, "memories"]
    assert remember["call"]({"content": "Our team deploys on Tuesdays only", "type": "decision"})["action"] \
        == "unchanged"

    found = query_memory["call"]({"query": "When do we deploy?", "types": ["decision"]})
    top = found["memories"][0]
    assert (top["content"], top["type"], top["key"]) == ("Our team deploys on Tuesdays only", "decision", saved["key"])
    assert len(found["memories"]) == found["metadata"]["count"]
    assert top["tags"] == ["deploy"]
