"""`add_missing_columns`: a file from before a column gets it at open, once."""

from __future__ import annotations

import sqlite3

from memsvc.adapters.local.sqlite_db import add_missing_columns


def test_a_table_from_before_gets_the_columns_it_lacks_and_keeps_its_rows():
    conn = sqlite3.connect(":memory:")
    conn.execute("CREATE TABLE t (a TEXT, b INTEGER)")
    conn.execute("INSERT INTO t VALUES ('x', 1)")
    wanted = {"b": "INTEGER", "c": "INTEGER NOT NULL DEFAULT 0", "d": "TEXT"}
    add_missing_columns(conn, "t", wanted)
    add_missing_columns(conn, "t", wanted)  # a second open adds nothing
    assert [row[1] for row in conn.execute("PRAGMA table_info(t)")] == ["a", "b", "c", "d"]
    assert conn.execute("SELECT * FROM t").fetchall() == [("x", 1, 0, None)]
