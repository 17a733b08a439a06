"""`python -m benchmarks.query_embedding_wait`: what bounding a query's embedding costs.

Search embeds a query on a thread of its own and waits at most `QUERY_EMBEDDING_TIMEOUT_SECONDS`
for it (docs/search-and-retrieval.md, "When the embedding model fails"). This times the same embeddings called directly
on the embedder and through `Search.embed` (the thread and the bounded wait), on the local app's
real model (MiniLM) and on the hash model of the tests (where the hop is nearly all there is).
Each query is new, so no cache answers it.
"""

from __future__ import annotations

import argparse
import itertools
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

__all__ = ["main"]


def _percentiles(run: Callable[[str], object], queries: itertools.count, n: int) -> tuple[float, float]:
    times = []
    for _ in range(n):
        query = f"where did the billing export of batch {next(queries)} go"
        started = time.perf_counter()
        run(query)
        times.append((time.perf_counter() - started) * 1e6)
    times.sort()
    return times[len(times) // 2], times[int(len(times) * 0.95)]


def measure(name: str, embedder, n: int) -> None:
    from memsvc.bootstrap import build_local

    with tempfile.TemporaryDirectory() as tmp:
        app = build_local(Path(tmp), embedder=embedder, start_workers=False)
        try:
            queries = itertools.count()
            search = app.services.search
            for run in (lambda q: app.embedder.embed([q]), search.embed):  # warm both paths
                _percentiles(run, queries, 20)
            for label, run in (("direct", lambda q: app.embedder.embed([q])), ("Search.embed", search.embed)) * 2:
                p50, p95 = _percentiles(run, queries, n)
                print(f"{name:8} {label:13} p50 {p50:8.1f} us  p95 {p95:8.1f} us  ({n} queries)")
        finally:
            app.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--queries", type=int, default=500)
    args = parser.parse_args()
    from memsvc.adapters.local.embedder import MiniLMEmbedder
    from tests.fakes.embedder import HashEmbedder

    measure("hash", HashEmbedder(), args.queries * 4)
    measure("MiniLM", MiniLMEmbedder(), args.queries)


if __name__ == "__main__":
    main()
