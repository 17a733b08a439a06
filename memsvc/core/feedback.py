"""What a feedback signal does to a typed memory (`POST /v1/memories/feedback`, issue 24). Pure.

- `useful` raises `importance` by `USEFUL_STEP` (0.1), capped at 1.0: linear and predictable (a
  memory remembered at the default 0.5 reaches 1.0 after five), and the same step however often
  it was recalled, so feedback stays the caller's explicit word and recall's own counters stay
  separate. Rounded to 6 decimals so that 0.7 + 0.1 reads 0.8. It is a use, as a recall is: an
  archived memory is restored.
- `wrong` and `outdated` mark the memory superseded exactly as remember's consolidation does
  (the tag `superseded`; `superseded_by` stays as it was, since no newer memory replaces it), so
  recall leaves it out unless `include_superseded`. `outdated` also closes its valid time now
  (`valid_to`, issue 25): it held until the caller said it no longer does. `wrong` does not: a
  fact that never held has no end, and the tag alone keeps it out of what held (`core.validity`).

The value is edited field by field, never rebuilt: every other field (a caller's own, the
links) stays as stored.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from memsvc.core.consolidation import SUPERSEDED_TAG
from memsvc.core.models import FeedbackAction
from memsvc.core.typed_memory import TypedMemory
from memsvc.core.validity import closed_at

__all__ = ["Signal", "USEFUL_STEP", "MAX_NOTE_CHARS", "apply_signal", "action_of"]

Signal = Literal["useful", "wrong", "outdated"]
USEFUL_STEP = 0.1
MAX_NOTE_CHARS = 2000


def apply_signal(value: dict[str, Any], typed: TypedMemory, signal: Signal, *, at: datetime) -> dict[str, Any]:
    """The value of the memory's next version after `signal` at `at` (`typed` is `value` read as a typed memory)."""
    if signal == "useful":  # a use: an archived memory is restored too
        kept = {k: v for k, v in value.items() if k != "archived_at"}
        return {**kept, "importance": round(min(1.0, typed.importance + USEFUL_STEP), 6)}
    tags = typed.tags if SUPERSEDED_TAG in typed.tags else (*typed.tags, SUPERSEDED_TAG)
    if signal == "outdated":
        return {**value, "tags": list(tags), "valid_to": closed_at(typed, at).valid_to}
    return {**value, "tags": list(tags)}


_ACTIONS: dict[Signal, FeedbackAction] = {"useful": "feedback_useful", "wrong": "feedback_wrong",
                                          "outdated": "feedback_outdated"}


def action_of(signal: Signal) -> FeedbackAction:
    """The plaintext outcome the version and its timeline event carry."""
    return _ACTIONS[signal]
