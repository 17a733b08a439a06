"""The knowledge graph's queries and explicit writes (issue 15, seed 001 "Dynamic Graph Reasoning").

Reads are scoped and authorised like a search (`Access.scope` with operation `search`): a caller
sees the graph rows in namespaces under the prefix it may search, and the memories they lead to
only if the prefix's attribute filter admits them. Writes are authorised like a `PUT` into their
namespace, and the tenant's governance policy sees the entity's name.

Distances. A related memory is `hops` away from where the query starts: 1 when it mentions a
start entity (from a memory: an entity of that memory), plus one per relation edge between a
start entity and the entity it mentions. A path's `hops` counts relation edges between entities.

Valid time (issue 25). A relation holds over [valid_from, valid_to): an explicit one as its
`PUT` said (from the write when it named no start), a derived one as the memory it came from
(`GraphIndexer` stores that on the edge). Without `as_of` a traversal walks current relations:
every one not ended by now. With `as_of`, the relations that held then, and the related memories
that held then (`HeldAt`). The check is a condition of each hop's read, so the bounds count only
the relations walked.

Neighbours. An entity's relations, each with the entity at its other end, a page at a time in
the store's order: a page reads at most `limit + 1` relation rows of each start entity
(`GraphStore.neighbours`), so a hub entity costs a page what any entity does.
"""

from __future__ import annotations

import dataclasses
import json
import time
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Annotated, Any, Literal, Self

from pydantic import ConfigDict, Field, StrictStr, model_validator

from memsvc.core.errors import InvalidArgument, NotFound
from memsvc.core.filters import Filter, lookup_in
from memsvc.core.graph import (ENTITY_TYPES, MAX_NAME_CHARS, RELATION_TYPES, GraphEdge, GraphNode, Mention,
                               PathResult, ValidAt, display_name, normalise_name, reach, shortest_path)
from memsvc.core.models import Caller, Memory, StoredItem, to_rfc3339
from memsvc.core.namespaces import MAX_KEY_BYTES, encode_namespace, is_under, validate_key
from memsvc.core.validation import (WHITESPACE, Command, Cursor, Integer, Namespace, NamespacePrefix, Timestamp,
                                    non_blank)
from memsvc.ports import Clock, GraphQuerySample, GraphStore, ItemStore, Metrics
from memsvc.service.access import Access
from memsvc.service.memories import KEY_RULES, open_memory
from memsvc.service.search import HeldAt
from memsvc.service.sealing import CursorCodec, Sealer

__all__ = ["Graph", "GraphScope", "FindEntities", "RelatedQuery", "PathQuery", "NeighboursQuery", "PutEntity",
           "EntityRef", "PutRelation", "RelationRef", "Entity", "RelatedMemory", "Related", "PathAnswer", "Neighbour",
           "Neighbours", "MAX_NODES", "MAX_EDGES_PER_HOP", "CANDIDATES_PER_LIMIT"]

MAX_NODES = 5000  # entities one traversal may visit
MAX_EDGES_PER_HOP = 20_000  # edges one hop may read
CANDIDATES_PER_LIMIT = 4  # memories a related query considers per memory it returns
# Mentions `find` reads per entity to tell whether a memory the caller may see still names it
# there (an expired, deleted or filtered-out one does not, though its rows wait for the sweep).
MENTIONS_CHECKED = 10


# `normalise_name` collapses whitespace as Python's `\s` has it, which also counts U+001C..U+001F.
EntityName = Annotated[non_blank(WHITESPACE + "\x1c-\x1f"), Field(description=(
    f"any spelling that normalises alike (NFKC, case folded, spaces collapsed, a leading 'the ' dropped); at "
    f"most {MAX_NAME_CHARS} characters so normalised"))]


class MemoryRef(Command):
    namespace: Namespace
    key: StrictStr = Field(min_length=1, max_length=MAX_KEY_BYTES, description=KEY_RULES)


class Endpoint(Command):
    """Where a traversal starts or ends: an entity by name, or a memory by namespace and key."""

    # Exactly one of the two; neither may be null ("absent" has one spelling, so oneOf is the rule).
    model_config = ConfigDict(json_schema_extra={"oneOf": [{"required": ["entity"]}, {"required": ["memory"]}]})

    entity: EntityName = Field(None)  # type: ignore[assignment]
    memory: MemoryRef = Field(None)  # type: ignore[assignment]

    @model_validator(mode="after")
    def _one(self) -> Self:
        if (self.entity is None) == (self.memory is None):
            raise ValueError("give exactly one of entity and memory")
        return self


