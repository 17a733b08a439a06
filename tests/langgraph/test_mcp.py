"""`memsvc mcp`: the memory tools over MCP, tested with the official SDK's own clients.

In process (`mcp.Client(server)`, the SDK's in-memory transport) against a mocked service: every
tool, and every failure as a tool error or, for `query_memory`, an empty answer. Over stdio
(`stdio_client` + `ClientSession`, spawning `memsvc mcp`) against the live local server."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import httpx
import pytest
from mcp import Client
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client

from memsvc_client import AsyncMemsvcClient, AwsSigV4Auth, ClientSettings
from memsvc_client.mcp_server import build_server, client_from_settings

ROOT = Path(__file__).resolve().parents[2]
TOOLS = {"query_memory", "remember", "get_memory", "forget", "learn_from_conversation", "memory_feedback"}
ITEM = {"id": "m1", "namespace": ["user", "alice", "memories"], "key": "k1",
        "value": {"content": "Prefers window seats", "type": "preference"}, "attributes": None,
        "created_at": "2026-01-01T00:00:00Z", "updated_at": "2026-01-01T00:00:00Z", "expires_at": None, "version": 1}


def error(status, code):
    return httpx.Response(status, json={"error": {"code": code, "message": f"{code} happened", "retryable": False,
                                                  "details": {}}})


class Routes:
    """A MockTransport handler answering by (method, path); an exception is raised instead."""

    def __init__(self, answers):
        self.answers = answers
        self.requests: list[httpx.Request] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        answer = self.answers[(request.method, request.url.path)]
        if isinstance(answer, Exception):
            raise answer
        return answer() if callable(answer) else answer


def server_for(routes: Routes, **scope):
    transport = httpx.MockTransport(routes)
    client = AsyncMemsvcClient("http://memsvc.test", "tok", async_transport=transport, max_retries=0)
    return build_server(client, **scope)


def text(result) -> str:
    return " ".join(block.text for block in result.content)


# -- in process -------------------------------------------------------------------------------


async def test_the_tools_and_their_schemas():
    async with Client(server_for(Routes({}))) as client:
        tools = {tool.name: tool for tool in (await client.list_tools()).tools}
    assert set(tools) == TOOLS
    assert tools["query_memory"].input_schema["required"] == ["query"]
    assert tools["query_memory"].description.startswith("Retrieve relevant memories")
    assert tools["remember"].input_schema["required"] == ["content"]
    assert tools["remember"].input_schema["properties"]["type"]["enum"] == ["fact", "preference", "decision", "note"]
    assert set(tools["get_memory"].input_schema["required"]) == {"namespace", "key"}
    assert set(tools["forget"].input_schema["required"]) == {"namespace", "key"}


async def test_each_tool_calls_its_route():
    routes = Routes({
        ("POST", "/v1/memories/recall"): lambda: httpx.Response(200, json={
            "memories": [{**ITEM, "layer": "user", "content": "Prefers window seats", "type": "preference",
                          "relevance": 0.8}],
            "metadata": {"count": 1, "truncated": False}}),
        ("POST", "/v1/memories/remember"): lambda: httpx.Response(200, json={"action": "created", "memory": ITEM}),
        ("GET", "/v1/memories"): lambda: httpx.Response(200, json=ITEM),
        ("DELETE", "/v1/memories"): lambda: httpx.Response(204),
    })
    async with Client(server_for(routes, identifiers={"agent_id": "travel"})) as client:
        found = await client.call_tool("query_memory", {"query": "seats", "types": ["preference"]})
        saved = await client.call_tool("remember", {"content": "Prefers window seats", "type": "preference"})
        item = await client.call_tool("get_memory", {"namespace": ITEM["namespace"], "key": "k1"})
        gone = await client.call_tool("forget", {"namespace": ITEM["namespace"], "key": "k1"})
    assert not any(r.is_error for r in (found, saved, item, gone))
    assert found.structured_content["memories"][0]["content"] == "Prefers window seats"
    assert json.loads(text(found)) == found.structured_content  # hosts without structured output read the text
    assert saved.structured_content == {"action": "created", "namespace": ITEM["namespace"], "key": "k1"}
    assert item.structured_content == ITEM
    assert gone.structured_content == {"deleted": True, "namespace": ITEM["namespace"], "key": "k1"}
    recall, remember, get, delete = routes.requests
    assert json.loads(recall.content)["identifiers"] == {"agent_id": "travel"}
    assert json.loads(recall.content)["types"] == ["preference"]
    assert json.loads(remember.content)["identifiers"] == {"agent_id": "travel"}
    assert str(get.url).endswith("?ns=user&ns=alice&ns=memories&key=k1")
    assert delete.method == "DELETE"


async def test_learn_from_conversation_and_feedback_call_their_routes():
    routes = Routes({
        ("POST", "/v1/memories/extract"): lambda: httpx.Response(200, json={"extractor": "deterministic", "memories": [
            {"action": "created", "memory": ITEM, "candidate": {"content": "User prefers window seats",
                                                                "type": "preference", "importance": 0.6,
                                                                "category": "travel", "source_seqs": [0]}}]}),
        ("POST", "/v1/memories/feedback"): lambda: httpx.Response(200, json={
            "signal": "useful", "memory": {**ITEM, "id": "m2"}, "previous_id": "m1"}),
    })
    async with Client(server_for(routes, identifiers={"agent_id": "travel"}, layer="agent")) as client:
        learnt = await client.call_tool("learn_from_conversation", {"messages": [
            {"role": "user", "content": "I always take a window seat"}, {"role": "assistant", "content": "Noted!"}]})
        rated = await client.call_tool("memory_feedback", {"id": "m1", "signal": "useful"})
        bad = await client.call_tool("memory_feedback", {"id": "m1", "signal": "great"})
    assert not learnt.is_error and not rated.is_error and bad.is_error
    assert learnt.structured_content == {"extractor": "deterministic", "memories": [
        {"action": "created", "type": "preference", "content": "User prefers window seats",
         "namespace": ITEM["namespace"], "key": "k1"}]}
    assert rated.structured_content == {"signal": "useful", "id": "m2"}
    extract, feedback = routes.requests
    assert json.loads(extract.content) == {"messages": [{"role": "user", "content": "I always take a window seat"},
                                                        {"role": "assistant", "content": "Noted!"}],
                                           "layer": "agent", "identifiers": {"agent_id": "travel"}, "wait": True}
    assert json.loads(feedback.content) == {"id": "m1", "signal": "useful"}


FAILURES = {
    "forbidden": (error(403, "FORBIDDEN"), "FORBIDDEN"),
    "policy violation": (error(422, "POLICY_VIOLATION"), "POLICY_VIOLATION"),
    "no connection": (httpx.ConnectError("refused"), "UNAVAILABLE"),
    "timeout": (httpx.ReadTimeout("slow"), "TIMEOUT"),
    "not json": (httpx.Response(200, text="<html>"), "BAD_RESPONSE"),
}


@pytest.mark.parametrize("failure", FAILURES.values(), ids=FAILURES.keys())
async def test_failures_are_tool_errors_and_query_memory_fails_closed(failure):
    answer, code = failure
    fresh = (lambda: httpx.Response(answer.status_code, content=answer.content, headers=answer.headers)) \
        if isinstance(answer, httpx.Response) else answer
    routes = Routes({(method, path): fresh for method, path in [
        ("POST", "/v1/memories/recall"), ("POST", "/v1/memories/remember"), ("GET", "/v1/memories"),
        ("DELETE", "/v1/memories")]})
    async with Client(server_for(routes)) as client:
        found = await client.call_tool("query_memory", {"query": "anything"})
        failed = [await client.call_tool("remember", {"content": "x"}),
                  await client.call_tool("get_memory", {"namespace": ["user", "a"], "key": "k"}),
                  await client.call_tool("forget", {"namespace": ["user", "a"], "key": "k"})]
        still_serving = await client.list_tools()
    assert not found.is_error
    assert found.structured_content == {"memories": [], "metadata": {"count": 0, "error": code}}
    for result in failed:
        assert result.is_error and f"{code}:" in text(result)
    if code == "BAD_RESPONSE":  # DELETE answers no body, so a body that is not JSON is no failure there
        assert [r.is_error for r in failed] == [True, True, True]
    assert {tool.name for tool in still_serving.tools} == TOOLS


async def test_a_missing_memory_and_bad_arguments_are_tool_errors():
    routes = Routes({("GET", "/v1/memories"): lambda: error(404, "NOT_FOUND")})
    async with Client(server_for(routes)) as client:
        missing = await client.call_tool("get_memory", {"namespace": ["user", "a"], "key": "k"})
        bad = await client.call_tool("remember", {"content": "x", "importance": 7})
        no_key = await client.call_tool("forget", {"namespace": ["user", "a"]})
    assert missing.is_error and "NOT_FOUND" in text(missing)
    assert bad.is_error and "importance" in text(bad)
    assert no_key.is_error and "key" in text(no_key)
    assert len(routes.requests) == 1  # bad arguments never reach the service


# -- configuration ----------------------------------------------------------------------------


def test_a_token_means_bearer_and_no_token_means_sigv4(monkeypatch, tmp_path):
    client = client_from_settings(ClientSettings(url="http://127.0.0.1:8000", token="jwt"))
    assert client.store.auth._token == "jwt"
    for name in ("AWS_PROFILE", "AWS_DEFAULT_PROFILE", "AWS_SESSION_TOKEN", "AWS_REGION", "AWS_DEFAULT_REGION"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIDEXAMPLE")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY")
    execute_api = "https://abc.execute-api.eu-west-1.amazonaws.com/prod"
    signed = client_from_settings(ClientSettings(url=execute_api, token=None))
    assert isinstance(signed.store.auth, AwsSigV4Auth) and signed.store.auth.region == "eu-west-1"
    with pytest.raises(ValueError, match="region"):
        client_from_settings(ClientSettings(url="https://memory.example.com", token=None))
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-2")
    custom = client_from_settings(ClientSettings(url="https://memory.example.com", token=None), tenant_id="acme")
    assert custom.store.auth.region == "us-east-2"
    assert custom.store._headers["X-Tenant-Id"] == "acme"
    with pytest.raises(ValueError, match="MEMORY_SERVICE_URL"):
        client_from_settings(ClientSettings(url=None, token="jwt"))


def test_memsvc_mcp_without_a_url_says_what_to_set():
    env = {k: v for k, v in os.environ.items() if k not in ("MEMORY_SERVICE_URL", "MEMORY_SERVICE_TOKEN")}
    done = subprocess.run([sys.executable, "-m", "memsvc.cli", "mcp"], env=env, cwd=ROOT, capture_output=True,
                          text=True, stdin=subprocess.DEVNULL, timeout=120)
    assert done.returncode == 2
    assert "memsvc-mcp: set MEMORY_SERVICE_URL" in done.stderr


# -- over stdio, against the live local server -------------------------------------------------


def stdio_params(url: str, token: str, *args: str) -> StdioServerParameters:
    env = {"MEMORY_SERVICE_URL": url, "MEMORY_SERVICE_TOKEN": token}
    if "PYTHONPATH" in os.environ:  # a worktree's own packages, as the test process sees them
        env["PYTHONPATH"] = os.environ["PYTHONPATH"]
    return StdioServerParameters(command=sys.executable, args=["-m", "memsvc.cli", "mcp", *args], env=env,
                                 cwd=str(ROOT))


@pytest.mark.slow
@pytest.mark.parametrize("live_server", ["local"], indirect=True)
async def test_memsvc_mcp_over_stdio(live_server, uid, tmp_path):
    """Needs the `remember` and `recall` routes."""
    content = "I prefer aisle seats on long flights"
    with open(tmp_path / "mcp.log", "w") as errlog:
        async with stdio_client(stdio_params(live_server.url, live_server.token(uid)), errlog=errlog) as (read, write):
            async with ClientSession(read, write) as session:
                await session.initialize()
                assert {tool.name for tool in (await session.list_tools()).tools} == TOOLS
                never = await session.call_tool("get_memory", {"namespace": ["user", uid, "memories"], "key": "no"})
                assert never.is_error and "NOT_FOUND" in text(never)

                saved = await session.call_tool("remember", {"content": content, "type": "preference"})
                assert not saved.is_error, text(saved)
                assert saved.structured_content["action"] == "created"
                namespace, key = saved.structured_content["namespace"], saved.structured_content["key"]
                assert namespace == ["user", uid, "memories"]

                found = await session.call_tool("query_memory", {"query": "Which seat do I like on a flight?"})
                assert not found.is_error
                assert found.structured_content["memories"][0]["content"] == content
                assert "error" not in found.structured_content["metadata"]

                item = await session.call_tool("get_memory", {"namespace": namespace, "key": key})
                assert item.structured_content["value"]["content"] == content

                gone = await session.call_tool("forget", {"namespace": namespace, "key": key})
                assert gone.structured_content["deleted"] is True
                after = await session.call_tool("get_memory", {"namespace": namespace, "key": key})
                assert after.is_error and "NOT_FOUND" in text(after)


@pytest.mark.slow
@pytest.mark.parametrize("live_server", ["local"], indirect=True)
async def test_memsvc_mcp_with_a_bad_token_answers_errors_not_crashes(live_server, tmp_path):
    with open(tmp_path / "mcp.log", "w") as errlog:
        async with stdio_client(stdio_params(live_server.url, "not-a-jwt"), errlog=errlog) as (read, write):
            async with ClientSession(read, write) as session:
                await session.initialize()
                found = await session.call_tool("query_memory", {"query": "anything"})
                item = await session.call_tool("get_memory", {"namespace": ["user", "x"], "key": "k"})
                assert {tool.name for tool in (await session.list_tools()).tools} == TOOLS  # still serving
    assert found.structured_content == {"memories": [], "metadata": {"count": 0, "error": "UNAUTHORIZED"}}
    assert item.is_error and "UNAUTHORIZED" in text(item)
