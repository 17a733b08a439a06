"""`MemsvcClient.remember/recall/get/delete` and the agent tools without a server: the requests they
send, and `query_memory` failing closed on every kind of failure. Requests go to an in-process
`httpx.MockTransport`; nothing touches the network."""

from __future__ import annotations

import asyncio
import json

import httpx
import pytest
from langchain_core.messages import ToolMessage

import memsvc_client.store as lg
from memsvc_client import AsyncMemsvcClient, AuthError, InvalidArgumentError, MemsvcClient, NotFoundError
from memsvc_client.tools import MemoryTools, langchain_tools, openai_tool, tool_specs

URL = "http://memsvc.test"
RECALLED = {
    "memories": [
        {"id": "m1", "namespace": ["user", "alice", "memories"], "key": "k1", "layer": "user",
         "content": "Prefers window seats on flights", "type": "preference", "relevance": 0.81, "match": 0.9,
         "importance": 0.5, "pinned": False, "tags": ["travel"], "category": "travel", "source": None,
         "created_at": "2026-01-01T00:00:00Z", "updated_at": "2026-01-01T00:00:00Z"},
    ],
    "metadata": {"count": 1, "total_count": 3, "truncated": False, "token_count": 6, "token_budget": 1000,
                 "searched_layers": ["user", "company"], "query_embedding_ms": 3.1, "retrieval_ms": 4.2,
                 "degraded": True},
}
REMEMBERED = {
    "action": "created",
    "memory": {"id": "m1", "namespace": ["user", "alice", "memories"], "key": "k1",
               "value": {"content": "Prefers window seats on flights", "type": "preference"},
               "created_at": "2026-01-01T00:00:00Z", "updated_at": "2026-01-01T00:00:00Z", "version": 1},
    "neighbors": [],
    "judge": {"asked": False, "same_fact": None},
}


class Service:
    """A MockTransport handler: one answer (a response, or an exception to raise) for every request."""

    def __init__(self, answer):
        self.answer = answer
        self.requests: list[httpx.Request] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        if isinstance(self.answer, Exception):
            raise self.answer
        # a fresh copy: a response object is read (and closed) by the request it answers
        return httpx.Response(self.answer.status_code, headers=self.answer.headers, content=self.answer.content)

    def body(self, i=-1) -> dict:
        return json.loads(self.requests[i].content)


def error(status, code, *, retryable=False):
    return httpx.Response(status, json={"error": {"code": code, "message": f"{code} happened",
                                                  "retryable": retryable, "details": {}}})


def client_for(service: Service, **kw) -> MemsvcClient:
    transport = httpx.MockTransport(service)  # serves the sync and the async calls alike
    return MemsvcClient(URL, "tok", transport=transport, async_transport=transport, backoff=0.001, max_retries=1,
                        **kw)


@pytest.fixture(autouse=True)
def no_sleep(monkeypatch):
    monkeypatch.setattr(lg, "_sleep", lambda delay: None)


def closed(code: str) -> dict:
    return {"memories": [], "metadata": {"count": 0, "error": code}}


# -- the client -------------------------------------------------------------------------------


def test_remember_sends_the_contract_defaults_and_returns_the_answer():
    service = Service(httpx.Response(200, json=REMEMBERED))
    with client_for(service) as client:
        assert client.remember("Prefers window seats") == REMEMBERED
        request = service.requests[0]
        assert (request.method, request.url.path) == ("POST", "/v1/memories/remember")
        assert request.headers["authorization"] == "Bearer tok"
        assert service.body() == {"content": "Prefers window seats", "type": "fact", "kind": "semantic",
                                  "importance": 0.5, "pinned": False, "consolidate": True, "wait": True}
        client.remember("Use uv", type="decision", kind="episodic", layer="project",
                        identifiers={"project_id": "p1"}, category="tooling", tags=("python",), importance=0.9,
                        pinned=True, source="chat", ttl_seconds=60, consolidate=False, wait=False)
        assert service.body() == {"content": "Use uv", "type": "decision", "kind": "episodic", "layer": "project",
                                  "identifiers": {"project_id": "p1"}, "category": "tooling", "tags": ["python"],
                                  "importance": 0.9, "pinned": True, "source": "chat", "ttl_seconds": 60,
                                  "consolidate": False, "wait": False}
        client.remember("x", namespace=["team", "t1"])
        assert service.body()["namespace"] == ["team", "t1"] and "layer" not in service.body()


