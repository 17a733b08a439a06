"""The Python half of bench/get-p95.ts: `MemsvcStore.get` latency on the same server and items.

    python bench/get_p95.py URL TOKEN GETS KEYS WARMUP   ->   {"p50_ms", "p95_ms", "p99_ms", "mean_ms", "n"}
"""

import json
import statistics
import sys
import time

from memsvc_client import MemsvcStore

url, token, gets, keys, warmup = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
NS = ("bench", "items")

with MemsvcStore(url=url, token=token) as store:
    for i in range(min(50, gets)):  # warm-up: connections, the server's caches
        store.get(NS, f"k{i % keys}")
    samples = []
    for i in range(gets):
        start = time.perf_counter()
        item = store.get(NS, f"k{i % keys}")
        samples.append((time.perf_counter() - start) * 1000)
        assert item is not None
samples.sort()


def pct(p: float) -> float:
    return samples[min(len(samples) - 1, int(p * len(samples)))]


print(json.dumps({"n": len(samples), "p50_ms": pct(0.50), "p95_ms": pct(0.95), "p99_ms": pct(0.99),
                  "mean_ms": statistics.fmean(samples)}))
