"""The local vector index: cosine search over numpy matrices, one per tenant; exact, and
through an ANN graph for the wide queries of big tenants.

Vectors are persisted in their own SQLite file (so indexing never contends with item writes)
and loaded into memory at start. Exact search costs one matrix-vector product over the rows in
scope: about 10 ms a query over 100k vectors and 80 ms over a million (1.5 GB of float32) on a
2-core machine; a narrow scope's rows are found through per-namespace row lists, so it costs the
same in a tenant of any size. A tenant with more than `ann_threshold` vectors answers wide
scopes from an HNSW graph (`ann`), built in the background at its first wide query. Every
process serving the data dir holds the vectors in memory and catches up with the others' writes
before it reads (`index_changes`)."""

from __future__ import annotations

import itertools
import json
import os
import sqlite3
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from memsvc.adapters.local.ann import GraphBuilder, TenantGraph
from memsvc.adapters.local.index_changes import IndexChanges, changes_schema
from memsvc.adapters.local.rw_lock import ReadWriteLock
from memsvc.core.filters import Filter, lookup_in
from memsvc.core.models import VectorHit
from memsvc.core.namespaces import ancestors, decode_namespace, encode_namespace

__all__ = ["LocalVectorIndex"]

# A rowid table: a row (a 1.5 KB vector at 384 dimensions) fits in its leaf page, where the
# first layout's WITHOUT ROWID table, whose rows may hold about 1 KB in a 4 KB page, spilled every
# row to an overflow page (4.4 KB of file per vector). `_migrate_layout` converts such a file.
_VECTORS_TABLE = """
CREATE TABLE IF NOT EXISTS {name} (
    tenant TEXT NOT NULL, memory_id TEXT NOT NULL, field TEXT NOT NULL,
    ns TEXT NOT NULL, key TEXT NOT NULL, version INTEGER NOT NULL, policy_attributes TEXT NOT NULL,
    vec BLOB NOT NULL
);
"""
_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (name TEXT PRIMARY KEY, value TEXT NOT NULL);
""" + _VECTORS_TABLE.format(name="vectors") + """
CREATE UNIQUE INDEX IF NOT EXISTS vectors_by_ref ON vectors (tenant, memory_id, field);
"""
_BUILD_CHUNK = 50_000  # rows copied into an ANN graph at a time, under the read lock
_LOAD_BATCH = 50_000  # rows read at a time at start (80 MB of vectors at 384 dimensions)
_ANN_MAX_K = 1_000  # a deeper page than this is a scan: exact
_APPLY_SLICE = 8  # dirty rows moved into a graph at a time: queries wait for the slice (~15 ms at 1M)
_ANN_CANDIDATES = 100  # candidates asked of the graph at least, rescored exactly (the page's top_k at most)


_ROW = "tenant, memory_id, field, ns, key, version, policy_attributes, vec"


@dataclass
class _Memory:
    """What a vector row needs to become a hit: shared by the rows of one memory version."""

    ns: str
    key: str
    version: int
    policy_attributes: dict[str, Any]
    slots: dict[str, int] = field(default_factory=dict)  # field -> row


class _TenantVectors:
    """Rows of one tenant: a growable matrix plus, per row, its namespace id and owner; per
    namespace, its rows; per namespace prefix, the namespaces under it. A scope's rows are thus
    found in time proportional to the scope, not to the tenant."""

    def __init__(self, dim: int) -> None:
        self.matrix = np.zeros((256, dim), dtype=np.float32)
        self.live = np.zeros(256, dtype=bool)
        self.ns_ids = np.zeros(256, dtype=np.int32)
        self.owner: list[tuple[str, str] | None] = [None] * 256  # (memory_id, field)
        self.free: list[int] = []
        self.size = 0
        self.ns_index: dict[str, int] = {}
        self.ns_rows: list[set[int]] = []  # by namespace id
        self.under: dict[str, set[int]] = {}  # encoded prefix -> ids of the namespaces at or below it
        self.memories: dict[str, _Memory] = {}
        self.graph: TenantGraph | None = None  # once a wide query of a big tenant asked for one

    @property
    def live_count(self) -> int:
        return self.size - len(self.free)

    def add(self, memory_id: str, field_name: str, ns: str, vec: np.ndarray) -> int:
        if self.free:
            slot = self.free.pop()
        else:
            if self.size == len(self.live):
                self._grow()
            slot = self.size
            self.size += 1
        self.matrix[slot] = vec
        self.live[slot] = True
        ns_id = self._ns_id(ns)
        self.ns_ids[slot] = ns_id
        self.ns_rows[ns_id].add(slot)
        self.owner[slot] = (memory_id, field_name)
        if self.graph is not None:
            self.graph.mark(slot)
        return slot

    def add_loaded(self, memory_ids: list[str], field_names: list[str], namespaces: list[str],
                   blobs: list[bytes]) -> range:
        """Append rows read from the file (unit vectors already) in one copy; returns their slots."""
        n = len(blobs)
        while self.size + n > len(self.live):
            self._grow()
        slots = range(self.size, self.size + n)
        self.matrix[self.size : self.size + n] = np.frombuffer(b"".join(blobs), dtype=np.float32).reshape(n, -1)
        self.live[self.size : self.size + n] = True
        ns_ids = [self._ns_id(ns) for ns in namespaces]
        self.ns_ids[self.size : self.size + n] = ns_ids
        for slot, ns_id in zip(slots, ns_ids):
            self.ns_rows[ns_id].add(slot)
        self.owner[self.size : self.size + n] = zip(memory_ids, field_names)
        if self.graph is not None:
            for slot in slots:
                self.graph.mark(slot)
        self.size += n
        return slots

    def reserve(self, rows: int) -> None:
        """Room for `rows` rows and an eighth more in one allocation (at start, when the count is
        known): without the margin, the first write after start would double the matrix."""
        wanted = rows + rows // 8
        if wanted > len(self.live):
            self._resize(wanted)

    def drop(self, slot: int) -> None:
        self.live[slot] = False
        self.ns_rows[self.ns_ids[slot]].discard(slot)
        self.owner[slot] = None
        self.free.append(slot)
        if self.graph is not None:
            self.graph.mark(slot)

    def _ns_id(self, ns: str) -> int:
        ns_id = self.ns_index.get(ns)
        if ns_id is None:
            ns_id = self.ns_index[ns] = len(self.ns_rows)
            self.ns_rows.append(set())
            for prefix in ancestors(decode_namespace(ns)):
                self.under.setdefault(prefix, set()).add(ns_id)
        return ns_id

    def scope(self, prefix: tuple[str, ...]) -> tuple[set[int] | None, int]:
        """The ids of the namespaces under `prefix` (None: every one) and how many live rows they hold."""
        if not prefix:
            return None, self.live_count
        ns_ids = self.under.get(encode_namespace(prefix), set())
        return ns_ids, sum(len(self.ns_rows[i]) for i in ns_ids)

    def rows_under(self, prefix: tuple[str, ...]) -> np.ndarray:
        """The live rows in scope, ascending. A narrow scope (under a quarter of the tenant) is
        gathered from its namespaces' row sets; a wide one is picked by a mask over every row,
        which is cheaper there than Python sets and costs less than the product that follows."""
        ns_ids, count = self.scope(prefix)
        if ns_ids is None:
            return np.flatnonzero(self.live[: self.size])
        if count * 4 < self.size:
            rows = np.fromiter(itertools.chain.from_iterable(self.ns_rows[i] for i in ns_ids), dtype=np.int64,
                               count=count)
            rows.sort()
            return rows
        in_scope = np.isin(self.ns_ids[: self.size], np.fromiter(ns_ids, dtype=np.int32, count=len(ns_ids)))
        return np.flatnonzero(in_scope & self.live[: self.size])

    def _grow(self) -> None:
        self._resize(len(self.live) * 2)

    def _resize(self, n: int) -> None:
        self.matrix = np.resize(self.matrix, (n, self.matrix.shape[1]))
        self.live = np.concatenate([self.live, np.zeros(n - len(self.live), dtype=bool)])
        self.ns_ids = np.concatenate([self.ns_ids, np.zeros(n - len(self.ns_ids), dtype=np.int32)])
        self.owner.extend([None] * (n - len(self.owner)))


class LocalVectorIndex:
    """`VectorIndex` for one machine. Thread-safe; writes are durable before they are visible."""

    max_top_k = 10_000
    # Exact search: a short page holds every match. An ANN page that comes up short is never
    # returned (exact search answers instead), so this holds with the graph too.
    short_page_is_end = True

    def __init__(self, path: Path, *, dimension: int, model_id: str, ann_threshold: int | None = None) -> None:
        """`ann_threshold`: from how many vectors a tenant's wide-scope queries use an ANN graph
        (built in the background at the first such query; exact search answers until it is
        ready); None: never (`memsvc serve`'s default is `LocalSettings.ann_threshold`)."""
        self._dim = dimension
        self._path = str(path)
        self._ann_threshold = ann_threshold
        self._graphs = GraphBuilder()
        self._closed = False
        # Queries share the matrices (numpy's product releases the GIL, so two run on two cores);
        # a write, which may grow or reuse rows, has them alone.
        self._lock = ReadWriteLock()
        self._tenants: dict[str, _TenantVectors] = {}
        path.parent.mkdir(parents=True, exist_ok=True)
        self._db = sqlite3.connect(self._path, isolation_level=None, check_same_thread=False)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("PRAGMA synchronous=NORMAL")
        self._db.execute("PRAGMA secure_delete=ON")  # as every local file (`sqlite_db.SqliteFile`)
        _migrate_layout(self._db)
        self._db.executescript(_SCHEMA + changes_schema("vectors"))
        self._check_model(model_id)
        self._changes = IndexChanges(path)  # before loading: a write after it is caught up with later
        self._load()

    @staticmethod
    def stored_model(path: Path) -> str | None:
        """The model whose vectors the file at `path` holds; None for no file, or one with none yet."""
        if not path.exists():
            return None
        db = sqlite3.connect(path, timeout=30)  # read-write: a WAL file needs its shared memory
        try:
            if db.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'meta'").fetchone() is None:
                return None
            row = db.execute("SELECT value FROM meta WHERE name = 'embedding'").fetchone()
        finally:
            db.close()
        return json.loads(row[0])["model"] if row else None

    def _check_model(self, model_id: str) -> None:
        wanted = json.dumps({"model": model_id, "dimension": self._dim})
        row = self._db.execute("SELECT value FROM meta WHERE name = 'embedding'").fetchone()
        if row is None:
            self._db.execute("INSERT INTO meta (name, value) VALUES ('embedding', ?)", (wanted,))
        elif row[0] != wanted:
            raise RuntimeError(
                f"{self._path} holds vectors of {row[0]}, but the embedder is {wanted}; "
                "run `memsvc reindex` with the server stopped to embed every item again with it"
            )

    def _load(self) -> None:
        """Read every row into the matrices, a batch at a time: one copy per batch into the
        matrix, and one parse per distinct policy-attributes text (most memories share a few)."""
        for tenant, count in self._db.execute("SELECT tenant, count(*) FROM vectors GROUP BY tenant"):
            self._tenant(tenant).reserve(count)
        attributes: dict[str, dict[str, Any]] = {}
        cursor = self._db.execute(f"SELECT {_ROW} FROM vectors")  # in file order: a tenant's runs are grouped
        while batch := cursor.fetchmany(_LOAD_BATCH):
            for tenant, rows in itertools.groupby(batch, key=lambda row: row[0]):
                rows = list(rows)
                t = self._tenant(tenant)
                slots = t.add_loaded([r[1] for r in rows], [r[2] for r in rows], [r[3] for r in rows],
                                     [r[7] for r in rows])
                for slot, (_, memory_id, field_name, ns, key, version, attrs, _) in zip(slots, rows):
                    memory = t.memories.get(memory_id)
                    if memory is None:
                        parsed = attributes.get(attrs)
                        if parsed is None:
                            parsed = attributes[attrs] = json.loads(attrs)
                        memory = t.memories[memory_id] = _Memory(ns, key, version, parsed)
                    memory.slots[field_name] = slot

    def _add_row(self, tenant, memory_id, field_name, ns, key, version, attrs, blob) -> None:
        t = self._tenant(tenant)
        if (memory := t.memories.get(memory_id)) is None:
            memory = t.memories[memory_id] = _Memory(ns, key, version, json.loads(attrs))
        memory.slots[field_name] = t.add(memory_id, field_name, ns, np.frombuffer(blob, dtype=np.float32))

    def _catch_up(self) -> None:
        self._changes.catch_up(self._lock.writing(), self._load_everything, self._reload_memories)

    def _load_everything(self) -> None:
        self._tenants = {}
        self._load()

    def _reload_memories(self, changed: dict[str, set[str]]) -> None:
        for tenant, memory_ids in changed.items():
            t = self._tenants.get(tenant)  # `_add_row` makes it if a row comes back
            for memory_id in memory_ids:  # as the file has it now: dropped, then its rows again
                memory = t.memories.pop(memory_id, None) if t else None
                for slot in memory.slots.values() if memory else ():
                    t.drop(slot)
                for row in self._db.execute(f"SELECT {_ROW} FROM vectors WHERE tenant = ? AND memory_id = ?",
                                            (tenant, memory_id)):
                    self._add_row(*row)
            self._update_graph(tenant)  # only queues the graph's work, which takes the lock itself

    def _tenant(self, tenant: str) -> _TenantVectors:
        t = self._tenants.get(tenant)
        if t is None:
            t = self._tenants[tenant] = _TenantVectors(self._dim)
        return t

    def ping(self) -> None:
        self._db.execute("SELECT 1").fetchone()

    def put_many(self, writes):
        """Write every version's vectors in one transaction."""
        rows = [(w, name, _unit(v, self._dim)) for w in writes for name, v in w.vectors]
        if not rows:
            return
        with self._lock.writing():
            with _tx(self._db), self._changes.own_write(self._db):
                self._db.executemany(
                    "INSERT OR REPLACE INTO vectors (tenant, memory_id, field, ns, key, version, policy_attributes, vec) "
                    "VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                    [(w.tenant, w.memory_id, name, encode_namespace(w.namespace), w.key, w.version,
                      json.dumps(w.policy_attributes), arr.tobytes()) for w, name, arr in rows],
                )
            for w, name, arr in rows:
                ns = encode_namespace(w.namespace)
                t = self._tenant(w.tenant)
                memory = t.memories.setdefault(w.memory_id, _Memory(ns, w.key, w.version, dict(w.policy_attributes)))
                if name in memory.slots:
                    t.drop(memory.slots[name])
                memory.slots[name] = t.add(w.memory_id, name, ns, arr)
        for tenant in {w.tenant for w in writes}:
            self._update_graph(tenant)

    def delete_many(self, refs):
        with self._lock.writing():
            with _tx(self._db), self._changes.own_write(self._db):
                self._db.executemany(
                    "DELETE FROM vectors WHERE tenant = ? AND memory_id = ? AND field = ?",
                    [(r.tenant, r.memory_id, r.field) for r in refs],
                )
            for r in refs:
                t = self._tenants.get(r.tenant)
                memory = t.memories.get(r.memory_id) if t else None
                if memory is None:
                    continue
                slot = memory.slots.pop(r.field, None)
                if slot is not None:
                    t.drop(slot)
                if not memory.slots:
                    del t.memories[r.memory_id]
        for tenant in {r.tenant for r in refs}:
            self._update_graph(tenant)

    def query(self, tenant, prefix, pushdown, vector, top_k):
        q = _unit(vector, self._dim)
        self._catch_up()
        with self._lock.reading():
            t = self._tenants.get(tenant)
            if t is None or t.size == 0:
                return []
            if self._wide_for_graph(tenant, t, prefix, top_k):
                hits = self._graph_hits(t, prefix, pushdown, q, top_k)
                if hits is not None:
                    return hits
            rows = t.rows_under(prefix)
            if rows.size == 0:
                return []
            # A narrow scope (a namespace among many) scores only its own rows: a gather of 200 rows
            # instead of a product over the whole tenant (1,000x less work at a million vectors).
            # A wide one scores a view of the matrix (no copy), then picks the rows in scope.
            scores = t.matrix[rows] @ q if rows.size * 4 < t.size else (t.matrix[: t.size] @ q)[rows]
            # Sort only the best candidates; widen when the pushdown filter rejects too many.
            k = min(rows.size, max(4 * top_k, 256))
            while True:
                if k < rows.size:
                    best = np.argpartition(-scores, k - 1)[:k]
                    order = best[np.argsort(-scores[best], kind="stable")]
                else:
                    order = np.argsort(-scores, kind="stable")
                hits = self._hits(t, rows, scores, order, pushdown, top_k)
                if len(hits) >= top_k or k >= rows.size:
                    return hits
                k = min(rows.size, k * 4)

    def exact(self, tenant: str) -> bool:
        """Below `ann_threshold` every query scores the tenant's rows exactly; above, a wide one
        may search the ANN graph."""
        t = self._tenants.get(tenant)
        return self._ann_threshold is None or t is None or t.live_count < self._ann_threshold

    def _wide_for_graph(self, tenant: str, t: _TenantVectors, prefix: tuple[str, ...], top_k: int) -> bool:
        """Whether the query is one for the graph (a big tenant, a wide scope, a page of a usual
        size) and the graph is ready; queues the graph's build when it is not there yet."""
        if self._ann_threshold is None or t.live_count < self._ann_threshold or top_k > _ANN_MAX_K:
            return False
        _, count = t.scope(prefix)
        if count * 4 < t.live_count:  # narrow: exact over its own rows costs less than a graph search
            return False
        if t.graph is None:
            self._graphs.build(tenant, lambda: self._build_graph(tenant, t))
            return False
        # A graph far behind its writes (a backlog being indexed) would score most rows anyway.
        return t.graph.ready and len(t.graph.dirty) * 4 < t.live_count

    def _graph_hits(self, t: _TenantVectors, prefix: tuple[str, ...], pushdown: Filter, q: np.ndarray,
                    top_k: int) -> list[VectorHit] | None:
        """The best `top_k` hits among the graph's candidates, scored exactly; None when fewer
        than `top_k` pass (the scope or the pushdown filter rejects most): exact search then
        answers, so a short page still means no more matches."""
        ns_ids, count = t.scope(prefix)
        # A scope of a fraction of the tenant keeps about that fraction of the candidates.
        asked = min(len(t.graph), int(max(top_k, _ANN_CANDIDATES) * t.live_count / max(count, 1)) + 1)
        rows = t.graph.candidates(q, asked)
        rows = rows[t.live[rows]]  # a row dropped since the graph took it never answers
        if ns_ids is not None:
            rows = rows[np.isin(t.ns_ids[rows], np.fromiter(ns_ids, dtype=np.int32, count=len(ns_ids)))]
        scores = t.matrix[rows] @ q
        hits = self._hits(t, rows, scores, np.argsort(-scores, kind="stable"), pushdown, top_k)
        return hits if len(hits) >= top_k else None

    def _update_graph(self, tenant: str) -> None:
        """After a write: queue moving the tenant's dirty rows into its ready graph."""
        t = self._tenants.get(tenant)
        if t is not None and t.graph is not None and t.graph.ready and t.graph.dirty:
            self._graphs.build(f"{tenant} (changes)", lambda: self._apply_dirty(tenant, t))

    def _apply_dirty(self, tenant: str, t: _TenantVectors) -> None:
        """On the builder's thread: move dirty rows into the graph a slice at a time (their
        vectors copied under the read lock); a row is clean only if it did not change again
        meanwhile. Queries score dirty rows exactly until then."""
        graph = t.graph
        while True:
            with self._lock.reading():
                if self._closed or self._tenants.get(tenant) is not t:
                    return
                batch = list(itertools.islice(graph.dirty.items(), _APPLY_SLICE))
                if not batch:
                    return
                rows = np.fromiter((row for row, _ in batch), dtype=np.int64, count=len(batch))
                live_rows = rows[t.live[rows]]
                vectors = t.matrix[live_rows]
            graph.replace(rows, live_rows, vectors)
            with self._lock.writing():
                for row, change in batch:
                    if graph.dirty.get(row) == change:
                        del graph.dirty[row]

    def _build_graph(self, tenant: str, t: _TenantVectors) -> None:
        """On the builder's thread: register the graph (from then on every changed row is marked
        dirty), add the rows a chunk at a time (copied under the read lock, so queries and writes
        go on between chunks), then replay the dirty rows and open it to queries."""
        graph = TenantGraph(self._dim)
        with self._lock.writing():
            if self._tenants.get(tenant) is not t or t.graph is not None:
                return
            t.graph = graph
            end = t.size
        threads = os.cpu_count() or 1
        try:
            for start in range(0, end, _BUILD_CHUNK):
                with self._lock.reading():
                    if self._closed or self._tenants.get(tenant) is not t:  # closed, or everything reloaded
                        return
                    rows = np.flatnonzero(t.live[start : min(end, start + _BUILD_CHUNK)]) + start
                    vectors = t.matrix[rows]
                graph.add(rows, vectors, threads=threads)
        except BaseException:  # e.g. out of memory: exact search goes on, and the next wide query tries again
            with self._lock.writing():
                t.graph = None
            raise
        with self._lock.writing():
            graph.ready = True
        self._apply_dirty(tenant, t)

    def wait_for_graphs(self, timeout: float | None = None) -> bool:
        """Until no ANN graph is being built (benchmarks, tests); False if `timeout` passed first."""
        return self._graphs.wait(timeout)

    def vectors_of(self, tenant, refs):
        self._catch_up()
        with self._lock.reading():
            t = self._tenants.get(tenant)
            out: dict[tuple[str, str], list[float]] = {}
            for memory_id, field_name in refs:
                memory = t.memories.get(memory_id) if t else None
                slot = memory.slots.get(field_name) if memory else None
                if slot is not None:
                    out[(memory_id, field_name)] = t.matrix[slot].tolist()
            return out

    def mean_direction(self, tenant, page):
        """In numpy over the stored rows (float64 sums): no vector leaves the matrix as a list."""
        self._catch_up()
        with self._lock.reading():
            t = self._tenants.get(tenant)
            slots = [slot for ref in page if t is not None and (slot := _slot_of(t, *ref)) is not None]
            if not slots:
                return None
            centre = t.matrix[slots].sum(axis=0, dtype=np.float64)
            norm = float(np.linalg.norm(centre))
            return (centre / norm).tolist() if norm > 0.0 else None

    def cosines(self, tenant, directions, refs):
        self._catch_up()
        with self._lock.reading():
            t = self._tenants.get(tenant)
            held = [(ref, slot) for ref in refs if t is not None and (slot := _slot_of(t, *ref)) is not None]
            if not held or not directions:
                return {ref: [] for ref, _ in held}
            found = t.matrix[[slot for _, slot in held]] @ np.asarray(directions, dtype=np.float64).T
            return {ref: row.tolist() for (ref, _), row in zip(held, found)}

    @staticmethod
    def _hits(t: _TenantVectors, rows, scores, order, pushdown: Filter, top_k: int) -> list[VectorHit]:
        hits: list[VectorHit] = []
        for i in order:
            memory_id, field_name = t.owner[rows[i]]
            memory = t.memories[memory_id]
            if not pushdown.is_empty and not pushdown.matches(lookup_in(memory.policy_attributes)):
                continue
            hits.append(VectorHit(decode_namespace(memory.ns), memory.key, memory_id, memory.version,
                                  field_name, float(scores[i])))
            if len(hits) >= top_k:
                break
        return hits

    def memory_ids(self, tenant: str) -> set[str]:
        """Memory ids with vectors (for tests and diagnostics)."""
        self._catch_up()
        with self._lock.reading():
            t = self._tenants.get(tenant)
            return set(t.memories) if t else set()

    def close(self) -> None:
        self._closed = True
        self._graphs.close()
        self._db.close()



