"""Memory CRUD: put, get, delete, and the TTL refresh that LangGraph's `refresh_on_read` needs."""

from __future__ import annotations

import dataclasses
import json
import uuid
from collections.abc import Callable, Sequence
from datetime import datetime, timedelta
from typing import Annotated, Any

from pydantic import Field, StrictBool, StrictStr

from memsvc.core import slots
from memsvc.core.contention import WRITE_ATTEMPTS, backoff
from memsvc.core.errors import Conflict, ContentTooLong, InvalidArgument, NotFound
from memsvc.core.models import Caller, IndexFields, Memory, StoredItem, WriteAction, to_rfc3339
from memsvc.core.namespaces import MAX_KEY_BYTES, validate_key
from memsvc.core.paths import MAX_INDEX_FIELDS, MAX_INDEXED_FIELDS, extract_texts, validate_index_fields
from memsvc.core.timestamps import parse_rfc3339
from memsvc.core.typed_memory import TypedMemory
from memsvc.core.validation import Command, Integer, Namespace, NoIndexing
from memsvc.core.validity import interval, typed_in
from memsvc.ports import Clock, ItemStore
from memsvc.service.access import Access
from memsvc.service.indexer import Indexer
from memsvc.service.sealing import Sealer
from memsvc.service.tenant_config import MAX_VALUE_BYTES

__all__ = ["Memories", "PutMemory", "Expected", "open_memory", "memory_of", "with_counters", "check_nesting",
           "MAX_TTL_SECONDS", "MAX_NESTING"]

MAX_TTL_SECONDS = 10 * 365 * 24 * 3600
MAX_NESTING = 32  # levels of objects/arrays in a value, attributes or filter
KEY_RULES = f"non-empty, at most {MAX_KEY_BYTES} bytes of UTF-8"
VALUE_RULES = (f"at most {MAX_VALUE_BYTES} bytes as compact JSON together with attributes (413), nested at most "
               f"{MAX_NESTING} levels, and with at most {MAX_INDEXED_FIELDS} text fields to index")
# The path grammar of `core.paths` (dot-separated names, each with selectors [N], [-N] or [*]): it
# checks the paths itself, with a message that shows the grammar.
_PATH_SEGMENT = r"[^.\[\]]+(\[(\*|-?[0-9]+)\])*"
IndexPath = Annotated[StrictStr, Field(json_schema_extra={"pattern": rf"^{_PATH_SEGMENT}(\.{_PATH_SEGMENT})*$"})]
# No path at all is `false` (nothing embedded), as a LangGraph store reads `index=[]`.
IndexPaths = Annotated[list[IndexPath], Field(max_length=MAX_INDEX_FIELDS)]
# Optimistic attempts before a 409. In one full test run on a loaded 2-core box, one of 400
# writers racing on one key lost 16 attempts in a row; 32 (each at most 0.2 s apart) give it
# twice the room before a caller sees a retryable 409.


class PutMemory(Command):
    """`PUT /v1/memories`."""

    namespace: Namespace
    key: StrictStr = Field(min_length=1, max_length=MAX_KEY_BYTES, description=KEY_RULES)
    value: dict[StrictStr, Any] = Field(description=VALUE_RULES)
    attributes: dict[StrictStr, Any] | None = Field(None, description=f"nested at most {MAX_NESTING} levels")
    ttl_seconds: Integer | None = Field(None, ge=1, le=MAX_TTL_SECONDS, description="null = never expires")
    index_fields: IndexPaths | NoIndexing | None = Field(
        None, description="paths to embed (a.b, arr[*].c, log[-1]); false (or []) = not indexed; default every string leaf")
    sync_index: StrictBool = Field(False, description="return only after the item's vectors are written")


@dataclasses.dataclass(frozen=True)
class Expected:
    """The row a conditional put expects to find under its key (None: no row at all)."""

    row: StoredItem | None


