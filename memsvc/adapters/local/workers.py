"""Background threads of the local server: drain the change feed into the indexer, sweep TTLs."""

from __future__ import annotations

import logging
import threading

from memsvc.adapters.local.sqlite_store import SqliteItemStore
from memsvc.service.indexer import CycleResult, FeedConsumer
from memsvc.service.sweeper import Sweeper

__all__ = ["BackgroundWorkers"]

log = logging.getLogger(__name__)


class BackgroundWorkers:
    def __init__(
        self,
        index_consumer: FeedConsumer,
        sweeper: Sweeper,
        store: SqliteItemStore,
        *,
        index_interval: float = 0.5,
        sweep_interval: float = 1.0,
    ) -> None:
        self._index = index_consumer
        self._sweeper = sweeper
        self._store = store
        self._index_interval = index_interval
        self._sweep_interval = sweep_interval
        self._cycle_lock = threading.Lock()
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []

    def start(self) -> None:
        for target, name in ((self._index_loop, "memsvc-indexer"), (self._sweep_loop, "memsvc-sweeper")):
            t = threading.Thread(target=target, name=name, daemon=True)
            t.start()
            self._threads.append(t)

    def stop(self) -> None:
        self._stop.set()
        self._wake.set()
        for t in self._threads:
            t.join(timeout=10)

    def wake(self) -> None:
        self._wake.set()

    def run_index_cycle(self) -> CycleResult:
        """Drain what is pending now (also what the admin trigger calls)."""
        with self._cycle_lock:
            return self._index.drain()

    def _index_loop(self) -> None:
        backoff = self._index_interval
        while not self._stop.is_set():
            try:
                result = self.run_index_cycle()
                backoff = self._index_interval if not result.failed else min(backoff * 2, 30.0)
                if result.total == 0 or result.failed:
                    self._wake.wait(backoff)
                    self._wake.clear()
            except Exception:
                log.exception("indexer cycle failed")
                backoff = min(backoff * 2, 30.0)
                self._stop.wait(backoff)

    def _sweep_loop(self) -> None:
        while not self._stop.wait(self._sweep_interval):
            try:
                result = self._sweeper.sweep()
                if result.expired:
                    self.wake()
                self._store.prune_changes()
            except Exception:
                log.exception("sweeper cycle failed")
