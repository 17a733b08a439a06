"""The Lambda functions: the shared package (code + dependency layer), the API function and the
two stream consumers of the item table, the indexer and the timeline. Each function has its own
role with exactly the calls its code makes, on exactly its resources."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aws_cdk as cdk
import jsii
from aws_cdk import Duration, RemovalPolicy, Stack
from aws_cdk import aws_events as events
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_logs as logs
from aws_cdk import aws_sqs as sqs
from constructs import Construct

from infra.config import LAMBDA_PYTHON
from infra.constructs.table import ItemTable, KeywordTable
from infra.constructs.vectors import VectorStore
from infra.nag import acknowledge
from layers.build import LayerSpec, build, layer_spec, package_code
from memsvc.adapters.aws.dynamo_store import GSI_HISTORY, GSI_ID, GSI_PENDING, GSI_RECENT
from memsvc.adapters.aws.kms_export_keys import EXPORT_CONTEXT_KEY, EXPORT_PURPOSE
from memsvc.adapters.aws.kms_keys import ENCRYPTION_CONTEXT_KEY

__all__ = [
    "CODE_ASSET_EXCLUDE",
    "CHANGE_FILTER_PATTERNS",
    "INDEXER_FILTER_PATTERNS",
    "TIMELINE_FILTER_PATTERNS",
    "ServiceSettings",
    "StreamSettings",
    "LambdaPackage",
    "ServiceFunction",
    "ApiFunction",
    "IndexerFunction",
    "TimelineFunction",
    "service_environment",
    "powertools_service",
    "METRICS_NAMESPACE",
    "KEYWORD_TABLE_ACTIONS",
]

METRICS_NAMESPACE = "memsvc"  # the functions' Powertools EMF namespace

# Docker-ignore semantics: everything at the top level is out, then memsvc/ and functions/ are
# back in (without this machine's bytecode). No tests, no venv, no local model (that is a pip
# package, and never in the layer either). The asset's hash is over these sources; the bundling
# (`package_code`) copies them and compiles their bytecode for the Lambda runtime.
CODE_ASSET_EXCLUDE = ["*", "!memsvc", "!functions", "**/__pycache__", "**/*.pyc"]

# Both stream consumers get only records `change_from_stream_record` can turn into a change: item
# rows (`rt` = item) inserted or removed, and item rows modified by a write. A MODIFY whose new
# image says `chg` = index or attempt (the indexer's own marks: a version indexed, an indexing
# attempt begun or ended), refresh (a TTL refresh) or erase (a user's erasure marks a row it is about
# to delete: that REMOVE is skipped by the handlers) never changes the version, so it is dropped
# here before it costs an invocation (the handlers check again); the indexer's quarantine and an
# admin's retry of it (`chg` = quarantine, retry) are changes, and pass. The timeline's own rows
# (`rt` = event, timeline-id, timeline-clock) never reach either consumer.
CHANGE_FILTER_PATTERNS: tuple[dict[str, Any], ...] = (
    {"eventName": ["INSERT"], "dynamodb": {"NewImage": {"rt": {"S": ["item"]}}}},
    {"eventName": ["REMOVE"], "dynamodb": {"OldImage": {"rt": {"S": ["item"]}}}},
    {"eventName": ["MODIFY"], "dynamodb": {"NewImage": {"rt": {"S": ["item"]},
                                                        "chg": {"S": [{"anything-but": ["index", "attempt",
                                                                                        "refresh", "erase"]}]}}}},
)
INDEXER_FILTER_PATTERNS = TIMELINE_FILTER_PATTERNS = CHANGE_FILTER_PATTERNS

# What `DynamoKeywordIndex` calls on its table: GetItem (ping), PutItem (a document's record),
# BatchWriteItem (postings), BatchGetItem (records, statistics), Query (postings, a tenant's
# records), DeleteItem (a wiped tenant's statistics), and TransactWriteItems of Update and Delete
# actions (counting and removing records), which IAM authorizes as UpdateItem and DeleteItem.
KEYWORD_TABLE_ACTIONS = tuple(f"dynamodb:{a}" for a in (
    "GetItem", "PutItem", "BatchWriteItem", "BatchGetItem", "Query", "UpdateItem", "DeleteItem"))


@dataclass(frozen=True)
class ServiceSettings:
    """What every function of the service runs with (`memsvc.settings.AwsSettings` reads it)."""

    embedding_model_id: str
    embedding_dimension: int
    embedding_concurrency: int
    data_key_cache_seconds: int
    log_level: str
    log_retention: logs.RetentionDays
    removal_policy: RemovalPolicy
    extraction_model_id: str = "amazon.nova-micro-v1:0"  # the knowledge graph's entity extractor
    memory_extraction_model_id: str = "amazon.nova-lite-v1:0"  # learning from conversations (issue 24)
    rerank_model_id: str = "amazon.rerank-v1:0"  # search's rerank step (the API function's)
    export_kms_key_arns: tuple[str, ...] = ()  # the KMS keys exports may be sealed under


@dataclass(frozen=True)
class StreamSettings:
    batch_size: int
    batching_window: Duration
    retry_attempts: int
    max_record_age: Duration
    parallelization_factor: int
    dlq_retention: Duration


def _runtime() -> lambda_.Runtime:
    return getattr(lambda_.Runtime, "PYTHON_" + LAMBDA_PYTHON.replace(".", "_"))


@jsii.implements(cdk.ILocalBundling)
class _PipLayerBundling:
    """Builds the layer on this machine (`layers/build.py`): pip installs Lambda-platform wheels,
    so no container is needed. It never declines, so CDK never falls back to Docker."""

    def __init__(self, spec: LayerSpec) -> None:
        self._spec = spec

    def try_bundle(self, output_dir: str, options: Any = None) -> bool:
        build(Path(output_dir), self._spec)
        return True


@jsii.implements(cdk.ILocalBundling)
class _CodeBundling:
    """Builds the code asset on this machine (`layers.build.package_code`): `functions/` and
    `memsvc/` with bytecode for the Lambda runtime, which cannot write its own (`/var/task` is
    read-only) and would otherwise compile every module on every cold start."""

    def __init__(self, project_root: Path) -> None:
        self._root = project_root

    def try_bundle(self, output_dir: str, options: Any = None) -> bool:
        package_code(self._root, Path(output_dir))
        return True


class LambdaPackage(Construct):
    """What every function runs: the code asset (only `memsvc/` and `functions/`) and the
    dependency layer (`layers/build.py`, bundled at synth; its asset hash covers the pins)."""

    def __init__(self, scope: Construct, id: str, *, project_root: Path, layer_name: str) -> None:
        super().__init__(scope, id)
        self.runtime = _runtime()
        self.architecture = lambda_.Architecture.X86_64
        self.code = lambda_.Code.from_asset(
            str(project_root), exclude=CODE_ASSET_EXCLUDE, ignore_mode=cdk.IgnoreMode.DOCKER,
            bundling=cdk.BundlingOptions(
                # Required by the API; never pulled: the local bundler always builds.
                image=cdk.DockerImage.from_registry(f"public.ecr.aws/sam/build-python{LAMBDA_PYTHON}"),
                local=_CodeBundling(project_root),
            ))
        spec = layer_spec(project_root)
        self.layer = lambda_.LayerVersion(
            self, "Dependencies",
            layer_version_name=layer_name,
            description=f"memsvc runtime dependencies, pinned ({spec.digest()[:12]})",
            compatible_runtimes=[self.runtime],
            compatible_architectures=[self.architecture],
            code=lambda_.Code.from_asset(
                str(project_root / "layers"),
                asset_hash_type=cdk.AssetHashType.CUSTOM,
                asset_hash=spec.digest(),
                bundling=cdk.BundlingOptions(
                    # Required by the API; never pulled: the local bundler always builds.
                    image=cdk.DockerImage.from_registry(f"public.ecr.aws/sam/build-python{LAMBDA_PYTHON}"),
                    local=_PipLayerBundling(spec),
                ),
            ),
        )


def powertools_service(service: str) -> str:
    """The Powertools service name (`POWERTOOLS_SERVICE_NAME`, the EMF `service` dimension)."""
    return f"memsvc-{service}"


def service_environment(*, service: str, table: ItemTable, keywords: KeywordTable, vectors: VectorStore,
                        envelope_key: kms.IKey, settings: ServiceSettings,
                        event_bus: events.IEventBus | None = None) -> dict[str, str]:
    """Every variable `AwsSettings.from_env` reads, and the Powertools settings. The bus is only
    for the function that publishes (without `MEMSVC_EVENT_BUS_NAME`, nothing is published)."""
    bus = {"MEMSVC_EVENT_BUS_NAME": event_bus.event_bus_name} if event_bus is not None else {}
    return {
        "MEMSVC_TABLE_NAME": table.table_name,
        "MEMSVC_KEYWORD_TABLE_NAME": keywords.table_name,
        "MEMSVC_VECTOR_BUCKET": vectors.bucket_name,
        "MEMSVC_VECTOR_INDEX": vectors.index_name,
        "MEMSVC_KMS_KEY_ID": envelope_key.key_arn,
        "MEMSVC_EMBEDDING_MODEL_ID": settings.embedding_model_id,
        "MEMSVC_EMBEDDING_DIMENSION": str(settings.embedding_dimension),
        "MEMSVC_EMBEDDING_CONCURRENCY": str(settings.embedding_concurrency),
        "MEMSVC_DATA_KEY_CACHE_SECONDS": str(settings.data_key_cache_seconds),
        "MEMSVC_EXTRACTION_MODEL_ID": settings.extraction_model_id,
        "MEMSVC_MEMORY_EXTRACTION_MODEL_ID": settings.memory_extraction_model_id,
        "MEMSVC_RERANK_MODEL_ID": settings.rerank_model_id,
        "MEMSVC_EXPORT_KMS_KEY_ARNS": ",".join(settings.export_kms_key_arns),
        "POWERTOOLS_SERVICE_NAME": powertools_service(service),
        "POWERTOOLS_METRICS_NAMESPACE": METRICS_NAMESPACE,
        "LOG_LEVEL": settings.log_level,
        "POWERTOOLS_LOGGER_LOG_EVENT": "false",  # events carry namespaces and keys: never logged
        **bus,
    }


class ServiceFunction(Construct):
    """One Python function: its own role (nothing attached but what `allow` adds, its log group
    and X-Ray), its own log group with retention, the shared package, X-Ray active tracing."""

    def __init__(
        self,
        scope: Construct,
        id: str,
        *,
        function_name: str,
        handler: str,
        description: str,
        package: LambdaPackage,
        environment: Mapping[str, str],
        memory_mb: int,
        timeout: Duration,
        log_retention: logs.RetentionDays,
        removal_policy: RemovalPolicy,
        reserved_concurrency: int | None = None,
    ) -> None:
        super().__init__(scope, id)
        self.log_group = logs.LogGroup(
            self, "Logs", log_group_name=f"/aws/lambda/{function_name}",
            retention=log_retention, removal_policy=removal_policy)
        self.role = iam.Role(
            self, "Role", assumed_by=iam.ServicePrincipal("lambda.amazonaws.com"),
            description=f"{function_name}: exactly the calls its code makes")
        self.allow(sid="OwnLogGroup", actions=["logs:CreateLogStream", "logs:PutLogEvents"],
                   resources=[self.log_group.log_group_arn])
        self.function = lambda_.Function(
            self, "Function",
            function_name=function_name,
            description=description,
            runtime=package.runtime,
            architecture=package.architecture,
            code=package.code,
            layers=[package.layer],
            handler=handler,
            role=self.role,
            environment=dict(environment),
            memory_size=memory_mb,
            timeout=timeout,
            tracing=lambda_.Tracing.ACTIVE,
            log_group=self.log_group,
            reserved_concurrent_executions=reserved_concurrency,
        )
        acknowledge(self.role, "AwsSolutions-IAM5[Resource::*]",
                    "Only actions without resource-level permissions use Resource '*' (Service Authorization "
                    "Reference): X-Ray PutTraceSegments/PutTelemetryRecords for active tracing, for stream "
                    "consumers dynamodb:ListStreams, which Lambda checks when it creates the mapping, and for the "
                    "API bedrock:Rerank (the model it may rerank with is its InvokeModel statement's). Every other "
                    "statement names its table, index, stream, key, queue, event bus, model or log group.")
        acknowledge(self.function, "AwsSolutions-L1",
                    f"python{LAMBDA_PYTHON} on purpose: a supported runtime that AWS patches (deprecation "
                    "scheduled for 2028), the closest to the Python the test suite runs on, and the target "
                    "the layer's cp312 wheels are resolved for. Moving is one change of LAMBDA_PYTHON in "
                    "infra/config.py, made when the suite runs on the newer Python.")

    def allow(self, *, sid: str, actions: Sequence[str], resources: Sequence[str],
              conditions: Mapping[str, Any] | None = None) -> None:
        self.role.add_to_principal_policy(iam.PolicyStatement(
            sid=sid, actions=list(actions), resources=list(resources),
            conditions=dict(conditions) if conditions else None))


def _titan_arn(scope: Construct, model_id: str) -> str:
    return Stack.of(scope).format_arn(service="bedrock", account="", resource="foundation-model",
                                      resource_name=model_id, arn_format=cdk.ArnFormat.SLASH_RESOURCE_NAME)


def _tenant_context_only() -> dict[str, Any]:
    """The envelope key is used only with the tenant as encryption context (KmsKeyProvider)."""
    return {
        "ForAnyValue:StringEquals": {"kms:EncryptionContextKeys": [ENCRYPTION_CONTEXT_KEY]},
        "ForAllValues:StringEquals": {"kms:EncryptionContextKeys": [ENCRYPTION_CONTEXT_KEY]},
    }


class ApiFunction(Construct):
    """The API Lambda (`functions/api.py`) behind both HTTP APIs.

    Calls (from the code): DynamoDB GetItem, BatchGetItem, Query, PutItem, UpdateItem on the
    table, Query on its three GSIs; `KEYWORD_TABLE_ACTIONS` on the keyword table (search reads
    it; `sync_index` and `/index/trigger` index inline, and turning keyword indexing off wipes a
    tenant's documents, so the API writes it too); KMS GenerateDataKey and Decrypt on the
    envelope key (new and existing tenant data keys); S3 Vectors QueryVectors, GetVectors (which
    QueryVectors needs for metadata and filters, and recall calls itself to compare the stored
    vectors of near-duplicates), GetIndex (health), PutVectors and
    DeleteVectors (`sync_index` indexes inline) on the index; Bedrock InvokeModel on the
    embedding model; Bedrock Rerank (no resource-level permission) and InvokeModel on the rerank
    model, for search's rerank step; DynamoDB DeleteItem and TransactWriteItems (authorized as
    its Put, Update and Delete actions) for the session store (message appends, session
    deletes); EventBridge PutEvents on the bus for `memsvc.session.closed`.
    """

    def __init__(
        self,
        scope: Construct,
        id: str,
        *,
        function_name: str,
        package: LambdaPackage,
        table: ItemTable,
        keywords: KeywordTable,
        vectors: VectorStore,
        envelope_key: kms.IKey,
        storage_key: kms.IKey,
        settings: ServiceSettings,
        memory_mb: int,
        timeout: Duration,
        reserved_concurrency: int | None,
        event_bus: events.IEventBus,
        default_tenant: str | None = None,
    ) -> None:
        super().__init__(scope, id)
        # Only when the environment names one: without it, a caller that names no tenant is refused.
        tenant = {"MEMSVC_DEFAULT_TENANT": default_tenant} if default_tenant is not None else {}
        self.service = ServiceFunction(
            self, "Service",
            function_name=function_name,
            handler="functions.api.handler",
            description="memsvc HTTP API (API Gateway HTTP API, payload 2.0)",
            package=package,
            # The bus: seed 003's plan-status and task-context-deleted events, published by the API.
            environment={**service_environment(service="api", table=table, keywords=keywords, vectors=vectors,
                                               envelope_key=envelope_key, settings=settings, event_bus=event_bus),
                         **tenant},
            memory_mb=memory_mb,
            timeout=timeout,
            log_retention=settings.log_retention,
            removal_policy=settings.removal_policy,
            reserved_concurrency=reserved_concurrency,
        )
        s = self.service
        # DeleteItem and BatchWriteItem: seed 003's workflow rows (TransactWriteItems is authorized
        # as its Put/Update/Delete actions), which are deleted outright, never tombstoned, and a
        # user's erasure. No Scan: every path is a key or a Query.
        s.allow(sid="ItemTable", resources=[table.table_arn], actions=[
            "dynamodb:GetItem", "dynamodb:BatchGetItem", "dynamodb:Query", "dynamodb:PutItem", "dynamodb:UpdateItem",
            "dynamodb:DeleteItem", "dynamodb:BatchWriteItem"])
        # GSI_HISTORY: GET /v1/memories/history reads a key's timeline events through it.
        s.allow(sid="ItemTableIndexes", actions=["dynamodb:Query"],
                resources=[table.index_arn(n) for n in (GSI_RECENT, GSI_ID, GSI_PENDING, GSI_HISTORY)])
        s.allow(sid="EventBus", actions=["events:PutEvents"], resources=[event_bus.event_bus_arn])
        s.allow(sid="KeywordTable", actions=KEYWORD_TABLE_ACTIONS, resources=[keywords.table_arn])
        s.allow(sid="StorageKey", actions=["kms:Decrypt", "kms:DescribeKey", "kms:GenerateDataKey"],
                resources=[storage_key.key_arn])
        s.allow(sid="TenantDataKeys", actions=["kms:GenerateDataKey", "kms:Decrypt"],
                resources=[envelope_key.key_arn], conditions=_tenant_context_only())
        if settings.export_kms_key_arns:
            # An export's content key is made (POST /admin/v1/exports) and an import's opened
            # (POST .../start) here; the steps on the remember function carry it sealed, never call KMS.
            s.allow(sid="ExportKeys", actions=["kms:GenerateDataKey", "kms:Decrypt"],
                    resources=list(settings.export_kms_key_arns),
                    conditions={"StringEquals": {f"kms:EncryptionContext:{EXPORT_CONTEXT_KEY}": EXPORT_PURPOSE}})
        s.allow(sid="VectorIndex", resources=[vectors.index_arn], actions=[
            "s3vectors:QueryVectors", "s3vectors:GetVectors", "s3vectors:GetIndex",
            "s3vectors:PutVectors", "s3vectors:DeleteVectors"])
        s.allow(sid="Embeddings", actions=["bedrock:InvokeModel"],
                resources=[_titan_arn(self, settings.embedding_model_id)])
        # Rerank is authorized as bedrock:Rerank, which has no resource type, and as InvokeModel
        # on the model it runs: that statement is what limits the API to the deployment's model.
        s.allow(sid="Rerank", actions=["bedrock:Rerank"], resources=["*"])
        s.allow(sid="RerankModel", actions=["bedrock:InvokeModel"],
                resources=[_titan_arn(self, settings.rerank_model_id)])
        self.function = s.function
        self.role = s.role
        self.log_group = s.log_group


@jsii.implements(lambda_.IEventSourceDlq)
class _OnFailureQueue:
    """The SQS on-failure destination, without CDK's automatic grant (which adds
    GetQueueAttributes and GetQueueUrl): the consumer's role gets only SendMessage."""

    def __init__(self, queue: sqs.IQueue) -> None:
        self._queue = queue

    def bind(self, target: Any, target_handler: Any) -> lambda_.DlqDestinationConfig:
        return lambda_.DlqDestinationConfig(destination=self._queue.queue_arn)


