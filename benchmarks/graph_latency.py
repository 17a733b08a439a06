"""`python -m benchmarks.graph_latency`: the knowledge graph's query latency over HTTP, and what
the indexer's graph step costs per memory (issue 15).

1. Builds a local data dir in process (SQLite, `HashEmbedder`: the graph queries embed nothing,
   and MiniLM would only slow the set-up): `--memories` memories (default 10,000) of three short
   sentences naming people, projects, tickets and systems, which the pattern extractor turns into
   about five edges each (~50,000), derived by the indexer's own feed cycle. The graph step's
   time per memory (extract, normalise, hash, seal, one SQLite transaction) is measured there:
   memories/s it can keep up with (target: 20 writes/s).
2. Serves that data dir over HTTP (`LocalServer` under uvicorn, in a subprocess) and measures,
   from one sequential client, `POST /v1/graph/related` from a random entity at `max_hops` 2
   and 3, and `POST /v1/graph/path` between random entities with `max_hops` 4. Targets: related
   2 hops p95 <= 50 ms; shortest path (up to 4 hops) p95 <= 100 ms.
"""

from __future__ import annotations

import argparse
import os
import random
import socket
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

import httpx

from benchmarks.bench import percentile

TENANT = "default"
USER = "bench"
SYLLABLES = ("ka", "lo", "ven", "mir", "sa", "tor", "bel", "ri", "dun", "ma", "zel", "or", "pen", "tha", "gor", "li")


def _word(rng: random.Random) -> str:
    return "".join(rng.choice(SYLLABLES) for _ in range(rng.randint(2, 3))).capitalize()


def vocabulary(rng: random.Random) -> dict[str, list[str]]:
    def distinct(n, make):
        out: set[str] = set()
        while len(out) < n:
            out.add(make())
        return sorted(out)

    return {
        "people": distinct(500, lambda: f"{_word(rng)} {_word(rng)}"),
        "projects": distinct(200, lambda: f"Project {_word(rng)}"),
        "tickets": [f"INC-{n}" for n in range(1, 2001)],
        "systems": distinct(300, lambda: f"{_word(rng)}DB" if rng.random() < 0.3 else f"{_word(rng)} Service"),
    }


def memory_text(rng: random.Random, v: dict[str, list[str]]) -> str:
    """Three sentences, five edges: WORKS_ON; CAUSED_BY and two co-mentions; DEPENDS_ON."""
    person, other = rng.sample(v["people"], 2)
    system, a, b = rng.sample(v["systems"], 3)
    return (f"{person} works on {rng.choice(v['projects'])}. {rng.choice(v['tickets'])} was caused by {system} "
            f"according to {other}. {a} depends on {b}.")


def build(data_dir: Path, memories: int, seed: int) -> dict:
    from memsvc.bootstrap import build_local
    from memsvc.core.models import Caller
    from memsvc.service.memories import PutMemory
    from tests.fakes.embedder import HashEmbedder

    rng = random.Random(seed)
    v = vocabulary(rng)
    app = build_local(data_dir, embedder=HashEmbedder(), start_workers=False)
    caller = Caller(tenant_id=TENANT, user_id=USER, roles=("user",))
    graph_step = app.indexer._graph
    spent = {"seconds": 0.0, "memories": 0}
    apply = graph_step.apply

    def timed(changes):
        started = time.perf_counter()
        failed = apply(changes)
        spent["seconds"] += time.perf_counter() - started
        spent["memories"] += len(changes)
        return failed

    graph_step.apply = timed
    started = time.perf_counter()
    for n in range(memories):
        ns = ["user", USER, f"team-{n % 20}"]
        app.services.memories.put(caller, PutMemory(namespace=ns, key=f"m{n}", value={"text": memory_text(rng, v)}))
    written = time.perf_counter()
    while app.workers.run_cycle("indexer").total:
        pass
    stats = app.graph.stats()
    app.close()
    return {"vocabulary": v, "stats": stats, "write_s": written - started, "graph_s": spent["seconds"],
            "graph_memories": spent["memories"]}


def serve(data_dir: Path, port: int) -> None:
    """The subprocess: the built data dir over HTTP (no background workers: nothing is pending)."""
    import uvicorn

    from memsvc.bootstrap import build_local
    from memsvc.local_server import LocalServer
    from memsvc.settings import LocalSettings
    from tests.fakes.embedder import HashEmbedder

    app = build_local(data_dir, embedder=HashEmbedder(), start_workers=False)
    uvicorn.run(LocalServer(app.router, app.issuer, threads=LocalSettings(data_dir).request_threads(),
                            on_shutdown=app.close), host="127.0.0.1", port=port,
                log_level="warning", lifespan="on")