def test_recall_sends_the_contract_defaults_and_returns_the_answer():
    service = Service(httpx.Response(200, json=RECALLED))
    with client_for(service) as client:
        assert client.recall("seat preference") == RECALLED
        assert service.requests[0].url.path == "/v1/memories/recall"
        assert service.body() == {"query": "seat preference", "limit": 10, "min_score": 0.3, "token_budget": 1000,
                                  "mode": "hybrid", "order": "relevance", "include_superseded": False}
        client.recall("q", layers=["agent", "user"], identifiers={"agent_id": "a"}, types=["fact"], limit=5,
                      min_score=0.5, token_budget=200, mode="keyword", order="precedence", include_superseded=True)
        assert service.body() == {"query": "q", "layers": ["agent", "user"], "identifiers": {"agent_id": "a"},
                                  "types": ["fact"], "limit": 5, "min_score": 0.5, "token_budget": 200,
                                  "mode": "keyword", "order": "precedence", "include_superseded": True}
        with pytest.raises(TypeError, match="unexpected field"):
            client.recall("q", namespace=["user", "a"])  # namespace_prefix is the recall field
        assert len(service.requests) == 2


def test_feedback_sends_the_id_and_signal_and_returns_the_answer():
    answer = {"signal": "useful", "previous_id": "m1", "memory": {**REMEMBERED["memory"], "id": "m2", "version": 2}}
    service = Service(httpx.Response(200, json=answer))
    with client_for(service) as client:
        assert client.feedback("m1", "useful") == answer
        request = service.requests[0]
        assert (request.method, request.url.path) == ("POST", "/v1/memories/feedback")
        assert service.body() == {"id": "m1", "signal": "useful"}
        client.feedback("m2", "outdated", note="moved")
        assert service.body() == {"id": "m2", "signal": "outdated", "note": "moved"}
        service.answer = error(404, "NOT_FOUND")
        with pytest.raises(NotFoundError):
            client.feedback("m1", "wrong")

    async def run():
        service.answer = httpx.Response(200, json=answer)
        async_client = AsyncMemsvcClient(store=client_for(service).store)
        assert await async_client.feedback("m1", "wrong", note="no") == answer
        await async_client.aclose()

    asyncio.run(run())
    assert service.body() == {"id": "m1", "signal": "wrong", "note": "no"}


def test_get_and_delete_address_one_item():
    service = Service(httpx.Response(200, json=REMEMBERED["memory"]))
    with client_for(service) as client:
        assert client.get(["user", "alice", "memories"], "k 1") == REMEMBERED["memory"]
        assert str(service.requests[0].url) == URL + "/v1/memories?ns=user&ns=alice&ns=memories&key=k%201"
        service.answer = httpx.Response(204)
        assert client.delete(["user", "alice", "memories"], "k 1") is None
        assert service.requests[1].method == "DELETE"
        service.answer = error(404, "NOT_FOUND")
        with pytest.raises(NotFoundError):
            client.get(["user", "alice", "memories"], "k 1")


def test_the_client_raises_the_stores_errors():
    service = Service(error(400, "MISSING_IDENTIFIER"))
    with client_for(service) as client, pytest.raises(InvalidArgumentError) as caught:
        client.recall("q", layers=["agent"])
    assert caught.value.code == "MISSING_IDENTIFIER" and caught.value.status == 400


def test_the_async_client_sends_the_same_requests():
    service = Service(httpx.Response(200, json=RECALLED))
    sync = client_for(service)
    client = AsyncMemsvcClient(store=sync.store)

    async def run():
        answer = await client.recall("seat preference", limit=3)
        service.answer = error(403, "FORBIDDEN")
        with pytest.raises(AuthError):
            await client.remember("x")
        service.answer = httpx.Response(204)
        await client.delete(["user", "alice"], "k")
        await client.aclose()
        return answer

    assert asyncio.run(run()) == RECALLED
    assert json.loads(service.requests[0].content)["limit"] == 3
    assert [r.method for r in service.requests] == ["POST", "POST", "DELETE"]


# -- query_memory -----------------------------------------------------------------------------


