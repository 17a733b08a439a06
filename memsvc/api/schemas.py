"""The answers of the HTTP API (API.md), and the query models of the routes whose input is only
a query string. Request bodies are the services' own commands."""

from __future__ import annotations

import dataclasses
from datetime import datetime
from typing import Annotated, Any, Literal, Self

from pydantic import BaseModel, ConfigDict, Field, PlainSerializer, RootModel, StrictBool, StrictStr, WithJsonSchema

from memsvc.core.graph import GraphEdge
from memsvc.core.feedback import Signal
from memsvc.core.models import EventKind, Memory, WriteAction, to_rfc3339
from memsvc.core.policy import CompiledPolicies
from memsvc.core.validation import Command, Namespace
from memsvc.service.admin import IndexRetry, IndexRun, IndexStatus, PolicyBundle, RetryOutcome
from memsvc.service.extraction import Extracted, ExtractMemories
from memsvc.service.feedback import FeedbackGiven, GiveFeedback
from memsvc.service.history import HistoryPage
from memsvc.service.memories import PutMemory
from memsvc.service.graph import Entity, Neighbours, PathAnswer, Related
from memsvc.service.recall import MAX_CUT, CutReason, Explanation, LeftOut, RecallQuery, RecallResult, Recalled
from memsvc.service.profile import Profile
from memsvc.service.reflection import ReflectionRun, ReflectUser
from memsvc.service.restore import Restored, RestoreMemory
from memsvc.service.remember import RememberMemory, Remembered
from memsvc.service.search import NamespaceListing, SearchQuery, SearchResult
from memsvc.service.semantic import SemanticView, UpsertSemantic
from memsvc.service.sessions import AppendMessage, CreateSession, SessionView, UpdateSession
from memsvc.service.tenant_config import SettingsPatch
from memsvc.service.timeline import EventPage, EventView
from memsvc.service.user_erasure import ErasureReceipt

__all__ = [
    "PutMemoryBody",
    "SearchBody",
    "RecallBody",
    "PoliciesBody",
    "SettingsBody",
    "MemoryQuery",
    "GetMemoryQuery",
    "PutMemoryOut",
    "MemoryOut",
    "SearchItemOut",
    "SearchMetadataOut",
    "SearchOut",
    "RecalledOut",
    "RecallMetadataOut",
    "RecallOut",
    "NamespacesOut",
    "EventOut",
    "EventsOut",
    "PoliciesOut",
    "IndexStatusOut",
    "IndexTriggerOut",
    "IndexRetryBody",
    "IndexRetryOut",
    "QuarantinedOut",
    "HealthOut",
    "ErrorOut",
    "RememberBody",
    "FeedbackBody",
    "FeedbackOut",
    "RememberOut",
    "RememberAcceptedOut",
    "CreateSessionBody",
    "UpdateSessionBody",
    "AppendMessageBody",
    "UpsertSemanticBody",
    "SessionOut",
    "SessionsOut",
    "AppendedMessageOut",
    "MessageOut",
    "MessagesOut",
    "SessionClosedOut",
    "SemanticUpsertOut",
    "SemanticOut",
    "HistoryOut",
    "HistoryVersionOut",
    "ReplacedByOut",
]

# The request bodies are the services' commands, under the component names the API has always
# published (so generated clients keep their type names).


class PutMemoryBody(PutMemory):
    """`PUT /v1/memories`."""


class SearchBody(SearchQuery):
    """`POST /v1/memories/search`."""


class RecallBody(RecallQuery):
    """`POST /v1/memories/recall`."""


class RememberBody(RememberMemory):
    """`POST /v1/memories/remember`."""


class ExtractBody(ExtractMemories):
    """`POST /v1/memories/extract`."""


class FeedbackBody(GiveFeedback):
    """`POST /v1/memories/feedback`."""


class PoliciesBody(PolicyBundle):
    """`PUT /admin/v1/memories/policies`."""


class IndexRetryBody(IndexRetry):
    """`POST /admin/v1/memories/index/retry`."""


class SettingsBody(SettingsPatch):
    """`PUT /admin/v1/memories/settings`: only the settings to change."""


class Answer(BaseModel):
    """An answer's model. Its serializer is built when first used (`defer_build`), not at import: a
    Lambda cold start imports every answer of the API, and one request uses one or two of them."""

    model_config = ConfigDict(defer_build=True)


Rfc3339 = Annotated[datetime, PlainSerializer(to_rfc3339, return_type=str),
                    WithJsonSchema({"type": "string", "format": "date-time"})]


class MemoryQuery(Command):
    """`DELETE /v1/memories`: one memory by namespace and key."""

    namespace: Namespace = Field(alias="ns", description="One namespace segment; repeat once per segment")
    key: StrictStr = Field(min_length=1, description="The memory's key")


