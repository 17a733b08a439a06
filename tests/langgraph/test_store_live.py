"""MemsvcStore against a live `memsvc serve`: LangGraph's documented store behaviour, covering the
ground of LangGraph's own store tests (InMemory, SQLite, Postgres)."""

from __future__ import annotations

import time
from datetime import datetime, timedelta, timezone

import pytest
from langgraph.store.base import (
    GetOp,
    InvalidNamespaceError,
    Item,
    ListNamespacesOp,
    MatchCondition,
    PutOp,
    SearchItem,
    SearchOp,
)

from memsvc_client import AuthError, InvalidArgumentError, MemsvcError, MemsvcStore

pytestmark = pytest.mark.slow


# -- put / get / delete -------------------------------------------------------------------------


def test_put_get_update_delete(store, ns):
    docs = ns + ("docs",)
    before = datetime.now(timezone.utc)
    store.put(docs, "doc1", {"title": "Test Document", "content": "Hello, World!"})
    item = store.get(docs, "doc1")

    assert type(item) is Item
    assert item.namespace == docs and item.key == "doc1"
    assert item.value == {"title": "Test Document", "content": "Hello, World!"}
    for ts in (item.created_at, item.updated_at):
        assert isinstance(ts, datetime) and ts.utcoffset() == timedelta(0)
        assert before - timedelta(seconds=5) <= ts <= datetime.now(timezone.utc) + timedelta(seconds=5)

    store.put(docs, "doc1", {"title": "Updated Document"})
    updated = store.get(docs, "doc1")
    assert updated.value == {"title": "Updated Document"}
    assert updated.updated_at > item.updated_at
    assert updated.created_at == item.created_at  # created_at survives updates

    assert store.get(ns + ("other",), "doc1") is None  # another namespace
    assert store.get(docs, "nope") is None  # absent key: None, not an error

    store.delete(docs, "doc1")
    assert store.get(docs, "doc1") is None
    store.delete(docs, "doc1")  # deleting again (or an absent key) is fine
    assert store.search(docs) == []
    assert store.list_namespaces(prefix=docs) == []


def test_namespace_validation(store, ns):
    doc = {"foo": "bar"}
    for bad in [(), ("user", "thing.about"), (*ns, ""), (*ns, 123), (*ns, "nul\x00"), ("langgraph", "foo")]:
        with pytest.raises(InvalidNamespaceError):
            store.put(bad, "foo", doc)
    for bad in [(*ns, "a.b"), (*ns, ""), (*ns, 1)]:
        with pytest.raises(InvalidNamespaceError):
            store.get(bad, "foo")
        with pytest.raises(InvalidNamespaceError):
            store.delete(bad, "foo")
        with pytest.raises(InvalidNamespaceError):
            store.search(bad)
        with pytest.raises(InvalidNamespaceError):
            store.list_namespaces(prefix=bad)
        with pytest.raises(InvalidNamespaceError):
            store.list_namespaces(suffix=bad)
    # ops handed to batch() directly are checked too, and nothing of the batch is sent
    with pytest.raises(InvalidNamespaceError):
        store.batch([PutOp((*ns, "ok"), "k", doc), PutOp((*ns, "a.b"), "k", doc)])
    assert store.get((*ns, "ok"), "k") is None
    # "langgraph" is only refused as the root, and "*" is an ordinary label
    store.put((*ns, "langgraph", "*"), "k", doc)
    assert store.get((*ns, "langgraph", "*"), "k").value == doc


def test_other_users_namespace_is_an_error_not_none(store, ns):
    with pytest.raises(AuthError) as info:
        store.get(("user", "someone-else"), "k")
    assert info.value.code == "FORBIDDEN" and info.value.status == 403
    with pytest.raises(AuthError):
        store.put(("user", "someone-else"), "k", {"a": 1})


def test_errors_carry_the_api_code(make_store, store, ns):
    with pytest.raises(InvalidArgumentError) as info:
        store.put(ns, "big", {"text": "x" * (300 * 1024)})
    assert info.value.code == "CONTENT_TOO_LONG" and info.value.status == 413
    assert info.value.details["max_bytes"] == 256 * 1024
    assert isinstance(info.value, ValueError) and isinstance(info.value, MemsvcError)

    bad_token = make_store(token="not-a-jwt")
    with pytest.raises(AuthError) as info:
        bad_token.get(ns, "k")
    assert info.value.code == "UNAUTHORIZED" and info.value.status == 401


# -- batch ------------------------------------------------------------------------------------


