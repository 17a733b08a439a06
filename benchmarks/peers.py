"""`python -m benchmarks.peers --items 10000`: memsvc side by side with LangGraph's own stores.

Three stores, one workload, one embedder:
- memsvc: a throwaway `memsvc serve`, driven over HTTP through `memsvc_client.MemsvcStore`;
- LangGraph's `InMemoryStore`, in this process;
- LangGraph's `SqliteStore` with sqlite-vec, in this process, on a file in the temp dir. It needs
  a Python whose `sqlite3` can load extensions (`enable_load_extension`): without one the peer
  is skipped with a message saying so (see benchmarks/README.md for which Pythons can).

All three embed with memsvc's local model (all-MiniLM-L6-v2 int8 on onnxruntime) and index the
same field (`text`). Loading embeds each distinct text once (`benchmarks.bulk_load.KnownTextsEmbedder`,
shared by the three loads; the workload has at most 8,192). Every search phase asks its own
queries (the same for every store), so no embedding cache answers one: each query is embedded,
by the server for memsvc and by the model in this process for LangGraph's stores. Items: `n`
values from `benchmarks.bench.make_value`, plus a `kind`, in namespaces of 200 items each
(`("user", "bench", "topic-<t>")`).

Phases, each sequential and with `--clients` threads sharing one store (memsvc: one
`MemsvcStore`, whose connection pool holds a connection per thread):
- put: new items, read-your-writes (memsvc: `sync_index`); memsvc also with asynchronous indexing;
- get: a random item by key;
- filter (value field): `{"lang": ...}` in one namespace (200 items in scope), equality;
- filter (policy attribute): `{"kind": ...}` in one namespace. memsvc's tenant gets an attribute
  extraction policy that makes `kind` a policy attribute; for LangGraph it is a value field;
- semantic: a query over every item, top 10 (memsvc: `mode: semantic`);
- hybrid: the same queries, memsvc only (LangGraph's stores have no keyword ranking).

Loading is not timed as a put rate. LangGraph's stores take the items through `batch`. memsvc's
data directory is filled in process before `memsvc serve` starts on it (`benchmarks.bulk_load`:
the server's own services and feed consumers, without HTTP), and the server's policy bundle
already holds the attribute policy. Every phase is bounded by `--ops` operations and
`--phase-seconds`.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import socket
import sqlite3
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from benchmarks.bench import LANGS, Server, ServerFailed, _semantic_queries, make_value, percentile
from benchmarks.bulk_load import KnownTextsEmbedder, Loaded, bulk_load

TENANT = "bench"
USER = "bench"
SCOPE = 200  # items per namespace: the filter searches' scope
KINDS = ("preference", "fact", "episode", "task")
INDEX_FIELDS = ["text"]
LOAD_BATCH = 256
TOKEN_TTL_S = 3 * 24 * 3600

ATTRIBUTES_REGO = """package memories.attributes

default attributes := {}

