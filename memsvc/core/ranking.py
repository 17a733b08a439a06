"""How hybrid search turns a memory's two relevance signals into one score (pure).

The signals, each on 0..1:
- semantic: the cosine similarity of the query's and the memory's best-matching text, mapped
  linearly from [`COSINE_NONE`, `COSINE_FULL`] onto [0, 1] (clipped): `semantic_match`;
- keyword: BM25 over blind terms, divided by the query's weight (the summed IDF of its terms in
  the searched scope): the share of the query's IDF that the memory holds (BM25 has no length
  normalisation, `core.keywords.BM25_B`; a term the memory repeats counts up to (k1 + 1) times
  its IDF, hence the cap at 1), 0 when it holds none, and comparable across queries, unlike raw
  BM25.

The hybrid score is their weighted mean, on 0..1, and the weight is the query's own: each
signal weighs by how clearly it separates this query's best candidate from the rest (its best
value's lead over its fifth best, `separation`). A question that shares a rare word with one
memory only is decided by keywords; one whose words are everywhere (a speaker's name, a topic
every memory mentions) by meaning. A fixed weight has to bet on one: 0.7 for meaning won on
paraphrased questions and lost to keywords alone where questions reuse the evidence's words
(benchmarks/README.md, "Retrieval on long conversations"). A missing signal counts 0. For one
query the weight is fixed once the retrievers' first pages are in, and the score grows with each
signal, so what the retrievers' lowest scores give bounds any memory they have not handed over
yet (search's early stop under `min_score`).

The cosine range is MiniLM's (all-MiniLM-L6-v2): unrelated texts score up to about 0.2, close
paraphrases 0.7 and more.
"""

from __future__ import annotations

from collections.abc import Sequence

__all__ = ["keyword_match", "semantic_match", "separation", "semantic_weight", "hybrid_score",
           "COSINE_NONE", "COSINE_FULL", "SEPARATION_RANK", "SEPARATION_HITS"]

COSINE_NONE = 0.2
COSINE_FULL = 0.7
SEPARATION_RANK = 5  # a signal's best is compared with its fifth best: recall@5 is what we measure
# A signal's separation is read from its retriever's first hits, as many as this whatever the page
# asked (so pages of one search, whose first pages differ in size, get one weight). Recall asks each
# layer for fewer (`Search.ranked`), so there each layer's weight is read from what it handed over.
SEPARATION_HITS = 50


def keyword_match(bm25: float, query_weight: float) -> float:
    """BM25 as a fraction of what a full match of the query scores, capped at 1."""
    return min(1.0, bm25 / query_weight) if query_weight > 0 else 0.0


def semantic_match(cosine: float) -> float:
    """The cosine on 0..1: 0 up to `COSINE_NONE`, 1 from `COSINE_FULL`, linear between."""
    return min(1.0, max(0.0, (cosine - COSINE_NONE) / (COSINE_FULL - COSINE_NONE)))


def separation(best_first: Sequence[float], rest: float) -> float:
    """How clearly a signal tells a query's best candidate from the others: the best value's
    lead over the `SEPARATION_RANK`th best (0..1 values of distinct memories, best first, as a
    retriever handed them over); past the end, `rest`: 0 when the retriever has no more, else
    the last value it handed over."""
    if not best_first:
        return 0.0
    other = best_first[SEPARATION_RANK - 1] if len(best_first) >= SEPARATION_RANK else rest
    return max(0.0, best_first[0] - other)


def semantic_weight(semantic_separation: float, keyword_separation: float) -> float:
    """The semantic signal's share of the hybrid score for one query (the keyword's is the rest)."""
    total = semantic_separation + keyword_separation
    return semantic_separation / total if total > 0 else 0.5


def hybrid_score(semantic: float | None, keyword: float | None, weight: float) -> float:
    """0..1, higher is better: the semantic match (from the cosine `semantic`) and the keyword
    match, weighted `weight` : 1 - `weight`; a missing signal counts as no evidence."""
    s = semantic_match(semantic) if semantic is not None else 0.0
    return weight * s + (1.0 - weight) * (keyword or 0.0)
