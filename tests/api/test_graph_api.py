"""The knowledge graph over HTTP (`/v1/graph/...`): shapes, errors in the envelope, and isolation
on every route (other users, other tenants, `%2F` and non-ASCII namespaces)."""

from __future__ import annotations

import time

import httpx
import pytest

from tests.api.helpers import assert_error, put_ok

STORY = {
    "a": "Alice works on Project A.",
    "b": "Project A caused the memory leak.",
    "c": "The memory leak was fixed by INC-42.",
}


def find(client: httpx.Client, prefix, *names) -> httpx.Response:
    return client.post("/v1/graph/entities/find", json={"namespace_prefix": list(prefix), "names": list(names)})


def wait_for_entity(client: httpx.Client, prefix, name, *, present: bool = True, timeout: float = 120.0) -> list:
    """The graph is derived off the write path: wait (up to `timeout`) until the entity is (or is
    no longer) in the graph."""
    deadline = time.monotonic() + timeout
    while True:
        r = find(client, prefix, name)
        assert r.status_code == 200, r.text
        if bool(r.json()["entities"]) == present:
            return r.json()["entities"]
        assert time.monotonic() < deadline, f"{name!r} present={not present} after {timeout}s"
        time.sleep(0.05)


def write_story(client, ns, timeout: float = 120.0):
    """The story's three memories, waited for until the graph links all three: each memory's
    derivation lands on its own (on DynamoDB a transaction that loses a race on a shared entity is
    retried later), so one entity being there says nothing of the others."""
    for key, text in STORY.items():
        put_ok(client, ns, key, {"text": text})
    deadline = time.monotonic() + timeout
    while True:
        r = client.post("/v1/graph/related", json={"namespace_prefix": list(ns), "from": {"entity": "Alice"},
                                                   "max_hops": 3})
        assert r.status_code == 200, r.text
        if len(r.json()["memories"]) == len(STORY):
            return
        assert time.monotonic() < deadline, f"the story's graph after {timeout}s: {r.json()}"
        time.sleep(0.05)


def test_find_related_and_path(live_server, me, home):
    ns = [*home, "notes"]
    write_story(me, ns)
    (project,) = find(me, home, "project a").json()["entities"]
    assert project["name"] == "Project A" and project["type"] == "PROJECT" and project["namespaces"] == [ns]
    assert set(project) == {"id", "name", "type", "namespaces", "explicit"}

    r = me.post("/v1/graph/related", json={"namespace_prefix": home, "from": {"entity": "Alice"}, "max_hops": 3})
    assert r.status_code == 200, r.text
    body = r.json()
    assert [(m["key"], m["hops"], m["via"]["name"]) for m in body["memories"]] == [
        ("a", 1, "Alice"), ("b", 2, "Project A"), ("c", 3, "memory leak")]
    assert body["memories"][0]["value"] == {"text": STORY["a"]} and body["truncated"] is False

    r = me.post("/v1/graph/path", json={"namespace_prefix": home, "from": {"entity": "Alice"},
                                        "to": {"memory": {"namespace": ns, "key": "c"}}})
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["found"] and body["hops"] == 2
    assert [e["name"] for e in body["entities"]] == ["Alice", "Project A", "memory leak"]
    edge = body["steps"][1]["edges"][0]
    assert edge["type"] == "CAUSED_BY" and edge["memory"]["key"] == "b" and edge["memory"]["namespace"] == ns


def test_explicit_writes_and_the_missing_entity_error(live_server, me, home):
    ns = [*home, "people"]
    r = me.put("/v1/graph/relations", json={"namespace": ns, "source": "Dana", "type": "WORKS_ON", "target": "Q"})
    err = assert_error(r, 404, "NOT_FOUND")
    assert err["details"]["missing"] == ["source", "target"] and "'Dana'" in err["message"]
    for name, kind in (("Dana", "PERSON"), ("Project Q", "PROJECT")):
        r = me.put("/v1/graph/entities", json={"namespace": ns, "name": name, "type": kind})
        assert r.status_code == 200 and r.json()["explicit"] is True, r.text
    r = me.put("/v1/graph/relations", json={"namespace": ns, "source": "dana", "type": "WORKS_ON",
                                            "target": "project q"})
    assert r.status_code == 200, r.text
    path = me.post("/v1/graph/path", json={"namespace_prefix": ns, "from": {"entity": "Dana"},
                                           "to": {"entity": "Project Q"}}).json()
    assert path["hops"] == 1 and path["steps"][0]["edges"][0]["memory"] is None
    query = [*(("ns", s) for s in ns), ("source", "Dana"), ("type", "WORKS_ON"), ("target", "Project Q")]
    assert me.delete("/v1/graph/relations", params=query).status_code == 204
    assert me.delete("/v1/graph/relations", params=query).status_code == 204  # idempotent
    assert not me.post("/v1/graph/path", json={"namespace_prefix": ns, "from": {"entity": "Dana"},
                                               "to": {"entity": "Project Q"}}).json()["found"]
    assert me.delete("/v1/graph/entities", params=[*(("ns", s) for s in ns), ("name", "Dana")]).status_code == 204
    assert find(me, ns, "Dana").json()["entities"] == []


