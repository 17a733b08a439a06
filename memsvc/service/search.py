"""Search (by filter, or ranked by meaning) and namespace listing.

Both search modes share one `FilterPlan`: what is pushed down to the stores, what is decided on
an item's plaintext policy attributes, and what needs its value decrypted. An item that the
plaintext attributes reject is never decrypted.
"""

from __future__ import annotations

import bisect
import dataclasses
import heapq
import itertools
import logging
import math
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import datetime
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, ConfigDict, Field, StrictBool, StrictFloat, StrictStr

from memsvc.core.errors import EmbeddingFailed, InvalidArgument, MemsvcError, ProviderError, RateLimited
from memsvc.core.filters import MAX_CONDITIONS, NON_FINITE_TAG, OPERATORS, Filter, lookup_in, parse_filter
from memsvc.core.models import Caller, Memory, StoredItem, VectorHit
from memsvc.core.namespaces import match_namespace_pattern
from memsvc.core.validation import MAX_DEPTH, Command, Integer, NamespacePrefix, NonBlank, Segment, Timestamp
from memsvc.core.validity import typed_in, valid_at
from memsvc.core.time_boost import BOOST_DEPTH, FIRST_PAGE, TEMPORAL_DESCRIPTION, TimeBoost, time_boost
from memsvc.core.keywords import query_terms
from memsvc.core.ranking import (COMMONNESS_MIN_PAGE, SEPARATION_HITS, Fusion, commonness,
                                 fusion_for, keyword_held_meaning, keyword_match, separation)
from memsvc.ports import Clock, Embedder, EventLog, ItemStore, KeywordIndex, Metrics, VectorIndex
from memsvc.service.access import Access
from memsvc.service.known_at import (KNOWN_AT_DESCRIPTION, KnownAt, KnownAtView, embedded_texts_of, keyword_scores,
                                     merge_newest_first, merge_ranked, texts_of)
from memsvc.service.field_filter import FieldTokenPlan, FilterDecider, attribute_verdicts, plan_field_tokens
from memsvc.service.memories import MAX_NESTING, Memories, check_nesting, open_memory
from memsvc.service.rerank import Rerank
from memsvc.service.sealing import Sealer

__all__ = ["Search", "SearchQuery", "ListNamespaces", "FilterPlan", "Ranked", "MAX_OFFSET", "MAX_QUERY_CHARS", "Query",
           "SearchResult", "QueryEmbedding", "DEGRADED_METRIC", "QUERY_EMBEDDING_TIMEOUT_SECONDS", "Admit", "HeldAt",
           "AS_OF_DESCRIPTION", "NamespaceListing", "NAMESPACE_COUNT_CAP", "NAMESPACE_COUNT_BUDGET"]

log = logging.getLogger(__name__)

MAX_OFFSET = 10_000
# Each namespace's count stops here: a console shows "1,000+", and a count's reads (on DynamoDB, a
# COUNT Query's pages of the namespace's rows) stay a few pages per namespace.
NAMESPACE_COUNT_CAP = 1000
# A page's counts together stop here: a page of more than 100 namespaces gets a lower cap (limit
# 1000: 100), so no request counts more than about this many rows.
NAMESPACE_COUNT_BUDGET = 100_000
MAX_QUERY_TERMS = 64  # a query's first distinct terms; a longer one is a document, not a question
MAX_QUERY_CHARS = 8192  # seed 004: a longer query is cut, not refused
# A search's or a recall's query, cut where it is parsed: nothing after (the keyword analyzer, the
# embedder, recall's choice of a memory's best text) ever sees more, so their work on it is bounded.
Query = Annotated[NonBlank, AfterValidator(lambda text: text[:MAX_QUERY_CHARS])]
# Seed 004's failure table: when the embedding model fails or times out, a hybrid search or recall
# ranks by the keyword index alone and says so (`degraded`); this counts those answers per tenant.
DEGRADED_METRIC = "memory.search.degraded"
# How long a query waits for its vector before it ranks without one. A query embeds in milliseconds
# locally and in about 0.1 s on Titan, but a throttled or unreachable Titan keeps retrying for far
# longer than a caller waits (`TitanEmbedder`), and a hung local model never answers.
QUERY_EMBEDDING_TIMEOUT_SECONDS = 5.0
QUERY_EMBEDDING_THREADS = 8  # query embeddings in flight at once: all that a hung model can hold


# The filter language of `core.filters`, as far as JSON Schema can say it: a condition is a value to
# equal, or an object of operators (`in`/`nin`/`any` take a list, the ranges a number or a timestamp,
# `exists` a boolean, `not` an object of the other operators).
_NON_FINITE = {"type": "object", "properties": {NON_FINITE_TAG: {"enum": ["Infinity", "-Infinity", "NaN"]}},
               "required": [NON_FINITE_TAG], "additionalProperties": False}
_RANGE_OPERAND = {"anyOf": [{"type": "number"}, {"type": "string", "format": "date-time"},
                            {"type": "string", "format": "date"}, _NON_FINITE]}
_OPERATOR_NAMES = sorted(OPERATORS | {"$" + op for op in OPERATORS})
_OPERANDS = {r"^\$?(n?in|any)$": {"type": "array"}, r"^\$?[gl]te?$": _RANGE_OPERAND,
             r"^\$?exists$": {"type": "boolean"}}
_NEGATED_OPERATORS = {"type": "object", "minProperties": 1,
                      "propertyNames": {"enum": [name for name in _OPERATOR_NAMES if name.lstrip("$") != "not"]},
                      "patternProperties": _OPERANDS}
FILTER_SCHEMA: dict[str, Any] = {
    "maxProperties": MAX_CONDITIONS,
    "propertyNames": {"pattern": r"^[^.]+(\.[^.]+)*$"},
    "additionalProperties": {"anyOf": [
        {"type": ["string", "number", "boolean", "array", "null"]},
        # An object to equal: none of its names looks like an operator (a `$` first, or a bare name).
        # (`(?![\s\S])` is the end in every regex dialect: Python's `$` also matches before a last "\n".)
        {"type": "object", "propertyNames": {"pattern": f"^(?!\\$)(?!(?:{'|'.join(sorted(OPERATORS))})(?![\\s\\S]))"}},
        _NON_FINITE,
        {"type": "object", "minProperties": 1, "propertyNames": {"enum": _OPERATOR_NAMES},
         "patternProperties": {**_OPERANDS, r"^\$?not$": _NEGATED_OPERATORS}},
    ]},
}
FILTER_RULES = (f"conditions on dot paths into value, ANDed (at most {MAX_CONDITIONS}): a value to equal, or an "
                "object of operators eq, ne, in, nin, gt, gte, lt, lte, contains, any, exists, not (or $eq, $ne, ...); "
                "a range takes a number or an ISO 8601 timestamp (a date, or a date and time with or without an "
                "offset); contains x: the list holds x (a scalar counts as a list of one); any [x, ...]: it holds "
                "one of them; exists true|false: the path is present (null is); not {operators}: they do not all "
                "hold (no not inside a not); infinities and NaN "
                f"are spelled {{\"{NON_FINITE_TAG}\": \"Infinity\"}}; nested at most {MAX_NESTING} levels")


# A check on an opened memory, ANDed with the filter where the filter's own value conditions are
# checked (so a rejected memory widens the retrieval as a filtered-out one does): `HeldAt`.
Admit = Callable[[Memory], bool]
# What recall's first retrieval hands over per wanted memory when `admit` checks them: an `as_of`
# in the past rejects every memory stated since, and a second, wider retrieval round costs more
# than a longer first page (values are still opened only until enough pass).
ADMIT_OVERFETCH = 2
AS_OF_DESCRIPTION = ("RFC 3339: only what held then (issue 25): typed memories whose valid time contains it, "
                     "superseded ones included; a plain item by the valid_from/valid_to its value states, else "
                     "created by then")


@dataclass(frozen=True)
class HeldAt:
    """`as_of`'s check (`core.validity`): a typed memory valid then, a plain item by the valid time
    its value states, else created by then (a session message is never typed: `typed_in`)."""

    as_of: datetime

    def __call__(self, memory: Memory) -> bool:
        return valid_at(memory.value, typed=typed_in(memory.namespace, memory.value), created_at=memory.created_at,
                        updated_at=memory.updated_at, as_of=self.as_of)

    def rules_out(self, item: StoredItem) -> bool:
        """Whether the row's plaintext bounds say it did not hold then, before its value is
        decrypted: half of an `as_of` in the middle of the data's time is decided here. A row
        without bounds (written before them) is decided on its value."""
        if item.valid_start is None:
            return False
        return not (item.valid_start <= self.as_of and (item.valid_end is None or self.as_of < item.valid_end))


