"""The local item store and change feed: one SQLite file in WAL mode.

Each thread gets its own connection; every write is one `BEGIN IMMEDIATE` transaction that
checks the key's version, writes the row and appends to the change feed, so a change is
recorded exactly when its item is and writers never lose an update.
"""

from __future__ import annotations

import dataclasses
import json
import sqlite3
from collections.abc import Iterator, Sequence
from datetime import datetime
from pathlib import Path
from typing import Any

from memsvc.core.errors import Conflict
from memsvc.core.models import Change, ChangeKind, ItemHead, StoredItem, from_epoch_us, to_epoch_us
from memsvc.adapters.local.sqlite_db import SqliteFile, add_missing_columns
from memsvc.core.layers import layer_of
from memsvc.core.namespaces import SEP, decode_namespace, encode_namespace, prefix_range

__all__ = ["SqliteItemStore"]

_SCHEMA = """
CREATE TABLE IF NOT EXISTS items (
    tenant TEXT NOT NULL,
    ns TEXT NOT NULL,
    key TEXT NOT NULL,
    id TEXT NOT NULL,
    version INTEGER NOT NULL,
    value_ct BLOB,
    attributes_ct BLOB,
    policy_attributes TEXT NOT NULL,
    index_fields TEXT NOT NULL,
    created_at INTEGER NOT NULL,
    updated_at INTEGER NOT NULL,
    expires_at INTEGER,
    deleted TEXT,
    ttl_seconds INTEGER,
    indexed_fields TEXT,
    access_count INTEGER NOT NULL DEFAULT 0,
    last_accessed_at INTEGER,
    index_attempt TEXT,
    index_error TEXT,
    quarantined_at INTEGER,
    valid_start INTEGER,
    valid_end INTEGER,
    PRIMARY KEY (tenant, ns, key)
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS items_by_id ON items (tenant, id);
CREATE INDEX IF NOT EXISTS items_recent ON items (tenant, updated_at DESC, ns, key) WHERE deleted IS NULL;
CREATE INDEX IF NOT EXISTS items_expiry ON items (expires_at) WHERE deleted IS NULL AND expires_at IS NOT NULL;
CREATE INDEX IF NOT EXISTS items_tombstones ON items (tenant, updated_at) WHERE deleted IS NOT NULL;
CREATE INDEX IF NOT EXISTS items_unindexed ON items (tenant, updated_at)
    WHERE deleted IS NULL AND indexed_fields IS NULL AND index_fields != 'false';
-- Live items and their sealed bytes per tenant and layer ('' outside every layer), kept by `write`
-- in the item's transaction, so `GET /metrics` reads a few rows instead of scanning the items.
CREATE TABLE IF NOT EXISTS usage (
    tenant TEXT NOT NULL,
    layer TEXT NOT NULL,
    items INTEGER NOT NULL,
    bytes INTEGER NOT NULL,
    PRIMARY KEY (tenant, layer)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS changes (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    tenant TEXT NOT NULL,
    kind TEXT NOT NULL,
    occurred_at INTEGER NOT NULL,
    new TEXT NOT NULL,
    old TEXT
);
CREATE INDEX IF NOT EXISTS changes_by_tenant ON changes (tenant, seq);
CREATE TABLE IF NOT EXISTS consumers (name TEXT PRIMARY KEY, offset INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS lanes (
    consumer TEXT NOT NULL, tenant TEXT NOT NULL, offset INTEGER NOT NULL,
    PRIMARY KEY (consumer, tenant)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS dead_letters (
    consumer TEXT NOT NULL, seq INTEGER NOT NULL, tenant TEXT NOT NULL,
    change TEXT NOT NULL, error TEXT NOT NULL, parked_at INTEGER NOT NULL,
    PRIMARY KEY (consumer, seq)
);
CREATE TABLE IF NOT EXISTS data_keys (tenant TEXT PRIMARY KEY, wrapped BLOB NOT NULL);
CREATE TABLE IF NOT EXISTS config (
    tenant TEXT NOT NULL, name TEXT NOT NULL, doc TEXT NOT NULL, PRIMARY KEY (tenant, name)
);
"""