def test_a_relations_valid_time_and_the_graph_as_of(live_server, me, home):
    ns = [*home, "people"]
    for name in ("Dana", "Project Q"):
        assert me.put("/v1/graph/entities", json={"namespace": ns, "name": name}).status_code == 200
    relation = {"namespace": ns, "source": "Dana", "type": "WORKS_ON", "target": "Project Q"}
    for times, field in (({"valid_from": "2021-01-01"}, "valid_from"),
                         ({"valid_from": "2022-01-01T00:00:00Z", "valid_to": "2021-01-01T00:00:00Z"}, "valid_to"),
                         ({"valid_to": "2001-01-01T00:00:00Z"}, "valid_to")):  # past, without a start
        err = assert_error(me.put("/v1/graph/relations", json={**relation, **times}), 400, "INVALID_ARGUMENT")
        assert err["details"]["field"] == field
    between = {"namespace_prefix": ns, "from": {"entity": "Dana"}, "to": {"entity": "Project Q"}}
    assert not me.post("/v1/graph/path", json={**between, "as_of": "2021-06-01T00:00:00Z"}).json()["found"]
    r = me.put("/v1/graph/relations", json={**relation, "valid_from": "2020-01-01T01:00:00+01:00",
                                            "valid_to": "2023-01-01T00:00:00Z"})
    assert r.status_code == 200, r.text
    assert r.json() == {"namespace": ns, "source": r.json()["source"], "type": "WORKS_ON", "target": r.json()["target"],
                        "valid_from": "2020-01-01T00:00:00.000000Z", "valid_to": "2023-01-01T00:00:00.000000Z"}
    assert me.post("/v1/graph/path", json=between).json()["found"] is False  # ended: not a current fact
    then = me.post("/v1/graph/path", json={**between, "as_of": "2021-06-01T00:00:00Z"}).json()
    assert then["found"] and then["steps"][0]["edges"][0]["valid_to"] == "2023-01-01T00:00:00.000000Z"
    r = me.post("/v1/graph/related", json={"namespace_prefix": ns, "from": {"entity": "Dana"},
                                           "as_of": "2021-06-01T00:00:00Z"})
    assert r.status_code == 200 and r.json()["memories"] == [], r.text
    for route, body in (("/v1/graph/path", between), ("/v1/graph/related", {"namespace_prefix": ns,
                                                                             "from": {"entity": "Dana"}})):
        err = assert_error(me.post(route, json={**body, "as_of": "2021-06-01"}), 400, "INVALID_ARGUMENT")
        assert err["details"]["field"] == "as_of"


@pytest.mark.parametrize("body", [
    {"namespace_prefix": [], "from": {"entity": "a", "memory": {"namespace": ["x"], "key": "k"}}},
    {"namespace_prefix": [], "from": {}},
    {"namespace_prefix": [], "from": {"entity": "a"}, "max_hops": 9},
    {"namespace_prefix": [], "from": {"entity": "   "}},
    {"namespace_prefix": [], "from": {"entity": "a"}, "extra": 1},
])
def test_bad_related_queries_are_400(live_server, me, body):
    assert_error(me.post("/v1/graph/related", json=body), 400, "INVALID_ARGUMENT")


def test_unknown_types_are_400(live_server, me, home):
    r = me.put("/v1/graph/entities", json={"namespace": home, "name": "X", "type": "SPACESHIP"})
    assert_error(r, 400, "INVALID_ARGUMENT")


