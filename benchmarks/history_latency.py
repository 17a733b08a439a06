"""`python -m benchmarks.history_latency`: `GET /v1/memories/history` of a memory with 100 versions,
first page (`limit` 20, the default), over HTTP on a fresh local `memsvc serve` (SQLite), from one
sequential client. Target (issue 25): p95 <= 20 ms.

The namespace also holds `--noise` other keys' versions, so a read that scanned the namespace's
events instead of the key's index would show it. Versions are written with `index_fields: false`
(no embedding), since indexing is not what is measured; the timeline records them all before the
reads start. Each page is checked: 20 recorded versions, newest first, with their values.
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from pathlib import Path

import httpx

from benchmarks.bench import percentile, serving

NS = ["user", "bench", "notes"]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--versions", type=int, default=100)
    parser.add_argument("--noise", type=int, default=2000, help="other keys' versions in the same namespace")
    parser.add_argument("--requests", type=int, default=500)
    parser.add_argument("--warmup", type=int, default=50)
    parser.add_argument("--port", type=int, default=8769)
    args = parser.parse_args(argv)
    from memsvc.adapters.local.issuer import LocalIssuer

    with tempfile.TemporaryDirectory(prefix="memsvc-history-") as tmp:
        data_dir = Path(tmp) / "data"
        with serving(data_dir, args.port) as url:
            token = LocalIssuer(data_dir / "keys").mint(sub="bench", tenant="default", ttl_seconds=3600)
            with httpx.Client(base_url=url, headers={"Authorization": f"Bearer {token}"}, timeout=60) as client:
                def put(key: str, n: int) -> None:
                    client.put("/v1/memories", json={"namespace": NS, "key": key, "index_fields": False,
                                                     "value": {"n": n, "text": os.urandom(256).hex()}}
                               ).raise_for_status()

                for n in range(max(args.versions, args.noise)):  # interleaved, as a busy namespace is
                    if n < args.versions:
                        put("subject", n)
                    if n < args.noise:
                        put(f"other-{n % 50}", n)
                query = [("ns", s) for s in NS] + [("key", "subject")]
                deadline = time.monotonic() + 120
                while True:  # until the timeline has recorded every version
                    page = client.get("/v1/memories/history", params=query + [("limit", 100)]).json()
                    if all(v["recorded"] for v in page["versions"]) and len(page["versions"]) == min(args.versions, 100):
                        break
                    assert time.monotonic() < deadline, "the timeline did not catch up"
                    time.sleep(0.2)
                samples = []
                for i in range(args.warmup + args.requests):
                    started = time.perf_counter()
                    r = client.get("/v1/memories/history", params=query)
                    elapsed = (time.perf_counter() - started) * 1000
                    r.raise_for_status()
                    versions = r.json()["versions"]
                    assert [v["value"]["n"] for v in versions] == list(range(args.versions - 1, args.versions - 21, -1))
                    if i >= args.warmup:
                        samples.append(elapsed)
            samples.sort()
            print(f"history of a key with {args.versions} versions among {args.noise} other versions in its "
                  f"namespace, first page of 20; {args.requests} sequential requests after {args.warmup} warm-up "
                  f"(load average {os.getloadavg()[0]:.1f}):")
            print(f"  p50 {percentile(samples, 50):.2f} ms  p95 {percentile(samples, 95):.2f} ms  "
                  f"p99 {percentile(samples, 99):.2f} ms  max {samples[-1]:.2f} ms")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
