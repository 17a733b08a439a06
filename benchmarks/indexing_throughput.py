"""`python -m benchmarks.indexing_throughput --items 5000`: how fast a local `memsvc serve` drains an
indexing backlog, and how promptly it answers requests meanwhile.

The backlog is written first, in process, with no server running (a restart after a burst of
writes): `--items` memories of one short sentence each (`index_fields: ["text"]`, one text per
memory). Then `memsvc serve` starts on that data directory and its change-feed worker drains the
backlog while one sequential client alternates a GET by key and a search by a query (hybrid, the
default), a pair every `--probe-interval` seconds (0: back to back, which takes a core from the
indexer). Once `pending` (the admin index status) reaches 0, the same client runs the same mix on
the idle server for comparison.

Texts/s is the pending count at the first answer of the server divided by the time until it
reads 0 (polled every 0.2 s). Latencies are client-side wall clock; percentiles nearest-rank.
Everything runs on this machine and competes for its CPU: say the load with any number. The
server's CPU time over the drain (from /proc, Linux) gives texts per CPU-second, which depends
much less on the load: on an idle machine the drain runs at up to that times the cores.

`--model` measures the model alone instead, on the same texts: the time per text by texts per
call, with one intra-op thread and with two (how the indexer's chunk size and the lone-text
session were chosen), then the whole set in one thread, in one call with two intra-op threads,
and in two concurrent single-threaded calls of 16 (what the indexer's pool does).
"""

from __future__ import annotations

import argparse
import os
import random
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx

from benchmarks.bench import USER, make_value, percentile, serving

TENANT = "default"
NAMESPACES = 50


def write_backlog(data_dir: Path, items: int) -> None:
    from memsvc.bootstrap import build_local
    from memsvc.core.models import Caller
    from memsvc.service.memories import PutMemory

    app = build_local(data_dir, start_workers=False)
    try:
        caller = Caller(TENANT, USER)
        for i in range(items):
            app.services.memories.put(caller, PutMemory(namespace=_namespace(i), key=f"m{i}",
                                                        value=make_value(i), index_fields=["text"]))
    finally:
        app.close()


def _namespace(i: int) -> tuple[str, ...]:
    return ("user", USER, f"topic-{i % NAMESPACES}")


def probe(client: httpx.Client, rng: random.Random, items: int, interval: float, until: threading.Event | None,
          count: int) -> tuple[list[float], list[float]]:
    """Alternate GETs and searches, a pair every `interval` seconds, until `until` is set (or
    `count` pairs when it is None): their latencies in ms."""
    gets: list[float] = []
    searches: list[float] = []
    stop = threading.Event() if until is None else until
    while (until is not None or len(gets) < count) and not stop.wait(interval):
        i = rng.randrange(items)
        started = time.perf_counter()
        r = client.get("/v1/memories", params=[*(("ns", s) for s in _namespace(i)), ("key", f"m{i}")])
        gets.append((time.perf_counter() - started) * 1000)
        r.raise_for_status()
        started = time.perf_counter()
        r = client.post("/v1/memories/search", json={"namespace_prefix": ["user", USER],
                                                     "query": make_value(rng.randrange(items))["text"], "limit": 10})
        searches.append((time.perf_counter() - started) * 1000)
        r.raise_for_status()
    return gets, searches


def server_cpu_seconds() -> float:
    """User and system CPU time of this process's child (the server), from /proc."""
    ticks = os.sysconf("SC_CLK_TCK")
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == os.getpid():  # fields[1] is the parent pid; [11], [12] utime, stime
            return (int(fields[11]) + int(fields[12])) / ticks
    raise RuntimeError("the server process is not a child of this one")


def model_modes(texts: list[str]) -> None:
    from memsvc.adapters.local.embedder import MiniLMEmbedder

    single, intra2 = MiniLMEmbedder(batch_size=256), MiniLMEmbedder(intra_op_num_threads=2, batch_size=256)
    print("  texts per call (one caller; the embedder's own batch set above every size tried):")
    for threads, model in ((1, single), (2, intra2)):
        model.embed_array(texts[:64])  # warm up
        for size in (1, 2, 4, 8, 16, 32, 64, 128):
            sample = texts[: min(len(texts), max(256, size * 16))]
            cpu, wall = time.process_time(), time.perf_counter()
            for start in range(0, len(sample), size):
                model.embed_array(sample[start : start + size])
            cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
            print(f"    intra_op_num_threads={threads}, {size:3} a call: {len(sample) / wall:6.0f} texts/s, "
                  f"{wall / (len(sample) / size) * 1000:6.1f} ms a call, {cpu / len(sample) * 1000:5.2f} ms CPU a text")
    print(f"  the whole set ({len(texts)} texts), as the indexer and search call it:")
    single = MiniLMEmbedder()
    with ThreadPoolExecutor(max_workers=2) as pool:
        def concurrent(batch: list[str]) -> None:
            list(pool.map(single.embed_array, [batch[i : i + 16] for i in range(0, len(batch), 16)]))

        for name, embed in (("1 thread, one call at a time", single.embed_array),
                            ("intra_op_num_threads=2, one call", intra2.embed_array),
                            ("1 thread, 2 concurrent calls of 16", concurrent)):
            embed(texts[:128])  # warm up
            cpu, wall = time.process_time(), time.perf_counter()
            embed(texts)
            cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
            print(f"    {name:36} {len(texts) / wall:6.0f} texts/s  {len(texts) / cpu:6.0f} texts per CPU-second  "
                  f"(load average {os.getloadavg()[0]:.1f})")


