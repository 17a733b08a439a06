"""`python -m benchmarks.task_context_latency`: seed 003's task-context save and restore-by-sub-task
latency over HTTP, on a fresh local `memsvc serve` (SQLite), from one sequential client.

Each round is a worker's delegation and a result's arrival: `POST /v1/memory/task-context` with
two sub-tasks and a ~1 KB `data` (sealed, with the sub-task index written in the same
transaction), then `GET /v1/memory/task-context/by-subtask/{id}` (the index row, the task row,
the unsealing). Target (issue 13): p95 <= 15 ms for each.
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from pathlib import Path

import httpx

from benchmarks.bench import percentile, serving

TENANT = "default"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=500)
    parser.add_argument("--warmup", type=int, default=100)
    parser.add_argument("--port", type=int, default=8768)
    args = parser.parse_args(argv)
    from memsvc.adapters.local.issuer import LocalIssuer

    with tempfile.TemporaryDirectory(prefix="memsvc-task-context-") as tmp:
        data_dir = Path(tmp) / "data"
        with serving(data_dir, args.port) as url:
            token = LocalIssuer(data_dir / "keys").mint(sub="worker", tenant=TENANT, roles=["service"],
                                                        ttl_seconds=3600)
            data = {"query": "AI trends", "context": os.urandom(384).hex()}  # ~1 KB of JSON
            save, restore = [], []
            with httpx.Client(base_url=url, headers={"Authorization": f"Bearer {token}"}, timeout=60) as client:
                for n in range(args.warmup + args.requests):
                    body = {"task_id": f"task-{n}", "event_type": "research.requested",
                            "response_event": "research.completed", "data": data,
                            "sub_tasks": [f"task-{n}/search", f"task-{n}/summary"]}
                    started = time.perf_counter()
                    client.post("/v1/memory/task-context", json=body).raise_for_status()
                    saved = time.perf_counter()
                    r = client.get(f"/v1/memory/task-context/by-subtask/task-{n}%2Fsummary")
                    restored = time.perf_counter()
                    r.raise_for_status()
                    assert r.json()["task_id"] == f"task-{n}"
                    if n >= args.warmup:
                        save.append((saved - started) * 1000)
                        restore.append((restored - saved) * 1000)
            print(f"{args.requests} sequential rounds after {args.warmup} warm-up "
                  f"(load average {os.getloadavg()[0]:.1f}):")
            for name, samples in (("save (POST)", save), ("restore by sub-task (GET)", restore)):
                samples.sort()
                print(f"  {name:27} p50 {percentile(samples, 50):.2f} ms  p95 {percentile(samples, 95):.2f} ms  "
                      f"p99 {percentile(samples, 99):.2f} ms  max {samples[-1]:.2f} ms")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
