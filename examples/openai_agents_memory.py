"""An OpenAI Agents SDK agent with memsvc's memory tools: in one conversation the user states a
preference and the agent saves it with `remember`; in another, with no history in common, the
agent looks it up with `query_memory` and uses it.

The tools are `memsvc_client.openai_agents.openai_agents_tools(client)`: plain `FunctionTool`s,
the same `query_memory` and `remember` as the LangChain tools and the MCP server.

No LLM is needed: `ScriptedModel` stands in for one (an `agents.Model`) with three fixed rules, so
the example runs offline, and tracing is off, so nothing is sent to OpenAI. Put a real model in
place of the scripted one (`Agent(model="gpt-...")`, with `OPENAI_API_KEY`) and nothing else
changes.

Run it against a local server (`make run` in another shell):

    MEMORY_SERVICE_URL=http://127.0.0.1:8000 \\
    MEMORY_SERVICE_TOKEN=$(.venv/bin/memsvc token --sub alice) \\
    .venv/bin/python examples/openai_agents_memory.py
"""

from __future__ import annotations

import argparse
import itertools
import json
import re
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

from agents import Agent, Model, ModelResponse, RunConfig, Runner, Usage
from openai.types.responses import ResponseFunctionToolCall, ResponseOutputMessage, ResponseOutputText

from memsvc_client import MemsvcClient
from memsvc_client.openai_agents import openai_agents_tools

CONVERSATIONS = [
    ("monday", "I prefer window seats on flights."),
    ("friday", "Which seat should I book on my flight to Lisbon?"),
]
_PREFERENCE = re.compile(r"^I prefer (?P<what>.+?)\.?$")
_ids = itertools.count(1)


class ScriptedModel(Model):
    """Not a language model: three rules in a model's clothes. A statement is saved with `remember`
    (a preference when it says "I prefer ..."); a question is looked up with `query_memory`; after a
    tool's answer, it replies with what the tool said."""

    async def get_response(self, system_instructions: str | None, input: str | list[Any], *args: Any,
                           **kwargs: Any) -> ModelResponse:
        items = [{"role": "user", "content": input}] if isinstance(input, str) else list(input)
        last = _as_dict(items[-1])
        if last.get("type") == "function_call_output":
            return _respond(_message(_reply(_called(items, last["call_id"]), json.loads(last["output"]))))
        said = str(last.get("content", "")).strip()
        if said.endswith("?"):
            return _respond(_call("query_memory", {"query": said}))
        preference = _PREFERENCE.match(said)
        if preference:
            return _respond(_call("remember", {"content": f"Prefers {preference['what']}", "type": "preference"}))
        return _respond(_call("remember", {"content": said}))

    def stream_response(self, *args: Any, **kwargs: Any) -> AsyncIterator[Any]:
        raise NotImplementedError("the scripted model answers Runner.run, not Runner.run_streamed")


def _reply(tool: str, answer: dict[str, Any]) -> str:
    if tool == "remember":
        return "Noted." if answer.get("action") != "failed" else f"I could not save that ({answer.get('error')})."
    memories = answer.get("memories") or []
    return f"From memory: {memories[0]['content']}" if memories else "I don't know yet."


def _called(items: list[Any], call_id: str) -> str:
    return next(d["name"] for d in map(_as_dict, items) if d.get("type") == "function_call"
                and d.get("call_id") == call_id)


def _as_dict(item: Any) -> dict[str, Any]:
    return item if isinstance(item, dict) else item.model_dump()


def _call(name: str, arguments: dict[str, Any]) -> ResponseFunctionToolCall:
    n = next(_ids)
    return ResponseFunctionToolCall(id=f"fc_{n}", call_id=f"call_{n}", name=name, arguments=json.dumps(arguments),
                                    type="function_call", status="completed")


def _message(text: str) -> ResponseOutputMessage:
    return ResponseOutputMessage(id=f"msg_{next(_ids)}", role="assistant", status="completed", type="message",
                                 content=[ResponseOutputText(text=text, type="output_text", annotations=[])])


def _respond(item: Any) -> ModelResponse:
    return ModelResponse(output=[item], usage=Usage(), response_id=None)


@dataclass
class Turn:
    conversation: str
    said: str
    reply: str
    tools: list[str]  # the tools the agent called, in order


def main(client: MemsvcClient | None = None, *, quiet: bool = False, **scope: Any) -> list[Turn]:
    """Run the two conversations as the token's subject; `client` defaults to MEMORY_SERVICE_URL +
    MEMORY_SERVICE_TOKEN. `scope`: as `openai_agents_tools` takes it."""
    client = client or MemsvcClient()
    agent = Agent(name="assistant", instructions="Use memory to personalise your answers.",
                  model=ScriptedModel(), tools=openai_agents_tools(client, **scope))
    transcript = []
    for conversation, said in CONVERSATIONS:  # each a run of its own: no history in common
        result = Runner.run_sync(agent, said, run_config=RunConfig(tracing_disabled=True))
        tools = [_as_dict(i.raw_item)["name"] for i in result.new_items if i.type == "tool_call_item"]
        transcript.append(Turn(conversation, said, str(result.final_output), tools))
        if not quiet:
            print(f"[{conversation}] user: {said}")
            print(f"[{conversation}] agent ({', '.join(tools)}): {result.final_output}")
    return transcript


if __name__ == "__main__":
    argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter).parse_args()
    main()
