"""Which memories' index entries changed in an index file, so that every process holding the
index in memory (`memsvc serve --workers N`) can catch up with the others' writes.

Triggers on the index's table append (tenant, memory id) to a `changed` table in the same
transaction as the write, so no write can be missed. A process remembers the last change it has
applied; before it reads, it asks for the newest (one primary-key lookup) and, when another
process has written since, reloads just those memories' rows. Only the newest `KEEP` changes are
kept: a process that fell further behind reloads everything.
"""

from __future__ import annotations

import sqlite3
import threading
from pathlib import Path

__all__ = ["IndexChanges", "changes_schema"]

KEEP = 100_000


def changes_schema(table: str, log: str = "changed") -> str:
    """The `log` table and the triggers that fill it from `table` (which has `tenant` and
    `memory_id` columns). An `INSERT OR REPLACE` fires the insert trigger only, which is enough.
    Indexes sharing a file keep a log each, so one's writes never send the other catching up."""
    return f"""
CREATE TABLE IF NOT EXISTS {log} (seq INTEGER PRIMARY KEY AUTOINCREMENT, tenant TEXT NOT NULL,
                                  memory_id TEXT NOT NULL);
CREATE TRIGGER IF NOT EXISTS {table}_added AFTER INSERT ON {table}
BEGIN INSERT INTO {log} (tenant, memory_id) VALUES (new.tenant, new.memory_id); END;
CREATE TRIGGER IF NOT EXISTS {table}_removed AFTER DELETE ON {table}
BEGIN INSERT INTO {log} (tenant, memory_id) VALUES (old.tenant, old.memory_id); END;
CREATE TRIGGER IF NOT EXISTS {log}_kept AFTER INSERT ON {log}
BEGIN DELETE FROM {log} WHERE seq <= new.seq - {KEEP}; END;
"""


class IndexChanges:
    """Reads one index file's `changed` table, on a connection per thread (readers never queue)."""

    def __init__(self, path: Path, log: str = "changed") -> None:
        self._path = str(path)
        self._log = log
        self._local = threading.local()

    def latest(self, conn: sqlite3.Connection | None = None) -> int:
        """The newest change's number (0 when none), on `conn` inside a write transaction."""
        return (conn or self._conn()).execute(f"SELECT coalesce(max(seq), 0) FROM {self._log}").fetchone()[0]

    def since(self, seq: int) -> tuple[int, dict[str, set[str]]] | None:
        """(the newest change's number, the memory ids changed after `seq` per tenant), or None when
        changes after `seq` are no longer kept."""
        rows = self._conn().execute(f"SELECT seq, tenant, memory_id FROM {self._log} WHERE seq > ? ORDER BY seq",
                                    (seq,)).fetchall()
        if not rows:
            return seq, {}
        if rows[0][0] != seq + 1:  # numbers have no gaps (one writer at a time): these were dropped
            return None
        changed: dict[str, set[str]] = {}
        for _, tenant, memory_id in rows:
            changed.setdefault(tenant, set()).add(memory_id)
        return rows[-1][0], changed

    def _conn(self) -> sqlite3.Connection:
        conn = getattr(self._local, "conn", None)
        if conn is None:
            conn = self._local.conn = sqlite3.connect(self._path, isolation_level=None, timeout=30.0,
                                                      check_same_thread=False)
        return conn
