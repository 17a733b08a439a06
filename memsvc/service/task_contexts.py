"""Task contexts (seed 003): what an event-driven worker saves when it delegates, found again by
a sub-task's id when a result arrives.

A task context belongs to its tenant: its creator and callers with role `service` or `admin`
read and write it; anyone else is told it does not exist (404), exactly as if it did not. Its
`data` and `state` are sealed; ids, event names and the sub-task list are plaintext (the store
keys and indexes by them).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from pydantic import Field, StrictStr

from memsvc.core.contention import WRITE_ATTEMPTS, backoff
from memsvc.core.errors import Conflict, Forbidden, InvalidArgument, NotFound, Taken
from memsvc.core.models import Caller, to_rfc3339
from memsvc.core.validation import Command
from memsvc.core.workflow import MAX_SUB_TASKS, StaleRecord, TaskRecord, check_id
from memsvc.ports import Clock, BusEvents, WorkflowStore
from memsvc.service.sealing import Sealer
from memsvc.service.workflow_rules import Name, WorkflowId, check_payload, check_version, notify

__all__ = ["TaskContexts", "CreateTaskContext", "UpdateTaskContext", "ChangeSubTasks", "TaskContext", "SubTasksChanged",
           "DELETED_EVENT"]

DELETED_EVENT = "memsvc.task-context.deleted"
SubTaskIds = list[WorkflowId]


class CreateTaskContext(Command):
    """`POST /v1/memory/task-context`."""

    task_id: WorkflowId
    plan_id: WorkflowId | None = None
    event_type: Name
    response_event: Name | None = None
    response_topic: Name = "action-results"
    data: dict[StrictStr, Any] = Field({})
    sub_tasks: SubTaskIds = Field([], max_length=MAX_SUB_TASKS)
    state: dict[StrictStr, Any] = Field({})


class UpdateTaskContext(Command):
    """`PUT /v1/memory/task-context/{task_id}`: only the fields given change (`plan_id` and
    `response_event` may be set to null)."""

    sub_tasks: SubTaskIds = Field(None, max_length=MAX_SUB_TASKS)  # type: ignore[assignment]
    state: dict[StrictStr, Any] = Field(None)  # type: ignore[assignment]
    data: dict[StrictStr, Any] = Field(None)  # type: ignore[assignment]
    plan_id: WorkflowId | None = None
    response_event: Name | None = None
    response_topic: Name = Field(None)  # type: ignore[assignment]


class ChangeSubTasks(Command):
    """`POST /v1/memory/task-context/{task_id}/sub-tasks`: one atomic change of the list. No id may be
    both added and removed, and the list holds at most 48 sub-tasks after the change (400 otherwise)."""

    add: SubTaskIds = Field([], max_length=MAX_SUB_TASKS)
    remove: SubTaskIds = Field([], max_length=MAX_SUB_TASKS)


@dataclass(frozen=True)
class TaskContext:
    record: TaskRecord
    data: dict[str, Any]
    state: dict[str, Any]

    def to_json(self) -> dict[str, Any]:
        r = self.record
        return {"task_id": r.task_id, "plan_id": r.plan_id, "event_type": r.event_type,
                "response_event": r.response_event, "response_topic": r.response_topic, "data": self.data,
                "sub_tasks": list(r.sub_tasks), "state": self.state, "created_at": to_rfc3339(r.created_at),
                "updated_at": to_rfc3339(r.updated_at), "version": r.version}


@dataclass(frozen=True)
class SubTasksChanged:
    sub_tasks: tuple[str, ...]
    removed: tuple[str, ...]  # those of `remove` this call took out (not already gone)
    version: int


class TaskContexts:
    def __init__(self, *, store: WorkflowStore, sealer: Sealer, clock: Clock,
                 notices: BusEvents | None = None) -> None:
        self._store = store
        self._sealer = sealer
        self._clock = clock
        self._notices = notices

    def create(self, caller: Caller, cmd: CreateTaskContext) -> TaskRecord:
        payload = {"data": cmd.data, "state": cmd.state}
        check_payload(payload, "data and state")
        now = self._clock.now()
        record = TaskRecord(
            tenant=caller.tenant_id, task_id=cmd.task_id, creator=caller.user_id, plan_id=cmd.plan_id,
            event_type=cmd.event_type, response_event=cmd.response_event, response_topic=cmd.response_topic,
            sub_tasks=_distinct(cmd.sub_tasks), sealed=self._seal(caller.tenant_id, cmd.task_id, payload),
            version=1, created_at=now, updated_at=now)
        try:
            self._store.save_task(record, previous=None)
        except StaleRecord:
            # Task ids are the tenant's names, so this is the one answer that says an id is taken.
            raise Taken("a task context with this task_id exists", details={"task_id": cmd.task_id}) from None
        return record

    def get(self, caller: Caller, task_id: str) -> TaskContext:
        return self._open(self._visible(caller, check_id(task_id, "task_id")))

    def by_subtask(self, caller: Caller, subtask_id: str) -> TaskContext:
        task_id = self._store.task_of_subtask(caller.tenant_id, check_id(subtask_id, "subtask_id"))
        if task_id is None:
            raise NotFound("no task context has this sub-task", details={"subtask_id": subtask_id})
        try:
            return self._open(self._visible(caller, task_id))
        except Forbidden:  # never its task id, which the error of `_visible` names
            raise Forbidden("the task context holding this sub-task is not yours",
                            details={"subtask_id": subtask_id}) from None
        except NotFound:  # deleted since the sub-task was looked up
            raise NotFound("no task context has this sub-task", details={"subtask_id": subtask_id}) from None

    def update(self, caller: Caller, task_id: str, cmd: UpdateTaskContext, *, expected_version: int | None) -> TaskContext:
        task_id = check_id(task_id, "task_id")
        given = cmd.model_fields_set
        for attempt in range(WRITE_ATTEMPTS):
            backoff(attempt)
            old = self._visible(caller, task_id)
            check_version(expected_version, old.version, "task context")
            current = self._open(old)
            payload = {"data": cmd.data if "data" in given else current.data,
                       "state": cmd.state if "state" in given else current.state}
            check_payload(payload, "data and state")
            new = replace(
                old, version=old.version + 1, updated_at=self._clock.now(), sealed=self._seal(caller.tenant_id, task_id, payload),
                sub_tasks=_distinct(cmd.sub_tasks) if "sub_tasks" in given else old.sub_tasks,
                plan_id=cmd.plan_id if "plan_id" in given else old.plan_id,
                response_event=cmd.response_event if "response_event" in given else old.response_event,
                response_topic=cmd.response_topic if "response_topic" in given else old.response_topic)
            try:
                self._store.save_task(new, previous=old)
                return TaskContext(new, payload["data"], payload["state"])
            except StaleRecord:
                continue
        raise Conflict("too many concurrent writes to this task context; retry", details={"task_id": task_id})

    def change_sub_tasks(self, caller: Caller, task_id: str, cmd: ChangeSubTasks) -> SubTasksChanged:
        task_id = check_id(task_id, "task_id")
        both = set(cmd.add) & set(cmd.remove)
        if both:
            raise InvalidArgument("a sub-task cannot be added and removed at once",
                                  details={"field": "add", "sub_tasks": sorted(both)})
        for attempt in range(WRITE_ATTEMPTS):
            backoff(attempt)
            old = self._visible(caller, task_id)
            removed = tuple(s for s in old.sub_tasks if s in set(cmd.remove))
            kept = [s for s in old.sub_tasks if s not in set(cmd.remove)]
            sub_tasks = _distinct(kept + list(cmd.add))
            if len(sub_tasks) > MAX_SUB_TASKS:
                raise InvalidArgument(f"a task context holds at most {MAX_SUB_TASKS} sub-tasks",
                                      details={"field": "add", "max_sub_tasks": MAX_SUB_TASKS})
            if sub_tasks == old.sub_tasks:
                return SubTasksChanged(old.sub_tasks, removed, old.version)  # nothing to change
            new = replace(old, sub_tasks=sub_tasks, version=old.version + 1, updated_at=self._clock.now())
            try:
                self._store.save_task(new, previous=old)
                return SubTasksChanged(sub_tasks, removed, new.version)
            except StaleRecord:
                continue
        raise Conflict("too many concurrent writes to this task context; retry", details={"task_id": task_id})

    def delete(self, caller: Caller, task_id: str) -> None:
        """Idempotent: deleting what is not there changes nothing; another user's is `403`."""
        task_id = check_id(task_id, "task_id")
        for attempt in range(WRITE_ATTEMPTS):
            backoff(attempt)
            try:
                old = self._visible(caller, task_id)
            except NotFound:
                return
            try:
                self._store.delete_task(old)
            except StaleRecord:
                continue
            notify(self._notices, DELETED_EVENT, {
                "tenant": caller.tenant_id, "task_id": task_id, "plan_id": old.plan_id,
                "deleted_at": to_rfc3339(self._clock.now())})
            return
        raise Conflict("too many concurrent writes to this task context; retry", details={"task_id": task_id})

    def _visible(self, caller: Caller, task_id: str) -> TaskRecord:
        """The task context, if the caller may use it: its creator, or a `service` or `admin`. Task
        ids are the tenant's names (a `POST` of a taken one is `409`), so another user's is `403`
        (API.md: "an identity without access is `403`"), not a `404` that the `409` belies."""
        record = self._store.get_task(caller.tenant_id, task_id)
        if record is None:
            raise NotFound("no task context with this task_id", details={"task_id": task_id})
        if not (record.creator == caller.user_id or caller.is_admin):
            raise Forbidden("this task context is not yours", details={"task_id": task_id})
        return record

    def _seal(self, tenant: str, task_id: str, payload: dict[str, Any]) -> bytes:
        return self._sealer.seal_record(tenant, ("task", task_id), payload)

    def _open(self, record: TaskRecord) -> TaskContext:
        payload = self._sealer.open_record(record.tenant, ("task", record.task_id), record.sealed)
        return TaskContext(record, payload["data"], payload["state"])


def _distinct(ids: list[str]) -> tuple[str, ...]:
    return tuple(dict.fromkeys(ids))
