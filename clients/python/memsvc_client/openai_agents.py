"""`query_memory` and `remember` as function tools of the OpenAI Agents SDK (`openai-agents`,
`pip install 'memsvc-client[openai-agents]'`):

    from agents import Agent
    from memsvc_client import MemsvcClient
    from memsvc_client.openai_agents import openai_agents_tools

    agent = Agent(name="assistant", tools=openai_agents_tools(MemsvcClient(), identifiers={"agent_id": "travel"}))

They are `tool_specs`' tools: the same descriptions, argument schemas and answers as the LangChain
tools and the MCP server. `query_memory` fails closed (an empty answer with `metadata.error`) and
`remember` reports a failure as `{"action": "failed", ...}`; neither raises, so the model reads
what happened and the run goes on. Arguments the model gets wrong come back as those answers too.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from typing import Any

from memsvc_client.client import AsyncMemsvcClient, MemsvcClient
from memsvc_client.tools import tool_specs

__all__ = ["openai_agents_tools"]


def openai_agents_tools(client: MemsvcClient | AsyncMemsvcClient, **scope: Any) -> list[Any]:
    """`query_memory` and `remember` as `agents.FunctionTool`s, for `Agent(tools=...)`. `scope`:
    as `MemoryTools` takes it (`identifiers`, `layers`, `layer`, `limit`, `min_score`,
    `token_budget`). Needs `openai-agents` (`pip install 'memsvc-client[openai-agents]'`)."""
    try:
        from agents import FunctionTool
    except ImportError as exc:  # pragma: no cover - the extra is installed wherever the tests run
        raise ImportError("openai_agents_tools needs openai-agents: "
                          "pip install 'memsvc-client[openai-agents]'") from exc

    # Not strict: the schemas have optional arguments with defaults, which OpenAI's strict mode
    # would make required (and nullable) for the model.
    return [FunctionTool(name=spec["name"], description=spec["description"], params_json_schema=spec["input_schema"],
                         on_invoke_tool=_invoker(spec["acall"]), strict_json_schema=False)
            for spec in tool_specs(client, **scope)]


def _invoker(acall: Callable[[str], Awaitable[dict[str, Any]]]) -> Callable[[Any, str], Awaitable[str]]:
    async def invoke(context: Any, arguments: str) -> str:
        """The SDK passes the model's arguments as the JSON text it wrote; the answer goes back to the
        model as JSON text."""
        return json.dumps(await acall(arguments), ensure_ascii=False)

    return invoke
