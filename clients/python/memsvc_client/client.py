"""`MemsvcClient` / `AsyncMemsvcClient`: the agent-memory routes of API-AGENT.md, as methods.

    client = MemsvcClient()                                  # MEMORY_SERVICE_URL + MEMORY_SERVICE_TOKEN
    client.remember("I prefer window seats", type="preference")
    client.recall("seat preference on flights")["memories"]

A client rides on a `MemsvcStore` (its `.store`, a LangGraph `BaseStore`): one connection pool,
one authentication (bearer token or SigV4), and the store's retries and errors
(`InvalidArgumentError`, `AuthError`, `NotFoundError`, `TransientError`, `MemsvcError`).
Methods return the decoded JSON answer.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Literal, TypedDict, Unpack

from urllib.parse import quote

from memsvc_client.store import MemsvcStore, _ns_key

__all__ = [
    "MemsvcClient",
    "AsyncMemsvcClient",
    "RememberFields",
    "RecallFields",
    "MemoryType",
    "MemoryKind",
    "RecallMode",
    "RecallOrder",
]

MemoryType = Literal["fact", "preference", "decision", "note"]
MemoryKind = Literal["semantic", "episodic"]
RecallMode = Literal["hybrid", "semantic", "keyword"]
RecallOrder = Literal["relevance", "precedence"]


class RememberFields(TypedDict, total=False):
    """The optional fields of `POST /v1/memories/remember` (API-AGENT.md)."""

    type: MemoryType  # default "fact"
    kind: MemoryKind  # default "semantic"
    layer: str  # default "user" (the service's); or `namespace` instead of `layer` + `identifiers`
    identifiers: Mapping[str, str]
    namespace: Sequence[str]
    category: str
    tags: Sequence[str]
    importance: float  # default 0.5
    pinned: bool  # default False
    source: str
    ttl_seconds: int
    consolidate: bool  # default True
    wait: bool  # default True: False answers 202 {"candidate_id"} at once


class RecallFields(TypedDict, total=False):
    """The optional fields of `POST /v1/memories/recall` (API-AGENT.md)."""

    layers: Sequence[str]  # default: every accessible layer
    identifiers: Mapping[str, str]  # default: {"user_id": <the caller>}
    namespace_prefix: Sequence[str]  # instead of `layers` + `identifiers`
    types: Sequence[MemoryType]  # default: every type
    limit: int  # default 10, 1..50
    min_score: float  # default 0.3
    token_budget: int  # default 1000, 1..8000
    mode: RecallMode  # default "hybrid"
    order: RecallOrder  # default "relevance"
    include_superseded: bool  # default False


REMEMBER_DEFAULTS: RememberFields = {
    "type": "fact", "kind": "semantic", "importance": 0.5, "pinned": False, "consolidate": True, "wait": True,
}
RECALL_DEFAULTS: RecallFields = {
    "limit": 10, "min_score": 0.3, "token_budget": 1000, "mode": "hybrid", "order": "relevance",
    "include_superseded": False,
}


def remember_body(content: str, **fields: Unpack[RememberFields]) -> dict[str, Any]:
    """The body of `POST /v1/memories/remember`: the contract's defaults, then `fields`. A field
    given as None is left out, so the service decides (e.g. `layer` when `namespace` is given)."""
    return {"content": content, **_json_fields(RememberFields, REMEMBER_DEFAULTS, fields)}


def recall_body(query: str, **fields: Unpack[RecallFields]) -> dict[str, Any]:
    """The body of `POST /v1/memories/recall`: the contract's defaults, then `fields`."""
    return {"query": query, **_json_fields(RecallFields, RECALL_DEFAULTS, fields)}


def _json_fields(shape: type, defaults: Mapping[str, Any], fields: Mapping[str, Any]) -> dict[str, Any]:
    unknown = set(fields) - set(shape.__annotations__)
    if unknown:
        raise TypeError(f"unexpected field(s) for {shape.__name__}: {', '.join(sorted(unknown))}")
    merged = {**defaults, **fields}
    return {
        name: list(value) if isinstance(value, (list, tuple)) else dict(value) if isinstance(value, Mapping) else value
        for name, value in merged.items()
        if value is not None
    }


MessageRole = Literal["user", "assistant", "system", "tool"]


