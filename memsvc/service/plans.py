"""Plans (seed 003): a planner's state machine, per (tenant, user). Another user is told a plan
does not exist (404), exactly as if it did not. `goal_data` and `state` are sealed; the plan id,
`goal_event` and `status` are plaintext (the store lists by them)."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any, Literal

from pydantic import Field, StrictStr

from memsvc.core.contention import WRITE_ATTEMPTS, backoff
from memsvc.core.errors import Conflict, InvalidArgument, NotFound, Taken
from memsvc.core.models import Caller, to_epoch_us, to_rfc3339
from memsvc.core.pages import json_size, take_page
from memsvc.core.validation import Command, Cursor, Integer
from memsvc.core.workflow import PlanRecord, StaleRecord, check_id
from memsvc.ports import Clock, BusEvents, WorkflowStore
from memsvc.service.sealing import CursorCodec, Sealer
from memsvc.service.workflow_rules import Name, WorkflowId, check_payload, check_version, notify

__all__ = ["Plans", "CreatePlan", "UpdatePlan", "ListPlans", "Plan", "PlanPage", "STATUS_EVENT"]

STATUS_EVENT = "memsvc.plan.status"
Status = Literal["running", "completed", "failed", "cancelled"]


class CreatePlan(Command):
    """`POST /v1/memory/plans`."""

    plan_id: WorkflowId
    goal_event: Name
    goal_data: dict[StrictStr, Any] = Field({})
    status: Status = "running"
    state: dict[StrictStr, Any] = Field({})


class UpdatePlan(Command):
    """`PUT /v1/memory/plans/{plan_id}`: only the fields given change."""

    status: Status = Field(None)  # type: ignore[assignment]
    state: dict[StrictStr, Any] = Field(None)  # type: ignore[assignment]
    goal_data: dict[StrictStr, Any] = Field(None)  # type: ignore[assignment]


class ListPlans(Command):
    """`GET /v1/memory/plans`: newest first; `status=active` means `running`."""

    status: Literal["active", "running", "completed", "failed", "cancelled"] | None = None
    limit: Integer = Field(20, ge=1, le=100)
    cursor: Cursor | None = Field(None, description="next_cursor of the previous page; only a cursor this "
                                                       "listing gave this caller (400 otherwise)")


@dataclass(frozen=True)
class Plan:
    record: PlanRecord
    goal_data: dict[str, Any]
    state: dict[str, Any]

    def to_json(self) -> dict[str, Any]:
        r = self.record
        return {"plan_id": r.plan_id, "goal_event": r.goal_event, "goal_data": self.goal_data, "status": r.status,
                "state": self.state, "created_at": to_rfc3339(r.created_at), "updated_at": to_rfc3339(r.updated_at),
                "version": r.version}


@dataclass(frozen=True)
class PlanPage:
    plans: list[Plan]
    next_cursor: str | None


class Plans:
    def __init__(self, *, store: WorkflowStore, sealer: Sealer, cursors: CursorCodec, clock: Clock,
                 notices: BusEvents | None = None) -> None:
        self._store = store
        self._sealer = sealer
        self._cursors = cursors
        self._clock = clock
        self._notices = notices

    def create(self, caller: Caller, cmd: CreatePlan) -> Plan:
        payload = {"goal_data": cmd.goal_data, "state": cmd.state}
        check_payload(payload, "goal_data and state")
        now = self._clock.now()
        record = PlanRecord(tenant=caller.tenant_id, user=caller.user_id, plan_id=cmd.plan_id,
                            goal_event=cmd.goal_event, status=cmd.status,
                            sealed=self._seal(caller, cmd.plan_id, payload), version=1, created_at=now, updated_at=now)
        try:
            self._store.save_plan(record, previous=None)
        except StaleRecord:
            raise Taken("a plan with this plan_id exists", details={"plan_id": cmd.plan_id}) from None
        self._status_changed(record, previous=None)
        return Plan(record, cmd.goal_data, cmd.state)

    def get(self, caller: Caller, plan_id: str) -> Plan:
        return self._open(self._own(caller, check_id(plan_id, "plan_id")))

    def list(self, caller: Caller, q: ListPlans) -> PlanPage:
        status = "running" if q.status == "active" else q.status
        purpose = f"plans\x1e{caller.user_id}\x1e{status or ''}"
        after = None
        if q.cursor is not None:
            position = self._cursors.decode(caller.tenant_id, purpose, q.cursor, field="cursor")
            after = (position.get("c"), position.get("p"))
            if not isinstance(after[0], int) or not isinstance(after[1], str):
                raise InvalidArgument("cursor is not a cursor this service gave this caller",
                                      details={"field": "cursor"})
        records = self._store.list_plans(caller.tenant_id, caller.user_id, status=status, after=after,
                                         limit=q.limit + 1)
        # Opened one at a time: a page stops at PAGE_BYTES (100 plans of 256 KB would not fit a response).
        plans, more = take_page((self._open(r) for r in records), lambda p: json_size(p.to_json()), limit=q.limit)
        next_cursor = None
        if more:
            last = plans[-1].record
            next_cursor = self._cursors.encode(caller.tenant_id, purpose,
                                               {"c": to_epoch_us(last.created_at), "p": last.plan_id})
        return PlanPage(plans, next_cursor)

    def update(self, caller: Caller, plan_id: str, cmd: UpdatePlan, *, expected_version: int | None) -> Plan:
        plan_id = check_id(plan_id, "plan_id")
        given = cmd.model_fields_set
        for attempt in range(WRITE_ATTEMPTS):
            backoff(attempt)
            old = self._own(caller, plan_id)
            check_version(expected_version, old.version, "plan")
            current = self._open(old)
            payload = {"goal_data": cmd.goal_data if "goal_data" in given else current.goal_data,
                       "state": cmd.state if "state" in given else current.state}
            check_payload(payload, "goal_data and state")
            new = replace(old, status=cmd.status if "status" in given else old.status, version=old.version + 1,
                          updated_at=self._clock.now(), sealed=self._seal(caller, plan_id, payload))
            try:
                self._store.save_plan(new, previous=old)
            except StaleRecord:
                continue
            self._status_changed(new, previous=old)
            return Plan(new, payload["goal_data"], payload["state"])
        raise Conflict("too many concurrent writes to this plan; retry", details={"plan_id": plan_id})

    def delete(self, caller: Caller, plan_id: str) -> None:
        """Idempotent; the plan's working memory goes with it."""
        plan_id = check_id(plan_id, "plan_id")
        for attempt in range(WRITE_ATTEMPTS):
            backoff(attempt)
            old = self._store.get_plan(caller.tenant_id, caller.user_id, plan_id)
            if old is None:
                # No plan, but working memory may exist under its id: it goes all the same.
                keys = [w.key for w in self._store.list_working(caller.tenant_id, caller.user_id, plan_id)]
                self._store.delete_working(caller.tenant_id, caller.user_id, plan_id, keys)
                return
            try:
                self._store.delete_plan(old)
                return
            except StaleRecord:
                continue
        raise Conflict("too many concurrent writes to this plan; retry", details={"plan_id": plan_id})

    def _status_changed(self, plan: PlanRecord, *, previous: PlanRecord | None) -> None:
        if previous is not None and previous.status == plan.status:
            return
        notify(self._notices, STATUS_EVENT, {
            "tenant": plan.tenant, "user": plan.user, "plan_id": plan.plan_id, "status": plan.status,
            "previous_status": previous.status if previous else None, "version": plan.version,
            "changed_at": to_rfc3339(plan.updated_at)})

    def _own(self, caller: Caller, plan_id: str) -> PlanRecord:
        record = self._store.get_plan(caller.tenant_id, caller.user_id, plan_id)
        if record is None:
            raise NotFound("no plan with this plan_id", details={"plan_id": plan_id})
        return record

    def _seal(self, caller: Caller, plan_id: str, payload: dict[str, Any]) -> bytes:
        return self._sealer.seal_record(caller.tenant_id, ("plan", caller.user_id, plan_id), payload)

    def _open(self, record: PlanRecord) -> Plan:
        payload = self._sealer.open_record(record.tenant, ("plan", record.user, record.plan_id), record.sealed)
        return Plan(record, payload["goal_data"], payload["state"])
