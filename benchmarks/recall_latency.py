"""`python -m benchmarks.recall_latency`: recall latency over HTTP, locally, at 10,000 memories
across 3 layers (issue 12's target: p95 <= 80 ms, sequential client, query embedding included).

The data directory is filled in process: `--items` typed memories (the bench's sentences as
`content`, only `content` indexed, as `remember` writes them), spread round-robin over the user,
project and company layers, indexed by the real indexer with the real MiniLM (so near-duplicates
across layers are real ones, and collapse). Then a fresh `memsvc serve` on that directory answers
`--queries` recalls from one sequential client: every accessible layer (user, project, company),
limit 10, the default token budget. `recall_min_match` is set to 0 and the adaptive cut turned off
so that every recall returns its full page: the slowest path (each page is collapsed, counted and
cut). Reported: the client's wall-clock p50/p95/p99, and the server's own `query_embedding_ms` and
`retrieval_ms`.
"""

from __future__ import annotations

import argparse
import random
import socket
import sys
import tempfile
import time
from pathlib import Path

import httpx

from benchmarks.bench import _semantic_queries, make_value, percentile, serving
from memsvc.core.models import Caller
from memsvc.service.memories import PutMemory
from memsvc.service.tenant_config import SettingsPatch

TENANT = "default"
USER = "bench"
LAYERS = (["user", USER, "memories"], ["project", "p1"], ["company"])
IDENTIFIERS = {"user_id": USER, "project_id": "p1"}


def fill(data_dir: Path, items: int) -> None:
    from memsvc.bootstrap import build_local

    app = build_local(data_dir, start_workers=False)
    admin = Caller(tenant_id=TENANT, user_id="ops", roles=("admin",))
    started = time.perf_counter()
    for i in range(items):
        value = {"content": make_value(i)["text"], "type": "fact", "importance": (i % 10) / 10}
        app.services.memories.put(admin, PutMemory(namespace=LAYERS[i % len(LAYERS)], key=f"m{i}", value=value,
                                                   index_fields=["content"]))
        if (i + 1) % 1000 == 0:
            app.workers.run_cycle("indexer")
    while app.workers.run_cycle("indexer").total:
        pass
    app.services.admin.put_settings(admin, SettingsPatch(recall_min_match=0.0, recall_cut_gap=1.0,
                                                         recall_cut_margin=1.0))
    print(f"filled {items} memories in {time.perf_counter() - started:.0f} s", file=sys.stderr)
    app.close()


def measure(data_dir: Path, port: int, queries: int) -> dict[str, float]:
    from memsvc.adapters.local.issuer import LocalIssuer

    with serving(data_dir, port) as url:
        token = LocalIssuer(data_dir / "keys").mint(sub="ops", tenant=TENANT, roles=["admin"], ttl_seconds=3600)
        texts = [q for q, _ in _semantic_queries(queries + 20, random.Random(11))]
        wall, embedding, retrieval, counts = [], [], [], []
        with httpx.Client(base_url=url, headers={"Authorization": f"Bearer {token}"}, timeout=60) as client:
            for n, text in enumerate(texts):
                started = time.perf_counter()
                r = client.post("/v1/memories/recall", json={"query": text, "identifiers": IDENTIFIERS, "limit": 10})
                elapsed = (time.perf_counter() - started) * 1000
                if r.status_code != 200:
                    raise SystemExit(f"recall answered {r.status_code}: {r.text}")
                if n < 20:
                    continue  # warm-up: the first requests load the tokenizer and fill caches
                metadata = r.json()["metadata"]
                wall.append(elapsed)
                embedding.append(metadata["query_embedding_ms"])
                retrieval.append(metadata["retrieval_ms"])
                counts.append(metadata["count"])
        wall.sort(), embedding.sort(), retrieval.sort()
        out = {"p50_ms": percentile(wall, 50), "p95_ms": percentile(wall, 95), "p99_ms": percentile(wall, 99),
               "query_embedding_p50_ms": percentile(embedding, 50), "retrieval_p50_ms": percentile(retrieval, 50),
               "retrieval_p95_ms": percentile(retrieval, 95), "mean_results": sum(counts) / len(counts)}
        print(f"recall ({queries} queries, 3 layers): p50 {out['p50_ms']:.1f} ms  p95 {out['p95_ms']:.1f} ms  "
              f"p99 {out['p99_ms']:.1f} ms; server: query embedding p50 {out['query_embedding_p50_ms']:.1f} ms, "
              f"retrieval p50 {out['retrieval_p50_ms']:.1f} / p95 {out['retrieval_p95_ms']:.1f} ms; "
              f"{out['mean_results']:.1f} memories a recall", file=sys.stderr)
        return out


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--items", type=int, default=10_000)
    parser.add_argument("--queries", type=int, default=300)
    parser.add_argument("--port", type=int, default=0, help="default: a free port")
    parser.add_argument("--data-dir", type=Path, help="fill this directory once and reuse it (default: a temporary one)")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="memsvc-recall-") as tmp:
        data_dir = args.data_dir or Path(tmp) / "data"
        if not (data_dir / "memsvc.db").exists():
            fill(data_dir, args.items)
        measure(data_dir, args.port or _free_port(), args.queries)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
