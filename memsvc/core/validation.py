"""Typed commands: the one place where input shapes are declared and checked.

A command is a pydantic model whose construction either succeeds with well-typed fields or
raises `InvalidArgument` naming the field. The HTTP API parses request bodies and query
strings straight into these models (and derives its OpenAPI document from them), so the
schema a client reads is exactly what the server enforces. Services receive them already
typed and check only domain rules (a tenant's `max_depth`, byte sizes, nesting).
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Literal, Self

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, StrictStr, StringConstraints, ValidationError

from memsvc.core.errors import InvalidArgument
from memsvc.core.models import utc
from memsvc.core.timestamps import parse_rfc3339

__all__ = ["Command", "Segment", "Namespace", "NamespacePrefix", "NoIndexing", "Timestamp", "invalid_argument"]


class Command(BaseModel):
    """Unknown fields are refused; scalars are never coerced (declare them `Strict*`).

    Validators are built when a model is first used (`defer_build`), not at import: a Lambda cold
    start imports every command of the API, and one request uses one or two of them."""

    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True, defer_build=True)

    def __init__(self, **data: Any) -> None:
        try:
            super().__init__(**data)
        except ValidationError as exc:
            raise invalid_argument(exc) from None

    @classmethod
    def parse(cls, raw: Any) -> Self:
        """Validate decoded JSON (or query parameters gathered into a dict)."""
        try:
            return cls.model_validate(raw)
        except ValidationError as exc:
            raise invalid_argument(exc) from None


def invalid_argument(exc: ValidationError) -> InvalidArgument:
    errors = [{"field": ".".join(str(p) for p in e["loc"]) or "body", "message": e["msg"]} for e in exc.errors()]
    first = exc.errors()[0]["loc"]
    return InvalidArgument(f"{errors[0]['field']}: {errors[0]['message']}",
                           details={"field": str(first[0]) if first else "body", "errors": errors})


def _reject_non_bool(value: Any) -> Any:
    # `Literal[False]` alone takes 0 (0 == False); only the JSON literal `false` means "not indexed".
    if not isinstance(value, bool):
        raise ValueError("must be false or a list of paths")
    return value


def _rfc3339(value: Any) -> Any:
    if isinstance(value, datetime):
        return utc(value)
    try:
        if not isinstance(value, str):
            raise ValueError
        return parse_rfc3339(value)
    except (ValueError, OverflowError):  # OverflowError: an offset that moves it past year 1 or 9999
        raise ValueError("must be an RFC 3339 timestamp, e.g. 2026-01-01T00:00:00Z") from None


Segment = Annotated[StrictStr, StringConstraints(min_length=1)]
Namespace = Annotated[list[Segment], Field(min_length=1, description="1..max_depth non-empty segments")]
NamespacePrefix = Annotated[list[Segment], Field(description="0..max_depth non-empty segments")]
NoIndexing = Annotated[Literal[False], BeforeValidator(_reject_non_bool)]
Timestamp = Annotated[datetime, BeforeValidator(_rfc3339), Field(description="RFC 3339")]