class FindEntities(Command):
    """`POST /v1/graph/entities/find`."""

    namespace_prefix: NamespacePrefix
    names: list[EntityName] = Field(min_length=1, max_length=50)


class RelatedQuery(Command):
    """`POST /v1/graph/related`."""

    namespace_prefix: NamespacePrefix
    from_: Endpoint = Field(alias="from", description="a memory must lie under namespace_prefix")
    max_hops: Integer = Field(2, ge=1, le=4, description="1: memories naming a start entity; +1 per relation")
    limit: Integer = Field(20, ge=1, le=100)
    as_of: Timestamp | None = Field(None, description=(
        "RFC 3339: only relations that held then, and memories that held then (issue 25); without it, every "
        "relation not ended by now"))


class PathQuery(Command):
    """`POST /v1/graph/path`."""

    namespace_prefix: NamespacePrefix
    from_: Endpoint = Field(alias="from", description="a memory must lie under namespace_prefix")
    to: Endpoint = Field(description="a memory must lie under namespace_prefix")
    max_hops: Integer = Field(4, ge=1, le=6, description="relation edges, at most")
    as_of: Timestamp | None = Field(None, description=(
        "RFC 3339: only relations that held then (issue 25); without it, every relation not ended by now"))


class NeighboursQuery(Command):
    """`POST /v1/graph/neighbours`."""

    namespace_prefix: NamespacePrefix
    entity: Endpoint = Field(description=(
        "an entity by name, or a memory (under namespace_prefix): then the relations of each entity it names"))
    direction: Literal["out", "in", "both"] = Field("both", description=(
        "out: relations from the entity; in: relations to it; both"))
    relation: Literal[RELATION_TYPES] | None = Field(  # type: ignore[valid-type]
        None, description="only relations of this type")
    as_of: Timestamp | None = Field(None, description=(
        "RFC 3339: only relations that held then (issue 25); without it, every relation not ended by now"))
    limit: Integer = Field(50, ge=1, le=100, description=(
        "at most this many relations; a page may hold fewer (even none) and still have a next_cursor"))
    cursor: Cursor | None = Field(None, description=(
        "next_cursor of the previous page of this same query; only a cursor this service gave this caller (400 "
        "otherwise)"))


class PutEntity(Command):
    """`PUT /v1/graph/entities`."""

    namespace: Namespace
    name: EntityName
    type: Literal[ENTITY_TYPES] = "CONCEPT"  # type: ignore[valid-type]


class EntityRef(Command):
    """`DELETE /v1/graph/entities`."""

    namespace: Namespace = Field(alias="ns", description="One namespace segment; repeat once per segment")
    name: EntityName


class PutRelation(Command):
    """`PUT /v1/graph/relations`."""

    namespace: Namespace
    source: EntityName
    type: Literal[RELATION_TYPES]  # type: ignore[valid-type]
    target: EntityName = Field(description="another entity than source (after normalising both)")
    valid_from: Timestamp | None = Field(None, description=(
        "RFC 3339: the relation holds from then (default: from this write)"))
    valid_to: Timestamp | None = Field(None, description=(
        "RFC 3339, after valid_from (one already past needs valid_from): the relation holds until then (default: "
        "open); writing the relation again replaces both"))


class RelationRef(Command):
    """`DELETE /v1/graph/relations`."""

    namespace: Namespace = Field(alias="ns", description="One namespace segment; repeat once per segment")
    source: EntityName
    type: Literal[RELATION_TYPES]  # type: ignore[valid-type]
    target: EntityName


@dataclass(frozen=True)
class Entity:
    id: str
    name: str
    type: str
    namespaces: tuple[tuple[str, ...], ...]  # where it has a node (under the query's prefix)
    explicit: bool  # written explicitly in at least one of them


@dataclass(frozen=True)
class RelatedMemory:
    memory: Memory
    hops: int
    via: Entity  # the nearest entity it mentions
    policy_attributes: dict[str, Any]  # its plaintext attributes: where recall decides what a filter names


@dataclass(frozen=True)
class Related:
    memories: list[RelatedMemory]
    depth: int
    truncated: bool


