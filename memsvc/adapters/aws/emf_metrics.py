"""The AWS `Metrics` adapter: seed 001's metrics as CloudWatch EMF documents (Powertools), printed
to stdout as each request is answered; CloudWatch Logs turns them into metrics.

Names are seed 001's own (`memory.operations.total`; CloudWatch takes dots). Dimensions, chosen
for cardinality (every distinct combination is a billed custom metric): one per operation and
one per tenant, never operation x tenant, so a new tenant adds a handful of metrics, not one per
route. Each document has two dimension sets of at most three dimensions and at most two metrics,
far under EMF's 30 dimensions and 100 metrics.

- `memory.operations.total` (Count) and `memory.operations.latency` (Milliseconds):
  `[service, operation]` and `[service, tenant]`.
- `memory.operations.errors` (Count): `[service, operation, code]` and `[service, tenant, code]`.
- `memory.search.results` (Count, one value per search): `[service, operation, layer]`.
- `graph_query_duration_seconds` (Seconds), `graph_query_result_count` and `graph_traversal_depth`
  (Count), seed 001's graph metrics, one set per graph query: `[service, query]` and `[service, tenant]`.
"""

from __future__ import annotations

from aws_lambda_powertools.metrics import EphemeralMetrics, MetricUnit

from memsvc.ports import GraphQuerySample, OperationSample

__all__ = ["EmfMetrics"]


class EmfMetrics:
    def __init__(self, *, namespace: str, service: str) -> None:
        self._namespace = namespace
        self._service = service

    def record(self, sample: OperationSample) -> None:
        # Its own metric set per request: Powertools' `Metrics` shares one across instances, which
        # holds the function's per-invocation metrics and would mix their dimensions with these.
        emf = EphemeralMetrics(namespace=self._namespace, service=self._service)  # `service`: in every set
        emf.add_dimension(name="operation", value=sample.operation)
        emf.add_dimensions(service=self._service, tenant=sample.tenant)
        emf.add_metric(name="memory.operations.total", unit=MetricUnit.Count, value=1)
        emf.add_metric(name="memory.operations.latency", unit=MetricUnit.Milliseconds, value=sample.latency_ms)
        emf.flush_metrics()
        if sample.code is not None:
            emf.add_dimension(name="operation", value=sample.operation)
            emf.add_dimension(name="code", value=sample.code)
            emf.add_dimensions(service=self._service, tenant=sample.tenant, code=sample.code)
            emf.add_metric(name="memory.operations.errors", unit=MetricUnit.Count, value=1)
            emf.flush_metrics()
        for layer, count in (sample.results or {}).items():
            emf.add_dimension(name="operation", value=sample.operation)
            emf.add_dimension(name="layer", value=layer)
            emf.add_metric(name="memory.search.results", unit=MetricUnit.Count, value=count)
            emf.flush_metrics()

    def graph_query(self, sample: GraphQuerySample) -> None:
        emf = EphemeralMetrics(namespace=self._namespace, service=self._service)
        emf.add_dimension(name="query", value=sample.query)
        emf.add_dimensions(service=self._service, tenant=sample.tenant)
        emf.add_metric(name="graph_query_duration_seconds", unit=MetricUnit.Seconds, value=sample.duration_seconds)
        emf.add_metric(name="graph_query_result_count", unit=MetricUnit.Count, value=sample.results)
        emf.add_metric(name="graph_traversal_depth", unit=MetricUnit.Count, value=sample.depth)
        emf.flush_metrics()

    def count(self, name: str, tenant: str, n: int = 1) -> None:
        emf = EphemeralMetrics(namespace=self._namespace, service=self._service)
        emf.add_dimensions(service=self._service, tenant=tenant)
        emf.add_metric(name=name, unit=MetricUnit.Count, value=n)
        emf.flush_metrics()

    def exposition(self) -> None:
        return None  # pushed to CloudWatch, not scraped
