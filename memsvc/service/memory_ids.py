"""A typed memory named by the id of one of its versions, as feedback and restore take it: found
only while that version is current, and only by a caller who may read and write it. Anyone else
gets the same `404` as for an id that names nothing, so another user's or tenant's memory is
never revealed."""

from __future__ import annotations

from memsvc.core.errors import Forbidden, NotFound
from memsvc.core.models import Caller, StoredItem
from memsvc.core.policy import CompiledPolicies
from memsvc.ports import Clock, ItemStore
from memsvc.service.access import Access

__all__ = ["MEMORY_ID_PATTERN", "current_for_write"]

# A memory id is a UUID (`Memories.build_version`); anything else names nothing, and is refused
# before a lookup (a DynamoDB key has a size limit a long string would pass).
MEMORY_ID_PATTERN = r"^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$"


def current_for_write(items: ItemStore, access: Access, clock: Clock, caller: Caller,
                      memory_id: str) -> tuple[StoredItem, CompiledPolicies]:
    """The live row whose current version is `memory_id` (lower-case), with the caller's policies,
    if they may read and write its namespace and key; `NotFound` otherwise."""
    row = items.get_by_id(caller.tenant_id, memory_id)
    if row is None or not row.is_live(clock.now()):
        raise _not_found(memory_id)
    try:
        policies = access.authorize(caller, "write", row.namespace, row.key)
    except Forbidden:
        raise _not_found(memory_id) from None
    if not policies.allow("read", list(row.namespace), row.key, caller.policy_context()):
        raise _not_found(memory_id)
    return row, policies


def _not_found(memory_id: str) -> NotFound:
    return NotFound("no current memory with this id", details={"id": memory_id})
