"""Happy paths of every route in API.md (Memories without /events, Admin, Health) and
/openapi.json, against the shared live `memsvc serve`, with exact response shapes."""

from __future__ import annotations

import json
import re
import threading
import time
from datetime import timedelta

import httpx
import pytest

from memsvc.api.openapi import openapi_document
from memsvc.api.routes import ROUTES
from tests.api.helpers import (
    GET_KEYS,
    PUT_KEYS,
    SEARCH_ITEM_KEYS,
    assert_error,
    delete,
    get,
    keys_of,
    namespaces_ok,
    ns_query,
    parse_ts,
    put,
    put_ok,
    search,
    search_ok,
    signed_token,
    sync_index,
    unique_tenant,
)

pytestmark = pytest.mark.slow

UUIDISH = re.compile(r"^[0-9A-Za-z-]{8,}$")


# -- PUT / GET / DELETE --------------------------------------------------------------------------


def test_put_returns_metadata_without_value(me, home):
    ns = home + ["notes"]
    body = put_ok(me, ns, "k1", {"text": "hello", "n": 1}, attributes={"source": "chat"})
    assert set(body) == PUT_KEYS, body  # exactly the listed fields: no value
    assert body["namespace"] == ns
    assert body["key"] == "k1"
    assert body["attributes"] == {"source": "chat"}
    assert body["version"] == 1
    assert body["expires_at"] is None
    assert UUIDISH.match(body["id"])
    created, updated = parse_ts(body["created_at"]), parse_ts(body["updated_at"])
    assert created == updated


def test_get_returns_value_and_the_written_metadata(me, home):
    ns = home + ["notes"]
    written = put_ok(me, ns, "k1", {"text": "hello", "nested": {"list": [1, "two", None, True]}})
    r = get(me, ns, "k1")
    assert r.status_code == 200, r.text
    item = r.json()
    assert GET_KEYS <= set(item), item
    assert item["value"] == {"text": "hello", "nested": {"list": [1, "two", None, True]}}
    assert item["attributes"] is None
    for field in PUT_KEYS:
        assert item[field] == written[field], field


def test_updates_get_a_new_id_and_version_and_keep_created_at(me, home):
    ns = home + ["notes"]
    writes = []
    for i in range(3):
        writes.append(put_ok(me, ns, "k", {"i": i}))
        time.sleep(0.002)
    assert [w["version"] for w in writes] == [1, 2, 3]
    assert len({w["id"] for w in writes}) == 3, "id must be new for every write"
    assert len({w["created_at"] for w in writes}) == 1, "created_at survives updates"
    updated = [parse_ts(w["updated_at"]) for w in writes]
    assert updated[0] < updated[1] < updated[2]
    assert parse_ts(writes[0]["created_at"]) == updated[0]
    item = get(me, ns, "k").json()
    assert item["value"] == {"i": 2}
    assert item["id"] == writes[2]["id"]
    assert item["version"] == 3
    assert item["created_at"] == writes[0]["created_at"]
    assert item["updated_at"] == writes[2]["updated_at"]


def test_ttl_sets_expires_at_and_an_update_without_ttl_clears_it(me, home):
    ns = home + ["tmp"]
    body = put_ok(me, ns, "k", {"x": 1}, ttl_seconds=3600)
    expires = parse_ts(body["expires_at"])
    assert abs(expires - parse_ts(body["updated_at"]) - timedelta(seconds=3600)) < timedelta(seconds=1)
    assert get(me, ns, "k").json()["expires_at"] == body["expires_at"]
    body = put_ok(me, ns, "k", {"x": 2}, ttl_seconds=None)
    assert body["expires_at"] is None
    assert get(me, ns, "k").json()["expires_at"] is None


def test_delete_is_idempotent(me, home):
    ns = home + ["notes"]
    put_ok(me, ns, "gone", {"x": 1})
    put_ok(me, ns, "stays", {"x": 2})
    for _ in range(2):
        r = delete(me, ns, "gone")
        assert r.status_code == 204, r.text
        assert r.content == b""
    assert_error(get(me, ns, "gone"), 404, "NOT_FOUND")
    assert delete(me, ns, "never-existed").status_code == 204
    assert get(me, ns, "stays").json()["value"] == {"x": 2}
    # writing the key again brings it back with the new value
    again = put_ok(me, ns, "gone", {"x": 3})
    assert get(me, ns, "gone").json()["value"] == {"x": 3}
    assert again["version"] > 1


def test_default_tenant_is_used_without_a_tenant_claim(make_client, uid):
    ns = ["user", uid]
    implicit = make_client(uid)  # token without tenant_id
    explicit = make_client(uid, tenant="default")
    other = make_client(uid, tenant=unique_tenant())
    put_ok(implicit, ns, "k", {"where": "default"})
    assert get(explicit, ns, "k").json()["value"] == {"where": "default"}
    assert_error(get(other, ns, "k"), 404, "NOT_FOUND")


def test_awkward_namespace_segments_and_keys_round_trip(me, home):
    segments = ["a,b", "x/y%z", "ü ñ 日本 +&=?#", "%2C", "  spaced  ", "*", "."]
    ns = home + segments
    key = "k&=?+ é/%,;#"
    put_ok(me, ns, key, {"ok": True})
    r = me.get("/v1/memories", params=ns_query(ns, key))
    assert r.status_code == 200, r.text
    assert r.json()["namespace"] == ns
    assert r.json()["key"] == key
    # a comma inside a segment never splits it: ["a,b"] is not ["a", "b"]
    assert_error(get(me, home + ["a", "b"] + segments[1:], key), 404, "NOT_FOUND")
    assert [i["namespace"] for i in search_ok(me, home)] == [ns]
    assert namespaces_ok(me, prefix=home) == [ns]
    assert delete(me, ns, key).status_code == 204
    assert_error(get(me, ns, key), 404, "NOT_FOUND")


