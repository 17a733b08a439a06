"""`DynamoGraphStore` on moto: the `GraphStore` port's semantics (versions, cascades, explicit
writes, prefix scoping, tenant walls), atomicity under injected failures and concurrent writers,
the trimming of a cascade too big for one transaction, the hub cap, and the integrity scan."""

from __future__ import annotations

from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest

from memsvc.adapters.aws.dynamo_graph import DynamoGraphStore, _adjacency_pk, _mention_sk, _node_key
from memsvc.core.errors import ProviderError
from memsvc.core.graph import DerivedMemory, GraphEdge, GraphNode, Mention, reach, shortest_path
from tests.fakes.aws_stack import InjectedFailure, keyword_table_on_moto

TABLE = "graph-test"
NOTES = ("user", "alice", "notes")


@pytest.fixture
def client() -> Iterator[Any]:
    with keyword_table_on_moto(TABLE) as c:
        yield c


@pytest.fixture
def store(client) -> DynamoGraphStore:
    store = DynamoGraphStore(client, TABLE)
    store.sleeps = []
    store.sleep = store.sleeps.append
    return store


def node(eid: str, ns: tuple[str, ...] = NOTES, *, tenant: str = "acme", kind: str = "CONCEPT",
         explicit: bool = False) -> GraphNode:
    return GraphNode(tenant, ns, eid, kind, f"sealed {eid}".encode(), explicit)


def memory(key: str, version: int = 1, ns: tuple[str, ...] = NOTES, *,
           tenant: str = "acme") -> DerivedMemory:
    return DerivedMemory(tenant, ns, key, f"{key}-v{version}", version)


def write(store: DynamoGraphStore, key: str, entities: str, relations: list[tuple[str, str, str]] = (),
          version: int = 1, ns: tuple[str, ...] = NOTES, tenant: str = "acme") -> bool:
    """The memory `key` at `version` names `entities` (one letter each) and `relations`."""
    m = memory(key, version, ns, tenant=tenant)
    edges = [GraphEdge(tenant, ns, s, t, d, key, m.memory_id) for s, t, d in relations]
    return store.replace_memory(m, [node(e, ns, tenant=tenant) for e in entities], edges)


def edge_triples(edges) -> set[tuple[str, str, str]]:
    return {(e.source_id, e.type, e.target_id) for e in edges}


def rows(client) -> dict[tuple[str, str], dict[str, Any]]:
    """The whole table but the statistics (test only: the adapter never scans)."""
    return {(r["pk"]["S"], r["sk"]["S"]): r for page in client.get_paginator("scan").paginate(TableName=TABLE)
            for r in page["Items"] if not r["pk"]["S"].startswith("GSTAT#")}


def counted(client) -> dict[str, int]:
    """What the rows hold, as `stats()` counts it: nodes, edges (derived ones once, at their
    source's mention; explicit ones once, at their source) and mentions."""
    out = {"nodes": 0, "edges": 0, "mentions": 0}
    for (pk, sk), row in rows(client).items():
        if "#GN#" in pk:
            out["nodes"] += 1
        elif "#G#" in pk and "\x1fM\x1f" in sk:
            out["mentions"] += 1
            out["edges"] += sum(1 for e in row.get("ed", {}).get("L", []) if pk.endswith("#" + e["L"][0]["S"]))
        elif "#G#" in pk and "\x1fX\x1fO\x1f" in sk:
            out["edges"] += 1
    return out


def counters(client, eid: str, ns=NOTES) -> tuple[int, int] | None:
    row = client.get_item(TableName=TABLE, Key=_node_key("acme", ns, eid)).get("Item")
    return (int(row["mc"]["N"]), int(row["xe"]["N"])) if row else None