attributes := {"namespace": input.namespace[0], "sub": input.namespace[1], "kind": input.value.kind} if {
\tcount(input.namespace) >= 2
\tis_string(input.value.kind)
} else := {"namespace": input.namespace[0], "sub": input.namespace[1]} if {
\tcount(input.namespace) >= 2
} else := {"namespace": input.namespace[0]} if {
\tcount(input.namespace) == 1
}
"""


def item_value(i: int) -> dict[str, Any]:
    # Not `i % 4`: with namespaces chosen by `i % namespaces`, a namespace would hold one kind only.
    return {**make_value(i), "kind": random.Random(i * 31 + 5).choice(KINDS)}


def namespace(i: int, n: int) -> tuple[str, ...]:
    return ("user", USER, f"topic-{i % max(1, n // SCOPE)}")


def say(msg: str) -> None:
    print(msg, flush=True)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def loadavg() -> float:
    return round(os.getloadavg()[0], 2)


# -- which Pythons can run SqliteStore ----------------------------------------------------------


def sqlite_extensions_problem() -> str | None:
    """Why this Python cannot run SqliteStore with sqlite-vec, or None if it can."""
    conn = sqlite3.connect(":memory:")
    try:
        if not hasattr(conn, "enable_load_extension"):
            return (f"this Python ({sys.executable}, {sys.version.split()[0]}) has a sqlite3 built without "
                    "loadable extensions (pyenv's default build, macOS's system Python), so sqlite-vec cannot "
                    "load. Run the benchmark with one that can: python.org's builds, Debian's/Ubuntu's python3 "
                    "(`/usr/bin/python3`), conda's, or pyenv with PYTHON_CONFIGURE_OPTS="
                    "--enable-loadable-sqlite-extensions")
        try:
            import sqlite_vec
            from langgraph.store.sqlite import SqliteStore  # noqa: F401
        except ImportError as exc:
            return f"{exc.name} is not installed (pip install -c constraints.txt -e '.[bench]' in a separate venv)"
        conn.enable_load_extension(True)
        try:
            sqlite_vec.load(conn)
        except sqlite3.Error as exc:
            return f"sqlite-vec does not load into this Python's SQLite {sqlite3.sqlite_version}: {exc}"
        return None
    finally:
        conn.close()


# -- measuring ---------------------------------------------------------------------------------


def measure(op: Callable[[int], Any], ops: int, clients: int, seconds: float) -> dict[str, Any]:
    """Run `op(0..ops-1)` on `clients` threads until done or `seconds` have passed; latencies in ms."""
    lock = threading.Lock()
    next_task = [0]
    latencies: list[float] = []
    errors: list[str] = []
    started = time.perf_counter()
    deadline = started + seconds

    def worker() -> None:
        while True:
            with lock:
                i = next_task[0]
                if i >= ops or time.perf_counter() > deadline:
                    return
                next_task[0] += 1
            t0 = time.perf_counter()
            try:
                op(i)
            except Exception as exc:  # counted, and the first few named in the results
                with lock:
                    errors.append(f"{type(exc).__name__}: {exc}"[:200])
                continue
            elapsed = (time.perf_counter() - t0) * 1000.0
            with lock:
                latencies.append(elapsed)

    threads = [threading.Thread(target=worker, daemon=True) for _ in range(clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    wall = time.perf_counter() - started
    s = sorted(latencies)
    return {"ops": len(s), "errors": len(errors), "first_errors": errors[:3], "per_s": round(len(s) / wall, 1),
            "wall_s": round(wall, 3),
            "p50_ms": _r(percentile(s, 50)), "p95_ms": _r(percentile(s, 95)), "p99_ms": _r(percentile(s, 99)),
            "load": loadavg()}


def _r(x: float | None) -> float | None:
    return None if x is None else round(x, 3)


class Workload:
    """What every store is asked, derived from the item count and a seed only."""

    def __init__(self, n: int, ops: int) -> None:
        rng = random.Random(20_000 + n)
        self.n = n
        self.namespaces = max(1, n // SCOPE)
        self.get_ids = [rng.randrange(n) for _ in range(ops)]
        self.filter_scopes = [rng.randrange(self.namespaces) for _ in range(ops)]
        self.langs = [rng.choice(LANGS) for _ in range(ops)]
        self.kinds = [rng.choice(KINDS) for _ in range(ops)]
        self.ops = ops
        # Each search phase asks queries no other phase asked (while there are enough: about
        # 1,200 distinct ones), so the 8-client phase never finds the sequential one's in the
        # server's embedding cache. Every store asks the same ones.
        self._queries = list(dict.fromkeys(q for q, _ in _semantic_queries(40 * ops, rng)))
        self._query_slots: dict[str, int] = {}

    def queries_for(self, use: str) -> list[str]:
        """`ops` queries for one use (a phase and its clients), the same use the same ones."""
        slot = self._query_slots.setdefault(use, len(self._query_slots))
        return [self._queries[(slot * self.ops + i) % len(self._queries)] for i in range(self.ops)]

    def new_item(self, run: str, i: int) -> tuple[tuple[str, ...], str, dict[str, Any]]:
        """A put's item: a fresh key and a text no load wrote, so it must be embedded."""
        value = item_value(self.n + i)
        value["text"] = f"{value['text'][:-1]} ({run} #{i})."
        return ("user", USER, f"put-{run}"), f"{run}-{i}", value