def test_key_of_exactly_1024_bytes_is_accepted(me, home):
    ns = home + ["keys"]
    ascii_key = "k" * 1024
    multibyte_key = "é" * 512  # 1024 bytes in UTF-8
    for key in (ascii_key, multibyte_key):
        put_ok(me, ns, key, {"len": len(key)})
        assert get(me, ns, key).json()["key"] == key
        assert delete(me, ns, key).status_code == 204


# -- search without a query ----------------------------------------------------------------------


def test_search_without_query_is_newest_first_with_null_scores_and_pages(me, home):
    for i in range(5):
        put_ok(me, home + ["s", str(i % 2)], f"k{i}", {"i": i})
        time.sleep(0.002)
    put_ok(me, home + ["s", "1"], "k1", {"i": 1, "again": True})  # moves k1 to the front
    items = search_ok(me, home, limit=100)
    assert keys_of(items) == ["k1", "k4", "k3", "k2", "k0"]
    for item in items:
        assert set(item) >= SEARCH_ITEM_KEYS
        assert item["score"] is None
    assert items[0]["value"] == {"i": 1, "again": True}
    stamps = [parse_ts(i["updated_at"]) for i in items]
    assert stamps == sorted(stamps, reverse=True)
    pages = [keys_of(search_ok(me, home, limit=2, offset=o)) for o in (0, 2, 4, 6)]
    assert pages == [["k1", "k4"], ["k3", "k2"], ["k0"], []]
    assert keys_of(search_ok(me, home + ["s", "0"])) == ["k4", "k2", "k0"]
    assert keys_of(search_ok(me, home + ["s", "1"])) == ["k1", "k3"]
    assert len(search_ok(me, home)) == 5  # default limit 10
    assert len(search_ok(me, home, limit=1)) == 1


def test_search_prefix_empty_list_means_everything_i_may_see(me, home, make_client, tenant):
    put_ok(me, home + ["a"], "mine", {"x": 1})
    other = make_client("other-" + tenant, tenant=tenant)
    put_ok(other, ["user", "other-" + tenant], "theirs", {"x": 2})
    assert keys_of(search_ok(me, [])) == ["mine"]
    assert keys_of(search_ok(me, ["user"])) == ["mine"]


def test_search_filters_compare_numbers_as_numbers(me, home):
    ns = home + ["nums"]
    for key, n in (("nine", 9), ("ten", 10), ("nine-half", 9.5), ("hundred", 100), ("str-ten", "10")):
        put_ok(me, ns, key, {"n": n})

    def found(flt):
        return sorted(keys_of(search_ok(me, home, filter=flt, limit=100)))

    assert found({"n": {"gt": 9}}) == ["hundred", "nine-half", "ten"]
    assert found({"n": {"$gt": 9}}) == ["hundred", "nine-half", "ten"]
    assert found({"n": {"gte": 9, "lt": 10}}) == ["nine", "nine-half"]
    assert found({"n": {"$lte": 9.5}}) == ["nine", "nine-half"]
    assert found({"n": 10}) == ["ten"]
    assert found({"n": {"$eq": 10}}) == ["ten"]
    assert found({"n": "10"}) == ["str-ten"]
    assert found({"n": {"in": [9, 100]}}) == ["hundred", "nine"]
    assert found({"n": {"$in": [9, 100]}}) == ["hundred", "nine"]
    assert found({"n": {"nin": [9, 100, "10"]}}) == ["nine-half", "ten"]
    assert found({"n": {"ne": 9}}) == ["hundred", "nine-half", "str-ten", "ten"]
    assert found({"n": {"$ne": 9}}) == ["hundred", "nine-half", "str-ten", "ten"]
    assert found({"missing": 1}) == []


def test_search_filters_on_dot_paths_and_timestamps(me, home):
    ns = home + ["docs"]
    put_ok(me, ns, "a", {"meta": {"lang": "en", "when": "2024-05-01T10:00:00+02:00"}, "tags": ["x"]})  # 08:00Z
    put_ok(me, ns, "b", {"meta": {"lang": "de", "when": "2024-05-01T09:30:00Z"}})
    put_ok(me, ns, "c", {"meta": {"lang": "en", "when": "2024-04-30T23:00:00Z"}})

    def found(flt):
        return sorted(keys_of(search_ok(me, home, filter=flt, limit=100)))

    assert found({"meta.lang": "en"}) == ["a", "c"]
    # as text "2024-05-01T10..." > "2024-05-01T09..."; as instants 08:00Z < 09:00Z
    assert found({"meta.when": {"gt": "2024-05-01T09:00:00Z"}}) == ["b"]
    assert found({"meta.when": {"$lt": "2024-05-01T09:00:00Z", "gte": "2024-05-01T00:00:00Z"}}) == ["a"]
    assert found({"meta.lang": "en", "meta.when": {"gt": "2024-05-01T00:00:00Z"}}) == ["a"]
    assert found({"meta.lang": {"in": ["de", "fr"]}}) == ["b"]
    assert found({"tags.0": "x"}) == ["a"]


# -- search with a query -------------------------------------------------------------------------


