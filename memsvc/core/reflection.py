"""Reflection's rules (issue 24), pure: what a background pass over one user's typed memories
changes, and why. `memsvc.service.reflection` reads the memories, applies these rules and writes.

Importance. The *stated* importance (`importance`: the caller's, raised by `useful` feedback,
the larger one on a merge) is the base and is never rewritten. Reflection keeps an *effective*
importance beside it (`effective_importance`):

    effective = min(1, stated + use) * (1 - decay_rate_per_day) ^ days_idle
    use       = min(0.3, 0.05 * log2(1 + access_count))      (1 recall: +0.05, 7: +0.15, 63: +0.3)

`days_idle` counts from the memory's last use: its last recall, or its last write that was not
reflection's own (reflection carries the previous one in `active_at`). A pinned memory never
decays (the factor is 1). Feedback counts through the stated importance (`useful` +0.1;
`wrong`/`outdated` supersede). The effective value is written only when it moved by at least
`IMPORTANCE_STEP`, so a second run with nothing new writes nothing. It describes only the
version reflection wrote (`TypedMemory.reflected`): after any other write the stated importance
counts until the next run.

Archive. A memory whose effective importance is below `archive_below` and that was not used for
`archive_after_days` is archived (`archived_at`); never a pinned or superseded one. Recall leaves
archived memories out unless asked, and a recall that returns one restores it.

Consolidation, within one namespace, kind and category, in creation order, as remember would
have decided had the memories been remembered one by one (`core.consolidation.decide`): each
memory meets its nearest older neighbour still standing (cosine of the stored vectors).
- At or above the auto-update threshold: the same fact, merged (`core.consolidation.merge`: the
  older memory keeps its key and takes the newer statement; the newer one is superseded by it),
  unless the heuristics see a contradiction.
- In the check range [check_low, auto_update): the same-fact judge is asked; only a
  contradiction acts (a same-fact pair in the check range is left to remember, which merges
  only what it must).
- A contradiction: the newer statement wins and the older is superseded, unless the older is
  pinned (then the newer is superseded); two pinned memories are both kept.
- Episodic memories merge only within `episodic_merge_window_hours` of each other.

Cost: linear in the memories examined, except the neighbour search within each group, bounded by
the per-run cap: blocked matrix products locally (`adapters.local.matrix_neighbours`), one
`math.dist` per pair on Lambda, whose layer has no numpy (`older_neighbours`).
"""

from __future__ import annotations

import dataclasses
import heapq
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Literal

from memsvc.core.consolidation import Thresholds, merge, supersede
from memsvc.core.models import to_rfc3339
from memsvc.core.same_fact import Verdict, judge_statements
from memsvc.core.timestamps import parse_rfc3339
from memsvc.core.typed_memory import TypedMemory
from memsvc.core.validity import instant

__all__ = ["IMPORTANCE_STEP", "NEIGHBOURS", "NeighbourSearch", "Member", "Outcome", "last_active",
           "effective_importance",
           "current_importance", "importance_moved", "should_archive", "older_neighbours", "consolidate",
           "profile_rank", "dedupe_statements", "with_bookkeeping"]

IMPORTANCE_STEP = 0.05  # the smallest change of the effective importance worth a new version
MAX_USE_BOOST = 0.3
USE_BOOST_PER_DOUBLING = 0.05
NEIGHBOURS = 4  # nearest older neighbours kept per memory, so one merged away is not the end


@dataclass(frozen=True)
class Member:
    """One typed memory as consolidation sees it."""

    key: str
    typed: TypedMemory
    created_at: datetime  # when its statement was made: "newer" and "older" are by this
    vector: Sequence[float]


Outcome = Literal["merged", "duplicate_superseded", "reflect_superseded"]


def last_active(typed: TypedMemory, *, version: int, updated_at: datetime,
                last_accessed_at: datetime | None) -> datetime:
    """The memory's last use: its last recall, or its last write that was not reflection's own."""
    written = updated_at
    if typed.reflected(version) and typed.active_at:
        try:
            written = parse_rfc3339(typed.active_at)
        except (ValueError, OverflowError):
            pass
    return max(written, last_accessed_at) if last_accessed_at is not None else written


def effective_importance(typed: TypedMemory, *, access_count: int, active: datetime, now: datetime,
                         decay_rate_per_day: float) -> float:
    use = min(MAX_USE_BOOST, USE_BOOST_PER_DOUBLING * math.log2(1 + max(0, access_count)))
    base = min(1.0, typed.importance + use)
    if typed.pinned:
        return round(base, 6)
    days = max(0.0, (now - active).total_seconds() / 86_400)
    return round(base * (1.0 - decay_rate_per_day) ** days, 6)


def current_importance(typed: TypedMemory, version: int) -> float:
    """The importance that counts now: reflection's for the version it wrote, else the stated one."""
    if typed.reflected(version) and typed.effective_importance is not None:
        return typed.effective_importance
    return typed.importance


def importance_moved(typed: TypedMemory, version: int, effective: float) -> bool:
    """Whether `effective` is worth writing: it moved by a step from what counts now, or the
    version carries no effective value yet and a write is due anyway."""
    return abs(effective - current_importance(typed, version)) >= IMPORTANCE_STEP - 1e-9


def should_archive(typed: TypedMemory, effective: float, active: datetime, now: datetime, *, archive_below: float,
                   archive_after_days: int) -> bool:
    return (not typed.pinned and not typed.archived and not typed.superseded and effective < archive_below
            and now - active >= timedelta(days=archive_after_days))


