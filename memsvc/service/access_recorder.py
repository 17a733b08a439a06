"""Recall's access counting (`access_count`, `last_accessed_at`), batched off the request path.

A recall only adds its memories to an in-memory tally (a dict update under a lock); `flush`
writes the tally to the item rows, one `ItemStore.record_accesses` call per tenant, with no new
version and no change record, so no timeline event. Who calls `flush`:
- locally, the background workers, every sweep interval (1 s), and once more when they stop;
- on Lambda, a daemon thread (`start`), every second while the execution environment runs.
  Lambda freezes the environment between invocations, so a tally left at the end of one
  invocation is written when the next one thaws the environment (the thread's wait is over by
  then), beside that request, not in its way. What is lost: the tally of an environment that is
  never invoked again before Lambda reclaims it (at most the last second of its accesses), and
  a batch whose write fails (logged). Access counts are bookkeeping, not data: a lost count
  slightly under-counts, and no memory, version or event is ever lost.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterable
from datetime import datetime

from memsvc.ports import ItemStore

__all__ = ["AccessRecorder", "MAX_PENDING"]

log = logging.getLogger(__name__)

MAX_PENDING = 100_000  # distinct memories in one tally; past it new accesses are dropped, never waited on


class AccessRecorder:
    def __init__(self, items: ItemStore) -> None:
        self._items = items
        self._lock = threading.Lock()
        self._flush_lock = threading.Lock()
        # tenant -> {(namespace, key, memory id): count}, and the tenant's latest access time
        self._tally: dict[str, dict[tuple[tuple[str, ...], str, str], int]] = {}
        self._latest: dict[str, datetime] = {}
        self._size = 0
        self.dropped = 0
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def record(self, tenant: str, memories: Iterable[tuple[tuple[str, ...], str, str]], at: datetime) -> None:
        """Count one access of each (namespace, key, memory id). Never blocks on I/O."""
        with self._lock:
            tally = self._tally.setdefault(tenant, {})
            for ref in memories:
                if ref not in tally and self._size >= MAX_PENDING:
                    self.dropped += 1
                    continue
                self._size += ref not in tally
                tally[ref] = tally.get(ref, 0) + 1
            if tenant not in self._latest or at > self._latest[tenant]:
                self._latest[tenant] = at

    def flush(self) -> int:
        """Write the tally so far; returns how many memories' counts were written. A memory whose
        key has moved on to another version (or was deleted) since its recall is not counted.
        `last_accessed_at` is the tenant's latest access in the batch: exact to a flush interval."""
        with self._flush_lock:
            with self._lock:
                tally, latest = self._tally, self._latest
                self._tally, self._latest, self._size = {}, {}, 0
            written = 0
            for tenant, counts in tally.items():
                try:
                    self._items.record_accesses(
                        tenant, [(ns, key, memory_id, n) for (ns, key, memory_id), n in counts.items()],
                        latest[tenant])
                    written += len(counts)
                except Exception:  # bookkeeping: log and go on, the next batch is independent
                    log.exception("recording %d accesses failed", len(counts))
            return written

    def start(self, interval: float = 1.0) -> None:
        """Flush every `interval` seconds on a daemon thread (where no background workers run)."""
        if self._thread is None:
            self._thread = threading.Thread(target=self._loop, args=(interval,), name="memsvc-accesses", daemon=True)
            self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=10)
        self.flush()

    def _loop(self, interval: float) -> None:
        while not self._stop.wait(interval):
            self.flush()