def test_sync_index_makes_a_write_immediately_searchable(me, home):
    ns = home + ["facts"]
    put_ok(me, ns, "paris", {"text": "Paris is the capital of France"}, sync_index=True)
    put_ok(me, ns, "bread", {"text": "How to bake sourdough bread at home"}, sync_index=True)
    put_ok(me, ns, "goal", {"text": "The striker scored a late goal in the football match"}, sync_index=True)
    items = search_ok(me, home, query="Which city is the French capital?")
    assert items[0]["key"] == "paris"
    assert items[0]["value"] == {"text": "Paris is the capital of France"}
    scores = [i["score"] for i in items]
    assert all(isinstance(s, float) and -1.0 <= s <= 1.0 + 1e-6 for s in scores)
    assert scores == sorted(scores, reverse=True)
    assert scores[0] > 0.5
    assert keys_of(search_ok(me, home, query="baking bread"))[0] == "bread"
    # offset pages through the semantic ranking too
    full = keys_of(search_ok(me, home, query="sports", limit=3))
    assert full[0] == "goal"
    assert [keys_of(search_ok(me, home, query="sports", limit=1, offset=o))[0] for o in range(3)] == full
    # a filter applies to semantic results
    filtered = keys_of(search_ok(me, home, query="Which city is the French capital?",
                                 filter={"text": {"ne": "Paris is the capital of France"}}))
    assert "paris" not in filtered and filtered


def test_semantic_ties_are_broken_by_newest_updated_at(make_client, uid):
    for n in range(2, 10):
        client = make_client(uid, tenant=unique_tenant())
        for i in range(n):
            put_ok(client, ["user", uid, "dup"], f"k{i}", {"text": "identical words here"}, sync_index=True)
            time.sleep(0.002)
        items = search_ok(client, ["user", uid], query="identical words")
        assert keys_of(items) == [f"k{i}" for i in reversed(range(n))], (n, [(i["key"], i["score"]) for i in items])


def test_an_update_replaces_the_old_text_in_the_index(me, home):
    ns = home + ["facts"]
    put_ok(me, ns, "control", {"text": "Quarterly revenue grew by ten percent"}, sync_index=True)
    first = put_ok(me, ns, "k", {"text": "The Eiffel Tower is in Paris"}, sync_index=True)
    before = search_ok(me, home, query="Eiffel Tower Paris")
    assert before[0]["key"] == "k" and before[0]["id"] == first["id"]
    old_score = before[0]["score"]
    assert old_score > 0.6

    second = put_ok(me, ns, "k", {"text": "Penguins live in Antarctica"}, sync_index=True)
    after = search_ok(me, home, query="Eiffel Tower Paris")
    for item in after:
        assert item["id"] != first["id"], "the stale version came back from the index"
        if item["key"] == "k":
            assert item["id"] == second["id"]
            assert item["value"] == {"text": "Penguins live in Antarctica"}
            assert item["score"] < old_score - 0.3
    assert len(after) == len({i["key"] for i in after}), "one result per memory"
    new = search_ok(me, home, query="penguins in Antarctica")
    assert new[0]["key"] == "k" and new[0]["id"] == second["id"] and new[0]["score"] > 0.6


def test_index_fields_restricts_which_fields_are_searchable(me, home):
    ns = home + ["docs"]
    text = {"title": "Weekly weather report", "body": "Recipe for banana bread with walnuts"}
    put_ok(me, ns, "title-only", text, index_fields=["title"], sync_index=True)
    put_ok(me, ns, "body-only", text, index_fields=["body"], sync_index=True)
    put_ok(me, ns, "nested", {"steps": [{"name": "mash the ripe bananas"}, {"name": "rainy forecast"}]},
           index_fields=["steps[*].name"], sync_index=True)
    items = search_ok(me, home, query="banana bread recipe")
    scores = {i["key"]: i["score"] for i in items}
    assert keys_of(items)[0] == "body-only"
    assert scores["body-only"] > 0.6
    assert scores["title-only"] < scores["body-only"] - 0.3
    assert "nested" in scores  # [*] reached the list elements
    weather = search_ok(me, home, query="weather forecast")
    assert keys_of(weather)[0] in ("title-only", "nested")
    assert {i["key"]: i["score"] for i in weather}["body-only"] < {i["key"]: i["score"] for i in weather}["title-only"]


@pytest.mark.parametrize("not_indexed", [False, []], ids=["false", "no-path"])
def test_index_fields_false_is_never_found_by_query_but_found_by_filter(me, home, not_indexed):
    ns = home + ["private"]
    put_ok(me, ns, "hidden", {"text": "Paris is the capital of France"}, index_fields=not_indexed, sync_index=True)
    put_ok(me, ns, "visible", {"text": "Bananas are yellow"}, sync_index=True)
    for mode in ("hybrid", "semantic", "keyword"):
        found = search_ok(me, home, query="Paris is the capital of France", limit=100, mode=mode)
        assert "hidden" not in keys_of(found), mode
    assert keys_of(search_ok(me, home, filter={"text": "Paris is the capital of France"})) == ["hidden"]
    assert get(me, ns, "hidden").json()["value"] == {"text": "Paris is the capital of France"}


def test_changing_index_fields_on_update_adds_and_removes_vectors(me, home):
    ns = home + ["facts"]
    value = {"text": "The capital of France is Paris"}
    first = put_ok(me, ns, "k", value, sync_index=True)
    assert [i["id"] for i in search_ok(me, home, query="capital of France")] == [first["id"]]
    put_ok(me, ns, "k", value, index_fields=False, sync_index=True)
    assert search_ok(me, home, query="capital of France") == []
    third = put_ok(me, ns, "k", value, index_fields=["text"], sync_index=True)
    hits = search_ok(me, home, query="capital of France")
    assert [i["id"] for i in hits] == [third["id"]] and hits[0]["score"] > 0.6


