"""Wire a set of adapters into a running service. Nothing here runs at import."""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from memsvc.api.router import Router
from memsvc.api.routes import build_router
from memsvc.ports import Clock, Embedder, SystemClock
from memsvc.service.feed import FeedConsumer
from memsvc.service.memories import MemoryService
from memsvc.service.sealing import Sealer
from memsvc.service.sweeper import Sweeper
from memsvc.service.timeline import Timeline
from memsvc.service.tenant_config import PolicyRegistry, SettingsRegistry

if TYPE_CHECKING:
    from memsvc.adapters.aws.clients import AwsClients

__all__ = ["LocalApp", "build_local", "AwsApp", "build_aws"]


@dataclass
class LocalApp:
    service: MemoryService
    router: Router
    store: Any
    vectors: Any
    embedder: Embedder
    workers: Any
    issuer: Any
    data_dir: Path
    events: Any
    closed: bool = False

    def close(self) -> None:
        """Stop the workers and close the files; safe to call twice."""
        if not self.closed:
            self.closed = True
            self.workers.stop()
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
) -> LocalApp:
    """The embedded default: SQLite, the in-process vector index, MiniLM, a key file."""
    from memsvc.adapters.local.event_log import SqliteEventLog
    from memsvc.adapters.local.issuer import LocalIssuer
    from memsvc.adapters.local.jsonl_publisher import JsonlPublisher
    from memsvc.adapters.local.keys import FileKeyProvider
    from memsvc.adapters.local.sqlite_store import SqliteItemStore
    from memsvc.adapters.local.vector_index import LocalVectorIndex
    from memsvc.adapters.local.workers import BackgroundWorkers

    if embedder is None:
        from memsvc.adapters.local.embedder import MiniLMEmbedder

        embedder = MiniLMEmbedder()
    clock = clock or SystemClock()
    data_dir.mkdir(parents=True, exist_ok=True)
    store = SqliteItemStore(data_dir / "memsvc.db", consumers=("indexer", "timeline"))
    event_log = SqliteEventLog(data_dir / "events.db")
    timeline = Timeline(event_log, JsonlPublisher(events_file) if events_file else None)
    vectors = LocalVectorIndex(data_dir / "vectors.db", dimension=embedder.dimension, model_id=embedder.model_id)
    sealer = Sealer(store, FileKeyProvider(data_dir / "keys" / "kek.key"))
    settings = SettingsRegistry(store)
    policies = PolicyRegistry(store)
    index_feed = FeedConsumer(store, "indexer", lambda changes: service.indexer.apply(changes))
    timeline_feed = FeedConsumer(store, "timeline", timeline.apply, batch_size=256)
    service = MemoryService(
        store=store,
        vectors=vectors,
        embedder=embedder,
        sealer=sealer,
        policies=policies,
        settings=settings,
        clock=clock,
        events=event_log,
        on_write=lambda: workers.wake(),  # bound late: the workers need the service first
    )
    workers = BackgroundWorkers(
        (index_feed, timeline_feed), Sweeper(store, settings, clock, events=event_log), store,
        index_interval=index_interval, sweep_interval=sweep_interval,
    )
    router = build_router(
        service,
        health=lambda: health_report(store=store, vectors=vectors, embedder=embedder),
    )
    if start_workers:
        workers.start()
    return LocalApp(service, router, store, vectors, embedder, workers, LocalIssuer(data_dir / "keys"), data_dir,
                    event_log)


def health_report(*, store: Any, vectors: Any, embedder: Embedder) -> dict[str, Any]:
    components: dict[str, dict[str, Any]] = {}
    for name, probe in (
        ("store", store.ping),
        ("vector_index", vectors.ping),
        ("embedder", lambda: embedder.embed(["health check"])),
    ):
        started = time.perf_counter()
        try:
            probe()
            components[name] = {"status": "healthy"}
        except Exception as exc:  # the report names the failing component, never its secrets
            components[name] = {"status": "unhealthy", "error": type(exc).__name__}
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
    service: MemoryService
    router: Router
    store: Any
    vectors: Any
    embedder: Embedder
    clients: AwsClients
    timeline: Timeline


def build_aws(settings: Any, *, clients: AwsClients | None = None, embedder: Embedder | None = None,
              clock: Clock | None = None) -> AwsApp:
    """DynamoDB, S3 Vectors, Titan and KMS. `clients` lets tests pass clients with fakes
    installed; a Lambda builds its own once per cold start."""
    from memsvc.adapters.aws.clients import AwsClients
    from memsvc.adapters.aws.dynamo_store import DynamoItemStore
    from memsvc.adapters.aws.dynamo_timeline import DynamoEventLog
    from memsvc.adapters.aws.eventbridge import EventBridgePublisher
    from memsvc.adapters.aws.kms_keys import KmsKeyProvider
    from memsvc.adapters.aws.s3vectors_index import S3VectorsIndex
    from memsvc.adapters.aws.titan import TitanEmbedder

    clients = clients or AwsClients.create(settings.region, embedding_concurrency=settings.embedding_concurrency)
    clock = clock or SystemClock()
    store = DynamoItemStore(
        clients.dynamodb, settings.table_name,
        tombstone_days=lambda tenant: tenant_settings.get(tenant).tombstone_retention_days,  # bound late
    )
    tenant_settings = SettingsRegistry(store)
    vectors = S3VectorsIndex(clients.s3vectors, bucket=settings.vector_bucket, index=settings.vector_index,
                             dimension=settings.embedding_dimension)
    if embedder is None:
        embedder = TitanEmbedder(clients.bedrock_runtime, model_id=settings.embedding_model_id,
                                 dimension=settings.embedding_dimension,
                                 max_concurrency=settings.embedding_concurrency)
    sealer = Sealer(store, KmsKeyProvider(clients.kms, settings.kms_key_id),
                    cache_seconds=settings.data_key_cache_seconds)
    event_log = DynamoEventLog(
        clients.dynamodb, settings.table_name,
        retention_days=lambda tenant: tenant_settings.get(tenant).tombstone_retention_days,
    )
    publisher = EventBridgePublisher(clients.events, settings.event_bus_name) if settings.event_bus_name else None
    service = MemoryService(
        store=store, vectors=vectors, embedder=embedder, sealer=sealer,
        policies=PolicyRegistry(store), settings=tenant_settings, clock=clock, events=event_log,
    )
    router = build_router(service, health=lambda: health_report(store=store, vectors=vectors, embedder=embedder))
    return AwsApp(service, router, store, vectors, embedder, clients, Timeline(event_log, publisher))
