"""`python -m benchmarks.erase_user --memories 10000`: how long erasing a user takes on the local
backend (SQLite), in process. Target (issue 26): <= 30 s for a user with 10k memories.

The user gets `--memories` memories (about 300 bytes of text each, half of them written twice, so
the timeline holds 1.5 events per memory), and another user of the tenant as many; the indexer
and the timeline drain the change feed (vectors from a cheap deterministic embedder, keyword
documents, field tokens, the derived graph), so that every store holds the user's rows. Then the
erasure runs as repeated `DELETE`s would, request after request (`PAGES_PER_REQUEST` pages each),
until its receipt says `completed`; the time printed is all of those requests together.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

from memsvc.bootstrap import build_local
from memsvc.core.models import Caller

TENANT = "bench"


class _HashedWords:
    """A deterministic bag-of-words embedder: indexing costs storage, not a model."""

    model_id = "bench-hashed-words"
    dimension = 64

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        out = []
        for text in texts:
            vector = [0.0] * self.dimension
            for word in text.split():
                vector[int(hashlib.blake2b(word.encode(), digest_size=4).hexdigest(), 16) % self.dimension] += 1.0
            norm = sum(v * v for v in vector) ** 0.5 or 1.0
            out.append([v / norm for v in vector])
        return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--memories", type=int, default=10_000)
    args = parser.parse_args(argv)
    admin = Caller(TENANT, "root", ("admin",))
    with tempfile.TemporaryDirectory(prefix="memsvc-erase-") as tmp:
        app = build_local(Path(tmp) / "data", embedder=_HashedWords(), start_workers=False)
        try:
            seeded = time.perf_counter()
            for user in ("erased", "kept"):
                for n in range(args.memories):
                    for version in range(1 + n % 2):
                        ns, key = ("user", user, "memories"), f"m{n:06d}"
                        app.services.memories.write_version(
                            TENANT, ns, key, {"text": f"Alice met Bob about project {n} v{version}: "
                                                      + os.urandom(120).hex()},
                            old=app.store.get(TENANT, ns, key), attributes=None, policy_attributes={},
                            index_fields=None, ttl_seconds=None)
            while app.workers.run_cycle("indexer").total or app.workers.run_cycle("timeline").total:
                pass
            print(f"seeded and indexed 2 x {args.memories} memories in {time.perf_counter() - seeded:.1f} s")

            started = time.perf_counter()
            requests = 1
            receipt = app.services.user_erasure.erase(admin, "erased")
            while receipt.status == "running":
                receipt = app.services.user_erasure.erase(admin, "erased")
                requests += 1
            seconds = time.perf_counter() - started
        finally:
            app.close()
    print(f"erased a user with {args.memories} memories in {seconds:.2f} s ({requests} requests)")
    print("rows per store: " + ", ".join(f"{store} {n}" for store, n in receipt.erased.items()))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
