"""The local event timeline: its own SQLite file (`events.db`), so recording events never
queues behind item writes.

`record` stamps and inserts a batch in one write transaction, and stamps only grow, so a reader
walking (`stamp`, `id`) order page by page can never be overtaken by an event inserted behind it.
`restore` (an import's carried history) stamps the same way, from each event's own stamp.
"""

from __future__ import annotations

import dataclasses
import json
import sqlite3
from collections.abc import Callable, Iterator, Mapping, Sequence
from datetime import datetime
from pathlib import Path
from typing import Any

from memsvc.adapters.local.sqlite_db import SqliteFile, add_missing_columns
from memsvc.core.models import TimelineEvent, from_epoch_us, to_epoch_us
from memsvc.core.namespaces import SEP, decode_namespace, encode_namespace, prefix_range
from memsvc.core.timeline import KINDS, VERSION_KINDS, ScanTooWide, next_stamp

__all__ = ["SqliteEventLog"]

_IDS_PER_QUERY = 500  # an `IN` list's ids per query (SQLite binds at most 32,766 parameters)

_SCHEMA = """
CREATE TABLE IF NOT EXISTS events (
    tenant TEXT NOT NULL,
    stamp INTEGER NOT NULL,
    id TEXT NOT NULL,
    kind TEXT NOT NULL,
    root TEXT NOT NULL,
    ns TEXT NOT NULL,
    key TEXT NOT NULL,
    memory_id TEXT NOT NULL,
    version INTEGER NOT NULL,
    changed_at INTEGER NOT NULL,
    expires_at INTEGER,
    policy_attributes TEXT NOT NULL,
    value_ct BLOB,
    attributes_ct BLOB,
    action TEXT,
    reason TEXT,
    PRIMARY KEY (tenant, stamp, id)
) WITHOUT ROWID;
CREATE UNIQUE INDEX IF NOT EXISTS events_by_id ON events (tenant, id);
CREATE INDEX IF NOT EXISTS events_by_root ON events (tenant, root, stamp, id);
CREATE INDEX IF NOT EXISTS events_by_key ON events (tenant, ns, key, stamp, id);
CREATE TABLE IF NOT EXISTS clocks (tenant TEXT PRIMARY KEY, last INTEGER NOT NULL);
"""

_COLUMNS = (
    "tenant, stamp, id, kind, root, ns, key, memory_id, version, changed_at, expires_at, "
    "policy_attributes, value_ct, attributes_ct, action, reason"
)
_INSERT_EVENT = f"INSERT INTO events ({_COLUMNS}) VALUES ({', '.join('?' * 16)})"


def _move_clocks(conn: sqlite3.Connection, latest: Mapping[str, int | None]) -> None:
    """Each tenant's clock moved up to its latest stamp written here (never down)."""
    conn.executemany(
        "INSERT INTO clocks (tenant, last) VALUES (?, ?) "
        "ON CONFLICT (tenant) DO UPDATE SET last = max(last, excluded.last)",
        list(latest.items()),
    )


