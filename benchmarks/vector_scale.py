"""`python -m benchmarks.vector_scale --sizes 10000 100000 1000000`: where the local exact vector index stops being fine, and what its ANN graph gives instead.

For each size N, in this process: a fresh `LocalVectorIndex` (memsvc/adapters/local/vector_index.py)
in a temp dir, N unit vectors of MiniLM's 384 dimensions written through `put_many` (in
namespaces of 200 vectors, one tenant; batches of 5,000), then:
- the write rate, the memory the index holds (this process's resident set, before and after), the
  SQLite file's size, and the time to reopen it (what `memsvc serve` spends loading at start);
- exact query latency, sequential, over every vector (prefix `[]`) and over one namespace (200
  vectors, the filter searches' scope), at `top_k` 10 and 50 (search asks at least 50 candidates);
- with `--ann` (the default): the reopened index with `ann_threshold=1`, the time to build the
  tenant's ANN graph (in the background, as `memsvc serve` does), the memory it adds, its query
  latency over every vector, and its recall@10 against the exact answers to the same queries.

`--vectors clustered` (the default) stands in for real embeddings: topics of vectors around
2,000 centres, with a decaying spectrum (variance of the i-th direction ~ i^-1.5, randomly
rotated), as sentence embeddings have (most variance in a few dozen directions); nearest
neighbours of a query score about 0.8 and random pairs about 0. `--vectors random` (isotropic
Gaussian) is the worst case for a graph index: every point nearly equidistant from every other.
The cost of an exact query does not depend on what the vectors mean. The embedding of the query
(about 7 ms for MiniLM on an idle machine) is not included.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from benchmarks.bench import percentile
from memsvc.adapters.local.vector_index import LocalVectorIndex
from memsvc.core.filters import Filter
from memsvc.core.models import VectorWrite

DIM = 384
SCOPE = 200
TENANT = "bench"
WRITE_BATCH = 5_000
MODEL = "vector-scale"
TOPICS = 2_000


class Clustered:
    """Vectors around topic centres, both drawn with a decaying spectrum (see the module's text)."""

    def __init__(self) -> None:
        g = np.random.default_rng(0)
        rotation, _ = np.linalg.qr(g.standard_normal((DIM, DIM)))
        spectrum = np.arange(1, DIM + 1) ** -0.75
        self._mix = (spectrum[:, None] * rotation.T).astype(np.float32)
        self._spread = np.float32(0.08 * np.sqrt(DIM) / np.linalg.norm(spectrum))
        centers = g.standard_normal((TOPICS, DIM), dtype=np.float32) @ self._mix
        self._centers = centers / np.linalg.norm(centers, axis=1, keepdims=True)

    def __call__(self, rng: np.random.Generator, count: int) -> np.ndarray:
        noise = rng.standard_normal((count, DIM), dtype=np.float32) @ self._mix
        return self._centers[rng.integers(0, TOPICS, count)] + self._spread * noise


def random(rng: np.random.Generator, count: int) -> np.ndarray:
    return rng.standard_normal((count, DIM), dtype=np.float32)


def rss_mib() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def namespace(i: int, n: int) -> tuple[str, ...]:
    return ("user", "bench", f"topic-{i % max(1, n // SCOPE)}")


def fill(index: LocalVectorIndex, n: int, rng: np.random.Generator, draw=random) -> None:
    for start in range(0, n, WRITE_BATCH):
        count = min(WRITE_BATCH, n - start)
        block = draw(rng, count)
        index.put_many([VectorWrite(TENANT, namespace(start + j, n), f"k{start + j}", f"m{start + j}", 1, {},
                                    (("text", block[j]),)) for j in range(count)])


def timed(index: LocalVectorIndex, prefix: tuple[str, ...], top_k: int,
          queries: np.ndarray) -> tuple[dict[str, float], list[list[str]]]:
    samples, answers = [], []
    for q in queries:
        t0 = time.perf_counter()
        hits = index.query(TENANT, prefix, Filter(), q, top_k)
        samples.append((time.perf_counter() - t0) * 1000.0)
        assert hits, "a query over a non-empty scope finds something"
        answers.append([h.memory_id for h in hits])
    s = sorted(samples)
    return {"p50": round(percentile(s, 50), 2), "p95": round(percentile(s, 95), 2),
            "mean": round(statistics.mean(s), 2)}, answers


def recall_at_10(approximate: list[list[str]], exact: list[list[str]]) -> float:
    found = sum(len(set(a[:10]) & set(e[:10])) for a, e in zip(approximate, exact))
    return round(found / sum(len(e[:10]) for e in exact), 4)


def measure(n: int, queries_count: int, draw, ann: bool) -> dict:
    rng = np.random.default_rng(n)
    queries = draw(np.random.default_rng(n + 1), queries_count)
    with tempfile.TemporaryDirectory(prefix="memsvc-vector-scale-") as tmp:
        path = Path(tmp) / "vectors.db"
        before = rss_mib()
        t0 = time.perf_counter()
        index = LocalVectorIndex(path, dimension=DIM, model_id=MODEL)
        fill(index, n, rng, draw)
        write_s = time.perf_counter() - t0
        row = {"n": n, "write_s": round(write_s, 1), "puts_per_s": round(n / write_s),
               "rss_growth_mib": round(rss_mib() - before), "file_mib": round(path.stat().st_size / 2**20)}
        index.query(TENANT, (), Filter(), queries[0], 10)  # warm-up
        exact_answers = None
        for label, prefix in (("all", ()), ("one namespace", namespace(0, n))):
            for top_k in (10, 50):
                row[f"{label} k={top_k}"], answers = timed(index, prefix, top_k, queries)
                if label == "all" and top_k == 10:
                    exact_answers = answers
        index.close()
        del index
        t0 = time.perf_counter()
        index = LocalVectorIndex(path, dimension=DIM, model_id=MODEL, ann_threshold=1 if ann else None)
        row["reopen_s"] = round(time.perf_counter() - t0, 1)
        if ann:
            held = rss_mib()
            t0 = time.perf_counter()
            index.query(TENANT, (), Filter(), queries[0], 10)  # the first wide query queues the build
            assert index.wait_for_graphs()
            row["ann_build_s"] = round(time.perf_counter() - t0, 1)
            row["ann_rss_mib"] = round(rss_mib() - held)
            for top_k in (10, 50):
                row[f"ann k={top_k}"], answers = timed(index, (), top_k, queries)
                if top_k == 10:
                    row["recall@10"] = recall_at_10(answers, exact_answers)
        index.close()
        row["load"] = round(os.getloadavg()[0], 2)
    return row


def exact_curve(sizes: list[int], runs: int = 40) -> None:
    """The exact search's core, a product over N rows plus picking the best 256, timed `runs`
    times per size: the fastest run is about what an idle machine gives, whatever the load."""
    rng = np.random.default_rng(0)
    matrix = rng.standard_normal((max(sizes), DIM), dtype=np.float32)
    q = rng.standard_normal(DIM, dtype=np.float32)
    print(f"\nexact product + top 256 over N rows, {runs} runs (load {os.getloadavg()[0]:.2f}):\n"
          "| rows | fastest | p50 |\n|---:|---:|---:|")
    for n in sizes:
        samples = []
        for _ in range(runs):
            t0 = time.perf_counter()
            scores = matrix[:n] @ q
            np.argpartition(-scores, 255)[:256]
            samples.append((time.perf_counter() - t0) * 1000.0)
        samples.sort()
        print(f"| {n:,} | {samples[0]:.1f} ms | {percentile(samples, 50):.1f} ms |", flush=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.vector_scale", description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[10_000, 100_000, 1_000_000])
    parser.add_argument("--queries", type=int, default=100)
    parser.add_argument("--vectors", choices=["clustered", "random"], default="clustered")
    parser.add_argument("--ann", action=argparse.BooleanOptionalAction, default=True,
                        help="also build the ANN graph and measure it (--no-ann: exact only)")
    parser.add_argument("--exact-curve", type=int, nargs="*", default=[], metavar="N",
                        help="only time the exact product at these row counts (fastest of 40 runs: idle-equivalent)")
    args = parser.parse_args(argv)
    if args.exact_curve:
        exact_curve(args.exact_curve)
        return 0
    draw = Clustered() if args.vectors == "clustered" else random
    print(f"vector_scale: sizes {args.sizes}, {args.vectors} vectors, {args.queries} queries each, "
          f"{os.cpu_count()} CPUs, numpy {np.__version__}, load {os.getloadavg()[0]:.2f}", flush=True)
    rows = []
    for n in args.sizes:
        r = measure(n, args.queries, draw, args.ann)
        rows.append(r)
        print(f"  {n:>9,} vectors: written in {r['write_s']}s ({r['puts_per_s']}/s), +{r['rss_growth_mib']} MiB "
              f"resident, file {r['file_mib']} MiB, reopen {r['reopen_s']}s; exact all k=10 p50/p95 "
              f"{r['all k=10']['p50']}/{r['all k=10']['p95']} ms, k=50 {r['all k=50']['p50']}/{r['all k=50']['p95']} "
              f"ms; one namespace k=50 {r['one namespace k=50']['p50']}/{r['one namespace k=50']['p95']} ms"
              + (f"; ANN built in {r['ann_build_s']}s (+{r['ann_rss_mib']} MiB), k=10 {r['ann k=10']['p50']}/"
                 f"{r['ann k=10']['p95']} ms, k=50 {r['ann k=50']['p50']}/{r['ann k=50']['p95']} ms, "
                 f"recall@10 {r['recall@10']}" if args.ann else "") + f" (load {r['load']})", flush=True)
    print("\n| vectors | exact, all, k=10 p50 / p95 | exact k=50 | one namespace (200), k=50 | puts/s | resident | "
          "file | reopen | ANN build | ANN k=10 p50 / p95 | ANN k=50 | recall@10 | load |\n"
          "|---:|---|---|---|---:|---:|---:|---:|---:|---|---|---:|---:|")
    for r in rows:
        ann = (f"{r['ann_build_s']} s (+{r['ann_rss_mib']} MiB) | {r['ann k=10']['p50']} / {r['ann k=10']['p95']} ms | "
               f"{r['ann k=50']['p50']} / {r['ann k=50']['p95']} ms | {r['recall@10']}" if args.ann else "- | - | - | -")
        print(f"| {r['n']:,} | {r['all k=10']['p50']} / {r['all k=10']['p95']} ms | {r['all k=50']['p50']} / "
              f"{r['all k=50']['p95']} ms | {r['one namespace k=50']['p50']} / {r['one namespace k=50']['p95']} ms | "
              f"{r['puts_per_s']:,} | {r['rss_growth_mib']} MiB | {r['file_mib']} MiB | {r['reopen_s']} s | {ann} | "
              f"{r['load']} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
