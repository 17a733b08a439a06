"""The knowledge graph's records, its vocabulary, name normalisation and the bounded traversals.

The graph is derived from memories (issue 15): an `EntityExtractor` reads a memory's text and
names entities and relations; the service turns names into ids (keyed hashes of the normalised
name, `Sealer.entity_ids`) and seals the display names, so a `GraphStore` holds no names in the
clear. Types are a small fixed vocabulary and are stored in the clear.

Rows, all per tenant and per namespace (the namespace of the memory or explicit write that made
them; a query under a prefix sees the rows whose namespace is under it):

- a node (`GraphNode`): one entity in one namespace. It exists while a memory of that
  namespace mentions it or while it was written explicitly there.
- a mention (`Mention`): memory (namespace, key, memory id) -> entity id.
- an edge (`GraphEdge`): source entity -type-> target entity in a namespace, justified by one
  memory (its key and memory id) or explicit (both None). The same triple justified by two
  memories is two edges. An edge holds over [valid_from, valid_to) (issue 25): an explicit one
  as its write says, a derived one as its memory does (`ValidAt`).

An entity id is the same in every namespace of a tenant, so a query under a prefix joins what
several namespaces beneath it say about one entity. Traversals are pure functions over an
`expand` callable (one batched read per hop), so every backend runs the same code.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field

from memsvc.core.errors import InvalidArgument
from memsvc.core.unicode_text import normalize

__all__ = [
    "ENTITY_TYPES",
    "RELATION_TYPES",
    "MAX_NAME_CHARS",
    "MAX_ENTITIES_PER_MEMORY",
    "MAX_RELATIONS_PER_MEMORY",
    "normalise_name",
    "display_name",
    "entity_type",
    "relation_type",
    "Extraction",
    "GraphNode",
    "GraphEdge",
    "Mention",
    "DerivedMemory",
    "ValidAt",
    "Reached",
    "PathStep",
    "GraphPath",
    "PathResult",
    "Expand",
    "reach",
    "shortest_path",
]

# The vocabulary of types. Types are stored in the clear (they are what a query filters and shows
# on an edge), so they are never free text: anything else an extractor says becomes `CONCEPT` or
# `RELATES_TO` (`entity_type`, `relation_type`).
ENTITY_TYPES = ("PERSON", "PROJECT", "ORGANIZATION", "TICKET", "SYSTEM", "PLACE", "EVENT", "CONCEPT")
RELATION_TYPES = ("WORKS_ON", "CAUSED_BY", "RELATES_TO", "DEPENDS_ON", "PART_OF", "OWNS", "USES", "BLOCKS",
                  "FIXES", "MEMBER_OF", "REPORTS_TO", "LOCATED_IN")

MAX_NAME_CHARS = 200
# Bounds what one memory derives (and so what one write to the graph store must replace at once;
# a DynamoDB transaction holds at most 100 items).
MAX_ENTITIES_PER_MEMORY = 16
MAX_RELATIONS_PER_MEMORY = 24

_SPACES = re.compile(r"\s+")
_LEADING_ARTICLE = re.compile(r"^the\s+")


def normalise_name(name: str) -> str:
    """The form two spellings of one entity share: NFKC, case folded, whitespace collapsed to
    single spaces, trimmed, a leading "the " dropped ("The Apollo Project" and "apollo project"
    are one entity). Raises `InvalidArgument` for a name that is empty after this or longer than
    `MAX_NAME_CHARS`. O(len(name))."""
    if not isinstance(name, str):
        raise InvalidArgument("an entity name is a string", details={"field": "name"})
    folded = _SPACES.sub(" ", normalize("NFKC", name).casefold()).strip()
    folded = _LEADING_ARTICLE.sub("", folded)
    if not folded:
        raise InvalidArgument("an entity name must not be empty", details={"field": "name"})
    if len(folded) > MAX_NAME_CHARS:
        raise InvalidArgument(f"an entity name is at most {MAX_NAME_CHARS} characters",
                              details={"field": "name", "max_chars": MAX_NAME_CHARS})
    return folded


def display_name(name: str) -> str:
    """What is sealed and shown: the name as written, NFKC and whitespace collapsed. O(len(name))."""
    return _SPACES.sub(" ", normalize("NFKC", name)).strip()


def entity_type(value: str | None) -> str:
    """An extractor's entity type in the vocabulary (`CONCEPT` when it is not)."""
    upper = (value or "").strip().upper().replace(" ", "_")
    return upper if upper in ENTITY_TYPES else "CONCEPT"


