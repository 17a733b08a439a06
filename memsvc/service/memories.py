"""The memory use cases: put, get, delete, search, list namespaces, and the admin operations.

Each takes plain values and the caller's identity; none sees a request. Order of checks on
every operation: validate (400) -> authorize (403) -> act (404 ...), so bad input never
reveals whether something exists and never changes anything.
"""

from __future__ import annotations

import base64
import dataclasses
import json
import logging
import random
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from memsvc.core.errors import (
    Conflict,
    ContentTooLong,
    EmbeddingFailed,
    Forbidden,
    InternalError,
    InvalidArgument,
    MemsvcError,
    NotFound,
)
from memsvc.core.filters import Filter, get_path, parse_filter
from memsvc.core.models import Caller, IndexFields, Memory, StoredItem, TimelineEvent, from_epoch_us, to_epoch_us, utc
from memsvc.core.namespaces import match_namespace_pattern, validate_key, validate_namespace
from memsvc.core.paths import extract_texts, validate_index_fields
from memsvc.core.policy import CompiledPolicies
from memsvc.core.timeline import KINDS
from memsvc.ports import Clock, Embedder, EventLog, ItemStore, VectorIndex
from memsvc.service.indexer import MAX_INDEXED_FIELDS, Indexer
from memsvc.service.sealing import Sealer
from memsvc.service.tenant_config import MAX_VALUE_BYTES, PolicyRegistry, SettingsRegistry, TenantSettings

__all__ = ["MemoryService", "PutMemory", "SearchQuery", "EventsQuery", "EventView", "EventPage", "MAX_TTL_SECONDS",
           "MAX_OFFSET"]

log = logging.getLogger(__name__)

MAX_TTL_SECONDS = 10 * 365 * 24 * 3600
MAX_NESTING = 32  # levels of objects/arrays in a value, attributes or filter
MAX_OFFSET = 10_000
MAX_EVENTS_PAGE = 200
_WRITE_ATTEMPTS = 16


def _backoff(attempt: int) -> None:
    """Full jitter between optimistic-write attempts, so racing writers spread out."""
    if attempt:
        time.sleep(random.uniform(0, min(0.2, 0.002 * 2**attempt)))


@dataclass(frozen=True)
class PutMemory:
    namespace: Any
    key: Any
    value: Any
    attributes: Any = None
    ttl_seconds: Any = None
    index_fields: Any = None
    sync_index: bool = False


@dataclass(frozen=True)
class SearchQuery:
    namespace_prefix: Any
    query: str | None = None
    filter: Any = None
    limit: int = 10
    offset: int = 0
    refresh_ttl: bool = False


@dataclass(frozen=True)
class EventsQuery:
    namespace_prefix: Any = ()
    kinds: Any = ()
    after: str | None = None
    before: str | None = None
    after_cursor: str | None = None
    limit: int = 50


@dataclass(frozen=True)
class EventView:
    """A timeline event as its caller sees it: value and attributes opened for add/update."""

    event: TimelineEvent
    value: dict[str, Any] | None
    attributes: dict[str, Any] | None


@dataclass(frozen=True)
class EventPage:
    events: list[EventView]
    after_cursor: str | None  # null when the walk is done
    resume_cursor: str | None  # where to pick up later, to tail the timeline


