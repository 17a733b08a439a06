"""The LangGraph Platform store API (`/store/...`, issue 28), driven by LangGraph's own SDK
(`langgraph_sdk`, sync and async clients, unchanged) on both backends: put, get, delete, search by
filter and by query, namespaces, TTL in minutes, isolation between users and tenants, and bad input
refused with our envelope, changing nothing."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterator
from datetime import datetime, timedelta

import httpx
import pytest
from langgraph_sdk import get_client, get_sync_client
from langgraph_sdk.errors import BadRequestError, PermissionDeniedError
from langgraph_sdk.schema import Item

from tests.api.helpers import ERROR_KEYS, get, unique_tenant

pytestmark = pytest.mark.slow

ITEM_KEYS = {"namespace", "key", "value", "created_at", "updated_at"}


def _headers(live_server, sub: str, tenant: str, roles: list[str] | None = None) -> dict[str, str]:
    return {"Authorization": f"Bearer {live_server.token(sub, tenant=tenant, roles=roles)}"}


@pytest.fixture
def store(live_server) -> Iterator[Callable[..., object]]:
    """`store(sub, tenant)` -> `langgraph_sdk.get_sync_client(url=..., headers=...).store`."""
    clients = []

    def make(sub: str, tenant: str, roles: list[str] | None = None):
        client = get_sync_client(url=live_server.url, api_key=None, headers=_headers(live_server, sub, tenant, roles))
        clients.append(client)
        return client.store

    yield make
    for client in clients:
        client.close()


@pytest.fixture
def mine(store, uid, tenant):
    return store(uid, tenant)


def _when(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


def test_put_get_delete_with_langgraphs_sync_client(mine, home, live_server):
    ns = [*home, "notes"]
    assert mine.put_item(ns, "tip", {"text": "Python uses indentation", "stars": 5}) is None
    item = mine.get_item(ns, "tip")
    assert set(item) == ITEM_KEYS
    assert (item["namespace"], item["key"], item["value"]) == (ns, "tip", {"text": "Python uses indentation",
                                                                            "stars": 5})
    assert item["created_at"] == item["updated_at"]
    mine.put_item(ns, "tip", {"text": "Python blocks are indented"})
    again = mine.get_item(ns, "tip")
    assert again["value"] == {"text": "Python blocks are indented"}
    assert again["created_at"] == item["created_at"] and again["updated_at"] > item["updated_at"]

    assert mine.delete_item(ns, "tip") is None
    assert mine.get_item(ns, "tip") is None  # LangGraph's servers answer null; the SDK returns None
    mine.delete_item(ns, "tip")  # idempotent


def test_the_wire_answers_are_langgraphs(live_server, uid, tenant, home):
    """204 for put and delete, `null` for a missing item: what LangGraph's servers answer."""
    with httpx.Client(base_url=live_server.url, headers=_headers(live_server, uid, tenant)) as http:
        put = http.put("/store/items", json={"namespace": home, "key": "k", "value": {"a": "b"}})
        assert (put.status_code, put.content) == (204, b"")
        missing = http.get("/store/items", params={"namespace": ".".join(home), "key": "nope"})
        assert (missing.status_code, missing.json()) == (200, None)
        gone = http.request("DELETE", "/store/items", json={"namespace": home, "key": "k"})
        assert (gone.status_code, gone.content) == (204, b"")


def test_every_store_route_needs_a_token(live_server, store, uid, tenant, home):
    calls = [("PUT", "/store/items", {"json": {"namespace": home, "key": "k", "value": {}}}),
             ("GET", "/store/items", {"params": {"namespace": ".".join(home), "key": "k"}}),
             ("DELETE", "/store/items", {"json": {"namespace": home, "key": "k"}}),
             ("POST", "/store/items/search", {"json": {"namespace_prefix": home}}),
             ("POST", "/store/namespaces", {"json": {}})]
    store(uid, tenant).put_item(home, "k", {"text": "kept"})
    with httpx.Client(base_url=live_server.url) as anonymous:
        for method, path, kw in calls:
            r = anonymous.request(method, path, **kw)
            assert r.status_code == 401 and r.json()["error"]["code"] == "UNAUTHORIZED", (method, path)
    assert store(uid, tenant).get_item(home, "k")["value"] == {"text": "kept"}


