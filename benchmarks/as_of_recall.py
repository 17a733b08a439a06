"""`python -m benchmarks.as_of_recall`: what `as_of` costs a recall (issue 25's target: an
`as_of` recall over 10k memories costs at most 20 % more than a current recall).

recall_latency.py's setup (`--items` typed memories round-robin over the user, project and
company layers, only `content` indexed, the real indexer and MiniLM, `recall_min_match` 0 and
the adaptive cut off, so every recall fills its page), with valid time: the memories are written
one an hour from 2024-01-01 (about 14 months for 10k), every 5th superseded (tagged, `valid_to`
30 days after its creation), every 7th stated to hold from a year before its creation. Then a
fresh `memsvc serve` answers each query three times, interleaved so drift hits all alike, each
variant first in turn (a query's first recall embeds it):
current (no `as_of`), `as_of` in the middle of the data's time (about half the memories were
not stated yet: the filter rejects the most, so the search widens the most), and `as_of` after
the last write (everything stated, only the superseded ones fall out). Reported: the client's
wall-clock p50/p95 of each, and the ratio to current.
"""

from __future__ import annotations

import argparse
import random
import sys
import tempfile
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path

import httpx

from benchmarks.bench import _semantic_queries, make_value, percentile, serving
from benchmarks.recall_latency import IDENTIFIERS, LAYERS, TENANT, _free_port
from memsvc.core.models import Caller, to_rfc3339
from memsvc.service.memories import PutMemory
from memsvc.service.tenant_config import SettingsPatch

START = datetime(2024, 1, 1, tzinfo=timezone.utc)
STEP = timedelta(hours=1)


class _Clock:
    """The fill's clock: one hour per memory, so created_at spreads over the data's time."""

    def __init__(self) -> None:
        self.current = START

    def now(self) -> datetime:
        return self.current


def fill(data_dir: Path, items: int) -> None:
    from memsvc.bootstrap import build_local

    clock = _Clock()
    app = build_local(data_dir, start_workers=False, clock=clock)
    admin = Caller(tenant_id=TENANT, user_id="ops", roles=("admin",))
    started = time.perf_counter()
    for i in range(items):
        clock.current = START + i * STEP
        value = {"content": make_value(i)["text"], "type": "fact", "importance": (i % 10) / 10}
        if i % 5 == 0:
            value |= {"tags": ["superseded"], "superseded_by": f"m{i + 1}",
                      "valid_to": to_rfc3339(clock.current + timedelta(days=30))}
        if i % 7 == 0:
            value["valid_from"] = to_rfc3339(clock.current - timedelta(days=365))
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


def measure(data_dir: Path, port: int, queries: int, items: int) -> dict[str, dict[str, float]]:
    from memsvc.adapters.local.issuer import LocalIssuer

    variants = {"current": None, "as_of middle": to_rfc3339(START + (items // 2) * STEP),
                "as_of after the last write": to_rfc3339(START + items * STEP)}
    wall: dict[str, list[float]] = {name: [] for name in variants}
    counts: dict[str, list[int]] = {name: [] for name in variants}
    with serving(data_dir, port) as url:
        token = LocalIssuer(data_dir / "keys").mint(sub="ops", tenant=TENANT, roles=["admin"], ttl_seconds=3600)
        texts = [q for q, _ in _semantic_queries(queries + 20, random.Random(11))]
        with httpx.Client(base_url=url, headers={"Authorization": f"Bearer {token}"}, timeout=60) as client:
            names = list(variants)
            for n, text in enumerate(texts):
                # Each variant goes first in turn: the first recall of a query text embeds it, the
                # others may find its vector cached.
                for name in names[n % 3:] + names[:n % 3]:
                    as_of = variants[name]
                    body = {"query": text, "identifiers": IDENTIFIERS, "limit": 10}
                    if as_of is not None:
                        body["as_of"] = as_of
                    started = time.perf_counter()
                    r = client.post("/v1/memories/recall", json=body)
                    elapsed = (time.perf_counter() - started) * 1000
                    if r.status_code != 200:
                        raise SystemExit(f"recall answered {r.status_code}: {r.text}")
                    if n < 20:
                        continue  # warm-up: the first requests load the tokenizer and fill caches
                    wall[name].append(elapsed)
                    counts[name].append(r.json()["metadata"]["count"])
    out = {}
    base = None
    for name in variants:
        samples = sorted(wall[name])
        p50, p95 = percentile(samples, 50), percentile(samples, 95)
        base = base or (p50, p95)
        out[name] = {"p50_ms": p50, "p95_ms": p95, "p50_ratio": p50 / base[0], "p95_ratio": p95 / base[1],
                     "mean_results": sum(counts[name]) / len(counts[name])}
        print(f"{name:<28} p50 {p50:6.1f} ms ({out[name]['p50_ratio']:.2f}x)  p95 {p95:6.1f} ms "
              f"({out[name]['p95_ratio']:.2f}x)  {out[name]['mean_results']:.1f} memories a recall")
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--items", type=int, default=10_000)
    parser.add_argument("--queries", type=int, default=300)
    parser.add_argument("--port", type=int, default=0, help="default: a free port")
    parser.add_argument("--data-dir", type=Path, help="fill this directory once and reuse it (default: a temporary one)")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="memsvc-as-of-") as tmp:
        data_dir = args.data_dir or Path(tmp) / "data"
        if not (data_dir / "memsvc.db").exists():
            fill(data_dir, args.items)
        print(f"{args.items} memories, {args.queries} queries, 3 layers, limit 10 (sequential client, HTTP)")
        measure(data_dir, args.port or _free_port(), args.queries, args.items)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
