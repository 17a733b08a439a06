"""Fill a local data directory in process, before `memsvc serve` starts on it.

Loading a benchmark's items over HTTP costs a request each and then waits for the background
indexer: 10,000 items took 91 s of puts and minutes of draining on a loaded 2-core machine, so
100,000 and 1,000,000 were out of reach. This loader writes the same data through the same code
the server runs, without the requests: `build_local` wires the server's adapters, each item goes
through `Memories.put` (validation, authorization, governance, policy attributes, encryption,
the item store and its change feed), and every `batch` items the feed's own consumers run to
the end (the indexer: vectors through the `VectorIndex` port, keyword documents, field tokens,
the knowledge graph; the timeline: events). A data directory loaded this way serves what one
loaded over HTTP would (tests/unit/test_bulk_load.py compares them).

What it saves is the HTTP round trips, the wait for background cycles and, with
`KnownTextsEmbedder`, the model's time on repeated texts: a benchmark's items reuse a few
thousand distinct texts, and each is embedded once, by the same model the server uses. The
same embedder serves LangGraph's stores as their embedding function, so their loads share
those vectors.
"""

from __future__ import annotations

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
    """An `Embedder` (and a LangGraph embedding function) that embeds each distinct text once and
    remembers its vector for the rest of the run. Only for benchmarks: it keeps every vector it
    ever computed. Texts it has not seen go to `model` (by default memsvc's local MiniLM behind
    the server's 1,024-entry cache, which is what a query meets in the server)."""

    def __init__(self, model: Any = None) -> None:
        if model is None:
            from memsvc.adapters.local.cached_embedder import CachedEmbedder
            from memsvc.adapters.local.embedder import MiniLMEmbedder

            model = CachedEmbedder(MiniLMEmbedder())
        self.model = model
        self.model_id = model.model_id
        self.dimension = model.dimension
        self.known: dict[str, list[float]] = {}

    def learn(self, texts: Iterable[str]) -> None:
        """Embed the texts not known yet, sorted (similar lengths pad little) in batches."""
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
    put_s: float  # `Memories.put` of every item
    embed_s: float  # learning the texts not yet known
    index_s: float  # the indexer's and timeline's cycles

    @property
    def total_s(self) -> float:
        return self.put_s + self.embed_s + self.index_s


def bulk_load(data_dir: Path, items: Iterable[Item], *, tenant: str, user: str, embedder: KnownTextsEmbedder,
              index_fields: list[str] | None = None, policies: dict[str, str] | None = None, batch: int = 2000,
              progress: Callable[[int, Loaded], None] | None = None) -> Loaded:
    """Write `items` as `user` of `tenant` (index_fields as a put would send them) into the data
    directory, index them, and close it. `policies` (file name -> Rego) replace files of the
    tenant's policy bundle first, as `PUT /admin/v1/memories/policies` would. `progress` is
    called after every batch with the items written so far."""
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
        caller = Caller(tenant_id=tenant, user_id=user)
        done, put_s, embed_s, index_s = 0, 0.0, 0.0, 0.0
        it = iter(items)
        while chunk := list(islice(it, batch)):
            started = time.perf_counter()
            for ns, key, value in chunk:
                app.services.memories.put(caller, PutMemory(namespace=list(ns), key=key, value=value,
                                                            index_fields=index_fields))
            put_s += time.perf_counter() - started
            started = time.perf_counter()
            embedder.learn(text for _, _, value in chunk for _, text in extract_texts(value, index_fields))
            embed_s += time.perf_counter() - started
            started = time.perf_counter()
            _drain(app)
            index_s += time.perf_counter() - started
            done += len(chunk)
            if progress is not None:
                progress(done, Loaded(done, put_s, embed_s, index_s))
        return Loaded(done, put_s, embed_s, index_s)
    finally:
        app.close()


def _drain(app: Any) -> None:
    """Run the feed's consumers until nothing is pending, as the server's workers would, then
    drop the changes they consumed (the server's sweeper does that every second)."""
    for consumer in ("indexer", "timeline"):
        while (cycle := app.workers.run_cycle(consumer)).total or cycle.failed:
            pass  # a failing change is retried until the consumer parks it
        parked = app.store.dead_letters(consumer)
        if parked:
            raise RuntimeError(f"the {consumer} parked {len(parked)} changes, e.g. {parked[0]}")
    app.store.prune_changes()
