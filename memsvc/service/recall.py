"""`POST /v1/memories/recall`: the agent's `query_memory` (API-AGENT.md "recall", seeds 001, 002, 004).

One query, many layers: each layer's namespace is authorized like a search, all are searched
side by side (the search service's hybrid retrieval, one embedding of the query for all), and
what they find is scored with the composite relevance, collapsed across near-duplicates, sorted
and fitted to a token budget (`memsvc.core.recall_ranking`). Every memory returned counts as an
access, tallied off the request path (`AccessRecorder`).

Reflection (issue 24, `core.reflection`): archived memories are left out unless
`include_archived`, and one returned is restored (a new version, action `restored`: this recall
was its use). A version reflection wrote is ranked by its effective importance and by recency
from its last use before that write (`active_at`), not from reflection's own write.
"""

from __future__ import annotations

import dataclasses
import hashlib
import logging
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import datetime
from typing import Annotated, Any, Literal

from pydantic import ConfigDict, Field, StrictBool, StrictFloat, StrictStr, WithJsonSchema

from memsvc.core.errors import Forbidden, InvalidArgument
from memsvc.core.filters import Filter, lookup_in, parse_filter
from memsvc.core.keywords import query_terms
from memsvc.core.layers import (LAYER_NAMES, LAYERS, Layer, accessible_layers, identifiers_schema, layer_namespaces,
                                layer_needs_schema, layer_of, resolve_identifiers)
from memsvc.core.models import Caller, Memory
from memsvc.core.namespaces import encode_namespace, is_under
from memsvc.core.reflection import current_importance, last_active
from memsvc.core.recall_ranking import (Weights, collapse_near_duplicates, fill_budget, recency, relative_cut,
                                         relevance)
from memsvc.core.typed_memory import CONTENT_FIELDS, MEMORY_TYPES, TypedMemory
from memsvc.core.sessions import is_messages_namespace
from memsvc.core.time_boost import TEMPORAL_DESCRIPTION, time_boost
from memsvc.core.validation import Command, Integer, NamespacePrefix, Timestamp
from memsvc.ports import Clock, VectorIndex
from memsvc.service.access import Access
from memsvc.service.access_recorder import AccessRecorder
from memsvc.service.best_text import best_text
from memsvc.service.graph import Graph, GraphScope
from memsvc.service.known_at import KNOWN_AT_DESCRIPTION, KnownAtView
from memsvc.service.sealing import Sealer
from memsvc.service.memories import check_nesting
from memsvc.service.search import (AS_OF_DESCRIPTION, FILTER_RULES, FILTER_SCHEMA, FilterPlan, Query, Ranked,
                                   Search, HeldAt)
from memsvc.tokens import count_tokens, cut_to_tokens

__all__ = ["Recall", "RecallQuery", "Recalled", "RecallResult", "Explanation", "LeftOut", "CutReason", "MAX_CUT"]

log = logging.getLogger(__name__)

NEUTRAL_IMPORTANCE = 0.5  # what a plain item (no importance of its own) counts as: the typed default
# What each layer hands over, by match, before the composite ranks them: the page, and a few more
# for the superseded memories and near-duplicates that recall leaves out after the search (the
# types filter is applied within the search). Every candidate is read and decrypted, so few.
CANDIDATE_SLACK = 5
# Near-duplicates are looked for among the best 2 x limit results: a returned memory is never a
# near-duplicate of another returned one, and the cost stays a few hundred vector comparisons.
DEDUP_POOL_PER_LIMIT = 2
_NO_LAYER = len(LAYERS) + 1  # a namespace outside every layer ranks after company
MAX_CUT = 50  # candidates `explain` lists as left out: the nearest misses, enough to see why
CutReason = Literal["below_min_score", "below_min_match", "over_limit", "token_budget", "duplicate"]


