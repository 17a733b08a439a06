"""What both readers of times in words need (`core.time_expressions` for what a statement says,
`core.query_time` for what a question names): the month names, month arithmetic, and a day's
start in UTC. Pure."""

from __future__ import annotations

from datetime import date, datetime, time, timezone

__all__ = ["MONTHS", "add_months", "midnight"]

MONTHS = {name: n for n, names in enumerate(
    ["january jan", "february feb", "march mar", "april apr", "may", "june jun", "july jul", "august aug",
     "september sep sept", "october oct", "november nov", "december dec"], start=1) for name in names.split()}


def add_months(first: date, months: int) -> date:
    """The first day of the month `months` after `first`'s (before, when negative)."""
    index = first.year * 12 + first.month - 1 + months
    return date(index // 12, index % 12 + 1, 1)


def midnight(day: date) -> datetime:
    return datetime.combine(day, time(0), tzinfo=timezone.utc)
