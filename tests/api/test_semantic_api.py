"""Semantic upsert's edges over HTTP, on both live servers: an item a plain `PUT /v1/memories`
put into the semantic namespace is not a semantic memory (404, never a 500)."""

from __future__ import annotations

from tests.api.helpers import ns_query


def test_a_plain_item_under_a_semantic_key_is_404_not_500(me, uid):
    ns = ["user", uid, "semantic"]
    r = me.put("/v1/memories", json={"namespace": ns, "key": "e:raw", "value": {"note": "mine"}})
    assert r.status_code in (200, 201), r.text
    got = me.get("/v1/memory/semantic", params={"external_id": "raw"})
    assert got.status_code == 404 and got.json()["error"]["code"] == "NOT_FOUND"
    assert me.delete("/v1/memory/semantic", params={"external_id": "raw"}).status_code == 204
    kept = me.get("/v1/memories", params=ns_query(ns, "e:raw"))
    assert kept.status_code == 200, kept.text  # the user's own item is left alone
    up = me.post("/v1/memory/semantic", json={"content": "now semantic", "external_id": "raw"})
    assert up.json()["action"] == "created"
    assert me.get("/v1/memory/semantic", params={"external_id": "raw"}).json()["content"] == "now semantic"


def test_neither_or_both_references_name_the_query_not_a_body(me):
    for params in ({}, {"external_id": "e", "content_hash": "0" * 64}):
        for method in (me.get, me.delete):
            r = method("/v1/memory/semantic", params=params)
            assert r.status_code == 400 and r.json()["error"]["details"]["field"] == "query", r.text
            assert "exactly one of external_id and content_hash" in r.json()["error"]["message"]