def test_batch_order(store, ns):
    """LangGraph's test_batch_order: mixed ops, results in input order."""
    foo, bar = ns + ("test", "foo"), ns + ("test", "bar")
    store.put(foo, "key1", {"data": "value1"})
    store.put(bar, "key2", {"data": "value2"})

    results = store.batch(
        [
            GetOp(foo, "key1"),
            PutOp(bar, "key2", {"data": "value2"}),
            SearchOp(ns + ("test",), filter={"data": "value1"}, limit=10, offset=0),
            ListNamespacesOp(match_conditions=None, max_depth=None, limit=10, offset=0),
            GetOp(ns + ("test",), "key3"),
        ]
    )
    assert len(results) == 5
    assert isinstance(results[0], Item) and results[0].value == {"data": "value1"} and results[0].key == "key1"
    assert results[1] is None
    assert [i.key for i in results[2]] == ["key1"] and all(isinstance(i, SearchItem) for i in results[2])
    assert sorted(results[3]) == [bar, foo]
    assert results[4] is None

    reordered = store.batch(
        [
            SearchOp(ns + ("test",), filter=None, limit=5, offset=0),
            GetOp(bar, "key2"),
            ListNamespacesOp(match_conditions=None, max_depth=None, limit=5, offset=0),
            PutOp(ns + ("test",), "key3", {"data": "value3"}),
            GetOp(foo, "key1"),
        ]
    )
    assert len(reordered[0]) == 2
    assert reordered[1].value == {"data": "value2"}
    assert len(reordered[2]) == 2
    assert reordered[3] is None
    assert reordered[4].value == {"data": "value1"}
    assert store.get(ns + ("test",), "key3").value == {"data": "value3"}


def test_batch_reads_see_the_state_before_the_batch_writes(store, ns):
    """As in LangGraph's stores, reads in a batch run before its writes."""
    store.put(ns, "k", {"v": 1})
    results = store.batch(
        [
            PutOp(ns, "k", {"v": 2}),
            GetOp(ns, "k"),
            PutOp(ns, "new", {"v": 3}),
            GetOp(ns, "new"),
            SearchOp(ns),
            ListNamespacesOp(match_conditions=(MatchCondition("prefix", ns + ("fresh",)),)),
            PutOp(ns + ("fresh",), "x", {"v": 4}),
        ]
    )
    assert results[1].value == {"v": 1}
    assert results[3] is None
    assert sorted(i.key for i in results[4]) == ["k"]
    assert results[5] == []
    assert store.get(ns, "k").value == {"v": 2}
    assert store.get(ns, "new").value == {"v": 3}
    assert store.list_namespaces(prefix=ns + ("fresh",)) == [ns + ("fresh",)]


def test_consecutive_puts_to_one_key_send_only_the_last(store, ns, raw):
    store.batch(
        [
            PutOp(ns, "a", {"n": 1}),
            PutOp(ns, "b", {"n": 1}),
            PutOp(ns, "a", {"n": 2}),
            PutOp(ns, "b", None),  # a delete after a put wins
            PutOp(ns, "c", None),
            PutOp(ns, "c", {"n": 3}),  # a put after a delete wins
            PutOp(ns, "a", {"n": 3}),
        ]
    )
    assert store.get(ns, "a").value == {"n": 3}
    assert store.get(ns, "b") is None
    assert store.get(ns, "c").value == {"n": 3}
    assert raw(ns, "a")["version"] == 1  # one write reached the service
    assert raw(ns, "c")["version"] == 1


def test_batch_puts_and_gets_many(store, ns):
    keys = [f"k{i:02d}" for i in range(30)]
    assert store.batch([PutOp(ns + ("many",), k, {"i": i}, index=False) for i, k in enumerate(keys)]) == [None] * 30
    items = store.batch([GetOp(ns + ("many",), k) for k in keys] + [GetOp(ns + ("many",), "absent")])
    assert [item.value["i"] for item in items[:-1]] == list(range(30))
    assert items[-1] is None


def test_batch_raises_the_first_error_in_op_order(store, ns):
    with pytest.raises(AuthError):
        store.batch([GetOp(ns, "k"), GetOp(("user", "not-me"), "k"), PutOp(ns, "k", {"ok": True})])


# -- search -----------------------------------------------------------------------------------