@dataclass(frozen=True)
class PathStep:
    source: Entity  # as walked: `edges` keep their own direction
    target: Entity
    edges: tuple[GraphEdge, ...]


@dataclass(frozen=True)
class PathAnswer:
    found: bool
    hops: int
    entities: list[Entity]
    steps: list[PathStep]
    truncated: bool


@dataclass(frozen=True)
class Neighbour:
    edge: GraphEdge
    direction: Literal["out", "in"]  # out: the start entity is the edge's source
    entity: Entity  # the other end


@dataclass(frozen=True)
class Neighbours:
    edges: list[Neighbour]
    next_cursor: str | None


@dataclass(frozen=True)
class GraphScope:
    """What a read may see: rows under `prefix`, memories whose policy attributes `filter` admits."""

    tenant: str
    prefix: tuple[str, ...]
    filter: Filter


class _Expander:
    """One traversal's hop reads, of the relations `valid` admits; remembers whether a hop hit
    `MAX_EDGES_PER_HOP` (then the traversal saw only part of the graph and says `truncated`)."""

    def __init__(self, store: GraphStore, scope: GraphScope, valid: ValidAt) -> None:
        self._store = store
        self._scope = scope
        self._valid = valid
        self.truncated = False

    def __call__(self, entity_ids: Sequence[str]) -> list[GraphEdge]:
        edges = self._store.expand(self._scope.tenant, self._scope.prefix, entity_ids, limit=MAX_EDGES_PER_HOP,
                                   valid=self._valid)
        self.truncated = self.truncated or len(edges) >= MAX_EDGES_PER_HOP
        return edges