class MemoryService:
    def __init__(
        self,
        *,
        store: ItemStore,
        vectors: VectorIndex,
        embedder: Embedder,
        sealer: Sealer,
        policies: PolicyRegistry,
        settings: SettingsRegistry,
        clock: Clock,
        events: EventLog,
        on_write: Callable[[], None] = lambda: None,
    ) -> None:
        self._store = store
        self._vectors = vectors
        self._embedder = embedder
        self._sealer = sealer
        self._policies = policies
        self._settings = settings
        self._clock = clock
        self._events = events
        self._on_write = on_write
        self.indexer = Indexer(store, vectors, embedder, sealer)

    # -- writes ------------------------------------------------------------------------------

    def put(self, caller: Caller, req: PutMemory) -> Memory:
        settings = self._settings.get(caller.tenant_id)
        ns = validate_namespace(req.namespace, max_depth=settings.max_depth)
        key = validate_key(req.key)
        if not isinstance(req.value, dict):
            raise InvalidArgument("value must be a JSON object", details={"field": "value"})
        if req.attributes is not None and not isinstance(req.attributes, dict):
            raise InvalidArgument("attributes must be a JSON object or null", details={"field": "attributes"})
        _check_nesting(req.value, "value")
        _check_nesting(req.attributes, "attributes")
        ttl = _validate_ttl(req.ttl_seconds)
        index_fields: IndexFields = validate_index_fields(req.index_fields)
        size = len(_compact(req.value)) + (len(_compact(req.attributes)) if req.attributes is not None else 0)
        if size > MAX_VALUE_BYTES:
            raise ContentTooLong(
                f"value and attributes take {size} bytes as JSON; the limit is {MAX_VALUE_BYTES}",
                max_bytes=MAX_VALUE_BYTES,
            )
        if index_fields is not False:
            n_fields = len(extract_texts(req.value, index_fields))
            if n_fields > MAX_INDEXED_FIELDS:
                raise InvalidArgument(
                    f"value has {n_fields} text fields to index; at most {MAX_INDEXED_FIELDS} are allowed. "
                    "Name the fields worth searching in index_fields, or pass index_fields=false",
                    details={"field": "index_fields", "max_fields": MAX_INDEXED_FIELDS},
                )
        policies = self._policies.get(caller.tenant_id)
        self._authorize(policies, caller, "write", ns, key)
        policy_attributes = policies.extract_attributes(ns, key, req.value, req.attributes, caller.policy_context())

        for attempt in range(_WRITE_ATTEMPTS):
            _backoff(attempt)
            old = self._store.get(caller.tenant_id, ns, key)
            now = self._clock.now()
            live_old = old if old is not None and old.is_live(now) else None
            version = old.version + 1 if old else 1
            item = StoredItem(
                tenant=caller.tenant_id,
                namespace=ns,
                key=key,
                id=str(uuid.uuid4()),
                version=version,
                value_ct=self._sealer.seal_json(caller.tenant_id, ns, key, version, "value", req.value),
                attributes_ct=(
                    None
                    if req.attributes is None
                    else self._sealer.seal_json(caller.tenant_id, ns, key, version, "attributes", req.attributes)
                ),
                policy_attributes=policy_attributes,
                index_fields=index_fields,
                created_at=live_old.created_at if live_old else now,
                updated_at=now,
                expires_at=now + timedelta(seconds=ttl) if ttl else None,
                ttl_seconds=ttl,
            )
            try:
                self._store.write(item, kind="update" if live_old else "add", old=old)
                break
            except Conflict:
                continue  # another writer won the race; upsert on top of its version
        else:
            raise Conflict("too many concurrent writes to this key; retry", details={"key": key})
        try:
            if req.sync_index:
                self.indexer.index_items([item])
        finally:
            self._on_write()  # after inline indexing, so the feed worker finds the version done
        return self._memory(item, value={}, attributes=req.attributes)

    def delete(self, caller: Caller, namespace: Any, key: Any) -> None:
        settings = self._settings.get(caller.tenant_id)
        ns = validate_namespace(namespace, max_depth=settings.max_depth)
        key = validate_key(key)
        self._authorize(self._policies.get(caller.tenant_id), caller, "delete", ns, key)
        self._delete_current(caller.tenant_id, ns, key, expected_id=None)

    def _delete_current(self, tenant: str, ns: tuple[str, ...], key: str, *, expected_id: str | None) -> bool:
        for attempt in range(_WRITE_ATTEMPTS):
            _backoff(attempt)
            old = self._store.get(tenant, ns, key)
            now = self._clock.now()
            # An expired item is already gone (a GET says 404): its expiry, not a delete, is what
            # the timeline records, when the sweeper or TTL gets to it.
            if old is None or not old.is_live(now) or (expected_id and old.id != expected_id):
                return False
            tombstone = old.tombstone(kind="delete", at=now, new_id=str(uuid.uuid4()))
            try:
                self._store.write(tombstone, kind="delete", old=old)
                self._on_write()
                return True
            except Conflict:
                continue
        raise Conflict("too many concurrent writes to this key; retry", details={"key": key})

    # -- reads -------------------------------------------------------------------------------

    def get(self, caller: Caller, namespace: Any, key: Any, *, refresh_ttl: bool = False) -> Memory:
        settings = self._settings.get(caller.tenant_id)
        ns = validate_namespace(namespace, max_depth=settings.max_depth)
        key = validate_key(key)
        self._authorize(self._policies.get(caller.tenant_id), caller, "read", ns, key)
        item = self._store.get(caller.tenant_id, ns, key)
        if item is None or not item.is_live(self._clock.now()):
            raise NotFound("no memory with this namespace and key", details={"namespace": list(ns), "key": key})
        memory = self._open(item)
        return self._refresh(caller.tenant_id, [memory])[0] if refresh_ttl else memory

    def _refresh(self, tenant: str, memories: list[Memory]) -> list[Memory]:
        """Restart each memory's TTL from now (LangGraph's refresh_on_read). No new version: the
        value is unchanged, so nothing is re-indexed; a write racing the refresh wins."""
        now = self._clock.now()
        out = []
        for m in memories:
            if m.ttl_seconds and m.expires_at is not None:
                expires_at = now + timedelta(seconds=m.ttl_seconds)
                if self._store.refresh_expiry(tenant, m.namespace, m.key, version=m.version, expires_at=expires_at):
                    m = dataclasses.replace(m, expires_at=expires_at)
            out.append(m)
        return out

    def search(self, caller: Caller, q: SearchQuery) -> list[Memory]:
        settings = self._settings.get(caller.tenant_id)
        prefix = validate_namespace(q.namespace_prefix, max_depth=settings.max_depth, allow_empty=True)
        _check_nesting(q.filter, "filter")
        user_filter = parse_filter(q.filter if q.filter is not None else {})
        if q.query is not None and (not isinstance(q.query, str) or not q.query.strip()):
            raise InvalidArgument("query must be a non-empty string when given", details={"field": "query"})
        if not 1 <= q.limit <= 100:
            raise InvalidArgument("limit must be between 1 and 100", details={"field": "limit"})
        if not 0 <= q.offset <= MAX_OFFSET:
            raise InvalidArgument(f"offset must be between 0 and {MAX_OFFSET}", details={"field": "offset"})
        scope, scope_filter = self._scope(caller, "search", prefix, user_filter.to_json())
        if q.query is None:
            found = self._filter_search(caller.tenant_id, scope, scope_filter, user_filter, q.limit, q.offset)
        else:
            found = self._semantic_search(caller.tenant_id, scope, scope_filter, user_filter, q)
        return self._refresh(caller.tenant_id, found) if q.refresh_ttl else found

    def _filter_search(self, tenant, scope, scope_filter, user_filter, limit, offset) -> list[Memory]:
        out: list[Memory] = []
        skipped = 0
        for item in self._store.scan_live(tenant, scope, self._clock.now()):
            if not scope_filter.matches(_lookup(item.policy_attributes)):
                continue
            if not user_filter.is_empty:
                on_attributes, on_value = user_filter.split(item.policy_attributes.keys())
                if not on_attributes.matches(_lookup(item.policy_attributes)):
                    continue  # decided on plaintext policy attributes, nothing decrypted
                if not on_value.is_empty:
                    value = self._sealer.open_json(item.tenant, item.namespace, item.key, item.version, "value",
                                                   item.value_ct)
                    if not on_value.matches(_lookup(value)):
                        continue
            if skipped < offset:
                skipped += 1
                continue
            out.append(self._open(item))
            if len(out) >= limit:
                break
        return out

    def _semantic_search(self, tenant, scope, scope_filter, user_filter, q: SearchQuery) -> list[Memory]:
        try:
            vector = self._embedder.embed([q.query])[0]
        except MemsvcError:
            raise
        except Exception as exc:
            raise EmbeddingFailed("the embedding model failed to embed the query") from exc
        wanted = q.offset + q.limit
        top_k = min(self._vectors.max_top_k, max(50, wanted * 4))
        while True:
            hits = self._vectors.query(tenant, scope, scope_filter, vector, top_k)
            best: dict[str, Any] = {}
            for hit in hits:  # best first, so a memory version's first hit is its max-pooled score
                best.setdefault(hit.memory_id, hit)
            items = self._store.get_many(tenant, list({(h.namespace, h.key) for h in best.values()}))
            now = self._clock.now()
            ranked: list[Memory] = []
            for memory_id, hit in best.items():
                item = items.get((hit.namespace, hit.key))
                if item is None or item.id != memory_id or not item.is_live(now):
                    continue  # a version that is not current (its vectors await cleanup), or gone
                memory = self._open(item, score=hit.score)
                if _matches(user_filter, item, memory.value):
                    ranked.append(memory)
            exhausted = len(hits) < top_k and self._vectors.short_page_is_end
            if len(ranked) >= wanted or exhausted or top_k >= self._vectors.max_top_k:
                break
            top_k = min(self._vectors.max_top_k, top_k * 4)
        # Scores equal to 6 decimals are ties (float32 sums differ in the last bits by row order).
        ranked.sort(key=lambda m: (-round(m.score or 0.0, 6), -m.updated_at.timestamp()))
        return ranked[q.offset : wanted]

    def list_namespaces(
        self,
        caller: Caller,
        *,
        prefix: Any = None,
        suffix: Any = None,
        max_depth: int | None = None,
        limit: int = 100,
        offset: int = 0,
    ) -> list[tuple[str, ...]]:
        settings = self._settings.get(caller.tenant_id)
        prefix = _validate_pattern(prefix or [], "prefix", settings)
        suffix = _validate_pattern(suffix or [], "suffix", settings)
        if max_depth is not None and max_depth < 1:
            raise InvalidArgument("max_depth must be at least 1", details={"field": "max_depth"})
        if not 1 <= limit <= 1000:
            raise InvalidArgument("limit must be between 1 and 1000", details={"field": "limit"})
        if not 0 <= offset <= MAX_OFFSET:
            raise InvalidArgument(f"offset must be between 0 and {MAX_OFFSET}", details={"field": "offset"})
        literal = []
        for segment in prefix:
            if segment == "*":
                break
            literal.append(segment)
        scope, _ = self._scope(caller, "list", tuple(literal), {})
        policies = self._policies.get(caller.tenant_id)
        context = caller.policy_context()
        found: set[tuple[str, ...]] = set()
        for ns in self._store.list_namespaces(caller.tenant_id, scope, self._clock.now()):
            if not match_namespace_pattern(ns, prefix, suffix):
                continue
            if not policies.allow("list", list(ns), None, context):
                continue
            found.add(ns[:max_depth] if max_depth else ns)
        return sorted(found)[offset : offset + limit]

    def events(self, caller: Caller, q: EventsQuery) -> EventPage:
        """The timeline under a prefix, scoped like search, one page at a time.

        A page is read one event past `limit`, so `after_cursor` is null exactly when the walk
        has reached the present. The cursor is sealed with the tenant's data key: opaque, and a
        forged, altered or other tenant's cursor fails to open (a 400).
        """
        settings = self._settings.get(caller.tenant_id)
        prefix = validate_namespace(q.namespace_prefix, max_depth=settings.max_depth, allow_empty=True)
        kinds = _validate_kinds(q.kinds)
        after, before = _timestamp(q.after, "after"), _timestamp(q.before, "before")
        if isinstance(q.limit, bool) or not isinstance(q.limit, int) or not 1 <= q.limit <= MAX_EVENTS_PAGE:
            raise InvalidArgument(f"limit must be between 1 and {MAX_EVENTS_PAGE}", details={"field": "limit"})
        start_after = self._open_cursor(caller.tenant_id, q.after_cursor) if q.after_cursor is not None else None
        scope, scope_filter = self._scope(caller, "events", prefix, {})
        page: list[TimelineEvent] = []
        more = False
        for event in self._events.scan(caller.tenant_id, scope, kinds=kinds, start_after=start_after, after=after,
                                       before=before, page_size=min(q.limit + 1, MAX_EVENTS_PAGE)):
            if not scope_filter.matches(_lookup(event.policy_attributes)):
                continue
            if len(page) == q.limit:
                more = True
                break
            page.append(event)
        views = [self._open_event(e) for e in page]
        last = self._cursor(caller.tenant_id, page[-1]) if page else q.after_cursor
        return EventPage(views, after_cursor=last if more else None, resume_cursor=last)

    def _open_event(self, e: TimelineEvent) -> EventView:
        s = self._sealer
        value = attributes = None
        if e.value_ct is not None:
            value = s.open_json(e.tenant, e.namespace, e.key, e.version, "value", e.value_ct)
        if e.attributes_ct is not None:
            attributes = s.open_json(e.tenant, e.namespace, e.key, e.version, "attributes", e.attributes_ct)
        return EventView(e, value, attributes)

    def _cursor(self, tenant: str, event: TimelineEvent) -> str:
        assert event.occurred_at is not None
        sealed = self._sealer.seal_json(tenant, (), "", 0, "events-cursor",
                                        {"s": to_epoch_us(event.occurred_at), "i": event.id})
        return base64.urlsafe_b64encode(sealed).decode().rstrip("=")

    def _open_cursor(self, tenant: str, cursor: Any) -> tuple[Any, str]:
        invalid = InvalidArgument("after_cursor is not a cursor this service gave this caller",
                                  details={"field": "after_cursor"})
        if not isinstance(cursor, str) or not cursor or len(cursor) > 1024:
            raise invalid
        try:
            sealed = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4))
        except ValueError:
            raise invalid from None
        try:
            position = self._sealer.open_json(tenant, (), "", 0, "events-cursor", sealed, create_key=False)
        except (InternalError, LookupError):  # another tenant's, altered, never ours; or this tenant has no key
            raise invalid from None
        return from_epoch_us(int(position["s"])), str(position["i"])

    # -- admin -------------------------------------------------------------------------------

    def get_policies(self, caller: Caller) -> dict[str, Any]:
        policies = self._admin(caller)
        return {"version": policies.bundle.version, "policies": policies.bundle.policies}

    def put_policies(self, caller: Caller, body: Any) -> dict[str, Any]:
        self._admin(caller)
        if not isinstance(body, dict) or not isinstance(body.get("policies"), dict):
            raise InvalidArgument(
                'body must be {"policies": {"<name>.rego": "<source>", ...}}', details={"field": "policies"}
            )
        compiled = self._policies.replace(caller.tenant_id, body["policies"])
        return {"version": compiled.bundle.version, "policies": compiled.bundle.policies}

    def force_delete(self, caller: Caller, memory_id: Any) -> None:
        self._admin(caller)
        if not isinstance(memory_id, str) or not memory_id:
            raise InvalidArgument("id is required", details={"field": "id"})
        item = self._store.get_by_id(caller.tenant_id, memory_id)
        if item is None or not item.is_live(self._clock.now()):
            raise NotFound("no live memory with this id", details={"id": memory_id})
        if not self._delete_current(caller.tenant_id, item.namespace, item.key, expected_id=item.id):
            raise NotFound("no live memory with this id", details={"id": memory_id})

    def index_status(self, caller: Caller) -> dict[str, Any]:
        self._admin(caller)
        return {
            "pending": self._store.pending_index(caller.tenant_id, self._clock.now()),
            "embedding_model": self._embedder.model_id,
            "dimension": self._embedder.dimension,
            "stats": self.indexer.stats(caller.tenant_id),
        }

    def index_trigger(self, caller: Caller, *, batch_size: int = 256, max_items: int = 5000) -> dict[str, Any]:
        """Index the tenant's pending items now, in batches, until none are left or `max_items`."""
        self._admin(caller)
        processed = 0
        while processed < max_items:
            items = self._store.unindexed(caller.tenant_id, self._clock.now(), min(batch_size, max_items - processed))
            if not items:
                break
            self.indexer.index_items(items)
            processed += len(items)
        return {"processed": processed, "pending": self._store.pending_index(caller.tenant_id, self._clock.now())}

    def get_settings(self, caller: Caller) -> TenantSettings:
        self._admin(caller)
        return self._settings.get(caller.tenant_id)

    def put_settings(self, caller: Caller, patch: Any) -> TenantSettings:
        self._admin(caller)
        return self._settings.update(caller.tenant_id, patch)

    # -- helpers -----------------------------------------------------------------------------

    def _admin(self, caller: Caller) -> CompiledPolicies:
        policies = self._policies.get(caller.tenant_id)
        self._authorize(policies, caller, "admin", (), None)
        return policies

    @staticmethod
    def _authorize(policies: CompiledPolicies, caller: Caller, op: str, ns, key) -> None:
        if not policies.allow(op, list(ns), key, caller.policy_context()):
            raise Forbidden(f"not allowed to {op} here")

    def _scope(self, caller: Caller, op: str, prefix: tuple[str, ...], filter_json: dict) -> tuple[tuple[str, ...], Filter]:
        """Apply the filter-injection policy, then authorize the narrowed scope."""
        policies = self._policies.get(caller.tenant_id)
        scope, attribute_filter = policies.inject_search(op, list(prefix), filter_json, caller.policy_context())
        scope = tuple(scope)
        self._authorize(policies, caller, op, scope, None)
        return scope, parse_filter(attribute_filter or {})

    def _open(self, item: StoredItem, *, score: float | None = None) -> Memory:
        s = self._sealer
        value = s.open_json(item.tenant, item.namespace, item.key, item.version, "value", item.value_ct)
        attributes = (
            None
            if item.attributes_ct is None
            else s.open_json(item.tenant, item.namespace, item.key, item.version, "attributes", item.attributes_ct)
        )
        return self._memory(item, value=value, attributes=attributes, score=score)

    @staticmethod
    def _memory(item: StoredItem, *, value, attributes, score=None) -> Memory:
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


