"""The local keyword index: BM25 over blind terms, postings in memory, documents in SQLite.

Each memory version is one row of `keywords.db` (its term hashes and their counts, never
words), loaded into per-tenant postings at start. A posting list is an append-only pair of
arrays (document slot, term frequency); a deleted document's slot is masked out, never reused,
and a tenant's postings are rebuilt from its rows once most of its slots are dead. A query
scores every document in scope with numpy: 2.3 ms p50, 3.6 ms p95 for a five-term query over
100,000 documents on a 2-core machine (benchmarks/README.md). Every process serving the data
dir holds the postings in memory and catches up with the others' writes before it reads
(`index_changes`).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from memsvc.adapters.local.index_changes import IndexChanges, changes_schema
from memsvc.adapters.local.rw_lock import ReadWriteLock
from memsvc.adapters.local.field_postings import LocalFieldPostings
from memsvc.adapters.local.sqlite_db import SqliteFile
from memsvc.core.filters import Filter, lookup_in
from memsvc.core.keywords import BM25_B, BM25_K1, idf
from memsvc.core.models import FieldDoc, KeywordDoc, KeywordHit, KeywordResult
from memsvc.ports import FieldHolders
from memsvc.core.namespaces import decode_namespace, encode_namespace, is_under

__all__ = ["LocalKeywordIndex"]

_SCHEMA = """
CREATE TABLE IF NOT EXISTS docs (
    tenant TEXT NOT NULL, memory_id TEXT NOT NULL,
    ns TEXT NOT NULL, key TEXT NOT NULL, version INTEGER NOT NULL, policy_attributes TEXT NOT NULL,
    length INTEGER NOT NULL, terms TEXT NOT NULL,
    PRIMARY KEY (tenant, memory_id)
) WITHOUT ROWID;
"""

log = logging.getLogger(__name__)


_ROW = "memory_id, ns, key, version, policy_attributes, length, terms"


def _doc(tenant: str, memory_id: str, ns: str, key: str, version: int, attrs: str, length: int,
         terms: str) -> KeywordDoc:
    return KeywordDoc(tenant, decode_namespace(ns), key, memory_id, version, json.loads(attrs), json.loads(terms),
                      length)


class _Postings:
    """One term's postings: slots and frequencies, grown by doubling."""

    __slots__ = ("slots", "tfs", "size")

    def __init__(self) -> None:
        self.slots = np.empty(4, dtype=np.int32)
        self.tfs = np.empty(4, dtype=np.float32)
        self.size = 0

    def add(self, slot: int, tf: int) -> None:
        if self.size == len(self.slots):
            self.slots = np.resize(self.slots, 2 * self.size)
            self.tfs = np.resize(self.tfs, 2 * self.size)
        self.slots[self.size] = slot
        self.tfs[self.size] = tf
        self.size += 1


