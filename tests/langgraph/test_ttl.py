"""TTL: LangGraph's `ttl` (minutes), `TTLConfig(default_ttl, refresh_on_read)` and `refresh_ttl`,
against the live server. Seconds-scale TTLs; refreshes are checked on the stored `expires_at`,
expiry itself with one short sleep."""

from __future__ import annotations

import asyncio
import time
from datetime import datetime

import pytest

pytestmark = pytest.mark.slow


def _expires(raw, namespace, key) -> datetime | None:
    memory = raw(namespace, key)
    return datetime.fromisoformat(memory["expires_at"]) if memory and memory["expires_at"] else None


def _lifetime(raw, namespace, key) -> float:
    memory = raw(namespace, key)
    return (datetime.fromisoformat(memory["expires_at"]) - datetime.fromisoformat(memory["updated_at"])).total_seconds()


def test_ttl_minutes_become_whole_seconds_rounded_up(store, ns, raw):
    store.put(ns, "a", {"v": 1}, ttl=0.02)  # 1.2 s -> 2 s
    store.put(ns, "b", {"v": 1}, ttl=5 / 60)  # 5 s, not 6 s from float noise
    store.put(ns, "c", {"v": 1}, ttl=0.0001)  # 6 ms -> the 1 s minimum
    store.put(ns, "d", {"v": 1}, ttl=None)
    assert _lifetime(raw, ns, "a") == pytest.approx(2, abs=0.01)
    assert _lifetime(raw, ns, "b") == pytest.approx(5, abs=0.01)
    assert _lifetime(raw, ns, "c") == pytest.approx(1, abs=0.01)
    assert raw(ns, "d")["expires_at"] is None
    with pytest.raises(ValueError):
        store.put(ns, "e", {"v": 1}, ttl=-1)


def test_expired_items_disappear_from_get_search_and_list(store, ns):
    short, keep = ns + ("short",), ns + ("keep",)
    store.put(short, "item1", {"value": "apple"}, ttl=1 / 60)
    store.put(keep, "item2", {"value": "apple"})
    assert store.get(short, "item1", refresh_ttl=False) is not None
    assert len(store.search(ns, filter={"value": "apple"}, refresh_ttl=False)) == 2
    time.sleep(1.3)
    assert store.get(short, "item1") is None
    assert [i.key for i in store.search(ns, filter={"value": "apple"})] == ["item2"]
    assert store.search(ns, query="apple") and all(i.key == "item2" for i in store.search(ns, query="apple"))
    assert store.list_namespaces() == [keep]


def test_default_ttl_and_refresh_on_read(make_store, ns, raw):
    store = make_store(ttl={"default_ttl": 1.0, "refresh_on_read": True})
    store.put(ns, "default", {"v": 1})
    store.put(ns, "override", {"v": 1}, ttl=0.5)
    store.put(ns, "forever", {"v": 1}, ttl=None)
    assert _lifetime(raw, ns, "default") == pytest.approx(60, abs=0.01)
    assert _lifetime(raw, ns, "override") == pytest.approx(30, abs=0.01)
    assert raw(ns, "forever")["expires_at"] is None

    before = _expires(raw, ns, "default")
    time.sleep(0.05)
    assert store.get(ns, "default") is not None  # refresh_on_read: the timer restarts
    after_get = _expires(raw, ns, "default")
    assert after_get > before
    time.sleep(0.05)
    store.get(ns, "default", refresh_ttl=False)
    assert _expires(raw, ns, "default") == after_get
    time.sleep(0.05)
    assert {i.key for i in store.search(ns)} == {"default", "override", "forever"}
    assert _expires(raw, ns, "default") > after_get  # search refreshes what it returns
    assert raw(ns, "forever")["expires_at"] is None  # and leaves items without a TTL alone


def test_refresh_on_read_false(make_store, ns, raw):
    store = make_store(ttl={"default_ttl": 1.0, "refresh_on_read": False})
    store.put(ns, "k", {"v": 1})
    before = _expires(raw, ns, "k")
    time.sleep(0.05)
    store.get(ns, "k")
    store.search(ns)
    assert _expires(raw, ns, "k") == before
    store.get(ns, "k", refresh_ttl=True)  # an explicit refresh_ttl wins over the config
    refreshed = _expires(raw, ns, "k")
    assert refreshed > before
    time.sleep(0.05)
    store.search(ns, refresh_ttl=True)
    assert _expires(raw, ns, "k") > refreshed


def test_refresh_keeps_an_item_alive(make_store, ns):
    store = make_store(ttl={"default_ttl": 2 / 60})
    store.put(ns, "item1", {"value": "test"})
    time.sleep(1.2)
    assert store.get(ns, "item1") is not None  # refreshed: 2 more seconds
    time.sleep(1.2)
    assert store.get(ns, "item1", refresh_ttl=False) is not None  # 2.4 s after the put
    time.sleep(1.1)
    assert store.get(ns, "item1") is None


def test_async_ttl(make_store, ns, raw):
    store = make_store(ttl={"default_ttl": 1.0})

    async def main():
        await store.aput(ns, "k", {"v": 1})
        before = _expires(raw, ns, "k")
        await asyncio.sleep(0.05)
        assert await store.aget(ns, "k") is not None
        assert _expires(raw, ns, "k") > before
        await store.aput(ns, "short", {"v": 1}, ttl=1 / 60)
        await asyncio.sleep(1.3)
        assert await store.aget(ns, "short") is None
        assert [i.key for i in await store.asearch(ns)] == ["k"]

    asyncio.run(main())
