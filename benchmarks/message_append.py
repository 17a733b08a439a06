"""`python -m benchmarks.message_append`: `POST /v1/memory/sessions/{id}/messages` throughput over
HTTP, on a fresh local `memsvc serve` (real MiniLM, SQLite, background indexing running), from
`--clients` threads each with its own connection.

Each client appends to its own session by default (`--shared` for one session all clients
append to, the worst case for the per-session counter). Every append is one SQLite
transaction (the session's seq and last_interaction, the message's sealed item, its
change-feed row); embedding happens off the write path, in the indexer, which competes for the
same two cores while the benchmark runs. Prints appends per second and latency percentiles,
and checks that every session's seqs are 1..n without gaps.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import threading
import time
from pathlib import Path

import httpx

from benchmarks.bench import percentile, serving

TENANT = "default"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clients", type=int, default=8)
    parser.add_argument("--messages", type=int, default=250, help="per client")
    parser.add_argument("--shared", action="store_true", help="every client appends to one session")
    parser.add_argument("--port", type=int, default=8768)
    args = parser.parse_args(argv)
    from memsvc.adapters.local.issuer import LocalIssuer

    with tempfile.TemporaryDirectory(prefix="memsvc-messages-") as tmp:
        data_dir = Path(tmp) / "data"
        with serving(data_dir, args.port) as url:
            token = LocalIssuer(data_dir / "keys").mint(sub="bench", tenant=TENANT, roles=[], ttl_seconds=3600)
            headers = {"Authorization": f"Bearer {token}"}
            sessions = ["shared"] if args.shared else [f"s{n}" for n in range(args.clients)]
            for s in sessions:
                httpx.post(url + "/v1/memory/sessions", json={"session_id": s}, headers=headers).raise_for_status()
            latencies: list[float] = []
            failures: list[int] = []
            lock = threading.Lock()
            start = threading.Barrier(args.clients + 1)

            def client(n: int) -> None:
                session = sessions[0] if args.shared else sessions[n]
                mine: list[float] = []
                with httpx.Client(base_url=url, headers=headers, timeout=60) as c:
                    start.wait()
                    for i in range(args.messages):
                        began = time.perf_counter()
                        r = c.post(f"/v1/memory/sessions/{session}/messages",
                                   json={"role": "user", "content": f"client {n} says message number {i}"})
                        mine.append((time.perf_counter() - began) * 1000)
                        if r.status_code != 201:
                            failures.append(r.status_code)
                with lock:
                    latencies.extend(mine)

            threads = [threading.Thread(target=client, args=(n,)) for n in range(args.clients)]
            for t in threads:
                t.start()
            start.wait()
            began = time.perf_counter()
            for t in threads:
                t.join()
            wall = time.perf_counter() - began
            latencies.sort()
            total = args.clients * args.messages
            print(f"message append, {args.clients} clients x {args.messages} "
                  f"({'one shared session' if args.shared else 'a session each'}), load {os.getloadavg()[0]:.1f}:")
            print(f"  {total / wall:.0f} appends/s over {wall:.1f} s; failures {len(failures)}")
            print(f"  latency p50 {percentile(latencies, 50):.1f} ms  p95 {percentile(latencies, 95):.1f} ms  "
                  f"p99 {percentile(latencies, 99):.1f} ms")
            for s in sessions:
                seqs = [m["seq"] for m in _all_messages(url, headers, s)]
                assert seqs == list(range(1, len(seqs) + 1)), f"gaps in {s}"
            print("  seqs: 1..n without gaps in every session")
    return 0


def _all_messages(url: str, headers: dict[str, str], session: str) -> list[dict]:
    out: list[dict] = []
    while True:
        page = httpx.get(f"{url}/v1/memory/sessions/{session}/messages", headers=headers,
                         params={"after_seq": out[-1]["seq"] if out else 0, "limit": 500}).json()["messages"]
        out.extend(page)
        if len(page) < 500:
            return out


if __name__ == "__main__":
    sys.exit(main())
