"""RFC 3339 date-times (section 5.6), and nothing looser: `datetime.fromisoformat` also takes
"20260101", a date alone, a missing offset and more, which a client never meant as an instant."""

from __future__ import annotations

import re
from datetime import datetime, timedelta, timezone

__all__ = ["parse_rfc3339"]

_DATE_TIME = re.compile(
    r"(\d{4})-(\d{2})-(\d{2})[Tt](\d{2}):(\d{2}):(\d{2})(?:\.(\d{1,9}))?(?:[Zz]|([+-])(\d{2}):(\d{2}))",
    re.ASCII,
)


def parse_rfc3339(text: str) -> datetime:
    """The instant `text` names, in UTC. ValueError unless it is an RFC 3339 date-time (with its
    offset); OverflowError when the offset moves it past year 1 or 9999. O(1): the pattern has no
    repetition beyond 9 digits, so a longer text fails within its first 35 characters."""
    m = _DATE_TIME.fullmatch(text)
    if m is None:
        raise ValueError(f"not an RFC 3339 date-time: {text[:64]!r}")
    year, month, day, hour, minute, second = (int(g) for g in m.groups()[:6])
    microsecond = int((m[7] or "0")[:6].ljust(6, "0"))  # finer than microseconds is dropped
    offset = timezone.utc
    if m[8]:
        if int(m[10]) > 59:
            raise ValueError(f"offset minutes out of range: {text[:64]!r}")
        delta = timedelta(hours=int(m[9]), minutes=int(m[10]))
        offset = timezone(delta if m[8] == "+" else -delta)  # ValueError from 24 hours on
    return datetime(year, month, day, hour, minute, second, microsecond, tzinfo=offset).astimezone(timezone.utc)
