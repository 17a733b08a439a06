"""`DynamoGraphStore.neighbours` and `SqliteGraphStore.neighbours` on a hub entity: a page is one
bounded read of the entity's index (one DynamoDB Query with `Limit` `limit + 1`; SQLite's index
range), a page may end inside a memory's row of several relations, and paging goes through every
relation once."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from memsvc.adapters.aws.dynamo_graph import DynamoGraphStore
from memsvc.adapters.local.sqlite_graph import SqliteGraphStore
from memsvc.core.graph import DerivedMemory, GraphEdge, GraphNode, ValidAt
from tests.fakes.aws_stack import keyword_table_on_moto

TABLE = "graph-test"
NOTES = ("user", "alice", "notes")
NOW = ValidAt("2026-01-01T00:00:00.000000Z")


@pytest.fixture
def dynamo_client() -> Iterator[Any]:
    with keyword_table_on_moto(TABLE) as c:
        yield c


@pytest.fixture(params=["sqlite", "dynamodb"])
def store(request, tmp_path):
    if request.param == "sqlite":
        return SqliteGraphStore(tmp_path / "graph.db")
    return DynamoGraphStore(request.getfixturevalue("dynamo_client"), TABLE)


def hub(store, memories: int = 40) -> set[tuple[str, str, str, str | None]]:
    """Entity "h" named by `memories` memories: every fourth relates it to three others (one
    pointing at it), the rest to nothing; and two explicit relations. Returns every relation."""
    expected = set()
    for n in range(memories):
        key, others = f"k{n:03d}", [f"e{n}a", f"e{n}b", f"e{n}c"] if n % 4 == 0 else []
        edges = [GraphEdge("acme", NOTES, "h", "USES", others[0], key, key),
                 GraphEdge("acme", NOTES, "h", "OWNS", others[1], key, key),
                 GraphEdge("acme", NOTES, others[2], "BLOCKS", "h", key, key)] if others else []
        nodes = [GraphNode("acme", NOTES, e, "CONCEPT", b"sealed", False) for e in ["h", *others]]
        store.replace_memory(DerivedMemory("acme", NOTES, key, key, 1), nodes, edges)
        expected |= {(e.source_id, e.type, e.target_id, e.key) for e in edges}
    for other in ("x1", "x2"):
        store.put_entity(GraphNode("acme", NOTES, other, "CONCEPT", b"sealed", True))
        store.put_relation(GraphEdge("acme", NOTES, "h", "DEPENDS_ON", other, valid_from=NOW.at))
        expected.add(("h", "DEPENDS_ON", other, None))
    return expected


def pages(store, limit: int, **kw) -> Iterator[list[GraphEdge]]:
    after = None
    for _ in range(1000):
        edges, after = store.neighbours("acme", ("user", "alice"), "h", valid=NOW, limit=limit, after=after,
                                        **{"direction": "both", "relation": None, **kw})
        assert len(edges) <= limit
        yield edges
        if after is None:
            return


@pytest.mark.parametrize("limit", [1, 2, 5, 100])
def test_paging_goes_through_every_relation_once(store, limit):
    expected = hub(store)
    seen = [(e.source_id, e.type, e.target_id, e.key) for page in pages(store, limit) for e in page]
    assert len(seen) == len(expected) and set(seen) == expected


def test_direction_and_type_are_kept_across_pages(store):
    hub(store)
    incoming = [e for page in pages(store, 2, direction="in") for e in page]
    assert incoming and all(e.target_id == "h" and e.type == "BLOCKS" for e in incoming)
    owns = [e for page in pages(store, 3, relation="OWNS") for e in page]
    assert len(owns) == 10 and all(e.source_id == "h" for e in owns)


def test_a_dynamodb_page_is_one_query_of_limit_plus_one_rows(dynamo_client):
    store = DynamoGraphStore(dynamo_client, TABLE)
    hub(store, memories=120)
    queries: list[dict[str, Any]] = []
    original = dynamo_client.query
    dynamo_client.__dict__["query"] = lambda **kw: queries.append(kw) or original(**kw)
    answered = list(pages(store, 5))
    assert len(queries) == len(answered) > 20  # one Query a page, however sparse the rows
    assert {q["Limit"] for q in queries} == {6}