def run_phases(name: str, store: Any, work: Workload, args: Any, *, async_store: Any = None,
               hybrid_store: Any = None, semantic_store: Any = None,
               settle: Callable[[], None] = lambda: None) -> dict[str, Any]:
    """Each phase sequentially, then with `args.clients` clients. `settle` runs after every put
    phase: memsvc's puts leave indexing work behind (all of it, with asynchronous indexing), which
    the next phase's reads would otherwise share the cores with."""
    from langgraph.store.base import BaseStore

    semantic_store = semantic_store or store
    out: dict[str, Any] = {}
    phases: list[tuple[str, BaseStore, Callable[[BaseStore, int, str, list[str]], Any]]] = [
        ("put (read-your-writes)", store, lambda s, i, run, queries: s.put(*work.new_item(run, i))),
    ]
    if async_store is not None:
        phases.append(("put (async indexing)", async_store,
                       lambda s, i, run, queries: s.put(*work.new_item(run, i))))
    phases += [
        ("get", store, lambda s, i, run, queries: _expect(s.get(namespace(work.get_ids[i], work.n),
                                                                f"k{work.get_ids[i]}"))),
        ("filter (value field)", store, lambda s, i, run, queries: _expect(s.search(
            ("user", USER, f"topic-{work.filter_scopes[i]}"), filter={"lang": work.langs[i]}, limit=10))),
        ("filter (policy attribute)", store, lambda s, i, run, queries: _expect(s.search(
            ("user", USER, f"topic-{work.filter_scopes[i]}"), filter={"kind": work.kinds[i]}, limit=10))),
        ("semantic", semantic_store, lambda s, i, run, queries: _expect(s.search(("user", USER), query=queries[i],
                                                                                 limit=10))),
    ]
    if hybrid_store is not None:
        phases.append(("hybrid", hybrid_store, lambda s, i, run, queries: _expect(s.search(
            ("user", USER), query=queries[i], limit=10))))
    for phase, target, op in phases:
        for clients in dict.fromkeys((1, args.clients)):
            run = f"{'async' if 'async' in phase else 'ryw'}-c{clients}"
            queries = work.queries_for(f"{phase} / {clients}")
            result = measure(lambda i: op(target, i, run, queries), args.ops, clients, args.phase_seconds)
            out[f"{phase} / {clients}"] = result
            say(f"  {name:<12} {phase:<26} clients {clients}: {result['per_s']:>8} ops/s  p50 {result['p50_ms']} "
                f"p95 {result['p95_ms']} ms  ({result['ops']} ops, {result['errors']} errors, load {result['load']})"
                + (f"  e.g. {result['first_errors'][0]}" if result["first_errors"] else ""))
            if phase.startswith("put"):
                settling = time.perf_counter()
                settle()
                if "async" in phase:  # counted until every put is searchable, as a synchronous store's are
                    result["searchable_per_s"] = round(result["ops"] / (result["wall_s"] + time.perf_counter()
                                                                        - settling), 1)
                    say(f"  {name:<12} {'put (until searchable)':<26} clients {clients}: "
                        f"{result['searchable_per_s']:>8} ops/s")
    return out


def _indexed(base_url: str, admin_token: str, deadline_s: float = 600.0) -> None:
    """Until memsvc's indexer has nothing pending (its index status), polled every 0.1 s."""
    import httpx

    started = time.perf_counter()
    with httpx.Client(base_url=base_url, headers={"Authorization": f"Bearer {admin_token}"}, timeout=60) as client:
        while client.get("/admin/v1/memories/index/status").raise_for_status().json()["pending"]:
            if time.perf_counter() - started > deadline_s:
                raise TimeoutError(f"memsvc still indexing after {deadline_s:.0f} s")
            time.sleep(0.1)


def _expect(found: Any) -> Any:
    if not found:
        raise LookupError("nothing found")
    return found


# -- loading -----------------------------------------------------------------------------------


