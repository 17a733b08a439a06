"""`GraphStore.explicit_rows` on each backend (issue 26's export reads the explicit graph through
it): what callers wrote under a prefix, with the derived ends of their relations, and nothing
derived only from memories, nor anything outside the prefix or of another tenant."""

from __future__ import annotations

from memsvc.service.graph import PutEntity, PutRelation
from tests.conftest import alice, bob
from tests.contract.test_graph import NS, graph, write_story


def names(backend, tenant, nodes):
    return sorted((n.namespace, backend.sealer.open_entity_name(tenant, n.entity_id, n.name_ct), n.type, n.explicit)
                  for n in nodes)


def test_explicit_rows_hold_what_callers_wrote_and_the_ends_of_their_relations(backend):
    write_story(backend)  # derives Alice, Project A, the memory leak, INC-42, Bob Stone, Kafka
    g = graph(backend)
    g.put_entity(alice(), PutEntity(namespace=NS, name="Eve", type="PERSON"))
    g.put_relation(alice(), PutRelation(namespace=NS, source="Eve", type="REPORTS_TO", target="Alice",
                                        valid_from="2025-01-01T00:00:00Z"))
    g.put_entity(alice(), PutEntity(namespace=["user", "alice", "elsewhere"], name="Zed", type="PERSON"))
    g.put_entity(bob(), PutEntity(namespace=["user", "bob", "notes"], name="Eve", type="PERSON"))
    store = backend.app.graph

    nodes, edges = store.explicit_rows("acme", ("user", "alice", "notes"))
    assert names(backend, "acme", nodes) == [(tuple(NS), "Alice", "PERSON", False), (tuple(NS), "Eve", "PERSON", True)]
    [edge] = edges
    by_id = {n.entity_id: backend.sealer.open_entity_name("acme", n.entity_id, n.name_ct) for n in nodes}
    assert (by_id[edge.source_id], edge.type, by_id[edge.target_id]) == ("Eve", "REPORTS_TO", "Alice")
    assert edge.explicit and edge.valid_from == "2025-01-01T00:00:00.000000Z" and edge.valid_to is None

    nodes, _ = store.explicit_rows("acme", ("user", "alice"))
    assert sorted(n[1] for n in names(backend, "acme", nodes)) == ["Alice", "Eve", "Zed"]
    assert store.explicit_rows("other", ()) == ([], [])