class GetMemoryQuery(MemoryQuery):
    """`GET /v1/memories`."""

    refresh_ttl: StrictBool = Field(False, description="Restart the item's TTL from now (LangGraph refresh_on_read)")


class PutMemoryOut(Answer):
    id: str
    namespace: list[str]
    key: str
    attributes: dict[str, Any] | None
    created_at: Rfc3339
    updated_at: Rfc3339
    expires_at: Rfc3339 | None
    version: int

    @classmethod
    def of(cls, m: Memory, **extra: Any) -> Self:
        return cls(id=m.id, namespace=list(m.namespace), key=m.key, attributes=m.attributes, created_at=m.created_at,
                   updated_at=m.updated_at, expires_at=m.expires_at, version=m.version, **extra)


class MemoryOut(PutMemoryOut):
    value: dict[str, Any]

    @classmethod
    def of(cls, m: Memory, **extra: Any) -> Self:
        return super().of(m, value=m.value, **extra)


class Scores(Answer):
    semantic: float | None = Field(description="cosine similarity of the best-matching indexed text")
    keyword: float | None = Field(description="BM25 over the indexed texts")
    rerank: float | None = Field(None, description="the reranker's relevance, on the memories the tenant's rerank "
                                                   "step reordered; null otherwise")


# Present only when asked with known_at: without it an answer is as it always was.
_CURRENT = ("only with known_at: whether this version is still the key's current one (false: since replaced, "
            "deleted or expired)")
_KNOWN_AT = "only with known_at: the time asked; the answer is what memsvc held then"
_PAST_RETENTION = "only with known_at: keys whose version held then is past the tenant's event retention, so not shown"


def _absent(value: Any) -> bool:
    return value is None


class SearchItemOut(MemoryOut):
    score: float | None
    scores: Scores | None = Field(description="each signal's own score when ranked by a query; null without one")
    current: bool | None = Field(None, description=_CURRENT, exclude_if=_absent)

    @classmethod
    def of(cls, m: Memory, **extra: Any) -> Self:
        scores = Scores(**m.scores) if m.scores is not None else None
        return super().of(m, score=m.score, scores=scores, current=m.current, **extra)


class SearchMetadataOut(Answer):
    degraded: bool = Field(description="ranked by the keyword index alone: the embedding model failed or timed out")
    known_at: Rfc3339 | None = Field(None, description=_KNOWN_AT, exclude_if=_absent)
    past_retention: int | None = Field(None, description=_PAST_RETENTION, exclude_if=_absent)


class SearchOut(Answer):
    items: list[SearchItemOut]
    metadata: SearchMetadataOut

    @classmethod
    def of(cls, result: SearchResult) -> Self:
        return cls(items=[SearchItemOut.of(m) for m in result.memories],
                   metadata=SearchMetadataOut(degraded=result.degraded, known_at=result.known_at,
                                              past_retention=result.past_retention if result.known_at else None))


class RecallWeightsOut(Answer):
    match: float
    importance: float
    recency: float
    pinned: float


class RecallExplainOut(Answer):
    """How a memory's relevance was computed (recall with explain): relevance = weights.match * match
    + weights.importance * importance + weights.recency * recency + weights.pinned * pinned."""

    keyword: float | None = Field(description="the keyword retriever's BM25 score; null when it did not find it")
    semantic: float | None = Field(description="the semantic retriever's cosine; null when it did not find it")
    fused: float = Field(description="the hybrid fusion of the two (boosted when the query names a time)")
    match: float = Field(description="the fused score as the composite takes it, never below 0")
    importance: float = Field(description="the importance ranked with (reflection's effective one; 0.5 for an "
                                          "item without one)")
    recency: float = Field(description="(1 - decay_rate_per_day) ^ days since the memory was written or last "
                                       "used")
    pinned: Literal[0, 1]
    weights: RecallWeightsOut = Field(description="the tenant's recall_weights")
    relevance: float

    @classmethod
    def of(cls, e: Explanation) -> Self:
        return cls(keyword=e.keyword, semantic=e.semantic, fused=e.fused, match=e.match, importance=e.importance,
                   recency=e.recency, pinned=e.pinned, weights=RecallWeightsOut(**e.weights), relevance=e.relevance)


class RecallCutOut(Answer):
    """A candidate recall left out (recall with explain)."""

    id: str
    namespace: list[str]
    key: str
    layer: str | None
    relevance: float | None = Field(description="null when below min_match: its composite is never computed")
    match: float
    reason: CutReason = Field(description=(
        "below_min_match: the match is below the tenant's recall_min_match; below_min_score: the relevance is "
        "below min_score, or too far below the query's best (the tenant's recall_cut_gap and recall_cut_margin); "
        "duplicate: a near-duplicate of a memory kept from a more specific layer; over_limit: past limit; "
        "token_budget: no tokens of the budget were left"))

    @classmethod
    def of(cls, c: LeftOut) -> Self:
        return cls(id=c.memory.id, namespace=list(c.memory.namespace), key=c.memory.key, layer=c.layer,
                   relevance=c.relevance, match=c.match, reason=c.reason)