_COLUMNS = (
    "tenant, ns, key, id, version, value_ct, attributes_ct, policy_attributes, index_fields, "
    "created_at, updated_at, expires_at, deleted, ttl_seconds, indexed_fields, access_count, last_accessed_at, "
    "index_attempt, index_error, quarantined_at, valid_start, valid_end"
)
_COLUMN_COUNT = len(_COLUMNS.split(","))
_QUALIFIED_COLUMNS = ", ".join(f"items.{c.strip()}" for c in _COLUMNS.split(","))
_PAIRS_PER_STATEMENT = 400  # two bound values each, well under SQLite's limit of 32,766
# Columns added after the first release: a data directory made before them gets them at open.
_ADDED_COLUMNS = {"access_count": "INTEGER NOT NULL DEFAULT 0", "last_accessed_at": "INTEGER",
                  "index_attempt": "TEXT", "index_error": "TEXT", "quarantined_at": "INTEGER",
                  "valid_start": "INTEGER", "valid_end": "INTEGER"}
# Made after the columns they name exist (a data directory from before them gets them at open).
# The valid-time ones answer `time_span` in O(log n); rows written before the bounds have none.
_VALID_TIME_INDEXES = (
    "CREATE INDEX IF NOT EXISTS items_valid_start ON items (tenant, valid_start) WHERE deleted IS NULL",
    "CREATE INDEX IF NOT EXISTS items_valid_end ON items (tenant, valid_end) "
    "WHERE deleted IS NULL AND valid_end IS NOT NULL",
    "CREATE INDEX IF NOT EXISTS items_unbounded ON items (tenant) WHERE deleted IS NULL AND valid_start IS NULL",
)
_QUARANTINE_INDEX = ("CREATE INDEX IF NOT EXISTS items_quarantined ON items (tenant, quarantined_at, ns, key) "
                     "WHERE index_error IS NOT NULL")