class SqliteEventLog:
    """`EventLog` over one SQLite file."""

    def __init__(self, path: Path) -> None:
        self._db = SqliteFile(path, _SCHEMA)
        with self._db.tx() as conn:  # action: since remember; reason: since index_failed events
            add_missing_columns(conn, "events", {"action": "TEXT", "reason": "TEXT"})

    def record(self, events: Sequence[TimelineEvent]) -> list[TimelineEvent]:
        with self._db.tx() as conn:
            return [event for event, _ in _append(conn, events, lambda e: e.changed_at)]

    def scan(
        self,
        tenant: str,
        prefix: tuple[str, ...],
        *,
        kinds: frozenset[str],
        start_after: tuple[datetime, str] | None = None,
        after: datetime | None = None,
        before: datetime | None = None,
        page_size: int = 100,
        max_rows: int | None = None,
    ) -> Iterator[TimelineEvent]:
        where, params = "tenant = ?", [tenant]
        if len(prefix) >= 2:  # one root's events, through their own index
            where += " AND root = ?"
            params.append(_root(prefix))
        bounds = prefix_range(prefix)
        if max_rows is not None:
            # Bounded: the namespace and the kinds are checked here, on the rows of the root's (or
            # the tenant's) range that SQLite would otherwise skip unseen, so every row read counts.
            yield from self._bounded_scan(where, params, bounds, kinds, after, before, start_after, page_size,
                                          max_rows)
            return
        if bounds is not None:
            exact, lo, hi = bounds
            where += " AND (ns = ? OR (ns >= ? AND ns < ?))"
            params += [exact, lo, hi]
        if kinds != KINDS:
            where += f" AND kind IN ({', '.join('?' * len(kinds))})"
            params += sorted(kinds)
        if after is not None:
            where += " AND stamp > ?"
            params.append(to_epoch_us(after))
        if before is not None:
            where += " AND stamp < ?"
            params.append(to_epoch_us(before))
        position = (to_epoch_us(start_after[0]), start_after[1]) if start_after else None
        conn = self._db.conn()
        while True:
            page_where, page_params = where, list(params)
            if position is not None:
                page_where += " AND (stamp, id) > (?, ?)"
                page_params += list(position)
            rows = conn.execute(
                f"SELECT {_COLUMNS} FROM events WHERE {page_where} ORDER BY stamp, id LIMIT ?",
                [*page_params, page_size],
            ).fetchall()
            for row in rows:
                yield _event(row)
            if len(rows) < page_size:
                return
            position = (rows[-1][1], rows[-1][2])

    def _bounded_scan(self, where: str, params: list[Any], bounds: tuple[str, str, str] | None,
                      kinds: frozenset[str], after: datetime | None, before: datetime | None,
                      start_after: tuple[datetime, str] | None, page_size: int, max_rows: int
                      ) -> Iterator[TimelineEvent]:
        """`scan` reading at most `max_rows` rows of the range (`ScanTooWide` past them)."""
        if after is not None:
            where += " AND stamp > ?"
            params = [*params, to_epoch_us(after)]
        if before is not None:
            where += " AND stamp < ?"
            params = [*params, to_epoch_us(before)]
        position = (to_epoch_us(start_after[0]), start_after[1]) if start_after else None
        conn = self._db.conn()
        read = 0
        while True:
            page_where, page_params = where, list(params)
            if position is not None:
                page_where += " AND (stamp, id) > (?, ?)"
                page_params += list(position)
            size = min(page_size, max_rows + 1 - read)
            rows = conn.execute(
                f"SELECT {_COLUMNS} FROM events WHERE {page_where} ORDER BY stamp, id LIMIT ?",
                [*page_params, size],
            ).fetchall()
            read += len(rows)
            if read > max_rows:
                raise ScanTooWide(max_rows)
            for row in rows:
                ns = row[5]
                if row[3] in kinds and (bounds is None or ns == bounds[0] or bounds[1] <= ns < bounds[2]):
                    yield _event(row)
            if len(rows) < size:
                return
            position = (rows[-1][1], rows[-1][2])

    def history(
        self, tenant: str, namespace: tuple[str, ...], key: str, *,
        before: tuple[datetime, str] | None = None, limit: int = 20,
    ) -> list[TimelineEvent]:
        return self._key_versions(tenant, namespace, key, before, limit, newest_first=True)

    def versions_after(
        self, tenant: str, namespace: tuple[str, ...], key: str, *,
        after: tuple[datetime, str] | None, limit: int,
    ) -> list[TimelineEvent]:
        return self._key_versions(tenant, namespace, key, after, limit, newest_first=False)

    def _key_versions(self, tenant: str, namespace: tuple[str, ...], key: str,
                      bound: tuple[datetime, str] | None, limit: int, *, newest_first: bool) -> list[TimelineEvent]:
        """A page of the key's version events from `bound` (exclusive), newest or oldest first."""
        where, params = "tenant = ? AND ns = ? AND key = ?", [tenant, encode_namespace(namespace), key]
        if bound is not None:
            where += f" AND (stamp, id) {'<' if newest_first else '>'} (?, ?)"
            params += [to_epoch_us(bound[0]), bound[1]]
        # Non-version kinds (index_failed, ...) are rare on one key: skipped inside the key's range.
        where += f" AND kind IN ({', '.join('?' * len(VERSION_KINDS))})"
        params += sorted(VERSION_KINDS)
        order = "stamp DESC, id DESC" if newest_first else "stamp, id"
        # INDEXED BY: the work must stay within the key's range, whatever the planner's statistics say.
        rows = self._db.conn().execute(
            f"SELECT {_COLUMNS} FROM events INDEXED BY events_by_key WHERE {where} "
            f"ORDER BY {order} LIMIT ?", [*params, limit]).fetchall()
        return [_event(row) for row in rows]

    def restore(self, events: Sequence[TimelineEvent]) -> list[bool]:
        with self._db.tx() as conn:
            return [inserted for _, inserted in _append(conn, events, lambda e: e.occurred_at)]

    def held(self, tenant: str, event_ids: Sequence[str]) -> set[str]:
        return set(_held_stamps(self._db.conn(), tenant, list(event_ids)))

    def purge(self, tenant: str, before: datetime) -> int:
        with self._db.tx() as conn:
            return conn.execute(
                "DELETE FROM events WHERE tenant = ? AND stamp < ?", (tenant, to_epoch_us(before))
            ).rowcount

    def tenants(self) -> list[str]:
        return [r[0] for r in self._db.conn().execute("SELECT tenant FROM clocks").fetchall()]