class RecalledOut(Answer):
    id: str
    namespace: list[str]
    key: str
    layer: str | None = Field(description="the layer the namespace lies in; null outside every layer")
    content: str = Field(description="a typed memory's content; a plain item's best-matching indexed text")
    type: str | None = Field(description="fact, preference, decision or note; message for a session message; "
                                         "null for another plain item")
    relevance: float = Field(description="the composite score, 0..1")
    match: float = Field(description="the hybrid match, 0..1")
    importance: float | None
    pinned: bool
    tags: list[str]
    category: str | None
    source: str | None
    created_at: Rfc3339
    updated_at: Rfc3339
    truncated: bool = Field(description="content cut to fit the token budget (the last memory only)")
    graph_hops: int | None = Field(None, description="added by graph expansion (graph_hops), this many hops from a "
                                                     "hit (relevance and match 0); null for a hit")
    current: bool | None = Field(None, description=_CURRENT, exclude_if=_absent)
    explain: RecallExplainOut | None = Field(None, exclude_if=_absent, description=(
        "asked with explain: how relevance was computed; absent for a memory graph expansion added"))

    @classmethod
    def of(cls, r: Recalled) -> Self:
        m = r.memory
        return cls(id=m.id, namespace=list(m.namespace), key=m.key, layer=r.layer, content=r.content, type=r.type,
                   relevance=r.relevance, match=r.match, importance=r.importance, pinned=r.pinned, tags=list(r.tags),
                   category=r.category, source=r.source, created_at=m.created_at, updated_at=m.updated_at,
                   truncated=r.truncated, graph_hops=r.graph_hops, current=m.current,
                   explain=RecallExplainOut.of(r.explain) if r.explain is not None else None)


class RecallMetadataOut(Answer):
    count: int
    total_count: int = Field(description="memories that matched, before limit and token budget")
    truncated: bool = Field(description="the token budget cut the last memory or left matches out")
    token_count: int = Field(description="cl100k_base tokens of the returned contents")
    token_budget: int
    searched_layers: list[str]
    query_embedding_ms: float
    retrieval_ms: float
    degraded: bool = Field(description="ranked by the keyword index alone: the embedding model failed or timed out")
    known_at: Rfc3339 | None = Field(None, description=_KNOWN_AT, exclude_if=_absent)
    past_retention: int | None = Field(None, description=_PAST_RETENTION, exclude_if=_absent)
    cut: list[RecallCutOut] | None = Field(None, exclude_if=_absent, max_length=MAX_CUT, description=(
        f"asked with explain: up to {MAX_CUT} candidates left out, most relevant first, each with why"))


class RecallOut(Answer):
    memories: list[RecalledOut]
    metadata: RecallMetadataOut

    @classmethod
    def of(cls, result: RecallResult) -> Self:
        return cls(memories=[RecalledOut.of(r) for r in result.memories], metadata=RecallMetadataOut(
            count=len(result.memories), total_count=result.total_count, truncated=result.truncated,
            token_count=result.token_count, token_budget=result.token_budget,
            searched_layers=result.searched_layers, query_embedding_ms=result.query_embedding_ms,
            retrieval_ms=result.retrieval_ms, degraded=result.degraded, known_at=result.known_at,
            past_retention=result.past_retention if result.known_at else None,
            cut=[RecallCutOut.of(c) for c in result.cut] if result.cut is not None else None))


class EventOut(Answer):
    id: str
    namespace: list[str]
    key: str
    kind: EventKind = Field(description="a change's kind, or one the service records itself: candidate (an "
                                        "extraction found it), error (an extraction failed and will be retried)")
    occurred_at: Rfc3339
    value: dict[str, Any] | None
    attributes: dict[str, Any] | None
    expires_at: Rfc3339 | None
    memory_id: str
    version: int
    action: WriteAction | None = Field(
        None, description="what remember did, for a version it wrote (memory.created/updated/superseded), the "
                          "signal of the feedback that wrote it (memory.feedback), or the extraction's or "
                          "reflection's change (memory.merged, archived, restored, ...)")
    reason: str | None = Field(
        None, description="index_failed: why the indexer set the version aside (memory.index_failed); candidate, "
                          "error and the lifecycle actions: their reason, never the content")

    @classmethod
    def of(cls, view: EventView) -> Self:
        e = view.event
        return cls(id=e.id, namespace=list(e.namespace), key=e.key, kind=e.kind, occurred_at=e.occurred_at,
                   value=view.value, attributes=view.attributes, expires_at=e.expires_at, memory_id=e.memory_id,
                   version=e.version, action=e.action, reason=e.reason)