def test_search_basics_and_pagination(store, ns):
    """LangGraph's test_search, plus the order (newest `updated_at` first) and paging."""
    data = [
        (ns + ("test", "docs"), "doc1", {"title": "First Doc", "author": "Alice", "tags": ["important"]}),
        (ns + ("test", "docs"), "doc2", {"title": "Second Doc", "author": "Bob", "tags": ["draft"]}),
        (ns + ("test", "images"), "img1", {"title": "Image 1", "author": "Alice", "tags": ["final"]}),
    ]
    for namespace, key, value in data:
        store.put(namespace, key, value)

    everything = store.search(ns + ("test",))
    assert [i.key for i in everything] == ["img1", "doc2", "doc1"]  # newest first
    assert all(isinstance(i, SearchItem) and i.score is None for i in everything)
    assert [i.key for i in store.search(ns + ("test", "docs"))] == ["doc2", "doc1"]
    assert [i.key for i in store.search(ns + ("test",), filter={"author": "Alice"})] == ["img1", "doc1"]
    assert [i.key for i in store.search(ns + ("test",), limit=2)] == ["img1", "doc2"]
    assert [i.key for i in store.search(ns + ("test",), offset=2)] == ["doc1"]
    assert [i.key for i in store.search(ns + ("test",), limit=1, offset=1)] == ["doc2"]
    assert store.search(ns + ("test",), limit=0) == []
    # a prefix stops at segment boundaries: ("test", "doc") is not a prefix of ("test", "docs")
    assert store.search(ns + ("test", "doc")) == []
    assert store.search(ns + ("tes",)) == []


def test_search_limit_above_the_api_page_size(store, ns):
    many = ns + ("many",)
    store.batch([PutOp(many, f"k{i:03d}", {"i": i}, index=False) for i in range(130)])
    found = store.search(many, limit=125)
    assert len(found) == 125 and len({i.key for i in found}) == 125
    assert len(store.search(many, limit=500)) == 130
    assert len(store.search(many, limit=200, offset=120)) == 10


def test_filters(store, ns):
    scores = ns + ("scores",)
    for key, score in [("a", 2), ("b", 9), ("c", 10), ("d", 11), ("e", 9.5)]:
        store.put(scores, key, {"score": score, "meta": {"lang": "en" if key < "c" else "fr"}, "tags": [key]})

    def keys(filter):
        return sorted(i.key for i in store.search(scores, filter=filter))

    # numbers compare as numbers (LangGraph's Postgres regression test #7684)
    assert keys({"score": {"$gte": 10}}) == ["c", "d"]
    assert keys({"score": {"$gt": 9}}) == ["c", "d", "e"]
    assert keys({"score": {"$lt": 10}}) == ["a", "b", "e"]
    assert keys({"score": {"$lte": 9}}) == ["a", "b"]
    assert keys({"score": {"$gt": 2, "$lt": 10}}) == ["b", "e"]
    assert keys({"score": 10}) == ["c"]
    assert keys({"score": {"$eq": 9.5}}) == ["e"]
    assert keys({"score": {"$ne": 9}}) == ["a", "c", "d", "e"]
    assert keys({"score": {"$in": [2, 11]}}) == ["a", "d"]
    assert keys({"score": {"$nin": [2, 11]}}) == ["b", "c", "e"]
    # nested objects match field by field, as in InMemoryStore; dot paths work too
    assert keys({"meta": {"lang": "en"}}) == ["a", "b"]
    assert keys({"meta.lang": "fr"}) == ["c", "d", "e"]
    assert keys({"meta": {"lang": {"$ne": "en"}}}) == ["c", "d", "e"]
    assert keys({"tags": ["c"]}) == ["c"]  # a list equals only the same list
    assert keys({"meta.lang": "fr", "score": {"$gte": 10}}) == ["c", "d"]
    assert keys({"missing": "x"}) == []
    assert keys({"missing": {"$ne": "x"}}) == ["a", "b", "c", "d", "e"]  # $ne matches a missing field
    # a range on text is refused (InMemoryStore raises too), and so is an unknown operator
    with pytest.raises(InvalidArgumentError) as info:
        keys({"meta.lang": {"$gt": "apple"}})
    assert info.value.code == "INVALID_ARGUMENT"
    with pytest.raises(ValueError):
        keys({"score": {"$regex": "1"}})


