"""`python -m benchmarks.rerank_latency --memories 10000`: what search's rerank step adds to a
search, per adapter, without a model or the network.

In process: `--memories` bench values (`benchmarks.bench.make_value`, one tenant, one user)
written through the service and indexed by the real indexer with the tests' hash embedder, then
`--queries` hybrid searches (limit 10) timed one after another (`time.perf_counter`, after a
warm-up), the same queries for each configuration, the configurations taking turns query by
query (in a shuffled order each time, so that a noisy neighbour on the machine slows them alike):

- `off`: the tenant's rerank setting off (the default);
- `in-process`: on, with a reranker that answers at once (what the step itself costs: opening
  `top_n` memories instead of 10, picking each one's best text);
- `http`: on, through `HttpReranker` to a TEI-shaped fake on 127.0.0.1 (`tests.fakes.rerank_server`,
  a stdlib server thread that scores the share of query words a text holds);
- `bedrock`: on, through `BedrockReranker` on a real bedrock-agent-runtime client whose answers
  botocore's Stubber gives: botocore's request building and validation and the response parsing,
  without Bedrock's own time (not measurable offline; add the service's latency to it).

Each adapter call is timed within those searches too, and alone on `--top-n` texts of the data.
The process runs one BLAS thread, as `memsvc serve` does. The rankings are not reported.
"""

from __future__ import annotations

import argparse
import os
import random
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

from benchmarks.bench import _semantic_queries, make_value, percentile
from memsvc.core.models import Caller
from memsvc.service.memories import PutMemory
from memsvc.service.search import SearchQuery
from memsvc.service.tenant_config import RerankSetting, SettingsPatch
from memsvc.settings import LocalSettings

TENANT, USER = "bench", "bench"


class _Chosen:
    """The app's reranker: whichever the configuration being measured names. It times each call
    (`calls[name]`, ms), so the adapter's share of a search is seen apart from the machine's noise."""

    def __init__(self) -> None:
        self.current: tuple[str, object] | None = None
        self.calls: dict[str, list[float]] = {}

    def rerank(self, query: str, texts: Sequence[str], *, model_id: str | None) -> list[float]:
        name, adapter = self.current
        started = time.perf_counter()
        try:
            return adapter.rerank(query, texts, model_id=model_id)
        finally:
            self.calls.setdefault(name, []).append((time.perf_counter() - started) * 1000)


class _AtOnce:
    def rerank(self, query: str, texts: Sequence[str], *, model_id: str | None) -> list[float]:
        return [0.0] * len(texts)


class _StubbedBedrock:
    """`BedrockReranker` on a client whose Stubber is given one answer per call, scoring every text."""

    def __init__(self) -> None:
        import boto3
        from botocore.stub import Stubber

        from memsvc.adapters.aws.bedrock_rerank import AMAZON_RERANK_V1, BedrockReranker

        os.environ.setdefault("AWS_ACCESS_KEY_ID", "benchmark")
        os.environ.setdefault("AWS_SECRET_ACCESS_KEY", "benchmark")
        client = boto3.session.Session(region_name="us-west-2").client("bedrock-agent-runtime")
        self._stubber = Stubber(client)
        self._stubber.activate()
        self._adapter = BedrockReranker(client, model_id=AMAZON_RERANK_V1)

    def rerank(self, query: str, texts: Sequence[str], *, model_id: str | None) -> list[float]:
        self._stubber.add_response("rerank", {"results": [
            {"index": i, "relevanceScore": 1.0 / (1 + i)} for i in range(len(texts))]})
        return self._adapter.rerank(query, texts, model_id=model_id)


def _summary(samples: list[float]) -> dict[str, float]:
    samples = sorted(samples)
    return {"p50_ms": percentile(samples, 50), "p95_ms": percentile(samples, 95), "p99_ms": percentile(samples, 99)}


def _timed(call, repeats: int, warmup: int = 20) -> dict[str, float]:
    for i in range(warmup):
        call(i)
    samples = []
    for i in range(repeats):
        started = time.perf_counter()
        call(i)
        samples.append((time.perf_counter() - started) * 1000)
    return _summary(samples)