def _session(session_id: str, *rest: str) -> str:
    """A session's path: its id percent-encoded whole, so `a/b` is one segment (`a%2Fb`), and dots
    too, so `..` is not a relative reference that URL normalisation removes."""
    return "/v1/memory/sessions/" + quote(session_id, safe="").replace(".", "%2E") + "".join("/" + r for r in rest)


def _given(**params: Any) -> list[tuple[str, str]]:
    return [(name, str(value)) for name, value in params.items() if value is not None]


def _body(**fields: Any) -> dict[str, Any]:
    return {name: value for name, value in fields.items() if value is not None}


class _WorkflowCalls:
    """The calls of API-AGENT.md's "Agent workflow state" routes (sessions, messages, semantic
    upsert), shared by the sync and async clients, which send them."""

    @staticmethod
    def create_session(session_id: str, *, agent_id: str | None = None, title: str | None = None,
                       metadata: Mapping[str, Any] | None = None) -> Any:
        return ("POST", "/v1/memory/sessions", (), _body(session_id=session_id, agent_id=agent_id, title=title,
                                                         metadata=dict(metadata or {})))

    @staticmethod
    def list_sessions(*, limit: int | None = None, cursor: str | None = None, agent_id: str | None = None) -> Any:
        return ("GET", "/v1/memory/sessions", _given(limit=limit, cursor=cursor, agent_id=agent_id), None)

    @staticmethod
    def get_session(session_id: str) -> Any:
        return ("GET", _session(session_id), (), None)

    @staticmethod
    def update_session(session_id: str, *, title: str | None = None, metadata: Mapping[str, Any] | None = None,
                       last_interaction: str | None = None, if_match: int | None = None) -> Any:
        body = _body(title=title, metadata=dict(metadata) if metadata is not None else None,
                     last_interaction=last_interaction)
        headers = {"If-Match": str(if_match)} if if_match is not None else {}
        return ("PUT", _session(session_id), (), body, headers)

    @staticmethod
    def delete_session(session_id: str) -> Any:
        return ("DELETE", _session(session_id), (), None)

    @staticmethod
    def add_message(session_id: str, role: MessageRole, content: str, *, correlation_id: str | None = None) -> Any:
        return ("POST", _session(session_id, "messages"), (),
                _body(role=role, content=content, correlation_id=correlation_id))

    @staticmethod
    def get_messages(session_id: str, *, after_seq: int | None = None, limit: int | None = None) -> Any:
        return ("GET", _session(session_id, "messages"), _given(after_seq=after_seq, limit=limit), None)

    @staticmethod
    def close_session(session_id: str) -> Any:
        return ("POST", _session(session_id, "close"), (), None)

    @staticmethod
    def upsert_semantic(content: str, *, external_id: str | None = None,
                        metadata: Mapping[str, Any] | None = None) -> Any:
        return ("POST", "/v1/memory/semantic", (), _body(content=content, external_id=external_id,
                                                         metadata=dict(metadata or {})))

    @staticmethod
    def get_semantic(*, external_id: str | None = None, content_hash: str | None = None) -> Any:
        return ("GET", "/v1/memory/semantic", _given(external_id=external_id, content_hash=content_hash), None)

    @staticmethod
    def delete_semantic(*, external_id: str | None = None, content_hash: str | None = None) -> Any:
        return ("DELETE", "/v1/memory/semantic", _given(external_id=external_id, content_hash=content_hash), None)


def _sync(build: Callable[..., Any]) -> Callable[..., Any]:
    """A `MemsvcClient` method that sends `build`'s call (same signature and docs)."""
    @functools.wraps(build)
    def method(self: MemsvcClient, *args: Any, **kwargs: Any) -> Any:
        return self.store._call(build(*args, **kwargs))
    return method