def _matches(user_filter: Filter, item: StoredItem, value: dict[str, Any]) -> bool:
    """A filter key names a policy attribute when the item has one by that name (API.md: those
    are pushed down to the stores, decided without decryption); otherwise a dot path into the value."""
    if user_filter.is_empty:
        return True

    def lookup(path: str) -> tuple[bool, Any]:
        if path in item.policy_attributes:
            return True, item.policy_attributes[path]
        return get_path(value, path)

    return user_filter.matches(lookup)


def _lookup(attrs: dict[str, Any]):
    return lambda path: get_path(attrs, path)


def _validate_kinds(kinds: Any) -> frozenset[str]:
    if not isinstance(kinds, (list, tuple)) or not all(isinstance(k, str) for k in kinds):
        raise InvalidArgument("kinds must be a list of event kinds", details={"field": "kinds"})
    unknown = sorted(set(kinds) - KINDS)
    if unknown:
        raise InvalidArgument(f"unknown event kind {unknown[0]!r}; kinds are add, update, delete, expired",
                              details={"field": "kinds", "allowed": sorted(KINDS)})
    return frozenset(kinds) or KINDS


def _timestamp(raw: Any, field: str) -> datetime | None:
    """An RFC 3339 timestamp; one without an offset is taken as UTC."""
    if raw is None:
        return None
    try:
        if not isinstance(raw, str):
            raise ValueError
        return utc(datetime.fromisoformat(raw))
    except (ValueError, OverflowError):  # OverflowError: an offset that moves it past year 1 or 9999
        raise InvalidArgument(f"{field} must be an RFC 3339 timestamp, e.g. 2026-01-01T00:00:00Z",
                              details={"field": field}) from None


