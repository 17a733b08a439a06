"""The local `GraphStore`: the knowledge graph's rows in their own SQLite file (`graph.db`, WAL).

Every access path has an index: edges by (tenant, source) and (tenant, target) for a hop,
by (tenant, namespace, key) for replacing a memory's; mentions by (tenant, entity) for the
memories of an entity and by (tenant, namespace, key) for a memory's entities. The hop queries
name their index (`INDEXED BY`): without statistics SQLite would rather range-scan the
namespace prefix, which under a broad prefix is the tenant's whole graph. A hop is two
queries (by source, by target) per 400 ids, so a traversal makes a handful of queries whatever its fan-out. Explicit
edges have the empty key (a memory key is never empty). An edge's `valid_from`/`valid_to` (NULL: open) are
`to_rfc3339` text, which orders as time does, so a hop's `ValidAt` is a condition of its query.
An entity's neighbours are paged through the same two indexes in their order: outgoing edges by
(namespace, type, target, key), then incoming ones by (namespace, source, type, key); a position
is the last row read, and a page reads at most `limit + 1` rows whatever it keeps.
"""

from __future__ import annotations

import functools
import sqlite3
from collections.abc import Iterator, Sequence
from pathlib import Path

from memsvc.adapters.local.sqlite_db import SqliteFile, add_missing_columns
from memsvc.core.graph import DerivedMemory, GraphEdge, GraphNode, Mention, ValidAt
from memsvc.core.namespaces import decode_namespace, encode_namespace, prefix_range

__all__ = ["SqliteGraphStore"]

_SCHEMA = """
CREATE TABLE IF NOT EXISTS graph_nodes (
    tenant TEXT NOT NULL, entity_id TEXT NOT NULL, ns TEXT NOT NULL,
    type TEXT NOT NULL, name_ct BLOB NOT NULL, explicit INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (tenant, entity_id, ns)
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS graph_nodes_ns ON graph_nodes (tenant, ns);
CREATE TABLE IF NOT EXISTS graph_mentions (
    tenant TEXT NOT NULL, ns TEXT NOT NULL, key TEXT NOT NULL, entity_id TEXT NOT NULL, memory_id TEXT NOT NULL,
    PRIMARY KEY (tenant, ns, key, entity_id)
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS graph_mentions_entity ON graph_mentions (tenant, entity_id, ns);
CREATE TABLE IF NOT EXISTS graph_edges (
    tenant TEXT NOT NULL, source_id TEXT NOT NULL, ns TEXT NOT NULL, type TEXT NOT NULL, target_id TEXT NOT NULL,
    key TEXT NOT NULL, memory_id TEXT NOT NULL, valid_from TEXT, valid_to TEXT,
    PRIMARY KEY (tenant, source_id, ns, type, target_id, key)
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS graph_edges_target ON graph_edges (tenant, target_id, ns);
CREATE INDEX IF NOT EXISTS graph_edges_memory ON graph_edges (tenant, ns, key);
CREATE TABLE IF NOT EXISTS graph_memories (
    tenant TEXT NOT NULL, ns TEXT NOT NULL, key TEXT NOT NULL, memory_id TEXT NOT NULL, version INTEGER NOT NULL,
    PRIMARY KEY (tenant, ns, key)
) WITHOUT ROWID;
"""

# Stored namespaces repeat row after row: decode each once.
_decode = functools.lru_cache(maxsize=4096)(decode_namespace)
_CHUNK = 400  # ids per IN (...): far below SQLite's 32,766 variables, small enough to plan well
_EDGE_COLUMNS = "tenant, ns, source_id, type, target_id, key, memory_id, valid_from, valid_to"
# Added after the first release: a graph.db from before gets them at open (NULL: open, as before).
_ADDED_EDGE_COLUMNS = {"valid_from": "TEXT", "valid_to": "TEXT"}
# A neighbours page's reads per direction: the index, the end it fixes, and the columns after the
# namespace in its order (the primary key's; graph_edges_target's, which ends with the key's).
_NEIGHBOUR_READS = {"out": ("", "source_id", ("type", "target_id", "key")),
                    "in": (" INDEXED BY graph_edges_target", "target_id", ("source_id", "type", "key"))}


