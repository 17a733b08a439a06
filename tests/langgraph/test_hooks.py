"""`add_messages` and the LangGraph hooks without a server: the requests they send, what the model
is given, and what the session gets. Requests go to an in-process `httpx.MockTransport`."""

from __future__ import annotations

import asyncio
import json

import httpx
import pytest
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, ToolMessage

import memsvc_client.store as lg
from memsvc_client import MemsvcClient, append_turn_hook, recall_hook
from memsvc_client.client import AsyncMemsvcClient
from memsvc_client.hooks import APPENDED_MARK, MEMORIES_HEADER

from tests.langgraph.hook_agent import ScriptedModel, agent, looks_up_then_answers

URL = "http://memsvc.test"
SEAT = {"id": "m1", "namespace": ["user", "alice", "memories"], "key": "k1", "layer": "user",
        "content": "Prefers window seats on flights", "type": "preference", "relevance": 0.8}
SAID = {"id": "m2", "namespace": ["user", "alice", "sessions", "s0", "messages"], "key": "000000000001",
        "layer": "session", "content": "I always fly TAP", "type": "message", "relevance": 0.6}


class Service:
    """A MockTransport handler: recall answers `recalled` (or `recall_error`), an append its seq."""

    def __init__(self, recalled=(), *, recall_error: int | None = None, append_error: int | None = None):
        self.recalled = list(recalled)
        self.recall_error = recall_error
        self.append_error = append_error
        self.requests: list[httpx.Request] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        if request.url.path == "/v1/memories/recall":
            if self.recall_error:
                return httpx.Response(self.recall_error, json={"error": {"code": "BOOM", "message": "boom"}})
            return httpx.Response(200, json={"memories": self.recalled, "metadata": {"count": len(self.recalled)}})
        if self.append_error:
            return httpx.Response(self.append_error, json={"error": {"code": "BOOM", "message": "boom"}})
        seq = len(self.appended())
        return httpx.Response(201, json={"message_id": f"id{seq}", "seq": seq, "created_at": "2026-01-01T00:00:00Z"})

    def appended(self) -> list[tuple[str, dict]]:
        return [(r.url.path, json.loads(r.content)) for r in self.requests if r.url.path.endswith("/messages")]

    def recall_bodies(self) -> list[dict]:
        return [json.loads(r.content) for r in self.requests if r.url.path == "/v1/memories/recall"]


def client_for(service: Service) -> MemsvcClient:
    transport = httpx.MockTransport(service)
    return MemsvcClient(URL, "tok", transport=transport, async_transport=transport, backoff=0.001, max_retries=0)


@pytest.fixture(autouse=True)
def no_sleep(monkeypatch):
    monkeypatch.setattr(lg, "_sleep", lambda delay: None)


def run(config_thread: str = "t1") -> dict:
    return {"configurable": {"thread_id": config_thread}}


# -- add_messages -----------------------------------------------------------------------------


def test_add_messages_appends_each_message_in_order_with_its_role():
    service = Service()
    with client_for(service) as client:
        answers = client.add_messages("trip-1", [
            {"role": "user", "content": "Hi", "name": "Ana"},
            HumanMessage("Book Lisbon"), AIMessage("Done", name="planner"), SystemMessage("Be brief"),
            ToolMessage("09:10", tool_call_id="c1", name="flight_times"),
            HumanMessage([{"type": "text", "text": "two "}, "blocks"]),
        ])
    assert [a["seq"] for a in answers] == [1, 2, 3, 4, 5, 6]
    assert service.appended() == [
        ("/v1/memory/sessions/trip-1/messages", {"role": "user", "content": "Hi", "name": "Ana"}),
        ("/v1/memory/sessions/trip-1/messages", {"role": "user", "content": "Book Lisbon"}),
        ("/v1/memory/sessions/trip-1/messages", {"role": "assistant", "content": "Done", "name": "planner"}),
        ("/v1/memory/sessions/trip-1/messages", {"role": "system", "content": "Be brief"}),
        ("/v1/memory/sessions/trip-1/messages", {"role": "tool", "content": "09:10", "name": "flight_times"}),
        ("/v1/memory/sessions/trip-1/messages", {"role": "user", "content": "two blocks"}),
    ]


@pytest.mark.parametrize("bad", [{"role": "human", "content": "x"}, {"role": "user", "content": ""},
                                 {"role": "user"}, AIMessage("", tool_calls=[{"name": "f", "args": {}, "id": "c"}])])
def test_add_messages_checks_every_message_before_sending_any(bad):
    service = Service()
    with client_for(service) as client, pytest.raises(ValueError):
        client.add_messages("s", [HumanMessage("fine"), bad])
    assert service.requests == []


def test_the_async_add_messages_sends_the_same_requests_in_order():
    service = Service()

    async def go():
        async with AsyncMemsvcClient(store=client_for(service).store) as client:
            return await client.add_messages("s", [HumanMessage("a"), AIMessage("b"), HumanMessage("c")])

    assert [a["seq"] for a in asyncio.run(go())] == [1, 2, 3]
    assert [body["content"] for _, body in service.appended()] == ["a", "b", "c"]


def test_add_messages_stops_at_the_first_failure():
    service = Service(append_error=409)
    with client_for(service) as client, pytest.raises(lg.MemsvcError):
        client.add_messages("s", [HumanMessage("a"), HumanMessage("b")])
    assert len(service.appended()) == 1


# -- recall_hook ------------------------------------------------------------------------------