def _taking_turns(configurations: dict, call, repeats: int, warmup: int = 20) -> dict[str, dict[str, float]]:
    """`call(i)` timed under each configuration (`configurations[name]()` sets it up, untimed)."""
    samples: dict[str, list[float]] = {name: [] for name in configurations}
    order = list(configurations)
    rng = random.Random(11)
    for i in range(warmup + repeats):
        rng.shuffle(order)
        for name in order:
            configurations[name]()
            started = time.perf_counter()
            call(i)
            if i >= warmup:
                samples[name].append((time.perf_counter() - started) * 1000)
    return {name: _summary(s) for name, s in samples.items()}


def run(memories: int, queries: int, top_n: int) -> dict[str, dict[str, float]]:
    from memsvc.adapters.local.http_rerank import HttpReranker
    from memsvc.bootstrap import build_local
    from tests.fakes.embedder import HashEmbedder
    from tests.fakes.rerank_server import FakeRerankServer

    chosen = _Chosen()
    texts = [q for q, _ in _semantic_queries(queries, random.Random(7))]
    results: dict[str, dict[str, float]] = {}
    with tempfile.TemporaryDirectory(prefix="memsvc-rerank-") as tmp, FakeRerankServer("tei") as fake:
        app = build_local(Path(tmp) / "data", embedder=HashEmbedder(), start_workers=False, reranker=chosen)
        try:
            caller = Caller(tenant_id=TENANT, user_id=USER)
            started = time.perf_counter()
            for i in range(memories):
                app.services.memories.put(caller, PutMemory(namespace=["user", USER], key=f"k{i}", value=make_value(i)))
                if (i + 1) % 2000 == 0:
                    app.workers.run_cycle("indexer")
            while app.workers.run_cycle("indexer").total:
                pass
            print(f"filled {memories} memories in {time.perf_counter() - started:.0f} s", file=sys.stderr)

            def search(i: int) -> None:
                app.services.search.search(caller, SearchQuery(namespace_prefix=["user", USER],
                                                               query=texts[i % len(texts)], limit=10))

            adapters = {"in-process": _AtOnce(), "http": HttpReranker(fake.url, api="tei"),
                        "bedrock": _StubbedBedrock()}
            admin = Caller(tenant_id=TENANT, user_id="root", roles=("admin",))

            def configure(name, adapter):
                def setup() -> None:
                    enabled = adapter is not None
                    if app.settings.get(TENANT).rerank.enabled != enabled:
                        app.services.admin.put_settings(admin, SettingsPatch(
                            rerank=RerankSetting(enabled=enabled, top_n=top_n)))
                    chosen.current = (name, adapter)
                return setup

            results.update(_taking_turns({"search, rerank off": configure("off", None), **{
                f"search, rerank {name}": configure(name, adapter) for name, adapter in adapters.items()}},
                search, queries))
            for name, calls in chosen.calls.items():
                results[f"{name} calls within those searches"] = _summary(calls[-queries:])
            sample = [make_value(i)["text"] for i in range(top_n)]
            for name, adapter in adapters.items():
                results[f"{name} adapter alone, {top_n} texts"] = _timed(
                    lambda i: adapter.rerank(texts[i % len(texts)], sample, model_id=None), queries)
        finally:
            app.close()
    return results


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--memories", type=int, default=10_000)
    parser.add_argument("--queries", type=int, default=300)
    parser.add_argument("--top-n", type=int, default=30, help="the tenant's rerank.top_n")
    args = parser.parse_args(argv)
    LocalSettings.one_blas_thread()  # as `memsvc serve` runs (numpy is not loaded yet)
    results = run(args.memories, args.queries, args.top_n)
    off = results["search, rerank off"]
    for name, r in results.items():
        added = (f"  (+{r['p50_ms'] - off['p50_ms']:.2f} p50, +{r['p95_ms'] - off['p95_ms']:.2f} p95)"
                 if name.startswith("search, rerank ") and r is not off else "")
        print(f"{name:>32}: p50 {r['p50_ms']:6.2f} ms  p95 {r['p95_ms']:6.2f} ms  p99 {r['p99_ms']:6.2f} ms{added}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
