"""Seed 001's metrics, in-process: what the router records (`memsvc.api.metering`) and what the
local adapter serves at `GET /metrics` (Prometheus' text format, from the app's own registry)."""

from __future__ import annotations

import json

import pytest
from prometheus_client.parser import text_string_to_metric_families

from memsvc.adapters.local.prometheus_metrics import PrometheusMetrics
from memsvc.api.metering import search_results
from memsvc.api.routes import ROUTES
from memsvc.api.openapi import openapi_document
from memsvc.local_server import build_event, stringify_claims
from memsvc.ports import OperationSample

SECRET = "quokkazanzibar"  # stored, used as a namespace segment, a key and a query: never in a label
ALICE = {"sub": "alice", "tenant_id": "acme"}
LAYER_NS = ["user", "alice", "memories"]  # the user layer
OTHER_NS = ["user", "alice", f"{SECRET}-notes"]  # outside every layer


def call(app, method, path, query="", body=None, claims=None):
    authorizer = {"jwt": {"claims": stringify_claims(claims), "scopes": None}} if claims else None
    event = build_event(method=method, path=path, raw_query=query, headers={}, source_ip="127.0.0.1",
                        body=json.dumps(body) if body is not None else None, authorizer=authorizer)
    return app.router.handle(event)


def scrape(app) -> tuple[str, dict[tuple[str, frozenset], float]]:
    """The text `GET /metrics` answers (asked without a token), and each sample by name and labels."""
    response = call(app, "GET", "/metrics")
    assert response["statusCode"] == 200
    assert response["headers"]["content-type"] == "text/plain; version=0.0.4; charset=utf-8"
    text = response["body"]
    samples = {(s.name, frozenset(s.labels.items())): s.value
               for family in text_string_to_metric_families(text) for s in family.samples}
    return text, samples


def value(samples, name, **labels) -> float | None:
    return samples.get((name, frozenset(labels.items())))


def test_operations_are_counted_by_route_template_tenant_and_status(local_app):
    put = {"namespace": LAYER_NS, "key": SECRET, "value": {"text": f"the code word is {SECRET}"}}
    assert call(local_app, "PUT", "/v1/memories", body=put, claims=ALICE)["statusCode"] == 200
    put_other = {"namespace": OTHER_NS, "key": "k", "value": {"text": SECRET}}
    assert call(local_app, "PUT", "/v1/memories", body=put_other, claims=ALICE)["statusCode"] == 200
    query = f"ns=user&ns=alice&ns=memories&key={SECRET}"
    assert call(local_app, "GET", "/v1/memories", query, claims=ALICE)["statusCode"] == 200
    assert call(local_app, "GET", "/v1/memories", query + "x", claims=ALICE)["statusCode"] == 404

    _, samples = scrape(local_app)
    put_labels = {"operation": "PUT /v1/memories", "tenant": "acme"}
    assert value(samples, "memory_operations_total", status="200", **put_labels) == 2
    assert value(samples, "memory_operations_total", operation="GET /v1/memories", tenant="acme", status="200") == 1
    assert value(samples, "memory_operations_total", operation="GET /v1/memories", tenant="acme", status="404") == 1
    assert value(samples, "memory_operations_latency_count", **put_labels) == 2
    assert value(samples, "memory_operations_latency_bucket", le="+Inf", **put_labels) == 2
    assert value(samples, "memory_operations_latency_sum", **put_labels) > 0
    # the storage gauges, per layer: live items and their sealed bytes
    assert value(samples, "memory_storage_size", tenant="acme", layer="user") == 1
    assert value(samples, "memory_storage_size", tenant="acme", layer="none") == 1
    assert value(samples, "memory_storage_bytes", tenant="acme", layer="user") > len(SECRET)


def test_errors_are_counted_by_code(local_app):
    call(local_app, "GET", "/v1/memories", "ns=user&ns=alice&key=absent", claims=ALICE)  # 404
    call(local_app, "GET", "/v1/memories", "ns=user&ns=bob&key=k", claims=ALICE)  # 403
    call(local_app, "PUT", "/v1/memories", body={"namespace": [], "key": "k", "value": {}}, claims=ALICE)  # 400
    call(local_app, "GET", "/v1/memories", "ns=user&ns=alice&key=k")  # 401: no identity
    call(local_app, "GET", f"/v1/{SECRET}")  # no route
    call(local_app, "PATCH", "/v1/memories", claims=ALICE)  # 405

    _, samples = scrape(local_app)
    get = {"operation": "GET /v1/memories"}
    assert value(samples, "memory_operations_errors_total", tenant="acme", code="NOT_FOUND", **get) == 1
    assert value(samples, "memory_operations_errors_total", tenant="acme", code="FORBIDDEN", **get) == 1
    assert value(samples, "memory_operations_errors_total", operation="PUT /v1/memories", tenant="acme",
                 code="INVALID_ARGUMENT") == 1
    assert value(samples, "memory_operations_errors_total", tenant="-", code="UNAUTHORIZED", **get) == 1
    assert value(samples, "memory_operations_errors_total", operation="UNMATCHED", tenant="-",
                 code="NOT_FOUND") == 1
    assert value(samples, "memory_operations_errors_total", operation="UNMATCHED", tenant="-",
                 code="METHOD_NOT_ALLOWED") == 1
    assert value(samples, "memory_operations_total", tenant="-", status="401", **get) == 1


