"""The OpenAI Agents SDK tools (`memsvc_client.openai_agents`), against the live servers:
examples/openai_agents_memory.py saves a preference with `remember` in one run and uses it through
`query_memory` in another; the tools are `tool_specs`' tools; bad arguments and failures come back
to the model as answers, never as exceptions. Offline: a scripted model, tracing off."""

from __future__ import annotations

import asyncio
import importlib.util
import json
import sys
from pathlib import Path

import pytest
from agents import FunctionTool

from memsvc_client import MemsvcClient, tool_specs
from memsvc_client.openai_agents import openai_agents_tools
from memsvc_client.tools import QUERY_MEMORY_DESCRIPTION, REMEMBER_DESCRIPTION

pytestmark = pytest.mark.slow

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "openai_agents_memory.py"


def _example():
    spec = importlib.util.spec_from_file_location("openai_agents_memory_example", EXAMPLE)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up while the file runs
    spec.loader.exec_module(module)
    return module


@pytest.fixture
def client(live_server, uid):
    with MemsvcClient(live_server.url, live_server.token(uid)) as c:
        yield c


def _invoke(tool: FunctionTool, arguments: str) -> dict:
    return json.loads(asyncio.run(tool.on_invoke_tool(None, arguments)))


def test_the_example_remembers_in_one_run_and_recalls_in_another(client):
    said, asked = _example().main(client, quiet=True)
    assert (said.tools, said.reply) == (["remember"], "Noted.")
    assert (asked.tools, asked.reply) == (["query_memory"], "From memory: Prefers window seats on flights")
    saved = client.recall("seat preference on flights", types=["preference"])["memories"]
    assert [(m["content"], m["type"]) for m in saved] == [("Prefers window seats on flights", "preference")]


def test_the_tools_are_the_tool_specs(client):
    tools = openai_agents_tools(client, identifiers={"agent_id": "travel"})
    specs = tool_specs(client)
    assert all(isinstance(t, FunctionTool) and not t.strict_json_schema for t in tools)
    assert [(t.name, t.description, t.params_json_schema) for t in tools] == [
        (s["name"], s["description"], s["input_schema"]) for s in specs]
    assert [t.description for t in tools] == [QUERY_MEMORY_DESCRIPTION, REMEMBER_DESCRIPTION]


def test_the_scope_is_the_applications(client, uid):
    """The application fixes where memories go (layer, identifiers); the model only says what."""
    query_memory, remember = openai_agents_tools(client, identifiers={"agent_id": "travel"}, layer="agent")
    saved = _invoke(remember, json.dumps({"content": "Books aisle seats for long flights", "type": "preference"}))
    assert saved["action"] == "created" and saved["namespace"][:4] == ["user", uid, "agents", "travel"]
    found = _invoke(query_memory, json.dumps({"query": "aisle seats"}))
    assert [m["content"] for m in found["memories"]] == ["Books aisle seats for long flights"]


def test_bad_arguments_and_failures_are_answers_not_exceptions(live_server, client):
    query_memory, remember = openai_agents_tools(client)
    assert _invoke(query_memory, "not json") == {"memories": [], "metadata": {"count": 0, "error": "INVALID_ARGUMENT"}}
    assert _invoke(query_memory, json.dumps({"query": ""}))["metadata"]["error"] == "INVALID_ARGUMENT"
    failed = _invoke(remember, json.dumps({"content": "x", "importance": 7}))
    assert (failed["action"], failed["error"]) == ("failed", "INVALID_ARGUMENT")
    with MemsvcClient(live_server.url, "not-a-token") as stranger:
        closed, refused = openai_agents_tools(stranger)
        assert _invoke(closed, json.dumps({"query": "seats"}))["metadata"]["error"] == "UNAUTHORIZED"
        assert _invoke(refused, json.dumps({"content": "Likes tea"}))["error"] == "UNAUTHORIZED"
