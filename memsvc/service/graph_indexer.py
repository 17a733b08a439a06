"""Changes -> knowledge-graph rows: the indexer's graph step (issue 15).

For each key, only its newest change in a batch counts: a write's indexed texts go through the
`EntityExtractor`, and what it names replaces what the key's earlier version derived; a delete or
an expiry removes it. Idempotent and version-aware, as the vector indexer: a write is derived
only while it is still the key's current row in the item store (a replayed or late older change
is skipped), the graph store refuses to replace a newer version's rows, and a write that lost the
race to a newer change while it was being extracted brings the key to that change's state itself.

The indexer runs this step on a version's write within the version's budget (`apply_each`: the
extraction is checked against it, and a failure is the version's, for the indexer to judge), so a
poison memory is quarantined with the rest of its indexing instead of wedging the step; removals
go through `apply`, and are retried until they succeed (they never depend on the content).

Valid time (issue 25). A derived relation holds while its memory does: each edge is stored with
the memory's interval as `as_of` reads it (`core.validity.interval`: its `valid_from`, else its
creation; its `valid_to`, else its last write when a typed memory was superseded without one).
Stored at indexing time rather than read at traversal time: a hop reads up to `MAX_EDGES_PER_HOP`
edges, and reading and decrypting each one's memory there would cost a traversal a read per edge,
while a supersession (remember, reflection, `outdated` feedback) is a write of the older memory,
which comes through here as any write and re-derives its rows with the closed `valid_to`. So an
ended relation is kept, showing its end, for as long as its memory is; deleting the memory still
removes it. Until the graph step has run, the edges show the interval of the version before.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

from memsvc.core.errors import InvalidArgument, RateLimited
from memsvc.core.graph import (MAX_ENTITIES_PER_MEMORY, MAX_RELATIONS_PER_MEMORY, DerivedMemory, Extraction,
                               GraphEdge, GraphNode, display_name, entity_type, normalise_name, relation_type)
from memsvc.core.index_budget import Stopwatch
from memsvc.core.models import Change, StoredItem, to_rfc3339
from memsvc.core.paths import MAX_INDEXED_FIELDS, extract_texts
from memsvc.core.validity import interval, typed_in
from memsvc.ports import EntityExtractor, GraphStore, IndexBacklog
from memsvc.service.sealing import Sealer

__all__ = ["GraphIndexer", "MAX_EXTRACTED_CHARS"]

log = logging.getLogger(__name__)

_T = TypeVar("_T")
_R = TypeVar("_R")

# What one memory hands the extractor: its indexed texts, joined, cut here (a bounded prompt on
# Bedrock; the local patterns need no more to find a memory's entities).
MAX_EXTRACTED_CHARS = 8000


class GraphIndexer:
    def __init__(self, *, graph: GraphStore, extractor: EntityExtractor, sealer: Sealer, items: IndexBacklog,
                 concurrency: int = 1) -> None:
        self._graph = graph
        self._items = items
        self._extractor = extractor
        self._sealer = sealer
        # Keys applied at once. 1 locally (the pattern extractor is CPU); on AWS each key waits
        # on a Bedrock call (~0.5 s), so a stream batch of 100 would take a minute one by one.
        self._concurrency = concurrency

    def apply(self, changes: Sequence[Change]) -> set[int]:
        """Apply a batch of changes (at least once, in any order); returns the seqs that failed."""
        newest: dict[tuple[str, tuple[str, ...], str], Change] = {}
        for change in changes:
            k = (change.tenant, change.new.namespace, change.new.key)
            if k not in newest or newest[k].new.version < change.new.version:
                newest[k] = change
        latest = list(newest.values())
        applied = self._each(self._applied, latest)
        return {change.seq for change, ok in zip(latest, applied) if not ok}

    def apply_each(self, items: Mapping[int, StoredItem], watch: Callable[[], Stopwatch],
                   texts: Mapping[int, Sequence[str]] | None = None) -> dict[int, Exception]:
        """Bring each write's graph rows to its version, in one write to the graph store. The
        writes are the caller's current rows, read just before (the indexer's batch): each one's
        extraction, checked on a stopwatch `watch` gives as its work starts, from its indexed
        `texts` when the caller has them (decrypted once, by the indexer); every replacement in
        one `replace_many`; then the keys read again at once, and a key that moved on meanwhile
        (rewritten, deleted, expired) brought to its new state. Returns the exception of each that
        failed, by ref, for the caller to judge (throttling included): a replacement's is its
        own; a failed read fails every ref it was for."""
        texts = texts or {}
        failed: dict[int, Exception] = {}
        todo = list(items)

        def derived(ref: int) -> tuple[list[GraphNode], list[GraphEdge]] | Exception:
            stopwatch = watch()
            started = stopwatch.now()
            try:
                rows = self.derive(items[ref], texts.get(ref))
                stopwatch.check("entity extraction", model_seconds=stopwatch.now() - started)
                return rows
            except Exception as exc:
                return exc

        plans: list[tuple[int, list[GraphNode], list[GraphEdge]]] = []
        for ref, rows in zip(todo, self._each(derived, todo)):
            if isinstance(rows, Exception):
                failed[ref] = rows
            else:
                plans.append((ref, *rows))
        try:
            replaced = self._graph.replace_many([(_marker(items[ref]), nodes, edges) for ref, nodes, edges in plans])
        except Exception as exc:
            failed.update(dict.fromkeys((ref for ref, _, _ in plans), exc))
            return failed
        moved = []
        for (ref, _, _), done in zip(plans, replaced):
            if isinstance(done, Exception):
                failed[ref] = done
            elif done:
                moved.append(ref)
        try:
            fresh = self._rows(items[ref] for ref in moved)
        except Exception as exc:
            failed.update(dict.fromkeys(moved, exc))
            return failed
        for ref in moved:  # moved on while we extracted, maybe already applied
            item, now = items[ref], fresh.get(_key(items[ref]))
            if now is None or now.id != item.id:
                try:
                    self._catch_up(item, now)
                except Exception as exc:
                    failed[ref] = exc
        return failed

    def _rows(self, items: Iterable[StoredItem]) -> dict[tuple[str, tuple[str, ...], str], StoredItem]:
        """The keys' current rows in the item store, read a tenant at a time."""
        by_tenant: dict[str, list[tuple[tuple[str, ...], str]]] = {}
        for item in items:
            by_tenant.setdefault(item.tenant, []).append((item.namespace, item.key))
        return {(tenant, *ref): row for tenant, refs in by_tenant.items()
                for ref, row in self._items.get_many(tenant, refs).items()}

    def _each(self, apply: Callable[[_T], _R], todo: list[_T]) -> list[_R]:
        if self._concurrency > 1 and len(todo) > 1:  # keys are independent: their rows never overlap
            with ThreadPoolExecutor(max_workers=min(self._concurrency, len(todo)),
                                    thread_name_prefix="graph-indexer") as pool:
                return list(pool.map(apply, todo))
        return [apply(x) for x in todo]

    def _applied(self, change: Change) -> bool:
        try:
            self.apply_one(change.new)
            return True
        except RateLimited:
            log.warning("graph extraction was throttled; the change will be retried")
        except Exception:
            log.exception("graph indexing failed", extra={"seq": change.seq})
        return False

    def apply_one(self, item: StoredItem) -> None:
        """Bring the key's graph rows to `item`, a write or a tombstone, if it is still current."""
        current = self._items.get(item.tenant, item.namespace, item.key)
        marker = _marker(item)
        if current is None and item.deleted is not None:
            # No row at all: DynamoDB TTL removed it (an expiry leaves no tombstone on AWS), or a
            # purge. The key has no live version, so its rows go (unless a newer write's marker
            # is there: the store keeps those).
            self._graph.remove_memory(marker)
            return
        if current is None or current.id != item.id:
            return  # a newer change moved the key on: that change's turn
        if item.deleted is not None:
            self._graph.remove_memory(marker)
            return
        nodes, edges = self.derive(item)
        if self._graph.replace_memory(marker, nodes, edges):
            fresh = self._items.get(item.tenant, item.namespace, item.key)
            if fresh is None or fresh.id != item.id:  # moved on while we extracted, maybe already applied
                self._catch_up(item, fresh)

    def _catch_up(self, item: StoredItem, fresh: StoredItem | None) -> None:
        if fresh is None:  # purged: no tombstone to go by, so past our own version
            self._graph.remove_memory(_marker(item))
        else:
            self.apply_one(fresh)

    def derive(self, item: StoredItem, texts: Sequence[str] | None = None) -> tuple[list[GraphNode], list[GraphEdge]]:
        """The nodes and edges the item's indexed texts name (none for an item not indexed),
        the edges holding as the item does; `texts`: those texts, when the caller has decrypted
        them already (then the value is opened again only when there are edges to date)."""
        if item.index_fields is False or item.value_ct is None:
            return [], []
        value = None
        if texts is None:
            value = self._sealer.open_value(item) or {}
            texts = [text for _, text in extract_texts(value, item.index_fields, limit=MAX_INDEXED_FIELDS)]
        text = "\n".join(texts)[:MAX_EXTRACTED_CHARS]
        if not text.strip():
            return [], []
        nodes, edges = self.graph_rows(item, self._extractor.extract(text))
        if edges:
            start, end = _interval(item, value if value is not None else self._sealer.open_value(item) or {})
            edges = [dataclasses.replace(e, valid_from=start, valid_to=end) for e in edges]
        return nodes, edges

    def graph_rows(self, item: StoredItem, found: Extraction) -> tuple[list[GraphNode], list[GraphEdge]]:
        """Names normalised and hashed, display names sealed, types mapped into the vocabulary.
        A relation naming an entity not listed adds it as a CONCEPT; self-relations are dropped."""
        typed: dict[str, tuple[str, str]] = {}  # normalised -> (display, type)
        for name, kind in [*found.entities, *((n, "CONCEPT") for s, t, _ in found.relations for n in (s, t))]:
            try:
                key = normalise_name(name)
            except InvalidArgument:  # an empty or overlong name is no entity
                continue
            if key not in typed and len(typed) < MAX_ENTITIES_PER_MEMORY:
                typed[key] = (display_name(name), entity_type(kind))
        ids = dict(zip(typed, self._sealer.entity_ids(item.tenant, typed)))
        nodes = [GraphNode(item.tenant, item.namespace, ids[key], kind,
                           self._sealer.seal_entity_name(item.tenant, ids[key], display))
                 for key, (display, kind) in typed.items()]
        edges: dict[tuple[str, str, str], GraphEdge] = {}
        for source, target, kind in found.relations:
            try:
                a, b = ids.get(normalise_name(source)), ids.get(normalise_name(target))
            except InvalidArgument:
                continue
            if a is None or b is None or a == b or len(edges) >= MAX_RELATIONS_PER_MEMORY:
                continue
            edge = GraphEdge(item.tenant, item.namespace, a, relation_type(kind), b, item.key, item.id)
            edges.setdefault((a, edge.type, b), edge)
        return nodes, list(edges.values())


def _interval(item: StoredItem, value: dict[str, Any]) -> tuple[str | None, str | None]:
    """When the item's relations hold: as the item does."""
    start, end = interval(value, typed=typed_in(item.namespace, value), created_at=item.created_at,
                          updated_at=item.updated_at)
    return to_rfc3339(start), to_rfc3339(end)


def _key(item: StoredItem) -> tuple[str, tuple[str, ...], str]:
    return item.tenant, item.namespace, item.key


def _marker(item: StoredItem) -> DerivedMemory:
    return DerivedMemory(item.tenant, item.namespace, item.key, item.id, item.version)
