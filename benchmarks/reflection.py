"""`python -m benchmarks.reflection`: background reflection over one user's memories, locally
(issue 24's target: a pass over 10,000 memories of one user in <= 60 s).

The data is written in process through `Memories.put` (as `remember` writes a typed memory:
only `content` indexed), all in the user's one `memories` namespace with no category (the worst
case: one group, every memory compared with every older one), created over 400 days of a manual
clock, then indexed by the real indexer with the real MiniLM (`--model hash`: a 384-dimension
hashed bag of words, to measure without the model's indexing time). A tenth are near-duplicates
of another memory ("... daily"), a twentieth contradict one ("I live in <another city>").

Measured: `Reflection.run` until the pass is done (`--max` memories per run; the default is the
tenant setting's default), wall clock, with each run's stats; then a second pass, which must
write nothing. Nothing of the fill or the indexing is in the time.
"""

from __future__ import annotations

import argparse
import hashlib
import math
import random
import tempfile
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path

from memsvc.core.models import Caller
from memsvc.service.memories import PutMemory
from memsvc.service.tenant_config import SettingsPatch

TENANT, USER = "default", "bench"
NS = ["user", USER, "memories"]
_THINGS = ("green tea", "dark mode", "Python", "Rust", "jazz", "hiking", "sushi", "vim", "cycling", "chess", "opera",
           "board games", "black coffee", "the window seat", "early meetings", "long walks", "sci-fi novels")
_PURPOSES = ("at work", "on weekends", "in the morning", "when travelling", "for scripting", "with friends",
             "after lunch", "on long flights", "at home", "for focus")
_CITIES = ("Berlin", "Munich", "Lisbon", "Oslo", "Kyoto", "Austin", "Lyon", "Porto", "Turin", "Quebec")


class _Clock:
    def __init__(self, now: datetime) -> None:
        self.current = now

    def now(self) -> datetime:
        return self.current


class HashedWords:
    """384 dimensions like MiniLM, a unit-length hashed bag of words (no model time)."""

    model_id = "bench/hashed-words-384"
    dimension = 384

    def embed(self, texts):
        out = []
        for text in texts:
            v = [0.0] * self.dimension
            for word in text.lower().split():
                h = int.from_bytes(hashlib.blake2b(word.encode(), digest_size=8).digest(), "big")
                v[h % self.dimension] += 1.0 if (h >> 32) & 1 else -1.0
            n = math.sqrt(sum(x * x for x in v)) or 1.0
            out.append([x / n for x in v])
        return out


def sentences(n: int, rng: random.Random) -> list[tuple[str, float]]:
    """(content, importance): distinct statements, a tenth near-duplicates, a twentieth contradictions."""
    out: list[tuple[str, float]] = []
    for i in range(n):
        if out and i % 10 == 5:
            base = rng.choice(out)[0]
            text = base + " daily"
        elif i % 20 == 7:
            text = f"I live in {rng.choice(_CITIES)} since {2000 + i % 25}"
        else:
            text = (f"The user likes {rng.choice(_THINGS)} {rng.choice(_PURPOSES)} (note {i}, "
                    f"{rng.choice(_THINGS)} and {rng.choice(_PURPOSES)})")
        out.append((text, round(rng.uniform(0.05, 1.0), 2)))
    return out


def fill(app, clock: _Clock, n: int) -> None:
    rng = random.Random(24)
    caller = Caller(tenant_id=TENANT, user_id=USER, roles=("admin",))
    start = clock.current
    for i, (content, importance) in enumerate(sentences(n, rng)):
        clock.current = start + timedelta(days=400 * i / n)
        app.services.memories.put(caller, PutMemory(
            namespace=NS, key=f"m{i:06d}", index_fields=["content"],
            value={"content": content, "type": rng.choice(("fact", "preference")), "kind": "semantic",
                   "importance": importance, "pinned": i % 97 == 0, "tags": []}))
    while app.workers.run_cycle("indexer").total:
        pass


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--items", type=int, default=10_000)
    parser.add_argument("--max", type=int, default=None, help="reflection_max_memories (default: the setting's)")
    parser.add_argument("--model", choices=("minilm", "hash"), default="minilm")
    args = parser.parse_args(argv)
    from memsvc.bootstrap import build_local

    clock = _Clock(datetime(2025, 1, 1, tzinfo=timezone.utc))
    with tempfile.TemporaryDirectory(prefix="memsvc-reflection-") as tmp:
        app = build_local(Path(tmp) / "data", clock=clock, start_workers=False,
                          embedder=HashedWords() if args.model == "hash" else None)
        try:
            if args.max:
                app.settings.update(TENANT, SettingsPatch(reflection_max_memories=args.max))
            started = time.perf_counter()
            fill(app, clock, args.items)
            print(f"filled and indexed {args.items} memories in {time.perf_counter() - started:.1f} s "
                  f"({app.embedder.model_id})")
            clock.current += timedelta(days=30)
            for label in ("first pass", "second pass (nothing new)"):
                started = time.perf_counter()
                runs = []
                while True:
                    run = app.services.reflection.run(TENANT, USER)
                    runs.append(run)
                    if run.done:
                        break
                elapsed = time.perf_counter() - started
                total = {k: sum(getattr(r, k) for r in runs) for k in
                         ("examined", "merged", "superseded", "importance_updated", "archived", "skipped",
                          "judge_calls")}
                print(f"{label}: {elapsed:.2f} s in {len(runs)} run(s): {total}")
                while app.workers.run_cycle("indexer").total:  # the merged versions, before the next pass
                    pass
            profile = app.services.profiles.stored(TENANT, USER)
            print(f"profile: {len(profile.items)} items, {profile.token_count} tokens")
        finally:
            app.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
