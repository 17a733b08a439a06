"""`POST /v1/graph/neighbours` on each backend: an entity's relations, each with the entity at its
other end, by direction, type and valid time, a page at a time in a stable order; bad input is
refused and changes nothing; another user's and another tenant's relations never appear, nor a
relation whose memory the caller's policy hides."""

from __future__ import annotations

import pytest

from memsvc.core.errors import Forbidden, InvalidArgument, NotFound
from memsvc.core.models import Caller
from memsvc.core.policy import default_bundle
from memsvc.service.admin import PolicyBundle
from memsvc.service.graph import FindEntities, NeighboursQuery, PathQuery, PutEntity, PutRelation
from memsvc.service.memories import PutMemory
from tests.conftest import admin, alice, bob

NS = ["user", "alice", "notes"]
PREFIX = ["user", "alice"]
GLOBEX = Caller(tenant_id="globex", user_id="alice", roles=("user",))


def graph(b):
    return b.app.services.graph


def neighbours(b, name="Dana", caller=None, prefix=PREFIX, entity=None, **kw):
    return graph(b).neighbours(caller or alice(), NeighboursQuery.parse(
        {"namespace_prefix": prefix, "entity": {"entity": name} if entity is None else entity, **kw}))


def shown(answer) -> list[tuple[str, str, str]]:
    return [(n.edge.type, n.direction, n.entity.name) for n in answer.edges]


def every_page(b, name="Dana", **kw) -> tuple[list[tuple[str, str, str]], int]:
    """Every edge, following next_cursor; and how many pages that took."""
    found, pages, cursor = [], 0, None
    while True:
        answer = neighbours(b, name, **kw, **({"cursor": cursor} if cursor else {}))
        found += shown(answer)
        pages += 1
        cursor = answer.next_cursor
        if cursor is None or pages > 100:
            return found, pages


def relate(b, source, kind, target, caller=None, ns=NS, **times):
    g = graph(b)
    for name in (source, target):
        g.put_entity(caller or alice(), PutEntity(namespace=ns, name=name))
    g.put_relation(caller or alice(), PutRelation.parse({"namespace": ns, "source": source, "type": kind,
                                                         "target": target, **times}))


def put(b, key, text, caller=None, namespace=NS):
    b.memories.put(caller or alice(), PutMemory(namespace=namespace, key=key, value={"text": text}))


def dana_and_friends(b, caller=None, ns=NS):
    relate(b, "Dana", "WORKS_ON", "Project Q", caller=caller, ns=ns)
    relate(b, "Erin", "REPORTS_TO", "Dana", caller=caller, ns=ns)
    relate(b, "Dana", "OWNS", "Kafka", caller=caller, ns=ns)
    relate(b, "Dana", "MEMBER_OF", "Team X", caller=caller, ns=ns, valid_from="2020-01-01T00:00:00Z",
           valid_to="2023-01-01T00:00:00Z")
    put(b, "r", "Dana uses Redis.", caller=caller, namespace=ns)
    b.drain()


CURRENT = [("OWNS", "out", "Kafka"), ("REPORTS_TO", "in", "Erin"), ("USES", "out", "Redis"),
           ("WORKS_ON", "out", "Project Q")]


class TestResults:
    def test_each_relation_comes_with_the_entity_at_its_other_end(self, backend):
        dana_and_friends(backend)
        answer = neighbours(backend)
        assert sorted(shown(answer)) == CURRENT and answer.next_cursor is None
        by_type = {n.edge.type: n for n in answer.edges}
        assert by_type["USES"].edge.key == "r" and by_type["USES"].edge.namespace == tuple(NS)  # derived: its memory
        assert by_type["OWNS"].edge.explicit and by_type["OWNS"].edge.valid_from is not None
        assert by_type["WORKS_ON"].entity.type == "CONCEPT" and by_type["WORKS_ON"].entity.explicit
        assert by_type["REPORTS_TO"].edge.source_id == by_type["REPORTS_TO"].entity.id  # in: the other end is its source

    def test_direction_and_relation_type_narrow_it(self, backend):
        dana_and_friends(backend)
        assert sorted(shown(neighbours(backend, direction="out"))) == [e for e in CURRENT if e[1] == "out"]
        assert shown(neighbours(backend, direction="in")) == [("REPORTS_TO", "in", "Erin")]
        assert shown(neighbours(backend, relation="OWNS")) == [("OWNS", "out", "Kafka")]
        assert shown(neighbours(backend, relation="OWNS", direction="in")) == []
        assert shown(neighbours(backend, "Erin")) == [("REPORTS_TO", "out", "Dana")]

    def test_as_of_answers_the_relations_that_held_then(self, backend, clock):
        dana_and_friends(backend)
        assert ("MEMBER_OF", "out", "Team X") not in shown(neighbours(backend))  # ended
        assert shown(neighbours(backend, relation="MEMBER_OF", as_of="2021-06-01T00:00:00Z")) == [
            ("MEMBER_OF", "out", "Team X")]
        assert shown(neighbours(backend, relation="MEMBER_OF", as_of="2019-06-01T00:00:00Z")) == []
        # The explicit ones hold from their write (the clock's now), so not yet in 2021.
        assert shown(neighbours(backend, as_of="2021-06-01T00:00:00Z")) == [("MEMBER_OF", "out", "Team X")]

    def test_a_memory_stands_for_each_entity_it_names(self, backend):
        put(backend, "a", "Alice works on Project A.")
        put(backend, "b", "Project A caused the memory leak.")
        backend.drain()
        answer = neighbours(backend, entity={"memory": {"namespace": NS, "key": "a"}})
        names = {(n.edge.type, n.entity.name) for n in answer.edges}
        assert ("WORKS_ON", "Alice") in names and ("WORKS_ON", "Project A") in names  # one relation, seen from each end
        assert any(n.entity.name == "memory leak" for n in answer.edges)  # Project A's other relation
        with pytest.raises(NotFound):
            neighbours(backend, entity={"memory": {"namespace": NS, "key": "nope"}})

    def test_an_unknown_entity_has_no_neighbours(self, backend):
        dana_and_friends(backend)
        answer = neighbours(backend, "Nobody At All")
        assert answer.edges == [] and answer.next_cursor is None


