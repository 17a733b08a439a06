"""`python -m benchmarks.parallel_reads`: do reads scale past one client on `memsvc serve`?

Starts a fresh server, PUTs `--items` memories (50 namespaces, bench.py's values), waits until
they are indexed, then measures three reads, each first from one client and then from
`--clients` clients at once: GET by key, a filter search (`lang` equality in one namespace,
so about items/50 candidates are decrypted) and a semantic search over the user's 50
namespaces. Every query text is used once, so the embedder's cache never answers for the model.

Each client is its own process (a Python client's threads would share one GIL and measure the
client, not the server), on one keep-alive connection (`http.client`, lighter than httpx). The
clients start together on a barrier; throughput is the successful requests over the wall time
from the barrier to the last answer. The clients run on the same machine as the server and take
CPU from it: the ratio is what 8 local callers get, not what the server could do alone. Each
run also reports the server's cores: its processes' CPU time over the wall time, which on an
idle machine says whether it used both cores (on a loaded one it is the server's share).
`--workers N` runs `memsvc serve --workers N`.
"""

from __future__ import annotations

import argparse
import http.client
import json
import multiprocessing
import os
import random
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

from benchmarks.bench import (HOST, LANGS, TENANT, TOKEN_TTL_S, USER, Server, ServerFailed, _drain,
                              _namespace, _run_parallel, _semantic_queries, make_value, percentile)

__all__ = ["main"]

TARGET_RATIO = 1.6

Request = tuple[str, str, bytes | None]  # method, path with query, body


def _get(rng: random.Random, n: int, _: int) -> Request:
    i = rng.randrange(n)
    return "GET", "/v1/memories?" + urlencode([*(("ns", s) for s in _namespace(i)), ("key", f"k{i}")]), None


def _filter_search(rng: random.Random, n: int, _: int) -> Request:
    body = {"namespace_prefix": _namespace(rng.randrange(n)), "filter": {"lang": rng.choice(LANGS)}, "limit": 10}
    return "POST", "/v1/memories/search", json.dumps(body).encode()


def _semantic_search(rng: random.Random, n: int, t: int) -> Request:
    (query, _topic), = _semantic_queries(1, rng)
    body = {"namespace_prefix": ["user", USER], "query": f"{query} #{t}", "mode": "semantic", "limit": 10}
    return "POST", "/v1/memories/search", json.dumps(body).encode()


READS: dict[str, Callable[[random.Random, int, int], Request]] = {
    "get": _get, "filter search": _filter_search, "semantic search": _semantic_search}


def _client(port: int, token: str, requests: list[Request], barrier: Any, out: Any) -> None:
    """One client process: connect, wait for the others, send its requests one after another."""
    conn = http.client.HTTPConnection(HOST, port, timeout=300)
    headers = {"Authorization": f"Bearer {token}", "Content-Type": "application/json"}
    conn.request("GET", "/health")  # the connection is open before the clock starts
    conn.getresponse().read()
    barrier.wait()
    started, latencies, failures = time.monotonic(), [], 0
    for method, path, body in requests:
        t0 = time.monotonic()
        conn.request(method, path, body=body, headers=headers)
        response = conn.getresponse()
        response.read()
        if response.status == 200:
            latencies.append((time.monotonic() - t0) * 1000)
        else:
            failures += 1
    out.put((started, time.monotonic(), latencies, failures))


