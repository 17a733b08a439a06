"""The knowledge graph on each backend (issue 15, seed 001's graph scenarios), with the local
deterministic extractor: entities and relations derived from memories by the indexer's graph
step, queried through the `Graph` service."""

from __future__ import annotations

import json

import pytest

from memsvc.core.errors import Forbidden, InvalidArgument, NotFound
from memsvc.core.graph import DerivedMemory, GraphNode
from memsvc.core.models import Caller
from memsvc.service.graph import (EntityRef, FindEntities, PathQuery, PutEntity, PutRelation, RelatedQuery,
                                  RelationRef)
from memsvc.service.memories import PutMemory
from tests.conftest import admin, alice, bob

NS = ["user", "alice", "notes"]
PREFIX = ["user", "alice"]
STORY = {
    "a": "Alice works on Project A.",
    "b": "Project A caused the memory leak.",
    "c": "The memory leak was fixed by INC-42.",
    "d": "Bob Stone uses Kafka.",
}


def put(b, key, text, caller=None, namespace=NS, **kw):
    return b.memories.put(caller or alice(), PutMemory(namespace=namespace, key=key, value={"text": text}, **kw))


def write_story(b, story=STORY, **kw):
    for key, text in story.items():
        put(b, key, text, **kw)
    b.drain()


def graph(b):
    return b.app.services.graph


def related(b, caller=None, prefix=PREFIX, **kw):
    return graph(b).related(caller or alice(), RelatedQuery(namespace_prefix=prefix, **kw))


def path(b, start, goal, caller=None, prefix=PREFIX, **kw):
    return graph(b).path(caller or alice(), PathQuery(namespace_prefix=prefix, to=goal, **{"from": start}, **kw))


def find(b, *names, caller=None, prefix=PREFIX):
    return graph(b).find_entities(caller or alice(), FindEntities(namespace_prefix=prefix, names=list(names)))


def entity(name):
    return {"entity": name}


def memory(key, namespace=NS):
    return {"memory": {"namespace": namespace, "key": key}}


def graph_dump(b) -> str:
    """Everything the graph store holds at rest, as text (to look for plaintext in it)."""
    if b.local is not None:
        return "".join(f.read_bytes().decode("latin-1") for f in sorted(b.data_dir.glob("graph.db*")))
    client = b.aws.clients.dynamodb
    return json.dumps([item for table in client.list_tables()["TableNames"]
                       for page in client.get_paginator("scan").paginate(TableName=table) for item in page["Items"]],
                      default=lambda sealed: bytes(sealed).decode("latin-1"))  # binary attributes: sealed names