class TestPaging:
    def test_pages_of_one_go_through_every_relation_once_in_a_stable_order(self, backend):
        dana_and_friends(backend)
        for n in ("Alpha", "Beta", "Gamma"):
            put(backend, n, f"Dana uses Tool {n}. Dana depends on Lib {n}.")
        backend.drain()
        whole = shown(neighbours(backend, limit=100))
        assert len(whole) == 10 and len(set(whole)) == 10
        assert shown(neighbours(backend, limit=100)) == whole  # the same order asked again
        for limit in (1, 3):
            paged, pages = every_page(backend, limit=limit)
            assert paged == whole and pages >= len(whole) // limit
        paged, _ = every_page(backend, limit=2, direction="out", relation="USES")
        assert sorted(paged) == sorted(e for e in whole if e[0] == "USES")

    def test_pages_of_a_memorys_entities_follow_one_another(self, backend):
        put(backend, "a", "Alice works on Project A.")
        put(backend, "b", "Project A caused the memory leak. Alice owns Kafka.")
        backend.drain()
        ref = {"memory": {"namespace": NS, "key": "a"}}
        whole = shown(neighbours(backend, entity=ref))
        paged, pages = every_page(backend, entity=ref, limit=1)
        assert paged == whole and len(whole) >= 4 and pages >= len(whole)

    def test_a_cursor_serves_only_the_query_that_gave_it(self, backend):
        dana_and_friends(backend)
        cursor = neighbours(backend, limit=1).next_cursor
        assert cursor is not None
        assert neighbours(backend, limit=1, cursor=cursor).edges  # the same query goes on
        for other in ({"direction": "out"}, {"relation": "OWNS"}, {"as_of": "2021-06-01T00:00:00Z"},
                      {"prefix": NS}, {"name": "Erin"}):
            with pytest.raises(InvalidArgument) as refused:
                neighbours(backend, **{"limit": 1, "cursor": cursor, **other})
            assert refused.value.details == {"field": "cursor"}


class TestBadInput:
    @pytest.mark.parametrize("body", [
        {"limit": 0}, {"limit": 101}, {"limit": "5"}, {"direction": "sideways"}, {"relation": "LIKES"},
        {"as_of": "yesterday"}, {"cursor": "not a cursor!"}, {"cursor": "AAAA"}, {"cursor": ""},
        {"entity": {"entity": "Dana", "memory": {"namespace": NS, "key": "r"}}}, {"entity": {}},
        {"entity": {"entity": " "}}, {"extra": 1}])
    def test_refused_and_nothing_changed(self, backend, body):
        dana_and_friends(backend)
        before = shown(neighbours(backend))
        with pytest.raises(InvalidArgument):
            neighbours(backend, **body)
        assert shown(neighbours(backend)) == before