class EventsOut(Answer):
    events: list[EventOut]
    after_cursor: str | None
    resume_cursor: str | None

    @classmethod
    def of(cls, page: EventPage) -> Self:
        return cls(events=[EventOut.of(v) for v in page.events], after_cursor=page.after_cursor,
                   resume_cursor=page.resume_cursor)


class NamespacesOut(Answer):
    namespaces: list[list[str]]
    counts: list[int] | None = Field(None, exclude_if=_absent, description=(
        "asked with counts: each namespace's live items, itself and below, in the order of namespaces"))
    count_cap: int | None = Field(None, exclude_if=_absent, description=(
        "asked with counts: where counting stops; a count equal to it means at least that many"))

    @classmethod
    def of(cls, listing: NamespaceListing) -> Self:
        return cls(namespaces=[list(ns) for ns in listing.namespaces], counts=listing.counts,
                   count_cap=listing.count_cap)


class IdentityOut(Answer):
    """Who the service takes the caller to be."""

    tenant_id: str
    user_id: str = Field(description="the token's sub; for a SigV4 caller, the IAM principal's ARN")
    roles: list[str] = Field(description="as policies see them: roles and cognito:groups, each once")
    auth: Literal["jwt", "iam"]
    claims: dict[str, Any] = Field(description=(
        "jwt: the token's claims as the authorizer passed them on; iam: the principal's accountId, userArn, "
        "userId, callerId and principalOrgId, where API Gateway gave them (never an access key)"))


class PolicyCheckOut(Answer):
    """The bundle compiles, passes the test evaluation and still allows you the admin operation
    (dry_run): nothing was stored."""

    valid: Literal[True]


class PoliciesOut(Answer):
    version: str
    policies: dict[str, str]

    @classmethod
    def of(cls, compiled: CompiledPolicies) -> Self:
        return cls(version=compiled.bundle.version, policies=compiled.bundle.policies)


class PutPoliciesOut(RootModel[PoliciesOut | PolicyCheckOut]):
    """The bundle now in force, or with dry_run only that it is valid."""


class QuarantinedOut(Answer):
    """A memory version the indexer set aside: readable by key and filter, not (fully) searchable."""

    id: str
    namespace: list[str]
    key: str
    version: int
    reason: str = Field(description="why, in the service's words (never the memory's content)")
    quarantined_at: Rfc3339


class IndexStatusOut(Answer):
    pending: int = Field(description="live versions waiting to be indexed (quarantined ones are not)")
    embedding_model: str
    dimension: int
    stats: dict[str, float]
    quarantined: int = Field(description="the tenant's quarantined versions (see docs/api.md, \"Poison items\")")
    quarantined_items: list[QuarantinedOut] = Field(
        description="up to 100 of them, oldest first (retrying them lets the next ones show)")

    @classmethod
    def of(cls, status: IndexStatus) -> Self:
        return cls(pending=status.pending, embedding_model=status.embedding_model, dimension=status.dimension,
                   stats=status.stats, quarantined=status.quarantined,
                   quarantined_items=[QuarantinedOut(id=q.id, namespace=list(q.namespace), key=q.key,
                                                     version=q.version, reason=q.index_error,
                                                     quarantined_at=q.quarantined_at)
                                      for q in status.quarantined_items])


class IndexTriggerOut(Answer):
    processed: int
    pending: int
    quarantined: int = Field(description="versions this run set aside")

    @classmethod
    def of(cls, run: IndexRun) -> Self:
        return cls(processed=run.processed, pending=run.pending, quarantined=run.quarantined)


class RetryFailureOut(Answer):
    id: str
    code: Literal["NOT_FOUND", "NOT_QUARANTINED"] = Field(
        description="NOT_FOUND: no live current version of the tenant has this id (deleted, rewritten, expired, "
                    "or never was); NOT_QUARANTINED: it is indexed or waiting to be")


class IndexRetryOut(Answer):
    """Accepted: each retried version is indexed again within seconds (or quarantined again, with a
    new memory.index_failed event)."""

    retried: list[str]
    failed: list[RetryFailureOut]

    @classmethod
    def of(cls, outcome: RetryOutcome) -> Self:
        return cls(retried=outcome.retried, failed=[RetryFailureOut(id=i, code=code) for i, code in outcome.failed])


class HealthOut(Answer):
    """Each component's status and latency; 503 when unhealthy."""

    status: Literal["healthy", "degraded", "unhealthy"]
    components: dict[str, dict[str, Any]]


