"""The answers of the LangGraph Platform store API (`/store/...`), in LangGraph's shapes: an item is
`{namespace, key, value, created_at, updated_at}` (and `score` in a search), as LangGraph's servers
answer and its SDKs' `Item` and `SearchItem` read them. The request bodies are the service's
commands (`memsvc.service.langgraph_store_api`)."""

from __future__ import annotations

from typing import Any, Self

from pydantic import Field, RootModel

from memsvc.api.schemas import Answer, Rfc3339
from memsvc.core.models import Memory
from memsvc.service.search import SearchResult

__all__ = ["StoreItemOut", "StoreItemOrNullOut", "StoreSearchItemOut", "StoreSearchOut", "StoreNamespacesOut"]


class StoreItemOut(Answer):
    namespace: list[str]
    key: str
    value: dict[str, Any]
    created_at: Rfc3339
    updated_at: Rfc3339

    @classmethod
    def of(cls, m: Memory, **extra: Any) -> Self:
        return cls(namespace=list(m.namespace), key=m.key, value=m.value, created_at=m.created_at,
                   updated_at=m.updated_at, **extra)


class StoreItemOrNullOut(RootModel[StoreItemOut | None]):
    """The item, or `null` when it is absent, deleted or expired (as LangGraph's servers answer)."""

    @classmethod
    def of(cls, m: Memory | None) -> Self:
        return cls(StoreItemOut.of(m) if m is not None else None)


class StoreSearchItemOut(StoreItemOut):
    score: float | None = Field(description="the hybrid relevance, 0..1, when searched with a query; null without")


class StoreSearchOut(Answer):
    items: list[StoreSearchItemOut]

    @classmethod
    def of(cls, result: SearchResult) -> Self:
        return cls(items=[StoreSearchItemOut.of(m, score=m.score) for m in result.memories])


class StoreNamespacesOut(Answer):
    namespaces: list[list[str]]