def load_langgraph(store: Any, n: int, embedder: KnownTextsEmbedder) -> float:
    from langgraph.store.base import PutOp

    started = time.perf_counter()
    batch: list[PutOp] = []
    texts: set[str] = set()
    for i in range(n):
        value = item_value(i)
        # InMemoryStore (langgraph 1.2) embeds a batch's distinct texts but expects a vector per
        # item, so a batch never holds one text twice.
        if len(batch) == LOAD_BATCH or value["text"] in texts:
            embedder.learn(list(texts))
            store.batch(batch)
            batch, texts = [], set()
        batch.append(PutOp(namespace(i, n), f"k{i}", value, index=INDEX_FIELDS))
        texts.add(value["text"])
        if i % 10_000 == 9_999:
            say(f"    loaded {i + 1}/{n} in {time.perf_counter() - started:.0f}s")
    embedder.learn(list(texts))
    store.batch(batch)
    return time.perf_counter() - started


# -- the three stores --------------------------------------------------------------------------


def load_memsvc(data_dir: Path, n: int, embedder: KnownTextsEmbedder) -> dict[str, float]:
    say(f"  memsvc: loading {n} items in process (benchmarks.bulk_load), then starting the server")

    def progress(done: int, so_far: Loaded) -> None:
        if done % 50_000 == 0 or done == n:
            say(f"    put {done}/{n} in {so_far.wall_s:.0f}s (puts {so_far.put_s:.0f}s, embedding "
                f"{so_far.embed_s:.0f}s; indexing alongside), load {loadavg()}")

    loaded = bulk_load(data_dir, ((namespace(i, n), f"k{i}", item_value(i)) for i in range(n)),
                       tenant=TENANT, user=USER, embedder=embedder, index_fields=INDEX_FIELDS,
                       policies={"attributes.rego": ATTRIBUTES_REGO}, progress=progress)
    return {"put_s": round(loaded.put_s, 1), "embed_s": round(loaded.embed_s, 1), "index_s": round(loaded.index_s, 1),
            "indexed_s": round(loaded.wall_s, 1)}


def bench_memsvc(n: int, work: Workload, args: Any, embedder: KnownTextsEmbedder, root: Path) -> dict[str, Any]:
    from memsvc_client import MemsvcStore

    from memsvc.adapters.local.issuer import LocalIssuer

    data_dir = args.keep_memsvc / str(n) if args.keep_memsvc else root / "memsvc"
    # The server reads every vector when it starts: 149 s for 1M at load 21 (vector_scale, README).
    server = Server(data_dir, args.port or free_port(), health_timeout_s=max(180.0, n / 1000))
    done_marker = data_dir / "peers-loaded.json"
    if done_marker.exists():
        say(f"  memsvc: reusing the items loaded in {data_dir}")
        load = {**json.loads(done_marker.read_text()), "reused": True}
    elif (data_dir / "memsvc.db").exists():
        say(f"  memsvc: {data_dir} holds a load that did not finish: remove it, or name another directory")
        return {"error": "an unfinished load in --keep-memsvc"}
    else:
        load = load_memsvc(data_dir, n, embedder)
        done_marker.write_text(json.dumps(load))
    try:
        try:
            load["server_start_s"] = round(server.start(), 1)
        except ServerFailed as exc:
            say(f"  memsvc: the server did not start: {exc}\n{server.log_tail()}")
            return {"error": str(exc), "load": load}
        say(f"  memsvc: loaded in {load['indexed_s']}s, the server answered after {load['server_start_s']}s, "
            f"load {loadavg()}")
        issuer = LocalIssuer(server.data_dir / "keys")
        token = issuer.mint(sub=USER, tenant=TENANT, ttl_seconds=TOKEN_TTL_S)
        admin = issuer.mint(sub="peers-admin", tenant=TENANT, roles=["admin"], ttl_seconds=TOKEN_TTL_S)
        common = {"url": server.base_url, "token": token, "index": {"dims": 384, "fields": INDEX_FIELDS},
                  "max_concurrency": args.clients, "timeout": 300.0}
        with MemsvcStore(**common, search_mode="semantic") as store, \
                MemsvcStore(**common, read_your_writes=False) as async_store, \
                MemsvcStore(**common) as hybrid_store:
            return {"load": load, "phases": run_phases("memsvc", store, work, args, async_store=async_store,
                                                       hybrid_store=hybrid_store,
                                                       settle=lambda: _indexed(server.base_url, admin))}
    finally:
        server.stop()


