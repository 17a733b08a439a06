"""Recall's pure ranking: the composite, the decay, near-duplicate collapse and the token budget."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest

from memsvc.core.recall_ranking import Weights, collapse_near_duplicates, fill_budget, recency, relevance
from memsvc.tokens import count_tokens, cut_to_tokens

NOW = datetime(2026, 6, 1, tzinfo=timezone.utc)


def test_recency_decays_per_day_from_one():
    assert recency(NOW, NOW, 0.01) == 1.0
    assert recency(NOW - timedelta(days=30), NOW, 0.01) == pytest.approx(0.99 ** 30)
    assert recency(NOW - timedelta(hours=12), NOW, 0.5) == pytest.approx(0.5 ** 0.5)
    assert recency(NOW + timedelta(days=1), NOW, 0.01) == 1.0  # a clock ahead never scores above 1


def test_relevance_is_seed_002s_composite():
    w = Weights()
    assert relevance(w, match=1, importance=1, recency=1, pinned=True) == pytest.approx(1.0)
    assert relevance(w, match=0.8, importance=0.5, recency=0.5, pinned=False) == pytest.approx(
        0.55 * 0.8 + 0.20 * 0.5 + 0.15 * 0.5)


def test_near_duplicates_keep_the_most_specific_layer_then_the_most_relevant():
    a, a2, b = [1.0, 0.0], [0.96, 0.28], [0.0, 1.0]  # cos(a, a2) = 0.96, b orthogonal
    kept = collapse_near_duplicates(
        ["company", "project", "other", "project-twin"],
        {"company": 7, "project": 4, "other": 7, "project-twin": 4},
        {"company": 0.9, "project": 0.5, "other": 0.4, "project-twin": 0.6},
        {"company": a, "project": a2, "other": b, "project-twin": a})
    assert kept == {"project-twin", "other"}


def test_a_candidate_without_a_vector_is_kept():
    assert collapse_near_duplicates(["x", "y"], {"x": 1, "y": 2}, {"x": 1, "y": 1}, {"x": [1.0]}) == {"x", "y"}


def test_below_the_threshold_both_stay():
    assert collapse_near_duplicates(["x", "y"], {"x": 1, "y": 2}, {"x": 1, "y": 1},
                                    {"x": [1.0, 0.0], "y": [0.94, 0.341]}) == {"x", "y"}


def test_budget_takes_whole_contents_then_cuts_the_last():
    words = ["one two three", "four five six", "seven eight nine ten eleven"]
    count = lambda s: len(s.split())  # noqa: E731
    cut = lambda s, n: " ".join(s.split()[:n])  # noqa: E731
    assert fill_budget(words, 100, count, cut) == fill_budget(words, 11, count, cut)
    assert fill_budget(words, 11, count, cut).cut is None
    budgeted = fill_budget(words, 8, count, cut)
    assert (budgeted.taken, budgeted.cut, budgeted.token_count) == (3, "seven eight", 8)
    assert fill_budget(words, 6, count, cut).taken == 2 and fill_budget(words, 6, count, cut).cut is None
    assert fill_budget(words, 2, count, cut).cut == "one two"


def test_cl100k_counts_and_cuts_at_character_boundaries():
    assert count_tokens("hello world") == 2  # cl100k_base: [15339, 1917]
    text = "naïve café ☕ " * 50
    for budget in (1, 5, 17, 64):
        cut = cut_to_tokens(text, budget)
        assert text.startswith(cut) and count_tokens(cut) <= budget
        assert "\ufffd" not in cut
    assert cut_to_tokens("short", 10) == "short"
