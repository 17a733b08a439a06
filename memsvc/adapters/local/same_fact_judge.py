"""The local same-fact judge: seed 002's heuristics (`core.same_fact`), deterministic, no model."""

from __future__ import annotations

from memsvc.core.same_fact import Verdict, judge_statements
from memsvc.core.typed_memory import TypedMemory

__all__ = ["HeuristicJudge"]


class HeuristicJudge:
    """`SameFactJudge` by entity overlap, conflicting numbers, dates and names, and the category
    guard. Always answers."""

    def judge(self, tenant: str, existing: TypedMemory, candidate: TypedMemory) -> Verdict | None:
        return judge_statements(existing.content, candidate.content, existing_category=existing.category,
                                candidate_category=candidate.category)
