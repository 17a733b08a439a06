"""RFC 3339 date-times, strictly."""

from __future__ import annotations

from datetime import datetime, timezone

import pytest

from memsvc.core.models import from_epoch_us, to_epoch_us
from memsvc.core.timestamps import parse_rfc3339


@pytest.mark.parametrize("text,expected", [
    ("2026-01-01T00:00:00Z", datetime(2026, 1, 1, tzinfo=timezone.utc)),
    ("2026-01-01t00:00:00z", datetime(2026, 1, 1, tzinfo=timezone.utc)),
    ("2026-01-01T02:30:00+02:30", datetime(2026, 1, 1, tzinfo=timezone.utc)),
    ("2025-12-31T23:00:00.5-01:00", datetime(2026, 1, 1, 0, 0, 0, 500000, tzinfo=timezone.utc)),
    ("2026-01-01T00:00:00.123456789Z", datetime(2026, 1, 1, 0, 0, 0, 123456, tzinfo=timezone.utc)),
])
def test_rfc3339_date_times_are_instants_in_utc(text, expected):
    assert parse_rfc3339(text) == expected


@pytest.mark.parametrize("text", [
    "1" * 5000, "20260101", "2026-01-01", "2026-01-01T00:00:00", "2026-01-01T00:00Z", "20260101T000000Z",
    "2026-01-01 00:00:00Z", "2026-13-01T00:00:00Z", "2026-02-30T00:00:00Z", "2026-01-01T24:00:00Z",
    "2026-01-01T00:00:00+24:00", "2026-01-01T00:00:00+01:60", "2026-01-01T00:00:00+0100",
    "2026-01-01T00:00:00.Z", "2026-01-01T00:00:00.1234567890Z", "2026-01-01T00:00:00Z\n", " 2026-01-01T00:00:00Z",
    "\u0662\u0660\u0662\u0666-01-01T00:00:00Z", "2026-W01-1T00:00:00Z",
])
def test_anything_else_is_a_value_error(text):
    with pytest.raises(ValueError):
        parse_rfc3339(text)


def test_an_offset_past_the_calendar_is_an_overflow():
    with pytest.raises(OverflowError):
        parse_rfc3339("0001-01-01T00:00:00+14:00")


@pytest.mark.parametrize("instant", [
    datetime(1, 1, 1, tzinfo=timezone.utc),
    datetime(1960, 5, 1, 0, 0, 0, 5, tzinfo=timezone.utc),  # before 1970, with microseconds
    datetime(2026, 11, 27, 18, 0, 0, 123456, tzinfo=timezone.utc),
    datetime(9999, 12, 31, 23, 59, 59, 999999, tzinfo=timezone.utc),
])
def test_epoch_microseconds_round_trip_every_representable_instant(instant):
    """A stated valid time is stored as epoch microseconds on the row (`StoredItem.valid_start`)."""
    assert from_epoch_us(to_epoch_us(instant)) == instant


def test_the_microsecond_before_the_epoch_is_minus_one():
    assert to_epoch_us(datetime(1969, 12, 31, 23, 59, 59, 999999, tzinfo=timezone.utc)) == -1
