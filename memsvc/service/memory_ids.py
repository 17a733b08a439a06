"""A typed memory named by the id of one of its versions, as feedback and restore take it: found
only while that version is current, and only by a caller who may read and write it. Anyone else
gets the same `404` as for an id that names nothing, so another user's or tenant's memory is
never revealed."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Any

from pydantic import Field, StrictStr

from memsvc.core.errors import Forbidden, NotFound, Taken
from memsvc.core.models import Caller, StoredItem
from memsvc.core.policy import CompiledPolicies
from memsvc.core.typed_memory import TypedMemory
from memsvc.ports import Clock, ItemStore
from memsvc.service.access import Access
from memsvc.service.sealing import Sealer

__all__ = ["MemoryId", "MINTED_MEMORY_ID", "CurrentMemory", "current_for_write"]

# A memory id is a UUID (`Memories.build_version`); anything else names nothing, and is refused
# before a lookup (a DynamoDB key has a size limit a long string would pass).
_MEMORY_ID_PATTERN = r"^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$"
# Exactly as memsvc mints it (`uuid.uuid4()`, lower case): what an import may keep (`data_import`).
MINTED_MEMORY_ID = r"^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$"
MemoryId = Annotated[StrictStr, Field(pattern=_MEMORY_ID_PATTERN,
                                      description="the memory's id, as a memory response carries it (a UUID)")]


@dataclass(frozen=True)
class CurrentMemory:
    row: StoredItem
    policies: CompiledPolicies  # the caller's
    value: dict[str, Any]
    attributes: dict[str, Any] | None
    typed: TypedMemory


def current_for_write(items: ItemStore, access: Access, sealer: Sealer, clock: Clock, caller: Caller,
                      memory_id: str, *, use: str) -> CurrentMemory:
    """The live typed memory whose current version is `memory_id` (lower-case), opened, with the
    caller's policies, if they may read and write its namespace and key; `NotFound` otherwise,
    `Taken` for a plain item (`use` names what applies only to typed memories)."""
    row = items.get_by_id(caller.tenant_id, memory_id)
    if row is None or not row.is_live(clock.now()):
        raise _not_found(memory_id)
    try:
        policies = access.authorize(caller, "write", row.namespace, row.key)
    except Forbidden:
        raise _not_found(memory_id) from None
    if not policies.allow("read", list(row.namespace), row.key, caller.policy_context()):
        raise _not_found(memory_id)
    value, attributes = sealer.open_item(row)
    typed = TypedMemory.from_value(value) if value else None
    if value is None or typed is None:
        raise Taken(f"{use} applies to typed memories (a value with a content and a type, as remember writes); "
                    "this memory is a plain item", details={"field": "id"})
    return CurrentMemory(row, policies, value, attributes, typed)


def _not_found(memory_id: str) -> NotFound:
    return NotFound("no current memory with this id", details={"id": memory_id})