# -- list namespaces -----------------------------------------------------------------------------


def test_list_namespaces_prefix_suffix_wildcards_depth_and_paging(me, home):
    spaces = [
        home + ["a"],
        home + ["a", "x"],
        home + ["a", "y"],
        home + ["b", "x"],
        home + ["b", "y", "deep"],
        home + ["c"],
    ]
    for i, ns in enumerate(spaces):
        put_ok(me, ns, f"k{i}", {"i": i})
        put_ok(me, ns, f"k{i}-2", {"i": i})  # two items, one namespace
    everything = namespaces_ok(me, prefix=home)
    assert everything == sorted(spaces)
    assert namespaces_ok(me) == sorted(spaces)  # narrowed to my own subtree
    assert namespaces_ok(me, prefix=home + ["a"]) == [home + ["a"], home + ["a", "x"], home + ["a", "y"]]
    assert namespaces_ok(me, prefix=home + ["*", "x"]) == [home + ["a", "x"], home + ["b", "x"]]
    assert namespaces_ok(me, prefix=["user", "*", "b"]) == [home + ["b", "x"], home + ["b", "y", "deep"]]
    assert namespaces_ok(me, prefix=home, suffix=["x"]) == [home + ["a", "x"], home + ["b", "x"]]
    assert namespaces_ok(me, prefix=home, suffix=["y", "*"]) == [home + ["b", "y", "deep"]]
    assert namespaces_ok(me, prefix=home, suffix=["*", "y"]) == [home + ["a", "y"]]
    assert namespaces_ok(me, prefix=home, max_depth=3) == [home + ["a"], home + ["b"], home + ["c"]]
    assert namespaces_ok(me, prefix=home, max_depth=4) == sorted(
        [home + ["a"], home + ["a", "x"], home + ["a", "y"], home + ["b", "x"], home + ["b", "y"], home + ["c"]]
    )
    assert namespaces_ok(me, prefix=home, max_depth=2) == [home]
    assert namespaces_ok(me, prefix=home, max_depth=5) == sorted(spaces)  # deeper than any: no truncation
    assert namespaces_ok(me, prefix=home, limit=2) == sorted(spaces)[:2]
    assert namespaces_ok(me, prefix=home, limit=2, offset=2) == sorted(spaces)[2:4]
    assert namespaces_ok(me, prefix=home, offset=6) == []
    assert namespaces_ok(me, prefix=home + ["nope"]) == []


def test_list_namespaces_shows_only_namespaces_with_live_items(me, home):
    put_ok(me, home + ["kept"], "k", {"x": 1})
    put_ok(me, home + ["deleted"], "k", {"x": 1})
    put_ok(me, home + ["half"], "k1", {"x": 1})
    put_ok(me, home + ["half"], "k2", {"x": 1})
    assert namespaces_ok(me, prefix=home) == [home + ["deleted"], home + ["half"], home + ["kept"]]
    assert delete(me, home + ["deleted"], "k").status_code == 204
    assert delete(me, home + ["half"], "k1").status_code == 204
    assert namespaces_ok(me, prefix=home) == [home + ["half"], home + ["kept"]]


def test_expired_items_are_invisible_everywhere(me, home, admin):
    ns_exp, ns_live = home + ["exp"], home + ["live"]
    # Only what must hold after the expiry is asserted: the server's clock is real, and on a busy
    # machine the second before it can pass before a first read gets there.
    written = put_ok(me, ns_exp, "soon", {"text": "ephemeral note about volcanoes erupting"}, ttl_seconds=1,
                     sync_index=True)
    assert written["expires_at"] is not None
    put_ok(me, ns_live, "later", {"text": "ephemeral note about volcanoes in Iceland"}, ttl_seconds=3600,
           sync_index=True)
    time.sleep(1.5)
    assert_error(get(me, ns_exp, "soon"), 404, "NOT_FOUND")
    assert keys_of(search_ok(me, home)) == ["later"]
    assert keys_of(search_ok(me, home, query="volcanoes erupting")) == ["later"]
    assert namespaces_ok(me, prefix=home) == [ns_live]
    assert "soon" not in keys_of(search_ok(admin, [], limit=100))
    # a new write after expiry starts over: the old expiry does not stick
    body = put_ok(me, ns_exp, "soon", {"text": "back"})
    assert body["expires_at"] is None
    assert get(me, ns_exp, "soon").json()["value"] == {"text": "back"}


def test_policy_attribute_names_shadow_value_fields_as_documented(me, home):
    """API.md: keys the extraction policy made filterable are decided by the policy attributes
    (pushed down, no decryption). With the default policy those are `namespace` and `sub`."""
    ns = home + ["people"]
    put_ok(me, ns, "match", {"sub": "math", "namespace": "school", "topic": "math"})
    put_ok(me, ns, "other", {"sub": "art", "namespace": "museum", "topic": "art"})
    assert keys_of(search_ok(me, home, filter={"sub": "math"})) == []
    assert sorted(keys_of(search_ok(me, home, filter={"namespace": "user"}))) == ["match", "other"]
    assert keys_of(search_ok(me, home, filter={"topic": "math"})) == ["match"]


# -- identity claims -----------------------------------------------------------------------------