def test_search_by_filter_and_by_query(mine, home):
    ns = [*home, "kb"]
    mine.put_item(ns, "py", {"text": "Python uses indentation for blocks", "lang": "en", "stars": 5,
                             "meta": {"topic": "code", "level": 1}})
    mine.put_item(ns, "rust", {"text": "Rust has a borrow checker", "lang": "en", "stars": 3,
                               "meta": {"topic": "code", "level": 2}})
    mine.put_item(ns, "bread", {"text": "Sourdough needs a starter", "lang": "fr", "stars": 4,
                                "meta": {"topic": "food", "level": 1}})

    by_filter = mine.search_items(home, filter={"lang": "en"})["items"]
    assert sorted(i["key"] for i in by_filter) == ["py", "rust"]
    assert all(set(i) == ITEM_KEYS | {"score"} and i["score"] is None for i in by_filter)
    assert [i["key"] for i in mine.search_items(home, filter={"stars": {"$gte": 4}, "lang": "en"})["items"]] == ["py"]
    # An object without operators matches field by field, as in LangGraph's stores.
    nested = mine.search_items(home, filter={"meta": {"topic": "code", "level": 1}})["items"]
    assert [i["key"] for i in nested] == ["py"]
    assert len(mine.search_items(home, limit=2)["items"]) == 2
    assert len(mine.search_items(home, limit=2, offset=2)["items"]) == 1

    ranked = mine.search_items(home, query="whitespace-sensitive syntax in programming languages")["items"]
    assert ranked[0]["key"] == "py"  # searchable as soon as the put answered
    assert all(isinstance(i["score"], float) for i in ranked)
    assert [i["score"] for i in ranked] == sorted((i["score"] for i in ranked), reverse=True)
    filtered = mine.search_items(home, query="baking bread", filter={"lang": "fr"})["items"]
    assert [i["key"] for i in filtered] == ["bread"]
    # A blank query is no query, as in LangGraph's stores.
    assert all(i["score"] is None for i in mine.search_items(home, query=" ")["items"])


def test_index_false_and_index_paths(mine, home):
    ns = [*home, "idx"]
    mine.put_item(ns, "hidden", {"text": "the violin concerto in D major"}, index=False)
    mine.put_item(ns, "title", {"title": "violin sonatas", "body": "about gardening"}, index=["title"])
    found = [i["key"] for i in mine.search_items(ns, query="violin concerto")["items"]]
    assert "hidden" not in found and "title" in found
    assert [i["key"] for i in mine.search_items(ns, filter={"text": "the violin concerto in D major"})["items"]] == [
        "hidden"]


def test_list_namespaces_with_prefix_suffix_and_max_depth(mine, home):
    for sub in (["a", "x"], ["a", "y"], ["b", "x"]):
        mine.put_item([*home, *sub], "k", {"v": "1"})
    listed = mine.list_namespaces(prefix=home)["namespaces"]
    assert listed == [[*home, "a", "x"], [*home, "a", "y"], [*home, "b", "x"]]
    assert mine.list_namespaces(prefix=[*home, "a"])["namespaces"] == [[*home, "a", "x"], [*home, "a", "y"]]
    assert mine.list_namespaces(prefix=home, suffix=["x"])["namespaces"] == [[*home, "a", "x"], [*home, "b", "x"]]
    assert mine.list_namespaces(prefix=["user", "*", "b"])["namespaces"] == [[*home, "b", "x"]]
    assert mine.list_namespaces(prefix=home, max_depth=3)["namespaces"] == [[*home, "a"], [*home, "b"]]
    assert mine.list_namespaces(prefix=home, limit=1, offset=1)["namespaces"] == [[*home, "a", "y"]]


def test_ttl_is_in_minutes_and_reads_refresh_it_unless_told_not_to(mine, me, home):
    ns = [*home, "ttl"]
    mine.put_item(ns, "one", {"v": "1"}, ttl=1)
    mine.put_item(ns, "half", {"v": "1"}, ttl=0.5)
    mine.put_item(ns, "never", {"v": "1"})
    ours = {k: get(me, ns, k).json() for k in ("one", "half", "never")}
    for key, seconds in (("one", 60), ("half", 30)):
        assert _when(ours[key]["expires_at"]) - _when(ours[key]["updated_at"]) == timedelta(seconds=seconds)
    assert ours["never"]["expires_at"] is None

    mine.get_item(ns, "one", refresh_ttl=False)
    mine.search_items(ns, refresh_ttl=False)
    assert get(me, ns, "one").json()["expires_at"] == ours["one"]["expires_at"]  # no refresh asked: unchanged
    mine.get_item(ns, "one")  # LangGraph's default: refresh on read
    assert _when(get(me, ns, "one").json()["expires_at"]) >= _when(ours["one"]["expires_at"])
    before = get(me, ns, "half").json()["expires_at"]
    mine.search_items(ns, filter={"v": "1"})
    assert _when(get(me, ns, "half").json()["expires_at"]) >= _when(before)