class NeighborOut(Answer):
    key: str
    score: float = Field(description="cosine similarity of the contents")


class JudgeOut(Answer):
    asked: bool
    same_fact: bool | None
    contradiction: bool | None = Field(None, description="the judge found the two contradict (then superseded)")
    failed: bool = Field(False, description="the judge was asked but gave no answer: treated as not asked, created")


class RememberOut(Answer):
    action: Literal["created", "updated", "unchanged", "superseded"]
    memory: MemoryOut
    neighbors: list[NeighborOut]
    judge: JudgeOut

    @classmethod
    def of(cls, r: Remembered) -> Self:
        d = r.decision
        judge = JudgeOut(asked=bool(d and d.judge_asked), same_fact=d.same_fact if d else None,
                         contradiction=(d.action == "supersede") if d and d.judge_asked else None,
                         failed=bool(d and d.judge_failed))
        return cls(action=r.action, memory=MemoryOut.of(r.memory),
                   neighbors=[NeighborOut(key=k, score=score) for k, score in r.neighbors], judge=judge)


class RememberAcceptedOut(Answer):
    """Accepted (`wait: false`): the memory is consolidated in the background."""

    candidate_id: str = Field(description="decided in the background; the outcome appears on the timeline")


class CandidateOut(Answer):
    content: str
    type: Literal["fact", "preference", "decision", "note"]
    importance: float
    category: str | None
    source_seqs: list[int] = Field(description="the messages it came from: their index in the request, or their "
                                               "seq in the session")


class ExtractedMemoryOut(Answer):
    action: Literal["created", "updated", "unchanged", "superseded", "blocked"] = Field(
        description="remember's outcome; blocked: a governance policy refused it, nothing was written")
    candidate: CandidateOut
    memory: MemoryOut | None = Field(description="the memory written or found; null when blocked")


class ExtractOut(Answer):
    extractor: str = Field(description="deterministic, or the language model's id")
    memories: list[ExtractedMemoryOut]

    @classmethod
    def of(cls, e: Extracted) -> Self:
        return cls(extractor=e.extractor, memories=[ExtractedMemoryOut(
            action=m.action, memory=MemoryOut.of(m.memory) if m.memory is not None else None,
            candidate=CandidateOut(content=m.candidate.content, type=m.candidate.type,
                                   importance=m.candidate.importance, category=m.candidate.category,
                                   source_seqs=list(m.candidate.source_seqs))) for m in e.memories])


class ExtractQueuedOut(Answer):
    """Accepted: the conversation is extracted in the background (`wait: false`), or again later
    because the model failed (`retrying`; a `memory.error` event tells it)."""

    job_id: str
    status: Literal["accepted", "retrying"]


class FeedbackOut(Answer):
    signal: Signal
    memory: MemoryOut = Field(description="the memory's new version (its id is the one a next feedback names)")
    previous_id: str = Field(description="the id the feedback named, no longer current")

    @classmethod
    def of(cls, f: FeedbackGiven) -> Self:
        return cls(signal=f.signal, memory=MemoryOut.of(f.memory), previous_id=f.previous_id)


class _ErrorBody(Answer):
    code: str
    message: str
    retryable: bool
    details: dict[str, Any]


class ErrorOut(Answer):
    error: _ErrorBody


# -- sessions, messages, semantic upsert (API-AGENT.md "Agent workflow state") ---------------------


class CreateSessionBody(CreateSession):
    """`POST /v1/memory/sessions`."""


class UpdateSessionBody(UpdateSession):
    """`PUT /v1/memory/sessions/{id}`."""


class AppendMessageBody(AppendMessage):
    """`POST /v1/memory/sessions/{id}/messages`."""


class UpsertSemanticBody(UpsertSemantic):
    """`POST /v1/memory/semantic`."""


class SessionOut(Answer):
    session_id: str
    agent_id: str | None
    title: str | None
    metadata: dict[str, Any]
    created_at: Rfc3339
    updated_at: Rfc3339
    last_interaction: Rfc3339
    version: int
    message_count: int
    closed_at: Rfc3339 | None
    delete_after: Rfc3339 | None
    extract: Literal["off", "on_close", "continuous"]
    extracted_seq: int = Field(description="messages up to this seq have been extracted into memories")

    @classmethod
    def of(cls, v: SessionView) -> Self:
        return cls(**dataclasses.asdict(v))


class SessionsOut(Answer):
    sessions: list[SessionOut]
    count: int
    next_cursor: str | None


class AppendedMessageOut(Answer):
    message_id: str
    seq: int
    created_at: Rfc3339


class MessageOut(Answer):
    message_id: str
    seq: int
    role: str
    name: str | None = Field(description="who spoke, as the message gave it; null when only its role says")
    content: str
    correlation_id: str | None
    created_at: Rfc3339