class TestIsolation:
    def test_another_tenants_relations_never_appear(self, backend):
        dana_and_friends(backend)
        relate(backend, "Dana", "BLOCKS", "Globex Plan", caller=GLOBEX)
        assert sorted(shown(neighbours(backend))) == CURRENT
        assert shown(neighbours(backend, caller=GLOBEX)) == [("BLOCKS", "out", "Globex Plan")]
        stranger = Caller(tenant_id="initech", user_id="alice", roles=("user",))
        assert shown(neighbours(backend, caller=stranger)) == []
        # A cursor of one tenant opens for no other.
        cursor = neighbours(backend, limit=1).next_cursor
        with pytest.raises(InvalidArgument):
            neighbours(backend, caller=GLOBEX, limit=1, cursor=cursor)

    def test_another_users_relations_never_appear_even_under_a_broad_prefix(self, backend):
        dana_and_friends(backend)
        bobs = ["user", "bob", "notes"]
        relate(backend, "Dana", "FIXES", "Bob Bug", caller=bob(), ns=bobs)
        put(backend, "bb", "Dana depends on Bob Lib.", caller=bob(), namespace=bobs)
        backend.drain()
        for prefix in (PREFIX, []):  # [] is narrowed to the caller's own subtree
            assert sorted(shown(neighbours(backend, prefix=prefix))) == CURRENT
        assert sorted(shown(neighbours(backend, caller=bob(), prefix=[]))) == [
            ("DEPENDS_ON", "out", "Bob Lib"), ("FIXES", "out", "Bob Bug")]
        with pytest.raises(Forbidden):
            neighbours(backend, caller=bob())  # Alice's prefix
        with pytest.raises(Forbidden):
            neighbours(backend, prefix=["user", "bob"])
        cursor = neighbours(backend, limit=1).next_cursor
        with pytest.raises(InvalidArgument):
            neighbours(backend, caller=bob(), prefix=[], limit=1, cursor=cursor)


def put_secret(backend, text: str) -> None:
    """Alice's memory labelled secret: `TestPolicy.hide_secrets` hides it from her own reads."""
    backend.memories.put(alice(), PutMemory(namespace=NS, key="s", value={"text": text, "tags": ["secret"]}))


class TestPolicy:
    @staticmethod
    def hide_secrets(backend):
        """A tenant policy hiding the memories labelled secret from their owner's searches."""
        bundle = default_bundle()
        search_rego = bundle["search.rego"].replace(
            'own_filter := {"namespace": "user", "sub": input.context.user_id}',
            'own_filter := {"namespace": "user", "sub": input.context.user_id, '
            '"labels": {"$not": {"$contains": "secret"}}}')
        attributes_rego = ('package memories.attributes\n\n'
                           'attributes := {"namespace": input.namespace[0], "sub": input.namespace[1], '
                           '"labels": object.get(input.value, "tags", [])}\n')
        assert search_rego != bundle["search.rego"]
        backend.admin.put_policies(admin(), PolicyBundle(policies={
            **bundle, "attributes.rego": attributes_rego, "search.rego": search_rego}))

    def test_a_relation_is_shown_only_as_its_memory_would_be(self, backend):
        self.hide_secrets(backend)
        dana_and_friends(backend)
        put_secret(backend, "Dana depends on Vault Nine.")
        backend.drain()
        assert ("DEPENDS_ON", "out", "Vault Nine") in shown(neighbours(backend, caller=admin()))  # no filter
        assert sorted(shown(neighbours(backend))) == CURRENT  # not Vault Nine
        backend.memories.delete(alice(), NS, "r")  # gone, its graph not yet removed: not shown either
        assert sorted(shown(neighbours(backend))) == [e for e in CURRENT if e[2] != "Redis"]
        assert ("USES", "out", "Redis") not in shown(neighbours(backend, caller=admin()))  # without a filter too

    def test_find_shows_no_entity_only_a_hidden_memory_names(self, backend):
        self.hide_secrets(backend)
        put(backend, "open", "Project Basilisk is in Reykjavik.")
        put_secret(backend, "Mongoose Nightfall works on Project Basilisk.")
        backend.drain()
        names = FindEntities(namespace_prefix=PREFIX, names=["Mongoose Nightfall", "Project Basilisk"])
        assert [e.name for e in graph(backend).find_entities(admin(), names)] == ["Mongoose Nightfall",
                                                                                  "Project Basilisk"]
        assert [e.name for e in graph(backend).find_entities(alice(), names)] == ["Project Basilisk"]

    def test_a_path_resting_on_a_hidden_or_deleted_memory_is_not_shown(self, backend):
        """`path` answers its steps' relations, so it hides what `neighbours` hides."""
        self.hide_secrets(backend)
        put(backend, "open", "Dana works on Project Q.")
        put_secret(backend, "Project Q depends on Vault Nine.")
        backend.drain()
        ends = {"from": {"entity": "Dana"}, "to": {"entity": "Vault Nine"}}
        as_admin = graph(backend).path(admin(), PathQuery.parse({"namespace_prefix": PREFIX, **ends}))
        assert (as_admin.found, as_admin.hops) == (True, 2)
        hidden = graph(backend).path(alice(), PathQuery.parse({"namespace_prefix": PREFIX, **ends}))
        assert (hidden.found, hidden.entities, hidden.steps) == (False, [], [])
        to_q = {"from": {"entity": "Dana"}, "to": {"entity": "Project Q"}}
        assert graph(backend).path(alice(), PathQuery.parse({"namespace_prefix": PREFIX, **to_q})).found
        backend.memories.delete(alice(), NS, "open")  # gone, its graph not yet removed: not shown either
        assert not graph(backend).path(alice(), PathQuery.parse({"namespace_prefix": PREFIX, **to_q})).found
