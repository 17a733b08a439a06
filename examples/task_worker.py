"""Seed 003's worker async flow, with two simulated worker instances sharing the work.

A research request arrives at worker-a. It saves its task context and delegates four searches
(sub-tasks). The search results then arrive in any order, each at whichever worker instance is
free; each instance restores the task by the result's sub-task id and records the result. The
instance that finishes the last sub-task answers with `research.completed` and deletes the task
context. Nothing is held in a worker's memory between events: only memsvc carries the task.

Run it against a local server (`make run` in another shell):

    MEMORY_SERVICE_URL=http://127.0.0.1:8000 \\
    MEMORY_SERVICE_TOKEN=$(.venv/bin/memsvc token --sub research-worker --roles service) \\
    .venv/bin/python examples/task_worker.py
"""

from __future__ import annotations

import queue
import threading
import uuid
from dataclasses import dataclass, field
from typing import Any

from memsvc_client import MemsvcClient, NotFoundError, TaskWorker

WORKERS = ("worker-a", "worker-b")


@dataclass
class Outcome:
    task_id: str
    answered_by: str
    response_event: str
    results: dict[str, Any]
    handled: dict[str, list[str]] = field(default_factory=dict)  # worker -> the sub-tasks it took


def main(url: str | None = None, token: str | None = None, *, quiet: bool = False) -> Outcome:
    """Run the flow; `url` and `token` default to MEMORY_SERVICE_URL and MEMORY_SERVICE_TOKEN."""
    say = (lambda *a: None) if quiet else print
    task_id = f"research-{uuid.uuid4().hex[:8]}"
    searches = [f"{task_id}/search-{n}" for n in range(4)]
    results: queue.Queue[tuple[str, Any]] = queue.Queue()
    answers: list[Outcome] = []
    handled: dict[str, list[str]] = {name: [] for name in WORKERS}

    # 1. worker-a receives the request, saves its context and delegates the searches.
    with MemsvcClient(url, token) as client:
        TaskWorker(client).delegate(task_id, "research.requested", searches, data={"topic": "AI trends"},
                                    response_event="research.completed")
    say(f"worker-a: saved {task_id}, delegated {len(searches)} searches")
    for n, search in enumerate(searches):  # the sub-agents answer (here, at once)
        results.put((search, {"hits": n + 1}))

    # 2. Both instances take results as they come; the one finishing the last sub-task answers.
    def instance(name: str) -> None:
        with MemsvcClient(url, token) as client:
            worker = TaskWorker(client)
            while True:
                try:
                    search, result = results.get_nowait()
                except queue.Empty:
                    return
                handled[name].append(search)
                done = worker.on_result(search, result)
                say(f"{name}: result of {search.rsplit('/', 1)[1]} recorded" + (", task done" if done else ""))
                if done:
                    answers.append(Outcome(done.task["task_id"], name, done.task["response_event"], done.results))
                    worker.complete(done.task["task_id"])  # 3. delete on completion

    threads = [threading.Thread(target=instance, args=(name,)) for name in WORKERS]
    for t in threads:
        t.start()
    for t in threads:
        t.join()

    [outcome] = answers  # exactly one instance completed the task
    outcome.handled = handled
    with MemsvcClient(url, token) as client:
        try:
            client.get_task_context(task_id)
            raise AssertionError("the task context should be gone")
        except NotFoundError:
            pass
    say(f"{outcome.answered_by}: {outcome.response_event} with {len(outcome.results)} results; context deleted")
    return outcome


if __name__ == "__main__":
    main()