def test_search_results_are_counted_per_search_and_per_searched_layer(local_app):
    for key in ("a", "b"):
        call(local_app, "PUT", "/v1/memories", claims=ALICE,
             body={"namespace": LAYER_NS, "key": key, "value": {"text": f"{SECRET} {key}"}})
    call(local_app, "PUT", "/v1/memories", claims=ALICE, body={"namespace": OTHER_NS, "key": "c", "value": {}})
    search = "POST /v1/memories/search"
    call(local_app, "POST", "/v1/memories/search", body={"namespace_prefix": ["user", "alice"]}, claims=ALICE)
    call(local_app, "POST", "/v1/memories/search", body={"namespace_prefix": LAYER_NS}, claims=ALICE)
    call(local_app, "POST", "/v1/memories/search", body={"namespace_prefix": LAYER_NS, "filter": {"x": 1}},
         claims=ALICE)
    call(local_app, "POST", "/v1/memories/search", body={"namespace_prefix": ["team", "t1"]}, claims=ALICE)

    _, samples = scrape(local_app)
    labels = {"operation": search, "tenant": "acme"}
    assert value(samples, "memory_search_results_count", layer="all", **labels) == 3
    assert value(samples, "memory_search_results_sum", layer="all", **labels) == 3 + 2 + 0
    assert value(samples, "memory_search_results_bucket", layer="all", le="0.0", **labels) == 1  # none found
    # a search inside one layer is counted for that layer too; one across layers only as `all`
    assert value(samples, "memory_search_results_count", layer="user", **labels) == 2
    assert value(samples, "memory_search_results_sum", layer="user", **labels) == 2 + 0
    assert value(samples, "memory_search_results_count", layer="team", **labels) is None  # 403: not a search


def test_recall_is_counted_from_its_memories_and_searched_layers():
    """Recall's answer (`memories`, `metadata.searched_layers`), as API-AGENT.md shapes it: each
    searched layer gets a count, an empty one included; a name outside the layers is no label."""
    answer = {"memories": [{"namespace": ["user", "u1", "memories"]}, {"namespace": ["user", "u1", "memories"]},
                           {"namespace": ["company"]}],
              "metadata": {"searched_layers": ["user", "session", "company", f"{SECRET}"]}}
    assert search_results(None, answer) == {"all": 3, "user": 2, "session": 0, "company": 1}


def test_metrics_need_no_token_and_are_not_counted_themselves(local_app):
    call(local_app, "GET", "/health")
    call(local_app, "GET", "/openapi.json")
    text, _ = scrape(local_app)
    text, samples = scrape(local_app)
    assert "memory_operations_total" in text  # declared...
    assert not [k for k in samples if k[0] == "memory_operations_total"]  # ...and nothing counted yet


def test_no_tenant_data_beyond_the_tenant_id_reaches_the_metrics(local_app):
    body = {"namespace": OTHER_NS, "key": f"{SECRET}-key", "value": {"text": SECRET},
            "attributes": {"hint": SECRET}}
    call(local_app, "PUT", "/v1/memories", body=body, claims=ALICE)
    call(local_app, "GET", "/v1/memories", f"ns=user&ns=alice&ns={SECRET}-notes&key={SECRET}-key", claims=ALICE)
    call(local_app, "POST", "/v1/memories/search", claims=ALICE,
         body={"namespace_prefix": ["user", "alice"], "query": f"where is {SECRET}", "mode": "keyword"})
    call(local_app, "GET", f"/v1/memories/{SECRET}", claims=ALICE)
    text, samples = scrape(local_app)
    assert value(samples, "memory_operations_total", operation="POST /v1/memories/search", tenant="acme",
                 status="200") == 1
    assert SECRET not in text and "alice" not in text
    labels = {name for (_, pairs) in samples for name, _ in pairs}
    assert labels <= {"operation", "tenant", "status", "code", "layer", "le"}


def test_each_app_has_its_own_registry():
    first, second = PrometheusMetrics(), PrometheusMetrics()
    first.record(OperationSample("GET /v1/memories", "acme", 200, None, 1.5))
    assert b'memory_operations_total{operation="GET /v1/memories",status="200",tenant="acme"} 1.0' in \
        first.exposition()[0]
    assert b"acme" not in second.exposition()[0]


