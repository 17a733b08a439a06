"""LangGraph model hooks: recall into the prompt before the model, keep the turn in a session after it.

    agent = create_react_agent(
        model, tools,
        pre_model_hook=recall_hook(client, identifiers={"agent_id": "travel"}),
        post_model_hook=append_turn_hook(client),       # the session is the run's thread_id
        checkpointer=InMemorySaver(),
    )

`recall_hook` is seed 002's context node: before each model call it recalls, with the last human
message as the query, what fits in a small token budget, and gives the model a system message
listing it. The message goes to the model only (`llm_input_messages`), never into the graph's
`messages`. Nothing recalled, or a failed recall, adds nothing: the agent goes on without memory.

`append_turn_hook` appends the turn (the last human message and the model's text answers after it)
to an existing session. Each message appended is marked in the graph's state
(`response_metadata["memsvc_seq"]`, its seq in the session), so a later step, or a later run on
the same checkpointed thread, never appends it again. Tool calls and tool results are not appended.

Both hooks are runnables with a sync and an async side, for `invoke` and `ainvoke` alike.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import Any

from langchain_core.messages import BaseMessage, SystemMessage
from langchain_core.runnables import RunnableConfig, RunnableLambda

from memsvc_client.client import AsyncMemsvcClient, MemoryType, MemsvcClient, session_message
from memsvc_client.tools import error_code

__all__ = ["recall_hook", "append_turn_hook", "memories_message", "APPENDED_MARK"]

logger = logging.getLogger("memsvc_client.hooks")

APPENDED_MARK = "memsvc_seq"  # in a message's response_metadata: its seq in the session it was appended to
MEMORIES_HEADER = "What you remember about the user (from earlier conversations; use it only where it helps):"


def recall_hook(
    client: MemsvcClient | AsyncMemsvcClient,
    *,
    identifiers: Mapping[str, str] | None = None,
    namespace_prefix: Sequence[str] | None = None,
    layers: Sequence[str] | None = None,
    types: Sequence[MemoryType] | None = None,
    token_budget: int = 500,
    limit: int = 5,
    min_score: float = 0.3,
) -> RunnableLambda:
    """A `pre_model_hook` answering `{"llm_input_messages": [<memories>, *messages]}`.

    Args:
        client: a `MemsvcClient` or `AsyncMemsvcClient` (both sides of the hook share its store).
        identifiers, layers: whose layers to recall from (default: the caller's own user layer and
            every other layer the identifiers open), or `namespace_prefix` instead of both.
        types: only typed memories of these types (default: anything recalled, session messages too).
        token_budget, limit, min_score: recall's, kept small: the memories ride on every model call.
    """
    fields = {"identifiers": identifiers, "namespace_prefix": namespace_prefix, "layers": layers, "types": types,
              "token_budget": token_budget, "limit": limit, "min_score": min_score}
    sync_client, async_client = MemsvcClient(store=client.store), AsyncMemsvcClient(store=client.store)

    def hook(state: Any) -> dict[str, Any]:
        messages = _messages(state)
        query = _last_human_text(messages)
        if not query:
            return _with_memories(messages, None)
        try:
            answer = sync_client.recall(query, **fields)
        except Exception as exc:  # fail closed, as query_memory does: the model is called without memory
            answer = _log_failed_recall(exc)
        return _with_memories(messages, answer)

    async def ahook(state: Any) -> dict[str, Any]:
        messages = _messages(state)
        query = _last_human_text(messages)
        if not query:
            return _with_memories(messages, None)
        try:
            answer = await async_client.recall(query, **fields)
        except Exception as exc:
            answer = _log_failed_recall(exc)
        return _with_memories(messages, answer)

    return RunnableLambda(hook, afunc=ahook, name="memsvc_recall")


def _log_failed_recall(exc: BaseException) -> None:
    logger.warning("recall_hook recalled nothing: %s (%s)", error_code(exc), type(exc).__name__)  # never the query


def _with_memories(messages: list[BaseMessage], answer: Any) -> dict[str, Any]:
    memories = memories_message(answer)
    return {"llm_input_messages": [memories, *messages] if memories else messages}


def memories_message(answer: Any) -> SystemMessage | None:
    """A recall answer as one compact system message, or None when it holds no memory (or is not
    a recall answer at all: the hook fails closed on a malformed answer too)."""
    memories = answer.get("memories") if isinstance(answer, Mapping) else None
    lines = [f"- {_label(m)}{m['content']}" for m in memories if isinstance(m, Mapping)
             and isinstance(m.get("content"), str)] if isinstance(memories, list) else []
    return SystemMessage("\n".join([MEMORIES_HEADER, *lines])) if lines else None


def _label(memory: Mapping[str, Any]) -> str:
    if memory.get("type") == "message":
        return "(said earlier) "
    return f"({memory['type']}) " if memory.get("type") else ""


def append_turn_hook(client: MemsvcClient | AsyncMemsvcClient, *, session_id: str | None = None) -> RunnableLambda:
    """A `post_model_hook` appending the turn to a session that exists (`create_session` first).

    Args:
        client: a `MemsvcClient` or `AsyncMemsvcClient` (both sides of the hook share its store).
        session_id: the session; default: the run's `configurable.thread_id`.

    A message is appended once: the hook answers `{"messages": [<the appended messages, marked>]}`,
    which replaces them in the state by id. A failed append is logged, not raised (a conversation
    goes on without its record); the messages it missed are tried again at the turn's next model
    call, and a turn whose last call failed to append stays out of the session. A retry after a
    lost answer may store a message twice (see `MemsvcClient.add_messages`).
    """
    sync_client, async_client = MemsvcClient(store=client.store), AsyncMemsvcClient(store=client.store)

    def hook(state: Any, config: RunnableConfig) -> dict[str, Any]:
        session = session_id or _thread_id(config)
        marked = []
        try:
            # One at a time, each marked once it is in: a failure midway re-sends none before it.
            for message in _unappended_turn(_messages(state)):
                answer = sync_client.add_message(session, **session_message(message))
                marked.append(_marked(message, answer["seq"]))
        except Exception as exc:
            _not_appended(exc)
        return {"messages": marked}

    async def ahook(state: Any, config: RunnableConfig) -> dict[str, Any]:
        session = session_id or _thread_id(config)
        marked = []
        try:
            for message in _unappended_turn(_messages(state)):
                answer = await async_client.add_message(session, **session_message(message))
                marked.append(_marked(message, answer["seq"]))
        except Exception as exc:
            _not_appended(exc)
        return {"messages": marked}

    return RunnableLambda(hook, afunc=ahook, name="memsvc_append_turn")


def _unappended_turn(messages: list[BaseMessage]) -> list[BaseMessage]:
    """From the last human message on: the human message and the model's answers that have text
    and are not marked yet (a tool-calling step without text is not part of the record)."""
    start = max((i for i, m in enumerate(messages) if m.type == "human"), default=len(messages))
    return [m for m in messages[start:]
            if m.type in ("human", "ai") and m.text and m.id and APPENDED_MARK not in m.response_metadata]


def _marked(message: BaseMessage, seq: int) -> BaseMessage:
    return message.model_copy(update={"response_metadata": {**message.response_metadata, APPENDED_MARK: seq}})


def _not_appended(exc: BaseException) -> None:
    logger.warning("append_turn_hook did not append the turn: %s (%s)", error_code(exc), type(exc).__name__)


def _thread_id(config: RunnableConfig) -> str:
    thread_id = (config.get("configurable") or {}).get("thread_id")
    if not thread_id:
        raise ValueError("append_turn_hook needs session_id= or a thread_id in the run's configurable")
    return str(thread_id)


def _messages(state: Any) -> list[BaseMessage]:
    """The state's messages, whether the agent's state schema is a TypedDict or a pydantic model."""
    return list(state["messages"] if isinstance(state, Mapping) else state.messages)


def _last_human_text(messages: list[BaseMessage]) -> str:
    return next((m.text for m in reversed(messages) if m.type == "human"), "")
