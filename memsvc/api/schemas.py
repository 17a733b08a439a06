"""Wire shapes of the HTTP API (API.md). Request bodies are parsed strictly: a wrong type or an
unknown field is a 400 naming the field, never a silent coercion."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Literal

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, ValidationError

from memsvc.core.errors import InvalidArgument
from memsvc.core.models import Memory, to_rfc3339
from memsvc.service.memories import EventView

__all__ = [
    "PutMemoryBody",
    "SearchBody",
    "PutMemoryOut",
    "MemoryOut",
    "SearchItemOut",
    "SearchOut",
    "NamespacesOut",
    "PoliciesBody",
    "PoliciesOut",
    "IndexStatusOut",
    "IndexTriggerOut",
    "HealthOut",
    "ErrorOut",
    "parse_body",
    "memory_out",
]


class _Body(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)


def _a_bool(value: Any) -> Any:
    if not isinstance(value, bool):  # Literal[False] alone takes 0 and 0.0: they == False
        raise ValueError("expected false")
    return value


class PutMemoryBody(_Body):
    namespace: list[str] = Field(description="1..max_depth non-empty segments")
    key: str = Field(description="non-empty, at most 1024 bytes UTF-8")
    value: dict[str, Any]
    attributes: dict[str, Any] | None = None
    ttl_seconds: int | None = Field(None, description="> 0; null = never expires")
    index_fields: list[str] | Annotated[Literal[False], BeforeValidator(_a_bool)] | None = Field(
        None, description="paths to embed (a.b, arr[*].c); false = not indexed; default every string leaf"
    )
    sync_index: bool = Field(False, description="return only after the item's vectors are written")


class SearchBody(_Body):
    namespace_prefix: list[str]
    query: str | None = None
    filter: dict[str, Any] | None = None
    limit: int = Field(10, ge=1, le=100)
    offset: int = Field(0, ge=0)
    refresh_ttl: bool = Field(False, description="restart the TTL of every returned item (LangGraph refresh_on_read)")


class PoliciesBody(_Body):
    policies: dict[str, str] = Field(description="file name -> Rego source")


class PutMemoryOut(BaseModel):
    id: str
    namespace: list[str]
    key: str
    attributes: dict[str, Any] | None
    created_at: datetime
    updated_at: datetime
    expires_at: datetime | None
    version: int


class MemoryOut(PutMemoryOut):
    value: dict[str, Any]


class SearchItemOut(MemoryOut):
    score: float | None


class SearchOut(BaseModel):
    items: list[SearchItemOut]


class EventOut(BaseModel):
    id: str
    namespace: list[str]
    key: str
    kind: Literal["add", "update", "delete", "expired"]
    occurred_at: datetime
    value: dict[str, Any] | None
    attributes: dict[str, Any] | None
    expires_at: datetime | None
    memory_id: str
    version: int


class EventsOut(BaseModel):
    events: list[EventOut]
    after_cursor: str | None
    resume_cursor: str | None


class NamespacesOut(BaseModel):
    namespaces: list[list[str]]


class PoliciesOut(BaseModel):
    version: str
    policies: dict[str, str]


class IndexStatusOut(BaseModel):
    pending: int
    embedding_model: str
    dimension: int
    stats: dict[str, float]


class IndexTriggerOut(BaseModel):
    processed: int
    pending: int


class HealthOut(BaseModel):
    status: Literal["healthy", "degraded", "unhealthy"]
    components: dict[str, dict[str, Any]]


class _ErrorBody(BaseModel):
    code: str
    message: str
    retryable: bool
    details: dict[str, Any]


class ErrorOut(BaseModel):
    error: _ErrorBody


def parse_body(model: type[_Body], raw: Any) -> Any:
    try:
        return model.model_validate(raw)
    except ValidationError as exc:
        errors = [
            {"field": ".".join(str(p) for p in e["loc"]) or "body", "message": e["msg"]} for e in exc.errors()
        ]
        first = errors[0]
        raise InvalidArgument(f"{first['field']}: {first['message']}", details={"errors": errors}) from None


def event_out(view: EventView) -> dict[str, Any]:
    e = view.event
    return {
        "id": e.id,
        "namespace": list(e.namespace),
        "key": e.key,
        "kind": e.kind,
        "occurred_at": to_rfc3339(e.occurred_at),
        "value": view.value,
        "attributes": view.attributes,
        "expires_at": to_rfc3339(e.expires_at),
        "memory_id": e.memory_id,
        "version": e.version,
    }


def memory_out(m: Memory, *, value: bool = True, score: bool = False) -> dict[str, Any]:
    out: dict[str, Any] = {
        "id": m.id,
        "namespace": list(m.namespace),
        "key": m.key,
        "attributes": m.attributes,
        "created_at": to_rfc3339(m.created_at),
        "updated_at": to_rfc3339(m.updated_at),
        "expires_at": to_rfc3339(m.expires_at),
        "version": m.version,
    }
    if value:
        out["value"] = m.value
    if score:
        out["score"] = m.score
    return out
