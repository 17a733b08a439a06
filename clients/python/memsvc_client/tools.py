"""The agent tools: `query_memory` (seed 004) and `remember`, for any agent framework.

    tools = MemoryTools(client, identifiers={"agent_id": "travel"})
    langchain_tools(client)            # LangChain `StructuredTool`s, for LangGraph's create_react_agent
    tool_specs(client)                 # [{"name", "description", "input_schema", "call", "acall"}]

The model chooses only what to look for or what to save; whose memories they are (the identifiers,
the layers, the token budget) is fixed by the application when it builds the tools, and the
service checks it against the caller's token.

`query_memory` fails closed, as seed 004 asks: on any error (an error answer, no answer, a
timeout, an answer that is not the contract's JSON, arguments the model got wrong) it returns
`{"memories": [], "metadata": {"count": 0, "error": "<code>"}}` and the agent goes on without
memory. `remember` never raises either, but does not pretend: a failure comes back as
`{"action": "failed", "error": "<code>", "message", "retryable"}`, so the model can tell the user
the note was not saved (LangGraph's ToolNode would otherwise end the whole run on the exception).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any

import httpx
from pydantic import BaseModel, Field, ValidationError  # comes with langgraph-checkpoint (via langchain-core)

from memsvc_client.client import AsyncMemsvcClient, MemoryType, MemsvcClient
from memsvc_client.store import MemsvcError

__all__ = [
    "MemoryTools",
    "QueryMemoryArgs",
    "RememberArgs",
    "langchain_tools",
    "tool_specs",
    "openai_tool",
    "QUERY_MEMORY_DESCRIPTION",
    "REMEMBER_DESCRIPTION",
]

logger = logging.getLogger("memsvc_client.tools")

QUERY_MEMORY_DESCRIPTION = (
    "Retrieve relevant memories from the user's past conversations and stored context. Use this when the "
    "user's question may relate to something discussed previously or when personalization would improve "
    "the response."
)
REMEMBER_DESCRIPTION = (
    "Save one self-contained statement worth knowing in future conversations: a fact about the user or their "
    "world, a preference, a decision, or a note. Write it so it makes sense without this conversation "
    "(e.g. 'Prefers window seats on flights'). Never save passwords, keys or other secrets."
)
# What the model gets of each recalled memory: enough to use and cite it (and to give feedback on
# it, by id), not the bookkeeping.
# current, known_at: only in an answer asked with known_at (what memsvc held then)
_AGENT_FIELDS = ("id", "namespace", "key", "layer", "content", "type", "relevance", "tags", "source", "created_at",
                 "current")
# degraded: ranked by keywords alone
_AGENT_METADATA = ("count", "total_count", "truncated", "token_count", "degraded", "known_at")


class QueryMemoryArgs(BaseModel):
    """What the model passes to `query_memory` (seed 004's tool contract)."""

    query: str = Field(
        min_length=1,
        description="Search query to find relevant memories. Should capture the semantic intent of what "
        "context would be helpful.",
    )
    types: list[MemoryType] | None = Field(default=None, description="Filter to specific memory types")
    as_of: str | None = Field(default=None, description=(
        "Only for a question about the past: an RFC 3339 time with an offset (e.g. 2024-06-01T00:00:00Z); "
        "the memories that were true then, including ones replaced since. Omit for what is true now."))
    known_at: str | None = Field(default=None, description=(
        "Only to ask what the memory held at a past time (e.g. what was known before a change): an RFC 3339 time "
        "with an offset, within the service's event retention; the versions held then, including ones changed or "
        "deleted since. Omit for what is held now."))


class RememberArgs(BaseModel):
    """What the model passes to `remember`."""

    content: str = Field(min_length=1, max_length=8000, description="The statement to remember, self-contained.")
    type: MemoryType = Field(default="fact", description="What kind of statement this is")
    category: str | None = Field(default=None, description="A short topic, e.g. 'travel' or 'food'")
    tags: list[str] | None = Field(default=None, description="Keywords to file it under")
    importance: float = Field(default=0.5, ge=0, le=1, description="0..1: how much this matters later")


class _BadResponse(ValueError):
    """The service answered 2xx with something that is not the contract's JSON."""


class _BadArguments(ValueError):
    """The model's arguments are not a JSON object."""


class MemoryTools:
    """`query_memory` and `remember` for one scope, sync and async (`aquery_memory`, `aremember`).

    Args:
        client: a `MemsvcClient` or `AsyncMemsvcClient` (both kinds of call share its store).
        identifiers: the layers' identifiers (`agent_id`, `session_id`, `project_id`, ...);
            default: the caller's own `user_id`, which the service takes from the token.
        layers: the layers `query_memory` searches (default: every accessible one).
        layer: where `remember` writes (default: the service's, `user`).
        limit, min_score, token_budget: `query_memory`'s recall settings (the contract's defaults).
    """

    def __init__(
        self,
        client: MemsvcClient | AsyncMemsvcClient,
        *,
        identifiers: Mapping[str, str] | None = None,
        layers: Sequence[str] | None = None,
        layer: str | None = None,
        limit: int = 10,
        min_score: float = 0.3,
        token_budget: int = 1000,
    ) -> None:
        self.client = MemsvcClient(store=client.store)
        self.aclient = AsyncMemsvcClient(store=client.store)
        self.identifiers = dict(identifiers) if identifiers else None
        self.layers = list(layers) if layers is not None else None
        self.layer = layer
        self.recall_settings = {"limit": limit, "min_score": min_score, "token_budget": token_budget}

    # -- query_memory --

    def query_memory(self, query: str, types: Sequence[MemoryType] | None = None,
                     as_of: str | None = None, known_at: str | None = None) -> dict[str, Any]:
        try:
            args = QueryMemoryArgs(query=query, types=types, as_of=as_of, known_at=known_at)
            return _agent_view(self.client.recall(args.query, **self._recall_fields(args)))
        except Exception as exc:  # fail closed: nothing reaches the agent but an empty answer
            return failed_closed(exc)

    async def aquery_memory(self, query: str, types: Sequence[MemoryType] | None = None,
                            as_of: str | None = None, known_at: str | None = None) -> dict[str, Any]:
        try:
            args = QueryMemoryArgs(query=query, types=types, as_of=as_of, known_at=known_at)
            return _agent_view(await self.aclient.recall(args.query, **self._recall_fields(args)))
        except Exception as exc:
            return failed_closed(exc)

    def _recall_fields(self, args: QueryMemoryArgs) -> dict[str, Any]:
        return {
            "types": args.types,
            "as_of": args.as_of,  # a time the service cannot read is its 400: the tool's failure answer
            "known_at": args.known_at,
            "layers": self.layers,
            "identifiers": self.identifiers,
            **self.recall_settings,
        }

    # -- remember --

    def remember(self, content: str, type: MemoryType = "fact", category: str | None = None,
                 tags: Sequence[str] | None = None, importance: float = 0.5) -> dict[str, Any]:
        try:
            args = RememberArgs(content=content, type=type, category=category, tags=tags, importance=importance)
            return _remembered(self.client.remember(args.content, **self._remember_fields(args)))
        except Exception as exc:  # reported, never raised: see the module's docstring
            return not_remembered(exc)

    async def aremember(self, content: str, type: MemoryType = "fact", category: str | None = None,
                        tags: Sequence[str] | None = None, importance: float = 0.5) -> dict[str, Any]:
        try:
            args = RememberArgs(content=content, type=type, category=category, tags=tags, importance=importance)
            return _remembered(await self.aclient.remember(args.content, **self._remember_fields(args)))
        except Exception as exc:
            return not_remembered(exc)

    def _remember_fields(self, args: RememberArgs) -> dict[str, Any]:
        return {
            "type": args.type,
            "category": args.category,
            "tags": args.tags,
            "importance": args.importance,
            "layer": self.layer,
            "identifiers": self.identifiers,
        }


    # -- extraction --

    async def aextract(self, messages: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
        """What a conversation taught: `{"extractor", "memories": [{"action", "type", "content",
        "namespace", "key"}]}` (into `layer`, for `identifiers`), or `{"status", "job_id"}` when it
        is extracted in the background. Raises what the client raises."""
        answer = await self.aclient.extract(messages, layer=self.layer, identifiers=self.identifiers)
        return _extracted(answer)


# -- answers --


def error_code(exc: BaseException) -> str:
    """The API's error code, or what went wrong on this side of the wire."""
    if isinstance(exc, MemsvcError):
        return "TIMEOUT" if isinstance(exc.__cause__, httpx.TimeoutException) else exc.code
    if isinstance(exc, (ValidationError, _BadArguments)):
        return "INVALID_ARGUMENT"
    if isinstance(exc, ValueError):  # a body that is not JSON (JSONDecodeError), or not the contract's
        return "BAD_RESPONSE"
    return "CLIENT_ERROR"


def failed_closed(exc: BaseException) -> dict[str, Any]:
    code = error_code(exc)
    logger.warning("query_memory failed closed: %s (%s)", code, type(exc).__name__)  # never the query
    return {"memories": [], "metadata": {"count": 0, "error": code}}


def not_remembered(exc: BaseException) -> dict[str, Any]:
    code = error_code(exc)
    logger.warning("remember failed: %s (%s)", code, type(exc).__name__)
    if isinstance(exc, MemsvcError):
        message = exc.message
    elif isinstance(exc, ValidationError):
        message = "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in exc.errors())
    elif isinstance(exc, _BadArguments):
        message = str(exc)
    else:
        message = "the memory service gave no usable answer"
    retryable = exc.retryable if isinstance(exc, MemsvcError) else False
    return {"action": "failed", "error": code, "message": message, "retryable": retryable}


def _agent_view(answer: Any) -> dict[str, Any]:
    if not isinstance(answer, dict) or not isinstance(answer.get("memories"), list):
        raise _BadResponse("a recall answer without a memories list")
    memories = []
    for memory in answer["memories"]:
        if not isinstance(memory, dict) or not isinstance(memory.get("content"), str):
            raise _BadResponse("a recalled memory without content")
        memories.append({name: memory[name] for name in _AGENT_FIELDS if name in memory})
    metadata = answer.get("metadata") if isinstance(answer.get("metadata"), dict) else {}
    return {
        "memories": memories,
        "metadata": {**{name: metadata[name] for name in _AGENT_METADATA if name in metadata}, "count": len(memories)},
    }


def _extracted(answer: Any) -> dict[str, Any]:
    if isinstance(answer, dict) and isinstance(answer.get("job_id"), str):
        return {"status": answer.get("status"), "job_id": answer["job_id"]}
    if not isinstance(answer, dict) or not isinstance(answer.get("memories"), list):
        raise _BadResponse("an extract answer without a memories list")
    learnt = []
    for m in answer["memories"]:
        memory = m.get("memory") if isinstance(m, dict) and isinstance(m.get("memory"), dict) else {}
        candidate = m.get("candidate") if isinstance(m, dict) and isinstance(m.get("candidate"), dict) else {}
        learnt.append({"action": m.get("action") if isinstance(m, dict) else None, "type": candidate.get("type"),
                       "content": candidate.get("content"), "namespace": memory.get("namespace"),
                       "key": memory.get("key")})
    return {"extractor": answer.get("extractor"), "memories": learnt}


def _remembered(answer: Any) -> dict[str, Any]:
    if not isinstance(answer, dict) or not isinstance(answer.get("memory"), dict):
        raise _BadResponse("a remember answer without the memory")
    memory = answer["memory"]
    return {"action": answer.get("action"), "namespace": memory.get("namespace"), "key": memory.get("key")}


# -- the same tools, for frameworks --


def tool_specs(client: MemsvcClient | AsyncMemsvcClient, **scope: Any) -> list[dict[str, Any]]:
    """Framework-neutral tool specs: `name`, `description`, `input_schema` (JSON Schema: the shape
    Anthropic's `tools` take as is; `openai_tool(spec)` for OpenAI's), and `call(arguments)` /
    `acall(arguments)` that take the model's arguments as a dict and return a JSON-able dict.
    `scope`: as `MemoryTools` takes it."""
    tools = MemoryTools(client, **scope)
    return [
        _spec("query_memory", QUERY_MEMORY_DESCRIPTION, QueryMemoryArgs, tools.query_memory, tools.aquery_memory,
              failed_closed),
        _spec("remember", REMEMBER_DESCRIPTION, RememberArgs, tools.remember, tools.aremember, not_remembered),
    ]


def _spec(name: str, description: str, schema: type[BaseModel], run: Callable[..., dict[str, Any]],
          arun: Callable[..., Awaitable[dict[str, Any]]],
          on_bad_arguments: Callable[[BaseException], dict[str, Any]]) -> dict[str, Any]:
    def call(arguments: Mapping[str, Any] | str) -> dict[str, Any]:
        try:
            args = _parse_arguments(schema, arguments)
        except ValueError as exc:  # pydantic's ValidationError is one
            return on_bad_arguments(exc)
        return run(**args)

    async def acall(arguments: Mapping[str, Any] | str) -> dict[str, Any]:
        try:
            args = _parse_arguments(schema, arguments)
        except ValueError as exc:  # pydantic's ValidationError is one
            return on_bad_arguments(exc)
        return await arun(**args)

    # The tool's description is `description`; the model class's own title and docstring are not for the model.
    input_schema = {k: v for k, v in schema.model_json_schema().items() if k not in ("title", "description")}
    return {"name": name, "description": description, "input_schema": input_schema, "call": call, "acall": acall}


def _parse_arguments(schema: type[BaseModel], arguments: Mapping[str, Any] | str) -> dict[str, Any]:
    """The model's arguments (a dict, or the JSON string OpenAI sends), checked against the schema."""
    if isinstance(arguments, str):
        try:
            arguments = json.loads(arguments)
        except ValueError as exc:
            raise _BadArguments(f"tool arguments are not JSON: {exc}") from None
    if not isinstance(arguments, Mapping):
        raise _BadArguments("tool arguments must be a JSON object")
    return dict(schema.model_validate(arguments))


def openai_tool(spec: Mapping[str, Any]) -> dict[str, Any]:
    """A spec in OpenAI's Chat Completions `tools` form."""
    return {"type": "function",
            "function": {"name": spec["name"], "description": spec["description"], "parameters": spec["input_schema"]}}


def langchain_tools(client: MemsvcClient | AsyncMemsvcClient, **scope: Any) -> list[Any]:
    """`query_memory` and `remember` as LangChain `StructuredTool`s (sync and async), ready for
    LangGraph's `create_react_agent`. Needs `langchain-core` (`pip install memsvc-client[langchain]`).
    Arguments the model gets wrong come back as the tool's failure answer, not as an exception.
    `scope`: as `MemoryTools` takes it."""
    try:
        from langchain_core.tools import StructuredTool
    except ImportError as exc:  # pragma: no cover - the extra is installed wherever the tests run
        raise ImportError("langchain_tools needs langchain-core: pip install 'memsvc-client[langchain]'") from exc

    tools = MemoryTools(client, **scope)

    def answer_for(on_bad_arguments: Callable[[BaseException], dict[str, Any]]) -> Callable[[Exception], str]:
        return lambda exc: json.dumps(on_bad_arguments(exc))

    return [
        StructuredTool.from_function(
            func=tools.query_memory, coroutine=tools.aquery_memory, name="query_memory",
            description=QUERY_MEMORY_DESCRIPTION, args_schema=QueryMemoryArgs,
            handle_validation_error=answer_for(failed_closed),
        ),
        StructuredTool.from_function(
            func=tools.remember, coroutine=tools.aremember, name="remember",
            description=REMEMBER_DESCRIPTION, args_schema=RememberArgs,
            handle_validation_error=answer_for(not_remembered),
        ),
    ]