class TestTraversal:
    def test_entity_relation_traversal_returns_the_reasoning_path(self, backend):
        """Seed 001: linking 'Project A' and 'Memory Leak' returns the path and what justifies it."""
        write_story(backend)
        answer = path(backend, entity("project a"), entity("Memory Leak"))
        assert answer.found and answer.hops == 1
        assert [e.name for e in answer.entities] == ["Project A", "memory leak"]
        (step,) = answer.steps
        (edge,) = step.edges
        assert (edge.type, edge.key, edge.namespace) == ("CAUSED_BY", "b", tuple(NS))
        assert edge.source_id == answer.entities[1].id  # the leak was caused by Project A

    def test_shortest_path_crosses_intermediate_entities_and_names_each_edges_memory(self, backend):
        write_story(backend)
        answer = path(backend, entity("Alice"), entity("INC-42"))
        assert answer.found and answer.hops == 3
        assert [e.name for e in answer.entities] == ["Alice", "Project A", "memory leak", "INC-42"]
        assert [[(e.type, e.key) for e in s.edges] for s in answer.steps] == [
            [("WORKS_ON", "a")], [("CAUSED_BY", "b")], [("FIXES", "c")]]

    def test_the_shorter_of_two_routes_wins(self, backend):
        write_story(backend)
        put(backend, "shortcut", "Alice fixed INC-42.")
        backend.drain()
        answer = path(backend, entity("Alice"), entity("INC-42"))
        assert answer.hops == 1 and [e.key for e in answer.steps[0].edges] == ["shortcut"]

    def test_a_path_between_memories_runs_between_their_entities(self, backend):
        write_story(backend)
        answer = path(backend, memory("a"), memory("c"))
        assert answer.found and answer.hops == 1
        assert [e.name for e in answer.entities] == ["Project A", "memory leak"]

    def test_no_path_and_a_path_beyond_the_hop_limit(self, backend):
        write_story(backend)
        unrelated = path(backend, entity("Alice"), entity("Kafka"))
        assert not unrelated.found and not unrelated.truncated  # searched everything reachable
        too_far = path(backend, entity("Alice"), entity("INC-42"), max_hops=2)
        assert not too_far.found and too_far.truncated
        unknown = path(backend, entity("nobody at all"), entity("Alice"))
        assert not unknown.found and unknown.steps == []
        to_itself = path(backend, entity("nobody at all"), entity("Nobody At All"))  # was a 500
        assert (to_itself.found, to_itself.entities, to_itself.steps) == (False, [], [])
        alice_to_herself = path(backend, entity("Alice"), entity("alice"))
        assert alice_to_herself.found and alice_to_herself.hops == 0
        assert [e.name for e in alice_to_herself.entities] == ["Alice"]

    def test_related_memories_are_ordered_by_hop_distance(self, backend):
        write_story(backend)
        answer = related(backend, **{"from": entity("Alice")}, max_hops=3)
        assert [(r.memory.key, r.hops) for r in answer.memories] == [("a", 1), ("b", 2), ("c", 3)]
        assert answer.memories[1].via.name == "Project A"
        assert answer.memories[0].memory.value == {"text": STORY["a"]}
        nearer = related(backend, **{"from": entity("Alice")}, max_hops=2)
        assert [r.memory.key for r in nearer.memories] == ["a", "b"]

    def test_a_rewrite_not_yet_derived_is_not_answered_for_the_entity_it_dropped(self, backend):
        write_story(backend)
        put(backend, "a", "Carol plays chess.")  # no longer names Alice; the graph step has not run
        assert [r.memory.key for r in related(backend, **{"from": entity("Alice")}, max_hops=1).memories] == []
        backend.drain()
        assert find(backend, "Alice") == []

    def test_related_to_a_memory_leaves_that_memory_out(self, backend):
        write_story(backend)
        answer = related(backend, **{"from": memory("b")}, max_hops=2)
        assert [(r.memory.key, r.hops) for r in answer.memories] == [("a", 1), ("c", 1)]
        with pytest.raises(NotFound):
            related(backend, **{"from": memory("nope")})

    def test_names_are_normalised_into_one_entity(self, backend):
        put(backend, "x", "Project Apollo depends on Kafka.")
        put(backend, "y", "PROJECT  APOLLO uses Kafka.")
        backend.drain()
        (found,) = find(backend, "project apollo")
        assert found.type == "PROJECT"
        answer = related(backend, **{"from": entity("Project Apollo")}, max_hops=1)
        assert sorted(r.memory.key for r in answer.memories) == ["x", "y"]
        assert find(backend, "  the Project\u00a0Apollo ") == [found]