class IndexerFunction(Construct):
    """The indexer (`functions/indexer.py`): the table's stream -> Titan -> S3 Vectors, and the
    keyword index.

    The event-source mapping reports partial batch failures, bisects a failing batch, retries
    a bounded number of times within a bounded record age, and parks the position of what still
    fails in an encrypted SQS queue (`dead_letter_queue`); a poison memory is quarantined on its
    row instead of failing its record (`memsvc.service.indexer`), so only a failing dependency
    leads there. Calls (from the code): DynamoDB GetItem and BatchGetItem (a batch's items, its
    tenant's wrapped key) and UpdateItem (the index, attempt and quarantine marks) on the table;
    `KEYWORD_TABLE_ACTIONS` on the keyword table; stream reads; KMS Decrypt on the envelope key;
    S3 Vectors PutVectors and DeleteVectors on the index; Bedrock InvokeModel on the embedding
    model and on the entity extraction model (Converse).
    """

    def __init__(
        self,
        scope: Construct,
        id: str,
        *,
        function_name: str,
        package: LambdaPackage,
        table: ItemTable,
        keywords: KeywordTable,
        vectors: VectorStore,
        envelope_key: kms.IKey,
        storage_key: kms.IKey,
        settings: ServiceSettings,
        stream: StreamSettings,
        memory_mb: int,
        timeout: Duration,
    ) -> None:
        super().__init__(scope, id)
        self.service = ServiceFunction(
            self, "Service",
            function_name=function_name,
            handler="functions.indexer.handler",
            description="memsvc indexer: DynamoDB stream -> Titan embeddings -> S3 Vectors",
            package=package,
            environment=service_environment(service="indexer", table=table, keywords=keywords, vectors=vectors,
                                            envelope_key=envelope_key, settings=settings),
            memory_mb=memory_mb,
            timeout=timeout,
            log_retention=settings.log_retention,
            removal_policy=settings.removal_policy,
        )
        s = self.service
        s.allow(sid="ItemTable", actions=["dynamodb:GetItem", "dynamodb:BatchGetItem", "dynamodb:UpdateItem"],
                resources=[table.table_arn])
        s.allow(sid="KeywordTable", actions=KEYWORD_TABLE_ACTIONS, resources=[keywords.table_arn])
        s.allow(sid="StorageKey", actions=["kms:Decrypt", "kms:DescribeKey", "kms:GenerateDataKey"],
                resources=[storage_key.key_arn])
        s.allow(sid="TenantDataKeys", actions=["kms:Decrypt"], resources=[envelope_key.key_arn],
                conditions=_tenant_context_only())
        s.allow(sid="VectorIndex", actions=["s3vectors:PutVectors", "s3vectors:DeleteVectors"],
                resources=[vectors.index_arn])
        s.allow(sid="Embeddings", actions=["bedrock:InvokeModel"],
                resources=[_titan_arn(self, settings.embedding_model_id)])
        # Converse is authorized as InvokeModel.
        s.allow(sid="EntityExtraction", actions=["bedrock:InvokeModel"],
                resources=[_titan_arn(self, settings.extraction_model_id)])
        self.dead_letter_queue = failed_batches_queue(self, function_name=function_name, stream=stream,
                                                      removal_policy=settings.removal_policy)
        self.mapping = stream_consumer_mapping(
            self, service=s, table=table, stream=stream, dead_letter_queue=self.dead_letter_queue,
            filter_patterns=INDEXER_FILTER_PATTERNS)
        self.function = s.function
        self.role = s.role
        self.log_group = s.log_group


