"""How hybrid search turns a memory's two relevance signals into one score (pure).

The signals:
- semantic: the cosine similarity of the query's and the memory's best-matching text;
- keyword: BM25 over blind terms, divided by the query's weight (the summed IDF of its terms in
  the searched scope): the share of the query's IDF that the memory holds (BM25 has no length
  normalisation, `core.keywords.BM25_B`), 1 when it holds every query term, 0 when it holds
  none, and comparable across queries, unlike raw BM25.

The hybrid score is their weighted mean, on 0..1: `SEMANTIC_WEIGHT` x the cosine mapped
linearly from [`COSINE_NONE`, `COSINE_FULL`] onto [0, 1] (clipped), plus the rest x the keyword
match. So a paraphrase that shares no word scores up to 0.7, a memory that holds every query
term but means something else 0.3, and one that does both 1. A missing signal counts 0. The
score grows with each signal, so what the retrievers' lowest scores give is a bound on any
memory they have not handed over yet (search's early stop under `min_score`).

The fusion, its weight and the cosine's range were chosen by measurement on the development
halves of the golden set and of eval/conversations.json (benchmarks/retrieval_lab.py, results
in benchmarks/README.md, "Retrieval on long conversations"). The cosine range is MiniLM's
(all-MiniLM-L6-v2): unrelated texts score up to about 0.2, close paraphrases 0.7 and more.
"""

from __future__ import annotations

__all__ = ["keyword_match", "semantic_match", "hybrid_score", "SEMANTIC_WEIGHT", "COSINE_NONE", "COSINE_FULL"]

SEMANTIC_WEIGHT = 0.7
COSINE_NONE = 0.2
COSINE_FULL = 0.7


def keyword_match(bm25: float, query_weight: float) -> float:
    """BM25 as a fraction of what a full match of the query scores, capped at 1."""
    return min(1.0, bm25 / query_weight) if query_weight > 0 else 0.0


def semantic_match(cosine: float) -> float:
    """The cosine on 0..1: 0 up to `COSINE_NONE`, 1 from `COSINE_FULL`, linear between."""
    return min(1.0, max(0.0, (cosine - COSINE_NONE) / (COSINE_FULL - COSINE_NONE)))


def hybrid_score(semantic: float | None, keyword: float | None) -> float:
    """0..1, higher is better: the weighted mean of the semantic and the keyword match; a
    missing signal counts as no evidence."""
    s = semantic_match(semantic) if semantic is not None else 0.0
    return SEMANTIC_WEIGHT * s + (1.0 - SEMANTIC_WEIGHT) * (keyword or 0.0)