def test_a_metric_that_cannot_be_recorded_does_not_fail_the_request(local_app, monkeypatch):
    def broken(sample):
        raise RuntimeError("metrics backend down")

    monkeypatch.setattr(local_app.services.metrics, "record", broken)
    response = call(local_app, "PUT", "/v1/memories", claims=ALICE,
                    body={"namespace": LAYER_NS, "key": "k", "value": {}})
    assert response["statusCode"] == 200


def test_the_openapi_document_lists_metrics_as_public_text():
    op = openapi_document(ROUTES)["paths"]["/metrics"]["get"]
    assert "security" not in op
    assert op["responses"]["200"]["content"] == {"text/plain; version=0.0.4": {"schema": {"type": "string"}}}


@pytest.mark.parametrize("code", ["not a code", "x" * 65, None, 7])
def test_an_error_code_that_is_not_one_is_unknown(code):
    from memsvc.api.metering import operation_sample
    from memsvc.api.router import Handled, Response

    sample = operation_sample(Handled(), Response(500, {"error": {"code": code}}), 1.0)
    assert sample.code == "UNKNOWN" and sample.operation == "UNMATCHED" and sample.tenant == "-"


def test_storage_usage_follows_every_write_and_is_counted_again_for_an_old_database(local_app, clock):
    """The per-namespace counts kept on each write equal a count over the items, through adds,
    a growing update, a delete, an expiry swept, a purge; and a database without them (from
    before the table) gets them on open."""
    from memsvc.adapters.local.sqlite_store import SqliteItemStore
    from memsvc.core.layers import layer_of
    from memsvc.core.models import Caller
    from memsvc.core.namespaces import decode_namespace
    from memsvc.service.memories import PutMemory

    alice = Caller(tenant_id="acme", user_id="alice", roles=("user",))
    memories, store = local_app.services.memories, local_app.store
    db = local_app.data_dir / "memsvc.db"

    def counted_over_items(conn) -> list[tuple]:
        """(tenant, layer, items, bytes) counted from the live items, their namespaces decoded."""
        totals: dict[tuple[str, str], list[int]] = {}
        for tenant, ns, items, size in conn.execute(
                "SELECT tenant, ns, count(*), sum(coalesce(length(value_ct), 0) + coalesce(length(attributes_ct), 0)) "
                "FROM items WHERE deleted IS NULL GROUP BY tenant, ns"):
            layer = layer_of(decode_namespace(ns))
            total = totals.setdefault((tenant, layer.name if layer else ""), [0, 0])
            total[0] += items
            total[1] += size
        return sorted((tenant, layer, n, size) for (tenant, layer), (n, size) in totals.items())

    def kept(conn) -> list[tuple]:
        return sorted(conn.execute("SELECT tenant, layer, items, bytes FROM usage").fetchall())

    for key in ("a", "b", "c"):
        memories.put(alice, PutMemory(namespace=LAYER_NS, key=key, value={"text": key}))
    memories.put(alice, PutMemory(namespace=OTHER_NS, key="t", value={"text": "soon gone"}, ttl_seconds=60))
    memories.put(alice, PutMemory(namespace=LAYER_NS, key="a", value={"text": "a much longer text " * 20},
                                  attributes={"tag": "x"}))
    memories.delete(alice, tuple(LAYER_NS), "b")
    conn = store._conn()
    assert [(layer, n) for _, layer, n, _ in kept(conn)] == [("", 1), ("user", 2)]
    assert kept(conn) == counted_over_items(conn)
    clock.advance(61)
    assert local_app.sweeper.sweep().expired == 1
    assert kept(conn) == counted_over_items(conn) and len(kept(conn)) == 1  # the emptied row is gone
    (tenant, layer, items, size), = store.storage_usage()
    assert (tenant, layer, items) == ("acme", "user", 2) and size > 400

    conn.execute("DELETE FROM usage")  # as a database from before the table
    assert kept(SqliteItemStore(db)._conn()) == counted_over_items(conn)


def test_storage_layers_are_read_from_stored_namespaces_that_are_percent_encoded(local_app):
    from memsvc.adapters.local.sqlite_store import SqliteItemStore
    from memsvc.core.models import Caller
    from memsvc.service.memories import PutMemory

    admin = Caller(tenant_id="acme", user_id="root", roles=("admin",))
    for ns in (["user", "a b/c", "agents", "ä x"], ["user", "a b/c", "memories"], ["project", "p%1"],
               ["user", "a b/c", "agents"], ["company"], ["team"]):
        local_app.services.memories.put(admin, PutMemory(namespace=ns, key="k", value={}))
    layers = {layer: items for _, layer, items, _ in local_app.store.storage_usage()}
    assert layers == {"agent": 1, "user": 1, "project": 1, "company": 1, None: 2}
    # recounted from the stored (encoded) namespaces, as when a database without the table is opened
    local_app.store._conn().execute("DELETE FROM usage")
    recounted = SqliteItemStore(local_app.data_dir / "memsvc.db").storage_usage()
    assert {layer: items for _, layer, items, _ in recounted} == layers