def test_semantic_search(store, ns):
    docs = ns + ("docs",)
    store.put(docs, "doc1", {"text": "red apple", "color": "red", "score": 4.5})
    store.put(docs, "doc2", {"text": "red sports car", "color": "red", "score": 3.0})
    store.put(docs, "doc3", {"text": "green apple", "color": "green", "score": 4.0})
    store.put(docs, "doc4", {"text": "blue car", "color": "blue", "score": 3.5})

    results = store.search(docs, query="a fast automobile")
    assert {r.key for r in results[:2]} == {"doc2", "doc4"}
    scores = [r.score for r in results]
    assert all(isinstance(s, float) for s in scores) and scores == sorted(scores, reverse=True)

    red = store.search(docs, query="apple fruit", filter={"color": "red"})
    assert [r.key for r in red] == ["doc1", "doc2"]
    assert [r.key for r in store.search(docs, query="car", filter={"score": {"$gt": 3.2}})][0] == "doc4"
    both = store.search(docs, query="apple", filter={"score": {"$gte": 4.0}, "color": "green"})
    assert [r.key for r in both] == ["doc3"]

    page1 = store.search(docs, query="vehicle", limit=2)
    page2 = store.search(docs, query="vehicle", limit=2, offset=2)
    assert len(page1) == len(page2) == 2
    assert {r.key for r in page1}.isdisjoint({r.key for r in page2})
    assert [r.key for r in page1 + page2] == [r.key for r in store.search(docs, query="vehicle")]

    # an empty query is no query (LangGraph's stores): plain listing, score None
    assert [r.score for r in store.search(docs, query="")] == [None] * 4


def test_semantic_search_follows_updates(store, ns):
    docs = ns + ("updates",)
    store.put(docs, "doc1", {"text": "zany zebra Xerxes"})
    store.put(docs, "doc2", {"text": "something about dogs"})
    store.put(docs, "doc3", {"text": "text about birds"})
    initial = store.search(docs, query="Zany Xerxes")
    assert initial[0].key == "doc1"

    store.put(docs, "doc1", {"text": "new text about dogs"})
    after = next(r.score for r in store.search(docs, query="Zany Xerxes") if r.key == "doc1")
    assert after < initial[0].score
    new = next(r.score for r in store.search(docs, query="new text about dogs") if r.key == "doc1")
    assert new > after


def test_index_false_and_index_paths(store, ns):
    docs = ns + ("index",)
    value = {"title": "growing tomatoes in the garden", "body": "quantum physics and particle accelerators"}
    store.put(docs, "default", value)
    store.put(docs, "title_only", value, index=["title"])
    store.put(docs, "unindexed", {"text": "quantum physics and particle accelerators"}, index=False)
    store.put(docs, "no_path", {"text": "quantum physics and particle accelerators"}, index=[])  # as InMemoryStore

    def score(key, query):
        return next((r.score for r in store.search(docs, query=query) if r.key == key), None)

    quantum = "particle physics"
    assert score("unindexed", quantum) is None and score("no_path", quantum) is None  # not found by meaning...
    by_filter = store.search(docs, filter={"text": {"$in": ["quantum physics and particle accelerators"]}})
    assert sorted(i.key for i in by_filter) == ["no_path", "unindexed"]  # ...but by filter
    assert store.get(docs, "unindexed") is not None
    # only the title is embedded, so the body's subject does not find it
    assert score("title_only", quantum) < score("default", quantum)
    assert score("title_only", "tomato gardening") > score("title_only", quantum)


def test_store_index_config_fields_are_the_default_index_fields(make_store, ns):
    store = make_store(index={"dims": 384, "embed": "ignored", "fields": ["title"]})
    docs = ns + ("cfg",)
    value = {"title": "growing tomatoes in the garden", "body": "quantum physics and particle accelerators"}
    store.put(docs, "configured", value)  # index=None: the store's fields
    store.put(docs, "everything", value, index=["title", "body"])
    found = {r.key: r.score for r in store.search(docs, query="particle physics")}
    assert found["configured"] < found["everything"]


def test_read_your_writes(store, ns):
    docs = ns + ("ryw",)
    for i, text in enumerate(["the cat sat on the mat", "interest rates and inflation", "a recipe for pancakes"]):
        store.put(docs, f"k{i}", {"text": text})
        assert store.search(docs, query=text, limit=1)[0].key == f"k{i}"


# -- list_namespaces --------------------------------------------------------------------------