@pytest.mark.parametrize("claims", [
    {"roles": "admin"},
    {"roles": "user,admin"},
    {"roles": "user admin"},
    {"roles": ["user", "service"]},
    {"cognito:groups": ["admin"]},
], ids=["string", "comma-string", "space-string", "list-service", "cognito-groups"])
def test_roles_claim_forms_grant_admin(claims, live_server, tenant, make_client):
    token = signed_token(live_server, sub="ops", tenant_id=tenant, **claims)
    with make_client(None) as anonymous:
        r = anonymous.get("/admin/v1/memories/settings", headers={"Authorization": f"Bearer {token}"})
    assert r.status_code == 200, r.text
    assert r.json()["max_depth"] == 10


def test_custom_tenant_id_claim_selects_the_tenant(live_server, uid, tenant, me, make_client):
    put_ok(me, ["user", uid], "k", {"where": tenant})
    token = signed_token(live_server, sub=uid, **{"custom:tenant_id": tenant})
    with make_client(None) as anonymous:
        r = anonymous.get("/v1/memories", params=ns_query(["user", uid], "k"),
                          headers={"Authorization": f"Bearer {token}"})
    assert r.status_code == 200, r.text
    assert r.json()["value"] == {"where": tenant}


# -- tenants -------------------------------------------------------------------------------------


def test_tenants_are_walls_even_for_admins(make_client, uid):
    t1, t2 = unique_tenant(), unique_tenant()
    ns = ["user", uid, "notes"]
    u1, u2 = make_client(uid, tenant=t1), make_client(uid, tenant=t2)
    a1, a2 = (make_client("root", tenant=t, roles=["admin"]) for t in (t1, t2))
    w1 = put_ok(u1, ns, "k", {"tenant": 1, "text": "alpha tenant secret"}, sync_index=True)
    assert_error(get(u2, ns, "k"), 404, "NOT_FOUND")
    # X-Tenant-Id is for IAM callers only: it never moves a JWT caller to another tenant
    assert_error(u2.get("/v1/memories", params=ns_query(ns, "k"), headers={"X-Tenant-Id": t1}), 404, "NOT_FOUND")
    assert search_ok(u2, []) == []
    assert search_ok(u2, [], query="alpha tenant secret") == []
    assert namespaces_ok(u2) == []
    w2 = put_ok(u2, ns, "k", {"tenant": 2, "text": "beta"}, sync_index=True)
    assert w2["version"] == 1 and w2["id"] != w1["id"]
    assert get(u1, ns, "k").json()["value"] == {"tenant": 1, "text": "alpha tenant secret"}
    assert get(u2, ns, "k").json()["value"] == {"tenant": 2, "text": "beta"}
    # admins see their own tenant only
    assert [i["value"] for i in search_ok(a2, [], limit=100)] == [{"tenant": 2, "text": "beta"}]
    assert [i["id"] for i in search_ok(a2, [], query="alpha tenant secret", limit=100)] == [w2["id"]]
    assert namespaces_ok(a2) == [ns]
    assert_error(a2.delete(f"/admin/v1/memories/{w1['id']}"), 404, "NOT_FOUND")
    assert get(u1, ns, "k").json()["id"] == w1["id"]
    assert [i["id"] for i in search_ok(a1, [], limit=100)] == [w1["id"]]
    # the other tenant's policies and settings are untouched by this tenant's admin
    assert a2.put("/admin/v1/memories/settings", json={"max_depth": 3}).status_code == 200
    assert a1.get("/admin/v1/memories/settings").json()["max_depth"] == 10


def test_a_policy_over_its_budget_fails_only_its_own_requests(make_client, uid):
    """One tenant's expensive policy is cut off after a fixed number of Rego VM instructions
    (not a time): its request fails with a clear 400; the others, and other tenants, go on."""
    bad, good = unique_tenant(), unique_tenant()
    bad_admin = make_client("root", tenant=bad, roles=["admin"])
    heavy = "count([x | some x in numbers.range(1, 1000); some y in numbers.range(1, 1000)])"
    policies = dict(bad_admin.get("/admin/v1/memories/policies").json()["policies"])
    policies["attributes.rego"] = (  # heavy only for key "boom", so the upload's smoke evaluation passes
        'package memories.attributes\n\ndefault attributes := {}\n\n'
        f'attributes := {{"n": n}} if {{\n\tinput.key == "boom"\n\tn := {heavy}\n}}\n'
    )
    assert bad_admin.put("/admin/v1/memories/policies", json={"policies": policies}).status_code == 200
    ns = ["user", uid]
    mine, theirs = make_client(uid, tenant=bad), make_client(uid, tenant=good)
    err = assert_error(put(mine, ns, "boom", {"x": 1}), 400, "INVALID_ARGUMENT")
    assert "budget" in err["message"] and err["details"]["rule"] == "data.memories.attributes.attributes"
    assert_error(get(mine, ns, "boom"), 404, "NOT_FOUND")  # nothing was written
    put_ok(mine, ns, "fine", {"x": 2})
    put_ok(theirs, ns, "boom", {"x": 3})
    assert get(theirs, ns, "boom").json()["value"] == {"x": 3}


