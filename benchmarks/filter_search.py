"""`python -m benchmarks.filter_search --items 10000`: filter search latency over HTTP, decided on
field tokens and, for comparison, by decrypting (the tenant's keyword indexing turned off).

The data directory is filled in process: `--items` bench values (`make_value`: a text, `n`,
`lang` of 5 languages, `at`) in namespaces of 200 items each, indexed by the real indexer (field
tokens and keyword documents are real; the text's vector is a seeded pseudo-random one, as in
`benchmarks.search_latency`). Then a fresh `memsvc serve` answers `--queries` searches per
filter from one sequential client, each under one namespace (200 items in scope), limit 10:
value-field equality (the target: p95 <= 3 ms at 10k, <= 10 ms at 100k), membership, `ne`,
equality with a range, and equality over the user's whole subtree (every item in scope). Then keyword indexing is turned off (which removes the tokens) and the
same filters are measured again, decrypting.
"""

from __future__ import annotations

import argparse
import os
import random
import sys
import tempfile
import time
from pathlib import Path

import httpx

from benchmarks import search_latency
from benchmarks.bench import LANGS, USER, percentile, serving

TENANT = "default"
SCOPE = 200  # items per namespace: what one filter search has in scope
FILTERS = {
    "eq": lambda rng: {"lang": rng.choice(LANGS)},
    "in": lambda rng: {"lang": {"in": rng.sample(LANGS, 2)}},
    "ne": lambda rng: {"lang": {"ne": rng.choice(LANGS)}},
    "eq+range": lambda rng: {"lang": rng.choice(LANGS), "n": {"gte": rng.randrange(10_000)}},
    # Every item in scope (the user's whole subtree): every head is read.
    "eq, all": lambda rng: {"lang": rng.choice(LANGS)},
}


def _namespace(i: int, groups: int) -> list[str]:
    return ["user", USER, f"group-{i % groups}"]


def fill(data_dir: Path, items: int) -> None:
    groups = max(1, items // SCOPE)
    search_latency.fill(data_dir, items, lambda i: _namespace(i, groups), index_fields=["text"])


def measure(client: httpx.Client, groups: int, queries: int, label: str) -> dict[str, dict[str, float]]:
    out = {}
    for name, make in FILTERS.items():
        rng = random.Random(7)
        samples = []
        for n in range(queries + queries // 10):  # the first tenth warms up, unmeasured
            prefix = ["user", USER] if name.endswith(", all") else ["user", USER, f"group-{rng.randrange(groups)}"]
            body = {"namespace_prefix": prefix, "filter": make(rng), "limit": 10}
            started = time.perf_counter()
            r = client.post("/v1/memories/search", json=body)
            elapsed = (time.perf_counter() - started) * 1000
            r.raise_for_status()
            if n >= queries // 10:
                samples.append(elapsed)
        samples.sort()
        out[name] = {"p50_ms": percentile(samples, 50), "p95_ms": percentile(samples, 95),
                     "p99_ms": percentile(samples, 99)}
        print(f"{label:>8} {name:>9}: p50 {out[name]['p50_ms']:.2f} ms  p95 {out[name]['p95_ms']:.2f} ms  "
              f"p99 {out[name]['p99_ms']:.2f} ms", file=sys.stderr)
    return out


def measure_get(client: httpx.Client, groups: int, items: int, queries: int) -> None:
    """`GET /v1/memories` of one item, the same way: the HTTP and authorization floor under the searches."""
    rng = random.Random(7)
    samples = []
    for n in range(queries + queries // 10):
        i = rng.randrange(items)
        started = time.perf_counter()
        r = client.get("/v1/memories", params={"ns": ["user", USER, f"group-{i % groups}"], "key": f"k{i}"})
        elapsed = (time.perf_counter() - started) * 1000
        r.raise_for_status()
        if n >= queries // 10:
            samples.append(elapsed)
    samples.sort()
    print(f"{'get':>8} {'one item':>9}: p50 {percentile(samples, 50):.2f} ms  p95 {percentile(samples, 95):.2f} ms  "
          f"p99 {percentile(samples, 99):.2f} ms", file=sys.stderr)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--items", type=int, default=10_000)
    parser.add_argument("--queries", type=int, default=300)
    parser.add_argument("--port", type=int, default=8767)
    parser.add_argument("--data-dir", type=Path, help="keep the filled data here; an existing one is reused "
                        "(filled with the same --items), so a re-run skips the filling (at 100k, minutes); with it, "
                        "only the token-decided searches are measured")
    args = parser.parse_args(argv)
    from memsvc.adapters.local.issuer import LocalIssuer

    print(f"load average before: {os.getloadavg()}", file=sys.stderr)
    with tempfile.TemporaryDirectory(prefix="memsvc-filters-") as tmp:
        data_dir = args.data_dir or Path(tmp) / "data"
        if not (data_dir / "memsvc.db").exists():
            fill(data_dir, args.items)
        groups = max(1, args.items // SCOPE)
        with serving(data_dir, args.port) as url:
            issuer = LocalIssuer(data_dir / "keys")
            user = issuer.mint(sub=USER, tenant=TENANT, roles=[], ttl_seconds=3600)
            ops = issuer.mint(sub="ops", tenant=TENANT, roles=["admin"], ttl_seconds=3600)
            with httpx.Client(base_url=url, headers={"Authorization": f"Bearer {user}"}, timeout=60) as client:
                measure_get(client, groups, args.items, args.queries)
                measure(client, groups, args.queries, "tokens")
                if args.data_dir is None:  # turning keyword indexing off removes a kept directory's tokens for good
                    httpx.put(url + "/admin/v1/memories/settings", json={"keyword_index": False},
                              headers={"Authorization": f"Bearer {ops}"}, timeout=60).raise_for_status()
                    measure(client, groups, args.queries, "decrypt")
    print(f"load average after: {os.getloadavg()}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