def test_list_namespaces(store, ns):
    """LangGraph's test_list_namespaces_basic, under the user's root."""
    tails = [
        ("a", "b", "c"),
        ("a", "b", "d", "e"),
        ("a", "b", "d", "i"),
        ("a", "b", "f"),
        ("a", "c", "f"),
        ("b", "a", "f"),
        ("users", "123"),
        ("users", "456", "settings"),
        ("admin", "users", "789"),
    ]
    store.batch([PutOp(ns + t, f"id_{i}", {"data": f"value_{i:02d}"}, index=False) for i, t in enumerate(tails)])

    def full(*paths):
        return [ns + p for p in paths]

    assert store.list_namespaces(prefix=ns + ("a", "b")) == full(
        ("a", "b", "c"), ("a", "b", "d", "e"), ("a", "b", "d", "i"), ("a", "b", "f")
    )
    assert store.list_namespaces(suffix=("f",)) == full(("a", "b", "f"), ("a", "c", "f"), ("b", "a", "f"))
    assert store.list_namespaces(prefix=ns + ("a",), suffix=("f",)) == full(("a", "b", "f"), ("a", "c", "f"))
    assert store.list_namespaces(prefix=ns + ("a", "b"), max_depth=5) == full(
        ("a", "b", "c"), ("a", "b", "d"), ("a", "b", "f")
    )
    assert store.list_namespaces(prefix=ns + ("a", "b"), limit=2) == full(("a", "b", "c"), ("a", "b", "d", "e"))
    assert store.list_namespaces(prefix=ns + ("a", "b"), offset=2) == full(("a", "b", "d", "i"), ("a", "b", "f"))
    assert store.list_namespaces(prefix=ns + ("a", "*", "f")) == full(("a", "b", "f"), ("a", "c", "f"))
    assert store.list_namespaces(suffix=("*", "f")) == full(("a", "b", "f"), ("a", "c", "f"), ("b", "a", "f"))
    assert store.list_namespaces(prefix=ns + ("nonexistent",)) == []
    assert store.list_namespaces(prefix=ns + ("users", "123")) == full(("users", "123"))
    # a prefix never crosses a segment boundary
    assert store.list_namespaces(prefix=ns + ("user",)) == []
    # everything this user may see, and max_depth truncation with de-duplication
    assert store.list_namespaces() == sorted(full(*tails))
    assert store.list_namespaces(max_depth=3) == full(("a",), ("admin",), ("b",), ("users",))
    assert store.list_namespaces(max_depth=50) == sorted(full(*tails))  # deeper than any namespace
    assert store.list_namespaces(prefix=("user", "*", "a", "b", "*")) == full(
        ("a", "b", "c"), ("a", "b", "d", "e"), ("a", "b", "d", "i"), ("a", "b", "f")
    )


def test_list_namespaces_wildcards_and_conditions(store, ns):
    tails = [
        ("users", "123"),
        ("users", "456"),
        ("users", "789", "settings"),
        ("admin", "users", "789"),
        ("guests", "123"),
        ("guests", "456", "preferences"),
    ]
    store.batch([PutOp(ns + t, f"id_{i}", {"i": i}, index=False) for i, t in enumerate(tails)])
    assert store.list_namespaces(prefix=ns + ("users", "*")) == [
        ns + ("users", "123"),
        ns + ("users", "456"),
        ns + ("users", "789", "settings"),
    ]
    assert store.list_namespaces(suffix=("*", "preferences")) == [ns + ("guests", "456", "preferences")]
    assert store.list_namespaces(prefix=ns + ("*", "users"), suffix=("*", "settings")) == []
    # several conditions of one kind (possible through batch) must all hold
    op = ListNamespacesOp(
        match_conditions=(
            MatchCondition("prefix", ns + ("*", "456")),
            MatchCondition("prefix", ns + ("guests",)),
            MatchCondition("suffix", ("preferences",)),
        )
    )
    clash = ListNamespacesOp(
        match_conditions=(MatchCondition("prefix", ns + ("users",)), MatchCondition("prefix", ns + ("guests",)))
    )
    assert store.batch([op, clash]) == [[ns + ("guests", "456", "preferences")], []]


def test_list_namespaces_pagination(store, ns):
    store.batch([PutOp(ns + ("namespace", f"sub_{i:02d}"), "k", {"i": i}, index=False) for i in range(20)])
    for offset in (0, 5, 15):
        result = store.list_namespaces(prefix=ns + ("namespace",), limit=5, offset=offset)
        assert result == [ns + ("namespace", f"sub_{i:02d}") for i in range(offset, offset + 5)]
    assert len(store.list_namespaces(prefix=ns, limit=5000)) == 20


def test_list_namespaces_only_live_items(store, ns):
    store.put(ns + ("gone",), "k", {"a": 1})
    store.put(ns + ("kept",), "k", {"a": 1})
    store.delete(ns + ("gone",), "k")
    assert store.list_namespaces() == [ns + ("kept",)]


def test_context_manager_closes(live_server, uid, ns):
    with MemsvcStore(url=live_server.url, token=lambda: live_server.token(uid)) as store:
        store.put(ns, "k", {"a": 1})
        assert store.get(ns, "k").value == {"a": 1}
    time.sleep(0)  # closed without error