# Checked by `core.layers` (an unknown layer is INVALID_LAYER, an unknown identifier 400), so the
# schema states what those take.
LayerName = Annotated[StrictStr, Field(json_schema_extra={"enum": list(LAYER_NAMES)})]
Identifiers = Annotated[dict[StrictStr, StrictStr | None], WithJsonSchema(identifiers_schema(nullable=True))]


class RecallQuery(Command):
    """`POST /v1/memories/recall`."""

    # namespace_prefix is instead of layers and identifiers. The three may be left out but not be null:
    # "absent" has one spelling, so the schema states the whole rule.
    model_config = ConfigDict(json_schema_extra={
        "dependentSchemas": {"namespace_prefix": {"not": {"anyOf": [{"required": ["layers"]},
                                                                    {"required": ["identifiers"]}]}}},
        "allOf": layer_needs_schema("layers", many=True),
    })

    query: Query = Field(description="what to recall; cut to 8,192 characters")
    layers: list[LayerName] = Field(  # type: ignore[assignment]
        None, min_length=1, description="layers to search (default: every layer the identifiers give); a layer "
                                        "needs its identifiers (MISSING_IDENTIFIER)")
    identifiers: Identifiers = Field(  # type: ignore[assignment]
        None, description="agent_id, user_id (default: the caller), session_id, project_id, team_id, org_id")
    namespace_prefix: NamespacePrefix = Field(  # type: ignore[assignment]
        None, description="search this subtree instead of layers (not with layers or identifiers)")
    types: list[Literal["fact", "preference", "decision", "note"]] | None = Field(
        None, min_length=1, description="only typed memories of these types")
    filter: dict[StrictStr, Any] | None = Field(None, json_schema_extra=FILTER_SCHEMA, description=(
        f"as search's, ANDed with types ({FILTER_RULES}); typed memories keep tags, category and kind in their "
        "value: {\"tags\": {\"contains\": \"travel\"}, \"category\": \"work\", \"kind\": \"episodic\"}"))
    limit: Integer = Field(10, ge=1, le=50)
    min_score: StrictFloat = Field(0.3, ge=0, le=1, description="leave out memories of lower relevance")
    token_budget: Integer = Field(1000, ge=1, le=8000, description="cl100k_base tokens of content, at most")
    mode: Literal["hybrid", "semantic", "keyword"] = Field("hybrid", description=(
        "keyword is 400 when the tenant's setting keyword_index is off"))
    order: Literal["relevance", "precedence"] = Field(
        "relevance", description="relevance, or precedence: the most specific layer first, then relevance")
    include_superseded: StrictBool = False
    include_archived: StrictBool = Field(False, description=(
        "also archived memories (decayed, set aside by reflection); one returned is restored"))
    graph_hops: Integer = Field(0, ge=0, le=3, description=(
        "add the memories the knowledge graph links to the hits, up to this many hops away (1: they name an "
        "entity a hit names; +1 per relation), after the hits and within the token budget; 0: none"))
    as_of: Timestamp | None = Field(None, description=AS_OF_DESCRIPTION + "; include_superseded then adds nothing")
    temporal: StrictBool = Field(True, description=TEMPORAL_DESCRIPTION)
    known_at: Timestamp | None = Field(None, description=KNOWN_AT_DESCRIPTION + (
        "; superseded and archived as the version then says; not with graph_hops (the graph links current "
        "memories only); restores and counts no version no longer current"))
    explain: StrictBool = Field(False, description=(
        "also say how each memory was scored (its `explain`) and which candidates were left out and why "
        f"(`metadata.cut`, at most {MAX_CUT})"))


@dataclass(frozen=True)
class Explanation:
    """The numbers one memory's relevance was computed from, exactly as recall used them:
    relevance = sum of weights[part] * part over match, importance, recency and pinned."""

    keyword: float | None  # the keyword retriever's BM25, None when it did not find the memory
    semantic: float | None  # the semantic retriever's cosine, None when it did not find the memory
    fused: float  # the hybrid fusion of the two (with a time the query names, boosted)
    match: float  # the fused score as the composite takes it (never below 0)
    importance: float
    recency: float
    pinned: int  # 0 or 1
    weights: dict[str, float]
    relevance: float