def test_query_memory_sends_the_scope_and_answers_what_the_agent_needs():
    service = Service(httpx.Response(200, json=RECALLED))
    tools = MemoryTools(client_for(service), identifiers={"agent_id": "travel"}, layers=["agent", "user"],
                        token_budget=300, limit=5)
    answer = tools.query_memory("seat preference", types=["preference"])
    assert service.body() == {"query": "seat preference", "types": ["preference"], "layers": ["agent", "user"],
                              "identifiers": {"agent_id": "travel"}, "limit": 5, "min_score": 0.3,
                              "token_budget": 300, "mode": "hybrid", "order": "relevance",
                              "include_superseded": False}
    assert answer == {
        "memories": [{"id": "m1", "namespace": ["user", "alice", "memories"], "key": "k1", "layer": "user",
                      "content": "Prefers window seats on flights", "type": "preference", "relevance": 0.81,
                      "tags": ["travel"], "source": None, "created_at": "2026-01-01T00:00:00Z"}],
        "metadata": {"count": 1, "total_count": 3, "truncated": False, "token_count": 6, "degraded": True},
    }


FAILURES = {
    "error envelope": (error(403, "FORBIDDEN"), "FORBIDDEN"),
    "missing identifier": (error(400, "MISSING_IDENTIFIER"), "MISSING_IDENTIFIER"),
    "rate limited": (error(429, "RATE_LIMITED", retryable=True), "RATE_LIMITED"),
    "server error": (error(500, "INTERNAL"), "INTERNAL"),
    "gateway html": (httpx.Response(502, text="<html>Bad Gateway</html>"), "HTTP_502"),
    "no connection": (httpx.ConnectError("connection refused"), "UNAVAILABLE"),
    "timeout": (httpx.ReadTimeout("timed out"), "TIMEOUT"),
    "not json": (httpx.Response(200, text="<html>oops</html>"), "BAD_RESPONSE"),
    "not the contract": (httpx.Response(200, json={"items": []}), "BAD_RESPONSE"),
    "memory without content": (httpx.Response(200, json={"memories": [{"key": "k"}]}), "BAD_RESPONSE"),
    "empty body": (httpx.Response(200), "BAD_RESPONSE"),
}


@pytest.mark.parametrize("failure", FAILURES.values(), ids=FAILURES.keys())
def test_query_memory_fails_closed(failure):
    answer, code = failure
    service = Service(answer)
    tools = MemoryTools(client_for(service))
    assert tools.query_memory("anything") == closed(code)
    assert asyncio.run(tools.aquery_memory("anything")) == closed(code)
    assert service.requests, "the failure came from the service, not from the arguments"


@pytest.mark.parametrize("failure", FAILURES.values(), ids=FAILURES.keys())
def test_the_langchain_query_memory_never_raises_into_the_agent(failure):
    answer, code = failure
    query_memory, _ = langchain_tools(client_for(Service(answer)))
    message = query_memory.invoke({"type": "tool_call", "id": "c1", "name": "query_memory", "args": {"query": "x"}})
    assert isinstance(message, ToolMessage)
    assert json.loads(message.content) == closed(code)
    amessage = asyncio.run(query_memory.ainvoke({"type": "tool_call", "id": "c2", "name": "query_memory",
                                                 "args": {"query": "x"}}))
    assert json.loads(amessage.content) == closed(code)


@pytest.mark.parametrize("args", [{"query": ""}, {}, {"query": "x", "types": ["gossip"]}, {"query": 3}])
def test_arguments_the_model_got_wrong_fail_closed_before_any_request(args):
    service = Service(httpx.Response(200, json=RECALLED))
    client = client_for(service)
    query_memory, _ = langchain_tools(client)
    message = query_memory.invoke({"type": "tool_call", "id": "c1", "name": "query_memory", "args": args})
    assert json.loads(message.content) == closed("INVALID_ARGUMENT")
    spec = tool_specs(client)[0]
    assert spec["call"](args) == closed("INVALID_ARGUMENT")
    assert spec["call"]("{not json") == closed("INVALID_ARGUMENT")
    assert service.requests == []


def test_an_unexpected_exception_fails_closed_too(monkeypatch):
    tools = MemoryTools(client_for(Service(httpx.Response(200, json=RECALLED))))

    def broken(*args, **kwargs):
        raise RuntimeError("a bug in a layer below")

    monkeypatch.setattr(tools.client, "recall", broken)
    assert tools.query_memory("x") == closed("CLIENT_ERROR")


# -- remember ---------------------------------------------------------------------------------


