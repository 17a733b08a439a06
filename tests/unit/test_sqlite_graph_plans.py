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
