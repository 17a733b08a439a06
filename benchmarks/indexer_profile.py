"""`python -m benchmarks.indexer_profile`: where the local indexer's time goes, per item, by stage.

In process, on a fresh data directory (the embedded default, no server, no background workers):
writes `--items` memories of one short sentence each (`index_fields: ["text"]`), `batch` at a
time, and drains the indexer's feed after each batch with the feed worker's own call
(`run_cycle`, on a thread at the feed's low priority, as in the server); so a batch of 1 is a
trickle of single writes, and a batch of 256 a backlog (the feed's batch). Each stage is timed where it is called (a wrapper around the one function that
does it), so a stage is the sum over every thread that ran it: with the embedding pool, the
embedding of a backlog runs on both cores and its time per item can exceed the wall time.

Stages, in the order an item meets them:
- read changes: the feed's read of the batch;
- read items: the item store's reads of the keys' current rows (the indexer's and the graph step's);
- decrypt: opening a value (`Sealer.open_value`);
- extract texts: the indexed fields' texts (`extract_texts`);
- field tokens: the blind field tokens of the value;
- keyword analysis: the terms of the texts, counted and blinded;
- embedding: the embedder's calls (the model, and the embedding cache in front of it);
- write vectors, write keywords (documents and field tokens, one transaction);
- entity extraction, write graph: the graph step's patterns and its one write;
- bookkeeping: the attempt marks, the marks `indexed`, the feed's acknowledgement.
`other` is the cycle's wall time less every stage above (on the calling thread: the
indexer's own Python, and the part of a pooled stage that overlapped nothing).
"""

from __future__ import annotations

import argparse
import os
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

from benchmarks.bench import make_value

STAGES = ("read changes", "read items", "decrypt", "extract texts", "field tokens", "keyword analysis", "embedding",
          "write vectors", "write keywords", "entity extraction", "write graph", "bookkeeping")


class Timers:
    def __init__(self) -> None:
        self.seconds: Counter = Counter()
        self._lock = threading.Lock()

    def wrap(self, owner: Any, name: str, stage: str) -> None:
        inner: Callable[..., Any] = getattr(owner, name)

        def timed(*args: Any, **kwargs: Any) -> Any:
            started = time.perf_counter()
            try:
                return inner(*args, **kwargs)
            finally:
                with self._lock:
                    self.seconds[stage] += time.perf_counter() - started

        setattr(owner, name, timed)


def profile(batch: int, items: int, root: Path) -> dict[str, Any]:
    import memsvc.service.indexer as indexer_module
    from memsvc.adapters.local.low_priority_pool import low_priority_pool
    from memsvc.bootstrap import build_local
    from memsvc.core.models import Caller
    from memsvc.service.memories import PutMemory

    app = build_local(root / f"batch-{batch}", start_workers=False)
    feed = low_priority_pool(1, name="feed")
    try:
        caller = Caller("bench", "bench")
        put = app.services.memories.put
        put(caller, PutMemory(namespace=("user", "bench", "warm"), key="warm", value={"text": "warm up"},
                              index_fields=["text"]))
        app.workers.run_cycle("indexer")
        timers = Timers()
        indexer, store = app.indexer, app.store
        graph = indexer._graph
        timers.wrap(store, "read", "read changes")
        timers.wrap(store, "get_many", "read items")
        timers.wrap(store, "get", "read items")
        timers.wrap(app.sealer, "open_value", "decrypt")
        timers.wrap(indexer_module, "extract_texts", "extract texts")
        timers.wrap(indexer, "_field_doc", "field tokens")
        timers.wrap(indexer, "_keyword_doc", "keyword analysis")
        timers.wrap(indexer._embedder, "embed", "embedding")
        timers.wrap(app.vectors, "put_many", "write vectors")
        timers.wrap(app.keywords, "put_many", "write keywords")
        timers.wrap(graph._extractor, "extract", "entity extraction")
        timers.wrap(graph._graph, "replace_many", "write graph")
        for name in ("begin_attempts", "mark_indexed", "end_attempts", "ack"):
            timers.wrap(store, name, "bookkeeping")
        wall = 0.0
        cpu = 0.0
        for start in range(0, items, batch):
            for i in range(start, min(items, start + batch)):
                put(caller, PutMemory(namespace=("user", "bench", f"topic-{i % 50}"), key=f"m{i}",
                                      value=make_value(1_000_000 + i), index_fields=["text"]))
            started, cpu_started = time.perf_counter(), time.process_time()
            feed.submit(app.workers.run_cycle, "indexer").result()
            wall += time.perf_counter() - started
            cpu += time.process_time() - cpu_started
        stages = {stage: timers.seconds[stage] / items * 1000 for stage in STAGES}
        stages["other"] = max(0.0, wall / items * 1000 - sum(stages.values()))
        return {"batch": batch, "items": items, "items_per_s": items / wall, "wall_ms": wall / items * 1000,
                "cpu_ms": cpu / items * 1000, "stages_ms": stages}
    finally:
        feed.shutdown()
        app.close()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.indexer_profile", description=__doc__.split("\n\n")[0])
    parser.add_argument("--items", type=int, default=1024)
    parser.add_argument("--batches", type=int, nargs="+", default=[1, 4, 16, 256])
    args = parser.parse_args(argv)
    results = []
    with tempfile.TemporaryDirectory(prefix="memsvc-indexer-profile-") as tmp:
        for batch in args.batches:
            results.append(profile(batch, args.items, Path(tmp)))
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    print(f"{args.items} items per run, one short text each; ms per item by stage (load average {load:.2f})\n")
    print("| stage | " + " | ".join(f"batch {r['batch']}" for r in results) + " |")
    print("|---|" + "---:|" * len(results))
    for stage in (*STAGES, "other"):
        print(f"| {stage} | " + " | ".join(f"{r['stages_ms'][stage]:.3f}" for r in results) + " |")
    print("| **wall per item** | " + " | ".join(f"**{r['wall_ms']:.2f}**" for r in results) + " |")
    print("| process CPU per item | " + " | ".join(f"{r['cpu_ms']:.2f}" for r in results) + " |")
    print("| items/s | " + " | ".join(f"{r['items_per_s']:.0f}" for r in results) + " |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
