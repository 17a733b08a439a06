"""Request threads shared fairly between tenants (`memsvc serve`).

A plain thread pool answers requests in arrival order, so one tenant's burst of slow requests
queues every other tenant's request behind the whole burst: eight searches with a 50,000-value
filter (half a second of CPU each) kept another tenant's `GET /v1/identity` waiting 2.5 s on two
threads. Here a free thread takes the oldest request of the tenant with the fewest requests
running, among equals the tenant served longest ago (a tenant with nothing running or waiting
starts afresh). Another tenant's request then waits for at most one running request per thread,
not for the queue.
"""

from __future__ import annotations

import threading
from collections import Counter, deque
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

__all__ = ["FairPool"]

_Task = tuple[Future, Callable[..., Any], tuple[Any, ...]]


class FairPool:
    """`threads` threads running `submit(owner, fn, *args)` calls, fairly between owners.

    The threads are a ThreadPoolExecutor's (its shutdown, and its join at interpreter exit): each
    submit queues one job there, and a job runs whichever waiting call is fairest, not its own."""

    def __init__(self, threads: int, *, name: str) -> None:
        self._executor = ThreadPoolExecutor(max_workers=threads, thread_name_prefix=name)
        self._lock = threading.Lock()
        self._waiting: dict[str, deque[_Task]] = {}
        self._running: Counter[str] = Counter()
        self._served: dict[str, int] = {}  # when each owner with calls running or waiting last got a thread
        self._turns = 0

    def submit(self, owner: str, fn: Callable[..., Any], *args: Any) -> Future:
        future: Future = Future()
        with self._lock:
            self._waiting.setdefault(owner, deque()).append((future, fn, args))
        self._executor.submit(self._run_fairest)
        return future

    def shutdown(self) -> None:
        """Run what is waiting, then stop the threads."""
        self._executor.shutdown(wait=True)

    def _take(self) -> tuple[str, _Task]:
        """The fairest waiting call and its owner. O(owners waiting)."""
        with self._lock:
            owner = min(self._waiting, key=lambda name: (self._running[name], self._served.get(name, 0)))
            queue = self._waiting[owner]
            task = queue.popleft()
            if not queue:
                del self._waiting[owner]
            self._running[owner] += 1
            self._turns += 1
            self._served[owner] = self._turns
            return owner, task

    def _run_fairest(self) -> None:
        owner, (future, fn, args) = self._take()  # one job per submit: a call is always waiting
        try:
            if future.set_running_or_notify_cancel():
                try:
                    result = fn(*args)
                except BaseException as exc:  # handed to the caller, as ThreadPoolExecutor does
                    future.set_exception(exc)
                else:
                    future.set_result(result)
        finally:
            with self._lock:
                self._running[owner] -= 1
                if not self._running[owner]:
                    del self._running[owner]
                    if owner not in self._waiting:
                        del self._served[owner]