def relation_type(value: str | None) -> str:
    """An extractor's relation type in the vocabulary (`RELATES_TO` when it is not)."""
    upper = (value or "").strip().upper().replace(" ", "_")
    return upper if upper in RELATION_TYPES else "RELATES_TO"


@dataclass(frozen=True)
class Extraction:
    """What an `EntityExtractor` found in one text. Names as written (the service normalises
    them); types as the extractor says (the service maps them into the vocabulary). A relation's
    names should be among `entities`; one that is not is added with type `CONCEPT`."""

    entities: tuple[tuple[str, str], ...] = ()  # (name, type)
    relations: tuple[tuple[str, str, str], ...] = ()  # (source name, target name, type)


@dataclass(frozen=True)
class GraphNode:
    """An entity in one namespace. `name_ct` is the display name sealed by the service (opaque to
    a store). `explicit`: written by a caller, not only derived from memories."""

    tenant: str
    namespace: tuple[str, ...]
    entity_id: str
    type: str
    name_ct: bytes
    explicit: bool = False


@dataclass(frozen=True)
class GraphEdge:
    """A typed, directed relation in one namespace, justified by the memory (`key`, `memory_id`)
    of that namespace, or explicit when both are None. `valid_from`/`valid_to`: when it holds,
    RFC 3339 as `to_rfc3339` writes it (UTC, microseconds, fixed width, so the text orders as
    the time does); None: open (an edge written before valid time has neither)."""

    tenant: str
    namespace: tuple[str, ...]
    source_id: str
    type: str
    target_id: str
    key: str | None = None
    memory_id: str | None = None
    valid_from: str | None = None
    valid_to: str | None = None

    @property
    def explicit(self) -> bool:
        return self.memory_id is None


@dataclass(frozen=True)
class Mention:
    """A memory (the version `memory_id` of the item at `namespace`, `key`) names an entity."""

    tenant: str
    namespace: tuple[str, ...]
    key: str
    memory_id: str
    entity_id: str


@dataclass(frozen=True)
class DerivedMemory:
    """Which version of an item the graph rows of its key were derived from. Kept so that an
    older version, delivered late, never replaces a newer one's rows."""

    tenant: str
    namespace: tuple[str, ...]
    key: str
    memory_id: str
    version: int


@dataclass(frozen=True)
class ValidAt:
    """Which edges a traversal walks (issue 25). `at` is a time as `to_rfc3339` writes it. An
    `as_of` (`started`): the edges whose interval contains it. Without one, current facts: every
    edge not ended by `at` (now); one whose start is still ahead is walked, as recall answers a
    current memory whatever its `valid_from` (and a clock a little behind the writer's never
    hides a relation just written)."""

    at: str
    started: bool = False

    def admits(self, edge: GraphEdge) -> bool:
        if edge.valid_to is not None and edge.valid_to <= self.at:
            return False
        return not self.started or edge.valid_from is None or edge.valid_from <= self.at


# -- traversal ---------------------------------------------------------------------------------

# `expand(ids)` -> the edges (under the query's prefix) with a source or target among `ids`.
Expand = Callable[[Sequence[str]], Sequence[GraphEdge]]


@dataclass(frozen=True)
class Reached:
    """Entities within `max_hops` relation edges of the start set, with their distance."""

    hops: dict[str, int]  # entity id -> fewest edges from a start entity (0 for the start set)
    depth: int  # the largest distance expanded
    truncated: bool  # the node limit stopped the search before `max_hops`


@dataclass(frozen=True)
class PathStep:
    """One edge of a path, walked from `from_id` to `to_id` (in either of the edge's directions;
    `edges` keeps each justifying row with its own direction)."""

    from_id: str
    to_id: str
    edges: tuple[GraphEdge, ...]


@dataclass(frozen=True)
class GraphPath:
    entity_ids: tuple[str, ...]  # from a start entity to a goal entity, both included
    steps: tuple[PathStep, ...]


@dataclass(frozen=True)
class PathResult:
    path: GraphPath | None  # None: no path within the limits
    depth: int
    truncated: bool  # the limits stopped the search: a longer path may exist
    visited: int = field(default=0)


def _neighbours(edges: Iterable[GraphEdge], frontier: set[str]) -> dict[str, dict[str, list[GraphEdge]]]:
    """For each entity of `frontier`, its neighbours and the edges (either direction) to them."""
    out: dict[str, dict[str, list[GraphEdge]]] = {}
    for edge in edges:
        for a, b in ((edge.source_id, edge.target_id), (edge.target_id, edge.source_id)):
            if a in frontier and b != a:
                out.setdefault(a, {}).setdefault(b, []).append(edge)
    return out


