"""`python -m benchmarks.vector_scale --sizes 10000 100000 1000000`: where the local exact vector index stops being fine.

For each size N, in this process: a fresh `LocalVectorIndex` (memsvc/adapters/local/vector_index.py)
in a temp dir, N random unit vectors of MiniLM's 384 dimensions written through `put_many` (in
namespaces of 200 vectors, one tenant), then:
- the memory the index holds (this process's resident set, before and after), the SQLite file's
  size, and the time to reopen it (what `memsvc serve` spends loading at start);
- query latency, sequential, over every vector (prefix `[]`) and over one namespace (200 vectors,
  the filter searches' scope), at `top_k` 10 and 50 (search asks at least 50 candidates).

The cost of an exact query does not depend on what the vectors mean, so random vectors measure it
honestly; the embedding of the query (about 7 ms for MiniLM on an idle machine) is not included.
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
MODEL = "vector-scale-random"


def rss_mib() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def namespace(i: int, n: int) -> tuple[str, ...]:
    return ("user", "bench", f"topic-{i % max(1, n // SCOPE)}")


def fill(index: LocalVectorIndex, n: int, rng: np.random.Generator) -> None:
    for start in range(0, n, WRITE_BATCH):
        count = min(WRITE_BATCH, n - start)
        block = rng.standard_normal((count, DIM), dtype=np.float32)
        index.put_many([VectorWrite(TENANT, namespace(start + j, n), f"k{start + j}", f"m{start + j}", 1, {},
                                    (("text", block[j]),)) for j in range(count)])


def latencies(index: LocalVectorIndex, prefix: tuple[str, ...], top_k: int, queries: np.ndarray) -> dict[str, float]:
    samples = []
    for q in queries:
        t0 = time.perf_counter()
        hits = index.query(TENANT, prefix, Filter(), q, top_k)
        samples.append((time.perf_counter() - t0) * 1000.0)
        assert hits, "an exact query over a non-empty scope finds something"
    s = sorted(samples)
    return {"p50": round(percentile(s, 50), 2), "p95": round(percentile(s, 95), 2), "mean": round(statistics.mean(s), 2)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.vector_scale", description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[10_000, 100_000, 1_000_000])
    parser.add_argument("--queries", type=int, default=100)
    args = parser.parse_args(argv)
    print(f"vector_scale: sizes {args.sizes}, {args.queries} queries each, {os.cpu_count()} CPUs, "
          f"numpy {np.__version__}, load {os.getloadavg()[0]:.2f}", flush=True)
    rows = []
    for n in args.sizes:
        rng = np.random.default_rng(n)
        queries = rng.standard_normal((args.queries, DIM), dtype=np.float32)
        with tempfile.TemporaryDirectory(prefix="memsvc-vector-scale-") as tmp:
            path = Path(tmp) / "vectors.db"
            before = rss_mib()
            t0 = time.perf_counter()
            index = LocalVectorIndex(path, dimension=DIM, model_id=MODEL)
            fill(index, n, rng)
            write_s = time.perf_counter() - t0
            held = rss_mib() - before
            index.query(TENANT, (), Filter(), queries[0], 10)  # warm-up
            row = {"n": n, "write_s": round(write_s, 1), "rss_growth_mib": round(held), "file_mib":
                   round(path.stat().st_size / 2**20)}
            for label, prefix in (("all", ()), ("one namespace", namespace(0, n))):
                for top_k in (10, 50):
                    row[f"{label} k={top_k}"] = latencies(index, prefix, top_k, queries)
            index.close()
            del index
            t0 = time.perf_counter()
            LocalVectorIndex(path, dimension=DIM, model_id=MODEL).close()
            row["reopen_s"] = round(time.perf_counter() - t0, 1)
            row["load"] = round(os.getloadavg()[0], 2)
        rows.append(row)
        print(f"  {n:>9,} vectors: written in {row['write_s']}s, +{row['rss_growth_mib']} MiB resident, file "
              f"{row['file_mib']} MiB, reopen {row['reopen_s']}s; query all k=10 p50/p95 {row['all k=10']['p50']}/"
              f"{row['all k=10']['p95']} ms, k=50 {row['all k=50']['p50']}/{row['all k=50']['p95']} ms; one namespace "
              f"k=50 {row['one namespace k=50']['p50']}/{row['one namespace k=50']['p95']} ms (load {row['load']})",
              flush=True)
    print("\n| vectors | query, all, k=10 p50 / p95 | k=50 p50 / p95 | one namespace (200), k=50 p50 / p95 | "
          "resident | file | reopen | load |\n|---:|---|---|---|---:|---:|---:|---:|")
    for r in rows:
        print(f"| {r['n']:,} | {r['all k=10']['p50']} / {r['all k=10']['p95']} ms | {r['all k=50']['p50']} / "
              f"{r['all k=50']['p95']} ms | {r['one namespace k=50']['p50']} / {r['one namespace k=50']['p95']} ms | "
              f"{r['rss_growth_mib']} MiB | {r['file_mib']} MiB | {r['reopen_s']} s | {r['load']} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
