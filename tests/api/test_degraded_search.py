"""Search and recall over HTTP while the embedding model fails (seed 004's failure table): the ASGI
app `memsvc serve` runs, in process, on an embedder that can be made to fail. Hybrid answers
`200` from the keyword index with `metadata.degraded: true`; `mode: semantic` answers `503` in the
error envelope, never a `500` nor the model's own words; the metrics count both."""

from __future__ import annotations

import asyncio
import logging

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from memsvc.local_server import LocalServer
from tests.conftest import local_data_dir
from tests.fakes.embedder import HashEmbedder

TENANT = "acme"
HOME = ["user", "alice"]


@pytest.fixture
def app(tmp_path, clock):
    from memsvc.bootstrap import build_local

    app = build_local(local_data_dir(tmp_path), embedder=HashEmbedder(), clock=clock, start_workers=False)
    yield app
    app.close()


@pytest.fixture
def call(app):
    """`call(method, path, json=...)` -> the response, as alice of acme, through the ASGI app."""
    server = LocalServer(app.router, app.issuer, threads=2)
    token = app.issuer.mint(sub="alice", tenant=TENANT)

    def call(method: str, path: str, **kw) -> httpx.Response:
        async def send() -> httpx.Response:
            async with httpx.AsyncClient(transport=httpx.ASGITransport(app=server), base_url="http://memsvc") as c:
                return await c.request(method, path, headers={"Authorization": f"Bearer {token}"}, **kw)

        return asyncio.run(send())

    return call


@pytest.fixture
def notes(app, call):
    for key, text in (("inc", "Incident INC-20931: the billing export failed"),
                      ("tea", "Alice drinks green tea every morning")):
        r = call("PUT", "/v1/memories", json={"namespace": [*HOME, "notes"], "key": key, "value": {"text": text},
                                              "sync_index": True})
        assert r.status_code == 200, r.text
    app.embedder.fail_next = 10**6  # the model fails every request from now on
    return app


def samples(app) -> dict[tuple[str, frozenset], float]:
    text = app.services.metrics.exposition()[0].decode()
    return {(s.name, frozenset(s.labels.items())): s.value
            for family in text_string_to_metric_families(text) for s in family.samples}


def test_hybrid_search_answers_200_from_keywords_marked_degraded(notes, call, caplog):
    with caplog.at_level(logging.WARNING, logger="memsvc.service.search"):
        r = call("POST", "/v1/memories/search", json={"namespace_prefix": HOME, "query": "billing export"})
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["metadata"] == {"degraded": True}
    assert [i["key"] for i in body["items"]] == ["inc"]
    assert body["items"][0]["scores"]["semantic"] is None and body["items"][0]["scores"]["keyword"] > 0
    [warning] = [rec for rec in caplog.records if rec.name == "memsvc.service.search"]
    assert (warning.request_id, warning.tenant, warning.code) == (r.headers["x-request-id"], TENANT,
                                                                  "EMBEDDING_FAILED")
    assert "billing" not in warning.getMessage() and "injected" not in warning.getMessage()


def test_semantic_search_answers_503_in_the_envelope(notes, call):
    r = call("POST", "/v1/memories/search", json={"namespace_prefix": HOME, "query": "billing export",
                                                  "mode": "semantic"})
    assert r.status_code == 503
    error = r.json()["error"]
    assert error["code"] == "EMBEDDING_FAILED" and error["retryable"] is True
    assert "injected" not in r.text and "RuntimeError" not in r.text  # the model's words stay inside
    errors = {"operation": "POST /v1/memories/search", "tenant": TENANT, "code": "EMBEDDING_FAILED"}
    assert samples(notes)[("memory_operations_errors_total", frozenset(errors.items()))] == 1
    assert ("memory_operations_errors_total", frozenset({**errors, "code": "INTERNAL"}.items())) not in samples(notes)


def test_keyword_and_filter_searches_are_not_degraded(notes, call):
    keyword = call("POST", "/v1/memories/search", json={"namespace_prefix": HOME, "query": "green tea",
                                                        "mode": "keyword"})
    assert keyword.status_code == 200 and keyword.json()["metadata"] == {"degraded": False}
    listed = call("POST", "/v1/memories/search", json={"namespace_prefix": HOME})
    assert listed.status_code == 200 and listed.json()["metadata"] == {"degraded": False}
    assert len(listed.json()["items"]) == 2


def test_recall_answers_200_with_metadata_degraded(notes, call):
    r = call("POST", "/v1/memories/recall", json={"query": "green tea", "namespace_prefix": HOME})
    assert r.status_code == 200, r.text
    assert r.json()["metadata"]["degraded"] is True
    assert [m["key"] for m in r.json()["memories"]] == ["tea"]
    semantic = call("POST", "/v1/memories/recall", json={"query": "green tea", "namespace_prefix": HOME,
                                                          "mode": "semantic"})
    assert semantic.status_code == 503 and semantic.json()["error"]["code"] == "EMBEDDING_FAILED"


def test_degraded_answers_are_counted_per_tenant_and_stop_when_the_model_is_back(notes, call):
    for path, body in (("/v1/memories/search", {"namespace_prefix": HOME, "query": "billing export"}),
                       ("/v1/memories/recall", {"query": "green tea", "namespace_prefix": HOME})):
        assert call("POST", path, json=body).status_code == 200
    assert samples(notes)[("memory_search_degraded_total", frozenset({"tenant": TENANT}.items()))] == 2
    notes.embedder.fail_next = 0
    r = call("POST", "/v1/memories/search", json={"namespace_prefix": HOME, "query": "billing export"})
    assert r.status_code == 200 and r.json()["metadata"] == {"degraded": False}
    assert r.json()["items"][0]["scores"]["semantic"] is not None
    recalled = call("POST", "/v1/memories/recall", json={"query": "green tea", "namespace_prefix": HOME})
    assert recalled.json()["metadata"]["degraded"] is False
    assert samples(notes)[("memory_search_degraded_total", frozenset({"tenant": TENANT}.items()))] == 2
