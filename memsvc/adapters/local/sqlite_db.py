"""One SQLite file in WAL mode: a connection per thread, `BEGIN IMMEDIATE` transactions."""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

__all__ = ["SqliteFile", "add_missing_columns"]


class SqliteFile:
    def __init__(self, path: Path, schema: str) -> None:
        self._path = str(path)
        self._local = threading.local()
        path.parent.mkdir(parents=True, exist_ok=True)
        conn = self.conn()
        conn.execute("PRAGMA journal_mode=WAL")
        conn.executescript(schema)

    def conn(self) -> sqlite3.Connection:
        conn = getattr(self._local, "conn", None)
        if conn is None:
            conn = sqlite3.connect(self._path, isolation_level=None, timeout=30.0)
            conn.execute("PRAGMA busy_timeout=30000")
            conn.execute("PRAGMA synchronous=NORMAL")  # WAL + NORMAL: durable across crashes of the process
            conn.execute("PRAGMA foreign_keys=OFF")
            # A removed row's bytes are overwritten, not left in free space: a deleted memory or an
            # erased user (`user_erasure`) must not stay readable in the file.
            conn.execute("PRAGMA secure_delete=ON")
            self._local.conn = conn
        return conn

    @contextmanager
    def tx(self) -> Iterator[sqlite3.Connection]:
        """A write transaction: writers queue for the file's one write lock, so each sees the last."""
        conn = self.conn()
        conn.execute("BEGIN IMMEDIATE")
        try:
            yield conn
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        conn.execute("COMMIT")


def add_missing_columns(conn: sqlite3.Connection, table: str, columns: dict[str, str]) -> None:
    """Give `table` the `columns` (name -> declaration) it lacks: a file made before they existed
    gets them at open. Run in a write transaction, so two processes opening an old file at once
    add each column once."""
    present = {row[1] for row in conn.execute(f"PRAGMA table_info({table})")}
    for column, declaration in columns.items():
        if column not in present:
            conn.execute(f"ALTER TABLE {table} ADD COLUMN {column} {declaration}")
