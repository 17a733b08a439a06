"""The knowledge graph at two times (issue 25) on each backend: an explicit relation written with
`valid_from`/`valid_to`, a relation derived from a memory that was superseded (kept, showing its
memory's end) and one whose memory was deleted (gone); `as_of` on related and path walks what
held then, and without it only what has not ended; bad times are refused writing nothing;
`as_of` never reaches another user's or tenant's graph."""

from __future__ import annotations

import pytest

from memsvc.core.errors import Forbidden, InvalidArgument
from memsvc.core.graph import DerivedMemory, GraphEdge, GraphNode, ValidAt
from memsvc.core.models import Caller
from memsvc.service.feedback import GiveFeedback
from memsvc.service.graph import PathQuery, PutEntity, PutRelation, RelatedQuery
from memsvc.service.memories import PutMemory
from memsvc.service.recall import RecallQuery
from memsvc.service.remember import RememberMemory
from tests.conftest import admin, alice, bob

NS = ["user", "alice", "people"]
PREFIX = ["user", "alice"]
BEFORE, DURING, AFTER = "2019-06-01T00:00:00Z", "2021-06-01T00:00:00Z", "2024-06-01T00:00:00Z"
GLOBEX = Caller(tenant_id="globex", user_id="alice", roles=("user",))


def graph(b):
    return b.app.services.graph


def path(b, start, goal, caller=None, prefix=PREFIX, **kw):
    return graph(b).path(caller or alice(), PathQuery.parse({"namespace_prefix": prefix, "from": {"entity": start},
                                                             "to": {"entity": goal}, **kw}))


def related(b, start, caller=None, prefix=PREFIX, **kw):
    return graph(b).related(caller or alice(), RelatedQuery.parse({"namespace_prefix": prefix,
                                                                   "from": {"entity": start}, **kw}))


def related_keys(b, start, **kw) -> list[str]:
    return [r.memory.key for r in related(b, start, **kw).memories]


def relate(b, source, target, caller=None, ns=NS, kind="WORKS_ON", **times):
    g = graph(b)
    for name in (source, target):
        g.put_entity(caller or alice(), PutEntity(namespace=ns, name=name))
    return g.put_relation(caller or alice(), PutRelation.parse({"namespace": ns, "source": source, "type": kind,
                                                                "target": target, **times}))


def put_fact(b, key, content, caller=None, **value):
    """A typed memory written as a value, its content indexed as remember's are (its graph is
    derived by the indexer, as any write's)."""
    b.memories.put(caller or alice(), PutMemory(namespace=NS, key=key, value={"content": content, **value},
                                                index_fields=["content"]))


