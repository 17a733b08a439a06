"""`python -m benchmarks.bench` (`make bench`): throughput and latency of a local `memsvc serve`, measured over HTTP.

For each size N: start a fresh server, PUT N memories (async indexing, the default), wait until
the vector index has caught up, then time random GETs, filter searches and searches by a query
(hybrid, semantic and keyword, each from one sequential client). Every request goes to 127.0.0.1; every loop is bounded (by a request count or a deadline).

Numbers are client-side wall-clock latencies (`time.perf_counter`) seen by `args.concurrency`
threads, each with its own pooled `httpx.Client`; percentiles are nearest-rank over the sorted
samples of the successful requests. Throughput is successful requests per second of phase wall
time. The client runs on the same machine as the server and competes with it for CPU.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import random
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

__all__ = ["run_bench", "make_value", "percentile"]

HOST = "127.0.0.1"
SEARCH_MODES = ("hybrid", "semantic", "keyword")
TENANT = "bench"
USER = "bench"
TOPICS = 50
LANGS = ("en", "de", "fr", "es", "ja")
N_RANGE_WIDTH = 100
HEALTH_TIMEOUT_S = 180.0
REQUEST_TIMEOUT_S = 300.0
POLL_INTERVAL_S = 1.0
TOKEN_TTL_S = 3 * 24 * 3600

# A small vocabulary, so that semantic queries built from the same words have real answers.
_SUBJECTS = (
    "The user", "My manager", "Alice", "Our team", "The customer", "My sister", "The new intern", "Bob",
)
_VERBS = (
    "prefers", "dislikes", "booked", "recommended", "asked about", "forgot about", "scheduled", "is excited about",
)
_OBJECTS = (
    "a window seat on long flights",
    "dark roast coffee with oat milk",
    "vegetarian restaurants near the office",
    "the quarterly budget review meeting",
    "quiet hiking trails in the mountains",
    "the new python release notes",
    "live jazz concerts on friday evenings",
    "a dentist appointment next week",
    "spicy thai food for lunch",
    "a standing desk for the home office",
    "the annual security compliance training",
    "weekend trips to the seaside",
    "learning spanish with a tutor",
    "a birthday gift for her father",
    "early morning yoga classes downtown",
    "noise cancelling headphones for the commute",
)
_TAILS = (
    "before the trip to Lisbon",
    "for the anniversary dinner",
    "during the morning standup",
    "after the long gym session",
    "since moving to the city",
    "ahead of the product launch",
    "because of the rainy weather",
    "while working from home",
)
_QUERY_FORMS = (
    "{obj}",
    "who {verb} {obj}",
    "{subj} {verb} {obj}",
    "what does {subj_l} think about {obj}",
)
_T0 = datetime(2024, 1, 1, tzinfo=timezone.utc)


def make_value(i: int) -> dict[str, Any]:
    """Item `i`'s value: deterministic, independent of thread order."""
    rng = random.Random(i * 7919 + 17)
    text = f"{rng.choice(_SUBJECTS)} {rng.choice(_VERBS)} {rng.choice(_OBJECTS)} {rng.choice(_TAILS)}."
    at = (_T0 + timedelta(minutes=7 * i + rng.randrange(7))).strftime("%Y-%m-%dT%H:%M:%SZ")
    return {"text": text, "n": i, "lang": rng.choice(LANGS), "at": at}


def _namespace(i: int) -> list[str]:
    return ["user", USER, f"topic-{i % TOPICS}"]


def _semantic_queries(count: int, rng: random.Random) -> list[tuple[str, str]]:
    """(query, the object phrase it is about) pairs."""
    out = []
    for _ in range(count):
        subj, verb, obj = rng.choice(_SUBJECTS), rng.choice(_VERBS), rng.choice(_OBJECTS)
        q = rng.choice(_QUERY_FORMS).format(subj=subj, subj_l=subj.lower(), verb=verb, obj=obj)
        out.append((q, obj))
    return out