class TestIntegrity:
    def test_deleting_a_memory_cascades_to_what_only_it_derived(self, backend):
        write_story(backend)
        backend.memories.delete(alice(), NS, "b")
        backend.drain()
        assert not path(backend, entity("Alice"), entity("INC-42")).found
        assert [e.name for e in find(backend, "Project A", "memory leak")] == ["Project A", "memory leak"]
        put(backend, "a", "Alice retired.")  # an update replaces what the old version derived
        backend.drain()
        assert find(backend, "Project A") == []
        assert graph(backend).integrity_scan(admin()) == {"edges": 0, "mentions": 0, "nodes": 0,
                                                                "memories": 0}

    def test_batch_delete_removes_every_derived_row(self, backend):
        write_story(backend)
        for key in STORY:
            backend.memories.delete(alice(), NS, key)
        backend.drain()
        assert find(backend, "Alice", "Project A", "memory leak", "INC-42", "Kafka") == []
        counts = backend.app.graph.stats()  # every tenant's: the store's, never /health's
        assert (counts["nodes"], counts["edges"]) == (0, 0)

    def test_expiry_removes_the_graph_of_the_memory(self, backend, clock):
        put(backend, "t", "Carol Diaz works on Project Zed.", ttl_seconds=60)
        backend.drain()
        assert len(find(backend, "Carol Diaz")) == 1
        clock.advance(120)
        backend.sweep()
        backend.drain()
        assert find(backend, "Carol Diaz") == []

    def test_find_shows_no_entity_of_a_memory_gone_before_its_rows(self, backend, clock):
        # Expired (TTL may delete the item, and its graph rows, days later), deleted (its rows go
        # when the change is indexed): find answers as the other graph reads do from that moment.
        put(backend, "live", "Project Kookaburra is in Darwin.")
        put(backend, "tmp", "Rosalind Fairweather works on Project Kookaburra.", namespace=NS + ["tmp"],
            ttl_seconds=60)
        put(backend, "gone", "Quentin Marsh uses Kafka.")
        backend.drain()
        assert {e.name for e in find(backend, "Rosalind Fairweather", "Project Kookaburra", "Quentin Marsh")} == {
            "Rosalind Fairweather", "Project Kookaburra", "Quentin Marsh"}
        clock.advance(120)
        backend.memories.delete(alice(), NS, "gone")  # not drained: its rows are still there
        found = find(backend, "Rosalind Fairweather", "Project Kookaburra", "Quentin Marsh")
        assert [(e.name, e.namespaces) for e in found] == [("Project Kookaburra", (tuple(NS),))]

    def test_a_replayed_older_change_never_restores_an_older_graph(self, backend):
        put(backend, "k", "Alice works on Project A.")
        changes = backend.changes()
        backend.drain()
        put(backend, "k", "Alice works on Project B.")
        backend.drain()
        backend.indexer._graph.apply(changes)  # the first version's change, delivered again
        assert find(backend, "Project A") == []
        assert len(find(backend, "Project B")) == 1

    def test_a_relation_needs_both_entities_and_says_which_is_missing(self, backend):
        g = graph(backend)
        g.put_entity(alice(), PutEntity(namespace=NS, name="Dana", type="PERSON"))
        with pytest.raises(NotFound) as missing:
            g.put_relation(alice(), PutRelation(namespace=NS, source="Dana", type="WORKS_ON", target="Project Q"))
        assert "'Project Q'" in missing.value.message and missing.value.details == {"missing": ["target"]}
        g.put_entity(alice(), PutEntity(namespace=NS, name="Project Q", type="PROJECT"))
        g.put_relation(alice(), PutRelation(namespace=NS, source="dana", type="WORKS_ON", target="project q"))
        answer = path(backend, entity("Dana"), entity("Project Q"))
        assert answer.hops == 1 and answer.steps[0].edges[0].explicit

    def test_deleting_an_explicit_entity_removes_its_explicit_relations(self, backend):
        write_story(backend)
        g = graph(backend)
        g.put_entity(alice(), PutEntity(namespace=NS, name="Eve", type="PERSON"))
        g.put_relation(alice(), PutRelation(namespace=NS, source="Eve", type="REPORTS_TO", target="Alice"))
        assert path(backend, entity("Eve"), entity("INC-42")).hops == 4
        g.delete_entity(alice(), EntityRef(ns=NS, name="Eve"))
        g.delete_entity(alice(), EntityRef(ns=NS, name="Eve"))  # idempotent
        assert find(backend, "Eve") == [] and len(find(backend, "Alice")) == 1
        g.put_entity(alice(), PutEntity(namespace=NS, name="Alice", type="PERSON"))
        g.delete_entity(alice(), EntityRef(ns=NS, name="Alice"))  # a memory still names Alice: she stays
        assert [e.explicit for e in find(backend, "Alice")] == [False]

    def test_an_explicit_relation_goes_with_a_derived_entity_it_joins(self, backend):
        write_story(backend)
        g = graph(backend)
        g.put_relation(alice(), PutRelation(namespace=NS, source="Kafka", type="DEPENDS_ON", target="INC-42"))
        g.delete_relation(alice(), RelationRef(ns=NS, source="Bob Stone", type="USES", target="Kafka"))  # derived
        assert path(backend, entity("Bob Stone"), entity("INC-42")).hops == 2
        backend.memories.delete(alice(), NS, "c")  # INC-42's only memory
        backend.drain()
        assert not path(backend, entity("Kafka"), entity("INC-42")).found
        assert graph(backend).integrity_scan(admin())["edges"] == 0  # nothing was left dangling

    def test_the_integrity_scan_removes_rows_whose_memory_is_gone(self, backend):
        write_story(backend)
        store = backend.app.services.graph._store
        sealed = backend.sealer.seal_entity_name("acme", "f" * 32, "Ghost")
        store.replace_memory(DerivedMemory("acme", tuple(NS), "never-written", "m-0", 1),
                             [GraphNode("acme", tuple(NS), "f" * 32, "CONCEPT", sealed)], [])
        with pytest.raises(Forbidden):
            graph(backend).integrity_scan(alice())
        removed = graph(backend).integrity_scan(admin())
        assert removed == {"memories": 1, "edges": 0, "mentions": 0, "nodes": 0}
        assert len(find(backend, "Alice")) == 1  # live memories keep theirs