class SqliteItemStore:
    """`ItemStore` and `ChangeFeed` over one SQLite database file."""

    def __init__(self, path: Path, *, consumers: Sequence[str] = ("indexer",)) -> None:
        self._db = SqliteFile(path, _SCHEMA)
        self._conn = self._db.conn
        self._tx = self._db.tx
        with self._tx() as conn:
            add_missing_columns(conn, "items", _ADDED_COLUMNS)
            conn.execute(_QUARANTINE_INDEX)
            for index in _VALID_TIME_INDEXES:
                conn.execute(index)
        for name in consumers:
            self._conn().execute("INSERT OR IGNORE INTO consumers (name, offset) VALUES (?, 0)", (name,))
        with self._tx() as conn:
            # A row exists for every layer holding a live item, so an empty table means either no
            # live item or a database from before the table: counting them again is right in both.
            if conn.execute("SELECT 1 FROM usage LIMIT 1").fetchone() is None:
                totals: dict[tuple[str, str], list[int]] = {}
                for tenant, ns, items, size in conn.execute(f"SELECT tenant, ns, count(*), sum({_SEALED_BYTES}) "
                                                            "FROM items WHERE deleted IS NULL GROUP BY tenant, ns"):
                    total = totals.setdefault((tenant, _layer(ns.split(SEP, 3))), [0, 0])
                    total[0] += items
                    total[1] += size
                conn.executemany("INSERT INTO usage (tenant, layer, items, bytes) VALUES (?, ?, ?, ?)",
                                 [(tenant, layer, items, size) for (tenant, layer), (items, size) in totals.items()])

    def ping(self) -> None:
        self._conn().execute("SELECT 1").fetchone()

    # -- items -------------------------------------------------------------------------------

    def get(self, tenant: str, namespace: tuple[str, ...], key: str) -> StoredItem | None:
        row = self._conn().execute(
            f"SELECT {_COLUMNS} FROM items WHERE tenant = ? AND ns = ? AND key = ?",
            (tenant, encode_namespace(namespace), key),
        ).fetchone()
        return _item(row) if row else None

    def get_many(self, tenant, refs):
        # One statement per chunk, joining the wanted (ns, key) pairs to the primary key: a
        # point lookup each (an OR-chain of pairs would make SQLite scan the tenant).
        conn = self._conn()
        wanted = list(dict.fromkeys((encode_namespace(ns), key) for ns, key in refs))
        out: dict[tuple[tuple[str, ...], str], StoredItem] = {}
        for start in range(0, len(wanted), _PAIRS_PER_STATEMENT):
            chunk = wanted[start : start + _PAIRS_PER_STATEMENT]
            pairs = ", ".join(["(?, ?)"] * len(chunk))
            rows = conn.execute(
                f"WITH wanted(ns, key) AS (VALUES {pairs}) SELECT {_QUALIFIED_COLUMNS} FROM wanted "
                "JOIN items ON items.tenant = ? AND items.ns = wanted.ns AND items.key = wanted.key",
                [*(v for pair in chunk for v in pair), tenant],
            ).fetchall()
            for row in rows:
                item = _item(row)
                out[(item.namespace, item.key)] = item
        return out

    def time_span(self, tenant: str) -> tuple[datetime, datetime] | None:
        conn = self._conn()  # one aggregate a statement: each is then one step down its index
        if conn.execute("SELECT 1 FROM items INDEXED BY items_unbounded WHERE tenant = ? AND deleted IS NULL "
                        "AND valid_start IS NULL LIMIT 1", (tenant,)).fetchone() is not None:
            return None
        first = conn.execute("SELECT MIN(valid_start) FROM items WHERE tenant = ? AND deleted IS NULL",
                             (tenant,)).fetchone()[0]
        if first is None:
            return None
        last = max(conn.execute("SELECT MAX(valid_start) FROM items WHERE tenant = ? AND deleted IS NULL",
                                (tenant,)).fetchone()[0],
                   conn.execute("SELECT MAX(valid_end) FROM items WHERE tenant = ? AND deleted IS NULL "
                                "AND valid_end IS NOT NULL", (tenant,)).fetchone()[0] or 0)
        return from_epoch_us(first), from_epoch_us(last)

    def get_by_id(self, tenant: str, memory_id: str) -> StoredItem | None:
        row = self._conn().execute(
            f"SELECT {_COLUMNS} FROM items WHERE tenant = ? AND id = ?", (tenant, memory_id)
        ).fetchone()
        return _item(row) if row else None

    def write(self, item: StoredItem, *, kind: ChangeKind, old: StoredItem | None) -> None:
        with self._tx() as conn:
            self.write_in(conn, item, kind=kind, old=old)

    def write_many(self, writes: Sequence[tuple[StoredItem, ChangeKind, StoredItem | None]]
                   ) -> list[Exception | None]:
        out: list[Exception | None] = []
        with self._tx() as conn:  # a savepoint per write: one that conflicts leaves the others
            for item, kind, old in writes:
                conn.execute("SAVEPOINT one_write")
                try:
                    self.write_in(conn, item, kind=kind, old=old)
                    out.append(None)
                except Conflict as exc:
                    conn.execute("ROLLBACK TO one_write")
                    out.append(exc)
                conn.execute("RELEASE one_write")
        return out

    def transaction(self):
        """A `BEGIN IMMEDIATE` transaction on this database, for a store that must write items
        together with rows of its own (the session store's message appends)."""
        return self._tx()

    def connection(self) -> sqlite3.Connection:
        """This thread's connection to the database, for reads of such a store's own rows."""
        return self._conn()

    def get_in(self, conn: sqlite3.Connection, tenant: str, namespace: tuple[str, ...], key: str) -> StoredItem | None:
        """`get`, inside the caller's transaction."""
        row = conn.execute(
            f"SELECT {_COLUMNS} FROM items WHERE tenant = ? AND ns = ? AND key = ?",
            (tenant, encode_namespace(namespace), key),
        ).fetchone()
        return _item(row) if row else None

    def write_in(self, conn: sqlite3.Connection, item: StoredItem, *, kind: ChangeKind,
                 old: StoredItem | None) -> None:
        """`write`, inside the caller's transaction."""
        ns = encode_namespace(item.namespace)
        row = conn.execute(
            f"SELECT {_COLUMNS} FROM items WHERE tenant = ? AND ns = ? AND key = ?", (item.tenant, ns, item.key)
        ).fetchone()
        # The change records the row as it really was (like a stream's OldImage): an index
        # mark made after the writer read it still reaches the consumers.
        before = _item(row) if row else None
        current = before.version if before else None
        expected = old.version if old else None
        if current != expected:
            raise Conflict(
                "the memory changed while this write was in flight",
                details={"expected_version": expected, "current_version": current},
            )
        conn.execute(f"INSERT OR REPLACE INTO items ({_COLUMNS}) VALUES ({', '.join('?' * _COLUMN_COUNT)})", _row(item))
        _count_usage(conn, before, item)
        _record_change(conn, kind, item.updated_at, item, before)

    def items_after(self, tenant: str, namespace: tuple[str, ...], after_key: str, limit: int) -> list[StoredItem]:
        """Live items of one namespace with keys above `after_key`, in key order (a session's messages)."""
        rows = self._conn().execute(
            f"SELECT {_COLUMNS} FROM items WHERE tenant = ? AND ns = ? AND key > ? AND deleted IS NULL "
            "ORDER BY key LIMIT ?",
            (tenant, encode_namespace(namespace), after_key, limit),
        ).fetchall()
        return [_item(r) for r in rows]

    def mark_indexed(self, marks):
        if not marks:
            return []
        with self._tx() as conn:  # one transaction for a batch: one fsync, whatever its size
            return [conn.execute(
                "UPDATE items SET indexed_fields = ?, index_attempt = NULL WHERE tenant = ? AND ns = ? AND key = ? "
                "AND version = ? AND deleted IS NULL AND index_error IS NULL",
                (json.dumps(list(fields)), item.tenant, encode_namespace(item.namespace), item.key, item.version),
            ).rowcount == 1 for item, fields in marks]

    def reset_indexing(self) -> list[str]:
        """Mark every live item unindexed (`memsvc reindex`, the server stopped); the tenants that
        hold any."""
        with self._tx() as conn:
            conn.execute("UPDATE items SET indexed_fields = NULL, index_attempt = NULL "
                         "WHERE deleted IS NULL AND indexed_fields IS NOT NULL")
            return [t for (t,) in conn.execute("SELECT DISTINCT tenant FROM items WHERE deleted IS NULL")]

    def pending_index(self, tenant, now):
        return self._conn().execute(
            f"SELECT count(*) FROM items WHERE tenant = ? AND {_PENDING} AND (expires_at IS NULL OR expires_at > ?)",
            (tenant, to_epoch_us(now)),
        ).fetchone()[0]

    def unindexed(self, tenant, now, limit):
        rows = self._conn().execute(
            f"SELECT {_COLUMNS} FROM items WHERE tenant = ? AND {_PENDING} AND (expires_at IS NULL OR expires_at > ?) "
            "ORDER BY updated_at LIMIT ?",
            (tenant, to_epoch_us(now), limit),
        ).fetchall()
        return [_item(r) for r in rows]

    # -- indexing attempts and quarantine ----------------------------------------------------------

    def begin_attempts(self, items, attempt):
        self._set_attempts(items, attempt)

    def end_attempts(self, items):
        self._set_attempts(items, None)

    def _set_attempts(self, items: Sequence[StoredItem], attempt: str | None) -> None:
        if not items:
            return
        with self._tx() as conn:  # one transaction for a batch: one fsync, whatever its size
            conn.executemany(
                "UPDATE items SET index_attempt = ? WHERE tenant = ? AND ns = ? AND key = ? AND id = ? "
                "AND deleted IS NULL",
                [(attempt, i.tenant, encode_namespace(i.namespace), i.key, i.id) for i in items],
            )

    def quarantine(self, item, reason, at):
        return self._set_quarantine(item, reason, at, was_quarantined=False)

    def release(self, item):
        return self._set_quarantine(item, None, None, was_quarantined=True)

    def _set_quarantine(self, item: StoredItem, reason: str | None, at: datetime | None, *,
                        was_quarantined: bool) -> bool:
        """Quarantine the version (`reason`, `at`) or release it (None, None), with its change
        (`index_failed`, `index_retry`) in the same transaction; False if the key moved on."""
        with self._tx() as conn:
            before = self._current_in(conn, item, quarantined=was_quarantined)
            if before is None:
                return False
            after = dataclasses.replace(before, index_attempt=None, index_error=reason, quarantined_at=at)
            conn.execute(
                "UPDATE items SET index_attempt = NULL, index_error = ?, quarantined_at = ? "
                "WHERE tenant = ? AND ns = ? AND key = ?",
                (reason, None if at is None else to_epoch_us(at), item.tenant, encode_namespace(item.namespace),
                 item.key),
            )
            _record_change(conn, "index_retry" if was_quarantined else "index_failed", at or before.updated_at,
                           after, before)
            return True

    def _current_in(self, conn: sqlite3.Connection, item: StoredItem, *, quarantined: bool) -> StoredItem | None:
        """The key's row, inside the caller's transaction, if it is still `item`'s version, live and
        quarantined or not as asked."""
        row = self.get_in(conn, item.tenant, item.namespace, item.key)
        if row is None or row.id != item.id or row.deleted is not None or (row.index_error is not None) != quarantined:
            return None
        return row

    def quarantined(self, tenant, now, limit):
        live = "tenant = ? AND deleted IS NULL AND index_error IS NOT NULL AND (expires_at IS NULL OR expires_at > ?)"
        conn, params = self._conn(), (tenant, to_epoch_us(now))
        count = conn.execute(f"SELECT count(*) FROM items WHERE {live}", params).fetchone()[0]
        rows = conn.execute(f"SELECT {_COLUMNS} FROM items WHERE {live} ORDER BY quarantined_at, ns, key LIMIT ?",
                            (*params, limit)).fetchall()
        return count, [_item(r) for r in rows]

    def record_accesses(self, tenant, accesses, at):
        """Add each count to the key's row if the row still holds that memory (live); one
        transaction, no new version, no change record."""
        with self._tx() as conn:
            conn.executemany(
                "UPDATE items SET access_count = access_count + ?, "
                "last_accessed_at = max(coalesce(last_accessed_at, 0), ?) "
                "WHERE tenant = ? AND ns = ? AND key = ? AND id = ? AND deleted IS NULL",
                [(count, to_epoch_us(at), tenant, encode_namespace(ns), key, memory_id)
                 for ns, key, memory_id, count in accesses],
            )

    def refresh_expiry(self, tenant, namespace, key, *, version, expires_at):
        with self._tx() as conn:
            cur = conn.execute(
                "UPDATE items SET expires_at = ? WHERE tenant = ? AND ns = ? AND key = ? AND version = ? "
                "AND deleted IS NULL AND expires_at IS NOT NULL",
                (to_epoch_us(expires_at), tenant, encode_namespace(namespace), key, version),
            )
            return cur.rowcount == 1

    def scan_live(self, tenant, prefix, now, *, page_size=200):
        where, params = _live_under(tenant, prefix, now)
        cursor: tuple[int, str, str] | None = None
        conn = self._conn()
        while True:
            page_where, page_params = where, list(params)
            if cursor:
                page_where += " AND (updated_at < ? OR (updated_at = ? AND (ns, key) > (?, ?)))"
                page_params += [cursor[0], cursor[0], cursor[1], cursor[2]]
            rows = conn.execute(
                f"SELECT {_COLUMNS} FROM items WHERE {page_where} "
                "ORDER BY updated_at DESC, ns, key LIMIT ?",
                [*page_params, page_size],
            ).fetchall()
            for row in rows:
                yield _item(row)
            if len(rows) < page_size:
                return
            last = rows[-1]
            cursor = (last[10], last[1], last[2])

    def live_heads(self, tenant, prefix, now):
        live = "tenant = ? AND deleted IS NULL AND (expires_at IS NULL OR expires_at > ?)"
        where, params = live, [tenant, to_epoch_us(now)]
        bounds = prefix_range(prefix)
        if bounds is not None:
            # The primary key's range first (`_live_under`'s OR hides it from SQLite's planner),
            # then the exact rule.
            exact, lo, hi = bounds
            where += " AND ns >= ? AND ns < ? AND (ns = ? OR ns >= ?)"
            params += [exact, hi, exact, lo]
        conn = self._conn()
        columns = "id, ns, key, updated_at, policy_attributes"
        rows = conn.execute(f"SELECT {columns} FROM items WHERE {where} LIMIT ?", [*params, _FEW_HEADS + 1]).fetchall()
        if len(rows) <= _FEW_HEADS:
            # A few: read by the key range and sorted here (the recency index would walk the
            # tenant's every item to find them).
            rows.sort(key=lambda r: (-r[3], r[1], r[2]))
        else:
            # Many: walk the recency index, newest first, a page at a time; a search stops early.
            where, params = _live_under(tenant, prefix, now)
            rows = _paged(conn.execute(f"SELECT {columns} FROM items WHERE {where} "
                                       "ORDER BY updated_at DESC, ns, key", params))
        attributes: dict[str, dict[str, Any]] = {}  # each distinct JSON parsed once, its dict shared
        for memory_id, ns, key, _, pa in rows:
            if (parsed := attributes.get(pa)) is None:
                parsed = attributes[pa] = json.loads(pa)
            yield ItemHead(memory_id, decode_namespace(ns), key, parsed)

    def namespaces_after(self, tenant, prefix, after, limit):
        where, params = "tenant = ? AND ns > ?", [tenant, encode_namespace(after) if after else ""]
        bounds = prefix_range(prefix)
        if bounds is not None:
            where += " AND (ns = ? OR (ns >= ? AND ns < ?))"
            params += list(bounds)
        rows = self._conn().execute(f"SELECT DISTINCT ns FROM items WHERE {where} ORDER BY ns LIMIT ?",
                                    (*params, limit)).fetchall()
        return [decode_namespace(r[0]) for r in rows]

    def list_namespaces(self, tenant, prefix, now, *, keep=None):
        where, params = _live_under(tenant, prefix, now)
        rows = self._conn().execute(f"SELECT DISTINCT ns FROM items WHERE {where}", params).fetchall()
        # Sorted as tuples of segments: the stored form sorts by their percent-encoding.
        for ns in sorted(decode_namespace(r[0]) for r in rows):
            if keep is None or keep(ns):
                yield ns

    def count_live(self, tenant, namespace, now, cap):
        row = self._conn().execute(
            "SELECT COUNT(*) FROM (SELECT 1 FROM items WHERE tenant = ? AND ns = ? AND deleted IS NULL "
            "AND (expires_at IS NULL OR expires_at > ?) LIMIT ?)",
            (tenant, encode_namespace(namespace), to_epoch_us(now), cap)).fetchone()
        return row[0]

    def storage_usage(self) -> list[tuple[str, str | None, int, int]]:
        """(tenant, layer or None outside every layer, live items, their sealed bytes: value and
        attributes ciphertext), for `GET /metrics`. An item past its expiry counts until the
        sweeper tombstones it (within a second, by default)."""
        rows = self._conn().execute("SELECT tenant, layer, items, bytes FROM usage").fetchall()
        return [(tenant, layer or None, items, size) for tenant, layer, items, size in rows]

    def expired(self, now: datetime, limit: int) -> list[StoredItem]:
        rows = self._conn().execute(
            f"SELECT {_COLUMNS} FROM items WHERE deleted IS NULL AND expires_at IS NOT NULL "
            "AND expires_at <= ? ORDER BY expires_at LIMIT ?",
            (to_epoch_us(now), limit),
        ).fetchall()
        return [_item(r) for r in rows]

    def purge_tombstones(self, tenant: str | None, before: datetime) -> int:
        with self._tx() as conn:
            if tenant is None:
                cur = conn.execute(
                    "DELETE FROM items WHERE deleted IS NOT NULL AND updated_at < ?", (to_epoch_us(before),)
                )
            else:
                cur = conn.execute(
                    "DELETE FROM items WHERE tenant = ? AND deleted IS NOT NULL AND updated_at < ?",
                    (tenant, to_epoch_us(before)),
                )
            return cur.rowcount

    def tenants_with_tombstones(self) -> list[str]:
        rows = self._conn().execute("SELECT DISTINCT tenant FROM items WHERE deleted IS NOT NULL").fetchall()
        return [r[0] for r in rows]

    # -- key material and per-tenant configuration ----------------------------------------------

    def get_wrapped_key(self, tenant: str) -> bytes | None:
        row = self._conn().execute("SELECT wrapped FROM data_keys WHERE tenant = ?", (tenant,)).fetchone()
        return bytes(row[0]) if row else None

    def put_wrapped_key_if_absent(self, tenant: str, wrapped: bytes) -> bytes:
        with self._tx() as conn:
            conn.execute("INSERT OR IGNORE INTO data_keys (tenant, wrapped) VALUES (?, ?)", (tenant, wrapped))
            return bytes(conn.execute("SELECT wrapped FROM data_keys WHERE tenant = ?", (tenant,)).fetchone()[0])

    def get_config(self, tenant: str, name: str) -> dict[str, Any] | None:
        row = self._conn().execute(
            "SELECT doc FROM config WHERE tenant = ? AND name = ?", (tenant, name)
        ).fetchone()
        return json.loads(row[0]) if row else None

    def put_config(self, tenant: str, name: str, doc: dict[str, Any]) -> None:
        with self._tx() as conn:
            conn.execute(
                "INSERT OR REPLACE INTO config (tenant, name, doc) VALUES (?, ?, ?)", (tenant, name, json.dumps(doc))
            )

    def swap_config(self, tenant: str, name: str, doc: dict[str, Any], *, expected: dict[str, Any] | None) -> bool:
        with self._tx() as conn:  # BEGIN IMMEDIATE: no writer between the read and the write
            row = conn.execute("SELECT doc FROM config WHERE tenant = ? AND name = ?", (tenant, name)).fetchone()
            if (json.loads(row[0]) if row else None) != expected:
                return False
            conn.execute(
                "INSERT OR REPLACE INTO config (tenant, name, doc) VALUES (?, ?, ?)", (tenant, name, json.dumps(doc))
            )
            return True

    # -- change feed -----------------------------------------------------------------------------

    # Each tenant's changes are a lane of their own, acknowledged on their own (`lanes`), so that a
    # consumer can take turns between tenants (`memsvc.service.feed`). A consumer's row in
    # `consumers` is the floor under all its lanes: what it acknowledged before lanes existed.

    def lanes(self, consumer: str) -> list[str]:
        """The tenants with changes the consumer has not acknowledged, in name order. One indexed
        step per tenant that has rows in the feed (acknowledged rows are pruned every second)."""
        conn = self._conn()
        floor, pending = self._offset(conn, consumer), []
        for tenant in self._feed_tenants(conn):
            after = self._lane_offset(conn, consumer, tenant, floor)
            if conn.execute("SELECT 1 FROM changes WHERE tenant = ? AND seq > ? LIMIT 1", (tenant, after)).fetchone():
                pending.append(tenant)
        return pending

    def read(self, consumer: str, limit: int, *, tenant: str | None = None,
             max_weight: int | None = None) -> list[Change]:
        """The next `limit` changes of the tenant's lane (None: of every lane, in feed order), cut
        after the first change that brings their `weight` to `max_weight`."""
        if tenant is None:
            merged = sorted((c for t in self.lanes(consumer) for c in self.read(consumer, limit, tenant=t)),
                            key=lambda c: c.seq)
            return merged[:limit]
        conn = self._conn()
        rows = conn.execute(  # stepped lazily: the rows after the cut are never read
            "SELECT seq, kind, occurred_at, new, old FROM changes WHERE tenant = ? AND seq > ? ORDER BY seq LIMIT ?",
            (tenant, self._lane_offset(conn, consumer, tenant, self._offset(conn, consumer)), limit),
        )
        changes, weight = [], 0
        for seq, kind, at, new, old in rows:
            changes.append(Change(
                seq=seq,
                kind=kind,
                occurred_at=from_epoch_us(at),
                new=StoredItem.from_record(json.loads(new)),
                old=StoredItem.from_record(json.loads(old)) if old else None,
            ))
            weight += changes[-1].weight
            if max_weight is not None and weight >= max_weight:
                break
        return changes

    def ack(self, consumer: str, tenant: str, upto_seq: int) -> None:
        with self._tx() as conn:
            conn.execute(
                "INSERT INTO lanes (consumer, tenant, offset) VALUES (?, ?, ?) "
                "ON CONFLICT (consumer, tenant) DO UPDATE SET offset = max(offset, excluded.offset)",
                (consumer, tenant, upto_seq),
            )

    def park(self, consumer: str, change: Change, error: str) -> None:
        record = {
            "kind": change.kind,
            "new": change.new.to_record(),
            "old": change.old.to_record() if change.old else None,
        }
        with self._tx() as conn:
            conn.execute(
                "INSERT OR REPLACE INTO dead_letters (consumer, seq, tenant, change, error, parked_at) "
                "VALUES (?, ?, ?, ?, ?, ?)",
                (consumer, change.seq, change.tenant, json.dumps(record), error[:2000], to_epoch_us(change.occurred_at)),
            )

    def dead_letters(self, consumer: str) -> list[tuple[int, str]]:
        return self._conn().execute(
            "SELECT seq, error FROM dead_letters WHERE consumer = ? ORDER BY seq", (consumer,)
        ).fetchall()

    def prune_changes(self) -> int:
        """Drop changes every consumer has acknowledged."""
        with self._tx() as conn:
            floors = dict(conn.execute("SELECT name, offset FROM consumers").fetchall())
            if not floors:
                return 0
            pruned = 0
            for tenant in self._feed_tenants(conn):
                low = min(self._lane_offset(conn, name, tenant, floor) for name, floor in floors.items())
                pruned += conn.execute("DELETE FROM changes WHERE tenant = ? AND seq <= ?", (tenant, low)).rowcount
            return pruned

    @staticmethod
    def _feed_tenants(conn: sqlite3.Connection) -> Iterator[str]:
        """The tenants with rows in the feed, in name order: an index seek each (`changes_by_tenant`)."""
        tenant = conn.execute("SELECT min(tenant) FROM changes").fetchone()[0]
        while tenant is not None:
            yield tenant
            tenant = conn.execute("SELECT min(tenant) FROM changes WHERE tenant > ?", (tenant,)).fetchone()[0]

    @staticmethod
    def _offset(conn: sqlite3.Connection, consumer: str) -> int:
        row = conn.execute("SELECT offset FROM consumers WHERE name = ?", (consumer,)).fetchone()
        return row[0] if row else 0

    @staticmethod
    def _lane_offset(conn: sqlite3.Connection, consumer: str, tenant: str, floor: int) -> int:
        row = conn.execute("SELECT offset FROM lanes WHERE consumer = ? AND tenant = ?", (consumer, tenant)).fetchone()
        return max(floor, row[0]) if row else floor