class TestExplicitRelations:
    def test_an_ended_relation_is_walked_only_as_of_its_time(self, backend):
        edge = relate(backend, "Dana", "Project Q", valid_from="2020-01-01T00:00:00Z",
                      valid_to="2023-01-01T00:00:00+01:00")
        assert (edge.valid_from, edge.valid_to) == ("2020-01-01T00:00:00.000000Z", "2022-12-31T23:00:00.000000Z")
        assert not path(backend, "Dana", "Project Q").found  # current facts only: it has ended
        during = path(backend, "Dana", "Project Q", as_of=DURING)
        assert during.found and during.hops == 1
        (shown,) = during.steps[0].edges
        assert (shown.valid_from, shown.valid_to) == (edge.valid_from, edge.valid_to)
        for as_of in (BEFORE, "2022-12-31T23:00:00Z", AFTER):  # [valid_from, valid_to): the end is out
            assert not path(backend, "Dana", "Project Q", as_of=as_of).found

    def test_related_memories_follow_the_relations_and_must_have_held_then(self, backend):
        relate(backend, "Dana", "Project Q", valid_from="2020-01-01T00:00:00Z", valid_to="2023-01-01T00:00:00Z")
        put_fact(backend, "q", "Project Q uses Kafka.", valid_from="2020-06-01T00:00:00Z")
        put_fact(backend, "late", "Project Q depends on Redis.", valid_from="2022-01-01T00:00:00Z")
        backend.drain()
        assert related_keys(backend, "Dana", max_hops=2, as_of=DURING) == ["q"]  # "late" did not hold yet
        assert related_keys(backend, "Dana", max_hops=2, as_of="2022-06-01T00:00:00Z") == ["late", "q"]
        assert related_keys(backend, "Dana", max_hops=2) == []  # Dana's relation has ended
        assert related_keys(backend, "Dana", max_hops=2, as_of=AFTER) == []
        assert related_keys(backend, "Project Q", max_hops=1) == ["late", "q"]  # without as_of: as before

    def test_a_relation_without_times_holds_from_its_write_and_writing_it_again_replaces_them(self, backend, clock):
        edge = relate(backend, "Erin", "Project R")
        assert (edge.valid_from, edge.valid_to) == ("2026-01-01T00:00:00.000000Z", None)  # the write's time
        assert path(backend, "Erin", "Project R").found
        assert not path(backend, "Erin", "Project R", as_of="2025-12-31T23:59:59Z").found
        again = relate(backend, "Erin", "Project R", valid_from="2021-01-01T00:00:00Z", valid_to="2025-01-01T00:00:00Z")
        assert (again.valid_from, again.valid_to) == ("2021-01-01T00:00:00.000000Z", "2025-01-01T00:00:00.000000Z")
        assert not path(backend, "Erin", "Project R").found
        (shown,) = path(backend, "Erin", "Project R", as_of=DURING).steps[0].edges
        assert shown.valid_to == "2025-01-01T00:00:00.000000Z"
        relate(backend, "Erin", "Project R", valid_from="2021-01-01T00:00:00Z")  # open again
        (shown,) = path(backend, "Erin", "Project R").steps[0].edges
        assert (shown.valid_from, shown.valid_to) == ("2021-01-01T00:00:00.000000Z", None)
        clock.advance(86_400)
        ahead = relate(backend, "Erin", "Project S", valid_from="2027-01-01T00:00:00Z")
        assert ahead.valid_from == "2027-01-01T00:00:00.000000Z"
        assert path(backend, "Erin", "Project S").found  # not ended: a current relation, as recall has it
        assert not path(backend, "Erin", "Project S", as_of="2026-06-01T00:00:00Z").found

    def test_a_relation_from_before_valid_time_is_walked_at_every_time(self, backend):
        """A row written before issue 25 has no valid time: it counts as open at both ends."""
        relate(backend, "Gus", "Project U")
        store, ids = graph(backend)._store, graph(backend)._ids("acme", ["Gus", "Project U"])
        store.put_relation(GraphEdge("acme", tuple(NS), ids[0], "WORKS_ON", ids[1]))  # no times: as an old row
        (shown,) = path(backend, "Gus", "Project U", as_of=BEFORE).steps[0].edges
        assert (shown.valid_from, shown.valid_to) == (None, None)
        assert path(backend, "Gus", "Project U").found