@contextmanager
def serving(data_dir: Path, port: int) -> Iterator[str]:
    """`memsvc serve` on `data_dir` in a subprocess, waited for until `/health` answers 200; its
    URL. Stopped on exit."""
    import httpx

    server = subprocess.Popen([sys.executable, "-m", "memsvc.cli", "serve", "--data-dir", str(data_dir),
                               "--port", str(port), "--log-level", "warning"])
    try:
        url = f"http://127.0.0.1:{port}"
        for _ in range(600):
            try:
                if httpx.get(url + "/health", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            time.sleep(0.5)
        yield url
    finally:
        server.terminate()
        server.wait(timeout=180)  # it stops between the indexer's batches: one can take a minute


def percentile(sorted_samples: list[float], p: float) -> float | None:
    """Nearest-rank percentile of already sorted samples."""
    if not sorted_samples:
        return None
    rank = max(1, math.ceil(p / 100.0 * len(sorted_samples)))
    return sorted_samples[min(rank, len(sorted_samples)) - 1]


# -- measuring ---------------------------------------------------------------------------------


@dataclass
class PhaseResult:
    name: str
    requests: int
    ok: int
    wall_s: float
    latencies_ms: list[float] = field(default_factory=list, repr=False)
    failures: Counter = field(default_factory=Counter)
    notes: dict[str, Any] = field(default_factory=dict)
    by_task: list[float | None] = field(default_factory=list, repr=False)  # latency of task i if it succeeded

    @property
    def throughput(self) -> float:
        return self.ok / self.wall_s if self.wall_s > 0 else 0.0

    def summary(self) -> dict[str, Any]:
        s = sorted(self.latencies_ms)
        return {
            "requests": self.requests,
            "ok": self.ok,
            "errors": self.requests - self.ok,
            "failures": dict(self.failures),
            "wall_s": round(self.wall_s, 3),
            "throughput_per_s": round(self.throughput, 1),
            "p50_ms": _r(percentile(s, 50)),
            "p95_ms": _r(percentile(s, 95)),
            "p99_ms": _r(percentile(s, 99)),
            "mean_ms": _r(sum(s) / len(s)) if s else None,
            "max_ms": _r(s[-1]) if s else None,
            **self.notes,
        }


def _r(x: float | None, nd: int = 2) -> float | None:
    return None if x is None else round(x, nd)


Request = Callable[[Any, int], tuple[int, Any]]  # (client, task index) -> (status, parsed body or None)


def _run_parallel(name: str, base_url: str, token: str, total: int, concurrency: int, request: Request,
                  check: Callable[[int, Any], str | None] | None = None, progress: str = "quiet") -> PhaseResult:
    """Run `request` for task indexes 0..total-1 on `concurrency` threads, each with its own client.

    `check(i, body)` may flag a 2xx answer as wrong (returns a reason). `progress`: "always" prints
    a line every 10 %; "slow" only once the phase has run for more than 5 s.
    """
    import httpx

    lock = threading.Lock()
    next_task = [0]
    done = [0]
    latencies: list[float] = []
    by_task: list[float | None] = [None] * total
    failures: Counter = Counter()
    oks = [0]
    started = time.perf_counter()
    step = max(1, total // 10)

    def report_progress() -> None:
        n = done[0]
        if n % step == 0 or n == total:
            elapsed = time.perf_counter() - started
            if progress == "always" or (progress == "slow" and elapsed > 5.0):
                rate = n / elapsed if elapsed > 0 else 0.0
                _say(f"  {name}: {n}/{total} ({100 * n // total}%) in {elapsed:.1f}s, {rate:.{0 if rate >= 10 else 2}f}/s")

    def worker() -> None:
        headers = {"Authorization": f"Bearer {token}"}
        limits = httpx.Limits(max_connections=1, max_keepalive_connections=1)
        with httpx.Client(base_url=base_url, headers=headers, timeout=REQUEST_TIMEOUT_S, limits=limits) as client:
            while True:
                with lock:
                    i = next_task[0]
                    if i >= total:
                        return
                    next_task[0] += 1
                t0 = time.perf_counter()
                reason: str | None = None
                try:
                    status, body = request(client, i)
                    elapsed_ms = (time.perf_counter() - t0) * 1000.0
                    if not 200 <= status < 300:
                        reason = f"HTTP {status}"
                    elif check is not None:
                        reason = check(i, body)
                except Exception as exc:  # a connection error or timeout counts as a failure
                    elapsed_ms = (time.perf_counter() - t0) * 1000.0
                    reason = type(exc).__name__
                with lock:
                    if reason is None:
                        oks[0] += 1
                        latencies.append(elapsed_ms)
                        by_task[i] = elapsed_ms
                    else:
                        failures[reason] += 1
                    done[0] += 1
                    report_progress()

    threads = [threading.Thread(target=worker, name=f"bench-{name}-{k}", daemon=True)
               for k in range(max(1, min(concurrency, total)))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    wall = time.perf_counter() - started
    return PhaseResult(name, total, oks[0], wall, latencies, failures, by_task=by_task,
                       notes={"loadavg_1m_at_end": _loadavg()})


def _loadavg() -> float | None:
    try:
        return round(os.getloadavg()[0], 2)
    except (OSError, AttributeError):
        return None


def _say(msg: str) -> None:
    print(msg, flush=True)


# -- the server --------------------------------------------------------------------------------


class ServerFailed(RuntimeError):
    pass


class Server:
    def __init__(self, data_dir: Path, port: int, serve_args: list[str] | None = None, *,
                 health_timeout_s: float = HEALTH_TIMEOUT_S) -> None:
        self.data_dir = data_dir
        self.health_timeout_s = health_timeout_s  # a big data dir takes a while: the vector index is read at start
        self.port = port
        self.serve_args = serve_args or []  # more `memsvc serve` options
        self.base_url = f"http://{HOST}:{port}"
        self.log_path = data_dir / "server.log"
        self.proc: subprocess.Popen | None = None
        self._log = None

    def start(self) -> float:
        import httpx

        _check_port_free(self.port)
        self.data_dir.mkdir(parents=True, exist_ok=True)
        self._log = open(self.log_path, "ab")
        cmd = [sys.executable, "-m", "memsvc.cli", "serve", "--host", HOST, "--port", str(self.port),
               "--data-dir", str(self.data_dir), "--log-level", "warning", *self.serve_args]
        started = time.perf_counter()
        self.proc = subprocess.Popen(cmd, stdout=self._log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        deadline = started + self.health_timeout_s
        last = "no answer"
        with httpx.Client(timeout=10.0) as client:
            while time.perf_counter() < deadline:
                if self.proc.poll() is not None:
                    raise ServerFailed(f"the server exited with code {self.proc.returncode}")
                try:
                    r = client.get(f"{self.base_url}/health")
                    if r.status_code == 200 and r.json().get("status") == "healthy":
                        return time.perf_counter() - started
                    last = f"HTTP {r.status_code}: {r.text[:200]}"
                except httpx.TransportError as exc:
                    last = type(exc).__name__
                time.sleep(0.25)
        raise ServerFailed(f"/health not healthy after {self.health_timeout_s:.0f}s (last: {last})")

    def stop(self) -> None:
        proc = self.proc
        if proc is not None and proc.poll() is None:
            proc.send_signal(signal.SIGINT)  # uvicorn shuts down gracefully on SIGINT
            try:
                proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                proc.terminate()
                try:
                    proc.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait(timeout=10)
        if self._log is not None:
            self._log.close()
            self._log = None

    def log_tail(self, lines: int = 40) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except OSError as exc:
            return f"(no server log: {exc})"


def _check_port_free(port: int) -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        try:
            s.bind((HOST, port))
        except OSError as exc:
            raise ServerFailed(f"port {port} on {HOST} is in use ({exc}); pass --port") from None


# -- one size ----------------------------------------------------------------------------------


def _bench_size(n: int, data_dir: Path, args: Any, query_embed: dict[str, Any] | None) -> dict[str, Any]:
    import httpx

    from memsvc.adapters.local.issuer import LocalIssuer

    concurrency = max(1, int(args.concurrency))
    queries = max(1, int(args.queries))
    server = Server(data_dir, int(args.port))
    result: dict[str, Any] = {"items": n, "data_dir": str(data_dir), "phases": {}}
    _say(f"\n=== {n} items, data in {data_dir} ===")
    try:
        try:
            startup = server.start()
        except ServerFailed as exc:
            _say(f"server start failed: {exc}\n--- last lines of {server.log_path} ---\n{server.log_tail()}")
            result["error"] = str(exc)
            return result
        _say(f"server up on {server.base_url} in {startup:.1f}s")
        result["server_start_s"] = round(startup, 2)
        issuer = LocalIssuer(data_dir / "keys")  # the server created the keys on its first start
        user_token = issuer.mint(sub=USER, tenant=TENANT, ttl_seconds=TOKEN_TTL_S)
        admin_token = issuer.mint(sub="bench-admin", tenant=TENANT, roles=["admin"], ttl_seconds=TOKEN_TTL_S)
        phases = result["phases"]

        # 1. put
        def put(client: httpx.Client, i: int) -> tuple[int, Any]:
            r = client.put("/v1/memories", json={"namespace": _namespace(i), "key": f"k{i}", "value": make_value(i)})
            return r.status_code, None

        _say(f"put: {n} items, {concurrency} threads, async indexing")
        put_started = time.perf_counter()
        put_res = _run_parallel("put", server.base_url, user_token, n, concurrency, put, progress="always")
        phases["put"] = put_res.summary()
        _print_phase(put_res)

        # 2. indexing backlog
        phases["index"] = _drain(server.base_url, admin_token, n, put_started, put_res.wall_s)

        # 3. get
        rng = random.Random(1000 + n)
        get_keys = [rng.randrange(n) for _ in range(queries)]

        def get(client: httpx.Client, t: int) -> tuple[int, Any]:
            i = get_keys[t]
            r = client.get("/v1/memories", params=[*(("ns", s) for s in _namespace(i)), ("key", f"k{i}")])
            return r.status_code, (r.json() if r.status_code == 200 else None)

        def check_get(t: int, body: Any) -> str | None:
            return None if body and body.get("value", {}).get("n") == get_keys[t] else "wrong item"

        get_res = _run_parallel("get", server.base_url, user_token, queries, concurrency, get, check_get, "slow")
        phases["get"] = get_res.summary()
        _print_phase(get_res)

        # 4. filter search (no query): half lang equality, half an `n` range
        filters: list[dict[str, Any]] = []
        for t in range(queries):
            if t % 2 == 0:
                filters.append({"lang": rng.choice(LANGS)})
            else:
                x = rng.randrange(max(1, n - N_RANGE_WIDTH))
                filters.append({"n": {"gte": x, "lt": x + N_RANGE_WIDTH}})

        def fsearch(client: httpx.Client, t: int) -> tuple[int, Any]:
            r = client.post("/v1/memories/search",
                            json={"namespace_prefix": ["user", USER], "filter": filters[t], "limit": 10})
            return r.status_code, (r.json() if r.status_code == 200 else None)

        def check_filter(t: int, body: Any) -> str | None:
            items = body.get("items", []) if body else []
            if not items:
                return "no results"
            f = filters[t]
            for it in items:
                v = it.get("value", {})
                if "lang" in f and v.get("lang") != f["lang"]:
                    return "filter not applied"
                if "n" in f and not f["n"]["gte"] <= v.get("n", -1) < f["n"]["lt"]:
                    return "filter not applied"
            return None

        f_res = _run_parallel("filter search", server.base_url, user_token, queries, concurrency, fsearch,
                              check_filter, "slow")
        f_res.notes["by_filter"] = {
            kind: _lat_summary([x for t, x in enumerate(f_res.by_task) if x is not None and t % 2 == parity])
            for kind, parity in (("lang", 0), ("n range", 1))
        }
        phases["filter_search"] = f_res.summary()
        _print_phase(f_res)
        for kind, s in f_res.notes["by_filter"].items():
            _say(f"    {kind:<10} p50 {_fmt(s['p50_ms'])} ms  p95 {_fmt(s['p95_ms'])} ms  p99 {_fmt(s['p99_ms'])} ms")

        # 5. search by a query, in each mode, from one sequential client (the latency a single
        # agent sees); "top hit on topic" is a relevance sanity check
        sem = _semantic_queries(queries, rng)
        for mode in SEARCH_MODES:
            relevant = [0]
            rel_lock = threading.Lock()

            def qsearch(client: httpx.Client, t: int, mode: str = mode) -> tuple[int, Any]:
                r = client.post("/v1/memories/search", json={"namespace_prefix": ["user", USER], "query": sem[t][0],
                                                             "limit": 10, "mode": mode})
                return r.status_code, (r.json() if r.status_code == 200 else None)

            def check_sem(t: int, body: Any, relevant: list[int] = relevant, rel_lock=rel_lock) -> str | None:
                items = body.get("items", []) if body else []
                if items and sem[t][1] in items[0].get("value", {}).get("text", ""):
                    with rel_lock:
                        relevant[0] += 1
                return None

            s_res = _run_parallel(f"{mode} search", server.base_url, user_token, queries, 1, qsearch, check_sem,
                                  "slow")
            s_res.notes["top1_on_topic"] = round(relevant[0] / s_res.ok, 3) if s_res.ok else None
            if query_embed and mode != "keyword":
                s_res.notes["query_embed_in_process_p50_ms"] = query_embed["p50_ms"]
            phases[f"{mode}_search"] = s_res.summary()
            _print_phase(s_res)
            _say(f"    top hit mentions the query's topic: {_fmt(s_res.notes['top1_on_topic'], 3)} of answers")

        # 6. the event timeline: one walk over all of it, then pages read from random positions
        phases["events_walk"], cursors = _walk_timeline(server.base_url, user_token, n)
        w = phases["events_walk"]
        _say(f"  events walk: {w['events']} events in {w['pages']} pages of 200, {w['wall_s']}s = "
             f"{_fmt(w['events_per_s'])} events/s")

        def epage(client: httpx.Client, t: int) -> tuple[int, Any]:
            params = [("ns", "user"), ("ns", USER), ("limit", "200")]
            if cursors:  # the first page has none
                params.append(("after_cursor", cursors[t % len(cursors)]))
            r = client.get("/v1/memories/events", params=params)
            return r.status_code, (r.json() if r.status_code == 200 else None)

        def check_page(t: int, body: Any) -> str | None:
            got = body.get("events", []) if body else []
            return None if len(got) == 200 or (got and body.get("after_cursor") is None) else "short page"

        e_res = _run_parallel("events page", server.base_url, user_token, queries, concurrency, epage, check_page,
                              "slow")
        phases["events_page"] = e_res.summary()
        _print_phase(e_res)

        # final index stats (the server's totals for this tenant)
        try:
            with httpx.Client(base_url=server.base_url, timeout=30.0,
                              headers={"Authorization": f"Bearer {admin_token}"}) as c:
                r = c.get("/admin/v1/memories/index/status")
                if r.status_code == 200:
                    result["index_status_final"] = r.json()
        except httpx.HTTPError:
            pass
        result["db_bytes"] = {p.name: p.stat().st_size for p in data_dir.glob("*.db*") if p.is_file()}
    finally:
        server.stop()
    _print_size_table(result)
    return result


def _walk_timeline(base_url: str, token: str, n: int, timeout_s: float = 600.0) -> tuple[dict[str, Any], list[str]]:
    """Follow after_cursor over the bench user's timeline until all `n` adds are seen (the timeline
    worker may still be catching up). Returns the walk's numbers and a cursor per page."""
    import httpx

    seen, pages, cursors, cursor = 0, 0, [], None
    started = time.perf_counter()
    with httpx.Client(base_url=base_url, timeout=60.0, headers={"Authorization": f"Bearer {token}"}) as c:
        while seen < n and time.perf_counter() - started < timeout_s:
            params = [("ns", "user"), ("ns", USER), ("limit", "200")] + ([("after_cursor", cursor)] if cursor else [])
            r = c.get("/v1/memories/events", params=params)
            r.raise_for_status()
            body = r.json()
            pages += 1
            seen += len(body["events"])
            if body["events"] and body["after_cursor"] is not None:
                cursors.append(body["after_cursor"])
            cursor = body["resume_cursor"] or cursor
            if body["after_cursor"] is None and seen < n:
                time.sleep(0.2)  # at the present: the worker is still recording
    wall = time.perf_counter() - started
    return {"events": seen, "pages": pages, "wall_s": round(wall, 2),
            "events_per_s": round(seen / wall, 1) if wall else None}, cursors


def _lat_summary(samples: list[float]) -> dict[str, Any]:
    s = sorted(samples)
    return {"count": len(s), "p50_ms": _r(percentile(s, 50)), "p95_ms": _r(percentile(s, 95)),
            "p99_ms": _r(percentile(s, 99))}


def _drain(base_url: str, admin_token: str, n: int, put_started: float, put_wall: float) -> dict[str, Any]:
    """Poll the index status until nothing is pending; bounded by a generous deadline."""
    import httpx

    deadline_s = max(600.0, n * 0.1)  # ~10x the expected time at ~200 texts/s
    started = time.perf_counter()
    next_mark = 0.9
    status: dict[str, Any] = {}
    errors: Counter = Counter()
    first_pending: int | None = None
    _say("indexing: waiting for the vector index to catch up")
    with httpx.Client(base_url=base_url, timeout=60.0, headers={"Authorization": f"Bearer {admin_token}"}) as c:
        while True:
            try:
                r = c.get("/admin/v1/memories/index/status")
                if r.status_code == 200:
                    status = r.json()
                else:
                    errors[f"HTTP {r.status_code}"] += 1
            except httpx.HTTPError as exc:
                errors[type(exc).__name__] += 1
            pending = status.get("pending")
            elapsed = time.perf_counter() - started
            if pending is not None:
                if first_pending is None:
                    first_pending = pending
                    _say(f"  indexing: {pending} pending when the puts finished")
                if pending == 0:
                    break
                if first_pending and pending <= first_pending * next_mark:
                    done = 1 - pending / first_pending
                    _say(f"  indexing: {pending} pending ({100 * done:.0f}% of the backlog done) after {elapsed:.1f}s")
                    while first_pending and pending <= first_pending * next_mark and next_mark > 0:
                        next_mark -= 0.1
            if elapsed > deadline_s:
                _say(f"  indexing: gave up after {elapsed:.0f}s with {pending} pending")
                break
            time.sleep(POLL_INTERVAL_S)
    drained_at = time.perf_counter()
    stats = status.get("stats") or {}
    embed_s = float(stats.get("embed_seconds") or 0.0)
    write_s = float(stats.get("write_seconds") or 0.0)
    texts = int(stats.get("embedded_texts") or 0)
    indexed = int(stats.get("indexed_items") or 0)
    out = {
        "pending_at_end": status.get("pending"),
        "pending_after_puts": first_pending,
        "drain_after_puts_s": round(drained_at - started, 2),
        "put_to_indexed_s": round(drained_at - put_started, 2),
        "items_indexed_per_s": round(n / (drained_at - put_started), 1) if drained_at > put_started else None,
        "embedded_texts": texts,
        "indexed_items": indexed,
        "texts_per_item": round(texts / indexed, 2) if indexed else None,
        "embed_seconds": round(embed_s, 2),
        "embed_texts_per_s": round(texts / embed_s, 1) if embed_s else None,
        "write_seconds": round(write_s, 2),
        "write_items_per_s": round(indexed / write_s, 1) if write_s else None,
        "status_errors": dict(errors),
        "loadavg_1m_at_end": _loadavg(),
        "put_wall_s": round(put_wall, 2),
    }
    _say(f"  indexing: done {out['drain_after_puts_s']}s after the last put "
         f"({out['put_to_indexed_s']}s from the first put, {out['items_indexed_per_s']} items/s end to end)")
    _say(f"  embedding: {texts} texts ({out['texts_per_item']}/item) in {out['embed_seconds']}s "
         f"= {out['embed_texts_per_s']} texts/s;  index writes: {indexed} items in {out['write_seconds']}s "
         f"= {out['write_items_per_s']} items/s")
    if errors:
        _say(f"  indexing: status poll failures: {dict(errors)}")
    return out


# -- output ------------------------------------------------------------------------------------

_OPS = (("put", "put"), ("get", "get"), ("filter_search", "filter search"),
        *((f"{mode}_search", f"{mode} search (sequential)") for mode in ("hybrid", "semantic", "keyword")),
        ("events_page", "events page (200)"))


def _fmt(x: Any, nd: int = 1) -> str:
    if x is None:
        return "-"
    if isinstance(x, float):
        return f"{x:,.{nd}f}"
    return f"{x:,}" if isinstance(x, int) else str(x)


def _print_phase(p: PhaseResult) -> None:
    s = p.summary()
    _say(f"  {p.name}: {s['ok']}/{s['requests']} ok in {s['wall_s']}s = {_fmt(s['throughput_per_s'])}/s; "
         f"p50 {_fmt(s['p50_ms'])} ms, p95 {_fmt(s['p95_ms'])} ms, p99 {_fmt(s['p99_ms'])} ms "
         f"(load avg {_fmt(s.get('loadavg_1m_at_end'), 2)})")
    if p.failures:
        _say(f"  {p.name}: {s['errors']} FAILED: {dict(p.failures)}")


def _print_size_table(result: dict[str, Any]) -> None:
    phases = result.get("phases", {})
    n = result["items"]
    _say(f"\n--- results for {n:,} items ---")
    _say(f"{'operation':<18}{'requests':>9}{'errors':>8}{'ops/s':>10}{'p50 ms':>10}{'p95 ms':>10}{'p99 ms':>10}")
    for key, label in _OPS:
        s = phases.get(key)
        if not s:
            continue
        _say(f"{label:<18}{s['requests']:>9}{s['errors']:>8}{_fmt(s['throughput_per_s']):>10}"
             f"{_fmt(s['p50_ms']):>10}{_fmt(s['p95_ms']):>10}{_fmt(s['p99_ms']):>10}")
    ix = phases.get("index")
    if ix:
        _say(f"indexing: {_fmt(ix['items_indexed_per_s'])} items/s end to end; drained "
             f"{ix['drain_after_puts_s']}s after the puts; embedding {_fmt(ix['embed_texts_per_s'])} texts/s "
             f"({ix['embedded_texts']} texts, {ix['embed_seconds']}s); index writes "
             f"{_fmt(ix['write_items_per_s'])} items/s ({ix['write_seconds']}s)")
    if result.get("error"):
        _say(f"ERROR: {result['error']}")


def _markdown(results: list[dict[str, Any]], query_embed: dict[str, Any] | None) -> str:
    lines = [
        "| Operation | Items | Throughput (ops/s) | p50 (ms) | p95 (ms) | p99 (ms) | Errors |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    for key, label in _OPS:
        for res in results:
            s = res.get("phases", {}).get(key)
            if not s:
                continue
            lines.append(f"| {label} | {res['items']:,} | {_fmt(s['throughput_per_s'])} | {_fmt(s['p50_ms'])} | "
                         f"{_fmt(s['p95_ms'])} | {_fmt(s['p99_ms'])} | {s['errors']} |")
    for res in results:
        ix = res.get("phases", {}).get("index")
        if ix:
            lines.append(f"| indexing (async, put start -> drained) | {res['items']:,} | "
                         f"{_fmt(ix['items_indexed_per_s'])} items/s | - | - | - | "
                         f"{'0' if ix['pending_at_end'] == 0 else str(ix['pending_at_end']) + ' pending'} |")
    lines += ["", "| Indexing | Items | Texts embedded | Embedding (texts/s) | Embedding (s) | "
                  "Index writes (items/s) | Index writes (s) | Drain after last put (s) |",
              "|---|---:|---:|---:|---:|---:|---:|---:|"]
    for res in results:
        ix = res.get("phases", {}).get("index")
        if ix:
            lines.append(f"| background | {res['items']:,} | {ix['embedded_texts']:,} | {_fmt(ix['embed_texts_per_s'])} | "
                         f"{_fmt(ix['embed_seconds'])} | {_fmt(ix['write_items_per_s'])} | {_fmt(ix['write_seconds'])} | "
                         f"{_fmt(ix['drain_after_puts_s'])} |")
    if query_embed:
        lines += ["", f"Query embedding alone (in-process MiniLM, 1 text, idle machine): "
                      f"p50 {_fmt(query_embed['p50_ms'], 2)} ms, p95 {_fmt(query_embed['p95_ms'], 2)} ms, "
                      f"p99 {_fmt(query_embed['p99_ms'], 2)} ms."]
    return "\n".join(lines)


def _measure_query_embedding(samples: int) -> dict[str, Any] | None:
    """The cost of embedding one query text with the server's embedder, measured in this process."""
    try:
        from memsvc.adapters.local.embedder import MiniLMEmbedder

        emb = MiniLMEmbedder()
    except Exception as exc:  # the bench still runs without it
        _say(f"query embedding: not measured ({type(exc).__name__}: {exc})")
        return None
    rng = random.Random(7)
    texts = [q for q, _ in _semantic_queries(samples + 5, rng)]
    for t in texts[:5]:
        emb.embed([t])  # warm-up
    lat = []
    for t in texts[5:]:
        t0 = time.perf_counter()
        emb.embed([t])
        lat.append((time.perf_counter() - t0) * 1000.0)
    s = _lat_summary(lat)
    _say(f"query embedding (in-process, 1 text, {len(lat)} samples): p50 {s['p50_ms']} ms, "
         f"p95 {s['p95_ms']} ms, p99 {s['p99_ms']} ms")
    return s


# -- entry point -------------------------------------------------------------------------------


def _code_version() -> dict[str, Any]:
    """The git commit of the code being measured, and whether the working tree differs (read-only git)."""
    repo = Path(__file__).resolve().parent.parent
    try:
        head = subprocess.run(["git", "-C", str(repo), "rev-parse", "--short", "HEAD"], capture_output=True,
                              text=True, timeout=10)
        status = subprocess.run(["git", "-C", str(repo), "status", "--porcelain", "--untracked-files=no", "--",
                                 "memsvc"], capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.SubprocessError):
        return {"commit": None}
    if head.returncode != 0:
        return {"commit": None}
    changed = [line[3:] for line in status.stdout.splitlines() if line.strip()]
    return {"commit": head.stdout.strip(), "modified_under_memsvc": changed}


def run_bench(args: Any) -> int:
    sizes = [int(n) for n in (getattr(args, "items", None) or [10_000, 100_000])]
    if any(n < 1 for n in sizes):
        print("bench: --items must be positive", file=sys.stderr)
        return 2
    if args.data_dir is None:
        root = Path(tempfile.mkdtemp(prefix="memsvc-bench-"))
    else:
        root = Path(args.data_dir).expanduser().resolve()
        root.mkdir(parents=True, exist_ok=True)
    dirs = [root] if len(sizes) == 1 else [root / f"n-{n}" for n in sizes]
    for d in dirs:
        if (d / "memsvc.db").exists() or (d / "vectors.db").exists():
            print(f"bench: {d} already holds memsvc data; the bench needs a fresh directory",
                  file=sys.stderr)
            return 2

    machine = {"cpus": os.cpu_count(), "platform": platform.platform(), "python": platform.python_version(),
               "processor": platform.processor() or platform.machine()}
    _say(f"bench: sizes {sizes}, concurrency {args.concurrency}, {args.queries} queries per phase, "
         f"port {args.port}, results under {root}")
    _say(f"machine: {machine['cpus']} CPUs, {machine['platform']}, Python {machine['python']}")
    code = _code_version()
    _say(f"code: commit {code.get('commit')}" + (f", modified: {', '.join(code['modified_under_memsvc'])}"
                                                 if code.get("modified_under_memsvc") else ""))
    _say("note: each size's server imports the code as it is when that server starts")
    load = _loadavg()
    machine["loadavg_1m_at_start"] = load
    if load is not None and load > 0.5 * (os.cpu_count() or 1):
        _say(f"WARNING: 1-minute load average is {load} on {os.cpu_count()} CPUs before the bench starts; "
             "other work on this machine will distort the numbers (each phase records its load average)")
    query_embed = _measure_query_embedding(min(200, max(20, int(args.queries))))

    results = []
    bench_started = time.perf_counter()
    try:
        for n, d in zip(sizes, dirs):
            results.append(_bench_size(n, d, args, query_embed))
    except KeyboardInterrupt:
        _say("interrupted; writing what was measured so far")

    md = _markdown(results, query_embed)
    _say("\n=== summary (markdown) ===\n")
    _say(md)
    out = {
        "command": "python -m benchmarks.bench " + " ".join(sys.argv[1:]),
        "when": datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "machine": machine,
        "code": code,
        "settings": {"items": sizes, "concurrency": args.concurrency, "queries": args.queries, "port": args.port,
                     "tenant": TENANT, "topics": TOPICS, "n_range_width": N_RANGE_WIDTH},
        "query_embedding_in_process": query_embed,
        "results": results,
        "total_wall_s": round(time.perf_counter() - bench_started, 1),
        "markdown": md,
    }
    path = root / "bench-results.json"
    path.write_text(json.dumps(out, indent=2))
    _say(f"\nresults written to {path}")
    failed = any(r.get("error") for r in results) or len(results) < len(sizes)
    errors = sum(p.get("errors", 0) for r in results for p in r.get("phases", {}).values() if isinstance(p, dict))
    if errors:
        _say(f"note: {errors} request(s) failed; see the 'errors' column")
    return 1 if failed else 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.bench",
                                     description="measure memsvc serve's throughput and latency over HTTP")
    parser.add_argument("--items", type=int, nargs="+", default=[10_000, 100_000])
    parser.add_argument("--data-dir", type=Path, default=None, help="default: a fresh temporary dir")
    parser.add_argument("--port", type=int, default=8765)
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument("--queries", type=int, default=300)
    return run_bench(parser.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