class Memories:
    def __init__(self, *, items: ItemStore, sealer: Sealer, access: Access, clock: Clock, indexer: Indexer,
                 on_write: Callable[[], None] = lambda: None) -> None:
        self._items = items
        self._sealer = sealer
        self._access = access
        self._clock = clock
        self._indexer = indexer
        self._on_write = on_write  # wakes the local feed workers; nothing on AWS (the stream does)

    def put(self, caller: Caller, cmd: PutMemory, *, only_over: Expected | None = None) -> Memory:
        """Upsert over whatever version is there; with `only_over`, write only if the key is still
        at that row (absent when its `row` is None) and raise `Conflict` otherwise, so a caller
        that decided from what it read learns it lost a race instead of overwriting."""
        ns = self._access.namespace_to_write(caller, cmd.namespace)
        key = validate_key(cmd.key)
        check_nesting(cmd.value, "value")
        check_nesting(cmd.attributes, "attributes")
        index_fields = validate_index_fields(cmd.index_fields)
        size = len(_compact(cmd.value)) + (len(_compact(cmd.attributes)) if cmd.attributes is not None else 0)
        if size > MAX_VALUE_BYTES:
            raise ContentTooLong(f"value and attributes take {size} bytes as JSON; the limit is {MAX_VALUE_BYTES}",
                                 max_bytes=MAX_VALUE_BYTES)
        if index_fields is not False:
            if len(extract_texts(cmd.value, index_fields, limit=MAX_INDEXED_FIELDS + 1)) > MAX_INDEXED_FIELDS:
                raise InvalidArgument(
                    f"value has more than {MAX_INDEXED_FIELDS} text fields to index. "
                    "Name the fields worth searching in index_fields, or pass index_fields=false",
                    details={"field": "index_fields", "max_fields": MAX_INDEXED_FIELDS},
                )
        policies = self._access.authorize(caller, "write", ns, key)
        self._access.govern(caller, ns, key, cmd.value, cmd.attributes)
        policy_attributes = policies.extract_attributes(ns, key, cmd.value, cmd.attributes, caller.policy_context())

        for attempt in range(WRITE_ATTEMPTS):
            backoff(attempt)
            old = self._items.get(caller.tenant_id, ns, key) if only_over is None else only_over.row
            try:
                item = self.write_version(caller.tenant_id, ns, key, cmd.value, old=old, attributes=cmd.attributes,
                                          policy_attributes=policy_attributes, index_fields=index_fields,
                                          ttl_seconds=cmd.ttl_seconds)
                break
            except Conflict:
                if only_over is not None:
                    raise
                continue  # another writer won the race; upsert on top of its version
        else:
            raise Conflict("too many concurrent writes to this key; retry", details={"key": key})
        self.settle([item], sync_index=cmd.sync_index)
        return memory_of(item, value={}, attributes=cmd.attributes)

    def write_version(self, tenant: str, ns: tuple[str, ...], key: str, value: dict[str, Any], *,
                      old: StoredItem | None, attributes: dict[str, Any] | None, policy_attributes: dict[str, Any],
                      index_fields: IndexFields, ttl_seconds: int | None,
                      action: WriteAction | None = None) -> StoredItem:
        """Write `value` as the key's next version, if the key is still at `old` (absent when None);
        raises `Conflict` otherwise. The expiry restarts from now (`ttl_seconds`)."""
        item = self.build_version(tenant, ns, key, value, old=old, attributes=attributes,
                                  policy_attributes=policy_attributes, index_fields=index_fields,
                                  ttl_seconds=ttl_seconds, action=action)
        live_old = old if old is not None and old.is_live(item.updated_at) else None
        self._items.write(item, kind="update" if live_old else "add", old=old)
        return item

    def build_version(self, tenant: str, ns: tuple[str, ...], key: str, value: dict[str, Any], *,
                      old: StoredItem | None, attributes: dict[str, Any] | None, policy_attributes: dict[str, Any],
                      index_fields: IndexFields, ttl_seconds: int | None,
                      action: WriteAction | None = None) -> StoredItem:
        """The key's next version after `old`, sealed, not yet written (a store that writes it
        in a transaction of its own takes it from here)."""
        now = self._clock.now()
        live_old = old if old is not None and old.is_live(now) else None
        version = old.version + 1 if old else 1
        access_count, last_accessed_at = _carried_counters(live_old, value)
        sealed = self._sealer.seal_item(tenant, ns, key, version, value=value, attributes=attributes)
        created_at = live_old.created_at if live_old else now
        valid_start, valid_end = interval(value, typed=typed_in(ns, value), created_at=created_at, updated_at=now)
        return StoredItem(
            tenant=tenant,
            namespace=ns,
            key=key,
            id=str(uuid.uuid4()),
            version=version,
            value_ct=sealed.value_ct,
            attributes_ct=sealed.attributes_ct,
            policy_attributes=policy_attributes,
            index_fields=index_fields,
            created_at=created_at,
            updated_at=now,
            expires_at=now + timedelta(seconds=ttl_seconds) if ttl_seconds else None,
            ttl_seconds=ttl_seconds,
            action=action,
            access_count=access_count,
            last_accessed_at=last_accessed_at,
            valid_start=valid_start,
            valid_end=valid_end,
        )

    def settle(self, items: list[StoredItem], *, sync_index: bool) -> None:
        """After writes: index them now when asked (`sync_index`), then wake the feed workers."""
        try:
            if sync_index and items:
                with slots.released():  # mostly the embedding model's time: the request's slot serves others
                    self._indexer.index_items(items)
        finally:
            self._on_write()  # after inline indexing, so the feed worker finds the version done

    def get(self, caller: Caller, namespace: Sequence[str], key: str, *, refresh_ttl: bool = False) -> Memory:
        ns = self._access.namespace_to_read(caller, namespace)
        key = validate_key(key)
        self._access.authorize(caller, "read", ns, key)
        item = self._items.get(caller.tenant_id, ns, key)
        if item is None or not item.is_live(self._clock.now()):
            raise NotFound("no memory with this namespace and key", details={"namespace": list(ns), "key": key})
        memory = open_memory(self._sealer, item)
        return self.refresh(caller.tenant_id, [memory])[0] if refresh_ttl else memory

    def delete(self, caller: Caller, namespace: Sequence[str], key: str) -> None:
        ns = self._access.namespace_to_read(caller, namespace)
        key = validate_key(key)
        self._access.authorize(caller, "delete", ns, key)
        self.delete_current(caller.tenant_id, ns, key, expected_id=None)

    def delete_current(self, tenant: str, ns: tuple[str, ...], key: str, *, expected_id: str | None) -> bool:
        """Tombstone the key's live version (only if it is `expected_id`, when given). False when
        there was nothing live to delete."""
        for attempt in range(WRITE_ATTEMPTS):
            backoff(attempt)
            old = self._items.get(tenant, ns, key)
            now = self._clock.now()
            # An expired item is already gone (a GET says 404): its expiry, not a delete, is what
            # the timeline records, when the sweeper or TTL gets to it.
            if old is None or not old.is_live(now) or (expected_id and old.id != expected_id):
                return False
            tombstone = old.tombstone(kind="delete", at=now, new_id=str(uuid.uuid4()))
            try:
                self._items.write(tombstone, kind="delete", old=old)
                self._on_write()
                return True
            except Conflict:
                continue
        raise Conflict("too many concurrent writes to this key; retry", details={"key": key})

    def refresh(self, tenant: str, memories: list[Memory]) -> list[Memory]:
        """Restart each memory's TTL from now (LangGraph's refresh_on_read). No new version: the
        value is unchanged, so nothing is re-indexed; a write racing the refresh wins."""
        now = self._clock.now()
        out = []
        for m in memories:
            if m.ttl_seconds and m.expires_at is not None:
                expires_at = now + timedelta(seconds=m.ttl_seconds)
                if self._items.refresh_expiry(tenant, m.namespace, m.key, version=m.version, expires_at=expires_at):
                    m = dataclasses.replace(m, expires_at=expires_at)
            out.append(m)
        return out


