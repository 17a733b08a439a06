"""The local field-token postings, beside the keyword index in `keywords.db`: each memory
version's blind field tokens are one row (tokens only, never a value or a path), loaded at start
into memory: per memory id, its namespace and tokens; per namespace, the versions whose tokens are
all there. A filter asks about the items it reads, each by namespace and id: a set lookup, and the
item's own tokens, whatever the size of the scope or of the filter's lists.

Thread-safe: writers hold a lock; readers look up without it (a lookup in a dict or set another
thread changes is atomic under the GIL). A version's tokens are put before it is marked indexed,
and it is unmarked before they are removed, so a reader never decides on part of them."""

from __future__ import annotations

import json
import sqlite3
import threading
from collections.abc import Sequence
from typing import Any
from pathlib import Path

from memsvc.adapters.local.index_changes import IndexChanges, changes_schema
from memsvc.adapters.local.sqlite_db import SqliteFile
from memsvc.core.models import FieldDoc
from memsvc.core.namespaces import decode_namespace, encode_namespace

__all__ = ["LocalFieldPostings"]

_LOG = "field_changes"

_SCHEMA = """
CREATE TABLE IF NOT EXISTS field_docs (
    tenant TEXT NOT NULL, memory_id TEXT NOT NULL, ns TEXT NOT NULL, tokens TEXT NOT NULL,
    PRIMARY KEY (tenant, memory_id)
) WITHOUT ROWID;
"""


class _TenantFields:
    def __init__(self) -> None:
        self.indexed: dict[tuple[str, ...], set[str]] = {}  # namespace -> its memory versions with tokens
        self.docs: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {}  # memory id -> (namespace, tokens)

    def add(self, memory_id: str, ns: tuple[str, ...], tokens: list[str]) -> None:
        if memory_id in self.docs:
            return
        self.docs[memory_id] = (ns, tuple(tokens))
        self.indexed.setdefault(ns, set()).add(memory_id)  # last: now its tokens decide

    def drop(self, memory_id: str) -> None:
        found = self.docs.get(memory_id)
        if found is None:
            return
        self.indexed[found[0]].discard(memory_id)  # first: its tokens no longer decide
        del self.docs[memory_id]


class _Holders:
    """`FieldHolders` over a tenant's live docs."""

    def __init__(self, t: _TenantFields | None) -> None:
        self._indexed = t.indexed if t is not None else {}
        self._docs = t.docs if t is not None else {}

    def indexed(self, namespace: tuple[str, ...], memory_id: str) -> bool:
        ids = self._indexed.get(namespace)
        return ids is not None and memory_id in ids

    def tokens_held(self, namespace: tuple[str, ...], memory_id: str) -> tuple[str, ...]:
        doc = self._docs.get(memory_id)  # one tuple, put whole: a reader sees all of a version's tokens
        return doc[1] if doc is not None and doc[0] == namespace else ()


class LocalFieldPostings:
    """Each process holds the postings in memory; with `memsvc serve --workers N` a process catches
    up with the others' writes before it answers (`index_changes`), as the keyword index does."""

    def __init__(self, path: Path) -> None:
        self._lock = threading.Lock()
        self._tenants: dict[str, _TenantFields] = {}
        self._db = SqliteFile(path, _SCHEMA + changes_schema("field_docs", log=_LOG))
        self._changes = IndexChanges(path, log=_LOG)
        self._load_everything()

    def _load(self, query: str, params: tuple[Any, ...]) -> None:
        for tenant, memory_id, ns, tokens in self._db.conn().execute(query, params):
            self._tenant(tenant).add(memory_id, decode_namespace(ns), json.loads(tokens))

    def _catch_up(self) -> None:
        self._changes.catch_up(self._lock, self._load_everything, self._reload_memories)

    def _load_everything(self) -> None:
        self._tenants = {}
        self._load("SELECT tenant, memory_id, ns, tokens FROM field_docs", ())

    def _reload_memories(self, changed: dict[str, set[str]]) -> None:
        for tenant, memory_ids in changed.items():
            for memory_id in memory_ids:  # as the file has it now: dropped, then its row again
                self._tenant(tenant).drop(memory_id)
                self._load("SELECT tenant, memory_id, ns, tokens FROM field_docs WHERE tenant = ? AND memory_id = ?",
                           (tenant, memory_id))

    def _write(self, sql: str, rows: Sequence[tuple[Any, ...]]) -> None:
        with self._db.tx() as conn, self._changes.own_write(conn):
            conn.executemany(sql, rows)

    def put_in(self, conn: sqlite3.Connection, docs: Sequence[FieldDoc]) -> None:
        """Write the docs' rows inside `conn`'s transaction (the keyword index's, on the same
        file); `hold` them once it committed, with this object's `lock` held throughout."""
        with self._changes.own_write(conn):
            conn.executemany("INSERT OR IGNORE INTO field_docs (tenant, memory_id, ns, tokens) VALUES (?, ?, ?, ?)",
                             [(d.tenant, d.memory_id, encode_namespace(d.namespace), json.dumps(sorted(d.tokens)))
                              for d in docs])

    def hold(self, docs: Sequence[FieldDoc]) -> None:
        for d in docs:
            self._tenant(d.tenant).add(d.memory_id, d.namespace, sorted(d.tokens))

    @property
    def lock(self) -> threading.Lock:
        return self._lock

    def delete(self, tenant: str, memory_ids: Sequence[str]) -> None:
        if not memory_ids:
            return
        with self._lock:
            self._write("DELETE FROM field_docs WHERE tenant = ? AND memory_id = ?", [(tenant, m) for m in memory_ids])
            t = self._tenants.get(tenant)
            if t is not None:
                for memory_id in memory_ids:
                    t.drop(memory_id)

    def delete_tenant(self, tenant: str) -> None:
        with self._lock:
            self._write("DELETE FROM field_docs WHERE tenant = ?", [(tenant,)])
            self._tenants.pop(tenant, None)

    def holders(self, tenant: str, prefix: tuple[str, ...], tokens: Sequence[str]) -> _Holders:
        # Nothing to read ahead: each item in scope is looked up as the search reaches it.
        self._catch_up()
        return _Holders(self._tenants.get(tenant))

    def _tenant(self, tenant: str) -> _TenantFields:
        t = self._tenants.get(tenant)
        if t is None:
            t = self._tenants[tenant] = _TenantFields()
        return t