@dataclass(frozen=True)
class LeftOut:
    """A candidate recall did not return (`explain`), and why."""

    memory: Memory
    layer: str | None
    relevance: float | None  # None for a candidate below min_match: its composite is never computed
    match: float
    reason: CutReason


@dataclass(frozen=True)
class Recalled:
    memory: Memory
    layer: str | None
    content: str
    type: str | None
    relevance: float
    match: float
    importance: float | None
    pinned: bool
    tags: tuple[str, ...]
    category: str | None
    source: str | None
    truncated: bool = False
    graph_hops: int | None = None  # added by graph expansion, this many hops from a hit; None for a hit
    explain: Explanation | None = None  # asked with explain, for a hit


@dataclass(frozen=True)
class RecallResult:
    memories: list[Recalled]
    total_count: int
    truncated: bool
    token_count: int
    token_budget: int
    searched_layers: list[str]
    query_embedding_ms: float
    retrieval_ms: float
    degraded: bool  # ranked by the keyword index alone: the query's embedding failed (`Search.report_degraded`)
    known_at: datetime | None = None  # asked with known_at: the answer is what memsvc held then
    past_retention: int = 0  # with known_at: keys whose version then is past the event retention (not shown)
    cut: list[LeftOut] | None = None  # asked with explain: the candidates left out, nearest misses first


@dataclass(frozen=True)
class _Scope:
    layer: Layer | None  # None: an explicit namespace_prefix
    prefix: tuple[str, ...]
    plan: FilterPlan


@dataclass(frozen=True)
class _Candidate:
    recalled: Recalled
    content_field: str  # the keyed hash of the content's path: its vector's name in the index
    precedence: int


