"""`python -m benchmarks.remember_latency`: `POST /v1/memories/remember` latency over HTTP, on a
fresh local `memsvc serve` (real MiniLM, SQLite), from one sequential client, `wait: true`.

Every request does the whole decision: the candidate's key lookup, the neighbour search (the
content embedded, the vector index searched, the neighbours decrypted), the judge where the
cosine falls in the check range (locally the deterministic judge: no model call, as on AWS when
no neighbour is in the check range), the write, and the inline indexing that makes the memory a
neighbour for the next call (its content embedded again). The contents are the bench's
sentences (`benchmarks.bench`: 8 subjects x 8 verbs x 16 objects x 8 tails), so neighbours are
close and every outcome occurs; the actions and how often the judge was asked are printed.
The namespace grows by the memories created as it runs (`--warmup` of them before timing).
"""

from __future__ import annotations

import argparse
import random
import tempfile
import time
from collections import Counter
from pathlib import Path

import httpx

from benchmarks.bench import _OBJECTS, _SUBJECTS, _TAILS, _VERBS, percentile, serving

TENANT = "default"


def sentences(count: int, seed: int) -> list[str]:
    rng = random.Random(seed)
    return [f"{rng.choice(_SUBJECTS)} {rng.choice(_VERBS)} {rng.choice(_OBJECTS)} {rng.choice(_TAILS)}."
            for _ in range(count)]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=300)
    parser.add_argument("--warmup", type=int, default=100)
    parser.add_argument("--port", type=int, default=8767)
    args = parser.parse_args(argv)
    from memsvc.adapters.local.issuer import LocalIssuer

    with tempfile.TemporaryDirectory(prefix="memsvc-remember-") as tmp:
        data_dir = Path(tmp) / "data"
        with serving(data_dir, args.port) as url:
            issuer = LocalIssuer(data_dir / "keys")
            admin = issuer.mint(sub="ops", tenant=TENANT, roles=["admin"], ttl_seconds=3600)
            user = issuer.mint(sub="bench", tenant=TENANT, roles=[], ttl_seconds=3600)
            httpx.put(url + "/admin/v1/memories/settings", json={"remember_per_hour": 1_000_000},
                      headers={"Authorization": f"Bearer {admin}"}).raise_for_status()
            texts = sentences(args.warmup + args.requests, seed=11)
            samples, actions, judged = [], Counter(), 0
            with httpx.Client(base_url=url, headers={"Authorization": f"Bearer {user}"}, timeout=60) as client:
                for n, text in enumerate(texts):
                    started = time.perf_counter()
                    r = client.post("/v1/memories/remember", json={"content": text, "tags": ["bench"]})
                    elapsed = (time.perf_counter() - started) * 1000
                    r.raise_for_status()
                    if n >= args.warmup:
                        samples.append(elapsed)
                        actions[r.json()["action"]] += 1
                        judged += r.json()["judge"]["asked"]
            samples.sort()
            print(f"remember (wait: true), {len(samples)} sequential requests after {args.warmup} warm-up:")
            print(f"  p50 {percentile(samples, 50):.1f} ms  p95 {percentile(samples, 95):.1f} ms  "
                  f"p99 {percentile(samples, 99):.1f} ms  max {samples[-1]:.1f} ms")
            print(f"  actions: {dict(actions)}; judge asked (deterministic, local): {judged}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