def test_another_user_and_another_tenant_cannot_reach_the_items(store, mine, uid, tenant, home):
    ns = [*home, "secret"]
    mine.put_item(ns, "pin", {"text": "1234"})
    bob = store("bob-" + uid, tenant)
    with pytest.raises(PermissionDeniedError) as denied:
        bob.get_item(ns, "pin")
    assert denied.value.response.status_code == 403
    assert set(denied.value.response.json()["error"]) == ERROR_KEYS
    for call in (lambda: bob.put_item(ns, "pin", {"text": "0000"}), lambda: bob.delete_item(ns, "pin"),
                 lambda: bob.search_items(home), lambda: bob.list_namespaces(prefix=home)):
        with pytest.raises(PermissionDeniedError):
            call()
    assert bob.search_items([], filter={"text": "1234"})["items"] == []
    assert [*home, "secret"] not in bob.list_namespaces()["namespaces"]

    stranger = store(uid, unique_tenant())  # the same user name, in another tenant
    assert stranger.get_item(ns, "pin") is None
    assert stranger.search_items(home)["items"] == []
    assert stranger.list_namespaces(prefix=home)["namespaces"] == []
    # Its put and delete land in its own tenant: what it reads back is its own, and ours stays.
    stranger.put_item(ns, "pin", {"text": "0000"})
    assert mine.get_item(ns, "pin")["value"] == {"text": "1234"}
    assert [i["value"] for i in stranger.search_items(home)["items"]] == [{"text": "0000"}]
    assert stranger.list_namespaces(prefix=home)["namespaces"] == [ns]
    stranger.delete_item(ns, "pin")
    assert stranger.get_item(ns, "pin") is None

    assert mine.get_item(ns, "pin")["value"] == {"text": "1234"}  # untouched


@pytest.mark.parametrize("bad", [
    {"ttl": 0}, {"ttl": -1}, {"ttl": True}, {"ttl": "5"}, {"index": 0}, {"index": ["a..b"]},
    {"namespace": ["user", "x.y"]}, {"namespace": []}, {"key": ""}, {"value": "text"}, {"extra": 1},
])
def test_bad_puts_are_400_with_our_envelope_and_change_nothing(bad, live_server, mine, uid, tenant, home):
    mine.put_item(home, "k", {"text": "kept"})
    body = {"namespace": home, "key": "k", "value": {"text": "replaced"}, **bad}
    with httpx.Client(base_url=live_server.url, headers=_headers(live_server, uid, tenant)) as http:
        r = http.put("/store/items", json=body)
    assert r.status_code == 400, r.text
    error = r.json()["error"]
    assert set(error) == ERROR_KEYS and error["code"] == "INVALID_ARGUMENT"
    assert mine.get_item(home, "k")["value"] == {"text": "kept"}


def test_a_refusal_names_langgraphs_fields(live_server, mine, uid, tenant, home):
    """Too many text fields to embed: the refusal says `index`, LangGraph's name, not `index_fields`."""
    many = {f"f{n}": "text" for n in range(65)}
    with httpx.Client(base_url=live_server.url, headers=_headers(live_server, uid, tenant)) as http:
        r = http.put("/store/items", json={"namespace": home, "key": "many", "value": many})
    assert r.status_code == 400, r.text
    error = r.json()["error"]
    assert error["details"]["field"] == "index" and "index=false" in error["message"]
    assert "index_fields" not in error["message"]
    assert mine.get_item(home, "many") is None


def test_bad_reads_are_400_through_the_sdk(mine, home):
    with pytest.raises(BadRequestError) as bad:
        mine.search_items(home, limit=101)
    assert bad.value.response.json()["error"]["details"]["field"] == "limit"
    with pytest.raises(BadRequestError):
        mine.search_items(home, filter={"stars": {"$gt": "many"}})
    with pytest.raises(BadRequestError):  # one path twice, dotted and nested: refused, not one of them dropped
        mine.search_items(home, filter={"meta.topic": "code", "meta": {"topic": "food"}})
    with pytest.raises(BadRequestError):
        mine.list_namespaces(max_depth=0)
    with pytest.raises(BadRequestError):  # LangGraph's GET joins labels with '.': an empty label
        mine.get_item([*home, ""], "k")


def test_langgraphs_async_client(live_server, uid, tenant, home):
    async def run() -> None:
        async with get_client(url=live_server.url, api_key=None, headers=_headers(live_server, uid, tenant)) as client:
            ns = [*home, "async"]
            await client.store.put_item(ns, "a", {"text": "asynchronous hello"}, ttl=2)
            item: Item = await client.store.get_item(ns, "a")
            assert item["value"] == {"text": "asynchronous hello"}
            found = await client.store.search_items(ns, query="hello")
            assert [i["key"] for i in found["items"]] == ["a"]
            assert (await client.store.list_namespaces(prefix=ns))["namespaces"] == [ns]
            await client.store.delete_item(ns, "a")
            assert await client.store.get_item(ns, "a") is None
            with pytest.raises(PermissionDeniedError):
                await client.store.get_item(["user", "someone-else"], "a")

    asyncio.run(run())
