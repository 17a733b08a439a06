"""The admin operations (role admin or service): the policy bundle, the settings, force-delete
by id, the indexing backlog, and the quarantine of poison items (their list, and their retry)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Literal

from pydantic import Field, StrictBool, StrictStr, StringConstraints, field_validator

from memsvc.core.errors import InvalidArgument, NotFound
from memsvc.core.models import Caller, StoredItem
from memsvc.core.policy import MAX_BUNDLE_BYTES, MAX_FILES, POLICY_FILE_NAME, CompiledPolicies
from memsvc.core.validation import Command, if_match_tag
from memsvc.ports import Clock, Embedder, IndexBacklog, ItemStore, KeywordIndex
from memsvc.service.access import Access
from memsvc.service.indexer import Indexer
from memsvc.service.memories import Memories
from memsvc.service.tenant_config import SettingsPatch, TenantSettings

__all__ = ["Admin", "PolicyBundle", "PutPoliciesOptions", "IndexStatus", "IndexRun", "IndexRetry", "RetryOutcome",
           "MAX_RETRY_IDS", "MAX_LISTED_QUARANTINED"]

BUNDLE_VERSION = "[0-9A-Za-z]{1,64}"  # "builtin", or 16 hex digits of the sources' sha256
MAX_RETRY_IDS = 100  # ids one retry call names: one request's reads and writes stay well inside a Lambda's time
MAX_LISTED_QUARANTINED = 100  # quarantined versions the status lists; `quarantined` counts them all
_MEMORY_ID = r"^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$"  # as the API gives them: lower case
MemoryId = Annotated[str, StringConstraints(strict=True, pattern=_MEMORY_ID)]

class PolicyBundle(Command):
    """`PUT /admin/v1/memories/policies`."""

    policies: dict[StrictStr, StrictStr] = Field(
        min_length=1, max_length=MAX_FILES,
        description=f"file name (letters, digits, '.', '_' or '-', ending in .rego) -> Rego source; the files "
                    f"together at most {MAX_BUNDLE_BYTES} bytes of UTF-8. The bundle must compile, and must still allow you the admin "
                    "operation (400 naming the file otherwise).",
        json_schema_extra={"propertyNames": {"pattern": POLICY_FILE_NAME}},
    )
    version: Annotated[str, StringConstraints(strict=True, pattern=f"^{BUNDLE_VERSION}$")] | None = Field(
        None, description="the version this bundle replaces, as GET answered it (or `If-Match: <version>`): the "
                          "upload, or the dry run, is refused with 412 PRECONDITION_FAILED when another bundle is in "
                          "force by then, so that two admins editing at once cannot undo each other's change unseen. "
                          "Absent: replace whatever is in force.")


class PutPoliciesOptions(Command):
    """`PUT /admin/v1/memories/policies`'s query."""

    dry_run: StrictBool = Field(False, description=(
        "only compile and test-evaluate the bundle (and check it still allows you the admin operation); store "
        "nothing"))


class IndexRetry(Command):
    """`POST /admin/v1/memories/index/retry`: send quarantined memories to the indexer again."""

    ids: list[MemoryId] = Field(
        min_length=1, max_length=MAX_RETRY_IDS,
        description=f"ids of quarantined memories, lower-case UUIDs as `/index/status` lists them; "
                    f"1..{MAX_RETRY_IDS}, each once",
        json_schema_extra={"uniqueItems": True})

    @field_validator("ids")
    @classmethod
    def _distinct(cls, ids: list[str]) -> list[str]:
        if len(set(ids)) != len(ids):
            raise ValueError("names an id more than once")
        return ids


@dataclass(frozen=True)
class IndexStatus:
    pending: int
    embedding_model: str
    dimension: int
    stats: dict[str, float]
    quarantined: int
    quarantined_items: list[StoredItem]  # the oldest quarantined versions (`IndexBacklog.quarantined`)


@dataclass(frozen=True)
class IndexRun:
    processed: int
    pending: int
    quarantined: int


@dataclass(frozen=True)
class RetryOutcome:
    """Per id, as batch APIs answer: sent to the indexer again, or why not."""

    retried: list[str]
    failed: list[tuple[str, Literal["NOT_FOUND", "NOT_QUARANTINED"]]]


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

    def require_admin(self, caller: Caller) -> None:
        """`Forbidden` unless the tenant's policies make the caller an admin (every /admin/ route)."""
        self._access.admin(caller)

    def get_policies(self, caller: Caller) -> CompiledPolicies:
        return self._access.admin(caller)

    def put_policies(self, caller: Caller, bundle: PolicyBundle, *, dry_run: bool = False,
                     if_match: str | None = None) -> CompiledPolicies:
        """The bundle now in force; with dry_run, the bundle checked as a put would, and not stored.
        The version replaced: `if_match` (the header's text) or the bundle's `version`."""
        self._access.admin(caller)
        replacing = _replaced_version(if_match, bundle.version)
        if dry_run:
            return self._access.policies.check_replacing(caller.tenant_id, bundle.policies, caller.policy_context(),
                                                         replacing)
        return self._access.policies.replace(caller.tenant_id, bundle.policies, caller.policy_context(),
                                             replacing=replacing)

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
        now = self._clock.now()
        count, items = self._backlog.quarantined(caller.tenant_id, now, MAX_LISTED_QUARANTINED)
        return IndexStatus(
            pending=self._backlog.pending_index(caller.tenant_id, now),
            embedding_model=self._embedder.model_id,
            dimension=self._embedder.dimension,
            stats=self._indexer.stats(caller.tenant_id),
            quarantined=count,
            quarantined_items=items,
        )

    def index_trigger(self, caller: Caller, *, batch_size: int = 256, max_items: int = 5000) -> IndexRun:
        """Index the tenant's pending items now, in batches, until none are left, `max_items`, or a
        batch leaves some to retry later (a dependency is failing); a poison one is quarantined."""
        self._access.admin(caller)
        processed, quarantined, _ = self._indexer.index_backlog(caller.tenant_id, self._clock.now(),
                                                                batch_size=batch_size, max_items=max_items)
        return IndexRun(processed, self._backlog.pending_index(caller.tenant_id, self._clock.now()), quarantined)

    def index_retry(self, caller: Caller, cmd: IndexRetry) -> RetryOutcome:
        """Take each named version out of quarantine and hand it to the indexer again, through the
        change feed (the indexer's own budget and isolation apply, never this request's): an
        `index_retry` change, indexed within seconds, or quarantined again with a new event."""
        self._access.admin(caller)
        now = self._clock.now()
        retried: list[str] = []
        failed: list[tuple[str, Literal["NOT_FOUND", "NOT_QUARANTINED"]]] = []
        for memory_id in cmd.ids:
            item = self._items.get_by_id(caller.tenant_id, memory_id)
            if item is None or not item.is_live(now):
                failed.append((memory_id, "NOT_FOUND"))
            elif item.index_error is None or not self._backlog.release(item):
                failed.append((memory_id, "NOT_QUARANTINED"))
            else:
                retried.append(memory_id)
        return RetryOutcome(retried, failed)


def _replaced_version(header: str | None, stated: str | None) -> str | None:
    """The bundle version a policy upload replaces: `If-Match`'s (`v`, `"v"` or `W/"v"`; `*` adds no
    condition) or the body's `version`; both must agree."""
    tagged = if_match_tag(header, BUNDLE_VERSION, 'a bundle version, as "builtin" or 16 hex digits')
    if tagged is not None and stated is not None and tagged != stated:
        raise InvalidArgument("If-Match and the body's version name different versions", details={"field": "version"})
    return tagged or stated
