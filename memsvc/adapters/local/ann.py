"""An approximate nearest-neighbour graph (HNSW, usearch) over one tenant's vector rows, for
the local index's wide-scope queries once a tenant holds many vectors.

The graph only proposes candidates: they are keyed by row, checked against the index's live
bookkeeping (row live, namespace in scope) and scored exactly from the float32 matrix, so a
deleted or replaced vector never comes back, and a score is always the true cosine. Vectors are
held as int8 in the graph (a quarter of the matrix's memory), which costs nothing in the scores.

A graph is built in a background thread (a million vectors take minutes) while exact search
answers. Rows that change, during the build and after it, are marked `dirty`: a query scores
them exactly beside the graph's candidates, so a write is found at once, and the background
thread moves them into the graph a few at a time (inserting a vector into a graph of a million
costs about 2 ms: done in the write itself, an indexing chunk of 64 texts would hold the index's
write lock, and every query, for 100-200 ms). Each process's graph follows its in-memory rows,
whether they changed by its own writes or by catching up with another process's.
"""

from __future__ import annotations

import itertools
import logging
import threading
import time
from collections.abc import Callable
from concurrent import futures
from concurrent.futures import Future

import numpy as np
import onnxruntime  # noqa: F401  (before usearch: see below)
from usearch.index import Index

from memsvc.adapters.local.low_priority_pool import low_priority_pool

__all__ = ["TenantGraph", "GraphBuilder"]

# Load order matters: onnxruntime 1.31 (the embedder's runtime) crashes at import (SIGSEGV in its
# C++ locale set-up) in a process that has loaded usearch 2.26.6's extension first; the other
# order is fine. Both are in the `local` extra, and importing onnxruntime here makes every
# process that can build a graph load them in the safe order.

log = logging.getLogger(__name__)

CONNECTIVITY = 16  # HNSW's M: edges per node
EXPANSION_ADD = 128  # candidates kept while inserting (usearch's default): build time against recall
EXPANSION_SEARCH = 256  # candidates kept while searching, at least the number asked for


class TenantGraph:
    """One tenant's graph, and its `dirty` rows: row -> the number of its latest change (changed
    under the index's write lock, read under its read lock). `ready` once built."""

    def __init__(self, dim: int) -> None:
        self._graph = Index(ndim=dim, metric="cos", dtype="i8", connectivity=CONNECTIVITY,
                            expansion_add=EXPANSION_ADD, expansion_search=EXPANSION_SEARCH)
        # usearch keeps per-thread scratch space by thread number, not by caller: two Python
        # threads in the graph at once would share it. A search takes about a millisecond.
        self._using = threading.Lock()
        self._changes = itertools.count()
        self.dirty: dict[int, int] = {}
        self.ready = False

    def mark(self, row: int) -> None:
        self.dirty[row] = next(self._changes)

    def add(self, rows: np.ndarray, vectors: np.ndarray, threads: int = 1) -> None:
        """Rows not in the graph yet (the build)."""
        if rows.size:
            with self._using:
                self._graph.add(rows, vectors, threads=threads)

    def replace(self, rows: np.ndarray, live_rows: np.ndarray, vectors: np.ndarray) -> None:
        """Take `rows` out of the graph, then put `live_rows` (some of them) back with `vectors`."""
        with self._using:
            self._graph.remove(rows)
            if live_rows.size:
                self._graph.add(live_rows, vectors, threads=1)

    def candidates(self, vector: np.ndarray, count: int) -> np.ndarray:
        """Rows of about the `count` nearest vectors in the graph, plus every dirty row (read
        lock held): some may have been dropped since, so check them."""
        with self._using:
            found = self._graph.search(vector, count, threads=1).keys.astype(np.int64)
        if not self.dirty:
            return found
        return np.union1d(found, np.fromiter(self.dirty, dtype=np.int64, count=len(self.dirty)))

    def __len__(self) -> int:
        return len(self._graph)


class GraphBuilder:
    """Runs the graphs' background work (a build; moving changed rows in) one job at a time on a
    low-priority thread, so that requests keep the cores. `build(key, job)` queues `job` unless
    one with the same `key` is queued and not started yet: a request that comes while the job
    runs queues another pass, so work asked for meanwhile (rows changed after the job's last look)
    is never dropped."""

    def __init__(self) -> None:
        self._pool = low_priority_pool(1, name="memsvc-ann")
        self._queued: set[str] = set()
        self._jobs: set[Future[None]] = set()
        self._lock = threading.Lock()

    def build(self, key: str, job: Callable[[], None]) -> None:
        with self._lock:
            if key in self._queued:
                return
            self._queued.add(key)
            self._jobs.add(self._pool.submit(self._run, key, job))

    def _run(self, key: str, job: Callable[[], None]) -> None:
        with self._lock:
            self._queued.discard(key)
        try:
            job()
        except Exception:  # exact search goes on answering; the next wide query queues it again
            log.exception("ANN graph work for %s failed", key)

    def wait(self, timeout: float | None = None) -> bool:
        """Until no job is queued or running (benchmarks, tests), jobs queued meanwhile included;
        False if `timeout` passed first. Jobs cancelled by `close` count as done."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            with self._lock:
                self._jobs = {job for job in self._jobs if not job.done()}
                pending = set(self._jobs)
            left = None if deadline is None else deadline - time.monotonic()
            if not pending or (left is not None and left <= 0):
                return not pending
            futures.wait(pending, left)

    def close(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)