class _TenantKeywords:
    def __init__(self) -> None:
        self.postings: dict[str, _Postings] = {}
        self.slot_of: dict[str, int] = {}  # memory id -> slot
        self.memory_ids: list[str] = []
        self.keys: list[str] = []
        self.versions: list[int] = []
        self.lengths = np.zeros(256, dtype=np.float32)
        self.live = np.zeros(256, dtype=bool)
        self.ns_ids = np.zeros(256, dtype=np.int32)
        self.attr_ids = np.zeros(256, dtype=np.int32)
        self.ns_index: dict[str, int] = {}
        self.ns_names: list[tuple[str, ...]] = []
        self.attr_index: dict[str, int] = {}  # policy attributes as canonical JSON -> id
        self.attr_values: list[dict[str, Any]] = []  # by id, parsed once
        self.dead = 0
        # While a copy is rebuilt from the rows (`LocalKeywordIndex._rebuild_due`): the changes made
        # here since, for the copy to take in before it takes this one's place.
        self.changes_since: list[KeywordDoc | str] | None = None

    @property
    def size(self) -> int:
        return len(self.memory_ids)

    def add(self, doc: KeywordDoc) -> None:
        self._note(doc)
        self._add(doc)

    def _note(self, change: KeywordDoc | str) -> None:
        if self.changes_since is not None:
            self.changes_since.append(change)

    def _add(self, doc: KeywordDoc) -> None:
        slot = self.size
        if slot == len(self.live):
            n = 2 * slot
            self.lengths, self.ns_ids, self.attr_ids = (np.resize(a, n) for a in (self.lengths, self.ns_ids, self.attr_ids))
            self.live = np.concatenate([self.live, np.zeros(n - slot, dtype=bool)])
        self.memory_ids.append(doc.memory_id)
        self.keys.append(doc.key)
        self.versions.append(doc.version)
        self.lengths[slot] = doc.length
        self.live[slot] = True
        ns = encode_namespace(doc.namespace)
        if ns not in self.ns_index:
            self.ns_index[ns] = len(self.ns_names)
            self.ns_names.append(doc.namespace)
        self.ns_ids[slot] = self.ns_index[ns]
        attrs = json.dumps(doc.policy_attributes, sort_keys=True)
        if attrs not in self.attr_index:
            self.attr_index[attrs] = len(self.attr_values)
            self.attr_values.append(doc.policy_attributes)
        self.attr_ids[slot] = self.attr_index[attrs]
        self.slot_of[doc.memory_id] = slot
        for term, tf in doc.terms.items():
            postings = self.postings.get(term)
            if postings is None:
                postings = self.postings[term] = _Postings()
            postings.add(slot, tf)

    def drop(self, memory_id: str) -> None:
        self._note(memory_id)
        slot = self.slot_of.pop(memory_id, None)
        if slot is not None:
            self.live[slot] = False
            self.dead += 1

    def replace(self, doc: KeywordDoc) -> None:
        """The document in a new slot, then its old slot (if any) masked out: the postings of the
        new one exist before the stale ones stop counting."""
        self._note(doc)
        old = self.slot_of.get(doc.memory_id)
        self._add(doc)
        if old is not None:
            self.live[old] = False
            self.dead += 1

    def take_in(self, changes: list[KeywordDoc | str]) -> None:
        """Changes another copy recorded (`changes_since`), in order: a document (new or
        replaced) or a memory id dropped."""
        for change in changes:
            if isinstance(change, str):
                self.drop(change)
            else:
                self.replace(change)

    def scope_mask(self, prefix: tuple[str, ...], pushdown: Filter) -> np.ndarray:
        mask = self.live[: self.size].copy()
        if prefix:
            allowed = [i for ns, i in self.ns_index.items() if is_under(ns, prefix)]
            mask &= np.isin(self.ns_ids[: self.size], allowed)
        if not pushdown.is_empty:
            admitted = [i for i, attrs in enumerate(self.attr_values) if pushdown.matches(lookup_in(attrs))]
            mask &= np.isin(self.attr_ids[: self.size], admitted)
        return mask