class Graph:
    def __init__(self, *, store: GraphStore, items: ItemStore, sealer: Sealer, cursors: CursorCodec, access: Access,
                 clock: Clock, metrics: Metrics) -> None:
        self._store = store
        self._items = items
        self._sealer = sealer
        self._cursors = cursors
        self._access = access
        self._clock = clock
        self._metrics = metrics

    # -- reads ----------------------------------------------------------------------------------

    def find_entities(self, caller: Caller, q: FindEntities) -> list[Entity]:
        started = time.perf_counter()
        scope = self._scope(caller, q.namespace_prefix)
        ids = self._ids(caller.tenant_id, q.names)
        found = self._entities(scope, self._named_still(scope, self._store.nodes(scope.tenant, scope.prefix, ids)))
        out = [found[i] for i in dict.fromkeys(ids) if i in found]
        self.observe("entities", caller.tenant_id, started, len(out), 0)
        return out

    def _named_still(self, scope: GraphScope, nodes: list[GraphNode]) -> list[GraphNode]:
        """The nodes a caller may see: an explicit one by its namespace alone (as `_justified`'s
        edges), a derived one while a memory there that the caller may see (`_shown`) names it,
        among the entity's first MENTIONS_CHECKED mentions under the scope. An entity named only by
        memories that expired, were deleted or are filtered out is not found, and a namespace whose
        mentions are all past that bound is left out of its list."""
        derived = sorted({node.entity_id for node in nodes if not node.explicit})
        # One read an entity (at most 50 names a query): a limit shared by all would let one much
        # mentioned entity take every read and hide the others.
        mentions = [m for entity_id in derived
                    for m in self._store.memories_of(scope.tenant, scope.prefix, [entity_id], limit=MENTIONS_CHECKED)]
        items = self._items.get_many(scope.tenant, list(dict.fromkeys((m.namespace, m.key) for m in mentions))) \
            if mentions else {}
        now = self._clock.now()
        shown = {(m.entity_id, m.namespace) for m in mentions
                 if _shown(scope, items.get((m.namespace, m.key)), m.memory_id, now)}
        return [node for node in nodes if node.explicit or (node.entity_id, node.namespace) in shown]

    def related(self, caller: Caller, q: RelatedQuery) -> Related:
        started = time.perf_counter()
        scope = self._scope(caller, q.namespace_prefix)
        start, exclude = self._start(caller, scope, q.from_, "from")
        answer = self.related_to(scope, start, max_hops=q.max_hops, limit=q.limit, exclude=exclude, as_of=q.as_of)
        self.observe("related", caller.tenant_id, started, len(answer.memories), answer.depth)
        return answer

    def related_to(self, scope: GraphScope, start: Sequence[str], *, max_hops: int, limit: int,
                   exclude: Sequence[tuple[tuple[str, ...], str]] = (), as_of: datetime | None = None) -> Related:
        """Live memories under the scope within `max_hops` of the start entities, nearest first
        (then by namespace and key), leaving out `exclude`'s keys; with `as_of`, over the
        relations that held then, and only memories that held then."""
        expand = _Expander(self._store, scope, self._valid(as_of))
        reached = reach(start, expand, max_hops=max_hops - 1, max_nodes=MAX_NODES)
        by_hop: dict[int, list[str]] = {}
        for entity_id, hop in reached.hops.items():
            by_hop.setdefault(hop, []).append(entity_id)
        # Candidates nearest first, a hop's sorted by (namespace, key); a hop reads at most
        # `CANDIDATES_PER_LIMIT * limit` mentions, in the store's order (so which mentions a hop
        # with more than that considers is the store's choice), enough for what filters and
        # deletes leave out.
        wanted = CANDIDATES_PER_LIMIT * limit
        candidates: dict[tuple[tuple[str, ...], str], tuple[int, Mention]] = {}
        skip = set(exclude)
        for hop in sorted(by_hop):
            mentions = self._store.memories_of(scope.tenant, scope.prefix, by_hop[hop], limit=wanted)
            for m in sorted(mentions, key=lambda m: (m.namespace, m.key, m.entity_id)):
                ref = (m.namespace, m.key)
                if ref not in skip and ref not in candidates:
                    candidates[ref] = (hop + 1, m)
            if len(candidates) >= wanted:
                break
        admitted = self._live(scope, {ref: mention.memory_id for ref, (_, mention) in candidates.items()}, limit,
                              as_of)
        entities = self._entities(scope, self._store.nodes(scope.tenant, scope.prefix,
                                                           [candidates[ref][1].entity_id for ref, _, _ in admitted]))
        memories = [RelatedMemory(memory, candidates[ref][0], entities[candidates[ref][1].entity_id],
                                  item.policy_attributes)
                    for ref, item, memory in admitted if candidates[ref][1].entity_id in entities]
        return Related(memories, reached.depth + 1 if reached.hops else 0, reached.truncated or expand.truncated)

    def _live(self, scope: GraphScope, versions: dict[tuple[tuple[str, ...], str], str], limit: int,
              as_of: datetime | None = None) -> list[tuple[tuple[tuple[str, ...], str], StoredItem, Memory]]:
        """The first `limit` of `versions`' keys whose memory is live, still the version the
        mention came from (a rewrite the graph step has not caught up with may no longer name the
        entity), admitted by the scope's filter and, with `as_of`, held then (by the row's bounds
        where they decide, else on the decrypted value); read a page at a time. Each with its item
        and its memory, opened."""
        refs = list(versions)
        now = self._clock.now()
        held = HeldAt(as_of) if as_of is not None else None
        out: list[tuple[tuple[tuple[str, ...], str], StoredItem, Memory]] = []
        page_size = limit + 5  # most candidates are live: a page more is rarely read
        for at in range(0, len(refs), page_size):
            page = refs[at:at + page_size]
            items = self._items.get_many(scope.tenant, page)
            for ref in page:
                item = items.get(ref)
                if not _shown(scope, item, versions[ref], now) or (held is not None and held.rules_out(item)):
                    continue
                memory = open_memory(self._sealer, item)
                if held is None or held(memory):
                    out.append((ref, item, memory))
                    if len(out) >= limit:
                        return out
        return out

    def related_to_memories(self, scope: GraphScope, refs: Sequence[tuple[tuple[str, ...], str]], *,
                            max_hops: int, limit: int, as_of: datetime | None = None) -> Related:
        """`related_to` from the entities of these memories (recall's graph expansion), leaving them out."""
        start = [m.entity_id for m in self._store.entities_of_memories(scope.tenant, refs)]
        return self.related_to(scope, start, max_hops=max_hops, limit=limit, exclude=refs, as_of=as_of)

    def path(self, caller: Caller, q: PathQuery) -> PathAnswer:
        started = time.perf_counter()
        scope = self._scope(caller, q.namespace_prefix)
        start, _ = self._start(caller, scope, q.from_, "from")
        goal, _ = self._start(caller, scope, q.to, "to")
        expand = _Expander(self._store, scope, self._valid(q.as_of))
        result = shortest_path(start, goal, expand, max_hops=q.max_hops, max_nodes=MAX_NODES)
        answer = self._path_answer(scope, result, expand.truncated)
        self.observe("path", caller.tenant_id, started, len(answer.entities), result.depth)
        return answer

    def _path_answer(self, scope: GraphScope, result: PathResult, cut: bool) -> PathAnswer:
        """`cut`: a hop read only part of its edges, so a path not found may exist."""
        if result.path is None:
            return PathAnswer(False, 0, [], [], result.truncated or cut)
        ids = result.path.entity_ids
        entities = self._entities(scope, self._store.nodes(scope.tenant, scope.prefix, ids))
        if not all(i in entities for i in ids):  # from and to name one entity, which is not in scope
            return PathAnswer(False, 0, [], [], cut)
        shown = self._justified(scope, [(s.from_id, e) for s in result.path.steps for e in s.edges])
        visible = {id(edge) for _, edge in shown}
        steps = [PathStep(entities[s.from_id], entities[s.to_id], tuple(e for e in s.edges if id(e) in visible))
                 for s in result.path.steps]
        if not all(step.edges for step in steps):
            # a step rests only on memories the caller may not see, or that have expired: no path to
            # show, and none hinted at (the traversal is not tried again without those relations)
            return PathAnswer(False, 0, [], [], cut)
        return PathAnswer(True, len(steps), [entities[i] for i in ids], steps, False)

    def neighbours(self, caller: Caller, q: NeighboursQuery) -> Neighbours:
        """A page of the start entity's relations (of each of a memory's entities, by entity id),
        each with the entity at its other end. The cursor is bound to the caller and to the query
        as asked, and holds the entity being paged and the store's position in it."""
        started = time.perf_counter()
        scope = self._scope(caller, q.namespace_prefix)
        start, _ = self._start(caller, scope, q.entity, "entity")
        purpose = json.dumps(["graph-neighbours", caller.user_id, list(scope.prefix),
                              q.entity.model_dump(mode="json", exclude_none=True), q.direction, q.relation,
                              None if q.as_of is None else to_rfc3339(q.as_of)], separators=(",", ":"))
        entity_ids = sorted(set(start))
        after: list[str | int] | None = None
        if q.cursor is not None:
            position = self._cursors.decode(caller.tenant_id, purpose, q.cursor, field="cursor")
            paged, after = position.get("e"), position.get("p")
            if not isinstance(paged, str) or not (after is None or isinstance(after, list)):
                raise InvalidArgument("cursor is not a cursor this service gave this caller",
                                      details={"field": "cursor"})
            entity_ids = [e for e in entity_ids if e >= paged]
            if entity_ids[:1] != [paged]:
                after = None  # the memory no longer names the entity being paged: go on with the next
        valid = self._valid(q.as_of)
        found: list[tuple[str, GraphEdge]] = []
        next_position: dict[str, Any] | None = None
        for at, entity_id in enumerate(entity_ids):
            if len(found) == q.limit:
                next_position = {"e": entity_id, "p": None}
                break
            edges, rest = self._store.neighbours(scope.tenant, scope.prefix, entity_id, direction=q.direction,
                                                 relation=q.relation, valid=valid, limit=q.limit - len(found),
                                                 after=after if at == 0 else None)
            found += [(entity_id, e) for e in edges]
            if rest is not None:
                next_position = {"e": entity_id, "p": rest}
                break
        found = self._justified(scope, found)
        others = {e.target_id if e.source_id == start_id else e.source_id for start_id, e in found}
        entities = self._entities(scope, self._store.nodes(scope.tenant, scope.prefix, sorted(others)))
        page = [Neighbour(e, "out" if e.source_id == start_id else "in", entities[other])
                for start_id, e in found
                if (other := e.target_id if e.source_id == start_id else e.source_id) in entities]
        cursor = (self._cursors.encode(caller.tenant_id, purpose, next_position)
                  if next_position is not None else None)
        self.observe("neighbours", caller.tenant_id, started, len(page), 1)
        return Neighbours(page, cursor)

    def _justified(self, scope: GraphScope, found: list[tuple[str, GraphEdge]]) -> list[tuple[str, GraphEdge]]:
        """The edges a caller may see as `related` would show their memories: a derived edge only
        while its memory is live (an expired memory's relations may outlast it until the sweep),
        still the version it came from and admitted by the scope's filter (one read of at most a
        page's memories); an explicit one by its namespace alone."""
        refs = list(dict.fromkeys((e.namespace, e.key) for _, e in found if e.key is not None))
        items = self._items.get_many(scope.tenant, refs) if refs else {}
        now = self._clock.now()
        return [(start_id, e) for start_id, e in found
                if e.key is None or _shown(scope, items.get((e.namespace, e.key)), e.memory_id, now)]

    # -- explicit writes ------------------------------------------------------------------------

    def put_entity(self, caller: Caller, cmd: PutEntity) -> Entity:
        ns = self._writable(caller, cmd.namespace, {"name": cmd.name, "type": cmd.type})
        name = display_name(cmd.name)
        entity_id = self._ids(caller.tenant_id, [cmd.name], create=True)[0]
        self._store.put_entity(GraphNode(caller.tenant_id, ns, entity_id, cmd.type,
                                         self._sealer.seal_entity_name(caller.tenant_id, entity_id, name),
                                         explicit=True))
        return Entity(entity_id, name, cmd.type, (ns,), True)

    def delete_entity(self, caller: Caller, ref: EntityRef) -> None:
        """Idempotent: an entity never written explicitly there is already gone (a memory's
        entities go with the memory)."""
        ns = self._access.namespace_to_read(caller, ref.namespace)
        self._access.authorize(caller, "delete", ns, None)
        ids = self._ids(caller.tenant_id, [ref.name])
        if ids:
            self._store.delete_entity(caller.tenant_id, ns, ids[0])

    def put_relation(self, caller: Caller, cmd: PutRelation) -> GraphEdge:
        """Write an explicit relation, or write it again: its valid time is then the one given now
        (a PUT states the relation whole, as a memory's PUT states its value)."""
        now = self._clock.now()
        if cmd.valid_from is not None and cmd.valid_to is not None and cmd.valid_to <= cmd.valid_from:
            raise InvalidArgument("valid_to must be after valid_from", details={"field": "valid_to"})
        if cmd.valid_from is None and cmd.valid_to is not None and cmd.valid_to <= now:
            # Without a start the relation holds from now: an end already past would make it never hold.
            raise InvalidArgument("a valid_to in the past needs the valid_from the relation held from",
                                  details={"field": "valid_to"})
        ns = self._writable(caller, cmd.namespace, {"source": cmd.source, "type": cmd.type, "target": cmd.target})
        source, target = self._ids(caller.tenant_id, [cmd.source, cmd.target], create=True)
        if source == target:
            raise InvalidArgument("a relation joins two different entities", details={"field": "target"})
        edge = GraphEdge(caller.tenant_id, ns, source, cmd.type, target, valid_from=to_rfc3339(cmd.valid_from or now),
                         valid_to=to_rfc3339(cmd.valid_to))
        missing = self._store.put_relation(edge)
        if missing:
            names = [field for field, entity_id in (("source", source), ("target", target)) if entity_id in missing]
            said = " and ".join(f"{field} {getattr(cmd, field)!r}" for field in names)
            raise NotFound(f"no entity {said} in this namespace: write it first (PUT /v1/graph/entities)",
                           details={"missing": names})
        return edge

    def delete_relation(self, caller: Caller, ref: RelationRef) -> None:
        ns = self._access.namespace_to_read(caller, ref.namespace)
        self._access.authorize(caller, "delete", ns, None)
        ids = self._ids(caller.tenant_id, [ref.source, ref.target])
        if len(ids) == 2:
            self._store.delete_relation(GraphEdge(caller.tenant_id, ns, ids[0], ref.type, ids[1]))

    # -- integrity ------------------------------------------------------------------------------

    def integrity_scan(self, caller: Caller) -> dict[str, int]:
        """Admin: bring every derived key of the caller's tenant in line with the item store (a
        key whose memory is gone or expired loses its rows), then remove what breaks the store's
        invariants. Returns what was removed."""
        self._access.admin(caller)
        tenant = caller.tenant_id
        now = self._clock.now()
        stale = 0
        derived = list(self._store.derived_memories(tenant))
        for at in range(0, len(derived), 100):
            batch = derived[at:at + 100]
            items = self._items.get_many(tenant, [(d.namespace, d.key) for d in batch])
            for d in batch:
                item = items.get((d.namespace, d.key))
                if item is None or not item.is_live(now):
                    # Gone, deleted or past its TTL: the key's rows go, whatever its current version.
                    stale += self._store.remove_memory(dataclasses.replace(d, version=max(
                        d.version, item.version if item is not None else 0)))
        return {**self._store.integrity_scan(tenant), "memories": stale}

    def ping(self) -> None:
        """/health's probe of the graph store: whether it answers, in constant time (no count:
        /health is public, and counts over every tenant's graphs are not a public number)."""
        self._store.ping()

    # -- helpers --------------------------------------------------------------------------------

    def _valid(self, as_of: datetime | None) -> ValidAt:
        """The relations a traversal walks: those that held at `as_of`, else those not ended by now."""
        if as_of is not None:
            return ValidAt(str(to_rfc3339(as_of)), started=True)
        return ValidAt(str(to_rfc3339(self._clock.now())))

    def _scope(self, caller: Caller, prefix: Sequence[str]) -> GraphScope:
        narrowed = self._access.namespace_to_read(caller, prefix, allow_empty=True)
        scope, attribute_filter = self._access.scope(caller, "search", narrowed, {})
        return GraphScope(caller.tenant_id, scope, attribute_filter)

    def _writable(self, caller: Caller, namespace: Sequence[str], said: dict[str, str]) -> tuple[str, ...]:
        ns = self._access.namespace_to_write(caller, namespace)
        self._access.authorize(caller, "write", ns, None)
        self._access.govern(caller, ns, "graph", said, None)
        return ns

    def _ids(self, tenant: str, names: Sequence[str], *, create: bool = False) -> list[str]:
        """The entity ids of these names; [] for a tenant with no data key yet (then it has no
        graph either, and a read makes no key)."""
        normalised = [normalise_name(n) for n in names]
        try:
            return self._sealer.entity_ids(tenant, normalised, create=create)
        except LookupError:
            return []

    def _start(self, caller: Caller, scope: GraphScope, end: Endpoint, field: str
               ) -> tuple[list[str], list[tuple[tuple[str, ...], str]]]:
        """The entity ids an endpoint stands for, and the memory to leave out of its answer."""
        if end.entity is not None:
            return self._ids(scope.tenant, [end.entity]), []
        assert end.memory is not None
        ns = self._access.namespace_to_read(caller, end.memory.namespace)
        key = validate_key(end.memory.key)
        if not is_under(encode_namespace(ns), scope.prefix):
            raise InvalidArgument(f"{field}.memory is not under namespace_prefix",
                                  details={"field": f"{field}.memory.namespace"})
        self._access.authorize(caller, "read", ns, key)
        item = self._items.get(scope.tenant, ns, key)
        if item is None or not item.is_live(self._clock.now()) or not scope.filter.matches(
                lookup_in(item.policy_attributes)):
            raise NotFound(f"{field}.memory: memory not found")
        return [m.entity_id for m in self._store.entities_of_memories(scope.tenant, [(ns, key)])], [(ns, key)]

    def _entities(self, scope: GraphScope, nodes: Sequence[GraphNode]) -> dict[str, Entity]:
        grouped: dict[str, list[GraphNode]] = {}
        for node in nodes:
            grouped.setdefault(node.entity_id, []).append(node)
        out = {}
        for entity_id, rows in grouped.items():
            chosen = next((r for r in rows if r.explicit), rows[0])  # an explicit write names and types it
            out[entity_id] = Entity(entity_id, self._sealer.open_entity_name(scope.tenant, entity_id, chosen.name_ct),
                                    chosen.type, tuple(r.namespace for r in rows), any(r.explicit for r in rows))
        return out

    def observe(self, query: str, tenant: str, started: float, results: int, depth: int) -> None:
        self._metrics.graph_query(GraphQuerySample(query, tenant, time.perf_counter() - started, results, depth))


def _shown(scope: GraphScope, item: StoredItem | None, memory_id: str | None, now: datetime) -> bool:
    """Whether a graph read may show what a memory says: it is live, still the version `memory_id`
    (what the graph row came from) and admitted by the scope's filter."""
    return (item is not None and item.is_live(now) and item.id == memory_id
            and scope.filter.matches(lookup_in(item.policy_attributes)))