def _server_cpu_s(pid: int) -> float:
    """CPU seconds used so far by the server process and its worker processes (Linux /proc)."""
    total, todo = 0.0, [pid]
    while todo:
        p = todo.pop()
        try:
            fields = Path(f"/proc/{p}/stat").read_text().rsplit(")", 1)[1].split()
            total += (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")  # utime, stime
            for task in Path(f"/proc/{p}/task").iterdir():
                todo += [int(c) for c in (task / "children").read_text().split()]
        except (OSError, ValueError):
            continue  # a process that has just ended
    return total


def _measure(port: int, token: str, requests: list[Request], clients: int, server_pid: int) -> dict[str, Any]:
    ctx = multiprocessing.get_context("fork")
    barrier, out = ctx.Barrier(clients), ctx.Queue()
    shares = [requests[k::clients] for k in range(clients)]
    procs = [ctx.Process(target=_client, args=(port, token, share, barrier, out)) for share in shares]
    cpu_before = _server_cpu_s(server_pid)
    for p in procs:
        p.start()
    results = [out.get() for _ in procs]
    server_cpu = _server_cpu_s(server_pid) - cpu_before
    for p in procs:
        p.join()
    wall = max(r[1] for r in results) - min(r[0] for r in results)
    latencies = sorted(x for r in results for x in r[2])
    return {"clients": clients, "requests": len(requests), "ok": len(latencies),
            "failed": sum(r[3] for r in results), "wall_s": round(wall, 3),
            "per_s": round(len(latencies) / wall, 1) if wall > 0 else None,
            "p50_ms": round(percentile(latencies, 50) or 0, 2), "p95_ms": round(percentile(latencies, 95) or 0, 2),
            # the server's CPU time over the wall time: how many cores it kept busy (at most 1 for
            # work that holds one process's GIL)
            "server_cores": round(server_cpu / wall, 2) if wall > 0 else None,
            "loadavg_1m": round(os.getloadavg()[0], 2)}


def _load(server: Server, n: int, admin_token: str, user_token: str) -> None:
    def put(client: Any, i: int) -> tuple[int, Any]:
        r = client.put("/v1/memories", json={"namespace": _namespace(i), "key": f"k{i}", "value": make_value(i)})
        return r.status_code, None

    started = time.perf_counter()
    loaded = _run_parallel("put", server.base_url, user_token, n, 8, put)
    if loaded.ok != n:
        raise ServerFailed(f"{n - loaded.ok} of {n} puts failed")
    _drain(server.base_url, admin_token, n, started, loaded.wall_s)


def run(args: argparse.Namespace) -> int:
    from memsvc.adapters.local.issuer import LocalIssuer

    data_dir = Path(args.data_dir or tempfile.mkdtemp(prefix="memsvc-parallel-"))
    server = Server(data_dir, args.port, serve_args=["--workers", str(args.workers)] if args.workers else [])
    print(f"parallel reads: {args.items} items, {args.queries} requests per run, 1 vs {args.clients} clients, "
          f"{os.cpu_count()} CPUs, load {os.getloadavg()[0]:.2f}, data in {data_dir}", flush=True)
    rows: list[dict[str, Any]] = []
    try:
        server.start()
        issuer = LocalIssuer(data_dir / "keys")
        user_token = issuer.mint(sub=USER, tenant=TENANT, ttl_seconds=TOKEN_TTL_S)
        _load(server, args.items, issuer.mint(sub="bench-admin", tenant=TENANT, roles=["admin"],
                                              ttl_seconds=TOKEN_TTL_S), user_token)
        rng = random.Random(14)
        for name, make in READS.items():
            one = [make(rng, args.items, t) for t in range(args.queries)]
            many = [make(rng, args.items, args.queries + t) for t in range(args.queries)]
            pid = server.proc.pid
            _measure(args.port, user_token, one[: max(1, args.queries // 10)], 1, pid)  # warm up: caches, pages
            seq = _measure(args.port, user_token, one, 1, pid)
            par = _measure(args.port, user_token, many, args.clients, pid)
            ratio = par["per_s"] / seq["per_s"] if seq["per_s"] and par["per_s"] else None
            rows.append({"read": name, "sequential": seq, "parallel": par,
                         "ratio": round(ratio, 2) if ratio else None})
            print(f"  {name:<16} 1 client {seq['per_s']:>7}/s (p50 {seq['p50_ms']} ms)   {args.clients} clients "
                  f"{par['per_s']:>7}/s (p50 {par['p50_ms']} ms, p95 {par['p95_ms']} ms)   x{rows[-1]['ratio']}   "
                  f"server cores {seq['server_cores']} -> {par['server_cores']}   failed {seq['failed'] + par['failed']}"
                  f"   load {par['loadavg_1m']}", flush=True)
    except ServerFailed as exc:
        print(f"server failed: {exc}\n{server.log_tail()}", file=sys.stderr)
        return 2
    finally:
        server.stop()
    (data_dir / "parallel-reads.json").write_text(json.dumps({"argv": sys.argv[1:], "rows": rows}, indent=2))
    failed = sum(r["sequential"]["failed"] + r["parallel"]["failed"] for r in rows)
    short = [r["read"] for r in rows if (r["ratio"] or 0) < TARGET_RATIO]
    print(f"target x{TARGET_RATIO}: " + ("met" if not short else "missed by " + ", ".join(short))
          + (f"; {failed} requests failed" if failed else ""))
    return 1 if failed else 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.parallel_reads", description=__doc__.split("\n")[0])
    parser.add_argument("--items", type=int, default=5000)
    parser.add_argument("--queries", type=int, default=400, help="requests per run (sequential and parallel each)")
    parser.add_argument("--clients", type=int, default=8)
    parser.add_argument("--workers", type=int, default=0, help="`memsvc serve --workers N` (0: the default)")
    parser.add_argument("--port", type=int, default=8766)
    parser.add_argument("--data-dir", type=Path, default=None, help="a fresh directory (default: a temporary one)")
    return run(parser.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