def test_a_policy_call_that_never_ends_fails_its_request_at_the_deadline_and_no_other(make_client, uid):
    """One builtin call is one VM instruction, however long it runs (`units.parse` of a number with a
    billion-digit exponent takes hours): a tenant's policy runs in a worker process, killed at
    the deadline; the server's other requests never wait for it."""
    bad, good = unique_tenant(), unique_tenant()
    bad_admin = make_client("root", tenant=bad, roles=["admin"])
    policies = dict(bad_admin.get("/admin/v1/memories/policies").json()["policies"])
    policies["attributes.rego"] = (
        "package memories.attributes\n\nimport rego.v1\n\ndefault attributes := {}\n\n"
        'attributes := {"bytes": units.parse_bytes(input.attributes.size)} if input.attributes.size\n')
    assert bad_admin.put("/admin/v1/memories/policies", json={"policies": policies}).status_code == 200
    ns = ["user", uid]
    mine, theirs = make_client(uid, tenant=bad), make_client(uid, tenant=good)
    hung: list[httpx.Response] = []
    thread = threading.Thread(target=lambda: hung.append(
        put(mine, ns, "boom", {"x": 1}, attributes={"size": "1e999999999"})))
    thread.start()
    put_ok(theirs, ns, "k", {"x": 2})
    assert get(theirs, ns, "k").json()["value"] == {"x": 2}
    thread.join(120)
    err = assert_error(hung[0], 400, "INVALID_ARGUMENT")
    assert err["details"] == {"rule": "data.memories.attributes.attributes", "budget_seconds": 2}
    assert_error(get(mine, ns, "boom"), 404, "NOT_FOUND")  # nothing was written
    put_ok(mine, ns, "fine", {"x": 3}, attributes={"size": "2KB"})  # the same policy, on a sane input


# -- admin ---------------------------------------------------------------------------------------


def test_admin_policies_get_and_put(admin, me, uid, make_client, tenant):
    r = admin.get("/admin/v1/memories/policies")
    assert r.status_code == 200, r.text
    bundle = r.json()
    assert bundle["version"] == "builtin"
    assert {"authz.rego", "attributes.rego", "search.rego"} <= set(bundle["policies"])
    assert all(isinstance(v, str) and "package memories." in v for v in bundle["policies"].values())

    shared = ["shared", "board"]
    assert_error(put(me, shared, "note", {"x": 1}), 403, "FORBIDDEN")

    policies = dict(bundle["policies"])
    policies["authz.rego"] += (
        '\n# every user may read and write the shared board\n'
        'allow if {\n\tinput.operation in {"read", "write"}\n\tinput.namespace[0] == "shared"\n}\n'
    )
    r = admin.put("/admin/v1/memories/policies", json={"policies": policies})
    assert r.status_code == 200, r.text
    assert r.json()["policies"] == policies
    version = r.json()["version"]
    assert version != "builtin" and isinstance(version, str) and version
    assert admin.get("/admin/v1/memories/policies").json() == {"version": version, "policies": policies}
    # the new policy is in force
    put_ok(me, shared, "note", {"x": 1})
    other = make_client("someone-else", tenant=tenant)
    assert get(other, shared, "note").json()["value"] == {"x": 1}
    assert_error(delete(other, shared, "note"), 403, "FORBIDDEN")
    # other tenants keep the built-in bundle
    elsewhere = make_client("root", tenant=unique_tenant(), roles=["admin"])
    assert elsewhere.get("/admin/v1/memories/policies").json()["version"] == "builtin"
    # putting the defaults back restores "builtin"
    r = admin.put("/admin/v1/memories/policies", json={"policies": bundle["policies"]})
    assert r.status_code == 200 and r.json()["version"] == "builtin"
    assert_error(put(me, shared, "note2", {"x": 1}), 403, "FORBIDDEN")


def test_a_policy_bundle_read_edited_and_put_back_replaces_only_the_version_read(admin, make_client, tenant):
    bundle = admin.get("/admin/v1/memories/policies").json()
    other_admin = make_client("root-2", tenant=tenant, roles=["admin"])
    stale = other_admin.get("/admin/v1/memories/policies").json()

    edited = {**bundle, "policies": {**bundle["policies"], "authz.rego": bundle["policies"]["authz.rego"] + "\n# one\n"}}
    r = admin.put("/admin/v1/memories/policies", json=edited)  # GET's answer, edited, put back whole
    assert r.status_code == 200, r.text
    mine = r.json()["version"]
    again = admin.put("/admin/v1/memories/policies", json=edited)  # a retry of the upload that landed
    assert again.status_code == 200 and again.json() == r.json()

    theirs = {**stale, "policies": {**stale["policies"], "authz.rego": stale["policies"]["authz.rego"] + "\n# two\n"}}
    for attempt in (lambda: other_admin.put("/admin/v1/memories/policies", json=theirs),
                    lambda: other_admin.put("/admin/v1/memories/policies", params={"dry_run": "true"}, json=theirs),
                    lambda: other_admin.put("/admin/v1/memories/policies", json={"policies": theirs["policies"]},
                                            headers={"If-Match": f'"{stale["version"]}"'})):
        err = assert_error(attempt(), 412, "PRECONDITION_FAILED")
        assert err["details"] == {"expected_version": stale["version"], "current_version": mine}
    assert admin.get("/admin/v1/memories/policies").json() == {"version": mine, "policies": edited["policies"]}

    err = assert_error(other_admin.put("/admin/v1/memories/policies", json=theirs, headers={"If-Match": mine}),
                       400, "INVALID_ARGUMENT")
    assert err["details"] == {"field": "version"}
    assert_error(other_admin.put("/admin/v1/memories/policies", json={**theirs, "version": "not a version"}),
                 400, "INVALID_ARGUMENT")
    r = other_admin.put("/admin/v1/memories/policies", json={**theirs, "version": mine})
    assert r.status_code == 200 and r.json()["policies"] == theirs["policies"]
    # another tenant's bundle is at its own version: this tenant's names nothing there
    elsewhere = make_client("root", tenant=unique_tenant(), roles=["admin"])
    assert_error(elsewhere.put("/admin/v1/memories/policies", json={**theirs, "version": mine}), 412,
                 "PRECONDITION_FAILED")
    assert elsewhere.get("/admin/v1/memories/policies").json()["version"] == "builtin"