def test_a_memory_makes_nodes_mentions_and_edges(store, client):
    assert write(store, "k1", "abc", [("a", "WORKS_ON", "b"), ("b", "CAUSED_BY", "c")])
    assert [(n.entity_id, n.type, n.name_ct) for n in store.nodes("acme", ("user",), ["c", "a", "z"])] == [
        ("a", "CONCEPT", b"sealed a"), ("c", "CONCEPT", b"sealed c")]
    assert edge_triples(store.expand("acme", ("user", "alice"), ["b"], limit=100)) == {
        ("a", "WORKS_ON", "b"), ("b", "CAUSED_BY", "c")}
    (edge,) = store.expand("acme", (), ["a"], limit=100)
    assert (edge.namespace, edge.key, edge.memory_id) == (NOTES, "k1", "k1-v1")
    assert store.memories_of("acme", NOTES, ["a"], limit=10) == [Mention("acme", NOTES, "k1", "k1-v1", "a")]
    assert sorted(m.entity_id for m in store.entities_of_memories("acme", [(NOTES, "k1")])) == ["a", "b", "c"]
    assert [d.key for d in store.derived_memories("acme")] == ["k1"]
    assert store.stats() == counted(client) == {"nodes": 3, "edges": 2, "mentions": 3}


def test_an_edge_touching_two_of_the_ids_comes_once(store):
    write(store, "k1", "ab", [("a", "WORKS_ON", "b")])
    assert len(store.expand("acme", (), ["a", "b"], limit=100)) == 1


@pytest.mark.parametrize("prefix", [("user", "bob"), ("user", "alice", "note"), ("user", "alice", "notes", "x"),
                                    ("user", "alic")])
def test_a_prefix_sees_only_its_subtree(store, prefix):
    write(store, "k1", "ab", [("a", "WORKS_ON", "b")])
    assert store.nodes("acme", prefix, ["a"]) == []
    assert store.expand("acme", prefix, ["a"], limit=10) == []
    assert store.memories_of("acme", prefix, ["a"], limit=10) == []


def test_tenants_are_walls(store):
    write(store, "k1", "ab", [("a", "WORKS_ON", "b")], tenant="globex")
    assert store.nodes("acme", (), ["a"]) == [] and store.expand("acme", (), ["a"], limit=10) == []
    assert store.entities_of_memories("acme", [(NOTES, "k1")]) == []
    assert list(store.derived_memories("acme")) == []
    assert store.integrity_scan("acme") == {"edges": 0, "mentions": 0, "nodes": 0}
    assert len(store.expand("globex", (), ["a"], limit=10)) == 1


def test_a_new_version_replaces_the_old_ones_rows(store, client):
    write(store, "k1", "abc", [("a", "WORKS_ON", "b"), ("b", "CAUSED_BY", "c")])
    assert write(store, "k1", "ad", [("a", "USES", "d")], version=2)
    assert edge_triples(store.expand("acme", (), ["a", "b", "c", "d"], limit=100)) == {("a", "USES", "d")}
    assert [n.entity_id for n in store.nodes("acme", (), ["a", "b", "c", "d"])] == ["a", "d"]
    assert store.memories_of("acme", (), ["a"], limit=10) == [Mention("acme", NOTES, "k1", "k1-v2", "a")]
    assert counters(client, "a") == (1, 0)
    assert store.stats() == counted(client) == {"nodes": 2, "edges": 1, "mentions": 2}


def test_a_replay_or_a_late_older_version_changes_nothing(store, client):
    write(store, "k1", "ab", [("a", "WORKS_ON", "b")], version=2)
    before = rows(client)
    assert not write(store, "k1", "ab", [("a", "WORKS_ON", "b")], version=2)
    assert not write(store, "k1", "xy", [("x", "OWNS", "y")], version=1)
    assert rows(client) == before