def _append(conn: sqlite3.Connection, events: Sequence[TimelineEvent],
            own_time: Callable[[TimelineEvent], datetime | None]) -> list[tuple[TimelineEvent, bool]]:
    """Each event as the log holds it, in input order, and whether it was inserted now. An id held
    already keeps its stamp (a replay); a new one is stamped at its own time, or 1 µs past the
    tenant's latest stamp where that is not before it."""
    held: dict[tuple[str, str], int] = {}
    for tenant, ids in _ids_by_tenant(events).items():
        held.update(((tenant, event_id), stamp) for event_id, stamp in _held_stamps(conn, tenant, ids).items())
    clocks: dict[str, int | None] = {}
    out: list[tuple[TimelineEvent, bool]] = []
    rows = []
    for event in events:
        if (event.tenant, event.id) in held:
            out.append((dataclasses.replace(event, occurred_at=from_epoch_us(held[(event.tenant, event.id)])), False))
            continue
        if event.tenant not in clocks:
            last = conn.execute("SELECT last FROM clocks WHERE tenant = ?", (event.tenant,)).fetchone()
            clocks[event.tenant] = last[0] if last else None
        own = own_time(event)
        assert own is not None
        stamp = next_stamp(to_epoch_us(own), clocks[event.tenant])
        clocks[event.tenant] = held[(event.tenant, event.id)] = stamp
        recorded = dataclasses.replace(event, occurred_at=from_epoch_us(stamp))
        rows.append(_row(recorded))
        out.append((recorded, True))
    conn.executemany(_INSERT_EVENT, rows)
    _move_clocks(conn, clocks)
    return out


def _held_stamps(conn: sqlite3.Connection, tenant: str, ids: list[str]) -> dict[str, int]:
    held: dict[str, int] = {}
    for at in range(0, len(ids), _IDS_PER_QUERY):
        chunk = ids[at:at + _IDS_PER_QUERY]
        held.update(conn.execute(
            f"SELECT id, stamp FROM events WHERE tenant = ? AND id IN ({', '.join('?' * len(chunk))})",
            [tenant, *chunk]).fetchall())
    return held


def _ids_by_tenant(events: Sequence[TimelineEvent]) -> dict[str, list[str]]:
    ids: dict[str, list[str]] = {}
    for e in events:
        ids.setdefault(e.tenant, []).append(e.id)
    return ids


def _root(namespace: Sequence[str]) -> str:
    """The namespace's first two segments: a user's events (["user", <id>, ...]) share one."""
    return SEP.join(encode_namespace(tuple(namespace)).split(SEP)[:2])


def _row(e: TimelineEvent) -> tuple[Any, ...]:
    assert e.occurred_at is not None
    return (
        e.tenant,
        to_epoch_us(e.occurred_at),
        e.id,
        e.kind,
        _root(e.namespace),
        encode_namespace(e.namespace),
        e.key,
        e.memory_id,
        e.version,
        to_epoch_us(e.changed_at),
        to_epoch_us(e.expires_at) if e.expires_at else None,
        json.dumps(e.policy_attributes),
        e.value_ct,
        e.attributes_ct,
        e.action,
        e.reason,
    )


def _event(row: Sequence[Any]) -> TimelineEvent:
    return TimelineEvent(
        tenant=row[0],
        occurred_at=from_epoch_us(row[1]),
        id=row[2],
        kind=row[3],
        namespace=decode_namespace(row[5]),
        key=row[6],
        memory_id=row[7],
        version=row[8],
        changed_at=from_epoch_us(row[9]),
        expires_at=from_epoch_us(row[10]) if row[10] is not None else None,
        policy_attributes=json.loads(row[11]),
        value_ct=bytes(row[12]) if row[12] is not None else None,
        attributes_ct=bytes(row[13]) if row[13] is not None else None,
        action=row[14],
        reason=row[15],
    )