def _summary(name: str, samples: list[float]) -> str:
    samples = sorted(samples)
    if not samples:  # no probe asked for (--probe-interval longer than the drain, --idle-requests 0)
        return f"  {name:22} n=    0"
    return (f"  {name:22} n={len(samples):5}  p50 {percentile(samples, 50):7.2f} ms  "
            f"p95 {percentile(samples, 95):7.2f} ms  p99 {percentile(samples, 99):7.2f} ms  max {samples[-1]:7.2f} ms")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--items", type=int, default=5000)
    parser.add_argument("--probe-interval", type=float, default=0.1, help="seconds between GET+search pairs")
    parser.add_argument("--idle-requests", type=int, default=200, help="GET+search pairs after the drain")
    parser.add_argument("--port", type=int, default=8771)
    parser.add_argument("--model", action="store_true", help="measure the model alone, in process")
    args = parser.parse_args(argv)
    if args.model:
        print(f"MiniLM int8 on {os.cpu_count()} cores, {args.items} texts:")
        model_modes([make_value(i)["text"] for i in range(args.items)])
        return 0
    from memsvc.adapters.local.issuer import LocalIssuer

    with tempfile.TemporaryDirectory(prefix="memsvc-indexing-") as tmp:
        data_dir = Path(tmp) / "data"
        started = time.perf_counter()
        write_backlog(data_dir, args.items)
        print(f"backlog: {args.items} memories written in {time.perf_counter() - started:.1f} s "
              f"(load average {os.getloadavg()[0]:.1f})")
        issuer = LocalIssuer(data_dir / "keys")
        user = issuer.mint(sub=USER, tenant=TENANT, ttl_seconds=3600)
        admin = issuer.mint(sub="ops", tenant=TENANT, roles=["admin"], ttl_seconds=3600)
        with serving(data_dir, args.port) as url, \
                httpx.Client(base_url=url, headers={"Authorization": f"Bearer {user}"}, timeout=120) as client, \
                httpx.Client(base_url=url, headers={"Authorization": f"Bearer {admin}"}, timeout=120) as ops:

            def pending() -> int:
                r = ops.get("/admin/v1/memories/index/status")
                r.raise_for_status()
                return r.json()["pending"]

            t0, first, cpu0 = time.perf_counter(), pending(), server_cpu_seconds()
            load_before = os.getloadavg()[0]
            drained = threading.Event()
            during: list[tuple[list[float], list[float]]] = []
            prober = threading.Thread(target=lambda: during.append(
                probe(client, random.Random(1), args.items, args.probe_interval, drained, 0)))
            prober.start()
            while pending():
                time.sleep(0.2)
            seconds, cpu = time.perf_counter() - t0, server_cpu_seconds() - cpu0
            load_after = os.getloadavg()[0]
            drained.set()
            prober.join()
            idle = probe(client, random.Random(2), args.items, args.probe_interval, None, args.idle_requests)
            stats = ops.get("/admin/v1/memories/index/status").json()["stats"]
        rate = first / seconds if seconds else float("nan")
        print(f"drain: {first} pending at the first answer, indexed in {seconds:.1f} s: {rate:.0f} texts/s "
              f"(load average {load_before:.1f} before, {load_after:.1f} after)")
        print(f"server CPU over the drain: {cpu:.1f} s on {os.cpu_count()} cores, "
              f"{first / cpu:.0f} texts per CPU-second (the probe's requests included)")
        print(f"server's indexer totals: {stats}")
        print("during the drain:")
        print(_summary("GET /v1/memories", during[0][0]))
        print(_summary("POST search (hybrid)", during[0][1]))
        print(f"idle, after it (load average {os.getloadavg()[0]:.1f}):")
        print(_summary("GET /v1/memories", idle[0]))
        print(_summary("POST search (hybrid)", idle[1]))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
