"""`GET /metrics` over HTTP: seed 001's metrics in Prometheus' text format, with no token, on the
shared live server (`memsvc serve`). On the AWS backend they are EMF (tests/aws/test_functions.py)."""

from __future__ import annotations

import pytest
from prometheus_client.parser import text_string_to_metric_families

SECRET = "wombatquasar"  # in a namespace, a key, a value and a query; never in the metrics


def samples_of(text: str) -> dict[tuple[str, frozenset], float]:
    return {(s.name, frozenset(s.labels.items())): s.value
            for family in text_string_to_metric_families(text) for s in family.samples}


def test_metrics_are_served_without_a_token_and_carry_no_tenant_data(live_server, make_client, me, tenant, uid):
    if live_server.backend != "local":
        pytest.skip("memsvc serve's endpoint; on AWS the metrics are EMF")
    ns = ["user", uid, "memories", SECRET]
    assert me.put("/v1/memories", json={"namespace": ns, "key": SECRET, "value": {"text": SECRET},
                                       "sync_index": True}).status_code == 200  # searched at once below
    params = [("ns", s) for s in ns]
    assert me.get("/v1/memories", params=[*params, ("key", SECRET)]).status_code == 200
    assert me.get("/v1/memories", params=[*params, ("key", "absent")]).status_code == 404
    found = me.post("/v1/memories/search", json={"namespace_prefix": ns[:3], "query": SECRET, "mode": "keyword"})
    assert found.status_code == 200 and len(found.json()["items"]) == 1

    r = make_client(None).get("/metrics")
    assert r.status_code == 200, r.text
    assert r.headers["content-type"] == "text/plain; version=0.0.4; charset=utf-8"
    samples = samples_of(r.text)
    get = {"operation": "GET /v1/memories", "tenant": tenant}
    assert samples[("memory_operations_total", frozenset({**get, "status": "200"}.items()))] == 1
    assert samples[("memory_operations_errors_total", frozenset({**get, "code": "NOT_FOUND"}.items()))] == 1
    search = {"operation": "POST /v1/memories/search", "tenant": tenant, "layer": "user"}
    assert samples[("memory_search_results_sum", frozenset(search.items()))] == 1
    assert samples[("memory_storage_size", frozenset({"tenant": tenant, "layer": "user"}.items()))] == 1
    assert SECRET not in r.text and uid not in r.text


def test_metrics_are_not_served_on_aws(live_server, make_client):
    if live_server.backend == "local":
        pytest.skip("the AWS backend's answer")
    r = make_client(None).get("/metrics")
    assert r.status_code == 404 and r.json()["error"]["code"] == "NOT_FOUND"