_SEALED_BYTES = "coalesce(length(value_ct), 0) + coalesce(length(attributes_ct), 0)"
# A live version to be indexed and not yet (nor set aside): what `items_unindexed` holds, less quarantine.
_PENDING = "deleted IS NULL AND indexed_fields IS NULL AND index_fields != 'false' AND index_error IS NULL"


def _record_change(conn: sqlite3.Connection, kind: ChangeKind, at: datetime, new: StoredItem,
                   old: StoredItem | None) -> None:
    """Append to the change feed, in the caller's transaction."""
    conn.execute(
        "INSERT INTO changes (tenant, kind, occurred_at, new, old) VALUES (?, ?, ?, ?, ?)",
        (new.tenant, kind, to_epoch_us(at), json.dumps(new.to_record()), json.dumps(old.to_record()) if old else None),
    )


def _count_usage(conn: sqlite3.Connection, before: StoredItem | None, after: StoredItem) -> None:
    """Move the layer's live count and sealed bytes from what `before` held to what `after` holds
    (the same key, so the same layer)."""
    items = _usage(after)[0] - _usage(before)[0]
    size = _usage(after)[1] - _usage(before)[1]
    if items or size:
        _add_usage(conn, after.tenant, _layer(after.namespace), items, size)


def _add_usage(conn: sqlite3.Connection, tenant: str, layer: str, items: int, size: int) -> None:
    conn.execute(
        "INSERT INTO usage (tenant, layer, items, bytes) VALUES (?, ?, ?, ?) ON CONFLICT (tenant, layer) "
        "DO UPDATE SET items = items + excluded.items, bytes = bytes + excluded.bytes",
        (tenant, layer, items, size),
    )
    if items < 0:
        conn.execute("DELETE FROM usage WHERE tenant = ? AND layer = ? AND items <= 0", (tenant, layer))


