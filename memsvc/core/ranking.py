"""How hybrid search turns a memory's two relevance signals into one score (pure).

The signals:
- semantic: the cosine similarity of the query's and the memory's best-matching text;
- keyword: BM25 over blind terms, divided by the query's weight (the summed IDF of its terms in
  the searched scope): about 1 when the memory holds every query term once at average length,
  0 when it holds none, and comparable across queries, unlike raw BM25.

The fusion was chosen by measurement (benchmarks/fusion.py, results in benchmarks/README.md).
"""

from __future__ import annotations

__all__ = ["keyword_match", "hybrid_score"]


def keyword_match(bm25: float, query_weight: float) -> float:
    """BM25 as a fraction of what a full match of the query scores, capped at 1."""
    return min(1.0, bm25 / query_weight) if query_weight > 0 else 0.0


def hybrid_score(semantic: float | None, keyword: float | None) -> float:
    """0..1, higher is better; a missing signal counts as no evidence."""
    s = max(0.0, semantic or 0.0)
    k = keyword or 0.0
    return 1.0 - (1.0 - s) * (1.0 - k)
