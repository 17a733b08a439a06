"""`service.known_at`'s rule for whether a version held at `known_at` had expired by then: its
event's `expires_at`, unless what came next says it was still live (`Memories.refresh` extends a
TTL with no event)."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest

from memsvc.core.models import StoredItem, TimelineEvent
from memsvc.service.known_at import _live_then

T0 = datetime(2026, 1, 1, tzinfo=timezone.utc)
KNOWN_AT = T0 + timedelta(seconds=120)


def event(kind, at, *, version=1, expires=None):
    return TimelineEvent(tenant="acme", id=f"{kind}{version}", kind=kind, namespace=("user", "alice"), key="k",
                         memory_id="m", version=version, changed_at=T0 + timedelta(seconds=at),
                         expires_at=T0 + timedelta(seconds=expires) if expires is not None else None,
                         policy_attributes={})


def row(*, version, created, updated, deleted=None):
    return StoredItem(tenant="acme", namespace=("user", "alice"), key="k", id="r", version=version, value_ct=None,
                      attributes_ct=None, policy_attributes={}, index_fields=None,
                      created_at=T0 + timedelta(seconds=created), updated_at=T0 + timedelta(seconds=updated),
                      deleted=deleted)


WRITTEN = event("add", 0, expires=100)  # expired at 100 s as written; known_at is at 120 s


def test_an_expiry_after_known_at_or_none_is_live():
    assert _live_then(event("add", 0, expires=200), KNOWN_AT, [], None)
    assert _live_then(event("add", 0), KNOWN_AT, [], None)


def test_an_expiry_passed_and_nothing_since_is_not_live():
    assert not _live_then(WRITTEN, KNOWN_AT, [], None)


@pytest.mark.parametrize("kind", ["update", "delete"])
def test_an_update_or_delete_since_was_made_to_a_live_item(kind):
    assert _live_then(WRITTEN, KNOWN_AT, [event(kind, 130, version=2)], None)


def test_an_expiry_event_says_when():
    assert _live_then(WRITTEN, KNOWN_AT, [event("expired", 150, version=2, expires=150)], None)  # refreshed
    assert not _live_then(WRITTEN, KNOWN_AT, [event("expired", 100, version=2, expires=100)], None)


def test_a_write_not_on_the_timeline_yet_decides_by_its_lineage():
    assert _live_then(WRITTEN, KNOWN_AT, [], row(version=2, created=0, updated=130))  # an update
    assert not _live_then(WRITTEN, KNOWN_AT, [], row(version=2, created=130, updated=130))  # an add
    assert _live_then(WRITTEN, KNOWN_AT, [], row(version=2, created=0, updated=150, deleted="expired"))
    assert not _live_then(WRITTEN, KNOWN_AT, [], row(version=2, created=0, updated=100, deleted="expired"))
    assert not _live_then(WRITTEN, KNOWN_AT, [], row(version=1, created=0, updated=0))  # the version itself
