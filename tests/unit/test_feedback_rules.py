"""`core.feedback`: what each signal does to a typed memory's value."""

from __future__ import annotations

from datetime import datetime, timezone

import pytest

from memsvc.core.feedback import action_of, apply_signal
from memsvc.core.typed_memory import TypedMemory

AT = datetime(2026, 3, 1, tzinfo=timezone.utc)


def apply(value, signal):
    typed = TypedMemory.from_value(value)
    assert typed is not None
    return apply_signal(value, typed, signal, at=AT)


@pytest.mark.parametrize("before, after", [(0.5, 0.6), (0.7, 0.8), (0.95, 1.0), (1.0, 1.0), (0, 0.1)])
def test_useful_adds_a_tenth_capped_at_one(before, after):
    assert apply({"content": "c", "importance": before}, "useful")["importance"] == after


def test_useful_on_a_memory_without_importance_starts_from_the_default():
    assert apply({"content": "c"}, "useful") == {"content": "c", "importance": 0.6}


@pytest.mark.parametrize("signal", ["wrong", "outdated"])
def test_wrong_and_outdated_tag_superseded_once_and_keep_everything_else(signal):
    value = {"content": "c", "type": "note", "tags": ["a"], "mine": [1], "superseded_by": None}
    once = apply(value, signal)
    ends = {"valid_to": "2026-03-01T00:00:00.000000Z"} if signal == "outdated" else {}  # it held until now
    assert once == {**value, "tags": ["a", "superseded"], **ends}
    assert apply(once, signal) == once
    assert TypedMemory.from_value(once).superseded


def test_actions():
    assert [action_of(s) for s in ("useful", "wrong", "outdated")] == [
        "feedback_useful", "feedback_wrong", "feedback_outdated"]


def test_useful_restores_an_archived_memory_and_wrong_leaves_it_archived():
    value = {"content": "c", "type": "fact", "importance": 0.2, "archived_at": "2026-01-01T00:00:00Z"}
    typed = TypedMemory.from_value(value)
    assert typed.archived
    assert "archived_at" not in apply_signal(value, typed, "useful", at=AT)
    assert apply_signal(value, typed, "wrong", at=AT)["archived_at"] == "2026-01-01T00:00:00Z"


def test_outdated_keeps_an_earlier_end_and_never_ends_before_the_start():
    ended = {"content": "c", "valid_to": "2026-02-01T00:00:00.000000Z"}
    assert apply(ended, "outdated")["valid_to"] == "2026-02-01T00:00:00.000000Z"
    later = {"content": "c", "valid_from": "2026-06-01T00:00:00.000000Z"}
    assert apply(later, "outdated")["valid_to"] == "2026-06-01T00:00:00.000000Z"  # an empty interval
