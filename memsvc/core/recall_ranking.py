"""How recall ranks, collapses and budgets what the layers found (API-AGENT.md "recall"). Pure.

- `relevance`: seed 002's composite, `w.match*match + w.importance*importance +
  w.recency*recency + w.pinned*pinned`, with seed 001's decay `(1 - rate)^days` as recency.
- `collapse_near_duplicates`: of memories whose vectors are at cosine >= the threshold, the most
  specific layer's copy stays (seed 001's merge).
- `relative_cut`: what stays of a query's matches once those well below its best one are left out.
- `fill_budget`: contents in order until the token budget is spent; the last may be cut.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime

__all__ = ["Weights", "recency", "relevance", "collapse_near_duplicates", "relative_cut", "Budgeted", "fill_budget",
           "NEAR_DUPLICATE_COSINE"]

NEAR_DUPLICATE_COSINE = 0.95  # seed 001: "merging results with 0.95+ similarity"


def _cosine(a: Sequence[float], b: Sequence[float]) -> float:
    """Of unit vectors: 1 - |a - b|^2 / 2. `math.dist` is one C loop, four times faster than a
    dot product summed in Python (no numpy on Lambda)."""
    return 1.0 - math.dist(a, b) ** 2 / 2.0


@dataclass(frozen=True)
class Weights:
    """The composite's weights; they sum to 1, so relevance stays in 0..1."""

    match: float = 0.55
    importance: float = 0.20
    recency: float = 0.15
    pinned: float = 0.10


def recency(updated_at: datetime, now: datetime, rate_per_day: float) -> float:
    """Seed 001's decay: 1 when just written, times (1 - rate) for every day since (fractional)."""
    days = max(0.0, (now - updated_at).total_seconds() / 86_400)
    return (1.0 - rate_per_day) ** days


def relevance(w: Weights, *, match: float, importance: float, recency: float, pinned: bool) -> float:
    return w.match * match + w.importance * importance + w.recency * recency + w.pinned * (1.0 if pinned else 0.0)


def collapse_near_duplicates(ids: Sequence[str], precedence: Mapping[str, int], relevance_of: Mapping[str, float],
                             vectors: Mapping[str, Sequence[float]],
                             threshold: float = NEAR_DUPLICATE_COSINE) -> set[str]:
    """The ids that stay. Candidates are taken most specific layer first (then most relevant), and
    one within `threshold` cosine of a candidate already kept is dropped: so of near-duplicates
    the most specific layer's copy stays, and within one layer the more relevant. `vectors` are
    unit length; a candidate without one cannot be compared and stays."""
    kept: list[Sequence[float]] = []
    out: set[str] = set()
    for memory_id in sorted(ids, key=lambda i: (precedence[i], -relevance_of[i])):
        vector = vectors.get(memory_id)
        if vector is not None:
            if any(_cosine(vector, other) >= threshold for other in kept):
                continue
            kept.append(vector)
        out.add(memory_id)
    return out


def relative_cut(scores: Sequence[float], gap: float, margin: float) -> list[int]:
    """The positions, in their order, of the scores that stay: going down from the best, each
    stays while it is at most `gap` below the one above it and at most `margin` below the best.
    The best always stays. Relative to the query's own best, so no score is too low in itself
    (the fixed thresholds decide that); a `gap` and a `margin` of 1 (scores are 0..1) keep
    everything."""
    if not scores:
        return []
    descending = sorted(scores, reverse=True)
    floor = descending[0] - margin
    last = descending[0]
    for score in descending[1:]:
        if score < floor or last - score > gap:
            break
        last = score
    return [n for n, score in enumerate(scores) if score >= last]


@dataclass(frozen=True)
class Budgeted:
    """How many contents fit (`taken`), the last one's text if it had to be cut, and the tokens used."""

    taken: int
    cut: str | None
    token_count: int


def fill_budget(contents: Sequence[str], budget: int, count: Callable[[str], int],
                cut_to: Callable[[str, int], str]) -> Budgeted:
    """Take contents in order while they fit in `budget` tokens. The first that does not fit is
    cut to the tokens left (when any are) and is the last taken."""
    used = 0
    for n, content in enumerate(contents):
        tokens = count(content)
        if used + tokens <= budget:
            used += tokens
            continue
        left = budget - used
        cut = cut_to(content, left) if left > 0 else ""
        if not cut:
            return Budgeted(n, None, used)
        return Budgeted(n + 1, cut, used + count(cut))
    return Budgeted(len(contents), None, used)
