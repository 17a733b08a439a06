"""Seed 001's graph metrics: `graph_query_duration_seconds`, `graph_query_result_count` and
`graph_traversal_depth`, scraped locally and pushed as EMF on AWS."""

from __future__ import annotations

import json

from memsvc.adapters.aws.emf_metrics import EmfMetrics
from memsvc.adapters.local.prometheus_metrics import PrometheusMetrics
from memsvc.ports import GraphQuerySample

SAMPLE = GraphQuerySample(query="path", tenant="acme", duration_seconds=0.012, results=4, depth=3)


def test_prometheus_histograms_by_query_and_tenant():
    metrics = PrometheusMetrics()
    metrics.graph_query(SAMPLE)
    text = metrics.exposition()[0].decode()
    assert 'graph_query_duration_seconds_bucket{le="0.025",query="path",tenant="acme"} 1.0' in text
    assert 'graph_query_duration_seconds_bucket{le="0.01",query="path",tenant="acme"} 0.0' in text
    assert 'graph_query_result_count_sum{query="path",tenant="acme"} 4.0' in text
    assert 'graph_traversal_depth_sum{query="path",tenant="acme"} 3.0' in text


def test_emf_one_record_with_the_three_metrics(capsys):
    EmfMetrics(namespace="memsvc", service="api").graph_query(SAMPLE)
    (line,) = capsys.readouterr().out.strip().splitlines()
    record = json.loads(line)
    (directive,) = record["_aws"]["CloudWatchMetrics"]
    assert {m["Name"]: m["Unit"] for m in directive["Metrics"]} == {
        "graph_query_duration_seconds": "Seconds", "graph_query_result_count": "Count",
        "graph_traversal_depth": "Count"}
    assert (record["query"], record["tenant"], record["graph_traversal_depth"]) == ("path", "acme", [3.0])