def _ruled_out(admit: Admit | None, item: StoredItem) -> bool:
    return isinstance(admit, HeldAt) and admit.rules_out(item)


def _deeper(top_k: int, wanted: int, passed: int) -> int:
    """Recall's next round's depth (a search's are fixed: `Search._by_relevance`) when `passed` of
    the `wanted` came out of `top_k`: as deep again as the rate so far says fills the page, and
    half that again (rejection is rarely even), between 1.5 and 4 times as deep. A rejection rate
    that `as_of` or a filter shows in the first round mostly holds in the next, so the usual
    shortfall costs a few more rows, not four times as many."""
    if passed == 0:
        return top_k * 4
    more = (wanted - passed) * top_k / passed * 1.5
    return int(min(top_k * 4, max(top_k * 1.5, top_k + more)))


def _admits(admit: Admit | None, item: StoredItem, memory: Memory) -> bool:
    """`admit`'s verdict on an opened memory. A `HeldAt` has decided a row with bounds already
    (`_ruled_out`, before opening it)."""
    if admit is None or (isinstance(admit, HeldAt) and item.valid_start is not None):
        return True
    return admit(memory)


class SearchQuery(Command):
    """`POST /v1/memories/search`."""

    # mode and min_score rank by relevance, so they need a query. They and query may be left out but
    # not be null: "absent" has one spelling, so the schema's dependentRequired is the whole rule.
    model_config = ConfigDict(json_schema_extra={"dependentRequired": {"mode": ["query"], "min_score": ["query"]}})

    namespace_prefix: NamespacePrefix
    query: Query = Field(None, description="rank by meaning, cut to 8,192 characters; omit to filter")  # type: ignore[assignment]
    filter: dict[StrictStr, Any] | None = Field(None, json_schema_extra=FILTER_SCHEMA, description=FILTER_RULES)
    limit: Integer = Field(10, ge=1, le=100)
    offset: Integer = Field(0, ge=0, le=MAX_OFFSET)
    refresh_ttl: StrictBool = Field(False, description="restart the TTL of every returned item (LangGraph refresh_on_read)")
    mode: Literal["hybrid", "semantic", "keyword"] = Field(  # type: ignore[assignment]
        None, description="how a query ranks: hybrid (the default: meaning and keywords fused, score 0..1), "
                          "semantic (score = cosine similarity) or keyword (score = BM25 match 0..1; 400 when the "
                          "tenant's setting keyword_index is off)")
    min_score: StrictFloat = Field(None, ge=-1, le=1, allow_inf_nan=False,  # type: ignore[assignment]
                                   description="leave out items scoring below this")
    as_of: Timestamp | None = Field(None, description=AS_OF_DESCRIPTION)
    temporal: StrictBool = Field(True, description=TEMPORAL_DESCRIPTION)
    known_at: Timestamp | None = Field(None, description=KNOWN_AT_DESCRIPTION + "; not with refresh_ttl")


class ListNamespaces(Command):
    """`GET /v1/memories/namespaces`."""

    prefix: list[Segment] = Field([], max_length=MAX_DEPTH, description=(
        "Prefix segment ('*' matches one segment); repeat per segment; at most as many as the deepest max_depth "
        "the tenant has had"))
    suffix: list[Segment] = Field([], max_length=MAX_DEPTH, description=(
        "Suffix segment ('*' matches one segment); repeat per segment; at most as many as the deepest max_depth "
        "the tenant has had"))
    max_depth: Integer | None = Field(None, ge=1, description="Truncate returned namespaces to this depth")
    limit: Integer = Field(100, ge=1, le=1000, description="Page size")
    offset: Integer = Field(0, ge=0, le=MAX_OFFSET, description="Namespaces to skip")
    counts: StrictBool = Field(False, description=(
        "Also count each namespace's live items, itself and below (of the namespaces listed that you may read), "
        f"each up to count_cap ({NAMESPACE_COUNT_CAP}, or {NAMESPACE_COUNT_BUDGET} / limit when that is less): a "
        "count equal to it means at least as many"))


@dataclass(frozen=True)
class NamespaceListing:
    """A page of namespaces, and (asked with counts) each one's live items, itself and below, up to `count_cap`."""

    namespaces: list[tuple[str, ...]]
    counts: list[int] | None = None
    count_cap: int | None = None


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
        return self.condition_given(item.policy_attributes)

    def condition_given(self, policy_attributes: dict[str, Any]) -> Filter | None:
        """`value_condition` of an item with these plaintext policy attributes."""
        verdicts = attribute_verdicts(self.scope, self.user, policy_attributes)
        if verdicts is None:
            return None
        return Filter(tuple(c for c, verdict in zip(self.user.conditions, verdicts) if verdict is None))


