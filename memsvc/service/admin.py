"""The admin operations (role admin or service): the policy bundle, the settings, force-delete
by id, and the indexing backlog."""

from __future__ import annotations

from dataclasses import dataclass

from pydantic import Field, StrictStr

from memsvc.core.errors import NotFound
from memsvc.core.models import Caller
from memsvc.core.policy import MAX_FILES, POLICY_FILE_NAME, CompiledPolicies
from memsvc.core.validation import Command
from memsvc.ports import Clock, Embedder, IndexBacklog, ItemStore, KeywordIndex
from memsvc.service.access import Access
from memsvc.service.indexer import Indexer
from memsvc.service.memories import Memories
from memsvc.service.tenant_config import SettingsPatch, TenantSettings

__all__ = ["Admin", "PolicyBundle", "IndexStatus", "IndexRun"]

class PolicyBundle(Command):
    """`PUT /admin/v1/memories/policies`."""

    policies: dict[StrictStr, StrictStr] = Field(
        min_length=1, max_length=MAX_FILES,
        description="file name (letters, digits, '.', '_' or '-', ending in .rego) -> Rego source",
        json_schema_extra={"propertyNames": {"pattern": POLICY_FILE_NAME}},
    )


@dataclass(frozen=True)
class IndexStatus:
    pending: int
    embedding_model: str
    dimension: int
    stats: dict[str, float]


@dataclass(frozen=True)
class IndexRun:
    processed: int
    pending: int


class Admin:
    def __init__(self, *, items: ItemStore, backlog: IndexBacklog, access: Access, clock: Clock,
                 memories: Memories, indexer: Indexer, embedder: Embedder, keywords: KeywordIndex) -> None:
        self._items = items
        self._backlog = backlog
        self._access = access
        self._clock = clock
        self._memories = memories
        self._indexer = indexer
        self._embedder = embedder
        self._keywords = keywords

    def get_policies(self, caller: Caller) -> CompiledPolicies:
        return self._access.admin(caller)

    def put_policies(self, caller: Caller, bundle: PolicyBundle) -> CompiledPolicies:
        self._access.admin(caller)
        return self._access.policies.replace(caller.tenant_id, bundle.policies, caller.policy_context())

    def get_settings(self, caller: Caller) -> TenantSettings:
        self._access.admin(caller)
        return self._access.settings_of(caller)

    def put_settings(self, caller: Caller, patch: SettingsPatch) -> TenantSettings:
        self._access.admin(caller)
        updated = self._access.settings.update(caller.tenant_id, patch)
        if not updated.keyword_index:  # off means no keyword index at rest, at once (and again on every put)
            self._keywords.delete_tenant(caller.tenant_id)
        return updated

    def force_delete(self, caller: Caller, memory_id: str) -> None:
        self._access.admin(caller)
        item = self._items.get_by_id(caller.tenant_id, memory_id)
        if (item is None or not item.is_live(self._clock.now())
                or not self._memories.delete_current(caller.tenant_id, item.namespace, item.key, expected_id=item.id)):
            raise NotFound("no live memory with this id", details={"id": memory_id})

    def index_status(self, caller: Caller) -> IndexStatus:
        self._access.admin(caller)
        return IndexStatus(
            pending=self._backlog.pending_index(caller.tenant_id, self._clock.now()),
            embedding_model=self._embedder.model_id,
            dimension=self._embedder.dimension,
            stats=self._indexer.stats(caller.tenant_id),
        )

    def index_trigger(self, caller: Caller, *, batch_size: int = 256, max_items: int = 5000) -> IndexRun:
        """Index the tenant's pending items now, in batches, until none are left or `max_items`."""
        self._access.admin(caller)
        processed = 0
        while processed < max_items:
            items = self._backlog.unindexed(caller.tenant_id, self._clock.now(), min(batch_size, max_items - processed))
            if not items:
                break
            self._indexer.index_items(items)
            processed += len(items)
        return IndexRun(processed, self._backlog.pending_index(caller.tenant_id, self._clock.now()))
