"""Many writers and readers at once against the live server: no 5xx, no lost update, no torn read.

Writers to one key race on its version. The service retries a lost race itself; when the race
goes on past its retries it answers `409 CONFLICT` with `retryable: true`, and a client writes
again (as `MemsvcStore` does). On `local` (SQLite, sub-millisecond writes) that never happens
here and the tests require it never does. On `aws` a write is a GetItem and a conditional
PutItem apart, each a round trip (milliseconds on DynamoDB, more on moto), so sixteen writers
on one key do exhaust the service's retries now and then: there the tests retry as a client
would, and require that every write lands in the end, each with a version of its own.
"""

from __future__ import annotations

import random
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import httpx
import pytest

from tests.api.helpers import (
    assert_error,
    client_for,
    delete,
    get,
    put,
    put_ok,
    search,
    search_ok,
    sync_index,
)

pytestmark = pytest.mark.slow

THREADS = 16
WRITES_PER_THREAD = 25
MAX_CLIENT_RETRIES = 30


class Conflicts:
    """Counts the retryable 409s a test's writers were answered, and checks them."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.count = 0

    def write(self, send) -> httpx.Response:
        """`send()` until it is not a 409 CONFLICT (retryable), as a client retries one."""
        for attempt in range(MAX_CLIENT_RETRIES):
            r = send()
            if r.status_code != 409:
                return r
            err = assert_error(r, 409, "CONFLICT")
            assert err["retryable"] is True, err
            with self._lock:
                self.count += 1
            time.sleep(random.uniform(0, min(0.5, 0.01 * 2**attempt)))
        raise AssertionError(f"still 409 CONFLICT after {MAX_CLIENT_RETRIES} attempts")

    def check(self, backend: str, writes: int) -> None:
        if backend == "local":
            assert self.count == 0, f"{self.count} of {writes} writes were refused with 409 CONFLICT"


def _value(w: int, j: int) -> dict[str, Any]:
    # several fields derived from (w, j): a half-written or mixed-up item would not agree with itself
    return {"w": w, "j": j, "check": f"{w}-{j}", "pad": f"{w}:{j}:" + "x" * (w * 37 % 500), "n": w * 1000 + j}


def _consistent(value: dict[str, Any]) -> bool:
    w, j = value["w"], value["j"]
    return value == _value(w, j)


def _run(n: int, fn) -> list[Any]:
    with ThreadPoolExecutor(n) as pool:
        return list(pool.map(fn, range(n)))


def test_concurrent_writes_to_one_key_lose_no_update(live_server, uid, tenant):
    ns, key = ["user", uid, "shared"], "counter"
    done = threading.Event()
    conflicts = Conflicts()
    with client_for(live_server, uid, tenant=tenant) as c:
        first = put_ok(c, ns, key, _value(-1, -1))
    assert first["version"] == 1

    def writer(w: int) -> list[tuple[int, dict[str, Any], tuple[int, int]]]:
        out = []
        with client_for(live_server, uid, tenant=tenant) as c:
            for j in range(WRITES_PER_THREAD):
                r = conflicts.write(lambda: put(c, ns, key, _value(w, j)))
                out.append((r.status_code, r.json(), (w, j)))
        return out

    def reader(_: int) -> list[tuple[int, dict[str, Any]]]:
        out = []
        with client_for(live_server, uid, tenant=tenant) as c:
            while not done.is_set():
                r = get(c, ns, key)
                out.append((r.status_code, r.json()))
        return out

    with ThreadPoolExecutor(THREADS + 3) as pool:
        readers = [pool.submit(reader, i) for i in range(3)]
        writers = [pool.submit(writer, w) for w in range(THREADS)]
        writes = [x for f in writers for x in f.result()]
        done.set()
        per_reader = [f.result() for f in readers]
        reads = [x for chunk in per_reader for x in chunk]

    statuses = [s for s, _, _ in writes]
    assert statuses == [200] * (THREADS * WRITES_PER_THREAD), sorted(set(statuses))
    conflicts.check(live_server.backend, THREADS * WRITES_PER_THREAD)
    versions = [body["version"] for _, body, _ in writes]
    assert sorted(versions) == list(range(2, THREADS * WRITES_PER_THREAD + 2)), "two writes got one version"
    ids = [body["id"] for _, body, _ in writes]
    assert len(set(ids)) == len(ids)
    assert all(body["created_at"] == first["created_at"] for _, body, _ in writes)
    by_version = {body["version"]: (body["id"], _value(*wj)) for _, body, wj in writes}
    by_version[1] = (first["id"], _value(-1, -1))

    with client_for(live_server, uid, tenant=tenant) as c:
        final = get(c, ns, key).json()
    assert final["version"] == THREADS * WRITES_PER_THREAD + 1, "lost update"
    assert (final["id"], final["value"]) == by_version[final["version"]]

    assert reads, "the readers never ran"
    assert {s for s, _ in reads} == {200}, {s for s, _ in reads}
    seen = []
    for _, item in reads:
        assert _consistent(item["value"]), item
        assert (item["id"], item["value"]) == by_version[item["version"]], "a read mixed two writes"
        seen.append(item["version"])
    assert max(seen) <= final["version"]
    for chunk in per_reader:  # one reader's reads are sequential, so its versions never go backwards
        versions_seen = [item["version"] for _, item in chunk]
        assert versions_seen == sorted(versions_seen)


def test_concurrent_writes_to_distinct_keys_are_all_readable(live_server, uid, tenant):
    home = ["user", uid]
    done = threading.Event()

    def writer(w: int) -> list[tuple[int, dict[str, Any]]]:
        out = []
        with client_for(live_server, uid, tenant=tenant) as c:
            for j in range(WRITES_PER_THREAD):
                # not embedded: the point is the write path, and 400 embeddings would only burn CPU
                r = put(c, home + [f"ns{w % 4}"], f"k-{w}-{j}", _value(w, j), index_fields=False)
                out.append((r.status_code, r.json()))
        return out

    def searcher(i: int) -> list[int]:
        out = []
        with client_for(live_server, uid, tenant=tenant) as c:
            while not done.is_set():
                body: dict[str, Any] = {"limit": 100, "filter": {"w": {"gte": i}}}
                if i == 0:
                    body = {"limit": 5, "query": "pad check"}
                r = search(c, home, **body)
                out.append(r.status_code)
                if r.status_code == 200:
                    assert all(_consistent(item["value"]) for item in r.json()["items"])
        return out

    with ThreadPoolExecutor(THREADS + 2) as pool:
        searchers = [pool.submit(searcher, i) for i in range(2)]
        writes = [x for f in [pool.submit(writer, w) for w in range(THREADS)] for x in f.result()]
        done.set()
        searches = [x for f in searchers for x in f.result()]

    assert [s for s, _ in writes] == [200] * (THREADS * WRITES_PER_THREAD)
    assert {body["version"] for _, body in writes} == {1}
    assert searches and set(searches) == {200}, set(searches)

    def read_back(w: int) -> list[tuple[int, Any]]:
        with client_for(live_server, uid, tenant=tenant) as c:
            return [(r.status_code, r.json().get("value"))
                    for r in (get(c, home + [f"ns{w % 4}"], f"k-{w}-{j}") for j in range(WRITES_PER_THREAD))]

    reads = [x for chunk in _run(THREADS, read_back) for x in chunk]
    assert [s for s, _ in reads] == [200] * (THREADS * WRITES_PER_THREAD)
    expected = [_value(w, j) for w in range(THREADS) for j in range(WRITES_PER_THREAD)]
    assert [v for _, v in reads] == expected

    keys: list[str] = []
    with client_for(live_server, uid, tenant=tenant) as c:
        for offset in range(0, THREADS * WRITES_PER_THREAD + 100, 100):
            r = search(c, home, limit=100, offset=offset)
            assert r.status_code == 200, r.text
            keys += [i["key"] for i in r.json()["items"]]
        listed = c.get("/v1/memories/namespaces", params=[("prefix", "user"), ("prefix", uid)]).json()
    assert len(keys) == len(set(keys)) == THREADS * WRITES_PER_THREAD
    assert listed["namespaces"] == [home + [f"ns{i}"] for i in range(4)]


def test_concurrent_puts_and_deletes_of_one_key(live_server, uid, tenant):
    ns, key = ["user", uid, "flip"], "k"
    conflicts = Conflicts()

    def worker(w: int) -> list[tuple[str, int, Any]]:
        out = []
        with client_for(live_server, uid, tenant=tenant) as c:
            for j in range(15):
                if (w + j) % 3 == 0:
                    r = conflicts.write(lambda: delete(c, ns, key))
                    out.append(("delete", r.status_code, None))
                else:
                    r = conflicts.write(lambda: put(c, ns, key, _value(w, j)))
                    out.append(("put", r.status_code, r.json()["version"] if r.status_code == 200 else r.text))
        return out

    results = [x for chunk in _run(8, worker) for x in chunk]
    assert {(op, s) for op, s, _ in results} <= {("put", 200), ("delete", 204)}, results
    conflicts.check(live_server.backend, len(results))
    put_versions = [v for op, _, v in results if op == "put"]
    assert len(put_versions) == len(set(put_versions)), "two writes got one version"
    with client_for(live_server, uid, tenant=tenant) as c:
        r = get(c, ns, key)
        assert r.status_code in (200, 404), r.text
        if r.status_code == 200:  # the last operation was a put: it must be the newest one
            assert r.json()["version"] == max(put_versions)
            assert _consistent(r.json()["value"])
        final = put_ok(c, ns, key, {"final": True})
    assert final["version"] > max(put_versions)


TOPICS = ["volcanoes erupting lava", "penguins on the ice", "a violin concerto", "stock market crash",
          "baking sourdough bread", "the rings of Saturn", "a football final", "medieval castles"]


def test_concurrent_indexed_updates_leave_only_the_newest_version_in_the_index(live_server, uid, tenant):
    ns, key = ["user", uid, "idx"], "k"
    conflicts = Conflicts()

    def writer(w: int) -> list[int]:
        with client_for(live_server, uid, tenant=tenant) as c:
            return [conflicts.write(lambda: put(c, ns, key, {"text": f"{TOPICS[w]} ({j})"}, sync_index=j % 2 == 0))
                    .status_code for j in range(4)]

    statuses = [s for chunk in _run(len(TOPICS), writer) for s in chunk]
    assert statuses == [200] * (4 * len(TOPICS))
    conflicts.check(live_server.backend, 4 * len(TOPICS))
    with client_for(live_server, uid, tenant=tenant) as me, \
            client_for(live_server, "root", tenant=tenant, roles=["admin"]) as admin:
        sync_index(admin)
        final = get(me, ns, key).json()
        assert final["version"] == 4 * len(TOPICS)
        for topic in TOPICS:
            hits = search_ok(me, ["user", uid], query=topic, limit=10)
            assert [(h["id"], h["value"]) for h in hits] == [(final["id"], final["value"])], topic
        best = search_ok(me, ["user", uid], query=final["value"]["text"])[0]
        assert best["id"] == final["id"] and best["score"] > 0.8


def test_concurrent_reads_answer_as_sequential_ones_while_the_index_is_written(live_server, uid, tenant):
    """Gets and searches of every kind, from 8 threads at once, give exactly the answers one
    client got alone, while a writer keeps indexing other memories (index writes and queries
    meet on the indexes' locks; SQLite readers run side by side)."""
    ns = ["user", uid, "read"]
    with client_for(live_server, uid, tenant=tenant) as c:
        for w, topic in enumerate(TOPICS):
            put_ok(c, ns, f"k{w}", {"text": topic, "w": w, "even": w % 2 == 0}, sync_index=True)
        reads = [("get", f"k{w}") for w in range(len(TOPICS))]
        reads += [("search", {"query": topic, "mode": mode, "limit": 3}) for topic in TOPICS
                  for mode in ("semantic", "keyword", "hybrid")]
        reads += [("search", {"filter": {"even": True}}), ("search", {"filter": {"w": {"gte": 5}}})]

        def answer(client: httpx.Client, read) -> Any:
            kind, arg = read
            if kind == "get":
                r = get(client, ns, arg)
                return r.status_code, r.json()["value"]
            r = search(client, ["user", uid, "read"], **arg)
            return r.status_code, [(h["key"], round(h["score"], 4) if h["score"] is not None else None)
                                   for h in r.json()["items"]]

        expected = [answer(c, read) for read in reads]
    assert all(status == 200 for status, _ in expected)
    assert all(body for _, body in expected), "every read finds something"
    done = threading.Event()

    def writer(_: int) -> int:
        with client_for(live_server, uid, tenant=tenant) as c:
            n = 0
            while not done.is_set():
                put_ok(c, ["user", uid, "other"], f"o{n % 5}", {"text": f"{TOPICS[n % 8]} elsewhere {n}"},
                       sync_index=True)
                n += 1
            return n

    def reader(r: int) -> list[tuple[int, Any]]:
        with client_for(live_server, uid, tenant=tenant) as c:
            return [(i % len(reads), answer(c, reads[i % len(reads)])) for i in range(r, 2 * len(reads), 8)]

    with ThreadPoolExecutor(9) as pool:
        writing = pool.submit(writer, 0)
        answers = [x for chunk in pool.map(reader, range(8)) for x in chunk]
        done.set()
        assert writing.result() > 0
    assert len(answers) == 2 * len(reads)
    for i, got in answers:
        assert got == expected[i], reads[i]