class TestIsolation:
    def test_other_tenants_see_nothing_and_hash_names_differently(self, backend):
        write_story(backend)
        other = Caller(tenant_id="globex", user_id="alice", roles=("user",))
        write_story(backend, caller=other)
        mine, theirs = find(backend, "Alice"), find(backend, "Alice", caller=other)
        assert mine[0].id != theirs[0].id
        backend.memories.delete(other, NS, "a")
        backend.drain()
        assert find(backend, "Alice", caller=other) == [] and find(backend, "Alice") == mine
        stranger = Caller(tenant_id="initech", user_id="alice", roles=("user",))
        assert find(backend, "Alice", caller=stranger) == []
        assert related(backend, caller=stranger, **{"from": entity("Alice")}).memories == []

    def test_another_user_is_refused_and_cannot_write_there(self, backend):
        write_story(backend)
        with pytest.raises(Forbidden):
            find(backend, "Alice", caller=bob())
        with pytest.raises(Forbidden):
            path(backend, entity("Alice"), entity("INC-42"), caller=bob())
        with pytest.raises(Forbidden):
            graph(backend).put_entity(bob(), PutEntity(namespace=NS, name="Mallory"))
        with pytest.raises(Forbidden):
            graph(backend).delete_entity(bob(), EntityRef(ns=NS, name="Alice"))
        # Bob's own subtree holds none of Alice's graph, though the entity ids are the tenant's.
        assert find(backend, "Alice", caller=bob(), prefix=["user", "bob"]) == []
        assert find(backend, "Alice", caller=bob(), prefix=[]) == []  # narrowed to ["user", "bob"]

    def test_a_memory_endpoint_must_lie_under_the_prefix(self, backend):
        write_story(backend)
        with pytest.raises(InvalidArgument):
            related(backend, prefix=["user", "alice", "other"], **{"from": memory("a")})

    def test_a_prefix_sees_only_its_subtree(self, backend):
        write_story(backend)
        put(backend, "w", "Alice works on Project Work.", namespace=["user", "alice", "work"])
        backend.drain()
        (everywhere,) = find(backend, "Alice")
        assert sorted(everywhere.namespaces) == [("user", "alice", "notes"), ("user", "alice", "work")]
        work = related(backend, prefix=["user", "alice", "work"], **{"from": entity("Alice")}, max_hops=3)
        assert [r.memory.key for r in work.memories] == ["w"]

    def test_unicode_and_slashes_in_namespaces_and_keys(self, backend):
        ns = ["user", "alice", "a/b%2F", "ünï"]
        put(backend, "k/1%2F", "Zoë Ångström works on Project Ø.", namespace=ns)
        backend.drain()
        (found,) = find(backend, "zoë ångström")
        assert found.namespaces == (tuple(ns),)
        answer = related(backend, **{"from": memory("k/1%2F", ns)}, max_hops=1)
        assert answer.memories == []
        answer = path(backend, entity("Zoë Ångström"), entity("project ø"))
        assert answer.found and answer.steps[0].edges[0].key == "k/1%2F"

    def test_no_entity_name_is_stored_in_plaintext(self, backend):
        write_story(backend)
        graph(backend).put_entity(alice(), PutEntity(namespace=NS, name="Zebulon Quartz"))
        dump = graph_dump(backend)
        assert "WORKS_ON" in dump  # the dump does hold the graph
        # (namespaces and keys are stored in the clear, as in the item store: "alice" is one)
        for name in ("Alice", "Project A", "project a", "memory leak", "INC-42", "inc-42", "Kafka", "Zebulon"):
            assert name not in dump
