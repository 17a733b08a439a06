"""A reranker's answer, as every rerank API gives it: results naming a text by its index, each
with a score. Pure."""

from __future__ import annotations

import math
from typing import Any

__all__ = ["scores_in_order"]


def scores_in_order(results: Any, count: int, score_name: str) -> list[float]:
    """One score per text, in the order the `count` texts were sent; ValueError unless every text
    has exactly one finite score."""
    if not isinstance(results, list):
        raise ValueError("the rerank answer has no results")
    scores: list[float | None] = [None] * count
    for result in results:
        index = result.get("index") if isinstance(result, dict) else None
        score = result.get(score_name) if isinstance(result, dict) else None
        if (not isinstance(index, int) or isinstance(index, bool) or not 0 <= index < count
                or scores[index] is not None):
            raise ValueError("a rerank result has no index of a text sent")
        if not isinstance(score, (int, float)) or isinstance(score, bool) or not math.isfinite(score):
            raise ValueError("a rerank result has no finite score")
        scores[index] = float(score)
    if any(s is None for s in scores):
        raise ValueError("the rerank answer leaves texts unscored")
    return scores  # type: ignore[return-value]
