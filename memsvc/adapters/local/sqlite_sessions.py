"""The local session store: a `sessions` table in the item store's own SQLite file, so that a
message append (the session's counter, the message's item, its change-feed row) is one
`BEGIN IMMEDIATE` transaction: all of it is written, or none."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from datetime import datetime
from typing import Any

from memsvc.adapters.local.sqlite_db import add_missing_columns
from memsvc.adapters.local.sqlite_store import SqliteItemStore
from memsvc.core.errors import Conflict, StoreUnavailable, Taken
from memsvc.core.models import StoredItem, from_epoch_us, to_epoch_us
from memsvc.core.sessions import SessionRecord, message_key, messages_namespace, session_closed

__all__ = ["SqliteSessionStore"]

_SCHEMA = """
CREATE TABLE IF NOT EXISTS sessions (
    tenant TEXT NOT NULL,
    user_id TEXT NOT NULL,
    session_id TEXT NOT NULL,
    agent_id TEXT,
    sealed BLOB NOT NULL,
    created_at INTEGER NOT NULL,
    updated_at INTEGER NOT NULL,
    last_interaction INTEGER NOT NULL,
    version INTEGER NOT NULL,
    seq INTEGER NOT NULL,
    closed_at INTEGER,
    delete_after INTEGER,
    extract TEXT NOT NULL DEFAULT 'off',
    extracted_seq INTEGER NOT NULL DEFAULT 0,
    extract_lease INTEGER,
    PRIMARY KEY (tenant, user_id, session_id)
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS sessions_recent ON sessions (tenant, user_id, last_interaction DESC, session_id);
CREATE INDEX IF NOT EXISTS sessions_due ON sessions (delete_after) WHERE delete_after IS NOT NULL;
"""

_COLUMNS = ("tenant, user_id, session_id, agent_id, sealed, created_at, updated_at, last_interaction, version, seq, "
            "closed_at, delete_after, extract, extracted_seq, extract_lease")
# Columns added since the table was first created: a data dir from before gets them at start.
_ADDED_COLUMNS = {"extract": "TEXT NOT NULL DEFAULT 'off'", "extracted_seq": "INTEGER NOT NULL DEFAULT 0",
                  "extract_lease": "INTEGER"}


class SqliteSessionStore:
    """`SessionStore` next to the items of `SqliteItemStore`."""

    def __init__(self, items: SqliteItemStore) -> None:
        self._items = items
        with items.transaction() as conn:
            for statement in _SCHEMA.split(";"):
                if statement.strip():
                    conn.execute(statement)
            add_missing_columns(conn, "sessions", _ADDED_COLUMNS)

    def create(self, record: SessionRecord) -> None:
        with self._write() as conn:
            try:
                conn.execute(f"INSERT INTO sessions ({_COLUMNS}) VALUES ({', '.join('?' * len(_COLUMNS.split(',')))})", _row(record))
            except sqlite3.IntegrityError:
                raise Taken("a session with this id exists", details={"session_id": record.session_id}) from None

    def get(self, tenant: str, user_id: str, session_id: str) -> SessionRecord | None:
        row = self._conn().execute(
            f"SELECT {_COLUMNS} FROM sessions WHERE tenant = ? AND user_id = ? AND session_id = ?",
            (tenant, user_id, session_id),
        ).fetchone()
        return _record(row) if row else None

    def update(self, record: SessionRecord, *, expected_version: int) -> None:
        with self._write() as conn:
            cur = conn.execute(
                "UPDATE sessions SET agent_id = ?, sealed = ?, updated_at = ?, last_interaction = ?, version = ?, "
                "closed_at = ?, delete_after = ?, extract = ? "
                "WHERE tenant = ? AND user_id = ? AND session_id = ? AND version = ?",
                (record.agent_id, record.sealed, to_epoch_us(record.updated_at), to_epoch_us(record.last_interaction),
                 record.version, _us(record.closed_at), _us(record.delete_after), record.extract, record.tenant,
                 record.user_id,
                 record.session_id, expected_version),
            )
            if cur.rowcount != 1:
                raise Conflict("the session changed while this write was in flight",
                               details={"expected_version": expected_version})

    def claim_extraction(self, tenant: str, user_id: str, session_id: str, *, from_seq: int, now: datetime,
                         until: datetime) -> bool:
        with self._write() as conn:
            cur = conn.execute(
                "UPDATE sessions SET extract_lease = ? WHERE tenant = ? AND user_id = ? AND session_id = ? "
                "AND extracted_seq = ? AND (extract_lease IS NULL OR extract_lease < ?)",
                (to_epoch_us(until), tenant, user_id, session_id, from_seq, to_epoch_us(now)))
            return cur.rowcount == 1

    def mark_extracted(self, tenant: str, user_id: str, session_id: str, *, from_seq: int, to_seq: int) -> bool:
        with self._write() as conn:
            cur = conn.execute(
                "UPDATE sessions SET extracted_seq = ?, extract_lease = NULL "
                "WHERE tenant = ? AND user_id = ? AND session_id = ? AND extracted_seq = ?",
                (to_seq, tenant, user_id, session_id, from_seq))
            return cur.rowcount == 1

    def list(self, tenant, user_id, *, agent_id, limit, after):
        where, params = "tenant = ? AND user_id = ?", [tenant, user_id]
        if agent_id is not None:
            where += " AND agent_id = ?"
            params.append(agent_id)
        if after is not None:
            at = to_epoch_us(after[0])
            where += " AND (last_interaction < ? OR (last_interaction = ? AND session_id < ?))"
            params += [at, at, after[1]]
        rows = self._conn().execute(
            f"SELECT {_COLUMNS} FROM sessions WHERE {where} ORDER BY last_interaction DESC, session_id DESC LIMIT ?",
            [*params, limit],
        ).fetchall()
        return [_record(r) for r in rows]

    def users_after(self, tenant: str, after: str | None, limit: int) -> list[str]:
        rows = self._conn().execute(
            "SELECT DISTINCT user_id FROM sessions WHERE tenant = ? AND user_id > ? ORDER BY user_id LIMIT ?",
            (tenant, after if after is not None else "", limit)).fetchall()
        return [user for (user,) in rows]

    def delete(self, tenant: str, user_id: str, session_id: str) -> None:
        with self._write() as conn:
            conn.execute("DELETE FROM sessions WHERE tenant = ? AND user_id = ? AND session_id = ?",
                         (tenant, user_id, session_id))

    def append(self, tenant: str, user_id: str, session_id: str, at: datetime,
               message: Callable[[int, StoredItem | None], StoredItem]) -> StoredItem | None:
        with self._write() as conn:
            row = conn.execute(
                "SELECT seq, closed_at FROM sessions WHERE tenant = ? AND user_id = ? AND session_id = ?",
                (tenant, user_id, session_id),
            ).fetchone()
            if row is None:
                return None
            if row[1] is not None:
                raise session_closed(session_id)
            seq = row[0] + 1
            # A key can hold the tombstone of a message of a deleted session of the same id.
            old = self._items.get_in(conn, tenant, messages_namespace(user_id, session_id), message_key(seq))
            item = message(seq, old)
            conn.execute(
                "UPDATE sessions SET seq = ?, last_interaction = ? WHERE tenant = ? AND user_id = ? AND session_id = ?",
                (seq, to_epoch_us(at), tenant, user_id, session_id),
            )
            self._items.write_in(conn, item, kind="add", old=old)
            return item

    def messages(self, tenant, namespace, after_key, limit):
        try:
            return self._items.items_after(tenant, namespace, after_key, limit)
        except sqlite3.Error as exc:
            raise StoreUnavailable("the store could not be read; retry") from exc

    def due_for_deletion(self, now: datetime, limit: int) -> list[SessionRecord]:
        rows = self._conn().execute(
            f"SELECT {_COLUMNS} FROM sessions WHERE delete_after IS NOT NULL AND delete_after <= ? "
            "ORDER BY delete_after LIMIT ?",
            (to_epoch_us(now), limit),
        ).fetchall()
        return [_record(r) for r in rows]

    def _conn(self) -> sqlite3.Connection:
        return self._items.connection()

    def _write(self) -> Any:
        return _Unavailable(self._items.transaction())


class _Unavailable:
    """A transaction whose SQLite failures (a full disk, a locked or broken file) are the API's
    `503 STORE_UNAVAILABLE`; the transaction has rolled back by then, so nothing was written."""

    def __init__(self, tx: Any) -> None:
        self._tx = tx

    def __enter__(self) -> sqlite3.Connection:
        try:
            return self._tx.__enter__()
        except sqlite3.Error as exc:
            raise StoreUnavailable("the store is not taking writes; retry") from exc

    def __exit__(self, *exc_info: Any) -> bool:
        try:
            self._tx.__exit__(*exc_info)
        except sqlite3.Error as exc:
            raise StoreUnavailable("the store is not taking writes; retry") from exc
        if isinstance(exc_info[1], sqlite3.Error):
            raise StoreUnavailable("the store is not taking writes; retry") from exc_info[1]
        return False


def _us(at: datetime | None) -> int | None:
    return to_epoch_us(at) if at is not None else None


def _at(us: int | None) -> datetime | None:
    return from_epoch_us(us) if us is not None else None


def _row(r: SessionRecord) -> tuple[Any, ...]:
    return (r.tenant, r.user_id, r.session_id, r.agent_id, r.sealed, to_epoch_us(r.created_at),
            to_epoch_us(r.updated_at), to_epoch_us(r.last_interaction), r.version, r.seq, _us(r.closed_at),
            _us(r.delete_after), r.extract, r.extracted_seq, _us(r.extract_lease_until))


def _record(row: Any) -> SessionRecord:
    return SessionRecord(
        tenant=row[0], user_id=row[1], session_id=row[2], agent_id=row[3], sealed=bytes(row[4]),
        created_at=from_epoch_us(row[5]), updated_at=from_epoch_us(row[6]), last_interaction=from_epoch_us(row[7]),
        version=row[8], seq=row[9], closed_at=_at(row[10]), delete_after=_at(row[11]), extract=row[12],
        extracted_seq=row[13], extract_lease_until=_at(row[14]),
    )
