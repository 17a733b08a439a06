"""`POST /v1/memories/feedback`: an agent's word on a typed memory (issue 24).

`useful` raises its importance, `wrong` and `outdated` mark it superseded, so recall stops
returning it (`core.feedback` holds the rules). The memory is named by `id`, the id every memory
response carries, which is the id of one version: feedback applies only to the version the
caller saw, and writes the next one through the normal write path (versioning, the change feed,
the indexer and the timeline see it; its row and event carry `action: feedback_<signal>`).

- *Access.* The caller needs the rights of a `GET` and of a `PUT` of the memory's namespace and
  key (read and write). A memory they may not read or write answers exactly as a
  missing one does, `404 NOT_FOUND`, so another user's or tenant's memory is never revealed.
- *Once per id.* The write is conditional on the version the id names. So a repeated request
  with the same id (a client's retry, or two at once) is applied at most once: the other one
  finds the id no longer current (`404`), or loses the race (`409 CONFLICT`, not retryable: the
  same request can never succeed again). A second signal is sent with the id of the version the
  first one answered: `useful` twice raises twice.
- *The note* is checked (at most `MAX_NOTE_CHARS` characters) and then dropped: never stored,
  never on the timeline or in a log.
"""

from __future__ import annotations

from dataclasses import dataclass

from pydantic import Field, StrictStr

from memsvc.core.errors import Conflict, Taken
from memsvc.core.feedback import MAX_NOTE_CHARS, Signal, action_of, apply_signal
from memsvc.core.models import Caller, Memory
from memsvc.core.validation import Command
from memsvc.ports import Clock, ItemStore
from memsvc.service.access import Access
from memsvc.service.memories import Memories, memory_of, with_counters
from memsvc.service.memory_ids import MemoryId, current_for_write
from memsvc.service.sealing import Sealer

__all__ = ["Feedback", "GiveFeedback", "FeedbackGiven"]


class GiveFeedback(Command):
    """`POST /v1/memories/feedback`."""

    id: MemoryId
    signal: Signal = Field(description="useful: importance + 0.1 (at most 1); wrong, outdated: superseded")
    note: StrictStr | None = Field(None, max_length=MAX_NOTE_CHARS,
                                   description=f"why, at most {MAX_NOTE_CHARS} characters; checked, never stored")


@dataclass(frozen=True)
class FeedbackGiven:
    signal: Signal
    memory: Memory  # the new version
    previous_id: str  # the id the feedback named


class Feedback:
    def __init__(self, *, items: ItemStore, memories: Memories, access: Access, sealer: Sealer, clock: Clock) -> None:
        self._items = items
        self._memories = memories
        self._access = access
        self._sealer = sealer
        self._clock = clock

    def give(self, caller: Caller, cmd: GiveFeedback) -> FeedbackGiven:
        memory_id = cmd.id.lower()
        current = current_for_write(self._items, self._access, self._sealer, self._clock, caller, memory_id,
                                    use="feedback")
        row, policies, value, attributes = current.row, current.policies, current.value, current.attributes
        ns, key = row.namespace, row.key
        new_value = apply_signal(value, current.typed, cmd.signal, at=self._clock.now())
        self._access.govern(caller, ns, key, new_value, attributes)
        policy_attributes = policies.extract_attributes(ns, key, new_value, attributes, caller.policy_context())
        try:
            item = self._memories.write_version(
                caller.tenant_id, ns, key, new_value, old=row, attributes=attributes,
                policy_attributes=policy_attributes, index_fields=row.index_fields, ttl_seconds=row.ttl_seconds,
                action=action_of(cmd.signal))
        except Conflict:
            raise Taken("the memory changed while the feedback was applied; read it again and send the feedback "
                        "with its current id", details={"field": "id"}) from None
        # Indexed before answering: a recall right after finds the new version by meaning (the old
        # version's vectors name an id that is no longer current, so they find nothing).
        self._memories.settle([item], sync_index=True)
        return FeedbackGiven(cmd.signal, memory_of(item, value=with_counters(new_value, item), attributes=attributes),
                             memory_id)
