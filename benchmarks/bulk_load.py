"""Fill a local data directory in process, before `memsvc serve` starts on it.

Loading a benchmark's items over HTTP costs a request each and then waits for the background
indexer: 10,000 items took 91 s of puts and minutes of draining on a loaded 2-core machine, so
100,000 and 1,000,000 were out of reach. This loader writes the same data through the same code
the server runs, without the requests. `build_local` wires the server's adapters; each item goes
through `Memories.put` (validation, authorization, governance, policy attributes, encryption,
the item store and its change feed); and the feed's own consumers run as the server's workers
would (the indexer: vectors through the `VectorIndex` port, keyword documents, field tokens, the
knowledge graph; the timeline: events). As in the server, the puts and the consumers run at the
same time, here in two processes, so both cores work. A data directory loaded this way serves
what one loaded over HTTP would (tests/unit/test_bulk_load.py compares them).

What it saves is the HTTP round trips, the wait for background cycles and, with
`KnownTextsEmbedder`, the model's time on repeated texts: a benchmark's items reuse a few
thousand distinct texts, and each is embedded once, by the same model the server uses, in the
loading process. The indexing process gets those vectors over a queue. The same embedder serves
LangGraph's stores as their embedding function, so their loads share the vectors.
"""

from __future__ import annotations

import multiprocessing
import queue
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from itertools import islice
from pathlib import Path
from typing import Any

from memsvc.core.models import Caller

__all__ = ["KnownTextsEmbedder", "Item", "Loaded", "bulk_load"]

Item = tuple[Sequence[str], str, dict[str, Any]]  # namespace, key, value
EMBED_BATCH = 256  # texts per model call when learning texts ahead


class KnownTextsEmbedder:
    """An `Embedder` (and a LangGraph embedding function) that embeds the texts it `learn`s once
    and remembers their vectors for the rest of the run (only for benchmarks: it keeps them all).
    Any other text, a query, goes to `model` every time (by default memsvc's local MiniLM), so a
    benchmark's queries cost LangGraph's stores what an uncached query costs the server."""

    def __init__(self, model: Any = None) -> None:
        if model is None:
            from memsvc.adapters.local.embedder import MiniLMEmbedder

            model = MiniLMEmbedder()
        self.model = model
        self.model_id = model.model_id
        self.dimension = model.dimension
        self.known: dict[str, list[float]] = {}

    def learn(self, texts: Iterable[str]) -> None:
        """Embed the texts not known yet, sorted (similar lengths pad little), in batches."""
        new = sorted({t for t in texts if t not in self.known})
        for start in range(0, len(new), EMBED_BATCH):
            chunk = new[start:start + EMBED_BATCH]
            self.known.update(zip(chunk, self.model.embed(chunk)))

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        missing = [t for t in texts if t not in self.known]
        fresh = dict(zip(missing, self.model.embed(missing))) if missing else {}
        return [self.known.get(t) or fresh[t] for t in texts]

    __call__ = embed  # LangGraph's stores call their `embed` function directly


@dataclass(frozen=True)
class Loaded:
    items: int
    put_s: float  # `Memories.put` of every item, in the loading process
    embed_s: float  # learning the texts not known yet, in the loading process
    wall_s: float  # from the first put until the feed's consumers had consumed the last change
    index_s: float  # the consumers' busy time, in the indexing process (0 until it reports)