def test_the_model_sees_the_recalled_memories_in_a_system_message_the_state_never_keeps():
    service = Service([SEAT, SAID])
    model = ScriptedModel(replies=[AIMessage("Window seat it is.")])
    with client_for(service) as client:
        graph = agent(model, pre_model_hook=recall_hook(client, identifiers={"agent_id": "travel"}, token_budget=200))
        state = graph.invoke({"messages": [("user", "Which seat should I book?")]}, run())

    [given] = model.inputs
    assert isinstance(given[0], SystemMessage)
    assert given[0].content == "\n".join([MEMORIES_HEADER, "- (preference) Prefers window seats on flights",
                                          "- (said earlier) I always fly TAP"])
    assert [m.content for m in given[1:]] == ["Which seat should I book?"]
    assert not any(isinstance(m, SystemMessage) for m in state["messages"])
    assert service.recall_bodies() == [{
        "query": "Which seat should I book?", "identifiers": {"agent_id": "travel"}, "token_budget": 200,
        "limit": 5, "min_score": 0.3, "mode": "hybrid", "order": "relevance", "include_superseded": False}]


def test_the_query_is_the_last_human_message_at_every_model_call():
    service = Service([SEAT])
    model = ScriptedModel(replies=looks_up_then_answers("At 09:10, window seat."))
    with client_for(service) as client:
        graph = agent(model, pre_model_hook=recall_hook(client, namespace_prefix=["user", "alice"]))
        graph.invoke({"messages": [("user", "When do I fly to Lisbon?")]}, run())
        graph.invoke({"messages": [("user", "And back?")]}, run())
    bodies = service.recall_bodies()
    assert [b["query"] for b in bodies] == ["When do I fly to Lisbon?"] * 2 + ["And back?"]
    assert bodies[0]["namespace_prefix"] == ["user", "alice"] and "identifiers" not in bodies[0]
    assert all(isinstance(given[0], SystemMessage) for given in model.inputs)


class MalformedRecall(Service):
    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        return httpx.Response(200, json={"memories": "not a list"})


@pytest.mark.parametrize("service", [Service([]), Service(recall_error=500), Service(recall_error=403),
                                     MalformedRecall()],
                         ids=["nothing recalled", "server error", "forbidden", "malformed answer"])
def test_no_memory_no_system_message_and_a_failed_recall_fails_closed(service):
    model = ScriptedModel(replies=[AIMessage("Any seat.")])
    with client_for(service) as client:
        state = agent(model, pre_model_hook=recall_hook(client)).invoke(
            {"messages": [("user", "Which seat?")]}, run())
    assert [m.type for m in model.inputs[0]] == ["human"]
    assert state["messages"][-1].content == "Any seat."


def test_the_async_recall_hook_runs_in_an_async_graph():
    service = Service([SEAT])
    model = ScriptedModel(replies=[AIMessage("Window.")])
    with client_for(service) as client:
        graph = agent(model, pre_model_hook=recall_hook(AsyncMemsvcClient(store=client.store)))
        asyncio.run(graph.ainvoke({"messages": [("user", "Which seat?")]}, run()))
    assert "Prefers window seats on flights" in model.inputs[0][0].content


# -- append_turn_hook -------------------------------------------------------------------------


def test_the_turn_is_appended_once_across_the_model_calls_and_runs():
    service = Service()
    model = ScriptedModel(replies=looks_up_then_answers("At 09:10."))
    with client_for(service) as client:
        graph = agent(model, post_model_hook=append_turn_hook(client))
        state = graph.invoke({"messages": [("user", "When do I fly to Lisbon?")]}, run("trip"))
        assert service.appended() == [
            ("/v1/memory/sessions/trip/messages", {"role": "user", "content": "When do I fly to Lisbon?"}),
            ("/v1/memory/sessions/trip/messages", {"role": "assistant", "content": "At 09:10."}),
        ]
        assert [m.response_metadata.get(APPENDED_MARK) for m in state["messages"]] == [1, None, None, 2]
        assert [m.type for m in state["messages"]] == ["human", "ai", "tool", "ai"]  # marked in place

        model.replies = [AIMessage("Same times.")]
        graph.invoke({"messages": [("user", "And tomorrow?")]}, run("trip"))
    assert [body["content"] for _, body in service.appended()] == [
        "When do I fly to Lisbon?", "At 09:10.", "And tomorrow?", "Same times."]


def test_the_session_can_be_fixed_and_the_async_hook_appends_the_same():
    service = Service()
    model = ScriptedModel(replies=looks_up_then_answers("At 09:10."))
    with client_for(service) as client:
        graph = agent(model, post_model_hook=append_turn_hook(AsyncMemsvcClient(store=client.store),
                                                              session_id="s-1"))
        asyncio.run(graph.ainvoke({"messages": [("user", "When?")]}, run("thread-is-not-the-session")))
    assert service.appended() == [("/v1/memory/sessions/s-1/messages", {"role": "user", "content": "When?"}),
                                  ("/v1/memory/sessions/s-1/messages", {"role": "assistant", "content": "At 09:10."})]


def test_a_failed_append_does_not_end_the_run_and_is_tried_again_at_the_next_model_call():
    service = Service(append_error=503)
    model = ScriptedModel(replies=looks_up_then_answers("At 09:10."))
    with client_for(service) as client:
        graph = agent(model, post_model_hook=append_turn_hook(client))
        state = graph.invoke({"messages": [("user", "When?")]}, run())
        assert state["messages"][-1].content == "At 09:10."
        assert [body["content"] for _, body in service.appended()] == ["When?", "When?"]  # each call tried again
        assert not any(APPENDED_MARK in m.response_metadata for m in state["messages"])


def test_without_a_session_id_or_thread_id_the_hook_says_what_it_needs():
    with client_for(Service()) as client:
        with pytest.raises(ValueError, match="thread_id"):
            append_turn_hook(client).invoke({"messages": [HumanMessage("hi", id="h1")]})