class Recall:
    def __init__(self, *, search: Search, access: Access, vectors: VectorIndex, sealer: Sealer, clock: Clock,
                 accesses: AccessRecorder, graph: Graph,
                 restore: Callable[[str, Memory], Memory | None] = lambda tenant, memory: None) -> None:
        self._search = search
        self._restore = restore  # `Restore.restore_recalled`: an archived memory returned is restored
        self._graph = graph
        self._access = access
        self._vectors = vectors
        self._sealer = sealer
        self._clock = clock
        self._accesses = accesses
        self._pool = ThreadPoolExecutor(max_workers=len(LAYERS), thread_name_prefix="recall")

    def recall(self, caller: Caller, q: RecallQuery, *, request_id: str = "") -> RecallResult:
        started = time.perf_counter()
        query = q.query  # cut when parsed (search.Query)
        boost = time_boost(query, self._clock.now(), enabled=q.temporal)  # a time the query names (issue 25)
        if q.known_at is None:  # at known_at, versions since replaced hold times of their own
            boost = self._search.boost_that_can_act(caller.tenant_id, boost)
        scopes = self._scopes(caller, q)
        views: list[KnownAtView | None] = [None] * len(scopes)
        if q.known_at is not None:
            if q.graph_hops:
                raise InvalidArgument("graph_hops does not combine with known_at: the graph links current memories "
                                      "only", details={"field": "graph_hops"})
            known = self._search.check_known_at(caller, q.known_at)  # also when no layer is left to search
            # Each scope's changes since (`service.known_at`), read before any work.
            views = [known.view(caller, s.prefix, q.known_at) for s in scopes]
        settings = self._access.settings_of(caller)
        embedded = time.perf_counter()
        embedding = self._search.query_embedding(query, boost)
        if scopes and q.mode != "keyword":
            embedding.prepare()  # once for every layer; a failure is for each layer's retrievers to judge
        retrieving = time.perf_counter()
        per_layer = q.limit + CANDIDATE_SLACK
        # as_of is checked inside each layer's search, like the filter: what did not hold then
        # widens the retrieval instead of taking a place, so nothing that held is crowded out.
        admit = HeldAt(q.as_of) if q.as_of is not None else None
        found = list(self._pool.map(
            lambda s, at: self._search.ranked(caller.tenant_id, s.prefix, s.plan, query, mode=q.mode,
                                              limit=per_layer, embed=embedding, admit=admit, at=at,
                                              boost=boost),
            scopes, views))
        retrieved = time.perf_counter()
        degraded = self._search.report_degraded(caller.tenant_id, embedding, "recall", request_id)

        now = self._clock.now()
        weights = Weights(**settings.recall_weights.model_dump())
        terms = set(query_terms(query))  # which of a plain item's texts is shown (`best_text`)
        scored = [c for ranked in found for r in ranked
                  if (c := self._candidate(caller.tenant_id, r, q, terms, weights, settings.decay_rate_per_day,
                                           settings.recall_min_match, now)) is not None]
        candidates = [c for c in scored if isinstance(c, _Candidate)]
        collapsed, duplicates = self._collapsed(caller.tenant_id, candidates, q.limit)
        ordered = self._sorted(collapsed, q.order)
        # Same-topic memories all clear the fixed thresholds: only the distance to the best tells them apart.
        staying = relative_cut([c.recalled.relevance for c in ordered], settings.recall_cut_gap,
                               settings.recall_cut_margin)
        matches = [ordered[n] for n in staying]
        page = [c.recalled for c in matches[: q.limit]]
        if q.graph_hops and page:
            page += self._graph_expansion(caller.tenant_id, scopes, page, q, terms)
        budget = fill_budget([r.content for r in page], q.token_budget, count_tokens, cut_to_tokens)
        returned = page[: budget.taken]
        if budget.cut is not None:
            returned[-1] = dataclasses.replace(returned[-1], content=budget.cut, truncated=True)
        cut = None
        if q.explain:
            kept = set(staying)
            cut = _nearest_misses([
                *(c for c in scored if isinstance(c, LeftOut)),
                *(_left_out(c.recalled, "duplicate") for c in duplicates),
                # the relative cut is a minimum score too: the query's best match, less the tenant's margins
                *(_left_out(c.recalled, "below_min_score") for n, c in enumerate(ordered) if n not in kept),
                *(_left_out(c.recalled, "over_limit") for c in matches[q.limit:]),
                *(_left_out(r, "token_budget") for r in page[budget.taken:]),
            ])
        if q.include_archived and q.known_at is None:  # a version then is not this recall's to restore
            returned = [self._restored(caller, r) for r in returned]
        used = [r for r in returned if r.memory.current is not False]  # a version since replaced is no use of the key
        if used:
            self._accesses.record(caller.tenant_id, [(r.memory.namespace, r.memory.key, r.memory.id)
                                                     for r in used], now)
        result = RecallResult(
            memories=returned,
            total_count=len(matches),
            truncated=budget.cut is not None or len(returned) < len(page),
            token_count=budget.token_count,
            token_budget=q.token_budget,
            searched_layers=list(dict.fromkeys(s.layer.name for s in scopes if s.layer is not None)),
            query_embedding_ms=round((retrieving - embedded) * 1000, 3),
            retrieval_ms=round((retrieved - retrieving) * 1000, 3),
            degraded=degraded,
            known_at=q.known_at,
            past_retention=sum(at.past_retention for at in views if at is not None),
            cut=cut,
        )
        # Never the query or a memory's content: a hash lets one recall be matched to another.
        log.info("recall", extra={
            "request_id": request_id, "tenant": caller.tenant_id,
            "query_sha256": hashlib.sha256(query.encode("utf-8")).hexdigest()[:16],
            "result_count": len(returned), "total_count": result.total_count,
            "searched_layers": result.searched_layers, "degraded": degraded,
            "latency_ms": round((time.perf_counter() - started) * 1000, 3),
        })
        return result

    def _restored(self, caller: Caller, r: Recalled) -> Recalled:
        """An archived memory being returned, restored (this recall is its use): the new version.
        Only for a caller who may write it (a read right alone writes nothing): else as read."""
        typed = None if is_messages_namespace(r.memory.namespace) else TypedMemory.from_value(r.memory.value)
        if typed is None or not typed.archived:
            return r
        policies = self._access.policies.get(caller.tenant_id)
        if not policies.allow("write", list(r.memory.namespace), r.memory.key, caller.policy_context()):
            return r
        restored = self._restore(caller.tenant_id, r.memory)
        return dataclasses.replace(r, memory=restored) if restored is not None else r

    def _graph_expansion(self, tenant: str, scopes: Sequence[_Scope], hits: Sequence[Recalled],
                         q: RecallQuery, terms: set[str]) -> list[Recalled]:
        """Up to `limit` memories the graph links to the hits, nearest first, each found in a
        scope this recall searched (so authorised and filtered like its hits), of the types asked."""
        started = time.perf_counter()
        refs = [(r.memory.namespace, r.memory.key) for r in hits]
        found: dict[tuple[tuple[str, ...], str], Recalled] = {}
        depth = 0
        for scope in scopes:
            related = self._graph.related_to_memories(GraphScope(tenant, scope.prefix, scope.plan.scope), refs,
                                                       max_hops=q.graph_hops, limit=q.limit, as_of=q.as_of)
            depth = max(depth, related.depth)
            for r in related.memories:
                ref = (r.memory.namespace, r.memory.key)
                # The types and the caller's filter, decided as for the hits: on the plaintext policy
                # attributes where they name a path, on the value for the rest.
                condition = scope.plan.condition_given(r.policy_attributes)
                if ref in found or condition is None or not condition.matches(lookup_in(r.memory.value)):
                    continue
                if (recalled := self._linked(tenant, r.memory, r.hops, q, terms)) is not None:
                    found[ref] = recalled
        expanded = sorted(found.values(), key=lambda r: (r.graph_hops, r.memory.namespace, r.memory.key))[:q.limit]
        self._graph.observe("recall", tenant, started, len(expanded), depth)
        return expanded

    def _linked(self, tenant: str, memory: Memory, hops: int, q: RecallQuery, terms: set[str]) -> Recalled | None:
        """A graph-linked memory as recall returns it: no match of its own, so no relevance."""
        message = is_messages_namespace(memory.namespace)
        typed = None if message else TypedMemory.from_value(memory.value)
        if not _current_enough(typed, q):
            return None
        if typed is not None and typed.archived and not q.include_archived:
            return None
        content = (typed.content if typed is not None
                   else best_text(self._sealer, tenant, memory.value, None, terms, message=message)[0])
        layer = layer_of(memory.namespace)
        return Recalled(
            memory=memory, layer=layer.name if layer else None, content=content,
            type=typed.type if typed is not None else ("message" if message else None),
            relevance=0.0, match=0.0, importance=typed.importance if typed is not None else None,
            pinned=typed.pinned if typed is not None else False, tags=typed.tags if typed is not None else (),
            category=typed.category if typed is not None else None,
            source=typed.source if typed is not None else None, graph_hops=hops)

    def _scopes(self, caller: Caller, q: RecallQuery) -> list[_Scope]:
        """What to search, each authorized as a search (`Access.scope`). A layer asked for by
        name that the caller may not search is a 403; one that only came with the default set
        is left out (the identifiers name it, but the policies keep it from this caller)."""
        check_nesting(q.filter, "filter")
        plan_filter = parse_filter(q.filter if q.filter is not None else {}).merge(_types_filter(q.types))
        policy_filter = _policy_input(plan_filter)
        if q.namespace_prefix is not None:
            if q.layers is not None or q.identifiers is not None:
                raise InvalidArgument("give namespace_prefix or layers and identifiers, not both",
                                      details={"field": "namespace_prefix"})
            prefix = self._access.namespace_to_read(caller, q.namespace_prefix, allow_empty=True)
            scope, pushdown = self._access.scope(caller, "search", prefix, policy_filter)
            return [_Scope(None, scope, FilterPlan(pushdown, plan_filter))]
        identifiers = resolve_identifiers(caller, q.identifiers)
        layers = accessible_layers(identifiers, q.layers)
        scopes = []
        for layer in layers:
            try:
                layer_scopes = []
                for root in layer_namespaces(layer, identifiers):
                    namespace = self._access.namespace_to_read(caller, root)
                    scope, pushdown = self._access.scope(caller, "search", namespace, policy_filter)
                    if not is_under(encode_namespace(scope), namespace):  # narrowed outside the layer
                        raise Forbidden(f"not allowed to search the {layer.name} layer")
                    layer_scopes.append(_Scope(layer, scope, FilterPlan(pushdown, plan_filter)))
            except Forbidden:
                if q.layers is not None:
                    raise
                continue
            scopes.extend(layer_scopes)
        return scopes

    def _candidate(self, tenant: str, r: Ranked, q: RecallQuery, terms: set[str], weights: Weights, decay: float,
                   min_match: float, now: datetime) -> _Candidate | LeftOut | None:
        """The memory scored, or left out by a threshold (LeftOut), or None when it is not one this
        recall may return at all (another type, superseded, archived)."""
        memory = r.memory
        message = is_messages_namespace(memory.namespace)  # a message's {role, content} is no typed memory
        typed = None if message else TypedMemory.from_value(memory.value)
        if q.types is not None and (typed is None or typed.type not in q.types):
            return None
        if not _current_enough(typed, q):
            return None
        if typed is not None and typed.archived and not q.include_archived:
            return None
        match = max(0.0, memory.score or 0.0)  # a semantic-mode cosine can be negative
        if match < min_match:  # no match, however important, recent or pinned
            return LeftOut(memory, _layer_name(memory), None, round(match, 6), "below_min_match")
        if typed is not None:
            content, path = typed.content, CONTENT_FIELDS[0]
        else:  # a message's own words, never its speaker's name
            content, path = best_text(self._sealer, tenant, memory.value, r.field, terms, message=message)
        # Reflection's effective importance and the memory's last use before reflection wrote it
        # (`core.reflection`), for the version it wrote; else the stated importance and the write.
        importance = current_importance(typed, memory.version) if typed is not None else NEUTRAL_IMPORTANCE
        written = (last_active(typed, version=memory.version, updated_at=memory.updated_at, last_accessed_at=None)
                   if typed is not None else memory.updated_at)
        pinned = typed.pinned if typed is not None else False
        fresh = recency(written, now, decay)
        score = relevance(weights, match=match, importance=importance, recency=fresh, pinned=pinned)
        if round(score, 6) < q.min_score:  # as returned: a relevance given back as min_score keeps its memory
            return LeftOut(memory, _layer_name(memory), round(score, 6), round(match, 6), "below_min_score")
        layer = layer_of(memory.namespace)
        explanation = None
        if q.explain:
            scores = memory.scores or {}
            explanation = Explanation(
                keyword=scores.get("keyword"), semantic=scores.get("semantic"), fused=memory.score or 0.0,
                match=match, importance=importance, recency=fresh, pinned=int(pinned),
                weights=dataclasses.asdict(weights), relevance=round(score, 6))
        recalled = Recalled(
            memory=memory,
            layer=layer.name if layer else None,
            content=content,
            type=typed.type if typed is not None else ("message" if message else None),
            relevance=round(score, 6),
            match=round(match, 6),
            importance=typed.importance if typed is not None else None,
            pinned=pinned,
            tags=typed.tags if typed is not None else (),
            category=typed.category if typed is not None else None,
            source=typed.source if typed is not None else None,
            explain=explanation,
        )
        return _Candidate(recalled, self._sealer.field_id(tenant, path), layer.precedence if layer else _NO_LAYER)

    def _collapsed(self, tenant: str, candidates: list[_Candidate],
                   limit: int) -> tuple[list[_Candidate], list[_Candidate]]:
        """Near-duplicates (cosine >= 0.95 between their contents' vectors) collapsed to the most
        specific layer's copy, among the best 2 x limit by relevance; the rest pass as they are.
        The vectors are the index's own (`vectors_of`): a lookup of stored vectors, where
        re-embedding the finalists would cost an embedding call (on AWS, a Titan call per text).
        Returns what stays and the near-duplicates collapsed away."""
        by_relevance = sorted(candidates, key=lambda c: -c.recalled.relevance)
        pool, rest = by_relevance[: DEDUP_POOL_PER_LIMIT * limit], by_relevance[DEDUP_POOL_PER_LIMIT * limit:]
        if len(pool) < 2:
            return candidates, []
        vectors = self._vectors.vectors_of(tenant, [(c.recalled.memory.id, c.content_field) for c in pool])
        kept = collapse_near_duplicates(
            [c.recalled.memory.id for c in pool],
            {c.recalled.memory.id: c.precedence for c in pool},
            {c.recalled.memory.id: c.recalled.relevance for c in pool},
            {c.recalled.memory.id: v for c in pool if (v := vectors.get((c.recalled.memory.id, c.content_field)))},
        )
        return ([c for c in pool if c.recalled.memory.id in kept] + rest,
                [c for c in pool if c.recalled.memory.id not in kept])

    @staticmethod
    def _sorted(candidates: Sequence[_Candidate], order: str) -> list[_Candidate]:
        def newest(c: _Candidate) -> float:
            return -c.recalled.memory.updated_at.timestamp()

        if order == "precedence":  # seed 001: layer precedence first, then the score
            return sorted(candidates, key=lambda c: (c.precedence, -c.recalled.relevance, newest(c)))
        return sorted(candidates, key=lambda c: (-c.recalled.relevance, c.precedence, newest(c)))