def test_a_delete_removes_everything_and_its_marker(store, client):
    write(store, "k1", "ab", [("a", "WORKS_ON", "b")], version=2)
    assert not store.remove_memory(memory("k1", 1))  # older than the rows: a newer write's rows stay
    assert store.remove_memory(memory("k1", 3))
    assert store.nodes("acme", (), ["a", "b"]) == [] and store.expand("acme", (), ["a", "b"], limit=9) == []
    assert not store.remove_memory(memory("k1", 3))
    assert list(store.derived_memories("acme")) == [] and rows(client) == {}
    assert store.stats() == {"nodes": 0, "edges": 0, "mentions": 0}
    assert write(store, "k1", "c", version=1)  # a purged tombstone restarts the key's versions


def test_a_node_lives_while_any_memory_mentions_it(store, client):
    write(store, "k1", "ab", [("a", "WORKS_ON", "b")])
    write(store, "k2", "bc", [("b", "CAUSED_BY", "c")])
    assert counters(client, "b") == (2, 0)
    store.remove_memory(memory("k1", 2))
    assert [n.entity_id for n in store.nodes("acme", (), "abc")] == ["b", "c"]
    assert counters(client, "b") == (1, 0)
    store.remove_memory(memory("k2", 2))
    assert store.nodes("acme", (), "abc") == []


def test_nodes_are_per_namespace(store):
    write(store, "k1", "a", ns=("user", "alice", "notes"))
    write(store, "k1", "a", ns=("user", "alice", "todo"))
    assert [n.namespace for n in store.nodes("acme", ("user",), ["a"])] == [("user", "alice", "notes"),
                                                                           ("user", "alice", "todo")]
    store.remove_memory(memory("k1", 2, ns=("user", "alice", "todo")))
    assert [n.namespace for n in store.nodes("acme", ("user",), ["a"])] == [("user", "alice", "notes")]


def test_explicit_entities_and_relations(store, client):
    write(store, "k1", "ab", [("a", "WORKS_ON", "b")])
    assert store.put_relation(GraphEdge("acme", NOTES, "a", "OWNS", "x")) == ["x"]
    assert store.put_relation(GraphEdge("acme", NOTES, "y", "OWNS", "x")) == ["y", "x"]
    store.put_entity(node("x", kind="PROJECT", explicit=True))
    store.put_entity(node("x", kind="PROJECT", explicit=True))  # idempotent
    assert store.put_relation(GraphEdge("acme", NOTES, "a", "OWNS", "x")) == []
    assert store.put_relation(GraphEdge("acme", NOTES, "a", "OWNS", "x")) == []  # idempotent
    assert counters(client, "a") == (1, 1) and counters(client, "x") == (0, 1)
    (explicit,) = [e for e in store.expand("acme", (), ["x"], limit=10)]
    assert explicit.explicit and (explicit.source_id, explicit.target_id) == ("a", "x")
    assert [(n.entity_id, n.explicit, n.type) for n in store.nodes("acme", (), ["x"])] == [("x", True, "PROJECT")]
    assert store.delete_relation(GraphEdge("acme", NOTES, "a", "OWNS", "x"))
    assert not store.delete_relation(GraphEdge("acme", NOTES, "a", "OWNS", "x"))
    assert counters(client, "a") == (1, 0) and counters(client, "x") == (0, 0)
    assert store.stats() == counted(client) == {"nodes": 3, "edges": 1, "mentions": 2}


def test_an_explicit_node_outlives_its_memories_and_goes_when_deleted(store, client):
    write(store, "k1", "ab", [("a", "WORKS_ON", "b")])
    store.put_entity(node("a", explicit=True))
    store.remove_memory(memory("k1", 2))
    assert [(n.entity_id, n.explicit) for n in store.nodes("acme", (), "ab")] == [("a", True)]
    assert store.delete_entity("acme", NOTES, "a")
    assert not store.delete_entity("acme", NOTES, "a")
    assert store.nodes("acme", (), "a") == []


