"""`python -m benchmarks.tenant_turns [--backlog bulk|big]`: how long one tenant's backlog holds up
another tenant's fresh write on a local `memsvc serve` (the feed's tenant turns, docs/architecture.md).

A fresh `memsvc serve` (the default model) on a new data dir. Tenant `hog` writes its backlog:
- `bulk`: `--writes` memories of `--words` words each, 8 clients at once;
- `big`: 2 memories of 64 fields of 560 words (every field embedded, each at the model's limit).
Right after, tenant `bystander` writes one memory, then searches it by keyword every 0.1 s: the
time from its write to the first search that finds it is the number this prints. The words are
random `wNNNN` tokens, so nothing is in any cache. Everything shares this machine's cores: say
the load with any number.
"""

from __future__ import annotations

import argparse
import random
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx

from benchmarks.bench import serving


def _client(url: str, data_dir: Path, tenant: str) -> httpx.Client:
    token = subprocess.check_output([sys.executable, "-m", "memsvc.cli", "token", "--sub", "u", "--tenant", tenant,
                                     "--data-dir", str(data_dir)], text=True).strip()
    return httpx.Client(base_url=url, headers={"Authorization": f"Bearer {token}"}, timeout=300)


def _found(client: httpx.Client, word: str, key: str) -> bool:
    r = client.post("/v1/memories/search", json={"namespace_prefix": ["user", "u"], "query": word, "mode": "keyword"})
    r.raise_for_status()
    return any(item["key"] == key for item in r.json()["items"])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--backlog", choices=("bulk", "big"), default="bulk")
    parser.add_argument("--writes", type=int, default=800)
    parser.add_argument("--words", type=int, default=300)
    parser.add_argument("--port", type=int, default=8771)
    args = parser.parse_args()
    rng = random.Random(1)
    words = [f"w{n}" for n in range(5000)]

    def text(n: int) -> str:
        return " ".join(rng.choice(words) for _ in range(n))

    if args.backlog == "bulk":
        values = [{"text": text(args.words)} for _ in range(args.writes)]
    else:
        values = [{f"f{j}": text(560) for j in range(64)} for _ in range(2)]
    last_field = "text" if args.backlog == "bulk" else "f63"
    values[-1][last_field] += " kingfisher"  # a word of the last write alone
    with tempfile.TemporaryDirectory() as tmp, serving(Path(tmp), args.port) as url:
        hog, bystander = _client(url, Path(tmp), "hog"), _client(url, Path(tmp), "bystander")

        def put(client: httpx.Client, key: str, value: dict) -> None:
            client.put("/v1/memories", json={"namespace": ["user", "u", "notes"], "key": key,
                                             "value": value}).raise_for_status()

        started = time.monotonic()
        with ThreadPoolExecutor(8) as pool:
            list(pool.map(lambda n: put(hog, f"k{n}", values[n]), range(len(values))))
        print(f"hog: {len(values)} writes sent in {time.monotonic() - started:.1f} s")
        wrote = time.monotonic()
        put(bystander, "fresh", {"text": "zebrafish aquarium temperature"})
        while not _found(bystander, "zebrafish", "fresh"):
            time.sleep(0.1)
        print(f"bystander: searchable {time.monotonic() - wrote:.1f} s after its write")
        while not _found(hog, "kingfisher", f"k{len(values) - 1}"):
            time.sleep(0.2)
        print(f"hog: its last write searchable {time.monotonic() - started:.1f} s after its first")


if __name__ == "__main__":
    main()