class MessagesOut(Answer):
    messages: list[MessageOut]
    count: int
    next_after_seq: int | None = Field(description="pass as after_seq for the next page; null at the end")


class SessionClosedOut(Answer):
    promoted: int = Field(description="memories copied to the target layer by this close")
    blocked: int = Field(description="important memories not promoted: marked sensitive or private")
    deleted: bool = Field(description="the session and its data are deleted (auto-delete, retention 0)")
    delete_after: str | None = Field(description="when auto-delete removes the session and its data")
    extraction_pending: bool = Field(description="the session extracts, and some of its messages are not extracted "
                                                 "yet: the model failed, or the backlog is long; a background job "
                                                 "finishes it")


class SemanticUpsertOut(Answer):
    id: str
    external_id: str | None
    content_hash: str
    action: Literal["created", "updated", "unchanged"]


class SemanticOut(Answer):
    id: str
    external_id: str | None
    content_hash: str
    content: str
    metadata: dict[str, Any]
    namespace: list[str]
    key: str
    version: int
    created_at: Rfc3339
    updated_at: Rfc3339

    @classmethod
    def of(cls, v: SemanticView) -> Self:
        return cls(**{**dataclasses.asdict(v), "namespace": list(v.namespace)})


# -- Agent workflow state (seed 003): task contexts, plans, working memory ---------------------


class TaskContextCreatedOut(Answer):
    task_id: str
    created_at: str
    version: int


class TaskContextOut(Answer):
    task_id: str
    plan_id: str | None
    event_type: str
    response_event: str | None
    response_topic: str
    data: dict[str, Any]
    sub_tasks: list[str]
    state: dict[str, Any]
    created_at: str
    updated_at: str
    version: int


class SubTasksOut(Answer):
    sub_tasks: list[str]
    remaining: int = Field(description="sub-tasks left after this change; 0 for exactly one of racing removers")
    removed: list[str] = Field(description="those of `remove` this call took out (not already gone)")
    version: int


class PlanOut(Answer):
    plan_id: str
    goal_event: str
    goal_data: dict[str, Any]
    status: Literal["running", "completed", "failed", "cancelled"]
    state: dict[str, Any]
    created_at: str
    updated_at: str
    version: int


class PlansOut(Answer):
    plans: list[PlanOut]
    count: int
    next_cursor: str | None


class WorkingValueOut(Answer):
    plan_id: str
    key: str
    value: Any
    version: int
    updated_at: str
    expires_at: str | None


class WorkingValuesOut(Answer):
    items: list[WorkingValueOut]
    next_cursor: str | None = None


class WorkingDeletedOut(Answer):
    deleted_count: int
    plan_id: str


# -- the knowledge graph (issue 15) ---------------------------------------------------------------


class GraphEntityOut(Answer):
    id: str = Field(description="the entity's id: a keyed hash of its normalised name, stable within the tenant")
    name: str
    type: str
    namespaces: list[list[str]] = Field(description="where it has a node, under the query's prefix")
    explicit: bool = Field(description="written explicitly (PUT /v1/graph/entities) in at least one of them")

    @classmethod
    def of(cls, e: Entity) -> Self:
        return cls(id=e.id, name=e.name, type=e.type, namespaces=[list(ns) for ns in e.namespaces],
                   explicit=e.explicit)


class GraphEntitiesOut(Answer):
    entities: list[GraphEntityOut]


class RelatedMemoryOut(MemoryOut):
    hops: int = Field(description="1: names a start entity; +1 per relation edge from one")
    via: GraphEntityOut = Field(description="the nearest entity it names")


class RelatedOut(Answer):
    memories: list[RelatedMemoryOut]
    depth: int = Field(description="hops the traversal expanded")
    truncated: bool = Field(description="a node or edge limit cut the traversal: more may be related")

    @classmethod
    def of(cls, r: Related) -> Self:
        return cls(memories=[RelatedMemoryOut.of(m.memory, hops=m.hops, via=GraphEntityOut.of(m.via))
                             for m in r.memories], depth=r.depth, truncated=r.truncated)


class JustifyingMemoryOut(Answer):
    namespace: list[str]
    key: str
    id: str = Field(description="the memory version the relation was extracted from")


