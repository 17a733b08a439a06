"""What the hook tests share: a scripted chat model that records what it was given, and a ReAct
agent built around it with memsvc's hooks. No network beyond the memory service."""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from typing import Any

from langchain_core.language_models.chat_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.prebuilt import create_react_agent


class ScriptedModel(BaseChatModel):
    """Answers with `replies` in turn (the last one again when they run out) and keeps every input."""

    replies: list[AIMessage]
    inputs: list[list[BaseMessage]] = []

    @property
    def _llm_type(self) -> str:
        return "scripted"

    def bind_tools(self, tools: Sequence[Any], **kwargs: Any) -> ScriptedModel:
        return self

    def _generate(self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None,
                  **kwargs: Any) -> ChatResult:
        self.inputs.append(list(messages))
        reply = self.replies[min(len(self.inputs), len(self.replies)) - 1]
        return ChatResult(generations=[ChatGeneration(message=reply.model_copy())])


@tool
def flight_times(city: str) -> str:
    """Departure times to a city."""
    return f"Flights to {city} leave at 09:10 and 17:40."


def looks_up_then_answers(answer: str) -> list[AIMessage]:
    """A tool call without text, then the answer: two model calls in one turn."""
    return [AIMessage("", tool_calls=[{"name": "flight_times", "args": {"city": "Lisbon"}, "id": "call-1"}]),
            AIMessage(answer)]


def agent(model: ScriptedModel, **hooks: Any):
    with warnings.catch_warnings():  # LangGraph 1.x: create_react_agent moved to langchain.agents
        warnings.simplefilter("ignore")
        return create_react_agent(model, [flight_times], checkpointer=InMemorySaver(), **hooks)
