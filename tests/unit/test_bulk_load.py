"""benchmarks.bulk_load: a data directory filled in process serves what one filled through the
HTTP API serves (the router's requests and the feed's consumers, as `memsvc serve` runs them)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import pytest

from benchmarks.bulk_load import KnownTextsEmbedder, bulk_load
from benchmarks.peers import ATTRIBUTES_REGO  # `kind` becomes a policy attribute, as peers makes it
from memsvc.bootstrap import build_local
from memsvc.local_server import build_event, stringify_claims
from tests.fakes.embedder import HashEmbedder

TENANT, USER = "acme", "alice"
ALICE = {"sub": USER, "tenant_id": TENANT}
ADMIN = {"sub": "root", "tenant_id": TENANT, "roles": ["admin"]}
TEXTS = ["Alice met Bob in Paris to talk about Python", "Bob prefers green tea in the morning",
         "The deploy to Berlin failed on Friday", "Carol reviews every Rust change"]
KINDS = ["fact", "preference", "episode"]


def items() -> list[tuple[list[str], str, dict[str, Any]]]:
    # Texts repeat across items, as a benchmark's do: each is embedded once.
    return [(["user", USER, f"topic-{i % 3}"], f"k{i}",
             {"text": TEXTS[i % len(TEXTS)], "lang": ["en", "de"][i % 2], "kind": KINDS[i % 3], "n": i})
            for i in range(24)]


def call(app, method: str, path: str, *, body: Any = None, query: dict | None = None,
         claims: dict = ALICE) -> dict[str, Any]:
    event = build_event(method=method, path=path, raw_query=urlencode(query or {}, doseq=True), headers={},
                        source_ip="127.0.0.1", body=json.dumps(body) if body is not None else None,
                        authorizer={"jwt": {"claims": stringify_claims(claims), "scopes": None}})
    response = app.router.handle(event)
    assert response["statusCode"] < 300, response["body"]
    return json.loads(response["body"]) if response.get("body") else {}


def drain(app) -> None:
    for consumer in ("indexer", "timeline"):
        while app.workers.run_cycle(consumer).total:
            pass


def load_over_http(data_dir: Path) -> None:
    app = build_local(data_dir, embedder=HashEmbedder(), start_workers=False)
    try:
        policies = call(app, "GET", "/admin/v1/memories/policies", claims=ADMIN)["policies"]
        call(app, "PUT", "/admin/v1/memories/policies", claims=ADMIN,
             body={"policies": {**policies, "attributes.rego": ATTRIBUTES_REGO}})
        for ns, key, value in items():
            call(app, "PUT", "/v1/memories", body={"namespace": ns, "key": key, "value": value,
                                                   "index_fields": ["text"]})
        drain(app)
    finally:
        app.close()


INSTANCE_FIELDS = {"id", "memory_id", "created_at", "updated_at", "occurred_at", "event_id", "cursor", "resume_cursor",
                   "next_cursor", "latency_ms", "stats"}


def without_instance_fields(found: Any) -> Any:
    """An answer without what differs between two writes of the same data: ids, times, cursors."""
    if isinstance(found, dict):
        return {k: without_instance_fields(v) for k, v in found.items()
                if k not in INSTANCE_FIELDS}
    if isinstance(found, list):
        return sorted((without_instance_fields(x) for x in found), key=lambda x: json.dumps(x, sort_keys=True))
    return round(found, 6) if isinstance(found, float) else found


ASKED = [
    ("GET", "/v1/memories", None, {"ns": ["user", USER, "topic-1"], "key": "k4"}, ALICE),
    ("GET", "/v1/memories", None, {"ns": ["user", USER, "topic-2"], "key": "k23"}, ALICE),
    ("POST", "/v1/memories/search", {"namespace_prefix": ["user", USER, "topic-0"], "filter": {"lang": "de"}}, None,
     ALICE),
    ("POST", "/v1/memories/search", {"namespace_prefix": ["user", USER], "filter": {"kind": "episode"},
                                     "limit": 50}, None, ALICE),
    ("POST", "/v1/memories/search", {"namespace_prefix": ["user", USER], "query": "tea in the morning",
                                     "mode": "semantic", "limit": 50}, None, ALICE),
    ("POST", "/v1/memories/search", {"namespace_prefix": ["user", USER], "query": "deploy Berlin",
                                     "limit": 50}, None, ALICE),
    ("POST", "/v1/memories/search", {"namespace_prefix": ["user", USER], "query": "Rust",
                                     "mode": "keyword", "limit": 50}, None, ALICE),
    ("GET", "/v1/memories/namespaces", None, {"prefix": ["user", USER]}, ALICE),
    ("GET", "/v1/memories/events", None, {"ns": ["user", USER], "limit": 100}, ALICE),
    ("POST", "/v1/graph/entities/find", {"namespace_prefix": ["user", USER], "names": ["Bob", "Paris", "Berlin"]},
     None, ALICE),
    ("GET", "/admin/v1/memories/index/status", None, None, ADMIN),
]


@pytest.mark.parametrize("asked", ASKED, ids=[f"{m} {p} {json.dumps(b or q)[:60]}" for m, p, b, q, _ in ASKED])
def test_a_bulk_loaded_directory_answers_as_one_loaded_over_http(loaded_both, asked):
    method, path, body, query, claims = asked
    bulk, http = loaded_both
    from_bulk = call(bulk, method, path, body=body, query=query, claims=claims)
    assert without_instance_fields(from_bulk) == without_instance_fields(
        call(http, method, path, body=body, query=query, claims=claims))


def test_the_answers_compared_are_not_empty(loaded_both):
    bulk, _ = loaded_both
    found = call(bulk, "POST", "/v1/memories/search",
                 body={"namespace_prefix": ["user", USER], "filter": {"kind": "episode"}, "limit": 50})
    assert sorted(m["key"] for m in found["items"]) == sorted(f"k{i}" for i in range(24) if i % 3 == 2)
    semantic = call(bulk, "POST", "/v1/memories/search",
                    body={"namespace_prefix": ["user", USER], "query": "green tea", "mode": "semantic"})
    assert semantic["items"][0]["value"]["text"] == TEXTS[1]
    assert call(bulk, "GET", "/admin/v1/memories/index/status", claims=ADMIN)["pending"] == 0
    assert len(call(bulk, "GET", "/v1/memories/events", query={"ns": ["user", USER], "limit": 100})["events"]) == 24
    assert call(bulk, "POST", "/v1/graph/entities/find",
                body={"namespace_prefix": ["user", USER], "names": ["Paris"]})["entities"]


def test_each_distinct_text_is_embedded_once(tmp_path):
    model = HashEmbedder()
    loaded = bulk_load(tmp_path / "data", items(), tenant=TENANT, user=USER, embedder=KnownTextsEmbedder(model),
                       index_fields=["text"], batch=5)
    assert loaded.items == 24
    assert sorted(t for call_ in model.calls for t in call_) == sorted(TEXTS)


@pytest.fixture(scope="module")
def loaded_both(tmp_path_factory):
    root = tmp_path_factory.mktemp("bulk")
    bulk_load(root / "bulk", items(), tenant=TENANT, user=USER, embedder=KnownTextsEmbedder(HashEmbedder()),
              index_fields=["text"], policies={"attributes.rego": ATTRIBUTES_REGO}, batch=10)
    load_over_http(root / "http")
    bulk = build_local(root / "bulk", embedder=HashEmbedder(), start_workers=False)
    http = build_local(root / "http", embedder=HashEmbedder(), start_workers=False)
    yield bulk, http
    bulk.close()
    http.close()