class Search:
    def __init__(self, *, items: ItemStore, vectors: VectorIndex, keywords: KeywordIndex, embedder: Embedder,
                 sealer: Sealer, access: Access, clock: Clock, memories: Memories, metrics: Metrics,
                 concurrent_retrievers: bool, rerank: Rerank, timeline: EventLog | None = None) -> None:
        self._items = items
        # `known_at` (issue 25): what memsvc held at a past time, from the timeline.
        self.known_at = (KnownAt(log_=timeline, items=items, sealer=sealer, access=access, clock=clock)
                         if timeline is not None else None)
        self._rerank = rerank
        self._vectors = vectors
        self._keywords = keywords
        # On AWS the two retrievers of a hybrid query are network calls (Bedrock, S3 Vectors,
        # DynamoDB), so they run side by side. Locally both are CPU work on the same cores:
        # together they gain nothing (100k items: hybrid p50 103 ms side by side, 99 in turn).
        self._pool = ThreadPoolExecutor(max_workers=8, thread_name_prefix="search") if concurrent_retrievers else None
        self._embedder = embedder
        self._fusion = fusion_for(embedder.model_id)
        # A query's embedding runs on a thread of its own, so that its wait can end (`embed`); at most
        # QUERY_EMBEDDING_THREADS at once. Public: a test shortens the wait.
        self._embedding_slots = threading.BoundedSemaphore(QUERY_EMBEDDING_THREADS)
        self.embedding_timeout_seconds = QUERY_EMBEDDING_TIMEOUT_SECONDS
        self._metrics = metrics
        self._sealer = sealer
        self._access = access
        self._clock = clock
        self._memories = memories

    def search(self, caller: Caller, q: SearchQuery) -> list[Memory]:
        """The memories found, for callers in the process (`answer` is the API's)."""
        return self.answer(caller, q).memories

    def answer(self, caller: Caller, q: SearchQuery, *, request_id: str = "") -> "SearchResult":
        prefix = self._access.namespace_to_read(caller, q.namespace_prefix, allow_empty=True)
        check_nesting(q.filter, "filter")
        user_filter = parse_filter(q.filter if q.filter is not None else {})
        scope, scope_filter = self._access.scope(caller, "search", prefix, user_filter.to_json())
        plan = FilterPlan(scope_filter, user_filter)
        admit = HeldAt(q.as_of) if q.as_of is not None else None
        if q.query is None:
            for name in ("mode", "min_score"):
                if getattr(q, name) is not None:
                    raise InvalidArgument(f"{name} ranks by relevance, so it needs a query", details={"field": name})
        at = self.view_at(caller, scope, q.known_at, refresh_ttl=q.refresh_ttl)
        if q.query is None:
            found = (self._by_filter(caller.tenant_id, scope, plan, q.limit, q.offset, admit) if at is None
                     else self._by_filter_at(caller.tenant_id, scope, plan, q.limit, q.offset, admit, at))
            degraded = False
        else:
            boost = time_boost(q.query, self._clock.now(), enabled=q.temporal)  # a time it names (issue 25)
            if q.known_at is None:  # at known_at, versions since replaced hold times of their own
                boost = self.boost_that_can_act(caller.tenant_id, boost)
            embedding = self.query_embedding(q.query, boost)
            ranked = self._by_relevance(caller.tenant_id, scope, plan, q.query, q.mode or "hybrid",
                                        offset=q.offset, limit=q.limit, min_score=q.min_score,
                                        embed=embedding, admit=admit, at=at, boost=boost)
            found = [r.memory for r in ranked]
            degraded = self.report_degraded(caller.tenant_id, embedding, "search", request_id)
        return SearchResult(self._memories.refresh(caller.tenant_id, found) if q.refresh_ttl else found, degraded,
                            known_at=q.known_at, past_retention=at.past_retention if at is not None else 0)

    def view_at(self, caller: Caller, scope: tuple[str, ...], known_at: datetime | None, *,
                refresh_ttl: bool = False) -> KnownAtView | None:
        """The scope as memsvc held it at `known_at` (`service.known_at`); None without one."""
        if known_at is None:
            return None
        return self.check_known_at(caller, known_at, refresh_ttl=refresh_ttl).view(caller, scope, known_at)

    def check_known_at(self, caller: Caller, known_at: datetime, *, refresh_ttl: bool = False) -> KnownAt:
        """A 400 for a `known_at` this request cannot be answered at (`KnownAt.check`)."""
        if refresh_ttl:
            raise InvalidArgument("refresh_ttl restarts current items' TTL: it does not combine with known_at",
                                  details={"field": "refresh_ttl"})
        if self.known_at is None:
            raise InvalidArgument("known_at needs the event timeline, which this deployment does not keep",
                                  details={"field": "known_at"})
        self.known_at.check(caller, known_at)
        return self.known_at

    def _by_filter_at(self, tenant: str, scope: tuple[str, ...], plan: FilterPlan, limit: int, offset: int,
                      admit: Admit | None, at: KnownAtView) -> list[Memory]:
        """`_by_filter` at `known_at`: the unchanged keys' current items and the changed keys'
        versions then, newest first."""
        current = self._by_filter(tenant, scope, plan, offset + limit, 0, at.admit(admit), live_at=at.known_at)
        versions = at.newest_first(at.versions(plan.condition_given, admit))  # after: it reads the late keys
        now = self._clock.now()
        merged = merge_newest_first([dataclasses.replace(m, current=_unexpired(m, now)) for m in current], versions)
        return merged[offset:offset + limit]

    def _by_filter(self, tenant: str, scope: tuple[str, ...], plan: FilterPlan, limit: int,
                   offset: int, admit: Admit | None = None, live_at: datetime | None = None) -> list[Memory]:
        """The page of live items under `scope` that the filter admits, newest first (live at
        `live_at` when given: `known_at`'s, where an item expired since but not swept yet was held).

        Every item's head (no sealed part) is read; its policy attributes, and field tokens where
        its current version has them (`field_filter`), decide what they can. Values are read and
        decrypted, a batch at a time (`get_many`), only for what is left (ranges, items without
        tokens), for the page returned, and for every candidate when `admit` checks them."""
        now = live_at or self._clock.now()
        tokens = (plan_field_tokens(self._sealer, self._keywords, tenant, scope, plan.user)
                  if self._access.settings.get(tenant).keyword_index else FieldTokenPlan.without_tokens(plan.user))
        decider = FilterDecider(plan.scope, plan.user, tokens)
        candidates = ((head, left) for head in self._items.live_heads(tenant, scope, now)
                      if (left := decider.value_left(head)) is not None)
        out: list[Memory] = []
        admitted = 0
        while admitted < offset + limit:
            # As many candidates as could complete the page if every one passed.
            batch = list(itertools.islice(candidates, offset + limit - admitted))
            if not batch:
                break
            # Read the items that need their value: to decide, or because they may be returned.
            # One that the tokens admit and that lands before `offset` even if all before it pass
            # is counted unread.
            needed = [head for n, (head, left) in enumerate(batch)
                      if not left.is_empty or admit is not None or admitted + n >= offset]
            rows = self._items.get_many(tenant, [(h.namespace, h.key) for h in needed]) if needed else {}
            for head, left in batch:
                row = rows.get((head.namespace, head.key))
                memory = None
                if row is not None and row.id != head.id:  # written since its head was read: decide it anew
                    left = plan.value_condition(row) if row.is_live(now) else None
                    if left is None:
                        continue
                if not left.is_empty or admit is not None or admitted >= offset:
                    # Deleted or expired since its head was read, or not held at `as_of` by its bounds.
                    if row is None or not row.is_live(now) or _ruled_out(admit, row):
                        continue
                    memory = open_memory(self._sealer, row)
                    if not left.matches(lookup_in(memory.value)) or not _admits(admit, row, memory):
                        continue
                if admitted >= offset:
                    out.append(memory)
                admitted += 1
        return out

    def ranked(self, tenant: str, scope: tuple[str, ...], plan: FilterPlan, query: str, *, mode: str, limit: int,
               embed: "QueryEmbedding", admit: Admit | None = None,
               at: KnownAtView | None = None, boost: TimeBoost | None = None) -> list["Ranked"]:
        """The best `limit` memories under an authorized `scope` by the mode's score (recall's
        retrieval, one layer at a time). `embed` gives the query's vector (recall embeds it once
        for every layer). Each retriever first hands over `limit` candidates (search asks for
        50): recall searches several layers per request, and every candidate is read and
        decrypted; fewer admitted than `limit` widens the search as usual. No rerank step: recall
        ranks by its own relevance, and a reranker call per layer would hold recall's shared
        threads for as long as the reranker takes. Nor the distinct cosine (`core.ranking`):
        recall's cut (`min_score`, `recall_min_match`, the adaptive cut) is calibrated on the
        plain one, and with the distinct one the golden set's recall fell from R@5 0.905 to 0.782
        (benchmarks/README.md, "New signals (fifth round)")."""
        return self._by_relevance(tenant, scope, plan, query, mode, offset=0, limit=limit, min_score=None,
                                  embed=embed, first_page=limit if admit is None else limit * ADMIT_OVERFETCH,
                                  rerank=False, admit=admit, at=at, boost=boost, distinct=False)

    def _by_relevance(self, tenant: str, scope: tuple[str, ...], plan: FilterPlan, query: str, mode: str, *,
                      offset: int, limit: int, min_score: float | None,
                      embed: "QueryEmbedding", first_page: int | None = None,
                      rerank: bool = True, admit: Admit | None = None,
                      at: KnownAtView | None = None, boost: TimeBoost | None = None,
                      live_at: datetime | None = None, noted: KnownAtView | None = None,
                      distinct: bool = True) -> list["Ranked"]:
        """Rank by the mode's relevance. Each retriever (semantic, keyword) hands over its best
        candidates; those are fused and admitted. When too few are admitted, both retrievers are
        asked for more, until enough, or none is left that could score `min_score`. A query that
        names a time (`boost`, `core.time_boost`) raises the scores of the memories of that time
        among the first round's candidates (`BOOST_DEPTH`, whatever the page), and is ranked again
        by the whole query's vector (`QueryEmbedding.whole`) when none of its first page is of it.

        At `known_at` (`at`): the unchanged keys' current items (live then) ranked so, merged with
        the changed keys' versions then, scored on the same scale (`_ranked_versions`); no rerank step.
        `distinct`: hybrid mode ranks by the distinct cosine where the model's fusion has one."""
        # A query embedded without its time's words may rank again with them (below): decided on the
        # ranking's first page whatever page was asked, so its pages still partition one ranking.
        whole = _whole_query(embed, boost, mode)
        if at is not None:
            depth = max(offset + limit, FIRST_PAGE) if whole is not None else offset + limit
            merged = self._ranked_at(tenant, scope, plan, query, mode, depth, min_score, embed, first_page, admit, at,
                                     boost, distinct)
            # As without known_at, but over both parts: the named time meets none of the best, so the
            # query's whole vector (its time's words kept) ranks both again, as a query naming no time.
            if whole is not None and _time_meets_none(embed, boost, merged):
                merged = self._ranked_at(tenant, scope, plan, query, mode, offset + limit, min_score, whole,
                                         first_page, admit, at, None, distinct)
            return merged[offset:offset + limit]
        retrievers = self._retrievers(tenant, scope, plan, query, mode, embed, distinct)
        if self._pool is None and len(retrievers) > 1 and isinstance(embed, QueryEmbedding):
            embed.start()  # the model runs while the keyword retriever reads its postings
        # The ranking is the first round's candidates, then each deeper round's new ones (`rounds`),
        # each scored by the signals of the round that found it, so that it depends on the query
        # alone: a search's rounds are of fixed depths whatever the page asked (the first
        # SEPARATION_HITS, the distinct cosine's group, then 4 times deeper each), and a deeper
        # round changes nothing before it. Read deeper, a memory can score more (a signal it had not
        # handed over yet; a distinct cosine, which does not follow the cosine's order), so a page
        # sorted over whatever its depth read disagreed with a longer page of the same query.
        # Recall, without pages, reads its first `first_page` and as deep again as it needs.
        # A query that names a time: its first round is the boost's reach (`BOOST_DEPTH`; recall 4 x
        # its first page), boosted.
        top_k = first_page or SEPARATION_HITS
        if boost is not None:
            top_k = min(self._vectors.max_top_k, BOOST_DEPTH if first_page is None else first_page * 4)
        # The rerank step reorders the fused ranking's first `depth`, whatever the page asked.
        depth = self._rerank.depth(tenant, mode) if rerank else 0
        wanted = max(offset + limit, depth)
        if whole is not None:
            wanted = max(wanted, FIRST_PAGE)
        # By memory id, so a wider query never reads or opens one twice: the current items that
        # their plaintext attributes admit, with what is left to check on their values. A
        # candidate's item is read when the ranking reaches it (`decide`), a batch at a time.
        decided: dict[str, tuple[StoredItem, Filter] | None] = {}
        opened: dict[str, Memory | None] = {}
        signals: dict[str, dict[str, _Signal]] = {}  # each candidate's, as the round that found it has them
        refs: dict[str, tuple[tuple[str, ...], str]] = {}  # each candidate's (namespace, key)
        rounds: list[list[str]] = []  # each round's new candidates
        weight: float | None = None  # the semantic signal's share of this query's hybrid score
        tried: set[str] = set()  # keyword-held candidates whose stored meaning was asked for

        def decide(memory_ids: list[str]) -> None:
            items = self._items.get_many(tenant, list({refs[memory_id] for memory_id in memory_ids}))
            now = live_at or self._clock.now()
            for memory_id in memory_ids:
                ref = refs[memory_id]
                item = items.get(ref)
                # Not current: a version whose index entries await cleanup, or one deleted or expired.
                current = item is not None and item.id == memory_id and item.is_live(now)
                if not current and noted is not None and item is not None and item.updated_at > noted.known_at:
                    noted.note_late(ref)  # an older version's entries, the key written since: its version then
                condition = plan.value_condition(item) if current and not _ruled_out(admit, item) else None
                decided[memory_id] = (item, condition) if condition is not None else None

        while True:
            asked = [r for r in retrievers if not r.exhausted]
            pages = self._pages(asked, top_k)
            if weight is None:  # from the first pages, then fixed: the early stop's bound needs one weight
                separations = {r.name: r.separation for r in retrievers}
                meaning = any(r.name == "semantic" and r.handed_over for r in retrievers)
                weight = self._fusion.semantic_weight(separations.get("semantic", 0.0), separations.get("keyword", 0.0),
                                                      meaning=meaning)
                if noted is not None:  # known_at's versions are fused with it, and scored by this vector
                    noted.weight, noted.embed = weight, embed
                    noted.direction = next((r.direction for r in retrievers if isinstance(r, _SemanticRetriever)),
                                           None)
            fresh: dict[str, tuple[tuple[str, ...], str]] = {}
            for retriever, page in zip(asked, pages):
                for memory_id, (ref, signal) in page.items():
                    if memory_id in fresh or memory_id not in signals:
                        signals.setdefault(memory_id, {})[retriever.name] = signal
                        fresh[memory_id] = ref
            rounds.append(list(fresh))
            refs.update(fresh)
            if noted is not None:  # known_at notes every candidate whose key was written since
                decide(list(fresh))
            ranked = self._best_opened(decided, decide, opened, signals, rounds, mode, weight, wanted, min_score,
                                       admit, boost)
            if self._give_keyword_held_meaning(retrievers, rounds, signals, decided, decide, weight, ranked, wanted,
                                               boost, tried):
                ranked = self._best_opened(decided, decide, opened, signals, rounds, mode, weight, wanted, min_score,
                                           admit, boost)
            exhausted = all(r.exhausted for r in retrievers)
            # What a memory that no retriever has handed over yet could score at most (past the
            # boost's reach, so unboosted).
            ceiling = _fused({r.name: _Signal(r.floor, r.floor) for r in retrievers if not r.exhausted}, mode, weight,
                             self._fusion)
            hopeless = min_score is not None and ceiling < min_score
            if len(ranked) >= wanted or exhausted or hopeless or top_k >= self._vectors.max_top_k:
                break
            deeper = top_k * 4 if first_page is None else _deeper(top_k, wanted, len(ranked))
            top_k = min(self._vectors.max_top_k, deeper)
        if whole is not None and noted is None and _time_meets_none(embed, boost, ranked):
            # The named time meets none of the best: the boost lifts nothing, and the time's words may
            # be all that ties the query to its answer (a memory that says "in July" in its words,
            # stated later). Ranked again by the whole query's vector, as a query naming no time is
            # (no boost, no fixed reach): one embedding and one ordinary ranking more.
            return self._by_relevance(tenant, scope, plan, query, mode, offset=offset, limit=limit,
                                      min_score=min_score, embed=whole, first_page=first_page, rerank=rerank,
                                      admit=admit, live_at=live_at, distinct=distinct)
        if offset < depth:  # a page past the reranked window would be the same without the call
            ranked = self._rerank.reorder(tenant, query, mode, ranked)
        return ranked[offset:offset + limit]

    def _give_keyword_held_meaning(self, retrievers: list["_Retriever"], rounds: list[list[str]],
                                   signals: dict[str, dict[str, "_Signal"]],
                                   decided: dict[str, tuple[StoredItem, Filter] | None],
                                   decide: Callable[[list[str]], None], weight: float, ranked: list["Ranked"],
                                   wanted: int, boost: TimeBoost | None, tried: set[str]) -> bool:
        """Hybrid's distinct cosine, from their stored vectors, for the candidates that only the
        keyword retriever handed over, among its first SEPARATION_HITS hits (whatever the page, as
        the distinct cosine's first page: at most that many reads a query) that hold enough of the
        query (`core.ranking.keyword_held_meaning`), where the distinct cosine is on (the semantic
        retriever has a first page's direction); and only for those that could be among the best
        `wanted`: every one ranked before the round that fills the page, and of that round those
        whose score with meaning could reach the `wanted`th's (`_SemanticRetriever.unseen_ceiling`
        bounds their cosine: its lowest hit's where the index searched exactly, else 1; meaning
        only raises a score, so the `wanted`th's does not fall). The others rank below the page
        either way, so a page still begins every longer page of the query. The page fills in its
        last round: a round before it had too few, so every one of its candidates was given
        meaning then (`tried`). Their items are read for their indexed fields (`decide`); one not
        current, not admitted or not indexed yet keeps no meaning. Returns whether any gained
        meaning (then rank again)."""
        semantic = next((r for r in retrievers if isinstance(r, _SemanticRetriever)), None)
        keywords = next((r for r in retrievers if isinstance(r, _KeywordRetriever)), None)
        if semantic is None or semantic.direction is None or keywords is None:
            return False
        round_of = {memory_id: n for n, found in enumerate(rounds) for memory_id in found}
        last, bar = len(rounds), -math.inf  # the page is not full: every round's candidates may be on it
        if len(ranked) >= wanted:
            last, bar = round_of[ranked[wanted - 1].memory.id], ranked[wanted - 1].memory.score or 0.0
        held, ceiling = [], semantic.unseen_ceiling()
        for n, found in enumerate(rounds[:last + 1]):
            for memory_id in found:
                keyword = signals[memory_id].get("keyword")
                if memory_id in tried or "semantic" in signals[memory_id] or keyword is None \
                        or not keyword_held_meaning(keyword.value, keywords.first_hits.get(memory_id, 0)):
                    continue
                if n == last:
                    most = self._fusion.hybrid_score(ceiling, keyword.value, weight)
                    if (boost.ceiling(most) if boost is not None and n == 0 else most) < bar - 1e-6:
                        continue
                held.append(memory_id)
        tried.update(held)
        decide([memory_id for memory_id in held if memory_id not in decided])
        fields = {memory_id: entry[0].indexed_fields for memory_id in held
                  if (entry := decided[memory_id]) is not None and entry[0].indexed_fields}
        given = semantic.meaning_of(fields)
        for memory_id, signal in given.items():
            signals[memory_id]["semantic"] = signal
        return bool(given)

    def _best_opened(self, decided: dict[str, tuple[StoredItem, Filter] | None], decide: Callable[[list[str]], None],
                     opened: dict[str, Memory | None], signals: dict[str, dict[str, "_Signal"]],
                     rounds: list[list[str]], mode: str, weight: float, wanted: int, min_score: float | None,
                     admit: Admit | None = None, boost: TimeBoost | None = None) -> list["Ranked"]:
        """The best `wanted` candidates that pass the filter: each round's, best first, after the
        rounds before it. The ranking needs only the retrievers' signals and the items' heads, so
        items are read (`decide`) and values decrypted in rank order, and only until `wanted` pass:
        a page of 10 reads and opens about 10 memories, not every candidate.

        With a `boost` (its time is in the value): the first round's candidates (the boost's reach)
        by the boosted score, opened until none left could outrank the `wanted`th even boosted;
        those of wider rounds follow, unboosted."""
        ranked: list[Ranked] = []
        for n, found in enumerate(rounds):
            if len(ranked) >= wanted:
                break
            ranked += self._opened_in_order(found, decided, decide, opened, signals, mode, weight,
                                            wanted - len(ranked), min_score, admit, boost if n == 0 else None)
        return ranked

    def _opened_in_order(self, candidates: list[str], decided: dict[str, tuple[StoredItem, Filter] | None],
                         decide: Callable[[list[str]], None], opened: dict[str, Memory | None],
                         signals: dict[str, dict[str, "_Signal"]], mode: str, weight: float, wanted: int,
                         min_score: float | None, admit: Admit | None,
                         boost: TimeBoost | None = None) -> list["Ranked"]:
        """`_best_opened` of one round's candidates, boosted or not. Their items are read as the
        ranking reaches them, as many at a time as could complete the page, or as were read before
        when more (so a boosted ranking reads on in few calls), and the rest of a tie (which the
        newer memory wins); a value is opened only where the filter or `admit` needs it
        (`_admitted`), or to be returned. Boosted, a min-heap holds the best `wanted` scores so
        far: its least is the `wanted`th best, O(log wanted) per candidate; a row's plaintext
        valid time says whether the boost is its (`_boosted`), so the candidates read to rule out
        a boost above the page are not decrypted (a time-naming query read about 200 of them)."""
        scored = []
        for memory_id in candidates:
            if memory_id in decided and decided[memory_id] is None:
                continue
            score = _fused(signals[memory_id], mode, weight, self._fusion)
            if min_score is not None and (score if boost is None else boost.ceiling(score)) < min_score:
                continue
            semantic, keyword = signals[memory_id].get("semantic"), signals[memory_id].get("keyword")
            # Scores equal to 6 decimals are ties (float32 sums differ in the last bits by row
            # order); a tie goes to the closer meaning, then to the higher BM25 (a keyword match is
            # capped at 1), then to the newer memory (once read), then by id.
            tie = (-round(score, 6), -round((semantic.raw if semantic else None) or -1.0, 6),
                   -round(keyword.raw if keyword else 0.0, 6))
            scored.append((tie, memory_id))

        def newer_first(entry: tuple[tuple[float, float, float], str]) -> tuple[Any, ...]:
            """The order: a tie's memories are read together (below), so each is ordered whole."""
            found = decided.get(entry[1])
            return entry[0], -found[0].updated_at.timestamp() if found else 0.0, entry[1]

        scored.sort(key=newer_first)  # last, the memory id: pages of one query agree on ties

        kept: list[tuple[float, str, StoredItem]] = []
        best: list[float] = []  # boosted: the best `wanted` scores so far, least first
        at = 0
        while at < len(scored):
            if len(kept) >= wanted and (boost is None or best[0] >= boost.ceiling(-scored[at][0][0])):
                break
            if scored[at][1] not in decided:  # as many as could complete the page, and twice as many each time after
                end = min(len(scored), at + max(wanted - len(kept), at, 1))
                while end < len(scored) and scored[end][0] == scored[end - 1][0]:
                    end += 1
                decide([memory_id for _, memory_id in scored[at:end] if memory_id not in decided])
                scored[at:end] = sorted(scored[at:end], key=newer_first)
            tie, memory_id = scored[at]
            at += 1
            entry = decided[memory_id]
            if entry is None or not self._admitted(memory_id, *entry, opened, admit):
                continue
            item = entry[0]
            score = -tie[0] if boost is None else self._boosted(memory_id, item, opened, signals[memory_id], mode,
                                                                  weight, boost)
            if min_score is None or boost is None or score >= min_score:
                kept.append((score, memory_id, item))
                if boost is not None:
                    (heapq.heappush if len(best) < wanted else heapq.heappushpop)(best, score)
        if boost is not None:  # by the boosted score; equal ones keep the order above
            kept = sorted(kept, key=lambda k: -round(k[0], 6))[:wanted]
        return [self._scored(self._opened(memory_id, item, opened), signals[memory_id], mode, weight, boost)
                for _, memory_id, item in kept]

    def _admitted(self, memory_id: str, item: StoredItem, condition: Filter, opened: dict[str, Memory | None],
                  admit: Admit | None) -> bool:
        """Whether a candidate passes what is left of the filter on its value and `admit`, its value
        opened only when one of them needs it (a `HeldAt` has decided a row with bounds already)."""
        if memory_id in opened:
            return opened[memory_id] is not None
        if condition.is_empty and (admit is None or (isinstance(admit, HeldAt) and item.valid_start is not None)):
            return True
        memory = open_memory(self._sealer, item)
        passes = condition.matches(lookup_in(memory.value)) and _admits(admit, item, memory)
        opened[memory_id] = memory if passes else None
        return passes

    def _opened(self, memory_id: str, item: StoredItem, opened: dict[str, Memory | None]) -> Memory:
        """An admitted candidate's memory, opened once."""
        memory = opened.get(memory_id)
        if memory is None:
            memory = opened[memory_id] = open_memory(self._sealer, item)
        return memory

    def _boosted(self, memory_id: str, item: StoredItem, opened: dict[str, Memory | None],
                 signals: dict[str, "_Signal"], mode: str, weight: float, boost: TimeBoost) -> float:
        """An admitted candidate's boosted score: whether its time meets the named one from its
        row's plaintext valid time, which is the interval its value states (`StoredItem.valid_start`);
        from the opened value for a row written before those bounds."""
        if item.valid_start is not None:
            holds = boost.named.overlaps(item.valid_start, item.valid_end)
        else:
            holds = boost.holds_for(self._opened(memory_id, item, opened))
        return boost.score(_fused(signals, mode, weight, self._fusion), holds)

    def _pages(self, retrievers: list["_Retriever"], top_k: int) -> list[dict[str, Any]]:
        """Each retriever's next page, in their order: side by side on the pool where there is one;
        otherwise the semantic retriever last, so that a query embedding started runs meanwhile."""
        if self._pool is not None:
            return list(self._pool.map(lambda r: r.page(top_k), retrievers))
        pages = {n: retrievers[n].page(top_k)
                 for n in sorted(range(len(retrievers)), key=lambda n: retrievers[n].name == "semantic")}
        return [pages[n] for n in range(len(retrievers))]

    def _retrievers(self, tenant: str, scope: tuple[str, ...], plan: FilterPlan, query: str,
                    mode: str, embed: "QueryEmbedding", distinct: bool) -> list["_Retriever"]:
        keyword_on = self._access.settings.get(tenant).keyword_index
        if mode == "keyword" and not keyword_on:
            raise InvalidArgument("keyword indexing is off for this tenant (setting keyword_index)",
                                  details={"field": "mode"})
        out: list[_Retriever] = []
        if mode in ("hybrid", "semantic"):
            # Without the query's vector a hybrid query ranks by keywords alone (seed 004's failure
            # table); it cannot when the tenant keeps no keyword index.
            distinct = distinct and mode == "hybrid" and self._fusion.commonness_penalty > 0
            out.append(_SemanticRetriever(self._vectors, tenant, scope, plan.scope, embed, self._fusion,
                                          optional=mode == "hybrid" and keyword_on, distinct=distinct))
        if mode in ("hybrid", "keyword") and keyword_on:
            try:
                terms = self._sealer.term_ids(tenant, query_terms(query)[:MAX_QUERY_TERMS], create=False)
            except LookupError:  # a tenant without a data key has stored nothing
                terms = []
            out.append(_KeywordRetriever(self._keywords, tenant, scope, plan.scope, terms))
        return out

    def boost_that_can_act(self, tenant: str, boost: TimeBoost | None) -> TimeBoost | None:
        """`boost`, or None when the tenant holds no memory of its time: a time (not a month of
        any year) after every memory's, or before all of them (`ItemStore.time_span`). Such a
        query is ranked as one naming no time, by its whole vector: what `_by_relevance` comes to
        once the boosted first page holds none of that time, without the vector of the query less
        its time's words and the boost's 200-deep round (a "next week" query took 46 ms, p50, on
        10k memories, against 19 for one naming no time)."""
        if boost is None or boost.named.recurring:
            return boost
        span = self._items.time_span(tenant)
        if span is None:
            return boost
        first, last = span
        named = boost.named
        if (named.start is not None and last < named.start) or (named.end is not None and first >= named.end):
            return None
        return boost

    def query_embedding(self, query: str, boost: TimeBoost | None) -> "QueryEmbedding":
        """A request's query embedding, made once: of the query without the words of a time it
        names (matched by valid time instead, `TimeBoost.embed_text`), with the query as asked for
        its `whole`."""
        meaning = boost.embed_text if boost is not None else query
        whole = QueryEmbedding(lambda: self.embed(query)) if meaning != query else None
        return QueryEmbedding(lambda: self.embed(meaning), whole)

    def embed(self, query: str) -> list[float]:
        """The query's vector (`_within_deadline`)."""
        embed = getattr(self._embedder, "embed_queries", self._embedder.embed)
        return self._within_deadline(lambda: embed([query]))[0]

    def _within_deadline(self, call: Callable[[], list[list[float]]]) -> list[list[float]]:
        """An embedder call. One that fails, or has not answered within `embedding_timeout_seconds`
        (waiting for a slot included), is `EmbeddingFailed` (Titan's throttling stays
        `RateLimited`).

        A call that times out keeps its thread and slot until the model answers: a hung model
        holds at most QUERY_EMBEDDING_THREADS, later calls wait for a slot within their own
        timeout, and no request waits longer than that. The threads are daemons: a hung model never
        keeps the process from exiting."""
        deadline = time.monotonic() + self.embedding_timeout_seconds
        if not self._embedding_slots.acquire(timeout=self.embedding_timeout_seconds):
            raise self._too_slow()
        answered = threading.Event()
        outcome: dict[str, Any] = {}

        def run() -> None:
            try:
                outcome["vectors"] = call()
            except Exception as exc:
                outcome["error"] = exc
            finally:
                self._embedding_slots.release()
                answered.set()

        try:
            threading.Thread(target=run, name="query-embed", daemon=True).start()
        except BaseException:
            self._embedding_slots.release()
            raise
        if not answered.wait(max(0.0, deadline - time.monotonic())):
            raise self._too_slow()
        error = outcome.get("error")
        if isinstance(error, MemsvcError):
            raise error
        if error is not None:
            raise EmbeddingFailed("the embedding model could not embed the text") from error
        return outcome["vectors"]

    def _too_slow(self) -> EmbeddingFailed:
        return EmbeddingFailed("the embedding model did not answer in time",
                               details={"timeout_seconds": self.embedding_timeout_seconds})

    def report_degraded(self, tenant: str, embedding: "QueryEmbedding", operation: str, request_id: str) -> bool:
        """Whether an answered query was ranked without its vector (its embedding failed, and its
        mode let the keyword index answer alone); if so it is counted and logged, with the error's
        code: never the query, nor the embedder's own words."""
        failure = embedding.failure or (embedding.whole.failure if embedding.whole is not None else None)
        if failure is None:
            return False
        code = failure.code
        self._metrics.count(DEGRADED_METRIC, tenant)
        log.warning("%s answered from the keyword index alone: the query's meaning failed (%s)", operation, code,
                    extra={"request_id": request_id, "tenant": tenant, "operation": operation, "code": code})
        return True

    def _scored(self, memory: Memory, signals: dict[str, "_Signal"], mode: str, weight: float,
                boost: TimeBoost | None = None) -> "Ranked":
        raw = {name: (signals[name].raw if name in signals else None) for name in ("semantic", "keyword")}
        semantic = signals.get("semantic")
        score = _fused(signals, mode, weight, self._fusion)
        if boost is not None:
            score = boost.score(score, boost.holds_for(memory))
        return Ranked(dataclasses.replace(memory, score=score, scores=raw),
                      semantic.field if semantic else None)

    def _ranked_at(self, tenant: str, scope: tuple[str, ...], plan: FilterPlan, query: str, mode: str, depth: int,
                   min_score: float | None, embed: "QueryEmbedding", first_page: int | None,
                   admit: Admit | None, at: KnownAtView, boost: TimeBoost | None,
                   distinct: bool) -> list["Ranked"]:
        """The best `depth` at `known_at`, best first: the current items held then, ranked by the
        indexes, merged with the changed keys' versions then, scored with their weight and vector."""
        current = self._by_relevance(tenant, scope, plan, query, mode, offset=0, limit=depth, min_score=min_score,
                                     embed=embed, first_page=first_page, rerank=False, admit=at.admit(admit),
                                     boost=boost, live_at=at.known_at, noted=at, distinct=distinct)
        versions = self._ranked_versions(tenant, at.versions(plan.condition_given, admit), query, mode,  # after:
                                         at.weight, at.embed or embed, min_score, boost,  # the late keys known
                                         at.text_vectors, at.direction)
        now = self._clock.now()
        return merge_ranked([Ranked(dataclasses.replace(r.memory, current=_unexpired(r.memory, now)), r.field)
                             for r in current], versions, lambda r: r.memory.score)[:depth]

    def _ranked_versions(self, tenant: str, versions: list[Memory], query: str, mode: str, weight: float | None,
                         embed: Callable[[], list[float]], min_score: float | None, boost: TimeBoost | None,
                         text_vectors: dict[tuple[str, int], list[list[float]]],
                         direction: list[float] | None = None) -> list["Ranked"]:
        """`known_at`'s versions no longer current, scored as the current items beside them: they
        left the indexes, so their signals are made here. Semantic: the cosine of the query's
        vector with their texts' (`embedded_texts_of`, embedded now, max-pooled as the index's
        fields are). Keyword: `keyword_scores`' match (0..1, a fraction of a full match of the
        query) over their texts. Fused with the current items' `weight`, then boosted for a time
        the query names. Bounded: at most 2 x MAX_KNOWN_AT_EVENTS versions (changed and late keys),
        MAX_VERSION_TEXTS texts each, in one embedder call; kept in `text_vectors` (the view's), so
        a ranking again by the whole query's vector embeds none of them again. In hybrid mode the
        cosine is made distinct against the `direction` of the current items' first page (their
        semantic retriever's), as theirs is."""
        if not versions:
            return []
        signals: list[dict[str, _Signal]] = [{} for _ in versions]
        if mode != "semantic" and self._access.settings.get(tenant).keyword_index:
            terms = query_terms(query)[:MAX_QUERY_TERMS]  # as the keyword retriever looks them up
            for found, (match, raw) in zip(signals, keyword_scores(terms, [texts_of(m.value) for m in versions])):
                found["keyword"] = _Signal(match, raw)
        if mode != "keyword":
            bests = self._version_cosines(versions, embed, text_vectors)
            held = [best[1] for best in bests if best is not None]
            commons = iter(commonness(direction if mode == "hybrid" else None, held))  # one mean for all
            for found, best in zip(signals, bests):
                if best is not None:
                    cosine = best[0]
                    found["semantic"] = _Signal(self._fusion.distinct_cosine(cosine, next(commons)), cosine)
        if weight is None:  # no current search ran (it always does: a safe default all the same)
            weight = self._fusion.semantic_weight(0.0, 0.0)
        ranked = []
        for memory, found in zip(versions, signals):
            scored = self._scored(memory, found, mode, weight, boost)
            if min_score is None or scored.memory.score >= min_score:
                ranked.append(scored)
        ranked.sort(key=lambda r: (-round(r.memory.score or 0.0, 6), -r.memory.updated_at.timestamp(), r.memory.id))
        return ranked

    def _version_cosines(self, versions: list[Memory], embed: Callable[[], list[float]],
                         text_vectors: dict[tuple[str, int], list[list[float]]]
                         ) -> list[tuple[float, list[float]] | None]:
        """Each version's best cosine with the query's vector, and that text's vector; None for all
        when the query has no vector (a degraded hybrid query: the current items rank without one
        too). The vectors of versions' texts not in `text_vectors` yet are embedded (in one call)
        and added to it."""
        try:
            vector = embed()
        except (EmbeddingFailed, RateLimited, ProviderError):  # ProviderError: the index lost it (`lose`)
            return [None] * len(versions)
        missing = [m for m in versions if (m.id, m.version) not in text_vectors]
        texts = [embedded_texts_of(m.value) for m in missing]
        flat = [text for each in texts for text in each]
        vectors = iter(self._within_deadline(lambda: self._embedder.embed(flat)) if flat else [])
        for m, each in zip(missing, texts):
            text_vectors[(m.id, m.version)] = [next(vectors) for _ in each]
        out: list[tuple[float, list[float]] | None] = []
        for m in versions:
            scored = [(sum(a * b for a, b in zip(vector, v)), v) for v in text_vectors[(m.id, m.version)]]
            out.append(max(scored, key=lambda pair: pair[0]) if scored else None)
        return out

    def list_namespaces(self, caller: Caller, q: ListNamespaces) -> list[tuple[str, ...]]:
        return self._namespaces(caller, q)[0]

    def namespace_listing(self, caller: Caller, q: ListNamespaces) -> NamespaceListing:
        """`GET /v1/memories/namespaces`: the page, counted when asked. A listed namespace's count
        sums, up to the cap, the live items of the namespaces this listing matched at or below it
        that the caller may read (so one truncated at max_depth counts its matched children); each
        of those is counted once, by the item store, up to the cap, in reads bounded in rows
        whatever expired rows not yet removed lie in the way. Each holds a live item (the listing
        found it), so a count visits at most `cap` of them: counting adds at most one count per
        namespace the listing already read, and, expired rows aside, reads fewer than 2 x cap rows
        per namespace listed: under 2 x `NAMESPACE_COUNT_BUDGET` in all."""
        page, matched = self._namespaces(caller, q)
        if not q.counts:
            return NamespaceListing(page)
        policies = self._access.policies.get(caller.tenant_id)
        context = caller.policy_context()
        readable = [ns for ns in matched if policies.allow("read", list(ns), None, context)]  # ascending, as listed
        cap = min(NAMESPACE_COUNT_CAP, NAMESPACE_COUNT_BUDGET // q.limit)
        now = self._clock.now()
        each: dict[tuple[str, ...], int] = {}
        counts = []
        for listed in page:
            total = 0
            at = bisect.bisect_left(readable, listed)  # sorted tuples keep a namespace's descendants right after it
            while at < len(readable) and readable[at][: len(listed)] == listed and total < cap:
                ns = readable[at]
                if ns not in each:
                    each[ns] = self._items.count_live(caller.tenant_id, ns, now, cap)
                total += each[ns]
                at += 1
            counts.append(min(total, cap))
        return NamespaceListing(page, counts, cap)

    def _namespaces(self, caller: Caller, q: ListNamespaces) -> tuple[list[tuple[str, ...]], list[tuple[str, ...]]]:
        """The page, and the namespaces shown in it (matched and allowed, before max_depth cut
        them). The item store hands the namespaces under the literal prefix in ascending order;
        each costs a pattern test; a policy check and a read for a live item (a Query each on
        DynamoDB) are spent only on those that would add an entry up to the page's end, and with
        counts on those shown as an entry of the page."""
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
        prefix, suffix, wanted = tuple(q.prefix), tuple(q.suffix), q.offset + q.limit
        listed: list[tuple[str, ...]] = []  # distinct, ascending: what the pages up to this one show
        matched = []

        def shown(ns: tuple[str, ...]) -> tuple[str, ...]:
            return ns[: q.max_depth] if q.max_depth else ns

        def keep(ns: tuple[str, ...]) -> bool:
            if not match_namespace_pattern(ns, prefix, suffix):
                return False
            # Namespaces come in ascending order, and cut to max_depth they still do. One shown as
            # the last entry listed adds nothing unless that entry is on the page and counted; once
            # the page is full, no other adds anything.
            if listed and shown(ns) == listed[-1]:
                return q.counts and len(listed) > q.offset and policies.allow("list", list(ns), None, context)
            if len(listed) == wanted:
                return False
            return policies.allow("list", list(ns), None, context)

        for ns in self._items.list_namespaces(caller.tenant_id, scope, self._clock.now(), keep=keep):
            if not listed or listed[-1] != shown(ns):
                listed.append(shown(ns))
            if len(listed) > q.offset:
                matched.append(ns)
        return listed[q.offset :], matched


@dataclass(frozen=True)
class SearchResult:
    """A search's page, and whether it was ranked by the keyword index alone (`Search.report_degraded`)."""

    memories: list[Memory]
    degraded: bool
    known_at: datetime | None = None  # asked with known_at: the answer is what memsvc held then
    past_retention: int = 0  # with known_at: keys whose version then is past the event retention (not shown)


class QueryEmbedding:
    """A query's vector, embedded once however many retrievers ask for it (recall's layers share
    one). An embedding failure is kept (`failure`) and raised to every asker: a hybrid query's
    semantic retriever then steps aside, a semantic one fails the query."""

    def __init__(self, embed: Callable[[], list[float]], whole: "QueryEmbedding | None" = None) -> None:
        self._embed = embed
        self._lock = threading.Lock()
        self._vector: list[float] | None = None
        self.failure: EmbeddingFailed | RateLimited | ProviderError | None = None
        # A query that names a time is embedded without the time's words (`TimeBoost.embed_text`);
        # `whole` embeds the query as asked, for a ranking whose best none are of that time
        # (`Search._by_relevance`), once for every layer that needs it.
        self.whole = whole

    def __call__(self) -> list[float]:
        self.prepare()
        if self.failure is not None:
            raise self.failure
        return self._vector  # type: ignore[return-value]

    def lose(self, failure: ProviderError | RateLimited) -> None:
        """The vector index failed a search by this vector: the query's meaning is lost for the
        rest of the request, as when its embedding fails, so each semantic retriever asking from
        now on steps aside (or fails a semantic query) and the answer is reported degraded."""
        with self._lock:
            self.failure = self.failure or failure

    def start(self) -> None:
        """Embed on a thread of its own from now, if not done yet, so that other work overlaps the
        model's; whoever asks first waits for it."""
        if self._vector is None and self.failure is None:
            threading.Thread(target=self._prepare_quietly, name="query-embed-start", daemon=True).start()

    def _prepare_quietly(self) -> None:
        try:
            self.prepare()
        except Exception:  # an error not kept (`prepare`) reaches the asker from its own call
            pass

    def prepare(self) -> None:
        """Embed now, if not yet done; a failure is kept, not raised."""
        with self._lock:
            if self._vector is None and self.failure is None:
                try:
                    self._vector = self._embed()
                except (EmbeddingFailed, RateLimited) as exc:
                    self.failure = exc


@dataclass(frozen=True)
class Ranked:
    """A memory ranked by a query (`score`, `scores` set), and the keyed hash of its best-matching
    indexed field (None when only the keyword retriever found it)."""

    memory: Memory
    field: str | None


@dataclass(frozen=True)
class _Signal:
    """One retriever's evidence for a memory: `value` on the scale fusion takes (cosine; keyword
    match 0..1), `raw` as the caller sees it in `scores` (cosine; BM25); for a semantic hit, the
    field that matched."""

    value: float
    raw: float
    field: str | None = None


def _whole_query(embed: Callable[[], list[float]], boost: TimeBoost | None, mode: str) -> "QueryEmbedding | None":
    """The embedding of the query as asked, when its vector is of the query without its time's
    words (`QueryEmbedding.whole`): what ranks again where the boost lifts nothing."""
    if boost is None or mode == "keyword" or not isinstance(embed, QueryEmbedding):
        return None
    return embed.whole


def _time_meets_none(embed: Callable[[], list[float]], boost: TimeBoost | None, ranked: list["Ranked"]) -> bool:
    """Whether the named time meets none of the ranking's first page (the query embedded without
    its time's words, and embedded: a failed embedding ranks by keywords, with no vector to swap)."""
    assert isinstance(embed, QueryEmbedding) and boost is not None
    return embed.failure is None and not any(boost.holds_for(r.memory) for r in ranked[:FIRST_PAGE])


def _unexpired(memory: Memory, now: datetime) -> bool:
    """Whether a current item found at `known_at` is still current: it may have expired since,
    not swept yet (then it was held, and is no longer)."""
    return memory.expires_at is None or memory.expires_at > now


def _fused(signals: dict[str, _Signal], mode: str, weight: float, fusion: Fusion) -> float:
    semantic, keyword = signals.get("semantic"), signals.get("keyword")
    if mode == "semantic":
        return semantic.value if semantic else 0.0
    if mode == "keyword":
        return keyword.value if keyword else 0.0
    return fusion.hybrid_score(semantic.value if semantic else None, keyword.value if keyword else None, weight)


class _Retriever:
    """One ranked source of candidates. `page(top_k)` returns its best `top_k` memories as
    {memory id: ((namespace, key), signal)}; afterwards `exhausted` says whether it has no more,
    `floor` bounds the signal of any memory it has not returned, `separation` says how clearly
    its page told its best from the rest (`core.ranking.separation`; search reads it after the
    first page), and `handed_over` whether a page held any memory."""

    name: str
    exhausted: bool = False
    floor: float = 0.0
    separation: float = 0.0
    handed_over: bool = False

    def page(self, top_k: int) -> dict[str, tuple[tuple[tuple[str, ...], str], _Signal]]:
        raise NotImplementedError


class _SemanticRetriever(_Retriever):
    name = "semantic"

    def __init__(self, vectors: VectorIndex, tenant: str, scope: tuple[str, ...], pushdown: Filter,
                 embed: "QueryEmbedding", fusion: Fusion, *, optional: bool, distinct: bool = False) -> None:
        self._args = (vectors, tenant, scope, pushdown)
        self._fusion = fusion
        self._embed = embed  # called in the first page, beside the keyword retriever's query
        self._optional = optional  # when the embedding fails: hand over nothing rather than fail the query
        self._vector: list[float] | None = None
        # Hybrid's distinct cosine (`Fusion.distinct_cosine`): the (memory id, field) of each memory
        # in the first SEPARATION_HITS hits, their mean direction, read once and every round's
        # commonness read against it (one scale for the query's pages), and each memory's.
        self._distinct = distinct
        self.first_page: list[tuple[str, str]] | None = None
        self.direction: list[float] | None = None
        self._common: dict[str, float] = {}

    def page(self, top_k):
        vectors, tenant, scope, pushdown = self._args
        if self._vector is None:
            try:
                self._vector = self._embed()
            except (EmbeddingFailed, RateLimited, ProviderError):
                if not self._optional:
                    raise
                self.exhausted = True  # the keyword retriever ranks alone
                return {}
        firsts: dict[str, VectorHit] = {}
        try:
            hits = vectors.query(tenant, scope, pushdown, self._vector, top_k)
            for hit in hits:  # best first, so a memory version's first hit is its max-pooled score
                firsts.setdefault(hit.memory_id, hit)
            common = self._commonness(firsts, hits[:SEPARATION_HITS]) if self._distinct else {}
        except (ProviderError, RateLimited) as failure:  # the vector index (S3 Vectors) failed
            if not self._optional:
                raise
            self._embed.lose(failure)
            self.exhausted = True  # as without a vector: the keyword retriever ranks alone from here
            return {}
        best: dict[str, tuple[tuple[tuple[str, ...], str], _Signal]] = {
            memory_id: ((hit.namespace, hit.key),
                        _Signal(self._fusion.distinct_cosine(hit.score, common[memory_id]) if common else hit.score,
                                hit.score, hit.field))
            for memory_id, hit in firsts.items()}
        # A short page ends the search only where the index says so: S3 Vectors may return
        # fewer than top_k hits when a filter applies, with more to be found. The floor is the
        # lowest cosine: a distinct cosine is never above its cosine, so it bounds both.
        self.exhausted = len(hits) < top_k and vectors.short_page_is_end
        self.floor = hits[-1].score if hits else 0.0
        prefix = hits[:SEPARATION_HITS]
        matches = sorted((self._fusion.semantic_match(best[memory_id][1].value)
                          for memory_id in dict.fromkeys(hit.memory_id for hit in prefix)), reverse=True)
        # A short page ends the memories for this measure even where the index may hold more
        # (S3 Vectors under a filter): a few memories must not read as no separation at all.
        ended = len(hits) < top_k and len(prefix) == len(hits)
        self.handed_over = self.handed_over or bool(best)
        rest = 0.0 if ended or not prefix else self._fusion.semantic_match(prefix[-1].score)
        self.separation = separation(matches, rest)
        return best

    def unseen_ceiling(self) -> float:
        """The most cosine a memory this retriever has not handed over can have: its lowest hit's
        where the index's search is exact (`VectorIndex.exact`), else 1."""
        vectors, tenant, _, _ = self._args
        return self.floor if vectors.exact(tenant) else 1.0

    def meaning_of(self, fields: dict[str, tuple[str, ...]]) -> dict[str, _Signal]:
        """The semantic signal of memories this retriever has not handed over, by memory id, from
        their stored vectors of `fields` (each memory's indexed fields; its best field counts, as
        the index max-pools): their distinct cosine against this query's first page direction.
        A memory none of whose vectors is stored is left out."""
        if not fields or self._vector is None or self.direction is None:
            return {}
        vectors, tenant, _, _ = self._args
        norm = math.sqrt(sum(x * x for x in self._vector))
        if norm == 0.0:
            return {}
        query = [x / norm for x in self._vector]
        try:
            found = vectors.cosines(tenant, [query, self.direction],
                                    [(memory_id, name) for memory_id, names in fields.items() for name in names])
        except (ProviderError, RateLimited) as failure:
            self._embed.lose(failure)  # they keep no meaning, and the answer says it is degraded
            return {}
        out: dict[str, _Signal] = {}
        for memory_id, names in fields.items():
            held = [(found[(memory_id, name)], name) for name in names if (memory_id, name) in found]
            if held:
                (cosine, common), name = max(held, key=lambda pair: pair[0][0])
                out[memory_id] = _Signal(self._fusion.distinct_cosine(cosine, common), cosine, name)
        return out

    def _commonness(self, firsts: dict[str, VectorHit], prefix: list[VectorHit]) -> dict[str, float]:
        """Each memory's commonness (`VectorIndex.cosines`) against the first page's mean
        direction (`VectorIndex.mean_direction`, read at the first round), asked of the index
        once per memory and search (a memory whose vector is gone: 0, no penalty); none when the
        first page is shorter than `COMMONNESS_MIN_PAGE` (then `first_page` is empty) or has no
        direction. The first page is the memories of the first SEPARATION_HITS hits (`prefix`), as
        the separation's: the same for every page of a query, however many hits the page asked."""
        vectors, tenant, _, _ = self._args
        if self.first_page is None:
            page = [(memory_id, firsts[memory_id].field)
                    for memory_id in dict.fromkeys(hit.memory_id for hit in prefix)]
            self.first_page = page if len(page) >= COMMONNESS_MIN_PAGE else []
            self.direction = vectors.mean_direction(tenant, self.first_page) if self.first_page else None
        if self.direction is None:
            return {}
        missing = [(hit.memory_id, hit.field) for memory_id, hit in firsts.items() if memory_id not in self._common]
        if missing:
            found = vectors.cosines(tenant, [self.direction], missing)
            for ref in missing:
                self._common[ref[0]] = found[ref][0] if ref in found else 0.0
        return {memory_id: self._common[memory_id] for memory_id in firsts}


class _KeywordRetriever(_Retriever):
    name = "keyword"

    def __init__(self, keywords: KeywordIndex, tenant: str, scope: tuple[str, ...], pushdown: Filter,
                 terms: list[str]) -> None:
        self._args = (keywords, tenant, scope, pushdown, terms)
        # The memories of its first SEPARATION_HITS hits, whatever the page: how many of the query's terms each holds.
        self.first_hits: dict[str, int] = {}

    def page(self, top_k):
        keywords, tenant, scope, pushdown, terms = self._args
        result = keywords.query(tenant, scope, pushdown, terms, top_k) if terms else None
        hits = result.hits if result else []
        self.exhausted = len(hits) < top_k
        self.floor = keyword_match(hits[-1].score, result.query_weight) if hits else 0.0
        page = {h.memory_id: ((h.namespace, h.key), _Signal(keyword_match(h.score, result.query_weight), h.score))
                for h in hits}
        prefix = [signal.value for _, signal in list(page.values())[:SEPARATION_HITS]]
        self.first_hits = self.first_hits or {h.memory_id: h.terms for h in hits[:SEPARATION_HITS]}
        ended = self.exhausted and len(prefix) == len(hits)
        self.separation = separation(prefix, 0.0 if ended or not prefix else prefix[-1])
        return page


def _too_deep(field: str, depth: int) -> InvalidArgument:
    return InvalidArgument(f"{field} has more segments than any namespace of this tenant can ({depth})",
                           details={"field": field})

