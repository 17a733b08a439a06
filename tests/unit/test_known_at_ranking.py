"""`service.known_at`'s in-memory keyword ranking of versions no longer in the indexes, and the
merge of the two parts of an answer."""

from __future__ import annotations

from memsvc.core.keywords import query_terms
from memsvc.service.known_at import keyword_scores, merge_ranked


def test_a_full_match_scores_one_and_no_match_zero():
    scores = keyword_scores(query_terms("where do I live"), [["I live in Berlin"], ["the flat has a code"], []])
    assert [match for match, _ in scores] == [1.0, 0.0, 0.0]
    assert scores[0][1] > 0 and scores[1][1] == 0.0


def test_a_partial_match_scores_between():
    (both, _), (one, _) = keyword_scores(query_terms("Berlin flat"), [["a flat in Berlin"], ["a flat in Munich"]])
    assert both == 1.0 and 0 < one < 1


def test_a_query_without_terms_matches_nothing():
    assert keyword_scores(query_terms("where do I"), [["I live in Berlin"]]) == [(0.0, 0.0)]


def test_the_merge_keeps_each_order_and_puts_the_current_first_on_a_tie():
    current = [("c1", 0.9), ("c2", 0.5)]
    historical = [("h1", 0.9), ("h2", 0.7)]
    merged = merge_ranked(current, historical, lambda r: r[1])
    assert [name for name, _ in merged] == ["c1", "h1", "h2", "c2"]