class TestDerivedRelations:
    def test_a_superseded_memorys_relations_are_kept_with_its_end_until_it_is_deleted(self, backend, clock):
        old = backend.app.services.remember.remember(alice(), RememberMemory(
            content="Alice works on Project A.", valid_from="2020-01-01T00:00:00Z"))
        backend.drain()
        current = path(backend, "Alice", "Project A")
        assert current.found
        (edge,) = current.steps[0].edges
        assert (edge.key, edge.valid_from, edge.valid_to) == (old.memory.key, "2020-01-01T00:00:00.000000Z", None)
        clock.advance(86_400)
        backend.app.services.feedback.give(alice(), GiveFeedback(id=old.memory.id, signal="outdated"))
        backend.drain()  # the superseding write re-derives the memory's rows, closed
        assert not path(backend, "Alice", "Project A").found  # it no longer holds
        during = path(backend, "Alice", "Project A", as_of=DURING)
        assert during.found
        (edge,) = during.steps[0].edges
        assert edge.valid_to == "2026-01-02T00:00:00.000000Z"  # the memory's valid_to, closed by the feedback
        assert not path(backend, "Alice", "Project A", as_of="2026-01-03T00:00:00Z").found
        assert not path(backend, "Alice", "Project A", as_of=BEFORE).found
        assert [r.memory.key for r in related(backend, "Alice", max_hops=1, as_of=DURING).memories] == [old.memory.key]
        assert related(backend, "Alice", max_hops=1, as_of=BEFORE).memories == []
        assert graph(backend).integrity_scan(admin()) == {"edges": 0, "mentions": 0, "nodes": 0, "memories": 0}
        backend.memories.delete(alice(), old.memory.namespace, old.memory.key)
        backend.drain()
        assert not path(backend, "Alice", "Project A", as_of=DURING).found  # its relations went with it

    def test_a_plain_items_relations_hold_from_its_creation(self, backend, clock):
        backend.memories.put(alice(), PutMemory(namespace=NS, key="plain", value={"text": "Bob Stone uses Kafka."}))
        backend.drain()
        (edge,) = path(backend, "Bob Stone", "Kafka").steps[0].edges
        assert (edge.valid_from, edge.valid_to) == ("2026-01-01T00:00:00.000000Z", None)
        assert not path(backend, "Bob Stone", "Kafka", as_of="2025-12-31T00:00:00Z").found
        clock.advance(60)
        assert path(backend, "Bob Stone", "Kafka", as_of="2026-01-01T00:00:30Z").found

    def test_a_memory_stated_with_an_end_derives_relations_that_end_then(self, backend):
        put_fact(backend, "f", "Carol Diaz works on Project Zed.", valid_from="2020-01-01T00:00:00Z",
                 valid_to="2022-01-01T00:00:00Z")
        backend.drain()
        assert not path(backend, "Carol Diaz", "Project Zed").found
        assert path(backend, "Carol Diaz", "Project Zed", as_of=DURING).found
        assert related_keys(backend, "Carol Diaz", max_hops=2, as_of=DURING) == ["f"]


class TestRecall:
    def test_recalls_graph_expansion_walks_the_relations_of_its_as_of(self, backend):
        relate(backend, "Dana Reyes", "Project Q", valid_from="2020-01-01T00:00:00Z", valid_to="2023-01-01T00:00:00Z")
        put_fact(backend, "hit", "Dana Reyes leads the platform team.", valid_from="2020-01-01T00:00:00Z")
        put_fact(backend, "q", "Project Q uses Kafka.", valid_from="2020-06-01T00:00:00Z")
        backend.drain()

        def linked(**kw) -> list[tuple[str, int | None]]:
            found = backend.app.services.recall.recall(alice(), RecallQuery.parse({
                "namespace_prefix": PREFIX, "query": "Dana platform team", "mode": "keyword", "min_score": 0,
                "limit": 1, "graph_hops": 3, **kw}))
            return [(r.memory.key, r.graph_hops) for r in found.memories]

        assert linked(as_of=DURING) == [("hit", None), ("q", 2)]  # hit - Dana Reyes -WORKS_ON-> Project Q - q
        assert linked() == [("hit", None)]  # the relation has ended
        assert linked(as_of=AFTER) == [("hit", None)]