def bulk_load(data_dir: Path, items: Iterable[Item], *, tenant: str, user: str, embedder: KnownTextsEmbedder,
              index_fields: list[str] | None = None, policies: dict[str, str] | None = None, batch: int = 2000,
              progress: Callable[[int, Loaded], None] | None = None) -> Loaded:
    """Write `items` as `user` of `tenant` (index_fields as a put would send them) into the data
    directory, index them, and close it. `policies` (file name -> Rego) replace files of the
    tenant's policy bundle first, as `PUT /admin/v1/memories/policies` would. `progress` is
    called after every batch of puts with the items written so far."""
    from memsvc.bootstrap import build_local
    from memsvc.core.paths import extract_texts
    from memsvc.service.admin import PolicyBundle
    from memsvc.service.memories import PutMemory

    app = build_local(data_dir, embedder=embedder, start_workers=False)
    try:
        if policies:
            admin = Caller(tenant_id=tenant, user_id=f"{user}-loader", roles=("admin",))
            current = app.services.admin.get_policies(admin).bundle.policies
            app.services.admin.put_policies(admin, PolicyBundle(policies={**current, **policies}))
        # Spawned after `build_local` made the data directory's keys, so it never races to make them.
        context = multiprocessing.get_context("spawn")
        inbox, outbox = context.Queue(), context.Queue()
        indexing = context.Process(target=_consume_feed, name="memsvc-bulk-indexer", daemon=True,
                                   args=(data_dir, embedder.model_id, embedder.dimension, inbox, outbox))
        indexing.start()
        caller = Caller(tenant_id=tenant, user_id=user)
        sent: set[str] = set()
        done, put_s, embed_s = 0, 0.0, 0.0
        started = time.perf_counter()
        it = iter(items)
        while chunk := list(islice(it, batch)):
            t0 = time.perf_counter()
            texts = {text for _, _, value in chunk for _, text in extract_texts(value, index_fields)} - sent
            embedder.learn(texts)
            # Sent before the items are written: the indexer may meet them as soon as they are.
            inbox.put({text: embedder.known[text] for text in texts})
            sent |= texts
            t1 = time.perf_counter()
            for ns, key, value in chunk:
                app.services.memories.put(caller, PutMemory(namespace=list(ns), key=key, value=value,
                                                            index_fields=index_fields))
            embed_s += t1 - t0
            put_s += time.perf_counter() - t1
            done += len(chunk)
            if progress is not None:
                progress(done, Loaded(done, put_s, embed_s, time.perf_counter() - started, 0.0))
        inbox.put(None)  # no more items: drain what is left, then report
        outcome = _outcome(indexing, outbox)
        indexing.join()
        if isinstance(outcome, str):
            raise RuntimeError(f"indexing the loaded items failed: {outcome}")
        return Loaded(done, put_s, embed_s, time.perf_counter() - started, outcome)
    finally:
        app.close()


def _outcome(indexing: Any, outbox: Any) -> float | str:
    """What the indexing process reports when it is done: its busy seconds, or what failed."""
    while True:
        try:
            return outbox.get(timeout=5.0)
        except queue.Empty:
            if not indexing.is_alive():
                return f"the indexing process exited with code {indexing.exitcode} without a report"


class _Received:
    """The indexing process's embedder: the vectors the loading process sent. A text is always
    sent before the item that holds it is written, so a text not received yet is on its way."""

    def __init__(self, model_id: str, dimension: int, inbox: Any) -> None:
        self.model_id = model_id
        self.dimension = dimension
        self.known: dict[str, list[float]] = {}
        self.finished = False  # the loading process wrote its last item
        self._inbox = inbox
        self._lock = threading.Lock()  # the indexer may embed on its pool's threads

    def receive(self, *, wait: float | None) -> None:
        """Take what has arrived, waiting up to `wait` seconds for something (None: no wait)."""
        with self._lock:
            try:
                message = self._inbox.get(timeout=wait) if wait is not None else self._inbox.get_nowait()
                while True:
                    if message is None:
                        self.finished = True
                    else:
                        self.known.update(message)
                    message = self._inbox.get_nowait()
            except queue.Empty:
                pass

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        while any(t not in self.known for t in texts):
            self.receive(wait=1.0)
        return [self.known[t] for t in texts]


def _consume_feed(data_dir: Path, model_id: str, dimension: int, inbox: Any, outbox: Any) -> None:
    """The indexing process: run the feed's consumers as the server's workers would, until the
    loading process is finished and nothing is pending; report the busy seconds, or what failed."""
    from memsvc.bootstrap import build_local

    embedder = _Received(model_id, dimension, inbox)
    app = build_local(data_dir, embedder=embedder, start_workers=False)
    busy = 0.0
    try:
        while True:
            embedder.receive(wait=None)
            finished = embedder.finished  # read before draining: whatever it covers is in the feed
            started = time.perf_counter()
            consumed = _drain(app)
            busy += time.perf_counter() - started
            if finished and not consumed:
                break
            if not consumed:
                embedder.receive(wait=0.5)
        outbox.put(busy)
    except Exception as exc:  # reported to the loading process, which raises it
        outbox.put(f"{type(exc).__name__}: {exc}")
    finally:
        app.close()


def _drain(app: Any) -> int:
    """One cycle of each of the feed's consumers (each runs until nothing is pending or for at
    most 1,000 batches, so neither waits for the other to catch up with the puts), then drop the
    changes both consumed (the server's sweeper does that every second); returns how many
    changes were consumed or failed (0: nothing was pending)."""
    consumed = 0
    for consumer in ("indexer", "timeline"):
        cycle = app.workers.run_cycle(consumer)
        consumed += cycle.total + cycle.failed  # a failed change is retried next round, until it is parked
        parked = app.store.dead_letters(consumer)
        if parked:
            raise RuntimeError(f"the {consumer} parked {len(parked)} changes, e.g. {parked[0]}")
    app.store.prune_changes()
    return consumed
