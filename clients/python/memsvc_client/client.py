"""`MemsvcClient` / `AsyncMemsvcClient`: the agent-memory routes of API-AGENT.md, as methods.

    client = MemsvcClient()                                  # MEMORY_SERVICE_URL + MEMORY_SERVICE_TOKEN
    client.remember("I prefer window seats", type="preference")
    client.recall("seat preference on flights")["memories"]

A client rides on a `MemsvcStore` (its `.store`, a LangGraph `BaseStore`): one connection pool,
one authentication (bearer token or SigV4), and the store's retries and errors
(`InvalidArgumentError`, `AuthError`, `NotFoundError`, `TransientError`, `MemsvcError`).
Methods return the decoded JSON answer. Seed 003's workflow state (task contexts, plans,
working memory) comes from `memsvc_client.workflow.WorkflowMethods`; `memsvc_client.worker`
turns it into a worker's few steps.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Literal, TypedDict, Unpack

from memsvc_client.store import MemsvcStore, _ns_key
from memsvc_client.workflow import WorkflowMethods

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


class MemsvcClient(WorkflowMethods):
    """The agent-memory API over HTTP, synchronously.

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

    def _run(self, call: Any) -> Any:
        return self.store._call(call)

    def close(self) -> None:
        self.store.close()

    def __enter__(self) -> MemsvcClient:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


class AsyncMemsvcClient(WorkflowMethods):
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

    async def _send(self, call: Any) -> Any:
        return await self.store._acall(self.store._async_client(), call)

    _run = _send  # the workflow methods (`WorkflowMethods`) return its coroutine

    async def aclose(self) -> None:
        await self.store.aclose()

    async def __aenter__(self) -> AsyncMemsvcClient:
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.aclose()
