"""GET /v1/memories/history over HTTP, on `memsvc serve` and on the AWS backend (moto), where the
versions reach the timeline through the background consumers: the answer's shape, paging, the
error envelope, and isolation (another user or tenant gets the 404 of a key never written)."""

from __future__ import annotations

import time
from typing import Any

import httpx
import pytest

from tests.api.helpers import assert_error, delete, ns_query, put_ok

VERSION_KEYS = {"id", "memory_id", "version", "kind", "action", "reason", "occurred_at", "expires_at", "value",
                "attributes", "replaced_by", "superseded_by", "recorded"}


def history(client: httpx.Client, ns: list[str], key: str, **params: Any) -> httpx.Response:
    return client.get("/v1/memories/history", params=ns_query(ns, key) + list(params.items()))


def recorded(client: httpx.Client, ns: list[str], key: str, count: int, timeout: float = 30.0) -> dict[str, Any]:
    """The first page, once the timeline has recorded `count` versions."""
    deadline = time.monotonic() + timeout
    while True:
        r = history(client, ns, key, limit=100)
        assert r.status_code == 200, r.text
        body = r.json()
        if sum(v["recorded"] for v in body["versions"]) >= count:
            return body
        assert time.monotonic() < deadline, body
        time.sleep(0.1)


def test_every_version_newest_first_and_paged(me, home):
    ns = [*home, "facts"]
    first = put_ok(me, ns, "city", {"text": "lives in Lyon"}, attributes={"source": "chat"})
    second = put_ok(me, ns, "city", {"text": "lives in Lisbon"})
    assert delete(me, ns, "city").status_code == 204
    third = put_ok(me, ns, "city", {"text": "lives in Oslo"})
    body = recorded(me, ns, "city", 4)

    assert set(body) == {"versions", "next_cursor", "past_retention_before", "retention_days"}
    assert body["next_cursor"] is None and body["past_retention_before"] is None
    versions = body["versions"]
    for v in versions:
        assert set(v) == VERSION_KEYS, v
    assert [(v["kind"], v["version"]) for v in versions] == [("add", 4), ("delete", 3), ("update", 2), ("add", 1)]
    assert [v["value"] for v in versions] == [{"text": "lives in Oslo"}, None, {"text": "lives in Lisbon"},
                                              {"text": "lives in Lyon"}]
    assert versions[3]["attributes"] == {"source": "chat"} and versions[3]["id"] == first["id"]
    assert versions[1]["memory_id"] == second["id"] and versions[0]["id"] == third["id"]
    assert versions[0]["replaced_by"] is None
    assert versions[3]["replaced_by"] == {"id": second["id"], "version": 2, "kind": "update"}

    pages, cursor = [], None
    while True:
        r = history(me, ns, "city", limit=3, **({"cursor": cursor} if cursor else {}))
        assert r.status_code == 200, r.text
        pages.append(r.json()["versions"])
        cursor = r.json()["next_cursor"]
        if cursor is None:
            break
    assert [len(p) for p in pages] == [3, 1]
    assert [v for p in pages for v in p] == versions


def test_bad_input_is_a_400_envelope(me, home):
    ns = [*home, "facts"]
    put_ok(me, ns, "k", {"text": "x"})
    for params in ({"limit": 0}, {"limit": 101}, {"limit": "many"}, {"cursor": "not-a-cursor"}):
        assert_error(history(me, ns, "k", **params), 400)
    assert_error(me.get("/v1/memories/history", params=[("key", "k")]), 400)  # no namespace
    assert_error(me.get("/v1/memories/history", params=ns_query(ns)), 400)  # no key


def test_other_users_and_tenants_get_the_404_of_a_key_never_written(me, make_client, tenant, uid, home):
    ns = [*home, "facts"]
    put_ok(me, ns, "secret", {"text": "alice's"})
    never = assert_error(history(me, ns, "never-written"), 404, "NOT_FOUND")
    strangers = [make_client("someone-else", tenant=tenant), make_client(uid, tenant=tenant + "-other")]
    for client in strangers:
        err = assert_error(history(client, ns, "secret"), 404, "NOT_FOUND")
        assert err["message"] == never["message"]
        assert "alice's" not in str(err)


def test_the_client_sync_and_async(live_server, uid):
    import asyncio

    from memsvc_client import AsyncMemsvcClient, MemsvcClient, NotFoundError

    ns = ["user", uid, "client"]
    with MemsvcClient(live_server.url, live_server.token(uid)) as client:
        for n in range(3):
            client.put(ns, "k", {"n": n})
        deadline = time.monotonic() + 30
        while not all(v["recorded"] for v in client.history(ns, "k")["versions"]):  # the timeline's lag
            assert time.monotonic() < deadline
            time.sleep(0.1)
        first = client.history(ns, "k", limit=2)
        assert [v["version"] for v in first["versions"]] == [3, 2]
        older = client.history(ns, "k", limit=2, cursor=first["next_cursor"])
        assert [v["version"] for v in older["versions"]] == [1] and older["next_cursor"] is None
        with pytest.raises(NotFoundError):
            client.history(ns, "never")

    async def run() -> dict:
        async with AsyncMemsvcClient(live_server.url, live_server.token(uid)) as client:
            return await client.history(ns, "k")

    assert asyncio.run(run())["versions"][0]["value"] == {"n": 2}
