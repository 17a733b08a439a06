"""Reflection's rules (`memsvc.core.reflection`), pure: importance, archive, consolidation order."""

from __future__ import annotations

import math
from datetime import datetime, timedelta, timezone

import pytest

from memsvc.core.consolidation import Thresholds
from memsvc.core.reflection import (Member, consolidate, current_importance, dedupe_statements, effective_importance,
                                    importance_moved, last_active, older_neighbours, should_archive, with_bookkeeping)
from memsvc.core.same_fact import Verdict
from memsvc.core.typed_memory import TypedMemory
from memsvc.service.reflection import _chunk

NOW = datetime(2026, 6, 1, tzinfo=timezone.utc)
T = Thresholds(0.9, 0.6, 0.92, 0.6, 72)


def unit(*xs):
    n = math.sqrt(sum(x * x for x in xs))
    return [x / n for x in xs]


def test_effective_importance_decays_with_disuse_rises_with_use_and_pinned_never_decays():
    m = TypedMemory(content="x", importance=0.5)
    assert effective_importance(m, access_count=0, active=NOW, now=NOW, decay_rate_per_day=0.01) == 0.5
    assert effective_importance(m, access_count=0, active=NOW - timedelta(days=30), now=NOW,
                                decay_rate_per_day=0.01) == pytest.approx(0.5 * 0.99 ** 30)
    assert effective_importance(m, access_count=7, active=NOW, now=NOW, decay_rate_per_day=0.01) == 0.65
    assert effective_importance(m, access_count=10**6, active=NOW, now=NOW, decay_rate_per_day=0.01) == 0.8  # capped
    pinned = TypedMemory(content="x", importance=0.5, pinned=True)
    assert effective_importance(pinned, access_count=0, active=NOW - timedelta(days=999), now=NOW,
                                decay_rate_per_day=0.01) == 0.5


def test_bookkeeping_counts_only_for_the_version_reflection_wrote():
    m = with_bookkeeping(TypedMemory(content="x", importance=0.5), effective=0.3, active=NOW - timedelta(days=9),
                         next_version=4)
    assert current_importance(m, 4) == 0.3 and current_importance(m, 5) == 0.5  # another write since: stated
    assert last_active(m, version=4, updated_at=NOW, last_accessed_at=None) == NOW - timedelta(days=9)
    assert last_active(m, version=5, updated_at=NOW, last_accessed_at=None) == NOW
    assert last_active(m, version=4, updated_at=NOW, last_accessed_at=NOW - timedelta(days=1)) == \
        NOW - timedelta(days=1)
    assert not importance_moved(m, 4, 0.33) and importance_moved(m, 4, 0.25)
    assert TypedMemory.from_value(m.to_value()) == m  # round trip
    assert "archived_at" not in TypedMemory(content="x").to_value()  # untouched memories read as before


def test_archive_rule():
    m = TypedMemory(content="x", importance=0.05)
    old = NOW - timedelta(days=91)
    assert should_archive(m, 0.04, old, NOW, archive_below=0.1, archive_after_days=90)
    assert not should_archive(m, 0.04, NOW - timedelta(days=89), NOW, archive_below=0.1, archive_after_days=90)
    assert not should_archive(m, 0.2, old, NOW, archive_below=0.1, archive_after_days=90)
    for kept in (TypedMemory(content="x", pinned=True), TypedMemory(content="x", archived_at="2026-01-01T00:00:00Z"),
                 TypedMemory(content="x", tags=("superseded",))):
        assert not should_archive(kept, 0.0, old, NOW, archive_below=0.1, archive_after_days=90)


def test_older_neighbours_are_earlier_ones_only_best_first():
    vs = [unit(1, 0), unit(1, 0.1), unit(0, 1), unit(1, 0.05)]
    found = older_neighbours(vs, 0.5)
    assert found[0] == [] and [j for j, _ in found[1]] == [0] and found[2] == []
    assert [j for j, _ in found[3]] == [1, 0]


def member(key, content, minute, vector, **kw):
    return Member(key, TypedMemory(content=content, **kw), NOW + timedelta(minutes=minute), vector)


def test_duplicates_merge_into_the_oldest_and_contradictions_keep_the_newer():
    never = lambda a, b: pytest.fail("no judge above the auto-update threshold")  # noqa: E731
    changed, outcome, asked = consolidate(
        [member("b", "The user likes green tea daily", 1, unit(1, 0.01)),
         member("a", "The user likes green tea", 0, unit(1, 0))], T, never)
    assert asked == 0 and outcome == {"a": "merged", "b": "duplicate_superseded"}
    assert changed["a"].content == "The user likes green tea daily" and changed["a"].merged_from == ("b",)
    assert changed["b"].superseded_by == "a"

    contradiction = lambda a, b: Verdict("contradiction")  # noqa: E731
    members = [member("old", "I live in Berlin", 0, unit(1, 0.8)), member("new", "I live in Munich", 5, unit(1, 0))]
    changed, outcome, asked = consolidate(members, T, contradiction)
    assert (asked, outcome, changed["old"].superseded_by) == (1, {"old": "reflect_superseded"}, "new")
    members[0] = member("old", "I live in Berlin", 0, unit(1, 0.8), pinned=True)
    assert consolidate(members, T, contradiction)[1] == {"new": "reflect_superseded"}
    members[1] = member("new", "I live in Munich", 5, unit(1, 0), pinned=True)
    assert consolidate(members, T, contradiction)[1] == {}  # both pinned: both kept
    assert consolidate(members, T, lambda a, b: None)[1] == {}  # no answer: nothing happens


def test_episodic_memories_merge_only_within_the_window():
    members = [member("a", "Met Ann at the cafe", 0, unit(1, 0), kind="episodic"),
               member("b", "Met Ann at the cafe today", 73 * 60, unit(1, 0.01), kind="episodic")]
    assert consolidate(members, T, lambda a, b: None)[1] == {}


def test_profile_deduplication_and_chunks():
    assert dedupe_statements(["I prefer dark mode", "I prefer dark mode in editors", "I live in Berlin",
                              "I live in Munich", "I like jazz"]) == [0, 2, 4]
    refs = [(("n1",), "a"), (("n1",), "b"), (("n2",), "a"), (("n3",), "a"), (("n3",), "b"), (("n3",), "c")]
    assert _chunk(refs, 0, 3) == refs[:3]  # whole namespaces
    assert _chunk(refs, 3, 2) == refs[3:5]  # one too large for the cap: in parts
    assert _chunk(refs, 2, 3) == refs[2:3]


def test_the_local_matrix_search_answers_as_the_reference():
    import random

    from memsvc.adapters.local.matrix_neighbours import older_neighbours_blocked

    rng = random.Random(3)
    vs = [unit(*(rng.gauss(0, 1) for _ in range(8))) for _ in range(1300)]  # more than one block of rows
    reference, blocked = older_neighbours(vs, 0.5), older_neighbours_blocked(vs, 0.5)
    assert [[j for j, _ in r] for r in reference] == [[j for j, _ in b] for b in blocked]
    assert all([s for _, s in b] == pytest.approx([s for _, s in r], abs=1e-4) for r, b in zip(reference, blocked))
    assert older_neighbours_blocked([], 0.5) == [] and older_neighbours_blocked([unit(1, 0)], 0.5) == [[]]