class GraphEdgeOut(Answer):
    source: str = Field(description="entity id")
    type: str
    target: str = Field(description="entity id")
    namespace: list[str]
    memory: JustifyingMemoryOut | None = Field(description="the memory that justifies it; null: written explicitly")
    valid_from: str | None = Field(None, json_schema_extra={"format": "date-time"}, description=(
        "RFC 3339: it holds from then (a derived relation: as its memory does); null: no start recorded"))
    valid_to: str | None = Field(None, json_schema_extra={"format": "date-time"}, description=(
        "RFC 3339: it held until then (a derived relation: as its memory did); null: open"))

    @classmethod
    def of(cls, e: GraphEdge) -> Self:
        memory = None if e.explicit else JustifyingMemoryOut(namespace=list(e.namespace), key=e.key or "",
                                                             id=e.memory_id or "")
        return cls(source=e.source_id, type=e.type, target=e.target_id, namespace=list(e.namespace), memory=memory,
                   valid_from=e.valid_from, valid_to=e.valid_to)


class PathStepOut(Answer):
    source: GraphEntityOut
    target: GraphEntityOut
    edges: list[GraphEdgeOut] = Field(description="every relation between the two, each in its own direction")


class PathOut(Answer):
    found: bool
    hops: int = Field(description="relation edges on the path")
    entities: list[GraphEntityOut] = Field(description="from start to goal, intermediate entities between")
    steps: list[PathStepOut]
    truncated: bool = Field(description="no path found within the limits, and a longer one may exist")

    @classmethod
    def of(cls, p: PathAnswer) -> Self:
        return cls(found=p.found, hops=p.hops, entities=[GraphEntityOut.of(e) for e in p.entities],
                   steps=[PathStepOut(source=GraphEntityOut.of(st.source), target=GraphEntityOut.of(st.target),
                                      edges=[GraphEdgeOut.of(e) for e in st.edges]) for st in p.steps],
                   truncated=p.truncated)


class NeighbourOut(Answer):
    relation: str = Field(description="the relation's type")
    direction: Literal["out", "in"] = Field(description="out: from the entity asked about to `entity`; in: the reverse")
    entity: GraphEntityOut = Field(description="the entity at the other end")
    namespace: list[str] = Field(description="where the relation was written or derived")
    memory: JustifyingMemoryOut | None = Field(description="the memory that justifies it; null: written explicitly")
    valid_from: str | None = Field(None, json_schema_extra={"format": "date-time"}, description=(
        "RFC 3339: it holds from then (a derived relation: as its memory does); null: no start recorded"))
    valid_to: str | None = Field(None, json_schema_extra={"format": "date-time"}, description=(
        "RFC 3339: it held until then (a derived relation: as its memory did); null: open"))


class NeighboursOut(Answer):
    edges: list[NeighbourOut] = Field(description=(
        "one per relation as stored: a relation two memories justify is two edges"))
    next_cursor: str | None = Field(description="for the next page of this query; null: the last page")

    @classmethod
    def of(cls, n: Neighbours) -> Self:
        return cls(edges=[NeighbourOut(relation=x.edge.type, direction=x.direction, entity=GraphEntityOut.of(x.entity),
                                       namespace=list(x.edge.namespace),
                                       memory=GraphEdgeOut.of(x.edge).memory, valid_from=x.edge.valid_from,
                                       valid_to=x.edge.valid_to) for x in n.edges],
                   next_cursor=n.next_cursor)


class GraphRelationOut(Answer):
    namespace: list[str]
    source: str = Field(description="entity id")
    type: str
    target: str = Field(description="entity id")
    valid_from: str | None = Field(json_schema_extra={"format": "date-time"},
                                   description="RFC 3339: it holds from then (the one given, else this write's time)")
    valid_to: str | None = Field(None, json_schema_extra={"format": "date-time"},
                                 description="RFC 3339: it holds until then; null: open")


class IntegrityScanOut(Answer):
    removed: dict[str, int] = Field(description="memories (keys whose memory is gone), mentions, nodes, edges")


# -- reflection, archive and profile (issue 24) ------------------------------------------------


class RestoreBody(RestoreMemory):
    """`POST /v1/memories/restore`."""


class RestoreOut(Answer):
    restored: bool = Field(description="false: the memory was not archived, and is answered as it is")
    memory: MemoryOut = Field(description="the memory's current version (restored: a new one)")
    previous_id: str = Field(description="the id the request named")

    @classmethod
    def of(cls, r: Restored) -> Self:
        return cls(restored=r.restored, memory=MemoryOut.of(r.memory), previous_id=r.previous_id)


class ReflectBody(ReflectUser):
    """`POST /admin/v1/memories/reflect`."""


class ReflectCursorOut(Answer):
    namespace: list[str]
    key: str