def test_deleting_an_explicit_entity_keeps_a_mentioned_node_and_its_derived_edges(store):
    write(store, "k1", "ab", [("a", "WORKS_ON", "b")])
    store.put_entity(node("c", explicit=True))
    store.put_entity(node("a", explicit=True))
    store.put_relation(GraphEdge("acme", NOTES, "c", "OWNS", "a"))
    assert store.delete_entity("acme", NOTES, "a")
    assert [(n.entity_id, n.explicit) for n in store.nodes("acme", (), "ac")] == [("a", False), ("c", True)]
    assert edge_triples(store.expand("acme", (), ["a", "c"], limit=10)) == {("a", "WORKS_ON", "b")}


def test_a_dropped_node_takes_its_explicit_edges_with_it(store, client):
    write(store, "k1", "ab", [("a", "WORKS_ON", "b")])
    store.put_entity(node("x", explicit=True))
    store.put_relation(GraphEdge("acme", NOTES, "a", "OWNS", "x"))
    store.put_relation(GraphEdge("acme", NOTES, "a", "RELATES_TO", "a"))  # a loop: two rows in one partition
    store.remove_memory(memory("k1", 2))
    assert store.expand("acme", (), ["a", "x"], limit=10) == []
    assert counters(client, "x") == (0, 0) and counters(client, "a") is None
    assert store.stats() == counted(client) == {"nodes": 1, "edges": 0, "mentions": 0}


def test_a_cascade_too_big_for_one_transaction_is_trimmed_first(store, client):
    write(store, "k1", "h")
    for n in range(70):  # 70 explicit edges: 210 actions to drop the hub
        store.put_entity(node(f"x{n:02d}", explicit=True))
        store.put_relation(GraphEdge("acme", NOTES, "h", "OWNS", f"x{n:02d}"))
    assert counters(client, "h") == (1, 70)
    calls = []
    original = client.transact_write_items
    client.__dict__["transact_write_items"] = lambda **kw: calls.append(len(kw["TransactItems"])) or original(**kw)
    assert store.remove_memory(memory("k1", 2))
    assert max(calls) <= 100 and len(calls) >= 3
    assert store.expand("acme", (), ["h"] + [f"x{n:02d}" for n in range(70)], limit=1000) == []
    assert {counters(client, f"x{n:02d}") for n in range(70)} == {(0, 0)}
    assert store.integrity_scan("acme") == {"edges": 0, "mentions": 0, "nodes": 0}
    assert store.stats() == counted(client) == {"nodes": 70, "edges": 0, "mentions": 0}


def test_a_failed_transaction_changes_nothing_and_a_retry_completes(store, client):
    write(store, "k1", "ab", [("a", "WORKS_ON", "b")])
    before = rows(client)
    failure = InjectedFailure(client._client, "TransactWriteItems", code="InternalServerError", status=500, when=None)
    with pytest.raises(ProviderError):
        write(store, "k1", "cd", [("c", "USES", "d")], version=2)
    failure.remove()
    assert rows(client) == before
    assert write(store, "k1", "cd", [("c", "USES", "d")], version=2)
    assert [n.entity_id for n in store.nodes("acme", (), "abcd")] == ["c", "d"]


def test_concurrent_writers_of_shared_nodes_keep_the_counts(store, client):
    def one(n: int) -> None:
        write(store, f"k{n}", "hab"[n % 3] + "z", [("hab"[n % 3], "RELATES_TO", "z")])
        if n % 2:
            store.remove_memory(memory(f"k{n}", 2))

    with ThreadPoolExecutor(8) as pool:
        list(pool.map(one, range(24)))
    assert counters(client, "z") == (12, 0)
    assert len(store.memories_of("acme", (), ["z"], limit=100)) == 12
    assert store.integrity_scan("acme") == {"edges": 0, "mentions": 0, "nodes": 0}
    assert store.stats() == counted(client) == {"nodes": 4, "edges": 12, "mentions": 24}