def _layer(namespace: Sequence[str]) -> str:
    """The layer's name, '' outside every layer. A layer is decided by segments 0 and 2 and the
    depth up to 4, whose words percent-encoding leaves as they are: a stored namespace's first
    four segments (`ns.split(SEP, 3)`) decide it as well as the decoded namespace."""
    layer = layer_of(namespace)
    return layer.name if layer is not None else ""


def _usage(item: StoredItem | None) -> tuple[int, int]:
    if item is None or item.deleted is not None:
        return 0, 0
    return 1, len(item.value_ct or b"") + len(item.attributes_ct or b"")


# Up to this many items in scope, `live_heads` reads them all by key range and sorts them.
_FEW_HEADS = 2_000


def _paged(cursor: sqlite3.Cursor, size: int = 256) -> Iterator[tuple[Any, ...]]:
    while rows := cursor.fetchmany(size):
        yield from rows


def _live_under(tenant: str, prefix: tuple[str, ...], now: datetime) -> tuple[str, list[Any]]:
    where = "tenant = ? AND deleted IS NULL AND (expires_at IS NULL OR expires_at > ?)"
    params: list[Any] = [tenant, to_epoch_us(now)]
    bounds = prefix_range(prefix)
    if bounds is not None:
        exact, lo, hi = bounds
        where += " AND (ns = ? OR (ns >= ? AND ns < ?))"
        params += [exact, lo, hi]
    return where, params


