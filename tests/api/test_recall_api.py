"""`POST /v1/memories/recall` over HTTP on both live servers (the real MiniLM embedder)."""

from __future__ import annotations

from tests.api.helpers import assert_error, put_ok

RECALLED_KEYS = {"id", "namespace", "key", "layer", "content", "type", "relevance", "match", "importance", "pinned",
                 "tags", "category", "source", "created_at", "updated_at", "truncated", "graph_hops"}
METADATA_KEYS = {"count", "total_count", "truncated", "token_count", "token_budget", "searched_layers",
                 "query_embedding_ms", "retrieval_ms"}


def test_recall_finds_a_preference_by_meaning_across_the_callers_layers(me, uid):
    put_ok(me, ["user", uid, "memories"], "pm", {
        "content": "User prefers uv over pip for Python dependency management", "type": "preference",
        "source": "chat"}, index_fields=["content"], sync_index=True)
    put_ok(me, ["user", uid, "agents", "coder"], "style", {"content": "Format Python code with black",
                                                          "type": "decision"}, index_fields=["content"],
           sync_index=True)
    r = me.post("/v1/memories/recall", json={"query": "What package manager should I use for my Python project?",
                                             "identifiers": {"agent_id": "coder"}, "token_budget": 50})
    assert r.status_code == 200, r.text
    body = r.json()
    assert set(body) == {"memories", "metadata"} and set(body["metadata"]) == METADATA_KEYS
    first = body["memories"][0]
    assert set(first) == RECALLED_KEYS
    assert (first["key"], first["layer"], first["type"]) == ("pm", "user", "preference")
    assert body["metadata"]["searched_layers"][:2] == ["agent", "user"]
    assert body["metadata"]["token_count"] <= 50 and body["metadata"]["query_embedding_ms"] > 0


def test_recall_without_a_match_is_an_empty_answer(me, uid):
    put_ok(me, ["user", uid, "memories"], "pm", {"content": "User prefers uv over pip", "importance": 1.0,
                                                 "pinned": True}, index_fields=["content"], sync_index=True)
    r = me.post("/v1/memories/recall", json={"query": "What is the weather like on Mars?"})
    assert r.status_code == 200 and r.json()["memories"] == [] and r.json()["metadata"]["count"] == 0


def test_recall_errors_name_the_layer(me):
    body = assert_error(me.post("/v1/memories/recall", json={"query": "x", "layers": ["session"]}), 400,
                        "MISSING_IDENTIFIER")
    assert body["details"] == {"layer": "session", "missing": ["session_id"]}
    assert_error(me.post("/v1/memories/recall", json={"query": "x", "layers": ["galaxy"]}), 400, "INVALID_LAYER")
    assert_error(me.post("/v1/memories/recall", json={"query": "x", "token_budget": 9000}), 400, "INVALID_ARGUMENT")
