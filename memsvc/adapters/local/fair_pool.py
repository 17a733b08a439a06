"""Request threads shared fairly between tenants (`memsvc serve`).

A plain thread pool answers requests in arrival order, so one tenant's burst of slow requests
queues every other tenant's request behind the whole burst: eight searches with a 50,000-value
filter (half a second of CPU each) kept another tenant's `GET /v1/identity` waiting 2.5 s on two
threads. Here a free slot goes to the oldest request of the tenant with the fewest requests
running, among equals the tenant served longest ago (a tenant with nothing running or waiting
starts afresh). Another tenant's request then waits for at most one running request per slot,
not for the queue.

A slot is a request running in the interpreter, and there are as many as the server's threads
setting (one per core: more only contend for the GIL). A request that only waits (on its
tenant's policy worker, or in the embedding model: `memsvc.core.slots.released`) gives its slot
back meanwhile and takes one back, fairly, to go on; it keeps its thread. So the pool has more
threads than slots (`THREADS_PER_SLOT`), and one tenant holds at most a quarter of them, running
or waiting: two slow policies of one tenant once held both threads of a 2-core server, and every
tenant waited 10 s for them. And while one tenant's calls hold every slot, another tenant's call
gets one slot beyond the count, so it never waits for them to end.

Within a tenant, its users take turns (`_Turns`): a user who starts waiting goes before those
whose turn has come already, and these then take turns. Forty slow searches of one user kept
another user of the same tenant waiting 10-20 s behind them; now that user's call waits for at
most one of theirs.
"""

from __future__ import annotations

import threading
from collections import Counter, OrderedDict, deque
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

from memsvc.core import slots

__all__ = ["FairPool", "THREADS_PER_SLOT"]

THREADS_PER_SLOT = 8
_Task = tuple[Future, Callable[..., Any], tuple[Any, ...]]