def measure(url: str, token: str, v: dict[str, list[str]], requests: int, warmup: int, seed: int) -> dict:
    rng = random.Random(seed + 1)
    everyone = [name for names in v.values() for name in names]
    prefix = ["user", USER]
    out: dict[str, list[float]] = {"related max_hops=2": [], "related max_hops=3": [], "path max_hops=4": []}
    found_hops: Counter = Counter()
    sizes: Counter = Counter()
    with httpx.Client(base_url=url, headers={"Authorization": f"Bearer {token}"}, timeout=60) as client:
        for n in range(warmup + requests):
            for hops in (2, 3):
                body = {"namespace_prefix": prefix, "from": {"entity": rng.choice(everyone)}, "max_hops": hops}
                started = time.perf_counter()
                r = client.post("/v1/graph/related", json=body)
                elapsed = (time.perf_counter() - started) * 1000
                r.raise_for_status()
                if n >= warmup:
                    out[f"related max_hops={hops}"].append(elapsed)
                    sizes[f"related {hops}: memories"] += len(r.json()["memories"])
            a, b = rng.sample(everyone, 2)
            body = {"namespace_prefix": prefix, "from": {"entity": a}, "to": {"entity": b}, "max_hops": 4}
            started = time.perf_counter()
            r = client.post("/v1/graph/path", json=body)
            elapsed = (time.perf_counter() - started) * 1000
            r.raise_for_status()
            if n >= warmup:
                out["path max_hops=4"].append(elapsed)
                answer = r.json()
                found_hops[answer["hops"] if answer["found"] else ("truncated" if answer["truncated"] else "none")] += 1
    return {"latency": out, "path_hops": found_hops, "sizes": sizes}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def httpx_status(url: str) -> int | None:
    try:
        return httpx.get(url, timeout=2).status_code
    except httpx.HTTPError:
        return None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--memories", type=int, default=10_000)
    parser.add_argument("--requests", type=int, default=300)
    parser.add_argument("--warmup", type=int, default=30)
    parser.add_argument("--port", type=int, default=0, help="default: a free one")
    parser.add_argument("--seed", type=int, default=15)
    parser.add_argument("--serve", type=Path, help=argparse.SUPPRESS)  # the server subprocess
    args = parser.parse_args(argv)
    if args.serve:
        serve(args.serve, args.port)
        return 0
    from memsvc.adapters.local.issuer import LocalIssuer

    with tempfile.TemporaryDirectory(prefix="memsvc-graph-") as tmp:
        data_dir = Path(tmp) / "data"
        built = build(data_dir, args.memories, args.seed)
        stats = built["stats"]
        print(f"built {args.memories} memories in {built['write_s']:.1f} s: {stats['nodes']} nodes, "
              f"{stats['edges']} edges, {stats['mentions']} mentions (load average {os.getloadavg()[0]:.1f})")
        per = built["graph_s"] / max(1, built["graph_memories"]) * 1000
        print(f"graph step: {built['graph_memories']} memories in {built['graph_s']:.1f} s, {per:.2f} ms each "
              f"= {1000 / per:.0f} memories/s (target: keeps up with 20 writes/s)")
        port = args.port or _free_port()
        server = subprocess.Popen([sys.executable, "-m", "benchmarks.graph_latency", "--serve", str(data_dir),
                                   "--port", str(port)])
        try:
            url = f"http://127.0.0.1:{port}"
            while httpx_status(url + "/health") != 200:
                if server.poll() is not None:
                    raise SystemExit("the server did not start")
                time.sleep(0.2)
            token = LocalIssuer(data_dir / "keys").mint(sub=USER, tenant=TENANT, ttl_seconds=3600)
            result = measure(url, token, built["vocabulary"], args.requests, args.warmup, args.seed)
        finally:
            server.terminate()
            server.wait(timeout=30)
    print(f"{args.requests} sequential requests of each after {args.warmup} warm-up "
          f"(load average {os.getloadavg()[0]:.1f}):")
    for name, samples in result["latency"].items():
        samples.sort()
        print(f"  {name:20} p50 {percentile(samples, 50):.1f} ms  p95 {percentile(samples, 95):.1f} ms  "
              f"p99 {percentile(samples, 99):.1f} ms  max {samples[-1]:.1f} ms")
    for hops in (2, 3):
        print(f"  related max_hops={hops}: {result['sizes'][f'related {hops}: memories'] / args.requests:.1f} "
              f"memories per answer (limit 20)")
    print(f"  paths by hops: {dict(sorted(result['path_hops'].items(), key=str))}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