def test_remember_writes_in_the_scope_and_answers_the_outcome():
    service = Service(httpx.Response(200, json=REMEMBERED))
    tools = MemoryTools(client_for(service), identifiers={"agent_id": "travel"}, layer="agent")
    answer = tools.remember("Prefers window seats on flights", type="preference", category="travel",
                            tags=["flights"], importance=0.7)
    assert service.body() == {"content": "Prefers window seats on flights", "type": "preference",
                              "kind": "semantic", "importance": 0.7, "pinned": False, "consolidate": True,
                              "wait": True, "category": "travel", "tags": ["flights"], "layer": "agent",
                              "identifiers": {"agent_id": "travel"}}
    assert answer == {"action": "created", "namespace": ["user", "alice", "memories"], "key": "k1"}


@pytest.mark.parametrize(
    "answer, code, retryable",
    [
        (error(422, "POLICY_VIOLATION"), "POLICY_VIOLATION", False),
        (error(429, "RATE_LIMITED", retryable=True), "RATE_LIMITED", True),
        (httpx.ConnectError("refused"), "UNAVAILABLE", True),
        (httpx.Response(200, json={"action": "created"}), "BAD_RESPONSE", False),
    ],
)
def test_remember_reports_a_failure_as_its_answer(answer, code, retryable):
    client = client_for(Service(answer))
    result = MemoryTools(client).remember("Prefers window seats")
    assert result["action"] == "failed" and result["error"] == code and result["retryable"] is retryable
    assert result["message"]
    _, remember = langchain_tools(client)
    message = remember.invoke({"type": "tool_call", "id": "c1", "name": "remember",
                               "args": {"content": "Prefers window seats"}})
    assert json.loads(message.content)["error"] == code


def test_remember_names_the_argument_the_model_got_wrong():
    service = Service(httpx.Response(200, json=REMEMBERED))
    spec = tool_specs(client_for(service))[1]
    result = spec["call"]({"content": "x", "importance": 7})
    assert result["action"] == "failed" and result["error"] == "INVALID_ARGUMENT"
    assert "importance" in result["message"]
    assert service.requests == []


# -- the specs --------------------------------------------------------------------------------


def test_tool_specs_are_json_schema_with_a_callable():
    service = Service(httpx.Response(200, json=RECALLED))
    query_memory, remember = tool_specs(client_for(service), identifiers={"agent_id": "a"})
    assert [query_memory["name"], remember["name"]] == ["query_memory", "remember"]
    schema = query_memory["input_schema"]
    assert schema["type"] == "object" and schema["required"] == ["query"]
    assert schema["properties"]["types"]["anyOf"][0]["items"]["enum"] == ["fact", "preference", "decision", "note"]
    assert "title" not in schema and "description" not in schema
    assert remember["input_schema"]["required"] == ["content"]
    json.dumps([{k: v for k, v in spec.items() if k not in ("call", "acall")} for spec in (query_memory, remember)])

    assert query_memory["call"]('{"query": "seat"}')["memories"][0]["content"] == "Prefers window seats on flights"
    assert asyncio.run(query_memory["acall"]({"query": "seat"}))["metadata"]["count"] == 1
    assert service.body()["identifiers"] == {"agent_id": "a"}
    assert openai_tool(query_memory) == {
        "type": "function",
        "function": {"name": "query_memory", "description": query_memory["description"], "parameters": schema},
    }


def test_langchain_tools_carry_the_schemas():
    query_memory, remember = langchain_tools(client_for(Service(httpx.Response(200, json=RECALLED))))
    assert (query_memory.name, remember.name) == ("query_memory", "remember")
    assert set(query_memory.args) == {"query", "types", "as_of", "known_at"}
    assert set(remember.args) == {"content", "type", "category", "tags", "importance"}
    assert "past conversations" in query_memory.description


def test_known_at_reaches_recall_and_search():
    """`known_at` (issue 25, transaction time): the tool and the client send it as given; the
    answer's `current` and `metadata.known_at` reach the agent."""
    historical = {"memories": [{**RECALLED["memories"][0], "current": False}],
                  "metadata": {**RECALLED["metadata"], "known_at": "2026-01-01T00:00:00.000000Z"}}
    service = Service(httpx.Response(200, json=historical))
    client = client_for(service)
    answer = MemoryTools(client).query_memory("seat", known_at="2026-01-01T00:00:00Z")
    assert service.body()["known_at"] == "2026-01-01T00:00:00Z"
    assert answer["memories"][0]["current"] is False
    assert answer["metadata"]["known_at"] == "2026-01-01T00:00:00.000000Z"
    MemoryTools(client).query_memory("seat")
    assert "known_at" not in service.body()
    client.search(["user", "alice"], query="seat", known_at="2026-01-01T00:00:00Z")
    assert service.body()["known_at"] == "2026-01-01T00:00:00Z"