def test_other_users_are_refused_on_every_route(live_server, me, make_client, tenant, home):
    ns = [*home, "notes"]
    write_story(me, ns)
    bob_id = "bob-" + home[1]
    bob = make_client(bob_id, tenant=tenant)
    assert_error(find(bob, home, "Alice"), 403, "FORBIDDEN")
    assert_error(bob.post("/v1/graph/related", json={"namespace_prefix": home, "from": {"entity": "Alice"}}), 403)
    assert_error(bob.post("/v1/graph/path", json={"namespace_prefix": home, "from": {"entity": "Alice"},
                                                  "to": {"entity": "INC-42"}}), 403)
    assert_error(bob.post("/v1/graph/related", json={"namespace_prefix": ["user", bob_id],
                                                     "from": {"memory": {"namespace": ns, "key": "a"}}}), 400)
    assert_error(bob.put("/v1/graph/entities", json={"namespace": ns, "name": "Mallory"}), 403)
    assert_error(bob.put("/v1/graph/relations", json={"namespace": ns, "source": "Alice", "type": "OWNS",
                                                      "target": "INC-42"}), 403)
    assert_error(bob.delete("/v1/graph/entities", params=[*(("ns", s) for s in ns), ("name", "Alice")]), 403)
    assert_error(bob.delete("/v1/graph/relations", params=[*(("ns", s) for s in ns), ("source", "Alice"),
                                                           ("type", "WORKS_ON"), ("target", "Project A")]), 403)
    assert_error(bob.post("/admin/v1/graph/integrity-scan"), 403)
    assert find(bob, [], "Alice").json()["entities"] == []  # [] is narrowed to Bob's own subtree


def test_other_tenants_see_nothing(live_server, me, make_client, home):
    write_story(me, [*home, "notes"])
    stranger = make_client(home[1], tenant="other-" + home[1][:20])  # the same user id, another tenant
    assert find(stranger, home, "Alice", "INC-42").json()["entities"] == []
    r = stranger.post("/v1/graph/path", json={"namespace_prefix": home, "from": {"entity": "Alice"},
                                              "to": {"entity": "INC-42"}})
    assert r.status_code == 200 and r.json()["found"] is False


def test_slashes_and_unicode_in_namespaces_and_keys(live_server, me, home):
    ns = [*home, "a/b%2F", "ünï"]
    put_ok(me, ns, "k/1%2F", {"text": "Zoë Ångström works on Project Ø."})
    (zoe,) = wait_for_entity(me, home, "zoë ångström")
    assert zoe["namespaces"] == [ns]
    r = me.post("/v1/graph/path", json={"namespace_prefix": ns, "from": {"entity": "Zoë Ångström"},
                                        "to": {"entity": "Project Ø"}})
    assert r.json()["steps"][0]["edges"][0]["memory"]["key"] == "k/1%2F"
    assert me.put("/v1/graph/entities", json={"namespace": ns, "name": "Zoë Ångström"}).status_code == 200
    assert me.delete("/v1/graph/entities", params=[*(("ns", s) for s in ns), ("name", "ZOË ÅNGSTRÖM")]).status_code == 204
    (still,) = find(me, ns, "Zoë Ångström").json()["entities"]
    assert still["explicit"] is False  # the memory still names her


def test_delete_cascades_and_the_admin_scan(live_server, me, admin, home):
    ns = [*home, "notes"]
    write_story(me, ns)
    assert me.delete("/v1/memories", params=[*(("ns", s) for s in ns), ("key", "c")]).status_code == 204
    assert find(me, home, "INC-42").json()["entities"] == []  # at once, before its rows are removed
    # The change feed is applied in order: once a memory written after the delete is in the graph,
    # the graph step has removed the deleted one's rows, and nothing is left for the scan.
    put_ok(me, ns, "after", {"text": "Zora Quill uses Kafka."})
    wait_for_entity(me, home, "Zora Quill")
    r = admin.post("/admin/v1/graph/integrity-scan")
    assert r.status_code == 200 and r.json()["removed"] == {"memories": 0, "mentions": 0, "nodes": 0, "edges": 0}


def test_recall_adds_graph_linked_memories(live_server, me, home):
    ns = [*home, "notes"]
    write_story(me, ns)
    r = me.post("/v1/memories/recall", json={"namespace_prefix": home, "query": "INC-42 fixed", "mode": "keyword",
                                             "min_score": 0, "limit": 1, "graph_hops": 2})
    assert r.status_code == 200, r.text
    memories = r.json()["memories"]
    assert memories[0]["key"] == "c" and memories[0]["graph_hops"] is None
    assert [(m["key"], m["graph_hops"]) for m in memories[1:]] == [("b", 1)]


def test_health_and_metrics_show_the_graph(live_server, me, home):
    write_story(me, [*home, "notes"])
    health = me.get("/health").json()
    # Public: whether the graph store answers, never counts of every tenant's graphs.
    assert set(health["components"]["graph"]) == {"status", "latency_ms"}
    assert health["components"]["graph"]["status"] == "healthy"
    if live_server.backend != "local":
        return  # on AWS the metrics are EMF (tests/aws/test_functions.py), not served over HTTP
    assert find(me, [*home, "notes"], "Alice").status_code == 200  # this test's own entity query, whatever ran before
    metrics = me.get("/metrics").text
    assert 'graph_query_duration_seconds_count{query="entities"' in metrics
    assert "graph_traversal_depth_bucket" in metrics