class ReflectOut(Answer):
    user_id: str
    examined: int = Field(description="typed memories read in this run")
    merged: int = Field(description="memories that took in a near-duplicate")
    superseded: int = Field(description="near-duplicates merged away and contradicted memories")
    importance_updated: int
    archived: int
    skipped: int = Field(description="written by someone else meanwhile: left for the next pass")
    judge_calls: int
    done: bool = Field(description="the pass reached the user's last memory and rebuilt the profile")
    next_cursor: ReflectCursorOut | None = Field(description="where the next run continues; null when done")

    @classmethod
    def of(cls, r: ReflectionRun) -> Self:
        cursor = ReflectCursorOut(namespace=list(r.next_cursor[0]), key=r.next_cursor[1]) if r.next_cursor else None
        return cls(user_id=r.user_id, examined=r.examined, merged=r.merged, superseded=r.superseded,
                   importance_updated=r.importance_updated, archived=r.archived, skipped=r.skipped,
                   judge_calls=r.judge_calls, done=r.done, next_cursor=cursor)


class ProfileItemOut(Answer):
    id: str
    key: str
    namespace: list[str]
    content: str
    type: str
    category: str | None
    importance: float = Field(description="the importance it was ranked by (reflection's effective importance)")


class ProfileOut(Answer):
    user_id: str
    built_at: Rfc3339
    items: list[ProfileItemOut]
    token_count: int = Field(description="cl100k_base tokens of the items' contents")

    @classmethod
    def of(cls, p: Profile) -> Self:
        return cls(user_id=p.user_id, built_at=p.built_at, token_count=p.token_count, items=[
            ProfileItemOut(id=i.id, key=i.key, namespace=list(i.namespace), content=i.content, type=i.type,
                           category=i.category, importance=i.importance) for i in p.items])


# -- Memory history (issue 25): `GET /v1/memories/history` ------------------------------------


class ReplacedByOut(Answer):
    id: str = Field(description="the next version's id (for add/update, its memory id; for delete, the tombstone's)")
    version: int
    kind: EventKind


class HistoryVersionOut(Answer):
    id: str = Field(description="the version's id: for add/update, the memory id; for delete/expired, the event's")
    memory_id: str = Field(description="the memory the version is (add/update) or removed (delete/expired)")
    version: int
    kind: EventKind = Field(description="add, update, delete or expired")
    action: WriteAction | None = Field(
        None, description="what remember, feedback, extraction or reflection did, for a version they wrote")
    reason: str | None = None
    occurred_at: Rfc3339 = Field(description="when the change happened (the write, the delete, the expiry)")
    expires_at: Rfc3339 | None
    value: dict[str, Any] | None = Field(description="the value then; null for delete and expired")
    attributes: dict[str, Any] | None
    replaced_by: ReplacedByOut | None = Field(description="the version after this one; null for the newest")
    superseded_by: str | None = Field(
        None, description="a superseded typed memory: the key of the memory that replaced it (from its value)")
    recorded: bool = Field(
        description="false for the current version the timeline has not recorded yet (a moment after a write)")


class HistoryOut(Answer):
    versions: list[HistoryVersionOut] = Field(description="newest first")
    next_cursor: str | None = Field(description="pass as cursor for older versions; null on the last page")
    past_retention_before: int | None = Field(description=(
        "on the last page: versions before this one are past retention (tombstone_retention_days) and no "
        "longer held; null when the history is complete or more pages follow"))
    retention_days: int = Field(description="the tenant's tombstone_retention_days: how long versions are kept")

    @classmethod
    def of(cls, page: HistoryPage) -> Self:
        return cls(next_cursor=page.next_cursor, past_retention_before=page.past_retention_before,
                   retention_days=page.retention_days, versions=[HistoryVersionOut(
                       id=v.event_id, memory_id=v.memory_id, version=v.version, kind=v.kind, action=v.action,
                       reason=v.reason, occurred_at=v.occurred_at, expires_at=v.expires_at, value=v.value,
                       attributes=v.attributes, superseded_by=v.superseded_by, recorded=v.recorded,
                       replaced_by=ReplacedByOut(id=v.replaced_by[0], version=v.replaced_by[1],
                                                 kind=v.replaced_by[2]) if v.replaced_by else None)
                       for v in page.versions])


class ErasureReceiptOut(Answer):
    """`DELETE /admin/v1/users/{user_id}` and `GET /admin/v1/users/{user_id}/erasure` (issue 26)."""

    user_id: str
    erasure_id: str = Field(description="this erasure; the user's timeline entries are kept, stripped, under the "
                                        "namespace [\"erased\", erasure_id]")
    status: Literal["running", "completed"] = Field(
        description="running: more pages to go (DELETE again, or the local worker continues it)")
    started_at: Rfc3339
    completed_at: Rfc3339 | None
    erased: dict[str, int] = Field(description="rows removed per store (timeline: entries stripped of content)")

    @classmethod
    def of(cls, receipt: ErasureReceipt) -> Self:
        return cls(user_id=receipt.user_id, erasure_id=receipt.erasure_id, status=receipt.status,
                   started_at=receipt.started_at, completed_at=receipt.completed_at, erased=receipt.erased)