class SqliteGraphStore:
    def __init__(self, path: Path) -> None:
        self._db = SqliteFile(path, _SCHEMA)
        with self._db.tx() as conn:
            add_missing_columns(conn, "graph_edges", _ADDED_EDGE_COLUMNS)

    # -- derived from memories ------------------------------------------------------------------

    def replace_memory(self, memory: DerivedMemory, nodes: Sequence[GraphNode], edges: Sequence[GraphEdge]) -> bool:
        (replaced,) = self.replace_many([(memory, nodes, edges)])
        if isinstance(replaced, Exception):
            raise replaced
        return replaced

    def replace_many(self, memories: Sequence[tuple[DerivedMemory, Sequence[GraphNode], Sequence[GraphEdge]]]
                     ) -> list[bool | Exception]:
        # One transaction for a batch (one commit, whatever its size), a savepoint per memory: one
        # that fails leaves the others' rows and is handed back.
        out: list[bool | Exception] = []
        with self._db.tx() as conn:
            for memory, nodes, edges in memories:
                conn.execute("SAVEPOINT replacing")
                try:
                    out.append(self._replace(conn, memory, nodes, edges))
                except Exception as exc:
                    conn.execute("ROLLBACK TO replacing")
                    out.append(exc)
                conn.execute("RELEASE replacing")
        return out

    def _replace(self, conn: sqlite3.Connection, memory: DerivedMemory, nodes: Sequence[GraphNode],
                 edges: Sequence[GraphEdge]) -> bool:
        ns = encode_namespace(memory.namespace)
        if not self._newer(conn, memory, ns):
            return False
        old = self._drop_derived(conn, memory.tenant, ns, memory.key)
        conn.executemany(
            "INSERT INTO graph_nodes (tenant, entity_id, ns, type, name_ct, explicit) VALUES (?, ?, ?, ?, ?, 0)"
            " ON CONFLICT DO NOTHING",
            [(memory.tenant, n.entity_id, ns, n.type, n.name_ct) for n in nodes])
        conn.executemany(
            "INSERT OR REPLACE INTO graph_mentions (tenant, ns, key, entity_id, memory_id) VALUES (?, ?, ?, ?, ?)",
            [(memory.tenant, ns, memory.key, n.entity_id, memory.memory_id) for n in nodes])
        conn.executemany(
            f"INSERT OR REPLACE INTO graph_edges ({_EDGE_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
            [(memory.tenant, ns, e.source_id, e.type, e.target_id, memory.key, memory.memory_id, e.valid_from,
              e.valid_to) for e in edges])
        self._prune(conn, memory.tenant, ns, old - {n.entity_id for n in nodes})
        self._mark(conn, memory, ns)
        return True

    def remove_memory(self, memory: DerivedMemory) -> bool:
        ns = encode_namespace(memory.namespace)
        with self._db.tx() as conn:
            row = conn.execute("SELECT version FROM graph_memories WHERE tenant = ? AND ns = ? AND key = ?",
                               (memory.tenant, ns, memory.key)).fetchone()
            if row is None or row[0] > memory.version:
                return False
            self._prune(conn, memory.tenant, ns, self._drop_derived(conn, memory.tenant, ns, memory.key))
            conn.execute("DELETE FROM graph_memories WHERE tenant = ? AND ns = ? AND key = ?",
                         (memory.tenant, ns, memory.key))
        return True

    @staticmethod
    def _newer(conn: sqlite3.Connection, memory: DerivedMemory, ns: str) -> bool:
        row = conn.execute("SELECT version FROM graph_memories WHERE tenant = ? AND ns = ? AND key = ?",
                           (memory.tenant, ns, memory.key)).fetchone()
        return row is None or row[0] < memory.version

    @staticmethod
    def _mark(conn: sqlite3.Connection, memory: DerivedMemory, ns: str) -> None:
        conn.execute("INSERT OR REPLACE INTO graph_memories (tenant, ns, key, memory_id, version) VALUES (?, ?, ?, ?, ?)",
                     (memory.tenant, ns, memory.key, memory.memory_id, memory.version))

    @staticmethod
    def _drop_derived(conn: sqlite3.Connection, tenant: str, ns: str, key: str) -> set[str]:
        """Remove a key's mentions and derived edges; returns the entity ids it mentioned."""
        old = {r[0] for r in conn.execute(
            "SELECT entity_id FROM graph_mentions WHERE tenant = ? AND ns = ? AND key = ?", (tenant, ns, key))}
        conn.execute("DELETE FROM graph_mentions WHERE tenant = ? AND ns = ? AND key = ?", (tenant, ns, key))
        conn.execute("DELETE FROM graph_edges WHERE tenant = ? AND ns = ? AND key = ?", (tenant, ns, key))
        return old

    @staticmethod
    def _prune(conn: sqlite3.Connection, tenant: str, ns: str, entity_ids: set[str]) -> None:
        """Drop these nodes of the namespace if nothing keeps them, with every edge touching them."""
        for entity_id in entity_ids:
            kept = conn.execute(
                "SELECT 1 FROM graph_nodes WHERE tenant = ? AND entity_id = ? AND ns = ? AND explicit = 1"
                " UNION ALL SELECT 1 FROM graph_mentions WHERE tenant = ? AND entity_id = ? AND ns = ? LIMIT 1",
                (tenant, entity_id, ns, tenant, entity_id, ns)).fetchone()
            if kept is None:
                conn.execute("DELETE FROM graph_nodes WHERE tenant = ? AND entity_id = ? AND ns = ?",
                             (tenant, entity_id, ns))
                conn.execute("DELETE FROM graph_edges WHERE tenant = ? AND ns = ? AND (source_id = ? OR target_id = ?)",
                             (tenant, ns, entity_id, entity_id))

    # -- explicit writes ------------------------------------------------------------------------

    def put_entity(self, node: GraphNode) -> None:
        with self._db.tx() as conn:
            conn.execute(
                "INSERT INTO graph_nodes (tenant, entity_id, ns, type, name_ct, explicit) VALUES (?, ?, ?, ?, ?, 1)"
                " ON CONFLICT DO UPDATE SET type = excluded.type, name_ct = excluded.name_ct, explicit = 1",
                (node.tenant, node.entity_id, encode_namespace(node.namespace), node.type, node.name_ct))

    def delete_entity(self, tenant: str, namespace: tuple[str, ...], entity_id: str) -> bool:
        ns = encode_namespace(namespace)
        with self._db.tx() as conn:
            if conn.execute("SELECT 1 FROM graph_nodes WHERE tenant = ? AND entity_id = ? AND ns = ? AND explicit = 1",
                            (tenant, entity_id, ns)).fetchone() is None:
                return False
            conn.execute("DELETE FROM graph_edges WHERE tenant = ? AND ns = ? AND key = ''"
                         " AND (source_id = ? OR target_id = ?)", (tenant, ns, entity_id, entity_id))
            conn.execute("UPDATE graph_nodes SET explicit = 0 WHERE tenant = ? AND entity_id = ? AND ns = ?",
                         (tenant, entity_id, ns))
            self._prune(conn, tenant, ns, {entity_id})
        return True

    def put_relation(self, edge: GraphEdge) -> list[str]:
        ns = encode_namespace(edge.namespace)
        with self._db.tx() as conn:
            missing = [e for e in dict.fromkeys((edge.source_id, edge.target_id)) if conn.execute(
                "SELECT 1 FROM graph_nodes WHERE tenant = ? AND entity_id = ? AND ns = ?",
                (edge.tenant, e, ns)).fetchone() is None]
            if not missing:
                conn.execute(f"INSERT OR REPLACE INTO graph_edges ({_EDGE_COLUMNS}) VALUES (?, ?, ?, ?, ?, '', '', ?, ?)",
                             (edge.tenant, ns, edge.source_id, edge.type, edge.target_id, edge.valid_from,
                              edge.valid_to))
        return missing

    def delete_relation(self, edge: GraphEdge) -> bool:
        with self._db.tx() as conn:
            return conn.execute(
                "DELETE FROM graph_edges WHERE tenant = ? AND source_id = ? AND ns = ? AND type = ? AND target_id = ?"
                " AND key = ''", (edge.tenant, edge.source_id, encode_namespace(edge.namespace), edge.type,
                                  edge.target_id)).rowcount > 0

    # -- reads ----------------------------------------------------------------------------------

    def nodes(self, tenant: str, prefix: tuple[str, ...], entity_ids: Sequence[str]) -> list[GraphNode]:
        scope, args = _scope(prefix)
        out = []
        for chunk in _chunks(entity_ids):
            out += [GraphNode(tenant, _decode(ns), entity_id, kind, ct, bool(explicit))
                    for entity_id, ns, kind, ct, explicit in self._db.conn().execute(
                        f"SELECT entity_id, ns, type, name_ct, explicit FROM graph_nodes WHERE tenant = ?"
                        f" AND entity_id IN ({_marks(chunk)}){scope}", (tenant, *chunk, *args))]
        return sorted(out, key=lambda n: (n.entity_id, n.namespace))

    def expand(self, tenant: str, prefix: tuple[str, ...], entity_ids: Sequence[str], *,
               limit: int, valid: ValidAt | None = None) -> list[GraphEdge]:
        scope, args = _scope(prefix)
        if valid is not None:
            scope += " AND (valid_to IS NULL OR valid_to > ?)"
            args += (valid.at,)
            if valid.started:
                scope += " AND (valid_from IS NULL OR valid_from <= ?)"
                args += (valid.at,)
        found: dict[tuple, GraphEdge] = {}
        conn = self._db.conn()
        # By source: the primary key; by target: its index.
        for end, index in (("source_id", ""), ("target_id", " INDEXED BY graph_edges_target")):
            for chunk in _chunks(entity_ids):
                for row in conn.execute(
                        f"SELECT {_EDGE_COLUMNS} FROM graph_edges{index} WHERE tenant = ?"
                        f" AND {end} IN ({_marks(chunk)}){scope} LIMIT ?", (tenant, *chunk, *args, limit + 1)):
                    if row[1:6] not in found:  # an edge between two of the ids comes once per end
                        found[row[1:6]] = _edge(row)
                    if len(found) >= limit:
                        return list(found.values())
        return list(found.values())

    def neighbours(self, tenant: str, prefix: tuple[str, ...], entity_id: str, *, direction: str,
                   relation: str | None, valid: ValidAt, limit: int, after: list[str | int] | None
                   ) -> tuple[list[GraphEdge], list[str | int] | None]:
        phases = [phase for phase in ("out", "in") if direction in (phase, "both")]
        if after is not None:
            phases = phases[phases.index(str(after[0])):] if after[0] in phases else []
        bounds = prefix_range(prefix)
        scope, args = _scope(prefix)
        if bounds is not None:  # the prefix's end as a bound of the index range, which `scope` alone is not
            scope += " AND ns < ?"
            args += (bounds[2],)
        out: list[GraphEdge] = []
        read = 0
        last: list[str | int] = []
        for phase in phases:
            index, end, order = _NEIGHBOUR_READS[phase]
            columns = ("ns", *order)
            # The range's start: after the position (one row value, so the index seeks to it), else the prefix's.
            start, start_args = (" AND ns >= ?", (bounds[0],)) if bounds is not None else ("", ())
            if after is not None and after[0] == phase:
                start, start_args = f" AND ({', '.join(columns)}) > ({_marks(columns)})", tuple(after[1:])
            rows = self._db.conn().execute(
                f"SELECT {_EDGE_COLUMNS} FROM graph_edges{index} WHERE tenant = ? AND {end} = ?{scope}{start}"
                f" ORDER BY {', '.join(columns)} LIMIT ?", (tenant, entity_id, *args, *start_args, limit + 1 - read))
            for row in rows:
                if read == limit:  # a row past the page: the page ends at the last one kept
                    return out, last
                read += 1
                edge = _edge(row)
                position = {"ns": row[1], "source_id": edge.source_id, "type": edge.type,
                            "target_id": edge.target_id, "key": row[5]}
                last = [phase, *(position[c] for c in columns)]
                if (relation is None or edge.type == relation) and valid.admits(edge):
                    out.append(edge)
        return out, None

    def memories_of(self, tenant: str, prefix: tuple[str, ...], entity_ids: Sequence[str], *,
                    limit: int) -> list[Mention]:
        scope, args = _scope(prefix)
        out: list[Mention] = []
        for chunk in _chunks(entity_ids):
            out += [Mention(tenant, _decode(ns), key, memory_id, entity_id)
                    for ns, key, memory_id, entity_id in self._db.conn().execute(
                        f"SELECT ns, key, memory_id, entity_id FROM graph_mentions INDEXED BY graph_mentions_entity"
                        f" WHERE tenant = ?"
                        f" AND entity_id IN ({_marks(chunk)}){scope} LIMIT ?", (tenant, *chunk, *args, limit - len(out)))]
            if len(out) >= limit:
                break
        return out

    def entities_of_memories(self, tenant: str, refs: Sequence[tuple[tuple[str, ...], str]]) -> list[Mention]:
        conn = self._db.conn()
        return [Mention(tenant, ns, key, memory_id, entity_id)
                for ns, key in dict.fromkeys(refs)
                for entity_id, memory_id in conn.execute(
                    "SELECT entity_id, memory_id FROM graph_mentions WHERE tenant = ? AND ns = ? AND key = ?",
                    (tenant, encode_namespace(ns), key))]

    def derived_memories(self, tenant: str) -> Iterator[DerivedMemory]:
        after = ("", "")
        while True:
            rows = self._db.conn().execute(
                "SELECT ns, key, memory_id, version FROM graph_memories WHERE tenant = ?"
                " AND (ns, key) > (?, ?) ORDER BY ns, key LIMIT 500", (tenant, *after)).fetchall()
            for ns, key, memory_id, version in rows:
                yield DerivedMemory(tenant, decode_namespace(ns), key, memory_id, version)
            if len(rows) < 500:
                return
            after = (rows[-1][0], rows[-1][1])

    def explicit_rows(self, tenant: str, prefix: tuple[str, ...]) -> tuple[list[GraphNode], list[GraphEdge]]:
        scope, args = _scope(prefix)
        conn = self._db.conn()
        edges = [_edge(row) for row in conn.execute(
            f"SELECT {_EDGE_COLUMNS} FROM graph_edges WHERE tenant = ? AND key = ''{scope} ORDER BY ns, source_id, "
            "type, target_id", (tenant, *args))]
        ends = {(encode_namespace(e.namespace), end) for e in edges for end in (e.source_id, e.target_id)}
        nodes = [GraphNode(tenant, _decode(ns), entity_id, kind, bytes(name_ct), bool(explicit))
                 for ns, entity_id, kind, name_ct, explicit in conn.execute(
                     f"SELECT ns, entity_id, type, name_ct, explicit FROM graph_nodes WHERE tenant = ?{scope} "
                     "ORDER BY ns, entity_id", (tenant, *args))
                 if explicit or (ns, entity_id) in ends]
        return nodes, edges

    def integrity_scan(self, tenant: str) -> dict[str, int]:
        with self._db.tx() as conn:
            mentions = conn.execute(
                "DELETE FROM graph_mentions WHERE tenant = ? AND NOT EXISTS (SELECT 1 FROM graph_memories m"
                " WHERE m.tenant = graph_mentions.tenant AND m.ns = graph_mentions.ns AND m.key = graph_mentions.key"
                " AND m.memory_id = graph_mentions.memory_id)", (tenant,)).rowcount
            nodes = conn.execute(
                "DELETE FROM graph_nodes WHERE tenant = ? AND explicit = 0 AND NOT EXISTS (SELECT 1 FROM"
                " graph_mentions x WHERE x.tenant = graph_nodes.tenant AND x.entity_id = graph_nodes.entity_id"
                " AND x.ns = graph_nodes.ns)", (tenant,)).rowcount
            edges = conn.execute(
                "DELETE FROM graph_edges WHERE tenant = ? AND ("
                " NOT EXISTS (SELECT 1 FROM graph_nodes n WHERE n.tenant = graph_edges.tenant"
                "  AND n.entity_id = graph_edges.source_id AND n.ns = graph_edges.ns)"
                " OR NOT EXISTS (SELECT 1 FROM graph_nodes n WHERE n.tenant = graph_edges.tenant"
                "  AND n.entity_id = graph_edges.target_id AND n.ns = graph_edges.ns)"
                " OR (key != '' AND NOT EXISTS (SELECT 1 FROM graph_memories m WHERE m.tenant = graph_edges.tenant"
                "  AND m.ns = graph_edges.ns AND m.key = graph_edges.key AND m.memory_id = graph_edges.memory_id)))", (tenant,)).rowcount
        return {"edges": edges, "mentions": mentions, "nodes": nodes}

    def stats(self) -> dict[str, int]:
        conn = self._db.conn()
        return {name: conn.execute(f"SELECT count(*) FROM graph_{name}").fetchone()[0]
                for name in ("nodes", "edges", "mentions")}

    def ping(self) -> None:
        self._db.conn().execute("SELECT 1 FROM graph_memories LIMIT 1").fetchall()


def _scope(prefix: tuple[str, ...]) -> tuple[str, tuple[str, ...]]:
    bounds = prefix_range(prefix)
    if bounds is None:
        return "", ()
    return " AND (ns = ? OR (ns >= ? AND ns < ?))", bounds


def _chunks(ids: Sequence[str]) -> Iterator[list[str]]:
    unique = list(dict.fromkeys(ids))
    for at in range(0, len(unique), _CHUNK):
        yield unique[at:at + _CHUNK]


def _marks(chunk: Sequence[str]) -> str:
    return ", ".join("?" * len(chunk))


def _edge(row: tuple) -> GraphEdge:
    tenant, ns, source_id, kind, target_id, key, memory_id, valid_from, valid_to = row
    return GraphEdge(tenant, _decode(ns), source_id, kind, target_id, key or None, memory_id or None, valid_from,
                     valid_to)
