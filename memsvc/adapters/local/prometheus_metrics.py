"""The local `Metrics` adapter: seed 001's metrics in a `prometheus_client` registry of the app's
own, served at `GET /metrics`.

Prometheus names cannot hold dots, so `memory.operations.total` is `memory_operations_total`, and
so on; `prometheus_client` exposes a counter as `<name>_total` (and `<name>_created`), so
`memory.operations.errors` is scraped as `memory_operations_errors_total`. Latency is in
milliseconds, as seed 001 says, not Prometheus' usual seconds.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Iterator

from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest
from prometheus_client.exposition import CONTENT_TYPE_PLAIN_0_0_4
from prometheus_client.metrics_core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from memsvc.api.metering import NO_LAYER
from memsvc.ports import GraphQuerySample, OperationSample

__all__ = ["PrometheusMetrics", "StorageUsage"]

# (tenant, layer or None outside every layer, live items, sealed bytes)
StorageUsage = Callable[[], Iterable[tuple[str, str | None, int, int]]]
LATENCY_BUCKETS_MS = (1, 2.5, 5, 10, 25, 50, 100, 250, 500, 1000, 2500, 5000, 10000)
RESULT_BUCKETS = (0, 1, 2, 3, 5, 10, 20, 50, 100)
GRAPH_SECONDS_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5)
DEPTH_BUCKETS = (0, 1, 2, 3, 4, 5, 6)


class PrometheusMetrics:
    def __init__(self, storage: StorageUsage | None = None) -> None:
        # The app's own registry, not prometheus_client's global one: two apps in one process
        # (the tests run several) keep their own counts, and registering twice is no error.
        self.registry = CollectorRegistry()
        self._total = Counter("memory_operations_total", "Memory operations answered, by operation and status",
                              ["operation", "tenant", "status"], registry=self.registry)
        self._errors = Counter("memory_operations_errors", "Memory operations that failed, by error code",
                               ["operation", "tenant", "code"], registry=self.registry)
        self._latency = Histogram("memory_operations_latency", "Memory operation latency in milliseconds",
                                  ["operation", "tenant"], buckets=LATENCY_BUCKETS_MS, registry=self.registry)
        self._results = Histogram("memory_search_results", "Results per search or recall, by layer "
                                  "(all: the whole answer)", ["operation", "tenant", "layer"],
                                  buckets=RESULT_BUCKETS, registry=self.registry)
        # Seed 001's graph metrics keep the seed's names and units (seconds, unlike the above).
        self._graph_seconds = Histogram("graph_query_duration_seconds", "Knowledge-graph query duration",
                                        ["query", "tenant"], buckets=GRAPH_SECONDS_BUCKETS, registry=self.registry)
        self._graph_results = Histogram("graph_query_result_count", "Results per knowledge-graph query",
                                        ["query", "tenant"], buckets=RESULT_BUCKETS, registry=self.registry)
        self._graph_depth = Histogram("graph_traversal_depth", "Hops expanded per knowledge-graph traversal",
                                      ["query", "tenant"], buckets=DEPTH_BUCKETS, registry=self.registry)
        if storage is not None:
            self.registry.register(_StorageCollector(storage))
        self._counters: dict[str, Counter] = {}
        self._counters_lock = threading.Lock()

    def record(self, sample: OperationSample) -> None:
        self._total.labels(sample.operation, sample.tenant, str(sample.status)).inc()
        if sample.code is not None:
            self._errors.labels(sample.operation, sample.tenant, sample.code).inc()
        self._latency.labels(sample.operation, sample.tenant).observe(sample.latency_ms)
        for layer, count in (sample.results or {}).items():
            self._results.labels(sample.operation, sample.tenant, layer).observe(count)

    def graph_query(self, sample: GraphQuerySample) -> None:
        self._graph_seconds.labels(sample.query, sample.tenant).observe(sample.duration_seconds)
        self._graph_results.labels(sample.query, sample.tenant).observe(sample.results)
        self._graph_depth.labels(sample.query, sample.tenant).observe(sample.depth)

    def count(self, name: str, tenant: str, n: int = 1) -> None:
        with self._counters_lock:
            counter = self._counters.get(name)
            if counter is None:
                counter = Counter(name.replace(".", "_"), f"{name}, per tenant", ["tenant"], registry=self.registry)
                self._counters[name] = counter
        counter.labels(tenant).inc(n)

    def exposition(self) -> tuple[bytes, str]:
        return generate_latest(self.registry), CONTENT_TYPE_PLAIN_0_0_4


class _StorageCollector(Collector):
    """`memory_storage_size` (live memories) and `memory_storage_bytes` (their sealed value and
    attributes), per tenant and layer, read from the store when the metrics are scraped."""

    def __init__(self, usage: StorageUsage) -> None:
        self._usage = usage

    def collect(self) -> Iterator[Metric]:
        items = GaugeMetricFamily("memory_storage_size", "Live memories, by tenant and layer",
                                  labels=["tenant", "layer"])
        size = GaugeMetricFamily("memory_storage_bytes", "Sealed bytes of the live memories (value and "
                                 "attributes ciphertext), by tenant and layer", labels=["tenant", "layer"])
        for tenant, layer, count, sealed in self._usage():
            items.add_metric([tenant, layer or NO_LAYER], count)
            size.add_metric([tenant, layer or NO_LAYER], sealed)
        yield items
        yield size

    def describe(self) -> list[Metric]:
        return []  # nothing to read at registration: the store is read only when scraped
