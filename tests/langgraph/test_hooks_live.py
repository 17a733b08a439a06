"""The LangGraph hooks against the live servers (both backends): `recall_hook` needs
`POST /v1/memories/recall`, `append_turn_hook` the session routes. The model is scripted; nothing
but the memory service is touched."""

from __future__ import annotations

import asyncio
import time

import pytest
from langchain_core.messages import AIMessage, SystemMessage

from memsvc_client import AsyncMemsvcClient, MemsvcClient, append_turn_hook, recall_hook

from tests.langgraph.hook_agent import ScriptedModel, agent, looks_up_then_answers

pytestmark = pytest.mark.slow


@pytest.fixture
def client(live_server, uid):
    with MemsvcClient(live_server.url, live_server.token(uid)) as client:
        yield client


def run(thread: str) -> dict:
    return {"configurable": {"thread_id": thread}}


def test_a_remembered_memory_reaches_the_models_input(client):
    client.remember("I prefer window seats on flights", type="preference")
    model = ScriptedModel(replies=[AIMessage("A window seat.")])
    agent(model, pre_model_hook=recall_hook(client)).invoke(
        {"messages": [("user", "Which seat should I book on my flight?")]}, run("t"))
    [given] = model.inputs
    assert isinstance(given[0], SystemMessage)
    assert "- (preference) I prefer window seats on flights" in given[0].content.splitlines()


def test_the_turn_is_in_the_session_exactly_once(client):
    client.create_session("trip")
    model = ScriptedModel(replies=looks_up_then_answers("Flights leave at 09:10 and 17:40."))
    graph = agent(model, post_model_hook=append_turn_hook(client))
    graph.invoke({"messages": [("user", "When can I fly to Lisbon?")]}, run("trip"))
    assert len(model.inputs) == 2  # two model calls, two post-model steps
    model.replies = [AIMessage("The same times.")]
    graph.invoke({"messages": [("user", "And tomorrow?")]}, run("trip"))

    listed = client.get_messages("trip")["messages"]
    assert [(m["seq"], m["role"], m["content"]) for m in listed] == [
        (1, "user", "When can I fly to Lisbon?"), (2, "assistant", "Flights leave at 09:10 and 17:40."),
        (3, "user", "And tomorrow?"), (4, "assistant", "The same times.")]


def test_the_async_hooks_in_an_async_graph(live_server, uid):
    async def go() -> ScriptedModel:
        async with AsyncMemsvcClient(live_server.url, live_server.token(uid)) as aclient:
            await aclient.remember("I am allergic to peanuts")
            await aclient.create_session("dinner")
            model = ScriptedModel(replies=[AIMessage("Avoid peanuts.")])
            graph = agent(model, pre_model_hook=recall_hook(aclient), post_model_hook=append_turn_hook(aclient))
            await graph.ainvoke({"messages": [("user", "What food should I avoid?")]}, run("dinner"))
            listed = (await aclient.get_messages("dinner"))["messages"]
            assert [m["content"] for m in listed] == ["What food should I avoid?", "Avoid peanuts."]
            return model

    model = asyncio.run(go())
    assert "I am allergic to peanuts" in model.inputs[0][0].content


def sync_index(live_server) -> None:
    """Messages are indexed off the append's path: index what is pending now (the tenant's admin)."""
    with MemsvcClient(live_server.url, live_server.token("indexer", roles=["admin"])) as admin:
        admin.index_trigger()
        deadline = time.monotonic() + 30
        while admin.index_status()["pending"]:
            assert time.monotonic() < deadline, "the index is still pending after 30 s"
            admin.index_trigger()


def test_a_turn_appended_in_one_thread_is_recalled_in_another(client, live_server, uid):
    client.create_session("monday")
    # The user's whole tree: their sessions' messages too (the user layer alone holds no message).
    hooks = {"pre_model_hook": recall_hook(client, namespace_prefix=["user", uid]),
             "post_model_hook": append_turn_hook(client)}
    agent(ScriptedModel(replies=[AIMessage("Noted.")]), **hooks).invoke(
        {"messages": [("user", "I prefer window seats on flights.")]}, run("monday"))
    sync_index(live_server)

    model = ScriptedModel(replies=[AIMessage("A window seat.")])
    client.create_session("friday")
    agent(model, **hooks).invoke({"messages": [("user", "Which seat should I book on my flight?")]}, run("friday"))
    assert "- (said earlier) I prefer window seats on flights." in model.inputs[0][0].content.splitlines()


def test_another_users_memories_never_reach_the_hooks_context(client, live_server, uid):
    with MemsvcClient(live_server.url, live_server.token(uid + "x")) as other:
        other.remember("I prefer aisle seats on flights", type="preference")
    client.remember("I prefer window seats on flights", type="preference")

    for hook in (recall_hook(client), recall_hook(client, identifiers={"user_id": uid + "x"}),
                 recall_hook(client, namespace_prefix=["user", uid + "x"])):
        model = ScriptedModel(replies=[AIMessage("Some seat.")])
        agent(model, pre_model_hook=hook).invoke({"messages": [("user", "Which seat do I prefer on flights?")]},
                                                 run("t"))
        assert "aisle" not in "\n".join(str(m.content) for m in model.inputs[0])
