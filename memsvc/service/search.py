"""Search (by filter, or ranked by meaning) and namespace listing.

Both search modes share one `FilterPlan`: what is pushed down to the stores, what is decided on
an item's plaintext policy attributes, and what needs its value decrypted. An item that the
plaintext attributes reject is never decrypted.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from pydantic import Field, StrictBool, StrictInt, StrictStr

from memsvc.core.errors import EmbeddingFailed, InvalidArgument, MemsvcError
from memsvc.core.filters import Filter, lookup_in, parse_filter
from memsvc.core.models import Caller, Memory, StoredItem
from memsvc.core.namespaces import match_namespace_pattern
from memsvc.core.validation import Command, NamespacePrefix, Segment
from memsvc.ports import Clock, Embedder, ItemStore, VectorIndex
from memsvc.service.access import Access
from memsvc.service.memories import Memories, check_nesting, open_memory
from memsvc.service.sealing import Sealer

__all__ = ["Search", "SearchQuery", "ListNamespaces", "FilterPlan", "MAX_OFFSET"]

MAX_OFFSET = 10_000


class SearchQuery(Command):
    """`POST /v1/memories/search`."""

    namespace_prefix: NamespacePrefix
    query: StrictStr | None = Field(None, pattern=r"\S", description="rank by meaning; omit to filter only")
    filter: dict[StrictStr, Any] | None = None
    limit: StrictInt = Field(10, ge=1, le=100)
    offset: StrictInt = Field(0, ge=0, le=MAX_OFFSET)
    refresh_ttl: StrictBool = Field(False, description="restart the TTL of every returned item (LangGraph refresh_on_read)")


class ListNamespaces(Command):
    """`GET /v1/memories/namespaces`."""

    prefix: list[Segment] = Field([], description="Prefix segment ('*' matches one segment); repeat per segment")
    suffix: list[Segment] = Field([], description="Suffix segment ('*' matches one segment); repeat per segment")
    max_depth: StrictInt | None = Field(None, ge=1, description="Truncate returned namespaces to this depth")
    limit: StrictInt = Field(100, ge=1, le=1000, description="Page size")
    offset: StrictInt = Field(0, ge=0, le=MAX_OFFSET, description="Namespaces to skip")


@dataclass(frozen=True)
class FilterPlan:
    """How a search decides its filter.

    `scope` is what the filter-injection policy added (conditions on policy attributes): it is
    pushed down to the item store's and vector index's own filtering. A condition of the
    caller's `user` filter is decided on the item's plaintext policy attributes when the item has
    an attribute by that name (API.md), and otherwise needs the decrypted value.
    """

    scope: Filter
    user: Filter

    def value_condition(self, item: StoredItem) -> Filter | None:
        """What is left to check on the decrypted value; None when the item's plaintext policy
        attributes already reject it (then nothing needs decrypting)."""
        attributes = lookup_in(item.policy_attributes)
        if not self.scope.matches(attributes):
            return None
        if self.user.is_empty:
            return self.user
        on_attributes, on_value = self.user.split(item.policy_attributes.keys())
        return on_value if on_attributes.matches(attributes) else None


class Search:
    def __init__(self, *, items: ItemStore, vectors: VectorIndex, embedder: Embedder, sealer: Sealer,
                 access: Access, clock: Clock, memories: Memories) -> None:
        self._items = items
        self._vectors = vectors
        self._embedder = embedder
        self._sealer = sealer
        self._access = access
        self._clock = clock
        self._memories = memories

    def search(self, caller: Caller, q: SearchQuery) -> list[Memory]:
        prefix = self._access.namespace_to_read(caller, q.namespace_prefix, allow_empty=True)
        check_nesting(q.filter, "filter")
        user_filter = parse_filter(q.filter if q.filter is not None else {})
        scope, scope_filter = self._access.scope(caller, "search", prefix, user_filter.to_json())
        plan = FilterPlan(scope_filter, user_filter)
        if q.query is None:
            found = self._by_filter(caller.tenant_id, scope, plan, q.limit, q.offset)
        else:
            found = self._by_meaning(caller.tenant_id, scope, plan, q)
        return self._memories.refresh(caller.tenant_id, found) if q.refresh_ttl else found

    def _admit(self, plan: FilterPlan, item: StoredItem, score: float | None = None) -> Memory | None:
        """The item opened, if the plan admits it. A value is decrypted only for an item that its
        plaintext attributes admit; it is then opened once, for the check and the answer."""
        condition = plan.value_condition(item)
        if condition is None:
            return None
        memory = open_memory(self._sealer, item, score=score)
        return memory if condition.matches(lookup_in(memory.value)) else None

    def _by_filter(self, tenant: str, scope: tuple[str, ...], plan: FilterPlan, limit: int,
                   offset: int) -> list[Memory]:
        out: list[Memory] = []
        admitted = (self._admit(plan, item) for item in self._items.scan_live(tenant, scope, self._clock.now()))
        for n, memory in enumerate(m for m in admitted if m is not None):
            if n >= offset:
                out.append(memory)
                if len(out) >= limit:
                    break
        return out

    def _by_meaning(self, tenant: str, scope: tuple[str, ...], plan: FilterPlan, q: SearchQuery) -> list[Memory]:
        try:
            vector = self._embedder.embed([q.query])[0]
        except MemsvcError:
            raise
        except Exception as exc:
            raise EmbeddingFailed("the embedding model failed to embed the query") from exc
        wanted = q.offset + q.limit
        top_k = min(self._vectors.max_top_k, max(50, wanted * 4))
        decided: dict[str, Memory | None] = {}  # by memory id: a wider query never opens one twice
        while True:
            hits = self._vectors.query(tenant, scope, plan.scope, vector, top_k)
            best: dict[str, Any] = {}
            for hit in hits:  # best first, so a memory version's first hit is its max-pooled score
                if hit.memory_id not in decided:
                    best.setdefault(hit.memory_id, hit)
            items = self._items.get_many(tenant, list({(h.namespace, h.key) for h in best.values()}))
            now = self._clock.now()
            for memory_id, hit in best.items():
                item = items.get((hit.namespace, hit.key))
                # Not current: a version whose vectors await cleanup, or one deleted or expired.
                current = item is not None and item.id == memory_id and item.is_live(now)
                decided[memory_id] = self._admit(plan, item, score=hit.score) if current else None
            ranked = [m for m in decided.values() if m is not None]
            # A short page ends the search only where the index says so: S3 Vectors may return
            # fewer than top_k hits when a filter applies, with more to be found.
            exhausted = len(hits) < top_k and self._vectors.short_page_is_end
            if len(ranked) >= wanted or exhausted or top_k >= self._vectors.max_top_k:
                break
            top_k = min(self._vectors.max_top_k, top_k * 4)
        # Scores equal to 6 decimals are ties (float32 sums differ in the last bits by row order).
        ranked.sort(key=lambda m: (-round(m.score or 0.0, 6), -m.updated_at.timestamp()))
        return ranked[q.offset : wanted]

    def list_namespaces(self, caller: Caller, q: ListNamespaces) -> list[tuple[str, ...]]:
        depth = self._access.settings_of(caller).reachable_depth
        for name, pattern in (("prefix", q.prefix), ("suffix", q.suffix)):
            if len(pattern) > depth:
                raise _too_deep(name, depth)
        literal = []
        for segment in q.prefix:
            if segment == "*":
                break
            literal.append(segment)
        scope, _ = self._access.scope(caller, "list", tuple(literal), {})
        policies = self._access.policies.get(caller.tenant_id)
        context = caller.policy_context()
        found: set[tuple[str, ...]] = set()
        for ns in self._items.list_namespaces(caller.tenant_id, scope, self._clock.now()):
            if not match_namespace_pattern(ns, tuple(q.prefix), tuple(q.suffix)):
                continue
            if not policies.allow("list", list(ns), None, context):
                continue
            found.add(ns[: q.max_depth] if q.max_depth else ns)
        return sorted(found)[q.offset : q.offset + q.limit]


def _too_deep(field: str, depth: int) -> InvalidArgument:
    return InvalidArgument(f"{field} has more segments than any namespace of this tenant can ({depth})",
                           details={"field": field})

