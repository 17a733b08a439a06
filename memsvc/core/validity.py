"""Valid time of typed memories (issue 25): when the stated fact held, and what was true at a
given time (`as_of`). Pure.

A typed memory holds over [valid_from, valid_to): a missing `valid_from` is its key's
`created_at` (it held from when it was stated), a missing `valid_to` is open. A superseded
memory without a `valid_to` (tagged before valid time existed, or by `wrong` feedback) counts
as ending at its `updated_at`: the version that tagged it is its last. A plain item states its
valid time the same way, `valid_from` and `valid_to` in its value (issue 25: one time model for
`as_of`, the graph and the ranking of questions that name a time); without them it counts from
its `created_at` on. Tags mean nothing in a plain item's value: it is never superseded.

Validity is not expiry: a TTL removes the item, a closed `valid_to` keeps it as the record of
what held before.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

from memsvc.core.models import to_rfc3339
from memsvc.core.sessions import is_messages_namespace
from memsvc.core.timestamps import parse_rfc3339
from memsvc.core.typed_memory import TypedMemory, is_superseded, is_typed

__all__ = ["valid_at", "interval", "closed_at", "earliest_start", "instant", "typed_in"]


def instant(text: str | None) -> datetime | None:
    """A stored RFC 3339 time, or None (absent, or not one: a value written by hand through PUT
    counts as not saying, never as an error at read)."""
    if not isinstance(text, str):
        return None
    try:
        return parse_rfc3339(text)
    except (ValueError, OverflowError):
        return None


def typed_in(namespace: Sequence[str], value: Mapping[str, Any]) -> bool:
    """Whether a stored value is read as a typed memory (the `typed` of `valid_at` and
    `interval`): a session message never is, its {role, content} only looks like one."""
    return not is_messages_namespace(namespace) and is_typed(value)


def valid_at(value: Mapping[str, Any], *, typed: bool, created_at: datetime, updated_at: datetime,
             as_of: datetime) -> bool:
    """Whether a memory held at `as_of`: a typed memory's `value` (`typed`), or a plain item's.
    Reads the value's fields, not a `TypedMemory`: this runs on every candidate an `as_of` search
    opens, and building one costs more than the rest of the check."""
    start, end = interval(value, typed=typed, created_at=created_at, updated_at=updated_at)
    return start <= as_of and (end is None or as_of < end)


def interval(value: Mapping[str, Any], *, typed: bool, created_at: datetime, updated_at: datetime
             ) -> tuple[datetime, datetime | None]:
    """`[start, end)` of a memory (None: open): what `valid_at` checks, what the graph stores on
    the relations derived from it, and what a question naming a time is matched against."""
    start = instant(value.get("valid_from")) or created_at
    end = instant(value.get("valid_to")) or (updated_at if typed and is_superseded(value) else None)
    return start, end


def closed_at(typed: TypedMemory, at: datetime) -> TypedMemory:
    """`typed` no longer holding from `at` on: an earlier `valid_to` stays, and the end never
    falls before its own `valid_from` (an interval the newer statement fully covers is empty)."""
    end = at
    if (stated := instant(typed.valid_to)) is not None:
        end = min(end, stated)
    if (start := instant(typed.valid_from)) is not None:
        end = max(end, start)
    return dataclasses.replace(typed, valid_to=to_rfc3339(end))


def earliest_start(existing: TypedMemory, existing_created_at: datetime | None, newer: TypedMemory) -> str | None:
    """A merge's `valid_from`: the earlier start of the two statements. An existing memory
    without one started at its creation, which the merged key keeps, so it stays unset then."""
    mine = instant(existing.valid_from) or existing_created_at
    theirs = instant(newer.valid_from)
    if theirs is None or (mine is not None and mine <= theirs):
        return existing.valid_from
    return to_rfc3339(theirs)