def reach(start: Iterable[str], expand: Expand, *, max_hops: int, max_nodes: int) -> Reached:
    """Breadth-first from `start` over edges in both directions, one `expand` call per hop, up to
    `max_hops` hops and `max_nodes` entities (start included). When the limit is reached the
    answer is what was found so far (a hop is cut in entity-id order, so it is deterministic),
    with `truncated` set."""
    hops = {e: 0 for e in sorted(set(start))[:max_nodes]}
    truncated = len(set(start)) > max_nodes
    frontier = set(hops)
    depth = 0
    while frontier and depth < max_hops and not truncated:
        depth += 1
        found = sorted({b for nbrs in _neighbours(expand(sorted(frontier)), frontier).values() for b in nbrs}
                       - hops.keys())
        room = max_nodes - len(hops)
        if len(found) > room:
            found, truncated = found[:room], True
        for e in found:
            hops[e] = depth
        frontier = set(found)
    return Reached(hops=hops, depth=depth, truncated=truncated)


def shortest_path(start: Iterable[str], goal: Iterable[str], expand: Expand, *, max_hops: int,
                  max_nodes: int) -> PathResult:
    """A path with the fewest edges from any start entity to any goal entity, edges walked in
    either direction, within `max_hops` edges and `max_nodes` entities visited. Bidirectional:
    each round expands the smaller of the two frontiers (the shallower side of equal ones) by one
    hop (one `expand` call), so a path of k hops visits about two balls of radius k/2 instead of
    one of radius k. Ties go to
    the smallest entity ids, so the answer is deterministic. A step keeps every edge between its
    two entities (each a justification of the link)."""
    start_set, goal_set = set(start), set(goal)
    if not start_set or not goal_set:
        return PathResult(None, 0, False)
    common = sorted(start_set & goal_set)
    if common:
        return PathResult(GraphPath((common[0],), ()), 0, False, visited=len(start_set | goal_set))
    sides = (_Side(start_set), _Side(goal_set))
    via: dict[frozenset[str], list[GraphEdge]] = {}
    truncated = False
    while all(side.frontier for side in sides) and sides[0].depth + sides[1].depth < max_hops:
        # The smaller frontier; of equal ones the shallower side, so that two ends one hop from a
        # hub meet there without either reading the hub's edges.
        this, other = sides if (len(sides[0].frontier), sides[0].depth) <= (len(sides[1].frontier), sides[1].depth) \
            else sides[::-1]
        nbrs = _neighbours(expand(sorted(this.frontier)), this.frontier)
        this.depth += 1
        found: set[str] = set()
        for a in sorted(nbrs):
            for b in sorted(nbrs[a]):
                via.setdefault(frozenset((a, b)), nbrs[a][b])
                if b in this.parent:
                    continue
                if len(sides[0].parent) + len(sides[1].parent) >= max_nodes:
                    truncated = True
                    break
                this.parent[b], this.dist[b] = a, this.depth
                found.add(b)
        meeting = sorted(found & other.parent.keys(), key=lambda m: (this.dist[m] + other.dist[m], m))
        if meeting:
            m = meeting[0]
            forward = sides[0].chain(m)[::-1] + sides[1].chain(m)[1:]
            return PathResult(_path_of(forward, via), this.depth + other.depth, False,
                              visited=len(sides[0].parent) + len(sides[1].parent))
        this.frontier = found
        if truncated:
            break
    depth = sides[0].depth + sides[1].depth
    truncated = truncated or (all(side.frontier for side in sides) and depth >= max_hops)
    return PathResult(None, depth, truncated, visited=len(sides[0].parent) + len(sides[1].parent))


class _Side:
    """One end of a bidirectional search: what it reached, from where, how far."""

    def __init__(self, roots: set[str]) -> None:
        self.parent: dict[str, str | None] = {r: None for r in roots}
        self.dist = {r: 0 for r in roots}
        self.frontier = set(roots)
        self.depth = 0

    def chain(self, node: str) -> list[str]:
        """From `node` back to this side's root."""
        out = [node]
        while (p := self.parent[out[-1]]) is not None:
            out.append(p)
        return out


def _path_of(ids: list[str], via: dict[frozenset[str], list[GraphEdge]]) -> GraphPath:
    steps = tuple(PathStep(a, b, tuple(sorted(via[frozenset((a, b))], key=_edge_order))) for a, b in zip(ids, ids[1:]))
    return GraphPath(tuple(ids), steps)


def _edge_order(edge: GraphEdge) -> tuple:
    return (edge.namespace, edge.key or "", edge.memory_id or "", edge.type, edge.source_id, edge.target_id)
