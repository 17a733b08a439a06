"""The scoring in benchmarks/models.py: BM25, fusion, ranks with ties, and the dataset reader."""

import json

import numpy as np
import pytest

from benchmarks.models import BM25, Corpus, evaluate, load_cases, pooled_corpora, rank_of, rrf


def test_bm25_prefers_the_document_with_the_query_terms():
    bm25 = BM25(["the user likes green tea", "the user likes coffee", "deploys happen on friday"])
    scores, idf_sum = bm25.scores("Which tea does the user like?")
    assert scores.argmax() == 0
    assert scores[2] == 0.0
    assert idf_sum > 0
    assert 0.0 <= scores.max() / idf_sum <= 1.0  # the normalised score mixes with a cosine


def test_bm25_rare_terms_weigh_more():
    bm25 = BM25(["alpha common", "beta common", "gamma common"])
    scores, _ = bm25.scores("alpha common")
    assert scores[0] > scores[1] == scores[2] > 0.0


def test_bm25_unknown_query_scores_nothing():
    scores, idf_sum = BM25(["one memory"]).scores("zzz")
    assert scores.tolist() == [0.0] and idf_sum == 0


def test_ties_count_against_the_expected_item():
    assert rank_of(np.array([0.5, 0.5, 0.1]), 0) == 2
    assert rank_of(np.array([0.9, 0.5, 0.1]), 0) == 1
    assert rank_of(np.array([0.9, 0.5, 0.1]), 2) == 3


def test_rrf_ignores_documents_a_ranking_did_not_retrieve():
    dense = np.array([0.9, 0.8, 0.1])
    keyword = np.array([0.0, 2.0, 0.0])
    fused = rrf(dense, keyword, present=[None, keyword > 0])
    assert fused.argmax() == 1  # second by cosine, first and only by keyword
    np.testing.assert_allclose(fused[0], 1 / 61)
    np.testing.assert_allclose(fused[1], 1 / 62 + 1 / 61)


def test_evaluate_perfect_and_wrong_rankings():
    corpora = [Corpus("q", ("right", "wrong"), (0,))]
    vectors = {"right": np.array([1.0, 0.0]), "wrong": np.array([0.0, 1.0])}
    good = evaluate(corpora, lambda q: np.array([1.0, 0.0]), vectors)["dense"]
    bad = evaluate(corpora, lambda q: np.array([0.0, 1.0]), vectors)["dense"]
    assert (good.recall_at_1, good.mrr) == (1.0, 1.0)
    assert (bad.recall_at_1, bad.mrr) == (0.0, 0.5)


def test_load_cases_and_pool(tmp_path):
    path = tmp_path / "golden.json"
    cases = [
        {"id": "a", "setup_memories": [{"content": "m1"}, {"content": "m2"}], "query": "qa", "expected_retrievals": ["m2"]},
        {"id": "b", "setup_memories": ["m2", "m3"], "query": "qb", "expected_retrievals": ["m3"]},
        {"id": "c", "setup_memories": ["m4"], "query": "qc", "expected_retrievals": []},
    ]
    path.write_text(json.dumps({"cases": cases}))
    loaded = load_cases(path)
    assert [c.id for c in loaded] == ["a", "b"]  # a case that expects nothing is left out
    pooled = pooled_corpora(loaded)
    assert pooled[0].documents == ("m1", "m2", "m3")
    assert [c.expected for c in pooled] == [(1,), (2,)]


def test_load_cases_rejects_an_expected_memory_that_is_not_set_up(tmp_path):
    path = tmp_path / "golden.json"
    case = {"id": "a", "setup_memories": ["m1"], "query": "q", "expected_retrievals": ["m9"]}
    path.write_text(json.dumps({"cases": [case]}))
    with pytest.raises(ValueError, match="m9"):
        load_cases(path)


def test_load_cases_keeps_one_split_and_the_kind(tmp_path):
    path = tmp_path / "golden.json"
    cases = [
        {"id": "a", "split": "dev", "kind": "keyword", "setup_memories": ["m1"], "query": "q", "expected_retrievals": ["m1"]},
        {"id": "b", "split": "test", "kind": "paraphrase", "setup_memories": ["m2"], "query": "q", "expected_retrievals": ["m2"]},
    ]
    path.write_text(json.dumps({"cases": cases}))
    assert [(c.id, c.kind) for c in load_cases(path, split="test")] == [("b", "paraphrase")]
    assert len(load_cases(path)) == 2
