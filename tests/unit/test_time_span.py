"""`SqliteItemStore.time_span`: bounds of a tenant's current memories' valid times, read from
indexes; None for a tenant holding a row written before those bounds (its time is in its sealed
value) or nothing."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

from memsvc.adapters.local.sqlite_store import SqliteItemStore
from memsvc.core.models import StoredItem

T0 = datetime(2026, 1, 1, tzinfo=timezone.utc)


def item(key: str, start: datetime | None, end: datetime | None = None, tenant: str = "t") -> StoredItem:
    return StoredItem(tenant=tenant, namespace=("user", "a"), key=key, id=f"id-{key}", version=1, value_ct=b"x",
                      attributes_ct=None, policy_attributes={}, index_fields=None, created_at=T0, updated_at=T0,
                      valid_start=start, valid_end=end)


def test_the_span_runs_from_the_earliest_start_to_the_latest_start_or_end(tmp_path):
    store = SqliteItemStore(tmp_path / "m.db")
    assert store.time_span("t") is None  # nothing held
    store.write(item("a", T0), kind="put", old=None)
    store.write(item("b", T0 + timedelta(days=3), T0 + timedelta(days=9)), kind="put", old=None)
    store.write(item("c", T0 - timedelta(days=2), tenant="other"), kind="put", old=None)  # another tenant's
    assert store.time_span("t") == (T0, T0 + timedelta(days=9))
    old = store.get("t", ("user", "a"), "b")
    store.write(old.tombstone(kind="delete", at=T0, new_id="gone"), kind="delete", old=old)
    assert store.time_span("t") == (T0, T0)  # a deleted memory's time no longer counts


def test_a_row_from_before_the_bounds_makes_the_span_unknown(tmp_path):
    store = SqliteItemStore(tmp_path / "m.db")
    store.write(item("a", T0), kind="put", old=None)
    store.write(item("legacy", None), kind="put", old=None)
    assert store.time_span("t") is None