class TimelineFunction(Construct):
    """The timeline (`functions/timeline.py`): the table's stream -> the event log -> the bus.

    Its own event-source mapping on the stream (the indexer's settings: partial batch failures,
    bisection, bounded retries and record age, the failing position parked in its own encrypted
    SQS queue, `dead_letter_queue`), with the same filter. Calls (from the code,
    `DynamoEventLog.record` and `EventBridgePublisher`): DynamoDB GetItem (the tenant's clock,
    its settings), BatchGetItem (the stamps of replayed ids) and TransactWriteItems of Put and
    Update actions on the table, which IAM authorizes as PutItem and UpdateItem; stream reads;
    EventBridge PutEvents on the bus. The storage key for the table's and stream's encryption
    at rest; PutEvents needs no key grant (EventBridge itself uses the bus's key, under its key
    policy, `LifecycleEvents`). No envelope-key access: the timeline copies value ciphertexts
    into the log and never decrypts them. No vector index, no keyword table, no model.
    """

    def __init__(
        self,
        scope: Construct,
        id: str,
        *,
        function_name: str,
        package: LambdaPackage,
        table: ItemTable,
        keywords: KeywordTable,
        vectors: VectorStore,
        envelope_key: kms.IKey,
        storage_key: kms.IKey,
        event_bus: events.IEventBus,
        settings: ServiceSettings,
        stream: StreamSettings,
        memory_mb: int,
        timeout: Duration,
    ) -> None:
        super().__init__(scope, id)
        self.service = ServiceFunction(
            self, "Service",
            function_name=function_name,
            handler="functions.timeline.handler",
            description="memsvc timeline: DynamoDB stream -> event log -> EventBridge",
            package=package,
            # `AwsSettings.from_env` wants every variable (the app is built whole); the envelope
            # key's ARN and the keyword table's name are names here, its role gets no use of them.
            environment=service_environment(service="timeline", table=table, keywords=keywords, vectors=vectors,
                                            envelope_key=envelope_key, settings=settings, event_bus=event_bus),
            memory_mb=memory_mb,
            timeout=timeout,
            log_retention=settings.log_retention,
            removal_policy=settings.removal_policy,
        )
        s = self.service
        s.allow(sid="ItemTable", resources=[table.table_arn], actions=[
            "dynamodb:GetItem", "dynamodb:BatchGetItem", "dynamodb:PutItem", "dynamodb:UpdateItem"])
        s.allow(sid="StorageKey", actions=["kms:Decrypt", "kms:DescribeKey", "kms:GenerateDataKey"],
                resources=[storage_key.key_arn])
        s.allow(sid="EventBus", actions=["events:PutEvents"], resources=[event_bus.event_bus_arn])
        self.dead_letter_queue = failed_batches_queue(self, function_name=function_name, stream=stream,
                                                      removal_policy=settings.removal_policy)
        self.mapping = stream_consumer_mapping(
            self, service=s, table=table, stream=stream, dead_letter_queue=self.dead_letter_queue,
            filter_patterns=TIMELINE_FILTER_PATTERNS)
        self.function = s.function
        self.role = s.role
        self.log_group = s.log_group


