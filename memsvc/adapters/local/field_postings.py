"""The local field-token postings, beside the keyword index in `keywords.db`: each memory
version's blind field tokens are one row (tokens only, never a value or a path), loaded at start
into per-namespace postings (token -> memory ids), so a filter's tokens under a prefix are a few
set unions. Thread-safe; a version's tokens become visible all at once, after they are durable."""

from __future__ import annotations

import json
import threading
from collections.abc import Sequence
from pathlib import Path

from memsvc.adapters.local.sqlite_db import SqliteFile
from memsvc.core.models import FieldDoc, FieldHolders
from memsvc.core.namespaces import encode_namespace, prefix_range

__all__ = ["LocalFieldPostings"]

_SCHEMA = """
CREATE TABLE IF NOT EXISTS field_docs (
    tenant TEXT NOT NULL, memory_id TEXT NOT NULL, ns TEXT NOT NULL, tokens TEXT NOT NULL,
    PRIMARY KEY (tenant, memory_id)
) WITHOUT ROWID;
"""


class _Namespace:
    __slots__ = ("ids", "postings")

    def __init__(self) -> None:
        self.ids: set[str] = set()  # memory versions with tokens
        self.postings: dict[str, set[str]] = {}  # token -> memory ids


class _TenantFields:
    def __init__(self) -> None:
        self.namespaces: dict[str, _Namespace] = {}  # by encoded namespace
        self.docs: dict[str, tuple[str, list[str]]] = {}  # memory id -> (encoded namespace, tokens)

    def add(self, memory_id: str, ns: str, tokens: list[str]) -> None:
        if memory_id in self.docs:
            return
        self.docs[memory_id] = (ns, tokens)
        n = self.namespaces.get(ns)
        if n is None:
            n = self.namespaces[ns] = _Namespace()
        n.ids.add(memory_id)
        for token in tokens:
            n.postings.setdefault(token, set()).add(memory_id)

    def drop(self, memory_id: str) -> None:
        found = self.docs.pop(memory_id, None)
        if found is None:
            return
        ns, tokens = found
        n = self.namespaces[ns]
        n.ids.discard(memory_id)
        for token in tokens:
            holders = n.postings[token]
            holders.discard(memory_id)
            if not holders:
                del n.postings[token]
        if not n.ids:
            del self.namespaces[ns]


class LocalFieldPostings:
    def __init__(self, path: Path) -> None:
        self._lock = threading.Lock()
        self._tenants: dict[str, _TenantFields] = {}
        self._db = SqliteFile(path, _SCHEMA)
        for tenant, memory_id, ns, tokens in self._db.conn().execute(
                "SELECT tenant, memory_id, ns, tokens FROM field_docs"):
            self._tenant(tenant).add(memory_id, ns, json.loads(tokens))

    def put(self, docs: Sequence[FieldDoc]) -> None:
        if not docs:
            return
        rows = [(d.tenant, d.memory_id, encode_namespace(d.namespace), sorted(d.tokens)) for d in docs]
        with self._lock:
            with self._db.tx() as conn:
                conn.executemany("INSERT OR IGNORE INTO field_docs (tenant, memory_id, ns, tokens) VALUES (?, ?, ?, ?)",
                                 [(t, m, ns, json.dumps(tokens)) for t, m, ns, tokens in rows])
            for tenant, memory_id, ns, tokens in rows:
                self._tenant(tenant).add(memory_id, ns, tokens)

    def delete(self, tenant: str, memory_ids: Sequence[str]) -> None:
        if not memory_ids:
            return
        with self._lock:
            with self._db.tx() as conn:
                conn.executemany("DELETE FROM field_docs WHERE tenant = ? AND memory_id = ?",
                                 [(tenant, m) for m in memory_ids])
            t = self._tenants.get(tenant)
            if t is not None:
                for memory_id in memory_ids:
                    t.drop(memory_id)

    def delete_tenant(self, tenant: str) -> None:
        with self._lock:
            with self._db.tx() as conn:
                conn.execute("DELETE FROM field_docs WHERE tenant = ?", (tenant,))
            self._tenants.pop(tenant, None)

    def holders(self, tenant: str, prefix: tuple[str, ...], tokens: Sequence[str]) -> FieldHolders:
        bounds = prefix_range(prefix)
        indexed: set[str] = set()
        holders: dict[str, set[str]] = {token: set() for token in tokens}
        with self._lock:
            t = self._tenants.get(tenant)
            for ns, n in (t.namespaces.items() if t else ()):
                if bounds is None or ns == bounds[0] or bounds[1] <= ns < bounds[2]:
                    indexed |= n.ids
                    for token, found in holders.items():
                        found.update(n.postings.get(token, ()))
        return FieldHolders(frozenset(indexed), {token: frozenset(found) for token, found in holders.items()})

    def _tenant(self, tenant: str) -> _TenantFields:
        t = self._tenants.get(tenant)
        if t is None:
            t = self._tenants[tenant] = _TenantFields()
        return t
