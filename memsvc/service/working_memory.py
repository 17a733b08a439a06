"""Working memory (seed 003): a plan's scratch keys, per (tenant, user, plan). Each value is
sealed; the plan id and the key are plaintext. A key with `ttl_seconds` is never returned once
expired (nor counted by a delete).

A key is written only into a plan of the caller's that exists (404 otherwise, as for another
user's plan): the contract scopes working memory to a plan and deletes it with the plan, and the
store checks the plan in the write's own transaction, so a put racing the plan's deletion never
leaves keys behind it. The list is paged by key, and a page stops at `core.pages.PAGE_BYTES`.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from typing import Any

from pydantic import Field

from memsvc.core.contention import WRITE_ATTEMPTS, backoff
from memsvc.core.errors import Conflict, InvalidArgument, NotFound, PreconditionFailed
from memsvc.core.models import Caller, to_rfc3339
from memsvc.core.pages import json_size, take_page
from memsvc.core.validation import Command, Cursor, Integer
from memsvc.core.workflow import StaleRecord, WorkingRecord, check_id
from memsvc.ports import Clock, WorkflowStore
from memsvc.service.memories import MAX_TTL_SECONDS
from memsvc.service.sealing import CursorCodec, Sealer
from memsvc.service.workflow_rules import check_payload, check_version

__all__ = ["WorkingMemory", "PutWorking", "ListWorking", "WorkingValue", "WorkingPage"]


class PutWorking(Command):
    """`PUT /v1/memory/working/{plan_id}/{key}`."""

    value: Any = Field(description="any JSON value")
    ttl_seconds: Integer | None = Field(None, ge=1, le=MAX_TTL_SECONDS, description="null = until deleted")


class ListWorking(Command):
    """`GET /v1/memory/working/{plan_id}`: by key, a page at a time."""

    limit: Integer = Field(1000, ge=1, le=1000, description="at most this many; a page also stops at 1.5 MiB")
    cursor: Cursor | None = Field(None, description="next_cursor of the previous page; only a cursor this "
                                                       "listing gave this caller (400 otherwise)")


@dataclass(frozen=True)
class WorkingValue:
    record: WorkingRecord
    value: Any

    def to_json(self) -> dict[str, Any]:
        r = self.record
        return {"plan_id": r.plan_id, "key": r.key, "value": self.value, "version": r.version,
                "updated_at": to_rfc3339(r.updated_at), "expires_at": to_rfc3339(r.expires_at)}


@dataclass(frozen=True)
class WorkingPage:
    items: list[WorkingValue]
    next_cursor: str | None


class WorkingMemory:
    def __init__(self, *, store: WorkflowStore, sealer: Sealer, clock: Clock, cursors: CursorCodec) -> None:
        self._store = store
        self._sealer = sealer
        self._clock = clock
        self._cursors = cursors

    def put(self, caller: Caller, plan_id: str, key: str, cmd: PutWorking, *,
            if_match: int | None = None) -> WorkingValue:
        """Without `if_match`, a put that loses to a concurrent one is written again on top of it.
        With it (`If-Match`), the value is written only over that version of the key, atomically
        (412 otherwise, and when the key has no live value)."""
        plan_id, key = check_id(plan_id, "plan_id"), check_id(key, "key")
        check_payload({"value": cmd.value}, "value")
        for attempt in range(WRITE_ATTEMPTS):
            backoff(attempt)
            now = self._clock.now()
            if if_match is not None:
                self._check_version(caller, plan_id, key, if_match, now)
            record = WorkingRecord(
                tenant=caller.tenant_id, user=caller.user_id, plan_id=plan_id, key=key,
                sealed=self._sealer.seal_record(caller.tenant_id, _ids(caller, plan_id, key), {"value": cmd.value}),
                version=0, updated_at=now,
                expires_at=now + timedelta(seconds=cmd.ttl_seconds) if cmd.ttl_seconds else None)
            try:
                version = self._store.put_working(record, expected_version=if_match)
            except StaleRecord:
                continue  # a concurrent put of the key won: write on top of it (or, with if_match, 412)
            if version is None:
                raise NotFound("no plan with this plan_id", details={"plan_id": plan_id})
            return WorkingValue(replace(record, version=version), cmd.value)
        raise Conflict("too many concurrent writes to this key; retry", details={"plan_id": plan_id, "key": key})

    def _check_version(self, caller: Caller, plan_id: str, key: str, expected: int, now: datetime) -> None:
        current = self._store.get_working(caller.tenant_id, caller.user_id, plan_id, key)
        if current is not None and current.is_live(now):
            check_version(expected, current.version, "working-memory value")
            return
        if self._store.get_plan(caller.tenant_id, caller.user_id, plan_id) is None:
            raise NotFound("no plan with this plan_id", details={"plan_id": plan_id})
        raise PreconditionFailed("the working-memory value has no current version for If-Match to name",
                                 details={"expected_version": expected, "current_version": None})

    def get(self, caller: Caller, plan_id: str, key: str) -> WorkingValue:
        plan_id, key = check_id(plan_id, "plan_id"), check_id(key, "key")
        record = self._store.get_working(caller.tenant_id, caller.user_id, plan_id, key)
        if record is None or not record.is_live(self._clock.now()):
            raise NotFound("no working-memory value with this plan_id and key", details={"plan_id": plan_id, "key": key})
        return self._open(caller, record)

    def list(self, caller: Caller, plan_id: str, q: ListWorking) -> WorkingPage:
        plan_id = check_id(plan_id, "plan_id")
        purpose = f"working\x1e{caller.user_id}\x1e{plan_id}"
        after = None
        if q.cursor is not None:
            after = self._cursors.decode(caller.tenant_id, purpose, q.cursor, field="cursor").get("k")
            if not isinstance(after, str):
                raise InvalidArgument("cursor is not a cursor this service gave this caller",
                                      details={"field": "cursor"})
        now = self._clock.now()
        live = (self._open(caller, r) for r in self._store.iter_working(caller.tenant_id, caller.user_id, plan_id,
                                                                          after=after) if r.is_live(now))
        page, more = take_page(live, lambda w: json_size(w.to_json()), limit=q.limit)
        next_cursor = (self._cursors.encode(caller.tenant_id, purpose, {"k": page[-1].record.key})
                       if more else None)
        return WorkingPage(page, next_cursor)

    def delete(self, caller: Caller, plan_id: str, key: str) -> None:
        """404 when there is no such live key (seed 003)."""
        plan_id, key = check_id(plan_id, "plan_id"), check_id(key, "key")
        record = self._store.get_working(caller.tenant_id, caller.user_id, plan_id, key)
        if record is None or not record.is_live(self._clock.now()):
            raise NotFound("no working-memory value with this plan_id and key", details={"plan_id": plan_id, "key": key})
        self._store.delete_working(caller.tenant_id, caller.user_id, plan_id, [key])

    def delete_all(self, caller: Caller, plan_id: str) -> int:
        """How many live keys were deleted (expired ones go too, uncounted)."""
        plan_id = check_id(plan_id, "plan_id")
        now = self._clock.now()
        records = self._store.list_working(caller.tenant_id, caller.user_id, plan_id)
        self._store.delete_working(caller.tenant_id, caller.user_id, plan_id, [r.key for r in records])
        return sum(1 for r in records if r.is_live(now))

    def _open(self, caller: Caller, record: WorkingRecord) -> WorkingValue:
        payload = self._sealer.open_record(caller.tenant_id, _ids(caller, record.plan_id, record.key), record.sealed)
        return WorkingValue(record, payload["value"])


def _ids(caller: Caller, plan_id: str, key: str) -> tuple[str, ...]:
    return ("working", caller.user_id, plan_id, key)