def _layer_name(memory: Memory) -> str | None:
    layer = layer_of(memory.namespace)
    return layer.name if layer else None


def _left_out(r: Recalled, reason: CutReason) -> LeftOut:
    return LeftOut(r.memory, r.layer, r.relevance, r.match, reason)


def _nearest_misses(left: list[LeftOut]) -> list[LeftOut]:
    """The `MAX_CUT` most relevant of what was left out (a candidate without a relevance last,
    by its match)."""
    return sorted(left, key=lambda c: (c.relevance is None, -(c.relevance or 0.0), -c.match))[:MAX_CUT]


def _current_enough(typed: TypedMemory | None, q: RecallQuery) -> bool:
    """Without as_of, current facts (a superseded one only with include_superseded); with it,
    what held then, superseded or not, which each layer's search (its hits) and the graph's reads
    (its linked memories) have decided."""
    return q.as_of is not None or typed is None or not typed.superseded or q.include_superseded


def _types_filter(types: Sequence[str] | None):
    """The types condition, checked by the search on each decrypted value (so each layer's
    candidates are of those types): a value without `type` is a fact (TypedMemory)."""
    others = [t for t in MEMORY_TYPES if t not in (types or MEMORY_TYPES)]
    if not others:
        return parse_filter({})
    if "fact" in types:
        return parse_filter({"type": {"nin": others}})
    return parse_filter({"type": {"in": list(types)}})


def _policy_input(plan_filter: Filter) -> dict[str, Any]:
    """The caller's filter and the types condition, as the filter-injection policy reads them."""
    try:
        return plan_filter.to_json()
    except ValueError:  # the flat form holds an operator twice per path at most (`in` and `$in`)
        raise InvalidArgument("filter gives the same operator twice on 'type', and types adds it a third time: "
                              "give the type conditions in one place",
                              details={"field": "filter", "key": "type"}) from None