def bench_inmemory(n: int, work: Workload, args: Any, embedder: KnownTextsEmbedder) -> dict[str, Any]:
    from langgraph.store.memory import InMemoryStore

    store = InMemoryStore(index={"dims": embedder.dimension, "embed": embedder, "fields": INDEX_FIELDS})
    say(f"  InMemoryStore: loading {n} items")
    load_s = load_langgraph(store, n, embedder)
    say(f"  InMemoryStore: loaded in {load_s:.1f}s, load {loadavg()}")
    return {"load": {"indexed_s": round(load_s, 1)}, "phases": run_phases("InMemory", store, work, args)}


def bench_sqlite(n: int, work: Workload, args: Any, embedder: KnownTextsEmbedder, root: Path) -> dict[str, Any]:
    problem = sqlite_extensions_problem()
    if problem:
        say(f"  SqliteStore: SKIPPED: {problem}")
        return {"skipped": problem}
    from langgraph.store.sqlite import SqliteStore

    index = {"dims": embedder.dimension, "embed": embedder, "fields": INDEX_FIELDS}
    with SqliteStore.from_conn_string(str(root / "langgraph.sqlite"), index=index) as store:
        store.setup()
        say(f"  SqliteStore: loading {n} items")
        load_s = load_langgraph(store, n, embedder)
        say(f"  SqliteStore: loaded in {load_s:.1f}s, load {loadavg()}")
        return {"load": {"indexed_s": round(load_s, 1)}, "phases": run_phases("Sqlite", store, work, args)}


# -- the report --------------------------------------------------------------------------------

_COLUMNS = ("put (read-your-writes)", "put (async indexing)", "get", "filter (value field)",
            "filter (policy attribute)", "semantic", "hybrid")


