"""Recall's pure ranking: the composite, the decay, near-duplicate collapse, the adaptive cut and the
token budget."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest

from memsvc.core.recall_ranking import (Weights, collapse_near_duplicates, fill_budget, recency, relative_cut,
                                         relevance)
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


def test_the_cut_stops_at_the_first_drop_larger_than_the_gap():
    assert relative_cut([0.80, 0.78, 0.70, 0.69], gap=0.05, margin=1.0) == [0, 1]
    assert relative_cut([0.80, 0.70, 0.69], gap=0.05, margin=1.0) == [0]  # a clear winner comes back alone


def test_the_cut_leaves_out_what_is_more_than_the_margin_below_the_best():
    steady = [0.80, 0.77, 0.74, 0.71, 0.68]  # no drop above the gap
    assert relative_cut(steady, gap=0.05, margin=0.10) == [0, 1, 2, 3]
    assert relative_cut(steady, gap=0.05, margin=0.0) == [0]


def test_the_cut_keeps_ties_and_the_callers_order():
    # precedence order: a lower score may come first; the floor is found in score order
    assert relative_cut([0.60, 0.90, 0.88, 0.50], gap=0.05, margin=1.0) == [1, 2]
    assert relative_cut([0.7, 0.7, 0.7], gap=0.0, margin=0.0) == [0, 1, 2]


def test_the_best_always_stays_and_one_turns_the_cut_off():
    assert relative_cut([0.31], gap=0.0, margin=0.0) == [0]
    assert relative_cut([], gap=0.05, margin=0.1) == []
    scores = [1.0, 0.0, 0.5, 0.99]  # the widest drops scores in 0..1 can have
    assert relative_cut(scores, gap=1.0, margin=1.0) == [0, 1, 2, 3]


@pytest.mark.parametrize("limit", [1, 5, 50])
def test_the_cut_of_a_long_flat_list_is_bounded_by_the_margin(limit):
    scores = [0.9 - n * 0.01 for n in range(limit)]
    kept = relative_cut(scores, gap=0.05, margin=0.15)
    assert kept == list(range(min(limit, 16)))  # 0.90 down to 0.75