def _check_nesting(obj: Any, field: str) -> None:
    stack = [(obj, 1)]
    while stack:
        node, depth = stack.pop()
        if isinstance(node, (dict, list)):
            if depth > MAX_NESTING:
                raise InvalidArgument(
                    f"{field} is nested more than {MAX_NESTING} levels deep",
                    details={"field": field, "max_nesting": MAX_NESTING},
                )
            children = node.values() if isinstance(node, dict) else node
            stack.extend((child, depth + 1) for child in children)


def _validate_ttl(ttl: Any) -> int | None:
    if ttl is None:
        return None
    if isinstance(ttl, bool) or not isinstance(ttl, int) or not 0 < ttl <= MAX_TTL_SECONDS:
        raise InvalidArgument(
            f"ttl_seconds must be an integer between 1 and {MAX_TTL_SECONDS}, or null",
            details={"field": "ttl_seconds"},
        )
    return ttl


def _validate_pattern(segments: Any, field: str, settings: TenantSettings) -> tuple[str, ...]:
    if not isinstance(segments, (list, tuple)) or not all(isinstance(s, str) and s for s in segments):
        raise InvalidArgument(f"{field} must be a list of non-empty strings", details={"field": field})
    if len(segments) > settings.max_depth:
        raise InvalidArgument(f"{field} is deeper than max_depth {settings.max_depth}", details={"field": field})
    return tuple(segments)


def _compact(obj: Any) -> bytes:
    return json.dumps(obj, separators=(",", ":"), ensure_ascii=False).encode()
