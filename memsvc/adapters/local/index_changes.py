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
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path
from typing import Any

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
    """One index file's change log as one process follows it: which change it has applied last
    (`seen`), what changed since, and its own writes, which need no catching up. Reads go on a
    connection per thread (readers never queue). Create it before the index loads the file: a
    write after that is caught up with later."""

    def __init__(self, path: Path, log: str = "changed") -> None:
        self._path = str(path)
        self._log = log
        self._local = threading.local()
        self._seen = self.latest()

    def latest(self, conn: sqlite3.Connection | None = None) -> int:
        """The newest change's number (0 when none), on `conn` inside a write transaction."""
        return (conn or self._conn()).execute(f"SELECT coalesce(max(seq), 0) FROM {self._log}").fetchone()[0]

    def behind(self) -> bool:
        """Whether another process has written since this one last looked (one primary-key read)."""
        return self.latest() != self._seen

    def take(self) -> dict[str, set[str]] | None:
        """The memory ids changed since this process last looked, per tenant, now marked seen; None
        when the log no longer reaches back that far (then the index loads everything again). Call
        it with the index's write lock held."""
        rows = self._conn().execute(f"SELECT seq, tenant, memory_id FROM {self._log} WHERE seq > ? ORDER BY seq",
                                    (self._seen,)).fetchall()
        if rows and rows[0][0] != self._seen + 1:  # numbers have no gaps (one writer at a time): dropped
            self._seen = self.latest()
            return None
        changed: dict[str, set[str]] = {}
        for _, tenant, memory_id in rows:
            changed.setdefault(tenant, set()).add(memory_id)
        if rows:
            self._seen = rows[-1][0]
        return changed

    def catch_up(self, lock: AbstractContextManager[Any], everything: Callable[[], None],
                 memories: Callable[[dict[str, set[str]]], None]) -> None:
        """Before a read: take in what other processes wrote since this one last looked, under
        `lock` (the index's write lock, entered only when there is something to take):
        `memories(changed)` reloads the memories changed, per tenant, and `everything()` the
        whole index when this process fell further behind than the log reaches."""
        if not self.behind():
            return
        with lock:
            changed = self.take()
            if changed is None:
                everything()
            else:
                memories(changed)

    @contextmanager
    def own_write(self, conn: sqlite3.Connection) -> Iterator[None]:
        """Around a write inside `conn`'s transaction: this process applies its own writes as it
        makes them, so when nobody else wrote before them their changes count as seen."""
        before = self.latest(conn)
        yield
        if before == self._seen:
            self._seen = self.latest(conn)

    def _conn(self) -> sqlite3.Connection:
        conn = getattr(self._local, "conn", None)
        if conn is None:
            conn = self._local.conn = sqlite3.connect(self._path, isolation_level=None, timeout=30.0,
                                                      check_same_thread=False)
        return conn
