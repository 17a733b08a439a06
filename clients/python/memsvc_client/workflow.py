"""Seed 003's agent workflow state as client methods: task contexts, plans and working memory
(API-AGENT.md "Agent workflow state"). `MemsvcClient` and `AsyncMemsvcClient` take these
methods from `WorkflowMethods`; each builds one request and hands it to the client's `_run`
(which returns the answer, or a coroutine of it on the async client)."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any, Literal
from urllib.parse import quote

__all__ = ["WorkflowMethods", "PlanStatus"]

PlanStatus = Literal["running", "completed", "failed", "cancelled"]
_TC = "/v1/memory/task-context"


def path_segment(part: str) -> str:
    """One path segment: an id holding `/`, `%` or anything else arrives as it is, and dots are
    encoded too, so `.` and `..` are not relative references that URL normalisation removes."""
    return quote(part, safe="").replace(".", "%2E")


def _if_match(version: int | None) -> tuple[Mapping[str, str], ...]:
    return ({"If-Match": str(version)},) if version is not None else ()


def _given(**fields: Any) -> dict[str, Any]:
    return {name: value for name, value in fields.items() if value is not _UNSET}


_UNSET: Any = object()


class WorkflowMethods:
    """Task contexts (tenant objects: their creator's and `service`/`admin` callers'), plans and
    working memory (the calling user's). Errors are the store's: `NotFoundError` (404, also for
    another user's object), `PreconditionFailedError` (412, `if_match` is stale),
    `InvalidArgumentError` (400/413), `MemsvcError` with code `CONFLICT` (409: the id is taken)."""

    _run: Callable[[tuple[Any, ...]], Any]  # each client's: the answer, or a coroutine of it

    # -- task contexts --

    def store_task_context(self, task_id: str, event_type: str, *, plan_id: str | None = None,
                           response_event: str | None = None, response_topic: str = "action-results",
                           data: Mapping[str, Any] | None = None, sub_tasks: Iterable[str] = (),
                           state: Mapping[str, Any] | None = None) -> Any:
        """`POST /v1/memory/task-context` -> `{"task_id", "created_at", "version"}`."""
        body = {"task_id": task_id, "event_type": event_type, "plan_id": plan_id, "response_event": response_event,
                "response_topic": response_topic, "data": dict(data or {}), "sub_tasks": list(sub_tasks),
                "state": dict(state or {})}
        return self._run(("POST", _TC, (), body))

    def get_task_context(self, task_id: str) -> Any:
        return self._run(("GET", f"{_TC}/{path_segment(task_id)}", (), None))

    def get_task_by_subtask(self, subtask_id: str) -> Any:
        """The task context whose `sub_tasks` holds `subtask_id` (`NotFoundError` when none;
        `AuthError` when it is another user's and the caller is neither `service` nor `admin`)."""
        return self._run(("GET", f"{_TC}/by-subtask/{path_segment(subtask_id)}", (), None))

    def update_task_context(self, task_id: str, *, if_match: int | None = None, sub_tasks: Iterable[str] = _UNSET,
                            state: Mapping[str, Any] = _UNSET, data: Mapping[str, Any] = _UNSET,
                            plan_id: str | None = _UNSET, response_event: str | None = _UNSET,
                            response_topic: str = _UNSET) -> Any:
        """`PUT`: only the fields given change; `if_match`: the version it must still be at."""
        body = _given(state=state, data=data, plan_id=plan_id, response_event=response_event,
                      response_topic=response_topic)
        if sub_tasks is not _UNSET:
            body["sub_tasks"] = list(sub_tasks)
        return self._run(("PUT", f"{_TC}/{path_segment(task_id)}", (), body, *_if_match(if_match)))

    def change_sub_tasks(self, task_id: str, *, add: Iterable[str] = (), remove: Iterable[str] = ()) -> Any:
        """Atomic: `{"sub_tasks", "remaining", "removed", "version"}`; of workers removing the last
        sub-tasks at once, exactly one gets `remaining == 0` with its sub-task in `removed`."""
        return self._run(("POST", f"{_TC}/{path_segment(task_id)}/sub-tasks", (),
                          {"add": list(add), "remove": list(remove)}))

    def delete_task_context(self, task_id: str) -> Any:
        """Idempotent."""
        return self._run(("DELETE", f"{_TC}/{path_segment(task_id)}", (), None))

    # -- plans --

    def create_plan(self, plan_id: str, goal_event: str, *, goal_data: Mapping[str, Any] | None = None,
                    status: PlanStatus = "running", state: Mapping[str, Any] | None = None) -> Any:
        return self._run(("POST", "/v1/memory/plans", (), {"plan_id": plan_id, "goal_event": goal_event,
                                                          "goal_data": dict(goal_data or {}), "status": status,
                                                          "state": dict(state or {})}))

    def list_plans(self, *, status: PlanStatus | Literal["active"] | None = None, limit: int | None = None,
                   cursor: str | None = None) -> Any:
        """One page, newest first: `{"plans", "count", "next_cursor"}` (`status="active"`: running)."""
        query = [(k, str(v)) for k, v in (("status", status), ("limit", limit), ("cursor", cursor)) if v is not None]
        return self._run(("GET", "/v1/memory/plans", query, None))

    def get_plan(self, plan_id: str) -> Any:
        return self._run(("GET", f"/v1/memory/plans/{path_segment(plan_id)}", (), None))

    def update_plan(self, plan_id: str, *, if_match: int | None = None, status: PlanStatus = _UNSET,
                    state: Mapping[str, Any] = _UNSET, goal_data: Mapping[str, Any] = _UNSET) -> Any:
        body = _given(status=status, state=state, goal_data=goal_data)
        return self._run(("PUT", f"/v1/memory/plans/{path_segment(plan_id)}", (), body, *_if_match(if_match)))

    def delete_plan(self, plan_id: str) -> Any:
        """Idempotent; the plan's working memory goes too."""
        return self._run(("DELETE", f"/v1/memory/plans/{path_segment(plan_id)}", (), None))

    # -- working memory --

    def set_working(self, plan_id: str, key: str, value: Any, *, ttl_seconds: int | None = None,
                    if_match: int | None = None) -> Any:
        body = {"value": value, **({"ttl_seconds": ttl_seconds} if ttl_seconds is not None else {})}
        return self._run(("PUT", f"/v1/memory/working/{path_segment(plan_id)}/{path_segment(key)}", (), body,
                          *_if_match(if_match)))

    def get_working(self, plan_id: str, key: str) -> Any:
        return self._run(("GET", f"/v1/memory/working/{path_segment(plan_id)}/{path_segment(key)}", (), None))

    def list_working(self, plan_id: str, *, limit: int | None = None, cursor: str | None = None) -> Any:
        """One page in key order: `{"items": [...], "next_cursor"}`."""
        query = [(k, str(v)) for k, v in (("limit", limit), ("cursor", cursor)) if v is not None]
        return self._run(("GET", f"/v1/memory/working/{path_segment(plan_id)}", query, None))

    def delete_working(self, plan_id: str, key: str) -> Any:
        """`NotFoundError` when the key is not there."""
        return self._run(("DELETE", f"/v1/memory/working/{path_segment(plan_id)}/{path_segment(key)}", (), None))

    def delete_all_working(self, plan_id: str) -> Any:
        """`{"deleted_count", "plan_id"}`."""
        return self._run(("DELETE", f"/v1/memory/working/{path_segment(plan_id)}", (), None))