def test_a_policy_upload_decides_the_very_next_request(admin, me, home):
    put_ok(me, home, "mine", {"x": 1})
    for _ in range(3):  # the same decisions again and again
        assert get(me, home, "mine").status_code == 200
        assert keys_of(search_ok(me, home)) == ["mine"]
    builtin = admin.get("/admin/v1/memories/policies").json()["policies"]
    only_admins = {**builtin, "authz.rego": 'package memories.authz\n\nallow if "admin" in input.context.roles\n'}
    assert admin.put("/admin/v1/memories/policies", json={"policies": only_admins}).status_code == 200
    assert_error(get(me, home, "mine"), 403, "FORBIDDEN")
    assert_error(search(me, home), 403, "FORBIDDEN")
    assert admin.put("/admin/v1/memories/policies", json={"policies": builtin}).json()["version"] == "builtin"
    assert get(me, home, "mine").status_code == 200
    assert keys_of(search_ok(me, home)) == ["mine"]


def test_admin_policy_compile_error_is_400_naming_file_line_and_column(admin):
    before = admin.get("/admin/v1/memories/policies").json()
    broken = dict(before["policies"])
    broken["authz.rego"] = "package memories.authz\n\nallow if {\n"
    err = assert_error(admin.put("/admin/v1/memories/policies", json={"policies": broken}), 400, "INVALID_ARGUMENT")
    assert err["message"].startswith("the policy bundle is not valid Rego: a syntax error, in authz.rego at line ")
    assert err["details"]["policy_file"] == "authz.rego" and {"line", "column"} <= err["details"].keys()
    missing = {"authz.rego": before["policies"]["authz.rego"]}
    err = assert_error(admin.put("/admin/v1/memories/policies", json={"policies": missing}), 400, "INVALID_ARGUMENT")
    assert "memories.attributes" in err["message"] or "memories.search" in err["message"]
    assert admin.get("/admin/v1/memories/policies").json() == before


def test_admin_force_delete_by_id(admin, me, home):
    ns = home + ["notes"]
    old = put_ok(me, ns, "k", {"v": 1})
    current = put_ok(me, ns, "k", {"v": 2})
    put_ok(me, ns, "other", {"v": 3})
    # the id of an older version no longer names a live memory
    assert_error(admin.delete(f"/admin/v1/memories/{old['id']}"), 404, "NOT_FOUND")
    assert get(me, ns, "k").json()["version"] == 2
    r = admin.delete(f"/admin/v1/memories/{current['id']}")
    assert r.status_code == 204, r.text
    assert r.content == b""
    assert_error(get(me, ns, "k"), 404, "NOT_FOUND")
    assert_error(admin.delete(f"/admin/v1/memories/{current['id']}"), 404, "NOT_FOUND")
    assert get(me, ns, "other").json()["value"] == {"v": 3}
    assert keys_of(search_ok(me, home)) == ["other"]
    assert namespaces_ok(me, prefix=home) == [ns]
    # the vectors go too
    indexed = put_ok(me, home + ["facts"], "f", {"text": "The Nile is a long river in Africa"}, sync_index=True)
    assert admin.delete(f"/admin/v1/memories/{indexed['id']}").status_code == 204
    sync_index(admin)
    hits = search_ok(admin, [], query="The Nile is a long river in Africa", limit=100)
    assert indexed["id"] not in [h["id"] for h in hits]
    assert "f" not in keys_of(hits)


def test_admin_index_status_and_trigger(admin, me, home):
    r = admin.get("/admin/v1/memories/index/status")
    assert r.status_code == 200, r.text
    status = r.json()
    assert isinstance(status["pending"], int) and status["pending"] >= 0
    put_ok(me, home + ["facts"], "f", {"text": "Mount Everest is the highest mountain on Earth"})
    r = admin.post("/admin/v1/memories/index/trigger")
    assert r.status_code == 200, r.text
    assert isinstance(r.json()["processed"], int) and r.json()["processed"] >= 0
    sync_index(admin)
    assert admin.get("/admin/v1/memories/index/status").json()["pending"] == 0
    items = search_ok(me, home, query="tallest mountain in the world")
    assert keys_of(items) == ["f"] and items[0]["score"] > 0.4


def test_admin_settings_get_put_and_max_depth(admin, me, home):
    r = admin.get("/admin/v1/memories/settings")
    assert r.status_code == 200, r.text
    assert r.json()["max_depth"] == 10
    assert isinstance(r.json()["tombstone_retention_days"], int)
    deep = home + ["a", "b"]  # 4 segments
    put_ok(me, deep, "k", {"x": 1})
    r = admin.put("/admin/v1/memories/settings", json={"max_depth": 3})
    assert r.status_code == 200, r.text
    assert r.json()["max_depth"] == 3
    assert r.json()["tombstone_retention_days"] == admin.get("/admin/v1/memories/settings").json()[
        "tombstone_retention_days"]
    assert admin.get("/admin/v1/memories/settings").json()["max_depth"] == 3
    assert_error(put(me, home + ["a", "c"], "k", {"x": 1}), 400, "INVALID_ARGUMENT")
    assert get(me, deep, "k").json()["value"] == {"x": 1}  # lowering max_depth strands nothing
    put_ok(me, home + ["a"], "k", {"x": 2})
    r = admin.put("/admin/v1/memories/settings", json={"tombstone_retention_days": 7})
    assert r.json() == {**r.json(), "max_depth": 3, "tombstone_retention_days": 7}  # a patch, not a reset
    r = admin.put("/admin/v1/memories/settings", json={"max_depth": 10})
    assert r.json()["max_depth"] == 10
    assert get(me, deep, "k").json()["value"] == {"x": 1}


