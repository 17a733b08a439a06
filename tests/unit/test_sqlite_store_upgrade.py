"""A data directory made before recall's access counters opens, gains the columns and keeps its rows."""

from __future__ import annotations

import sqlite3
from datetime import datetime, timezone

from memsvc.adapters.local.sqlite_store import SqliteItemStore

_OLD_ITEMS = """CREATE TABLE items (
    tenant TEXT NOT NULL, ns TEXT NOT NULL, key TEXT NOT NULL, id TEXT NOT NULL, version INTEGER NOT NULL,
    value_ct BLOB, attributes_ct BLOB, policy_attributes TEXT NOT NULL, index_fields TEXT NOT NULL,
    created_at INTEGER NOT NULL, updated_at INTEGER NOT NULL, expires_at INTEGER, deleted TEXT,
    ttl_seconds INTEGER, indexed_fields TEXT, PRIMARY KEY (tenant, ns, key)) WITHOUT ROWID"""


def test_an_old_file_gains_the_access_columns(tmp_path):
    path = tmp_path / "memsvc.db"
    db = sqlite3.connect(path)
    with db:
        db.execute(_OLD_ITEMS)
        db.execute("INSERT INTO items VALUES ('t', 'a', 'k', 'm1', 1, NULL, NULL, '{}', 'null', 0, 0, NULL, NULL, "
                   "NULL, NULL)")
    db.close()
    store = SqliteItemStore(path)
    item = store.get("t", ("a",), "k")
    assert (item.id, item.access_count, item.last_accessed_at) == ("m1", 0, None)
    at = datetime(2026, 1, 2, tzinfo=timezone.utc)
    store.record_accesses("t", [(("a",), "k", "m1", 3), (("a",), "k", "stale-id", 5)], at)
    item = store.get("t", ("a",), "k")
    assert (item.access_count, item.last_accessed_at, item.version) == (3, at, 1)
    SqliteItemStore(path)  # opening again adds nothing twice
