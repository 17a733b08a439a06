"""Working memory (seed 003): a plan's scratch keys, per (tenant, user, plan). Each value is
sealed; the plan id and the key are plaintext. A key with `ttl_seconds` is never returned once
expired (nor counted by a delete)."""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import timedelta
from typing import Any

from pydantic import Field, StrictInt

from memsvc.core.errors import NotFound
from memsvc.core.models import Caller, to_rfc3339
from memsvc.core.validation import Command
from memsvc.core.workflow import WorkingRecord, check_id
from memsvc.ports import Clock, WorkflowStore
from memsvc.service.memories import MAX_TTL_SECONDS
from memsvc.service.sealing import Sealer
from memsvc.service.workflow_rules import check_payload

__all__ = ["WorkingMemory", "PutWorking", "WorkingValue"]


class PutWorking(Command):
    """`PUT /v1/memory/working/{plan_id}/{key}`."""

    value: Any = Field(description="any JSON value")
    ttl_seconds: StrictInt | None = Field(None, ge=1, le=MAX_TTL_SECONDS, description="null = until deleted")


@dataclass(frozen=True)
class WorkingValue:
    record: WorkingRecord
    value: Any

    def to_json(self) -> dict[str, Any]:
        r = self.record
        return {"plan_id": r.plan_id, "key": r.key, "value": self.value, "version": r.version,
                "updated_at": to_rfc3339(r.updated_at), "expires_at": to_rfc3339(r.expires_at)}


class WorkingMemory:
    def __init__(self, *, store: WorkflowStore, sealer: Sealer, clock: Clock) -> None:
        self._store = store
        self._sealer = sealer
        self._clock = clock

    def put(self, caller: Caller, plan_id: str, key: str, cmd: PutWorking) -> WorkingValue:
        plan_id, key = check_id(plan_id, "plan_id"), check_id(key, "key")
        check_payload({"value": cmd.value}, "value")
        now = self._clock.now()
        record = WorkingRecord(
            tenant=caller.tenant_id, user=caller.user_id, plan_id=plan_id, key=key,
            sealed=self._sealer.seal_record(caller.tenant_id, _ids(caller, plan_id, key), {"value": cmd.value}),
            version=0, updated_at=now, expires_at=now + timedelta(seconds=cmd.ttl_seconds) if cmd.ttl_seconds else None)
        version = self._store.put_working(record)
        return WorkingValue(replace(record, version=version), cmd.value)

    def get(self, caller: Caller, plan_id: str, key: str) -> WorkingValue:
        plan_id, key = check_id(plan_id, "plan_id"), check_id(key, "key")
        record = self._store.get_working(caller.tenant_id, caller.user_id, plan_id, key)
        if record is None or not record.is_live(self._clock.now()):
            raise NotFound("no working-memory value with this plan_id and key", details={"plan_id": plan_id, "key": key})
        return self._open(caller, record)

    def list(self, caller: Caller, plan_id: str) -> list[WorkingValue]:
        plan_id = check_id(plan_id, "plan_id")
        now = self._clock.now()
        return [self._open(caller, r) for r in self._store.list_working(caller.tenant_id, caller.user_id, plan_id)
                if r.is_live(now)]

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