class TestBadTimes:
    @pytest.mark.parametrize("times", [
        {"valid_from": "2026-01-01T00:00:00"},  # no offset
        {"valid_from": "2026-01-01"},
        {"valid_to": "tomorrow"},
        {"valid_from": 1767225600},
        {"valid_from": "2024-02-01T00:00:00Z", "valid_to": "2024-01-01T00:00:00Z"},
        {"valid_from": "2024-01-01T00:00:00Z", "valid_to": "2024-01-01T01:00:00+01:00"},  # the same instant
        {"valid_to": "2025-01-01T00:00:00Z"},  # past, and no start: it would never hold
    ])
    def test_a_relation_with_bad_times_is_refused_and_nothing_is_written(self, backend, times):
        g = graph(backend)
        for name in ("Dana", "Project Q"):
            g.put_entity(alice(), PutEntity(namespace=NS, name=name))
        with pytest.raises(InvalidArgument) as raised:
            g.put_relation(alice(), PutRelation.parse({"namespace": NS, "source": "Dana", "type": "WORKS_ON",
                                                       "target": "Project Q", **times}))
        assert raised.value.details.get("field") in ("valid_from", "valid_to")
        for as_of in (None, "2024-01-01T00:30:00Z"):
            assert not path(backend, "Dana", "Project Q", **({"as_of": as_of} if as_of else {})).found

    @pytest.mark.parametrize("as_of", ["2026-01-01", "2026-01-01T00:00:00", "now", 0, "2026-13-01T00:00:00Z"])
    def test_related_and_path_refuse_a_bad_as_of(self, as_of):
        with pytest.raises(InvalidArgument):
            RelatedQuery.parse({"namespace_prefix": [], "from": {"entity": "Dana"}, "as_of": as_of})
        with pytest.raises(InvalidArgument):
            PathQuery.parse({"namespace_prefix": [], "from": {"entity": "Dana"}, "to": {"entity": "Q"},
                             "as_of": as_of})


class TestIsolation:
    def test_as_of_never_reaches_another_users_or_tenants_graph(self, backend):
        times = {"valid_from": "2020-01-01T00:00:00Z", "valid_to": "2023-01-01T00:00:00Z"}
        relate(backend, "Dana", "Project Q", caller=GLOBEX, **times)
        relate(backend, "Dana", "Project Q", caller=bob(), ns=["user", "bob", "people"], **times)
        put_fact(backend, "q", "Project Q uses Kafka.", caller=GLOBEX, valid_from="2020-06-01T00:00:00Z")
        backend.drain()
        assert path(backend, "Dana", "Project Q", caller=GLOBEX, as_of=DURING).found  # the data is there
        assert related_keys(backend, "Dana", caller=GLOBEX, max_hops=2, as_of=DURING) == ["q"]
        for prefix in (PREFIX, []):  # [] is narrowed to Alice's own subtree
            assert not path(backend, "Dana", "Project Q", prefix=prefix, as_of=DURING).found
            assert related_keys(backend, "Dana", prefix=prefix, max_hops=2, as_of=DURING) == []
        with pytest.raises(Forbidden):
            path(backend, "Dana", "Project Q", prefix=["user", "bob"], as_of=DURING)
        with pytest.raises(Forbidden):
            related(backend, "Dana", prefix=["user", "bob"], as_of=DURING)
        assert path(backend, "Dana", "Project Q", caller=bob(), prefix=["user", "bob"], as_of=DURING).found


def test_the_stores_keep_a_derived_edges_times(backend):
    """A memory's rows written straight to the store keep each edge's valid time, and a hop's
    `ValidAt` is decided on them (the store's own filter, under the traversal's bounds)."""
    store = graph(backend)._store
    sealed = backend.sealer.seal_entity_name("acme", "a" * 32, "A")
    nodes = [GraphNode("acme", tuple(NS), e, "CONCEPT", sealed) for e in ("a" * 32, "b" * 32)]
    edge = GraphEdge("acme", tuple(NS), "a" * 32, "USES", "b" * 32, "k", "m-1", "2020-01-01T00:00:00.000000Z",
                     "2023-01-01T00:00:00.000000Z")
    assert store.replace_memory(DerivedMemory("acme", tuple(NS), "k", "m-1", 1), nodes, [edge])
    assert store.expand("acme", (), ["a" * 32], limit=10) == [edge]
    assert store.expand("acme", (), ["b" * 32], limit=10, valid=ValidAt("2021-01-01T00:00:00.000000Z", True)) == [edge]
    for valid in (ValidAt("2019-01-01T00:00:00.000000Z", True), ValidAt("2023-01-01T00:00:00.000000Z", True),
                  ValidAt("2023-01-01T00:00:00.000000Z")):
        assert store.expand("acme", (), ["a" * 32], limit=10, valid=valid) == []
    assert store.expand("acme", (), ["a" * 32], limit=10, valid=ValidAt("2019-01-01T00:00:00.000000Z")) == [edge]
