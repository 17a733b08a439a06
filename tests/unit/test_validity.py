"""`core.validity` (issue 25): what held at a time, how a supersession closes a memory, and a
merge's start; and reflection's supersessions closing the loser at the winner's start."""

from __future__ import annotations

import math
from datetime import datetime, timedelta, timezone

from memsvc.core.consolidation import Thresholds
from memsvc.core.reflection import Member, consolidate
from memsvc.core.same_fact import Verdict
from memsvc.core.typed_memory import TypedMemory
from memsvc.core.validity import closed_at, earliest_start, valid_at

T0 = datetime(2026, 1, 1, tzinfo=timezone.utc)
CREATED, UPDATED = T0, T0 + timedelta(days=10)


def at(days: float) -> datetime:
    return T0 + timedelta(days=days)


def held(typed: TypedMemory | None, days: float) -> bool:
    value = typed.to_value() if typed is not None else {"text": "a plain item"}
    return valid_at(value, typed=typed is not None, created_at=CREATED, updated_at=UPDATED, as_of=at(days))


def test_an_interval_is_half_open_and_defaults_to_creation_and_open():
    plain = TypedMemory(content="c")
    assert not held(plain, -1) and held(plain, 0) and held(plain, 1000)
    stated = TypedMemory(content="c", valid_from="2025-01-01T00:00:00Z", valid_to="2026-01-06T00:00:00Z")
    assert held(stated, -300) and held(stated, 4.99) and not held(stated, 5) and not held(stated, -400)


def test_a_superseded_memory_without_an_end_ends_at_its_last_write():
    tagged = TypedMemory(content="c", tags=("superseded",))
    assert held(tagged, 9.9) and not held(tagged, 10)
    closed = TypedMemory(content="c", tags=("superseded",), valid_to="2026-01-03T00:00:00Z")
    assert held(closed, 1) and not held(closed, 2)


def test_a_plain_item_counts_from_its_creation_and_a_stored_time_that_is_no_time_is_unset():
    assert not held(None, -0.1) and held(None, 0) and held(None, 5000)
    assert held(TypedMemory(content="c", valid_from="last year", valid_to="never"), 1)


def test_closing_keeps_an_earlier_end_and_never_ends_before_the_start():
    assert closed_at(TypedMemory(content="c"), at(3)).valid_to == "2026-01-04T00:00:00.000000Z"
    assert closed_at(TypedMemory(content="c", valid_to="2026-01-02T00:00:00Z"), at(3)).valid_to == (
        "2026-01-02T00:00:00.000000Z")
    assert closed_at(TypedMemory(content="c", valid_from="2026-01-05T00:00:00Z"), at(3)).valid_to == (
        "2026-01-05T00:00:00.000000Z")


def test_a_merge_starts_at_the_earlier_statement():
    unset, newer = TypedMemory(content="a"), TypedMemory(content="b", valid_from="2025-06-01T00:00:00Z")
    assert earliest_start(unset, at(0), newer) == "2025-06-01T00:00:00.000000Z"  # before the key's creation
    assert earliest_start(unset, at(-1000), newer) is None  # the creation is earlier: it stays the start
    stated = TypedMemory(content="a", valid_from="2024-01-01T00:00:00Z")
    assert earliest_start(stated, at(0), newer) == "2024-01-01T00:00:00Z"
    assert earliest_start(stated, at(0), TypedMemory(content="b")) == "2024-01-01T00:00:00Z"


def unit(*xs):
    n = math.sqrt(sum(x * x for x in xs))
    return [x / n for x in xs]


def test_reflection_closes_the_loser_at_the_winners_start():
    thresholds = Thresholds(0.9, 0.6, 0.92, 0.6, 72)
    contradiction = lambda a, b: Verdict("contradiction")  # noqa: E731
    old = Member("old", TypedMemory(content="I live in Berlin"), at(0), unit(1, 0.8))
    new = Member("new", TypedMemory(content="I live in Munich", valid_from="2026-01-03T00:00:00Z"), at(5),
                 unit(1, 0))
    changed, outcome, _ = consolidate([old, new], thresholds, contradiction)
    assert outcome == {"old": "reflect_superseded"}
    assert changed["old"].valid_to == "2026-01-03T00:00:00.000000Z" and changed["old"].superseded
    unstated = Member("new", TypedMemory(content="I live in Munich"), at(5), unit(1, 0))
    changed, _, _ = consolidate([old, unstated], thresholds, contradiction)
    assert changed["old"].valid_to == "2026-01-06T00:00:00.000000Z"  # when the newer was stated


def test_a_plain_item_states_its_valid_time_in_its_value_and_is_never_superseded():
    def plain(days: float, **value) -> bool:
        return valid_at({"text": "a plain item", **value}, typed=False, created_at=CREATED, updated_at=UPDATED,
                        as_of=at(days))

    stated = {"valid_from": "2025-01-01T00:00:00Z", "valid_to": "2026-01-06T00:00:00Z"}
    assert plain(-300, **stated) and plain(4.99, **stated) and not plain(5, **stated) and not plain(-400, **stated)
    assert plain(9000, tags=["superseded"]) and not plain(-1, tags=["superseded"])  # tags mean nothing here
    assert plain(0, valid_from="soon") and not plain(-1, valid_from="soon")  # no time: from its creation
