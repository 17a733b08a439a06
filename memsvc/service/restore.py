"""Restoring an archived memory (issue 24): `POST /v1/memories/restore {id}`, and recall's restore
of an archived memory it returns (`include_archived`).

Reflection archives decayed memories (`core.reflection`); recall leaves them out unless asked.
Restoring writes the memory's next version without `archived_at` (action `restored`, on the
timeline with its reason), through the normal write path, conditional on the version read.

The route follows feedback's rules (`service.feedback`): the id names one version; the caller
needs read and write rights on its namespace and key, else `404` exactly as for a missing id;
the write is conditional on that version, so a retry with the same id finds it no longer current
(`404`) or loses the race (`409`, not retryable). A memory that is not archived is answered
as it is (`restored: false`, same id, no new version): restoring is idempotent in effect.
"""

from __future__ import annotations

from dataclasses import dataclass

from memsvc.core.errors import Conflict, Taken
from memsvc.core.models import Caller, Memory, StoredItem
from memsvc.core.validation import Command
from memsvc.ports import Clock, ItemStore
from memsvc.service.access import Access
from memsvc.service.memories import Memories, memory_of, with_counters
from memsvc.service.memory_ids import MemoryId, current_for_write
from memsvc.service.sealing import Sealer

__all__ = ["Restore", "RestoreMemory", "Restored"]


class RestoreMemory(Command):
    """`POST /v1/memories/restore`."""

    id: MemoryId


@dataclass(frozen=True)
class Restored:
    restored: bool  # false: it was not archived, and is answered as it is
    memory: Memory  # the current version
    previous_id: str


class Restore:
    def __init__(self, *, items: ItemStore, memories: Memories, access: Access, sealer: Sealer, clock: Clock) -> None:
        self._items = items
        self._memories = memories
        self._access = access
        self._sealer = sealer
        self._clock = clock

    def restore(self, caller: Caller, cmd: RestoreMemory) -> Restored:
        memory_id = cmd.id.lower()
        current = current_for_write(self._items, self._access, self._sealer, self._clock, caller, memory_id,
                                    use="restore")
        row, value, attributes = current.row, current.value, current.attributes
        if not current.typed.archived:
            return Restored(False, memory_of(row, value=with_counters(value, row), attributes=attributes), memory_id)
        try:
            item, new_value = self._write(row, value, attributes)
        except Conflict:
            raise Taken("the memory changed while it was restored; read it again and restore it with its current id",
                        details={"field": "id"}) from None
        return Restored(True, memory_of(item, value=with_counters(new_value, item), attributes=attributes), memory_id)

    def restore_recalled(self, tenant: str, memory: Memory) -> Memory | None:
        """Restore an archived memory a recall is returning (the recall was its use); the new
        version, or None when the memory moved on since it was read (the recall returns it as read)."""
        row = self._items.get(tenant, memory.namespace, memory.key)
        if row is None or row.id != memory.id or not row.is_live(self._clock.now()):
            return None
        value, attributes = self._sealer.open_item(row)
        try:
            # Indexed by the background indexer, not inline: a read stays a read (a failing
            # embedder cannot fail the recall after it wrote), and the recall returns it anyway.
            item, new_value = self._write(row, value or {}, attributes, sync_index=False)
        except Conflict:
            return None
        return memory_of(item, value=with_counters(new_value, item), attributes=attributes, score=memory.score)

    def _write(self, row: StoredItem, value: dict, attributes: dict | None, *,
               sync_index: bool = True) -> tuple[StoredItem, dict]:
        new_value = {k: v for k, v in value.items() if k != "archived_at"}
        item = self._memories.write_version(
            row.tenant, row.namespace, row.key, new_value, old=row, attributes=attributes,
            policy_attributes=row.policy_attributes, index_fields=row.index_fields, ttl_seconds=row.ttl_seconds,
            action="restored")
        # The route's answer is indexed first, as feedback's is: found by meaning at once.
        self._memories.settle([item], sync_index=sync_index)
        return item, new_value
