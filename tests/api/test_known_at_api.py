"""`known_at` (issue 25) over HTTP: the answer says it is historical (`metadata.known_at`, each
result's `current`), an answer without it keeps its shape, and an unanswerable `known_at` is a 400
in the error envelope naming the field, in the service's words."""

from __future__ import annotations

import asyncio

import httpx
import pytest

from memsvc.core.models import to_rfc3339
from memsvc.local_server import LocalServer

NS = ["user", "alice", "notes"]


@pytest.fixture
def app(local_app):
    return local_app


@pytest.fixture
def call(app):
    server = LocalServer(app.router, app.issuer, threads=2)
    token = app.issuer.mint(sub="alice", tenant="acme")

    def call(method: str, path: str, **kw) -> httpx.Response:
        async def send() -> httpx.Response:
            async with httpx.AsyncClient(transport=httpx.ASGITransport(app=server), base_url="http://memsvc") as c:
                return await c.request(method, path, headers={"Authorization": f"Bearer {token}"}, **kw)

        return asyncio.run(send())

    return call


def put(call, text):
    r = call("PUT", "/v1/memories", json={"namespace": NS, "key": "k", "value": {"text": text}, "sync_index": True})
    assert r.status_code == 200, r.text


def test_a_historical_answer_says_so(app, call, clock):
    put(call, "note one")
    known_at = to_rfc3339(clock.now())
    clock.advance(10)
    put(call, "note two")
    app.workers.run_cycle("timeline")
    for body in ({}, {"query": "note"}):
        r = call("POST", "/v1/memories/search", json={"namespace_prefix": ["user", "alice"], "known_at": known_at,
                                                      **body})
        assert r.status_code == 200, r.text
        assert [(i["value"]["text"], i["current"]) for i in r.json()["items"]] == [("note one", False)]
        assert r.json()["metadata"] == {"degraded": False, "known_at": known_at, "past_retention": 0}
    r = call("POST", "/v1/memories/search", json={"namespace_prefix": ["user", "alice"], "query": "note"})
    assert r.json()["metadata"] == {"degraded": False} and "current" not in r.json()["items"][0]
    r = call("POST", "/v1/memories/recall", json={"query": "note", "namespace_prefix": ["user", "alice"],
                                                  "known_at": known_at})
    assert r.status_code == 200, r.text
    assert [(m["content"], m["current"]) for m in r.json()["memories"]] == [("note one", False)]
    assert r.json()["metadata"]["known_at"] == known_at


@pytest.mark.parametrize(("path", "body", "field"), [
    ("/v1/memories/search", {"known_at": "2026-01-01T00:00:01Z"}, "known_at"),  # the clock is at 00:00:00
    ("/v1/memories/search", {"known_at": "2025-01-01T00:00:00Z"}, "known_at"),  # past the 90 days' retention
    ("/v1/memories/search", {"known_at": "2026-01-01T00:00:00"}, "known_at"),  # no offset
    ("/v1/memories/search", {"known_at": "2026-01-01T00:00:00Z", "refresh_ttl": True}, "refresh_ttl"),
    ("/v1/memories/recall", {"query": "note", "known_at": "2026-01-01T00:00:00Z", "graph_hops": 1}, "graph_hops"),
])
def test_refused_in_the_envelope(call, path, body, field):
    if path.endswith("search"):
        body = {"namespace_prefix": ["user", "alice"], **body}
    r = call("POST", path, json=body)
    assert r.status_code == 400, r.text
    error = r.json()["error"]
    assert error["code"] == "INVALID_ARGUMENT" and error["details"]["field"] == field
    assert "Traceback" not in error["message"] and "pydantic" not in error["message"].lower()
