"""Seed 002's pure parts: the same-fact heuristics, the create/update/supersede policy, the
merge, and the deterministic candidate keys."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest

from memsvc.core.consolidation import (CALIBRATED_THRESHOLDS, SEED_002, Thresholds, candidate_key, decide, merge,
                                       stored_value, supersede, thresholds_for)
from memsvc.core.crypto import statement_key_space
from memsvc.core.same_fact import Verdict, judge_statements, statement
from memsvc.core.typed_memory import TypedMemory

NOW = datetime(2026, 1, 5, tzinfo=timezone.utc)
T = Thresholds(0.90, 0.80, 0.92, 0.85, 72)


@pytest.mark.parametrize("a, b, relation", [
    ("I live in Berlin", "I live in Munich", "contradiction"),  # a name changed
    ("My monthly budget is 500 dollars", "My monthly budget is 800 dollars", "contradiction"),  # a number
    ("My flight is on March 3", "My flight is on March 5", "contradiction"),  # a date
    ("I like coffee", "I do not like coffee", "contradiction"),  # a negation
    ("I prefer dark mode", "I prefer light mode", "contradiction"),  # one slot swapped
    ("I live in Berlin", "I live in Berlin, Germany", "same"),  # a refinement
    ("The user prefers Python for scripting", "User prefers Python for scripting tasks", "same"),
    ("I drink my coffee black", "I drink coffee black, no sugar", "same"),  # "no sugar" denies nothing
    ("My favourite food is sushi", "My favorite food is sushi", "same"),  # two spellings of one word
    ("I prefer dark roast coffee", "My favourite coffee is a dark roast", "same"),  # two ways to say "prefer"
    ("Alice lives in Berlin", "Bob lives in Berlin", "different"),
    ("I like tea", "I like coffee", "different"),
    ("I live in Berlin", "I work in Berlin", "different"),
])
def test_judge(a, b, relation):
    assert judge_statements(a, b).relation == relation


def test_category_guard():
    assert judge_statements("I live in Berlin", "I live in Berlin", existing_category="Home",
                            candidate_category="home").relation == "same"
    assert judge_statements("I live in Berlin", "I live in Berlin", existing_category="Home",
                            candidate_category="Work").relation == "different"


def test_statement_values_and_words():
    s = statement("The user moved to Lisbon on 2026-03-14 with 2 cats")
    assert {"lisbon", "2026-03-14", "2"} <= s.values and "lisbon" not in s.words and "cat" in s.words
    assert statement("May I ask").values == frozenset()  # "may" capitalised at a sentence start: a verb


def _m(content, **kw):
    return TypedMemory(content=content, **kw)


def test_decide_thresholds():
    cand, neighbour = _m("I live in Berlin, Germany"), _m("I live in Berlin")
    never = lambda: pytest.fail("the judge must not be asked")  # noqa: E731
    assert decide(cand, None, 0.0, None, T, NOW, never).action == "create"
    assert decide(cand, neighbour, 0.79, NOW, T, NOW, never).action == "create"
    assert decide(cand, neighbour, 0.95, NOW, T, NOW, never).action == "update"
    assert decide(_m("I live in Munich"), neighbour, 0.95, NOW, T, NOW, never).action == "supersede"
    asked = decide(cand, neighbour, 0.85, NOW, T, NOW, lambda: Verdict("same"))
    assert (asked.action, asked.judge_asked, asked.same_fact) == ("update", True, True)
    assert decide(cand, neighbour, 0.85, NOW, T, NOW, lambda: Verdict("different")).action == "create"
    assert decide(cand, neighbour, 0.85, NOW, T, NOW, lambda: Verdict("contradiction")).action == "supersede"
    failed = decide(cand, neighbour, 0.85, NOW, T, NOW, lambda: None)
    assert (failed.action, failed.judge_asked, failed.judge_failed) == ("create", False, True)


def test_episodic_is_stricter_and_windowed():
    cand, neighbour = _m("Lunch with Sam", kind="episodic"), _m("Lunch with Sam today", kind="episodic")
    assert decide(cand, neighbour, 0.91, NOW, T, NOW, lambda: Verdict("different")).action == "create"  # < 0.92
    assert decide(cand, neighbour, 0.93, NOW - timedelta(hours=71), T, NOW, lambda: None).action == "update"
    assert decide(cand, neighbour, 0.99, NOW - timedelta(hours=73), T, NOW, lambda: None).action == "create"


def test_merge_and_supersede():
    old = _m("I like tea", tags=("drinks",), importance=0.8, type="preference", merged_from=("k0",))
    new = _m("I like green tea", tags=("tea", "drinks"), importance=0.3, pinned=True, source="chat")
    merged = merge(old, new, "k1")
    assert (merged.content, merged.tags, merged.importance, merged.pinned, merged.type, merged.source) == (
        "I like green tea", ("drinks", "tea"), 0.8, True, "preference", "chat")
    assert merged.merged_from == ("k0", "k1") and merge(merged, new, "k1").merged_from == ("k0", "k1")
    marked = supersede(old, "k2", ends_at=NOW)
    assert marked.superseded_by == "k2" and marked.tags == ("drinks", "superseded") and marked.superseded
    assert "access_count" not in stored_value(marked) and "last_accessed_at" not in stored_value(marked)


def test_candidate_keys_are_deterministic_in_the_tenants_secret_key_space():
    ns, space = ("user", "alice", "memories"), statement_key_space(b"k" * 32)
    assert candidate_key(ns, "I like tea", key_space=space) == candidate_key(ns, "  I like\ttea ", key_space=space)
    assert candidate_key(ns, "I like tea", key_space=space) != candidate_key(("user", "bob", "memories"), "I like tea",
                                                                            key_space=space)
    assert candidate_key(ns, "I like tea", key_space=space) != candidate_key(ns, "I like tea", key_space=space, slot=1)
    # Pinned: a key that changed between releases would turn every retry into a copy.
    assert candidate_key(ns, "I like tea", key_space=space) == "74239424-e8b3-5c71-81eb-a48d91b22644"
    # Another tenant's data key gives other keys: without it a key confirms no guessed statement.
    assert candidate_key(ns, "I like tea", key_space=statement_key_space(b"j" * 32)) != candidate_key(
        ns, "I like tea", key_space=space)


def test_thresholds_per_embedder():
    assert thresholds_for("amazon.titan-embed-text-v2:0") == SEED_002
    assert thresholds_for("unknown/model") == SEED_002
    minilm = CALIBRATED_THRESHOLDS["sentence-transformers/all-MiniLM-L6-v2@onnx-int8"]
    assert (minilm.semantic_auto_update, minilm.semantic_check_low) == (0.90, 0.55)


def test_a_statement_merged_into_an_archived_memory_restores_it():
    archived = TypedMemory(content="I live in Berlin", archived_at="2026-01-01T00:00:00Z")
    merged = merge(archived, TypedMemory(content="I live in Berlin, Germany"), "k2")
    assert merged.archived_at is None and not merged.archived and merged.content == "I live in Berlin, Germany"


def test_a_merge_carries_the_newer_statements_provenance_and_keeps_the_rest():
    existing = TypedMemory(content="I live in Berlin", extra={"provenance": {"seqs": [1]}, "mine": 1})
    candidate = TypedMemory(content="I live in Berlin, Germany", extra={"provenance": {"seqs": [7]}, "other": 2})
    merged = merge(existing, candidate, "k2")
    assert merged.extra == {"provenance": {"seqs": [7]}, "mine": 1}
    assert merge(existing, TypedMemory(content="x"), "k3").extra == existing.extra
