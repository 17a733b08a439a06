"""`python -m benchmarks.extract_latency`: `POST /v1/memories/extract` latency over HTTP, `wait:
true`, 10 messages a request, on a fresh local `memsvc serve` without a model endpoint (the
deterministic extractor, real MiniLM, SQLite), from one sequential client (issue 24's target:
p95 <= 150 ms).

Every request does the whole of it: the patterns and one embedder call over the conversation,
then each candidate through remember's consolidation (its key lookup, the neighbour search, the
write and the inline indexing that makes it a neighbour for the next one). The conversations are
the extraction golden set's (`eval/extraction/`, both halves), its messages taken ten at a time
in order; each request is a new user, as one conversation of each user is what an agent sends, and
`--same-user` sends them all as one user (the namespace then grows by what they teach).
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from collections import Counter
from pathlib import Path

import httpx

from benchmarks.bench import percentile, serving

TENANT = "default"
ROOT = Path(__file__).resolve().parents[1]


def windows(size: int) -> list[list[dict]]:
    messages = [{"role": m["role"], "content": m["content"]}
                for split in ("dev", "test")
                for c in json.loads((ROOT / "eval" / "extraction" / f"{split}.json").read_text())["conversations"]
                for m in c["messages"]]
    return [messages[i:i + size] for i in range(0, len(messages) - size + 1, size)]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=10, help="messages per request")
    parser.add_argument("--warmup", type=int, default=5)
    parser.add_argument("--port", type=int, default=8768)
    parser.add_argument("--same-user", action="store_true")
    args = parser.parse_args(argv)
    from memsvc.adapters.local.issuer import LocalIssuer

    conversations = windows(args.messages)
    with tempfile.TemporaryDirectory(prefix="memsvc-extract-") as tmp:
        data_dir = Path(tmp) / "data"
        with serving(data_dir, args.port) as url:
            issuer = LocalIssuer(data_dir / "keys")
            admin = issuer.mint(sub="ops", tenant=TENANT, roles=["admin"], ttl_seconds=3600)
            httpx.put(url + "/admin/v1/memories/settings", json={"remember_per_hour": 1_000_000},
                      headers={"Authorization": f"Bearer {admin}"}).raise_for_status()
            samples, actions, candidates = [], Counter(), []
            with httpx.Client(base_url=url, timeout=60) as client:
                for n, messages in enumerate([*conversations[:args.warmup], *conversations]):
                    user = "bench" if args.same_user else f"bench-{n}"
                    token = issuer.mint(sub=user, tenant=TENANT, roles=[], ttl_seconds=3600)
                    started = time.perf_counter()
                    r = client.post("/v1/memories/extract", json={"messages": messages},
                                    headers={"Authorization": f"Bearer {token}"})
                    elapsed = (time.perf_counter() - started) * 1000
                    r.raise_for_status()
                    if n >= args.warmup:
                        samples.append(elapsed)
                        found = r.json()["memories"]
                        candidates.append(len(found))
                        actions.update(m["action"] for m in found)
            samples.sort()
            print(f"extract (wait: true, deterministic extractor), {len(samples)} sequential requests of "
                  f"{args.messages} messages after {args.warmup} warm-up"
                  f"{', one user' if args.same_user else ', a user each'}:")
            print(f"  p50 {percentile(samples, 50):.1f} ms  p95 {percentile(samples, 95):.1f} ms  "
                  f"p99 {percentile(samples, 99):.1f} ms  max {samples[-1]:.1f} ms")
            print(f"  candidates per request: mean {sum(candidates) / len(candidates):.1f}, max {max(candidates)}; "
                  f"actions: {dict(actions)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