class LocalKeywordIndex:
    """`KeywordIndex` for one machine. Thread-safe; writes are durable before they are visible."""

    field_tokens_per_search = None  # a lookup in memory each

    def __init__(self, path: Path) -> None:
        # The in-memory postings: queries share them, writes have them alone (SQLite orders the
        # file's writers).
        self._lock = ReadWriteLock()
        self._tenants: dict[str, _TenantKeywords] = {}
        self._due: list[tuple[str, _TenantKeywords]] = []  # to rebuild (`_compact`), under the lock
        self._db = SqliteFile(path, _SCHEMA + changes_schema("docs"))
        self._changes = IndexChanges(path)  # before loading: a write after it is caught up with later
        self._fields = LocalFieldPostings(path)  # filters' field tokens, in the same file
        self._load_all()

    def _load_all(self) -> None:
        self._tenants = {}
        for tenant in [r[0] for r in self._db.conn().execute("SELECT DISTINCT tenant FROM docs")]:
            self._tenants[tenant] = self._read(tenant)

    def _read(self, tenant: str) -> _TenantKeywords:
        """The tenant's postings as its rows hold them."""
        t = _TenantKeywords()
        for row in self._db.conn().execute(f"SELECT {_ROW} FROM docs WHERE tenant = ?", (tenant,)):
            t.add(_doc(tenant, *row))
        return t

    def _catch_up(self) -> None:
        self._changes.catch_up(self._lock.writing(), self._load_all, self._reload_memories)
        self._rebuild_due()

    def _reload_memories(self, changed: dict[str, set[str]]) -> None:
        for tenant, memory_ids in changed.items():
            t = self._tenants.get(tenant)  # made when a document comes back, not for a delete
            for memory_id in memory_ids:
                row = self._db.conn().execute(f"SELECT {_ROW} FROM docs WHERE tenant = ? AND memory_id = ?",
                                              (tenant, memory_id)).fetchone()
                if row is None:
                    if t is not None:
                        t.drop(memory_id)
                else:  # new, or replaced (`replace_many`): the row is the document as it stands
                    t = self._tenant(tenant)
                    t.replace(_doc(tenant, *row))
            self._compact(tenant)

    def _compact(self, tenant: str) -> None:
        """Under the write lock: a tenant's postings mostly dead are to be rebuilt from the rows
        (`_rebuild_due`, once the lock is released)."""
        t = self._tenants.get(tenant)
        if t is not None and t.changes_since is None and t.dead > max(1024, t.size // 2):
            t.changes_since = []
            self._due.append((tenant, t))

    def _rebuild_due(self) -> None:
        """Rebuild the tenants `_compact` found mostly dead, each outside the lock: the rows are
        read and the copy built while every other query goes on over the postings as they are (one
        tenant's 6.4 million postings took 5.8 s to reload, and under the lock every tenant's
        search waited as long); then, under the lock, the copy takes in what changed meanwhile
        and takes their place."""
        while self._due:  # looked at without the lock first: a query pays nothing for it
            with self._lock.writing():
                if not self._due:
                    return
                tenant, t = self._due.pop()
            fresh: _TenantKeywords | None
            try:
                fresh = self._read(tenant)
            except Exception:  # the postings as they are still answer; the next compaction tries again
                log.exception("rebuilding a tenant's keyword postings failed")
                fresh = None
            with self._lock.writing():
                changes, t.changes_since = t.changes_since or [], None
                if fresh is not None and self._tenants.get(tenant) is t:  # not reloaded or deleted meanwhile
                    fresh.take_in(changes)
                    self._tenants[tenant] = fresh

    def ping(self) -> None:
        self._db.conn().execute("SELECT 1").fetchone()

    def put_many(self, docs: Sequence[KeywordDoc], fields: Sequence[FieldDoc] = ()) -> None:
        if not docs and not fields:
            return
        with self._lock.writing(), self._fields.lock:  # both in one transaction of the file
            fresh = [d for d in {(d.tenant, d.memory_id): d for d in docs}.values()
                     if d.memory_id not in self._tenant(d.tenant).slot_of]
            with self._db.tx() as conn, self._changes.own_write(conn):
                _write_rows(conn, "IGNORE", fresh)
                if fields:
                    self._fields.put_in(conn, fields)
            for doc in fresh:
                self._tenant(doc.tenant).add(doc)
            self._fields.hold(fields)

    def replace_many(self, docs: Sequence[KeywordDoc], fields: Sequence[FieldDoc] = ()) -> None:
        """Each row replaced in one transaction of the file, and the postings swapped under the
        write lock, so neither this process's searches nor another's catching up (`_reload_memories`)
        ever see the version without a document. Writes of one file are serialized, so a delete
        and a replacement of one version apply one after the other, whole."""
        if not docs and not fields:
            return
        with self._lock.writing(), self._fields.lock:
            unique = list({(d.tenant, d.memory_id): d for d in docs}.values())
            with self._db.tx() as conn, self._changes.own_write(conn):
                _write_rows(conn, "REPLACE", unique)
                if fields:
                    self._fields.put_in(conn, fields)
            for doc in unique:
                self._tenant(doc.tenant).replace(doc)
            for tenant in {doc.tenant for doc in unique}:
                self._compact(tenant)
            self._fields.hold(fields)
        self._rebuild_due()

    def delete_many(self, tenant: str, memory_ids: Sequence[str]) -> None:
        if not memory_ids:
            return
        self._fields.delete(tenant, memory_ids)
        with self._lock.writing():
            with self._db.tx() as conn, self._changes.own_write(conn):
                conn.executemany("DELETE FROM docs WHERE tenant = ? AND memory_id = ?",
                                     [(tenant, m) for m in memory_ids])
            t = self._tenants.get(tenant)
            if t is None:
                return
            for memory_id in memory_ids:
                t.drop(memory_id)
            self._compact(tenant)
        self._rebuild_due()

    def delete_tenant(self, tenant: str) -> int:
        self._fields.delete_tenant(tenant)
        with self._lock.writing():
            with self._db.tx() as conn, self._changes.own_write(conn):
                removed = conn.execute("DELETE FROM docs WHERE tenant = ?", (tenant,)).rowcount
            self._tenants.pop(tenant, None)
            return removed

    def query(self, tenant: str, prefix: tuple[str, ...], pushdown: Filter, terms: Sequence[str],
              top_k: int) -> KeywordResult:
        self._catch_up()
        with self._lock.reading():
            t = self._tenants.get(tenant)
            if t is None or t.size == 0:
                return KeywordResult([], 0.0)
            mask = t.scope_mask(prefix, pushdown)
            n_docs = int(mask.sum())
            if n_docs == 0:
                return KeywordResult([], 0.0)
            lengths = t.lengths[: t.size]
            avg_length = float(lengths[mask].mean())
            scores = np.zeros(t.size, dtype=np.float32)
            held = np.zeros(t.size, dtype=np.int32)
            weight = 0.0
            for term in dict.fromkeys(terms):
                postings = t.postings.get(term)
                slots = postings.slots[: postings.size] if postings else np.empty(0, dtype=np.int32)
                in_scope = mask[slots]
                slots = slots[in_scope]
                term_idf = idf(len(slots), n_docs)
                weight += term_idf
                if len(slots):
                    tfs = postings.tfs[: postings.size][in_scope]
                    norm = BM25_K1 * (1.0 - BM25_B + BM25_B * lengths[slots] / avg_length)
                    scores[slots] += term_idf * tfs * (BM25_K1 + 1.0) / (tfs + norm)
                    held[slots] += 1
            matched = np.flatnonzero(scores > 0)
            if len(matched) > top_k:
                matched = matched[np.argpartition(-scores[matched], top_k - 1)[:top_k]]
            order = matched[np.argsort(-scores[matched], kind="stable")]
            hits = [KeywordHit(t.ns_names[t.ns_ids[s]], t.keys[s], t.memory_ids[s],
                               t.versions[s], float(scores[s]), int(held[s])) for s in order]
            return KeywordResult(hits, weight)

    def field_holders(self, tenant: str, prefix: tuple[str, ...], tokens: Sequence[str]) -> FieldHolders:
        return self._fields.holders(tenant, prefix, tokens)

    def memory_ids(self, tenant: str) -> set[str]:
        """Memory ids with a keyword document (for tests and diagnostics)."""
        self._catch_up()
        with self._lock.reading():
            t = self._tenants.get(tenant)
            return set(t.slot_of) if t else set()

    def _tenant(self, tenant: str) -> _TenantKeywords:
        t = self._tenants.get(tenant)
        if t is None:
            t = self._tenants[tenant] = _TenantKeywords()
        return t


def _write_rows(conn: Any, conflict: str, docs: Sequence[KeywordDoc]) -> None:
    """The documents' rows, `conflict` ("IGNORE" or "REPLACE") deciding what a row already there becomes."""
    conn.executemany(
        f"INSERT OR {conflict} INTO docs (tenant, memory_id, ns, key, version, policy_attributes, length, terms) "
        "VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
        [(d.tenant, d.memory_id, encode_namespace(d.namespace), d.key, d.version,
          json.dumps(d.policy_attributes), d.length, json.dumps(d.terms)) for d in docs],
    )
