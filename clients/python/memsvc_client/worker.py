"""Seed 003's "Worker async flow" in a few lines: save on delegate, restore by sub-task, complete
when the last sub-task is done, delete on completion.

    worker = TaskWorker(client)
    worker.delegate("task-1", "research.requested", ["search-1", "search-2"], data=request)
    ...                                                    # later, in whichever worker instance:
    done = worker.on_result("search-1", {"hits": 3})       # None until the last sub-task is in
    if done:
        publish(done.task["response_event"], done.results)
        worker.complete(done.task["task_id"])              # deletes the task context

Each result is kept in the task context's `state["results"]` (written with `If-Match`, so two
instances recording results at once both land), then its sub-task is removed atomically: of the
instances finishing the last sub-tasks at once, exactly one gets the `SubTaskDone`. A result
delivered twice is recorded once and never completes the task twice.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from memsvc_client.client import AsyncMemsvcClient, MemsvcClient
from memsvc_client.store import MemsvcError, NotFoundError, PreconditionFailedError

__all__ = ["TaskWorker", "AsyncTaskWorker", "SubTaskDone"]

_RECORD_ATTEMPTS = 20


@dataclass(frozen=True)
class SubTaskDone:
    """The last sub-task of `task` is done: `results` maps each sub-task id to its result."""

    task: dict[str, Any]
    results: dict[str, Any]


def _with_result(task: dict[str, Any], subtask_id: str, result: Any) -> dict[str, Any]:
    state = dict(task["state"])
    state["results"] = {**state.get("results", {}), subtask_id: result}
    return state


class TaskWorker:
    def __init__(self, client: MemsvcClient) -> None:
        self.client = client

    def delegate(self, task_id: str, event_type: str, sub_tasks: Iterable[str], *,
                 data: Mapping[str, Any] | None = None, **fields: Any) -> dict[str, Any]:
        """Save the task context with the sub-tasks just delegated (adds them if it exists)."""
        sub_tasks = list(sub_tasks)
        try:
            self.client.store_task_context(task_id, event_type, data=data, sub_tasks=sub_tasks, **fields)
        except MemsvcError as exc:
            if exc.code != "CONFLICT" or exc.details.get("task_id") != task_id:
                raise
            self.client.change_sub_tasks(task_id, add=sub_tasks)
        return self.client.get_task_context(task_id)

    def on_result(self, subtask_id: str, result: Any) -> SubTaskDone | None:
        """Restore the task by the sub-task, record its result, mark it done. None unless this
        call finished the task's last sub-task (or the task is gone: already completed). A task
        another user made is `AuthError` unless the worker's identity has role `service` (or
        `admin`), as a worker's should."""
        try:
            task = self.client.get_task_by_subtask(subtask_id)
            for _ in range(_RECORD_ATTEMPTS):
                try:
                    task = self.client.update_task_context(task["task_id"], if_match=task["version"],
                                                           state=_with_result(task, subtask_id, result))
                    break
                except PreconditionFailedError:
                    task = self.client.get_task_context(task["task_id"])
            else:
                raise MemsvcError("CONFLICT", "could not record the result: the task context keeps changing")
            changed = self.client.change_sub_tasks(task["task_id"], remove=[subtask_id])
        except NotFoundError:
            return None
        if changed["remaining"] == 0 and subtask_id in changed["removed"]:
            task = self.client.get_task_context(task["task_id"])
            return SubTaskDone(task, task["state"].get("results", {}))
        return None

    def complete(self, task_id: str) -> None:
        """Delete the task context (on completion). Idempotent."""
        self.client.delete_task_context(task_id)


class AsyncTaskWorker:
    """`TaskWorker` on `AsyncMemsvcClient`: the same steps as coroutines."""

    def __init__(self, client: AsyncMemsvcClient) -> None:
        self.client = client

    async def delegate(self, task_id: str, event_type: str, sub_tasks: Iterable[str], *,
                       data: Mapping[str, Any] | None = None, **fields: Any) -> dict[str, Any]:
        sub_tasks = list(sub_tasks)
        try:
            await self.client.store_task_context(task_id, event_type, data=data, sub_tasks=sub_tasks, **fields)
        except MemsvcError as exc:
            if exc.code != "CONFLICT" or exc.details.get("task_id") != task_id:
                raise
            await self.client.change_sub_tasks(task_id, add=sub_tasks)
        return await self.client.get_task_context(task_id)

    async def on_result(self, subtask_id: str, result: Any) -> SubTaskDone | None:
        try:
            task = await self.client.get_task_by_subtask(subtask_id)
            for _ in range(_RECORD_ATTEMPTS):
                try:
                    task = await self.client.update_task_context(task["task_id"], if_match=task["version"],
                                                                 state=_with_result(task, subtask_id, result))
                    break
                except PreconditionFailedError:
                    task = await self.client.get_task_context(task["task_id"])
            else:
                raise MemsvcError("CONFLICT", "could not record the result: the task context keeps changing")
            changed = await self.client.change_sub_tasks(task["task_id"], remove=[subtask_id])
        except NotFoundError:
            return None
        if changed["remaining"] == 0 and subtask_id in changed["removed"]:
            task = await self.client.get_task_context(task["task_id"])
            return SubTaskDone(task, task["state"].get("results", {}))
        return None

    async def complete(self, task_id: str) -> None:
        await self.client.delete_task_context(task_id)