def _async(build: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(build)
    async def method(self: AsyncMemsvcClient, *args: Any, **kwargs: Any) -> Any:
        return await self._send(build(*args, **kwargs))
    return method


class MemsvcClient:
    """The agent-memory API over HTTP, synchronously.

    Sessions, messages and semantic upsert (API-AGENT.md "Agent workflow state") answer the
    service's JSON (None for a 204); `update_session(..., if_match=version)` sends `If-Match`.

    Args:
        url, token, and every other keyword: as `MemsvcStore` takes them (environment defaults,
            SigV4, `tenant_id`, `timeout`, `max_retries`, ...).
        store: an existing `MemsvcStore` to share (its connections and authentication) instead.
    """

    def __init__(self, url: str | None = None, token: Any = None, *, store: MemsvcStore | None = None,
                 **options: Any) -> None:
        self.store = store if store is not None else MemsvcStore(url, token, **options)

    def remember(self, content: str, **fields: Unpack[RememberFields]) -> dict[str, Any]:
        """`POST /v1/memories/remember`: `{"action", "memory", "neighbors", "judge"}`, or
        `{"candidate_id"}` with `wait=False`. Fields: `RememberFields`."""
        return self.store._call(("POST", "/v1/memories/remember", (), remember_body(content, **fields)))

    def recall(self, query: str, **fields: Unpack[RecallFields]) -> dict[str, Any]:
        """`POST /v1/memories/recall`: `{"memories": [...], "metadata": {...}}`. Fields: `RecallFields`."""
        return self.store._call(("POST", "/v1/memories/recall", (), recall_body(query, **fields)))

    def get(self, namespace: Sequence[str], key: str) -> dict[str, Any]:
        """`GET /v1/memories`: the item. Raises `NotFoundError` when there is none."""
        return self.store._call(("GET", "/v1/memories", _ns_key(namespace, key), None))

    def delete(self, namespace: Sequence[str], key: str) -> None:
        """`DELETE /v1/memories`: idempotent, as the service is."""
        self.store._call(("DELETE", "/v1/memories", _ns_key(namespace, key), None))

    create_session = _sync(_WorkflowCalls.create_session)
    list_sessions = _sync(_WorkflowCalls.list_sessions)
    get_session = _sync(_WorkflowCalls.get_session)
    update_session = _sync(_WorkflowCalls.update_session)
    delete_session = _sync(_WorkflowCalls.delete_session)
    add_message = _sync(_WorkflowCalls.add_message)
    get_messages = _sync(_WorkflowCalls.get_messages)
    close_session = _sync(_WorkflowCalls.close_session)
    upsert_semantic = _sync(_WorkflowCalls.upsert_semantic)
    get_semantic = _sync(_WorkflowCalls.get_semantic)
    delete_semantic = _sync(_WorkflowCalls.delete_semantic)

    def close(self) -> None:
        self.store.close()

    def __enter__(self) -> MemsvcClient:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


class AsyncMemsvcClient:
    """`MemsvcClient`'s methods as coroutines (same arguments, same answers and errors)."""

    def __init__(self, url: str | None = None, token: Any = None, *, store: MemsvcStore | None = None,
                 **options: Any) -> None:
        self.store = store if store is not None else MemsvcStore(url, token, **options)

    async def remember(self, content: str, **fields: Unpack[RememberFields]) -> dict[str, Any]:
        return await self._send(("POST", "/v1/memories/remember", (), remember_body(content, **fields)))

    async def recall(self, query: str, **fields: Unpack[RecallFields]) -> dict[str, Any]:
        return await self._send(("POST", "/v1/memories/recall", (), recall_body(query, **fields)))

    async def get(self, namespace: Sequence[str], key: str) -> dict[str, Any]:
        return await self._send(("GET", "/v1/memories", _ns_key(namespace, key), None))

    async def delete(self, namespace: Sequence[str], key: str) -> None:
        await self._send(("DELETE", "/v1/memories", _ns_key(namespace, key), None))

    create_session = _async(_WorkflowCalls.create_session)
    list_sessions = _async(_WorkflowCalls.list_sessions)
    get_session = _async(_WorkflowCalls.get_session)
    update_session = _async(_WorkflowCalls.update_session)
    delete_session = _async(_WorkflowCalls.delete_session)
    add_message = _async(_WorkflowCalls.add_message)
    get_messages = _async(_WorkflowCalls.get_messages)
    close_session = _async(_WorkflowCalls.close_session)
    upsert_semantic = _async(_WorkflowCalls.upsert_semantic)
    get_semantic = _async(_WorkflowCalls.get_semantic)
    delete_semantic = _async(_WorkflowCalls.delete_semantic)

    async def _send(self, call: Any) -> Any:
        return await self.store._acall(self.store._async_client(), call)

    async def aclose(self) -> None:
        await self.store.aclose()

    async def __aenter__(self) -> AsyncMemsvcClient:
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.aclose()