def with_bookkeeping(typed: TypedMemory, *, effective: float, active: datetime, next_version: int) -> TypedMemory:
    """`typed` as reflection writes it as `next_version`."""
    return dataclasses.replace(typed, effective_importance=effective, active_at=to_rfc3339(active),
                               reflected_version=next_version)


NeighbourSearch = Callable[[Sequence[Sequence[float]], float], list[list[tuple[int, float]]]]


def older_neighbours(vectors: Sequence[Sequence[float]], floor: float,
                     k: int = NEIGHBOURS) -> list[list[tuple[int, float]]]:
    """For each vector i, up to `k` earlier ones (j < i) at cosine >= `floor`, best first. Vectors
    are unit length (cos = 1 - |a-b|^2/2: `math.dist` is one C loop per pair). O(n^2 d). The
    reference implementation, and the Lambda's (no numpy there); `memsvc serve` passes blocked
    matrix products instead (`adapters.local.matrix_neighbours`), which must answer the same."""
    def scored(i: int):
        return ((j, 1.0 - math.dist(vectors[i], vectors[j]) ** 2 / 2.0) for j in range(i))

    return [heapq.nlargest(k, ((j, s) for j, s in scored(i) if s >= floor), key=lambda p: p[1])
            for i in range(len(vectors))]


def _resolve(newer: Member, older: Member) -> tuple[Member, Member] | None:
    """(winner, loser) of a contradiction: the newer statement, unless the older is pinned."""
    if older.typed.pinned and newer.typed.pinned:
        return None
    return (older, newer) if older.typed.pinned else (newer, older)


def consolidate(members: Sequence[Member], thresholds: Thresholds,
                judge: Callable[[TypedMemory, TypedMemory], Verdict | None],
                neighbours: NeighbourSearch = older_neighbours,
                ) -> tuple[dict[str, TypedMemory], dict[str, Outcome], int]:
    """Merge and resolve one group (one namespace, kind and category) in creation order.
    Returns the new value of every key that changes, its outcome, and how many times the judge
    was asked. `judge(existing, candidate)` may return None (no answer: nothing happens)."""
    order = sorted(range(len(members)), key=lambda i: (members[i].created_at, members[i].key))
    group = [members[i] for i in order]
    kind = group[0].typed.kind if group else "semantic"
    auto_update, check_low = thresholds.for_kind(kind)
    window = timedelta(hours=thresholds.episodic_merge_window_hours)
    nearest = neighbours([m.vector for m in group], check_low)
    current = {m.key: m.typed for m in group}
    outcome: dict[str, Outcome] = {}
    standing = [True] * len(group)
    asked = 0
    for i, member in enumerate(group):
        if not standing[i]:
            continue
        found = next(((j, score) for j, score in nearest[i] if standing[j]), None)
        if found is None:
            continue
        j, score = found
        older = dataclasses.replace(group[j], typed=current[group[j].key])
        newer = dataclasses.replace(member, typed=current[member.key])
        if kind == "episodic" and newer.created_at - older.created_at > window:
            continue
        if score >= auto_update:
            verdict = judge_statements(older.typed.content, newer.typed.content,
                                       existing_category=older.typed.category, candidate_category=newer.typed.category)
            relation = "contradiction" if verdict.relation == "contradiction" else "same"
        else:
            asked += 1
            answer = judge(older.typed, newer.typed)
            relation = answer.relation if answer is not None else "different"
        if relation == "same" and score >= auto_update:
            merged = merge(older.typed, newer.typed, newer.key, existing_created_at=older.created_at)
            if not (older.typed.archived and newer.typed.archived):
                merged = dataclasses.replace(merged, archived_at=None)  # the fact was stated again
            current[older.key], outcome[older.key] = merged, outcome.get(older.key, "merged")
            # The merged memory holds over both statements' time; the copy keeps none of its own.
            current[newer.key] = supersede(newer.typed, older.key, ends_at=_start(older))
            outcome[newer.key] = "duplicate_superseded"
            standing[i] = False
        elif relation == "contradiction" and (resolved := _resolve(newer, older)) is not None:
            winner, loser = resolved
            # The loser held until the winner's statement started to (a pinned older winner: never).
            current[loser.key] = supersede(loser.typed, winner.key, ends_at=_start(winner))
            outcome[loser.key] = "reflect_superseded"
            standing[i if loser is newer else j] = False
    return {k: current[k] for k in outcome}, outcome, asked


def _start(member: Member) -> datetime:
    """When a member's statement holds from: its valid_from, else when it was made."""
    return instant(member.typed.valid_from) or member.created_at


def profile_rank(pinned: bool, importance: float, active: datetime) -> tuple[float, float, float]:
    """Sort key of a profile candidate: pinned first, then importance, then the most recently used."""
    return (0.0 if pinned else 1.0, -importance, -active.timestamp())


def dedupe_statements(contents: Sequence[str]) -> list[int]:
    """Indexes of `contents` to keep, in order: one that states the same fact as (or contradicts)
    an earlier one is dropped, by seed 002's heuristics (`core.same_fact`). O(k^2) for k contents:
    a profile holds a few dozen."""
    kept: list[int] = []
    for i, text in enumerate(contents):
        if all(judge_statements(contents[j], text).relation == "different" for j in kept):
            kept.append(i)
    return kept
