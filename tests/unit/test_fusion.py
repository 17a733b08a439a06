"""Hybrid search's fusion of the semantic and keyword signals (core.ranking)."""

from __future__ import annotations

import itertools

import pytest

from memsvc.core.ranking import COSINE_FULL, COSINE_NONE, SEMANTIC_WEIGHT, hybrid_score, semantic_match

GRID = [None, -0.4, 0.0, 0.1, 0.2, 0.25, 0.45, 0.7, 0.9, 1.0]
KEYWORD = [None, 0.0, 0.2, 0.5, 1.0]


class TestSemanticMatch:
    @pytest.mark.parametrize("cosine,match", [(-1.0, 0.0), (COSINE_NONE, 0.0), (COSINE_FULL, 1.0), (1.0, 1.0),
                                              ((COSINE_NONE + COSINE_FULL) / 2, 0.5)])
    def test_maps_minilms_range_onto_0_to_1(self, cosine, match):
        assert semantic_match(cosine) == pytest.approx(match)


class TestHybridScore:
    def test_is_the_weighted_mean_of_the_two_matches(self):
        assert hybrid_score(COSINE_FULL, 1.0) == pytest.approx(1.0)
        assert hybrid_score(COSINE_FULL, None) == pytest.approx(SEMANTIC_WEIGHT)  # a paraphrase sharing no word
        assert hybrid_score(None, 1.0) == pytest.approx(1 - SEMANTIC_WEIGHT)  # every term, no shared meaning
        assert hybrid_score(0.45, 0.5) == pytest.approx(SEMANTIC_WEIGHT * 0.5 + (1 - SEMANTIC_WEIGHT) * 0.5)

    def test_a_missing_signal_counts_as_none(self):
        assert hybrid_score(None, None) == 0.0
        assert hybrid_score(0.5, None) == hybrid_score(0.5, 0.0)
        assert hybrid_score(None, 0.4) == hybrid_score(-0.3, 0.4) == hybrid_score(COSINE_NONE, 0.4)

    @pytest.mark.parametrize("s,k", list(itertools.product(GRID, KEYWORD)))
    def test_stays_within_0_and_1(self, s, k):
        assert 0.0 <= hybrid_score(s, k) <= 1.0

    @pytest.mark.parametrize("s,k", list(itertools.product(GRID[1:], KEYWORD[1:])))
    def test_never_falls_when_a_signal_grows(self, s, k):
        # Search bounds the memories no retriever has handed over by the fusion of the retrievers'
        # lowest signals (its early stop under min_score): that needs a fusion monotone in each.
        assert hybrid_score(s + 0.05, k) >= hybrid_score(s, k)
        assert hybrid_score(s, min(1.0, k + 0.05)) >= hybrid_score(s, k)

    def test_strict_inside_the_cosine_range(self):
        assert hybrid_score(0.4, 0.2) < hybrid_score(0.5, 0.2) < hybrid_score(0.5, 0.3)

    def test_a_full_keyword_match_outweighs_a_small_cosine_gap(self):
        # The memory that holds the query's words wins over one slightly closer in meaning.
        assert hybrid_score(0.45, 1.0) > hybrid_score(0.55, 0.3)