def _row(item: StoredItem) -> tuple[Any, ...]:
    return (
        item.tenant,
        encode_namespace(item.namespace),
        item.key,
        item.id,
        item.version,
        item.value_ct,
        item.attributes_ct,
        json.dumps(item.policy_attributes),
        json.dumps(item.index_fields),
        to_epoch_us(item.created_at),
        to_epoch_us(item.updated_at),
        to_epoch_us(item.expires_at) if item.expires_at else None,
        item.deleted,
        item.ttl_seconds,
        json.dumps(list(item.indexed_fields)) if item.indexed_fields is not None else None,
        item.access_count,
        to_epoch_us(item.last_accessed_at) if item.last_accessed_at else None,
        None,  # a write starts its version afresh: no attempt, no quarantine
        None,
        None,
        to_epoch_us(item.valid_start) if item.valid_start else None,
        to_epoch_us(item.valid_end) if item.valid_end else None,
    )


def _item(row: Sequence[Any]) -> StoredItem:
    return StoredItem(
        tenant=row[0],
        namespace=decode_namespace(row[1]),
        key=row[2],
        id=row[3],
        version=row[4],
        value_ct=bytes(row[5]) if row[5] is not None else None,
        attributes_ct=bytes(row[6]) if row[6] is not None else None,
        policy_attributes=json.loads(row[7]),
        index_fields=json.loads(row[8]),
        created_at=from_epoch_us(row[9]),
        updated_at=from_epoch_us(row[10]),
        expires_at=from_epoch_us(row[11]) if row[11] is not None else None,
        deleted=row[12],
        ttl_seconds=row[13],
        indexed_fields=tuple(json.loads(row[14])) if row[14] is not None else None,
        access_count=row[15],
        last_accessed_at=from_epoch_us(row[16]) if row[16] is not None else None,
        index_attempt=row[17],
        index_error=row[18],
        quarantined_at=from_epoch_us(row[19]) if row[19] is not None else None,
        valid_start=from_epoch_us(row[20]) if row[20] is not None else None,
        valid_end=from_epoch_us(row[21]) if row[21] is not None else None,
    )