def _migrate_layout(db: sqlite3.Connection) -> None:
    """Convert a file of the first layout (a WITHOUT ROWID `vectors` table) to the rowid table,
    every row copied in one transaction, then give the freed pages back (VACUUM). The change log
    is left as it is: the rows are the same, so no process has anything to catch up with."""
    def old_layout() -> bool:
        row = db.execute("SELECT sql FROM sqlite_master WHERE type = 'table' AND name = 'vectors'").fetchone()
        return row is not None and "WITHOUT ROWID" in row[0].upper()

    if not old_layout():
        return
    with _tx(db):
        if not old_layout():  # another process converted it meanwhile
            return
        db.execute(_VECTORS_TABLE.format(name="vectors_rowid"))
        db.execute(f"INSERT INTO vectors_rowid ({_ROW}) SELECT {_ROW} FROM vectors")
        db.execute("DROP TABLE vectors")  # and its triggers, which `changes_schema` creates again
        db.execute("ALTER TABLE vectors_rowid RENAME TO vectors")
    db.execute("VACUUM")


def _slot_of(t: _TenantVectors, memory_id: str, field_name: str) -> int | None:
    memory = t.memories.get(memory_id)
    return memory.slots.get(field_name) if memory else None


def _unit(v: Sequence[float], dim: int) -> np.ndarray:
    arr = np.asarray(v, dtype=np.float32).reshape(-1)
    if arr.shape[0] != dim:
        raise ValueError(f"vector has {arr.shape[0]} dimensions, the index {dim}")
    norm = float(np.linalg.norm(arr))
    return arr / norm if norm > 0 else arr


class _tx:
    def __init__(self, db: sqlite3.Connection) -> None:
        self._db = db

    def __enter__(self) -> None:
        self._db.execute("BEGIN IMMEDIATE")

    def __exit__(self, exc_type, exc, tb) -> None:
        self._db.execute("ROLLBACK" if exc_type else "COMMIT")