def markdown(results: list[dict[str, Any]], clients: int) -> str:
    lines = []
    for c in dict.fromkeys((1, clients)):
        lines += ["", f"{'Sequential' if c == 1 else f'{c} clients'}: puts in ops/s; everything else p50 / p95 ms "
                      "and ops/s", "",
                  "| items | store | " + " | ".join(_COLUMNS) + " |", "|---:|---|" + "---|" * len(_COLUMNS)]
        for res in results:
            for store, r in res["stores"].items():
                if "phases" not in r:
                    lines.append(f"| {res['items']:,} | {store} | " + " | ".join(
                        ["skipped" if "skipped" in r else "failed"] * len(_COLUMNS)) + " |")
                    continue
                cells = []
                for col in _COLUMNS:
                    p = r["phases"].get(f"{col} / {c}")
                    if p is None:
                        cells.append("-")
                    elif col.startswith("put"):
                        searchable = p.get("searchable_per_s")
                        cells.append(f"{p['per_s']}" + ("" if searchable is None else f" (searchable {searchable})"))
                    else:
                        cells.append(f"{p['p50_ms']} / {p['p95_ms']} ({p['per_s']}/s)")
                lines.append(f"| {res['items']:,} | {store} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


# Issue 29's targets, memsvc through the client over HTTP, sequential: latency by (items, phase)
# and statistic, and puts until searchable against SqliteStore's puts (searchable when they return).
LATENCY_TARGETS_MS = {(10_000, "get", "p50_ms"): 0.8, (10_000, "filter (value field)", "p95_ms"): 2.0,
                      (10_000, "hybrid", "p95_ms"): 12.0, (100_000, "filter (value field)", "p95_ms"): 3.0,
                      (100_000, "hybrid", "p95_ms"): 20.0}
SEARCHABLE_TARGET = 1.5
MEMSVC, SQLITE = "memsvc (HTTP)", "SqliteStore + sqlite-vec"


def targets(results: list[dict[str, Any]], clients: int) -> str:
    """One table of every number issue 29's targets name, next to its target."""
    lines = ["", "Issue 29's targets (memsvc through the client over HTTP, one client)", "",
             "| items | target | measured | met |", "|---:|---|---|---|"]
    for res in results:
        n = res["items"]

        def row(target: str, measured: str, met: bool | None) -> None:
            lines.append(f"| {n:,} | {target} | {measured} | {'-' if met is None else 'yes' if met else 'NO'} |")

        memsvc = res["stores"].get(MEMSVC, {}).get("phases")
        if memsvc is None:
            row("every target", "memsvc was not run, or failed", None)
            continue
        for (items, phase, stat), limit in LATENCY_TARGETS_MS.items():
            if items == n:
                value = memsvc[f"{phase} / 1"][stat]
                row(f"{phase} {stat[:3]} <= {limit} ms", "no answer" if value is None else f"{value} ms",
                    None if value is None else value <= limit)
        searchable = memsvc["put (async indexing) / 1"].get("searchable_per_s")
        sqlite = res["stores"].get(SQLITE, {}).get("phases")
        if sqlite is None:
            row(f"puts until searchable >= {SEARCHABLE_TARGET}x SqliteStore's", f"{searchable}/s (SqliteStore not run)",
                None)
        else:
            base = sqlite["put (read-your-writes) / 1"]["per_s"]
            row(f"puts until searchable >= {SEARCHABLE_TARGET}x SqliteStore's",
                f"{searchable}/s vs {base}/s (x{_ratio(searchable or 0, base)})",
                searchable is not None and searchable >= SEARCHABLE_TARGET * base)
    return "\n".join(lines)


def _ratio(a: float, b: float) -> str:
    return f"{a / b:.2f}" if b else "-"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.peers", description=__doc__.split("\n\n")[0])
    parser.add_argument("--items", type=int, nargs="+", default=[10_000])
    parser.add_argument("--stores", nargs="+", default=["memsvc", "inmemory", "sqlite"],
                        choices=["memsvc", "inmemory", "sqlite"])
    parser.add_argument("--clients", type=int, default=8)
    parser.add_argument("--ops", type=int, default=300, help="operations per phase (default 300)")
    parser.add_argument("--phase-seconds", type=float, default=60.0, help="time bound of each phase")
    parser.add_argument("--port", type=int, default=None, help="memsvc's port (default: a free one)")
    parser.add_argument("--out", type=Path, default=None, help="write the results as JSON here")
    parser.add_argument("--keep-memsvc", type=Path, default=None, metavar="DIR",
                        help="keep memsvc's loaded data directory of each size in DIR/<items>, and reuse one "
                             "there instead of loading again (1M: about an hour on a busy 2-core machine); the put "
                             "phases write to it, and a re-run's puts overwrite the same keys")
    args = parser.parse_args(argv)

    say(f"peers: items {args.items}, stores {args.stores}, clients 1 and {args.clients}, {args.ops} ops per phase "
        f"(at most {args.phase_seconds:.0f}s), {os.cpu_count()} CPUs, Python {sys.version.split()[0]}, "
        f"load {loadavg()}")
    embedder = KnownTextsEmbedder()
    results = []
    for n in args.items:
        work = Workload(n, args.ops)
        say(f"\n=== {n:,} items in {work.namespaces} namespaces ===")
        stores: dict[str, Any] = {}
        with tempfile.TemporaryDirectory(prefix="memsvc-peers-") as tmp:
            root = Path(tmp)
            if "memsvc" in args.stores:
                stores[MEMSVC] = bench_memsvc(n, work, args, embedder, root)
            if "inmemory" in args.stores:
                stores["InMemoryStore"] = bench_inmemory(n, work, args, embedder)
            if "sqlite" in args.stores:
                stores[SQLITE] = bench_sqlite(n, work, args, embedder, root)
        results.append({"items": n, "stores": stores})
    md = markdown(results, args.clients) + "\n" + targets(results, args.clients)
    say("\n=== summary ===" + md)
    if args.out:
        args.out.write_text(json.dumps({
            "command": "python -m benchmarks.peers " + " ".join(argv if argv is not None else sys.argv[1:]),
            "when": datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"), "python": sys.version,
            "cpus": os.cpu_count(), "results": results, "markdown": md}, indent=2))
        say(f"results written to {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
