"""The error taxonomy: every failure a caller can see, with its HTTP status and retry rule.

The API maps these to `{"error": {"code", "message", "retryable", "details"}}` in one place.
Messages are written for the caller: never a stack trace, never another tenant's data.
"""

from __future__ import annotations

from typing import Any

__all__ = [
    "echoed",
    "MemsvcError",
    "PreconditionFailed",
    "StoreUnavailable",
    "InvalidArgument",
    "Unauthorized",
    "Forbidden",
    "NotFound",
    "Conflict",
    "PreconditionFailed",
    "ContentTooLong",
    "MissingIdentifier",
    "InvalidLayer",
    "PolicyViolation",
    "RateLimited",
    "EmbeddingFailed",
    "OverIndexBudget",
    "ProviderError",
    "InternalError",
]


class MemsvcError(Exception):
    code = "INTERNAL"
    status = 500
    retryable = False

    def __init__(self, message: str, *, details: dict[str, Any] | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.details = details or {}

    def to_body(self) -> dict[str, Any]:
        return {
            "error": {
                "code": self.code,
                "message": self.message,
                "retryable": self.retryable,
                "details": self.details,
            }
        }


class InvalidArgument(MemsvcError):
    code, status = "INVALID_ARGUMENT", 400


class Unauthorized(MemsvcError):
    code, status = "UNAUTHORIZED", 401


class MissingIdentifier(InvalidArgument):
    """A layer was asked for without the identifiers its namespace needs (API-AGENT.md "Layers")."""

    code = "MISSING_IDENTIFIER"

    def __init__(self, layer: str, missing: list[str]) -> None:
        super().__init__(f"layer {layer!r} needs {', '.join(missing)}", details={"layer": layer, "missing": missing})


class InvalidLayer(InvalidArgument):
    code = "INVALID_LAYER"


class PolicyViolation(MemsvcError):
    """The governance policy refused a value (API-AGENT.md "Governance and limits")."""

    code, status = "POLICY_VIOLATION", 422


class Forbidden(MemsvcError):
    code, status = "FORBIDDEN", 403


class NotFound(MemsvcError):
    code, status = "NOT_FOUND", 404


class Conflict(MemsvcError):
    code, status, retryable = "CONFLICT", 409, True


class Taken(Conflict):
    """A 409 that no retry changes: the id is in use, or the object is in a state that refuses the
    write (a closed session)."""

    retryable = False


class PreconditionFailed(MemsvcError):
    """`If-Match` named a version that is no longer the current one (API-AGENT.md "Agent workflow state")."""

    code, status = "PRECONDITION_FAILED", 412


class ContentTooLong(MemsvcError):
    code, status = "CONTENT_TOO_LONG", 413

    def __init__(self, message: str, *, max_bytes: int, details: dict[str, Any] | None = None):
        super().__init__(message, details={"max_bytes": max_bytes, **(details or {})})


class RateLimited(MemsvcError):
    code, status, retryable = "RATE_LIMITED", 429, True

    def __init__(self, message: str, *, retry_after_seconds: int = 1, details: dict[str, Any] | None = None):
        super().__init__(message, details={"retry_after_seconds": retry_after_seconds, **(details or {})})
        self.retry_after_seconds = retry_after_seconds


class EmbeddingFailed(MemsvcError):
    code, status, retryable = "EMBEDDING_FAILED", 503, True


class OverIndexBudget(EmbeddingFailed):
    """A memory whose indexing goes over its budget (`core.index_budget`): sending it again would
    too, so the caller is told not to."""

    retryable = False


class ProviderError(MemsvcError):
    code, status, retryable = "PROVIDER_ERROR", 502, True


class InternalError(MemsvcError):
    code, status = "INTERNAL", 500


class StoreUnavailable(MemsvcError):
    """The store refused or failed a write it should have taken; nothing was written."""

    code, status, retryable = "STORE_UNAVAILABLE", 503, True


def echoed(text: str, limit: int = 200) -> str:
    """The client's text as an error message repeats it: cut short at `limit` characters, so a
    long path or method name is not sent back whole."""
    return text if len(text) <= limit else text[:limit] + "…"
