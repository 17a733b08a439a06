"""`python -m benchmarks.metrics_scrape`: what seed 001's metrics cost locally.

- `GET /metrics` (in process, through the router) at 10,000 and 100,000 items, with the items in
  few or in very many namespaces (storage is read from one `usage` row per namespace), and the
  recount of the `usage` table when a database without it is opened.
- Recording one request's sample: `PrometheusMetrics.record` and `EmfMetrics.record` (stdout to
  /dev/null), as the router calls them.

Items are copied in SQL from one real sealed item, so the table has the shape `memsvc serve` writes.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
import tempfile
import time
from pathlib import Path

from memsvc.adapters.aws.emf_metrics import EmfMetrics
from memsvc.adapters.local.prometheus_metrics import PrometheusMetrics
from memsvc.bootstrap import build_local
from memsvc.core.models import Caller
from memsvc.ports import OperationSample
from memsvc.service.memories import PutMemory
from tests.fakes.embedder import HashEmbedder

SCRAPE = {"version": "2.0", "rawPath": "/metrics", "requestContext": {"http": {"method": "GET"}}}
SHAPES = ((10_000, 100), (100_000, 1_000), (100_000, 100_000))  # (items, namespaces)


def median_ms(fn, runs: int) -> float:
    times = []
    for _ in range(runs):
        started = time.perf_counter()
        fn()
        times.append((time.perf_counter() - started) * 1000)
    return sorted(times)[runs // 2]


def scrapes(data: Path) -> None:
    app = build_local(data, embedder=HashEmbedder(), start_workers=False)
    caller = Caller(tenant_id="t0", user_id="u0", roles=("admin",))
    app.services.memories.put(caller, PutMemory(namespace=["user", "u0", "memories"], key="k",
                                                value={"text": "a preference of about two hundred bytes " * 5}))
    app.close()
    db = sqlite3.connect(data / "memsvc.db")
    columns = [r[1] for r in db.execute("PRAGMA table_info(items)")]
    copied = {"tenant": "'t' || (i % 20)", "ns": "ns || '-' || (i % ?)", "key": "key || i", "id": "id || i"}
    for items, namespaces in SHAPES:
        db.execute("DELETE FROM items WHERE key != 'k'")
        db.execute("WITH RECURSIVE s(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM s WHERE i < ?) "
                   f"INSERT INTO items ({', '.join(columns)}) SELECT {', '.join(copied.get(c, c) for c in columns)} "
                   "FROM s, (SELECT * FROM items WHERE key = 'k')", (items - 1, namespaces))
        db.execute("DELETE FROM usage")  # as a database from before the table: recounted on open
        db.commit()
        started = time.perf_counter()
        app = build_local(data, embedder=HashEmbedder(), start_workers=False)
        opened = (time.perf_counter() - started) * 1000
        assert app.router.handle(SCRAPE)["statusCode"] == 200
        print(f"{items:>7} items in {namespaces:>7} namespaces: GET /metrics {median_ms(lambda: app.router.handle(SCRAPE), 11):7.1f} ms "
              f"(median of 11); opening with the recount {opened:5.0f} ms")
        app.close()


def recording() -> None:
    sample = OperationSample("POST /v1/memories/search", "acme", 200, None, 12.5, {"all": 3, "user": 2})
    prometheus = PrometheusMetrics()
    emf = EmfMetrics(namespace="memsvc", service="memsvc-api")
    print(f"PrometheusMetrics.record: {median_ms(lambda: [prometheus.record(sample) for _ in range(1000)], 5):.1f} us a sample")
    with open(os.devnull, "w") as null, contextlib.redirect_stdout(null):
        per_sample = median_ms(lambda: [emf.record(sample) for _ in range(1000)], 5)
    print(f"EmfMetrics.record: {per_sample:.1f} us a sample (3 EMF documents)")


if __name__ == "__main__":
    with tempfile.TemporaryDirectory() as tmp:
        scrapes(Path(tmp) / "data")
    recording()