# -- health and OpenAPI --------------------------------------------------------------------------


def test_health_needs_no_token_and_reports_each_component(make_client):
    r = make_client(None).get("/health")
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["status"] == "healthy"
    assert {"store", "vector_index", "embedder"} <= set(body["components"])
    for name, component in body["components"].items():
        assert isinstance(component["latency_ms"], (int, float)) and component["latency_ms"] >= 0, name
        assert component["status"] == "healthy", name


def test_lowering_max_depth_leaves_deeper_items_readable_and_deletable(admin, me, home):
    deep = home + ["a", "b", "c"]  # 5 segments
    put_ok(me, deep, "k", {"x": 1})
    put_ok(me, deep, "gone", {"x": 2})
    r = admin.put("/admin/v1/memories/settings", json={"max_depth": 2})
    assert r.status_code == 200 and r.json()["reachable_depth"] == 10, r.text
    assert_error(put(me, deep, "k", {"x": 3}), 400, "INVALID_ARGUMENT")  # no new deep writes
    assert get(me, deep, "k").json()["value"] == {"x": 1}
    assert [i["key"] for i in search(me, deep).json()["items"]] == ["gone", "k"]
    assert me.delete("/v1/memories", params=[("ns", s) for s in deep] + [("key", "gone")]).status_code == 204
    assert_error(get(me, deep, "gone"), 404, "NOT_FOUND")
    assert_error(get(me, home + ["x"] * 9, "k"), 400, "INVALID_ARGUMENT")  # never reachable: still a 400
    assert_error(admin.put("/admin/v1/memories/settings", json={"reachable_depth": 32}), 400, "INVALID_ARGUMENT")
    assert_error(admin.put("/admin/v1/memories/settings", json={"max_depth": None}), 400, "INVALID_ARGUMENT")


def test_get_answers_exactly_these_bytes(me, home):
    ns = home + ["exact"]
    value = {"text": "é ✓ \u2028", "small": 1.5e-7, "big": 10**30, "list": [1, None, True, -0.0], "nested": {"a": {}}}
    created = put_ok(me, ns, "k", value, attributes={"a": 1})
    r = get(me, ns, "k")
    assert r.headers["content-type"] == "application/json"
    expected = (
        f'{{"id":"{created["id"]}","namespace":{json.dumps(ns, separators=(",", ":"))},"key":"k",'
        f'"attributes":{{"a":1}},"created_at":"{created["created_at"]}","updated_at":"{created["updated_at"]}",'
        '"expires_at":null,"version":1,"value":{"text":"é ✓ \u2028","small":1.5e-7,'
        '"big":1000000000000000000000000000000,"list":[1,null,true,-0.0],"nested":{"a":{}}}}'
    )
    assert r.content == expected.encode()


def test_the_openapi_document_is_the_same_every_time_with_an_etag(make_client):
    anonymous = make_client(None)
    first, second = anonymous.get("/openapi.json"), anonymous.get("/openapi.json")
    assert first.status_code == second.status_code == 200
    assert first.content == second.content
    assert first.json() == json.loads(json.dumps(openapi_document(ROUTES)))  # what a fresh build gives
    etag = first.headers["etag"]
    assert etag == second.headers["etag"] and re.fullmatch(r'"[0-9a-f]{32}"', etag)
    for matching in (etag, f"W/{etag}", f'"other", {etag}', "*"):
        unchanged = anonymous.get("/openapi.json", headers={"If-None-Match": matching})
        assert (unchanged.status_code, unchanged.content, unchanged.headers["etag"]) == (304, b"", etag)
    changed = anonymous.get("/openapi.json", headers={"If-None-Match": '"other"'})
    assert changed.status_code == 200 and changed.content == first.content


def test_openapi_document_lists_every_route(make_client):
    r = make_client(None).get("/openapi.json")
    assert r.status_code == 200, r.text
    doc = r.json()
    assert doc["openapi"].startswith("3.")
    expected = {
        "/v1/memories": {"put", "get", "delete"},
        "/v1/memories/search": {"post"},
        "/v1/memories/namespaces": {"get"},
        "/admin/v1/memories/policies": {"get", "put"},
        "/admin/v1/memories/{id}": {"delete"},
        "/admin/v1/memories/index/status": {"get"},
        "/admin/v1/memories/index/trigger": {"post"},
        "/admin/v1/memories/settings": {"get", "put"},
        "/health": {"get"},
        "/metrics": {"get"},
    }
    for path, methods in expected.items():
        assert path in doc["paths"], path
        assert methods <= set(doc["paths"][path]), (path, doc["paths"][path].keys())
    params = {p["name"] for p in doc["paths"]["/v1/memories"]["get"]["parameters"]}
    assert {"ns", "key"} <= params
    schemas = doc["components"]["schemas"]
    put_body = schemas["PutMemoryBody"]["properties"]
    assert {"namespace", "key", "value", "attributes", "ttl_seconds", "index_fields", "sync_index"} <= set(put_body)
