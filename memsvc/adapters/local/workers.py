"""Background threads of the local server: `INDEXER_THREADS` for the indexer and one for the
timeline, each draining the change feed, one that sweeps TTLs and writes recall's access
counts, one that decides the queued `remember` calls (`wait: false`), and one that runs
reflection for the users who are due (`Reflection.run_due`) every `REFLECTION_CHECK_S`.

A consumer's offset is stored only after its batch is done, so a process killed mid-batch
(out of memory, SIGKILL) reads the same batch at its next start; the indexer then finds the
attempt marks the dead process left on the rows, and runs or quarantines those items alone
(docs/api.md, "Poison items") instead of dying on the same item again."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Sequence

from memsvc.adapters.local.low_priority_pool import lower_this_threads_priority
from memsvc.adapters.local.sqlite_store import SqliteItemStore
from memsvc.service.access_recorder import AccessRecorder
from memsvc.service.feed import CycleResult, FeedConsumer
from memsvc.service.sweeper import Sweeper

__all__ = ["BackgroundWorkers"]

log = logging.getLogger(__name__)

# Seconds an idle consumer that a write woke waits before its cycle, so that the writes right
# behind it join its batch: a burst costs a few embedder calls and writes per store instead of one
# each, and the work on writes already searchable (`sync_index`: the graph step, the timeline's
# events) stops interleaving with the requests that follow. A lone write is searchable this much
# later; one that must be at once asks for `sync_index`. Measured in benchmarks/README.md.
FEED_LINGER_S = 0.05
# How often the reflection thread looks for due users (their interval is a tenant setting, in
# hours); each look runs at most `Reflection.run_due`'s `max_users`, at a low priority.
REFLECTION_CHECK_S = 300.0
# Threads taking the indexer's turns: a tenant's turn that takes long (one memory of many long
# fields: tens of seconds of embedding) holds up one of them, and the others take the other
# tenants' turns meanwhile. Past the first, a thread mostly waits. A turn of one small chunk is
# embedded on its own thread; a larger one shares the embedding pool (one thread per core).
INDEXER_THREADS = 3


class BackgroundWorkers:
    def __init__(
        self,
        consumers: Sequence[FeedConsumer],
        sweeper: Sweeper,
        store: SqliteItemStore,
        accesses: AccessRecorder,
        *,
        index_interval: float = 0.5,
        sweep_interval: float = 1.0,
        remember_jobs: Callable[[], int] | None = None,
        reflections: Callable[[], int] | None = None,
        erasures: Callable[[], int] | None = None,
    ) -> None:
        self._reflections = reflections  # runs the due users' reflection, returns how many ran
        self._erasures = erasures  # continues the running user erasures by a few pages each
        self._consumers = {c.consumer: c for c in consumers}
        self._remember_jobs = remember_jobs  # runs the due jobs, returns how many
        self._jobs_wake = threading.Event()
        self._jobs_lock = threading.Lock()
        self._sweeper = sweeper
        self._store = store
        self._accesses = accesses
        self._interval = index_interval
        self._sweep_interval = sweep_interval
        # One event per feed thread: a thread clearing its own never swallows another's wake.
        self._wakes = [(name, i, threading.Event()) for name in self._consumers
                       for i in range(INDEXER_THREADS if name == "indexer" else 1)]
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []

    def start(self) -> None:
        targets = [(lambda n=name, i=i, w=wake: self._feed_loop(n, w, retries=i == 0), f"memsvc-{name}")
                   for name, i, wake in self._wakes]
        if self._remember_jobs is not None:  # jobs left by a previous process run at once
            targets.append((self._jobs_loop, "memsvc-remember"))
        if self._reflections is not None:
            targets.append((self._reflection_loop, "memsvc-reflection"))
        for target, thread_name in [*targets, (self._sweep_loop, "memsvc-sweeper")]:
            t = threading.Thread(target=target, name=thread_name, daemon=True)
            t.start()
            self._threads.append(t)

    def stop(self) -> None:
        self._stop.set()
        self.wake()
        for t in self._threads:
            # The indexer starts no unit of work once stopping (`Indexer.stop`); one under way may
            # take its whole budget (30 s), and the stores must not close under it.
            t.join(timeout=45)
        self._accesses.flush()  # a clean stop loses no access count

    def wake(self) -> None:
        for _, _, event in self._wakes:
            event.set()
        self._jobs_wake.set()

    def run_remember_jobs(self) -> int:
        """Run the queued remember jobs that are due now (tests call it); returns how many ran."""
        assert self._remember_jobs is not None
        with self._jobs_lock:
            return self._remember_jobs()

    def _jobs_loop(self) -> None:
        while not self._stop.is_set():
            try:
                ran = self.run_remember_jobs()
            except Exception:
                log.exception("remember jobs cycle failed")
                ran = 0
            if not ran:
                self._jobs_wake.wait(self._interval)
                self._jobs_wake.clear()

    def run_cycle(self, consumer: str) -> CycleResult:
        """Drain what is pending now for one consumer, with what the turns under way on the
        feed's threads leave (tests call it). A failing change is tried once a call, as a feed
        thread tries it once a backoff."""
        feed = self._consumers[consumer]
        result = CycleResult()
        while True:
            r = feed.drain(stopping=self._stop.is_set)
            result.add(r)
            if r.failed or self._stop.is_set():
                return result
            # Another thread's turn that ended may leave its tenant more, or have taken a lane
            # this drain saw: pending work is drained whoever held it.
            if not feed.wait_for_turns() and not feed.pending():
                return result

    def _feed_loop(self, name: str, wake: threading.Event, *, retries: bool) -> None:
        # Below the request threads: a write wakes the consumers at once, and their work on it
        # (the graph step, the timeline's event) must not slow the requests that follow.
        lower_this_threads_priority()
        backoff = self._interval
        while not self._stop.is_set():
            try:
                result = self._consumers[name].drain(stopping=self._stop.is_set, retries=retries)
                backoff = self._interval if not result.failed else min(backoff * 2, 30.0)
                if result.total == 0 or result.failed:
                    if wake.wait(backoff) and not result.failed:
                        self._stop.wait(FEED_LINGER_S)
                    wake.clear()
            except Exception:
                log.exception("%s cycle failed", name)
                backoff = min(backoff * 2, 30.0)
                self._stop.wait(backoff)

    def _reflection_loop(self) -> None:
        lower_this_threads_priority()  # background work: requests first
        while not self._stop.wait(REFLECTION_CHECK_S):
            try:
                assert self._reflections is not None
                self._reflections()
            except Exception:
                log.exception("reflection cycle failed")

    def _sweep_loop(self) -> None:
        while not self._stop.wait(self._sweep_interval):
            try:
                result = self._sweeper.sweep()
                if result.expired:
                    self.wake()
                self._store.prune_changes()
            except Exception:
                log.exception("sweeper cycle failed")
            try:
                if self._erasures is not None:
                    self._erasures()
            except Exception:
                log.exception("user erasure cycle failed")
            self._accesses.flush()  # logs its own failures