class FairPool:
    """`submit(owner, fn, *args, party=...)` calls run `slot_count` at a time, fairly between
    owners, on up to `slot_count * THREADS_PER_SLOT` threads, an owner's calls on at most a quarter
    of them; an owner's calls start in turns of its parties, each party's in order."""

    def __init__(self, slot_count: int, *, name: str) -> None:
        self._threads = slot_count * THREADS_PER_SLOT
        self._per_owner = max(slot_count, self._threads // 4)
        self._executor = ThreadPoolExecutor(max_workers=self._threads, thread_name_prefix=name)
        self._lock = threading.Lock()
        self._free_slots = slot_count
        self._none_waiting = threading.Condition(self._lock)
        self._threads_held = 0
        self._waiting: dict[str, _Turns] = {}  # calls not started, by owner
        self._reclaiming: dict[str, deque[threading.Event]] = {}  # started calls done waiting, by owner
        self._running: Counter[str] = Counter()  # slots held
        self._held: Counter[str] = Counter()  # threads held: calls running or waiting
        self._served: dict[str, int] = {}  # when each owner with calls held or waiting last got a slot
        self._turns = 0

    def submit(self, owner: str, fn: Callable[..., Any], *args: Any, party: str = "") -> Future:
        future: Future = Future()
        with self._lock:
            self._waiting.setdefault(owner, _Turns()).add(party, (future, fn, args))
            self._dispatch()
        return future

    def queued(self) -> int:
        """The calls not started yet."""
        with self._lock:
            return sum(len(turns) for turns in self._waiting.values())

    def shutdown(self) -> None:
        """Run what is waiting, then stop the threads."""
        with self._lock:  # a call not started has no thread until others finish
            self._none_waiting.wait_for(lambda: not self._waiting)
        self._executor.shutdown(wait=True)

    def _dispatch(self) -> None:
        """Under the lock: each free slot to the fairest owner that can take it, a started call
        going on before the owner's new ones; and, while one owner holds every slot, one slot more
        for another owner (`_one_holds_all`). O(owners waiting) a slot."""
        while self._free_slots > 0 or self._one_holds_all():
            able = [o for o in self._reclaiming] + [
                o for o in self._waiting
                if o not in self._reclaiming and self._held[o] < self._per_owner and self._threads_held < self._threads]
            if self._free_slots <= 0:
                able = [o for o in able if o not in self._running]
            if not able:
                return
            owner = min(able, key=lambda name: (self._running[name], self._served.get(name, 0)))
            self._free_slots -= 1
            self._running[owner] += 1
            self._turns += 1
            self._served[owner] = self._turns
            if owner in self._reclaiming:
                _pop(self._reclaiming, owner).set()
                continue
            self._held[owner] += 1
            self._threads_held += 1
            self._executor.submit(self._run, owner, self._next_call(owner))
            if not self._waiting:
                self._none_waiting.notify_all()

    def _next_call(self, owner: str) -> _Task:
        """Under the lock: the owner's call to start."""
        turns = self._waiting[owner]
        task = turns.pop()
        if not turns:
            del self._waiting[owner]
        return task

    def _one_holds_all(self) -> bool:
        """Whether every slot is held by one owner's calls (and none is lent beyond the count yet).
        A slot is not taken back from a running call, so without this the others would wait for
        the shortest of that owner's calls, however long: two 3 s namespace listings of one tenant
        held a 2-core server's every other request 2-3 s. The extra slot costs a third thread in
        the interpreter while it lasts; one owner alone never gets it."""
        return self._free_slots == 0 and len(self._running) == 1

    def _run(self, owner: str, task: _Task) -> None:
        future, fn, args = task
        slots.bind(lambda: self._release(owner), lambda: self._reclaim(owner))
        try:
            if future.set_running_or_notify_cancel():
                try:
                    result = fn(*args)
                except BaseException as exc:  # handed to the caller, as ThreadPoolExecutor does
                    future.set_exception(exc)
                else:
                    future.set_result(result)
        finally:
            slots.bind(None, None)
            with self._lock:
                self._give_back(owner)
                self._held[owner] -= 1
                self._threads_held -= 1
                if not self._held[owner]:
                    del self._held[owner]
                    if owner not in self._waiting:
                        del self._served[owner]
                self._dispatch()

    def _release(self, owner: str) -> None:
        with self._lock:
            self._give_back(owner)
            self._dispatch()

    def _reclaim(self, owner: str) -> None:
        turn = threading.Event()
        with self._lock:
            self._reclaiming.setdefault(owner, deque()).append(turn)
            self._dispatch()
        turn.wait()

    def _give_back(self, owner: str) -> None:
        self._free_slots += 1
        self._running[owner] -= 1
        if not self._running[owner]:
            del self._running[owner]


class _Turns:
    """One owner's calls not started, by party. Parties that started waiting and have had no
    turn since go first, in the order they came; then the others, in turn. A party's calls start
    in order, one a turn: after its turn a party still waiting goes to the end of the round."""

    def __init__(self) -> None:
        self._new: OrderedDict[str, deque[_Task]] = OrderedDict()
        self._round: OrderedDict[str, deque[_Task]] = OrderedDict()

    def add(self, party: str, task: _Task) -> None:
        (self._round if party in self._round else self._new).setdefault(party, deque()).append(task)

    def pop(self) -> _Task:
        party, calls = (self._new or self._round).popitem(last=False)  # O(1), where a dict's first key is not
        task = calls.popleft()
        if calls:
            self._round[party] = calls
        return task

    def __bool__(self) -> bool:  # O(1): asked at every call's start
        return bool(self._new or self._round)

    def __len__(self) -> int:
        return sum(len(calls) for queue in (self._new, self._round) for calls in queue.values())


def _pop(queues: dict[str, deque], owner: str) -> Any:
    queue = queues[owner]
    first = queue.popleft()
    if not queue:
        del queues[owner]
    return first
