"""The local graph store's hop reads go through the entity indexes, whatever the prefix: without
statistics SQLite preferred range-scanning the namespace prefix, i.e. the tenant's whole graph
under a broad prefix."""

from __future__ import annotations

from memsvc.adapters.local.sqlite_graph import SqliteGraphStore


def test_hop_reads_search_by_entity(tmp_path):
    store = SqliteGraphStore(tmp_path / "graph.db")
    conn = store._db.conn()
    statements: list[str] = []
    conn.set_trace_callback(statements.append)
    store.expand("acme", ("user", "alice"), ["e1", "e2"], limit=10)
    store.memories_of("acme", ("user", "alice"), ["e1", "e2"], limit=10)
    conn.set_trace_callback(None)
    plans = {}
    for sql in statements:
        if sql.lstrip().upper().startswith("SELECT"):
            plans[sql] = " | ".join(row[3] for row in conn.execute("EXPLAIN QUERY PLAN " + sql))
    assert len(plans) == 3, plans
    for sql, plan in plans.items():
        assert "SCAN" not in plan, (sql, plan)
    used = sorted(plan.split(" USING ")[1].split(" (")[0] for plan in plans.values())
    assert used == ["INDEX graph_edges_target", "INDEX graph_mentions_entity", "PRIMARY KEY"], used
    assert all("entity_id=?" in p or "source_id=?" in p or "target_id=?" in p for p in plans.values())


def test_a_hop_at_a_time_uses_the_same_indexes(tmp_path):
    """A traversal's valid time (issue 25) is a condition of the hop's query, not another access path."""
    from memsvc.core.graph import ValidAt

    store = SqliteGraphStore(tmp_path / "graph.db")
    conn = store._db.conn()
    statements: list[str] = []
    conn.set_trace_callback(statements.append)
    store.expand("acme", ("user", "alice"), ["e1", "e2"], limit=10, valid=ValidAt("2026-01-01T00:00:00.000000Z", True))
    conn.set_trace_callback(None)
    plans = [" | ".join(row[3] for row in conn.execute("EXPLAIN QUERY PLAN " + sql))
             for sql in statements if sql.lstrip().upper().startswith("SELECT")]
    assert len(plans) == 2 and not any("SCAN" in p for p in plans), plans
    assert sorted(p.split(" USING ")[1].split(" (")[0] for p in plans) == ["INDEX graph_edges_target", "PRIMARY KEY"]


def test_a_graph_db_from_before_valid_time_gets_its_columns_and_its_edges_hold_always(tmp_path):
    import sqlite3

    from memsvc.core.graph import GraphEdge, ValidAt

    path = tmp_path / "graph.db"
    old = sqlite3.connect(path)
    old.executescript("""
        CREATE TABLE graph_edges (tenant TEXT NOT NULL, source_id TEXT NOT NULL, ns TEXT NOT NULL, type TEXT NOT NULL,
            target_id TEXT NOT NULL, key TEXT NOT NULL, memory_id TEXT NOT NULL,
            PRIMARY KEY (tenant, source_id, ns, type, target_id, key)) WITHOUT ROWID;
        INSERT INTO graph_edges VALUES ('acme', 'a', '', 'USES', 'b', '', '');""")
    old.commit()
    old.close()
    store = SqliteGraphStore(path)
    (edge,) = store.expand("acme", (), ["a"], limit=10, valid=ValidAt("1999-01-01T00:00:00.000000Z", True))
    assert edge == GraphEdge("acme", (), "a", "USES", "b")
    SqliteGraphStore(path)  # opening it again adds nothing