def test_the_integrity_scan_counts_and_removes_orphans(store, client):
    write(store, "k1", "ab", [("a", "WORKS_ON", "b")])
    write(store, "k2", "b")
    store.put_entity(node("x", explicit=True))
    store.put_relation(GraphEdge("acme", NOTES, "x", "OWNS", "b"))
    # What a bug could leave: k1's marker gone (its mentions and edge orphaned), x's node gone
    # under its explicit edge, a counter off.
    marker = next(k for k in rows(client) if "#GK#" in k[0] and rows(client)[k]["k"]["S"] == "k1")
    client.delete_item(TableName=TABLE, Key={"pk": {"S": marker[0]}, "sk": {"S": marker[1]}})
    client.delete_item(TableName=TABLE, Key=_node_key("acme", NOTES, "x"))
    client.update_item(TableName=TABLE, Key=_node_key("acme", NOTES, "b"), UpdateExpression="SET mc = :n",
                       ExpressionAttributeValues={":n": {"N": "7"}})
    assert store.integrity_scan("acme") == {"edges": 2, "mentions": 2, "nodes": 1}
    assert [n.entity_id for n in store.nodes("acme", (), "abx")] == ["b"]
    assert counters(client, "b") == (1, 0)
    assert store.expand("acme", (), ["a", "b", "x"], limit=10) == []
    assert store.integrity_scan("acme") == {"edges": 0, "mentions": 0, "nodes": 0}


def test_the_integrity_scan_keeps_what_a_write_changed_while_it_ran(store, monkeypatch):
    write(store, "k1", "a")
    read_marker = store._marker

    def rewritten_meanwhile(tenant, ns, key):  # the indexer writes v2, still naming a, mid-scan
        monkeypatch.setattr(store, "_marker", read_marker)
        write(store, "k1", "a", version=2)
        return read_marker(tenant, ns, key)

    monkeypatch.setattr(store, "_marker", rewritten_meanwhile)
    assert store.integrity_scan("acme") == {"edges": 0, "mentions": 0, "nodes": 0}
    assert [m.memory_id for m in store.memories_of("acme", (), ["a"], limit=10)] == ["k1-v2"]
    assert store.stats() == {"nodes": 1, "edges": 0, "mentions": 1}


def test_a_hub_entity_is_read_up_to_the_cap(store):
    store.max_rows_per_entity = 5
    for n in range(12):
        write(store, f"k{n:02d}", "h" + chr(ord("a") + n), [("h", "RELATES_TO", chr(ord("a") + n))])
    assert len(store.expand("acme", (), ["h"], limit=100)) == 5
    assert len(store.memories_of("acme", (), ["h"], limit=100)) == 5
    assert len(store.expand("acme", (), ["h"], limit=3)) == 3


def test_the_core_traversals_run_on_it(store):
    write(store, "k1", "ab", [("a", "WORKS_ON", "b")])
    write(store, "k2", "bc", [("c", "CAUSED_BY", "b")])
    write(store, "k3", "cd", [("c", "PART_OF", "d")])
    expand = lambda ids: store.expand("acme", (), ids, limit=1000)  # noqa: E731
    assert reach(["a"], expand, max_hops=2, max_nodes=100).hops == {"a": 0, "b": 1, "c": 2}
    found = shortest_path(["a"], ["d"], expand, max_hops=4, max_nodes=100)
    assert found.path.entity_ids == ("a", "b", "c", "d")
    assert [s.edges[0].key for s in found.path.steps] == ["k1", "k2", "k3"]


def test_sort_keys_fit_for_the_longest_namespace_and_key(store):
    ns = ("n" * 870,)
    m = DerivedMemory("acme", ns, "k" * 1024, "mid", 1)
    ids = ["e" * 32, "f" * 32]
    assert store.replace_memory(m, [node(i, ns) for i in ids], [GraphEdge("acme", ns, ids[0], "RELATES_TO", ids[1],
                                                                          m.key, "mid")])
    assert len(_mention_sk(ns, m.key).encode()) <= 1024 and len(_adjacency_pk("acme", ids[0])) < 2048
    store.put_relation(GraphEdge("acme", ns, ids[0], "REPORTS_TO", ids[1]))
    assert len(store.expand("acme", ns, ids, limit=10)) == 2
