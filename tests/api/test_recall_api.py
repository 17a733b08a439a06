"""`POST /v1/memories/recall` over HTTP on both live servers (the real MiniLM embedder)."""

from __future__ import annotations

from tests.api.helpers import assert_error, put_ok

RECALLED_KEYS = {"id", "namespace", "key", "layer", "content", "type", "relevance", "match", "importance", "pinned",
                 "tags", "category", "source", "created_at", "updated_at", "truncated", "graph_hops"}
METADATA_KEYS = {"count", "total_count", "truncated", "token_count", "token_budget", "searched_layers",
                 "query_embedding_ms", "retrieval_ms", "degraded"}


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


DOG = ["User's dog is a golden retriever named Biscuit.",  # the answer to BREED, well ahead of the rest
       "User walks the dog every morning before work.",
       "User's cat sleeps on the sofa all day.",
       "User buys pet food in bulk from the farm store.",
       "User took the dog to the vet for a vaccination in March."]
BREED = "What breed is my dog and what is it called?"
CUT_OFF = {"recall_cut_gap": 1.0, "recall_cut_margin": 1.0}


def _recalled_keys(client, **body) -> list[str]:
    r = client.post("/v1/memories/recall", json={"query": BREED, **body})
    assert r.status_code == 200, r.text
    return [m["key"] for m in r.json()["memories"]]


def test_a_clearly_best_memory_comes_back_alone_among_same_topic_ones(me, uid):
    for n, content in enumerate(DOG):
        put_ok(me, ["user", uid, "memories"], f"m{n}", {"content": content, "type": "fact"},
               index_fields=["content"], sync_index=True)
        put_ok(me, ["user", uid, "plain"], f"m{n}", {"text": content}, sync_index=True)
    assert _recalled_keys(me, namespace_prefix=["user", uid, "memories"]) == ["m0"]
    assert _recalled_keys(me, namespace_prefix=["user", uid, "plain"]) == ["m0"]
    both = me.post("/v1/memories/recall", json={"query": BREED, "limit": 1}).json()
    assert [m["key"] for m in both["memories"]] == ["m0"] and both["metadata"]["total_count"] == 1


def test_the_tenant_setting_turns_the_cut_off(me, admin, uid):
    for n, content in enumerate(DOG):
        put_ok(me, ["user", uid, "memories"], f"m{n}", {"content": content, "type": "fact"},
               index_fields=["content"], sync_index=True)
    defaults = admin.get("/admin/v1/memories/settings").json()
    assert defaults["recall_cut_gap"] < 1 and defaults["recall_cut_margin"] < 1  # on by default
    r = admin.put("/admin/v1/memories/settings", json=CUT_OFF)
    assert r.status_code == 200 and r.json()["recall_cut_margin"] == 1.0
    keys = _recalled_keys(me, namespace_prefix=["user", uid, "memories"])
    assert keys[0] == "m0" and len(keys) >= 3  # the same-topic memories over the fixed thresholds


def test_the_cut_settings_are_checked(admin):
    for bad in ({"recall_cut_gap": 1.5}, {"recall_cut_margin": -0.1}, {"recall_cut_gap": "0.1"},
                {"recall_cut_margin": None}):
        assert_error(admin.put("/admin/v1/memories/settings", json=bad), 400, "INVALID_ARGUMENT")
    assert admin.get("/admin/v1/memories/settings").json()["recall_cut_margin"] < 1  # unchanged: on


def test_the_cut_is_relative_to_the_callers_own_best_match(me, make_client, tenant, admin, uid):
    """Another user's better match is never seen, so it can neither come back nor cut the caller's."""
    put_ok(me, ["user", uid, "memories"], "walks", {"content": DOG[1], "type": "fact"}, index_fields=["content"],
           sync_index=True)
    other = make_client(uid + "x", tenant=tenant)
    for n, content in enumerate(DOG[:1] + [BREED]):
        put_ok(other, ["user", uid + "x", "memories"], f"o{n}", {"content": content, "type": "fact"},
               index_fields=["content"], sync_index=True)
    for settings in ({}, CUT_OFF):
        assert admin.put("/admin/v1/memories/settings", json=settings).status_code == 200
        r = me.post("/v1/memories/recall", json={"query": BREED, "namespace_prefix": []})
        assert r.status_code == 200, r.text
        assert [(m["namespace"], m["key"]) for m in r.json()["memories"]] == [(["user", uid, "memories"], "walks")]


TRIP = {"content": "User booked a flight to Lisbon for the conference", "type": "fact", "kind": "episodic",
        "tags": ["travel", "work"], "category": "work"}
FOOD = {"content": "User eats vegetarian food when travelling to Lisbon", "type": "preference", "kind": "semantic",
        "tags": ["food"], "category": "personal"}


def test_recall_filter_on_tags_category_and_kind(me, uid):
    for key, value in (("trip", TRIP), ("food", FOOD)):
        put_ok(me, ["user", uid, "memories"], key, value, index_fields=["content"], sync_index=True)

    def keys(**body) -> list[str]:
        r = me.post("/v1/memories/recall", json={"query": "Lisbon trip", "min_score": 0, **body})
        assert r.status_code == 200, r.text
        return [m["key"] for m in r.json()["memories"]]

    assert keys(filter={"tags": {"contains": "food"}}) == ["food"]
    assert keys(filter={"category": "work", "kind": {"$any": ["episodic"]}}) == ["trip"]
    assert keys(filter={"tags": {"not": {"contains": "food"}}, "category": {"exists": True}}) == ["trip"]
    assert keys(filter={"tags": {"contains": "food"}}, types=["fact"]) == []  # ANDed with types
    r = me.post("/v1/memories/search", json={"namespace_prefix": ["user", uid], "filter": {"tags": {"any": ["work"]}}})
    assert r.status_code == 200 and [m["key"] for m in r.json()["items"]] == ["trip"]


def test_a_malformed_filter_operator_is_our_400_naming_the_field(me):
    for path in ("/v1/memories/recall", "/v1/memories/search"):
        for flt, op in (({"tags": {"any": "travel"}}, "any"), ({"kind": {"exists": "yes"}}, "exists"),
                        ({"tags": {"not": {"not": {"eq": 1}}}}, "not")):
            body = assert_error(me.post(path, json={"query": "x", "namespace_prefix": [], "filter": flt}), 400,
                                "INVALID_ARGUMENT")
            assert body["details"]["field"] == "filter" and body["details"]["op"] == op, body
            assert repr(next(iter(flt))) in body["message"]