def failed_batches_queue(scope: Construct, *, function_name: str, stream: StreamSettings,
                         removal_policy: RemovalPolicy) -> sqs.Queue:
    """A stream consumer's on-failure destination: the positions of batches that exhausted their
    retries (shard, sequence numbers), never item data; encrypted, TLS only."""
    queue = sqs.Queue(
        scope, "FailedBatches",
        queue_name=f"{function_name}-failed",
        encryption=sqs.QueueEncryption.SQS_MANAGED,  # holds batch positions, not item data
        enforce_ssl=True,
        retention_period=stream.dlq_retention,
        removal_policy=removal_policy,
    )
    acknowledge(queue, "AwsSolutions-SQS3",
                "This queue is itself the dead-letter (on-failure) destination of the stream mapping; "
                "nothing consumes it automatically, so a DLQ behind it would never receive a message.")
    return queue


def stream_consumer_mapping(scope: Construct, *, service: ServiceFunction, table: ItemTable, stream: StreamSettings,
                            dead_letter_queue: sqs.IQueue,
                            filter_patterns: Sequence[Mapping[str, Any]]) -> lambda_.EventSourceMapping:
    """The table-stream mapping every consumer uses (the indexer's and the timeline's, each its
    own), with the grants it needs."""
    service.allow(sid="TableStream", resources=[table.stream_arn], actions=[
        "dynamodb:DescribeStream", "dynamodb:GetRecords", "dynamodb:GetShardIterator"])
    # Lambda checks ListStreams when it creates the mapping; the action has no resource type.
    service.allow(sid="ListStreams", actions=["dynamodb:ListStreams"], resources=["*"])
    service.allow(sid="OnFailureDestination", actions=["sqs:SendMessage"], resources=[dead_letter_queue.queue_arn])
    mapping = lambda_.EventSourceMapping(
        scope, "StreamMapping",
        target=service.function,
        event_source_arn=table.stream_arn,
        starting_position=lambda_.StartingPosition.TRIM_HORIZON,
        batch_size=stream.batch_size,
        max_batching_window=stream.batching_window,
        parallelization_factor=stream.parallelization_factor,
        report_batch_item_failures=True,
        bisect_batch_on_error=True,
        retry_attempts=stream.retry_attempts,
        max_record_age=stream.max_record_age,
        on_failure=_OnFailureQueue(dead_letter_queue),
        filters=[{"pattern": json.dumps(p, separators=(",", ":"))} for p in filter_patterns],
    )
    # The mapping must not be created before its role can read the stream (Lambda checks).
    mapping.node.add_dependency(service.role)
    return mapping
