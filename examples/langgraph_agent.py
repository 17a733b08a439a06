"""A LangGraph ReAct agent with memsvc's tools: it is told a preference in one conversation thread,
saves it with `remember`, and uses it in another thread through `query_memory`.

Threads are LangGraph's (the checkpointer keeps each thread's messages apart); what crosses threads
is only what memsvc holds. No LLM is needed: `ScriptedChatModel` stands in for one with two fixed
rules, so the example runs offline. Put a real chat model (anything with `bind_tools`) in its place
and nothing else changes. (LangGraph 1.x marks `create_react_agent` deprecated in favour of
`langchain.agents.create_agent`, from the separate `langchain` package; that one takes the same
LangChain tools.)

Run it against a local server (`make run` in another shell):

    MEMORY_SERVICE_URL=http://127.0.0.1:8000 \\
    MEMORY_SERVICE_TOKEN=$(.venv/bin/memsvc token --sub alice) \\
    .venv/bin/python examples/langgraph_agent.py
"""

from __future__ import annotations

import argparse
import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from langchain_core.language_models.chat_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, ToolMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.prebuilt import create_react_agent

from memsvc_client import MemsvcClient, langchain_tools

CONVERSATIONS = [
    ("monday", "Remember that I prefer window seats on flights."),
    ("friday", "Which seat should I book on my flight to Lisbon?"),
]
_REMEMBER = re.compile(r"^\s*remember(?:\s+that)?\s+(?P<fact>.+?)[.!]?\s*$", re.IGNORECASE | re.DOTALL)


class ScriptedChatModel(BaseChatModel):
    """Not a language model: two rules in a chat model's clothes. "Remember that X" calls `remember`
    with X; anything else calls `query_memory` with the question. After a tool, it answers from
    the tool's result, and says so when memory had nothing."""

    tool_names: list[str] = []

    @property
    def _llm_type(self) -> str:
        return "scripted"

    def bind_tools(self, tools: Sequence[Any], **kwargs: Any) -> ScriptedChatModel:
        return self.model_copy(update={"tool_names": [tool.name for tool in tools]})

    def _generate(self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None,
                  **kwargs: Any) -> ChatResult:
        return ChatResult(generations=[ChatGeneration(message=self._reply(messages))])

    def _reply(self, messages: list[BaseMessage]) -> AIMessage:
        last = messages[-1]
        if isinstance(last, ToolMessage):
            return AIMessage(self._answer(last.name, json.loads(last.content)))
        fact = _REMEMBER.match(str(last.content))
        if fact:
            kind = "preference" if re.search(r"\b(prefer|like|love|hate)\b", fact["fact"], re.I) else "fact"
            return self._call("remember", {"content": fact["fact"], "type": kind}, messages)
        return self._call("query_memory", {"query": str(last.content)}, messages)

    def _call(self, tool: str, args: dict[str, Any], messages: list[BaseMessage]) -> AIMessage:
        if tool not in self.tool_names:
            raise ValueError(f"the agent was not given the {tool} tool")
        return AIMessage("", tool_calls=[{"name": tool, "args": args, "id": f"call-{len(messages)}"}])

    @staticmethod
    def _answer(tool: str, result: dict[str, Any]) -> str:
        if tool == "remember":
            if result.get("action") == "failed":
                return f"Sorry, I could not save that ({result['error']})."
            return "Noted, I will remember that."
        memories = result["memories"]
        if not memories:
            return "I don't know that yet. Tell me, and I will remember it."
        return f"Based on what you told me before: {memories[0]['content']}."


@dataclass
class Turn:
    thread: str
    said: str
    reply: str
    tool_results: list[dict[str, Any]]  # what the tools answered in this turn, in order


def main(client: MemsvcClient | None = None, *, quiet: bool = False) -> list[Turn]:
    """Run the two conversations; `client` defaults to MEMORY_SERVICE_URL + MEMORY_SERVICE_TOKEN."""
    client = client or MemsvcClient()
    agent = create_react_agent(ScriptedChatModel(), langchain_tools(client), checkpointer=InMemorySaver())
    transcript = []
    for thread, said in CONVERSATIONS:
        state = agent.invoke({"messages": [("user", said)]}, {"configurable": {"thread_id": thread}})
        turn = state["messages"][_last_human(state["messages"]):]
        transcript.append(Turn(thread, said, str(turn[-1].content),
                               [json.loads(m.content) for m in turn if isinstance(m, ToolMessage)]))
        if not quiet:
            print(f"[{thread}] user: {said}")
            print(f"[{thread}] agent: {turn[-1].content}")
    return transcript


def _last_human(messages: list[BaseMessage]) -> int:
    return max(i for i, m in enumerate(messages) if m.type == "human")


if __name__ == "__main__":
    argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter).parse_args()
    main()
