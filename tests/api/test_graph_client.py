"""The knowledge-graph methods of `MemsvcClient` and `AsyncMemsvcClient` against the live servers."""

from __future__ import annotations

import asyncio
import time

import pytest

from memsvc_client import AsyncMemsvcClient, MemsvcClient, NotFoundError


@pytest.fixture
def client(live_server, uid):
    with MemsvcClient(live_server.url, live_server.token(uid)) as c:
        yield c


def _settled(client, prefix, *names, timeout=120.0):  # background indexing, however busy the machine
    # Each name must be waited for: changes to different items may be indexed in any order
    # (DynamoDB streams order changes per item only).
    deadline = time.monotonic() + timeout
    for name in names:
        while not client.find_entities(prefix, [name])["entities"]:
            assert time.monotonic() < deadline, f"{name!r} not in the graph after {timeout}s"
            time.sleep(0.05)


def test_client_methods_sync(client, uid):
    ns = ["user", uid, "notes"]
    client.put(ns, "a", {"text": "Alice works on Project A."})
    client.put(ns, "b", {"text": "Project A caused the memory leak."})
    _settled(client, ns, "Alice", "memory leak")
    assert client.path(ns, "Alice", "memory leak")["hops"] == 2
    assert client.path(ns, (ns, "a"), (ns, "b"))["entities"][0]["name"] == "Project A"
    assert [m["key"] for m in client.related(ns, "Alice", max_hops=2)["memories"]] == ["a", "b"]
    with pytest.raises(NotFoundError) as missing:
        client.put_relation(ns, "Dana", "REPORTS_TO", "Alice")
    assert missing.value.details["missing"] == ["source"]
    assert client.put_entity(ns, "Dana", "PERSON")["explicit"] is True
    client.put_relation(ns, "Dana", "REPORTS_TO", "Alice")
    assert client.path(ns, "Dana", "memory leak")["hops"] == 3
    (reports,) = client.neighbours(ns, "Dana", direction="out", relation="REPORTS_TO")["edges"]
    assert (reports["direction"], reports["entity"]["name"]) == ("out", "Alice")
    page = client.neighbours(ns, (ns, "a"), limit=1)
    assert len(page["edges"]) == 1 and client.neighbours(ns, (ns, "a"), limit=1, cursor=page["next_cursor"])["edges"]
    assert client.delete_relation(ns, "Dana", "REPORTS_TO", "Alice") is None
    assert client.delete_entity(ns, "Dana") is None
    assert client.find_entities(ns, ["Dana"])["entities"] == []
    assert client.recall("Alice", namespace_prefix=ns, graph_hops=1, mode="keyword", min_score=0)["memories"]


def test_client_methods_async(client, live_server, uid):
    ns = ["user", uid, "async"]
    client.put(ns, "a", {"text": "Bob Stone uses Kafka."})
    _settled(client, ns, "Kafka")

    async def run():
        async with AsyncMemsvcClient(live_server.url, live_server.token(uid)) as c:
            (kafka,) = (await c.find_entities(ns, ["kafka"]))["entities"]
            assert (await c.related(ns, "Bob Stone", max_hops=1))["memories"][0]["key"] == "a"
            assert (await c.path(ns, "Bob Stone", "Kafka"))["steps"][0]["edges"][0]["type"] == "USES"
            return kafka

    assert asyncio.run(run())["type"] == "CONCEPT"


def test_client_valid_time(client, uid):
    ns = ["user", uid, "times"]
    for name in ("Dana", "Project Q"):
        client.put_entity(ns, name)
    written = client.put_relation(ns, "Dana", "WORKS_ON", "Project Q", valid_from="2020-01-01T00:00:00Z",
                                  valid_to="2023-01-01T00:00:00Z")
    assert (written["valid_from"], written["valid_to"]) == ("2020-01-01T00:00:00.000000Z", "2023-01-01T00:00:00.000000Z")
    assert client.path(ns, "Dana", "Project Q")["found"] is False  # ended
    assert client.path(ns, "Dana", "Project Q", as_of="2021-06-01T00:00:00Z")["hops"] == 1
    assert client.related(ns, "Dana", as_of="2021-06-01T00:00:00Z")["memories"] == []
    opened = client.put_relation(ns, "Dana", "WORKS_ON", "Project Q")  # written again: from now, open
    assert opened["valid_to"] is None and client.path(ns, "Dana", "Project Q")["found"] is True