def open_memory(sealer: Sealer, item: StoredItem, *, score: float | None = None) -> Memory:
    value, attributes = sealer.open_item(item)
    return memory_of(item, value=with_counters(value or {}, item), attributes=attributes, score=score)


def with_counters(value: dict[str, Any], item: StoredItem) -> dict[str, Any]:
    """A recalled typed memory's value shows the row's access counters (API-AGENT.md: bookkeeping
    the service maintains). A value never recalled reads back exactly as written."""
    if item.access_count and TypedMemory.from_value(value) is not None:
        return {**value, "access_count": item.access_count, "last_accessed_at": to_rfc3339(item.last_accessed_at)}
    return value


def _carried_counters(live_old: StoredItem | None, value: dict[str, Any]) -> tuple[int, datetime | None]:
    """A new version of a key keeps its access counters. A typed memory's value may carry higher
    ones (a consolidating write counts an access, seed 002); the higher of the two is kept."""
    count, last = (live_old.access_count, live_old.last_accessed_at) if live_old else (0, None)
    typed = TypedMemory.from_value(value)
    if typed is not None:
        count = max(count, typed.access_count)
        try:
            stated = parse_rfc3339(typed.last_accessed_at) if typed.last_accessed_at else None
        except (ValueError, OverflowError):
            stated = None
        if stated is not None and (last is None or stated > last):
            last = stated
    return count, last


def memory_of(item: StoredItem, *, value: dict[str, Any], attributes: dict[str, Any] | None,
              score: float | None = None) -> Memory:
    return Memory(
        id=item.id,
        namespace=item.namespace,
        key=item.key,
        value=value,
        attributes=attributes,
        created_at=item.created_at,
        updated_at=item.updated_at,
        expires_at=item.expires_at,
        version=item.version,
        score=score,
        ttl_seconds=item.ttl_seconds,
    )


def check_nesting(obj: Any, field: str) -> None:
    """Refuses `obj` nested more than `MAX_NESTING` levels (`InvalidArgument`). O(size of `obj`),
    without recursion: what runs after it may recurse as deep as this allows."""
    stack = [(obj, 1)]
    while stack:
        node, depth = stack.pop()
        if isinstance(node, (dict, list)):
            if depth > MAX_NESTING:
                raise InvalidArgument(f"{field} is nested more than {MAX_NESTING} levels deep",
                                      details={"field": field, "max_nesting": MAX_NESTING})
            children = node.values() if isinstance(node, dict) else node
            stack.extend((child, depth + 1) for child in children)


def _compact(obj: Any) -> bytes:
    return json.dumps(obj, separators=(",", ":"), ensure_ascii=False).encode()
