"""Agent workflow state as stored (seed 003): task contexts, plans and working memory.

Ids, names and statuses are stored in the clear, so the stores can key and list by them;
everything a caller puts inside an object (`data`, `state`, `goal_data`, a working-memory
value) is one sealed blob (`Sealer.seal_record`).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from memsvc.core.errors import InvalidArgument

__all__ = ["TaskRecord", "PlanRecord", "WorkingRecord", "StaleRecord", "PLAN_STATUSES", "MAX_ID_BYTES", "MAX_NAME_CHARS",
           "MAX_SUB_TASKS", "check_id"]

PLAN_STATUSES = ("running", "completed", "failed", "cancelled")


class StaleRecord(Exception):
    """A conditional write found the record not as the writer read it (created, changed or
    deleted since); the service re-reads and decides (retry, 409 or 412)."""


@dataclass(frozen=True)
class TaskRecord:
    tenant: str
    task_id: str
    creator: str  # the user who created it: with `service`/`admin`, the only one who sees it
    plan_id: str | None
    event_type: str
    response_event: str | None
    response_topic: str
    sub_tasks: tuple[str, ...]
    sealed: bytes  # {"data", "state"}
    version: int
    created_at: datetime
    updated_at: datetime


@dataclass(frozen=True)
class PlanRecord:
    tenant: str
    user: str
    plan_id: str
    goal_event: str
    status: str
    sealed: bytes  # {"goal_data", "state"}
    version: int
    created_at: datetime
    updated_at: datetime


@dataclass(frozen=True)
class WorkingRecord:
    tenant: str
    user: str
    plan_id: str
    key: str
    sealed: bytes  # {"value"}
    version: int
    updated_at: datetime
    expires_at: datetime | None

    def is_live(self, now: datetime) -> bool:
        return self.expires_at is None or self.expires_at > now


MAX_ID_BYTES = 256  # task, plan, sub-task ids and working-memory keys, UTF-8 (each fits a DynamoDB key)
MAX_NAME_CHARS = 256  # event_type, response_event, response_topic, goal_event
MAX_SUB_TASKS = 48  # a task, its listing row and its sub-task index rows (added and removed) are one
# DynamoDB transaction (100 rows at most)


def check_id(value: str, field: str) -> str:
    """An id as the API takes it: non-empty, at most `MAX_ID_BYTES` bytes of UTF-8, no NUL."""
    if not value or len(value.encode("utf-8", "surrogatepass")) > MAX_ID_BYTES or "\x00" in value:
        raise InvalidArgument(f"{field} must be 1 to {MAX_ID_BYTES} bytes of UTF-8 without NUL",
                              details={"field": field, "max_bytes": MAX_ID_BYTES})
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise InvalidArgument(f"{field} is not valid Unicode", details={"field": field}) from None
    return value
