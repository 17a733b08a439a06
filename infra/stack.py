"""One stack per environment. It only composes constructs and wires their resources together;
everything that differs between environments comes from its `EnvConfig`."""

from __future__ import annotations

from pathlib import Path

import jsii
from aws_cdk import CfnOutput, Duration, Environment, IStableListProducer, Lazy, Stack, Tags
from aws_cdk import aws_apigatewayv2_authorizers as authorizers
from constructs import Construct

from infra.config import EnvConfig, StreamConsumerSettings
from infra.constructs import (
    ApiFunction,
    EncryptionKeys,
    IndexerFunction,
    ItemTable,
    KeywordTable,
    LambdaPackage,
    LifecycleEvents,
    Operations,
    ServiceHttpApi,
    TimelineFunction,
    UserDirectory,
    VectorStore,
)
from infra.constructs.console import ConsoleSite
from infra.constructs.functions import ServiceSettings, StreamSettings
from infra.constructs.remember import RememberFunction, RememberQueue, let_api_enqueue
from infra.constructs.reflection import ReflectionFunction
from infra.constructs.session_retention import SessionRetentionFunction
from infra.constructs.users import BROWSER_SCOPES
from infra.routes import service_routes
from memsvc.adapters.aws.s3vectors_index import NON_FILTERABLE_METADATA_KEYS

__all__ = ["MemsvcStack", "PROJECT_ROOT"]

PROJECT_ROOT = Path(__file__).resolve().parents[1]
VECTOR_INDEX_NAME = "memories"


@jsii.implements(IStableListProducer)
class _Audience:
    """The JWT authorizer's audience, read at synthesis: the console's app client can only be
    created after the API (its redirect URL is the distribution in front of the API)."""

    def __init__(self, client_ids: list[str]) -> None:
        self.client_ids = client_ids

    def produce(self) -> list[str]:
        return self.client_ids


class MemsvcStack(Stack):
    def __init__(self, scope: Construct, id: str, *, config: EnvConfig) -> None:
        env = Environment(account=config.account, region=config.region)
        super().__init__(
            scope, id,
            stack_name=config.stack_name,
            env=env,
            description=f"memsvc ({config.name}): memory service for LLM agents",
            termination_protection=config.retain_data,
        )
        self.config = config
        prefix = config.prefix
        removal = config.removal_policy

        keys = EncryptionKeys(self, "Keys", alias_prefix=prefix, removal_policy=removal)
        table = ItemTable(self, "Items", table_name=f"{prefix}-items", encryption_key=keys.storage_key,
                          removal_policy=removal, deletion_protection=config.retain_data)
        keywords = KeywordTable(self, "Keywords", table_name=f"{prefix}-keywords", encryption_key=keys.storage_key,
                                removal_policy=removal, deletion_protection=config.retain_data)
        vectors = VectorStore(
            self, "Vectors",
            bucket_name=f"{prefix}-vectors-{self.account}",
            index_name=VECTOR_INDEX_NAME,
            dimension=config.vector_dimension,
            non_filterable_keys=NON_FILTERABLE_METADATA_KEYS,
            encryption_key=keys.storage_key,
            removal_policy=removal,
        )
        events = LifecycleEvents(self, "Events", bus_name=f"{prefix}-events",
                                 archive_retention_days=config.event_archive_retention_days,
                                 encryption_key=keys.storage_key, removal_policy=removal)

        package = LambdaPackage(self, "Package", project_root=PROJECT_ROOT, layer_name=f"{prefix}-dependencies")
        settings = ServiceSettings(
            embedding_model_id=config.embedding_model_id,
            embedding_dimension=config.vector_dimension,
            embedding_concurrency=config.embedding_concurrency,
            data_key_cache_seconds=config.data_key_cache_seconds,
            extraction_model_id=config.extraction_model_id,
            memory_extraction_model_id=config.memory_extraction_model_id,
            rerank_model_id=config.rerank_model_id,
            export_kms_key_arns=config.export_kms_key_arns,
            log_level=config.log_level,
            log_retention=config.log_retention,
            removal_policy=removal,
        )
        data = dict(package=package, table=table, keywords=keywords, vectors=vectors, envelope_key=keys.envelope_key,
                    storage_key=keys.storage_key, settings=settings)
        api_fn = ApiFunction(
            self, "Api", function_name=f"{prefix}-api",
            memory_mb=config.api_memory_mb, timeout=Duration.seconds(config.api_timeout_seconds),
            reserved_concurrency=config.api_reserved_concurrency, default_tenant=config.default_tenant,
            event_bus=events.bus, **data)
        def stream_settings(stream: StreamConsumerSettings) -> StreamSettings:
            return StreamSettings(
                batch_size=stream.batch_size,
                batching_window=Duration.seconds(stream.batching_window_seconds),
                retry_attempts=stream.retry_attempts,
                max_record_age=Duration.hours(stream.max_record_age_hours),
                parallelization_factor=stream.parallelization_factor,
                dlq_retention=Duration.days(config.dlq_retention_days),
            )

        indexer = IndexerFunction(
            self, "Indexer", function_name=f"{prefix}-indexer",
            memory_mb=config.indexer_memory_mb, timeout=Duration.seconds(config.indexer_timeout_seconds),
            stream=stream_settings(config.indexer_stream), **data)
        # The second consumer of the table's stream, with its own mapping: the event log, then
        # the bus. Two is as many as a stream shard takes: DynamoDB Streams throttles when more
        # than 2 processes read one shard, so a third consumer should subscribe to the bus.
        timeline = TimelineFunction(
            self, "Timeline", function_name=f"{prefix}-timeline",
            memory_mb=config.timeline_memory_mb, timeout=Duration.seconds(config.timeline_timeout_seconds),
            stream=stream_settings(config.timeline_stream), event_bus=events.bus, **data)

        # remember with `wait: false`: the API enqueues, the remember function decides. The queue's
        # visibility timeout is six times the function's, as Lambda's SQS mapping wants.
        remember_timeout = Duration.seconds(config.remember_timeout_seconds)
        remember_queue = RememberQueue(self, "RememberQueue", queue_name=f"{prefix}-remember",
                                       visibility_timeout=Duration.seconds(6 * config.remember_timeout_seconds),
                                       dlq_retention=Duration.days(config.dlq_retention_days), removal_policy=removal)
        remember = RememberFunction(
            self, "Remember", function_name=f"{prefix}-remember", queue=remember_queue,
            judge_model_id=config.judge_model_id, memory_mb=config.remember_memory_mb, timeout=remember_timeout,
            event_bus=events.bus, **data)
        let_api_enqueue(api_fn.service, remember_queue, config.judge_model_id, config.memory_extraction_model_id)
        # session_auto_delete: closed sessions past their retention, removed hourly
        session_retention = SessionRetentionFunction(self, "SessionRetention",
                                                     function_name=f"{prefix}-session-retention", **data)
        # background reflection (issue 24): due users of the listed tenants, on a schedule
        reflection = ReflectionFunction(
            self, "Reflection", function_name=f"{prefix}-reflection", judge_model_id=config.judge_model_id,
            tenants=config.reflection_tenants or ((config.default_tenant,) if config.default_tenant else ()),
            every=Duration.hours(config.reflection_schedule_hours), **data)

        users = None
        if config.jwt_issuer is None:
            users = UserDirectory(self, "Users", pool_name=f"{prefix}-users",
                                  threat_protection=config.cognito_threat_protection,
                                  removal_policy=removal, deletion_protection=config.retain_data)
            issuer, audience = users.issuer, users.audience
        else:
            issuer, audience = config.jwt_issuer.issuer, list(config.jwt_issuer.audience)

        audience_producer = _Audience(audience)
        routes = service_routes()
        common = dict(handler=api_fn.function, routes=routes, throttle=config.api_throttle,
                      public_route_throttle=config.health_throttle,
                      access_log_retention=config.access_log_retention, removal_policy=removal)
        jwt_api = ServiceHttpApi(
            self, "JwtApi", api_name=f"{prefix}-jwt",
            description="memsvc for users and agents with a bearer token (JWT)",
            authorizer=authorizers.HttpJwtAuthorizer("Jwt", issuer, jwt_audience=Lazy.list(audience_producer)),
            cors_allowed_origins=config.cors_allowed_origins, **common)
        iam_api = ServiceHttpApi(
            self, "IamApi", api_name=f"{prefix}-iam",
            description="memsvc for AWS principals (SigV4); the tenant comes from X-Tenant-Id",
            authorizer=authorizers.HttpIamAuthorizer(),
            invoke_policy_name=f"{prefix}-invoke", **common)

        console = None
        if config.console:
            assert users is not None  # EnvConfig refuses a console with an external issuer
            hosted_ui = users.add_hosted_ui(domain_prefix=f"{prefix}-{self.account}")
            sign_in_domain = f"{hosted_ui.domain_name}.auth.{self.region}.amazoncognito.com"
            console = ConsoleSite(self, "Console", api=jwt_api.api, api_paths=[r.path for r in routes],
                                  sign_in_domain=sign_in_domain, removal_policy=removal,
                                  domain_name=config.console_domain, certificate_arn=config.console_certificate_arn)
            console_client = users.add_browser_client("ConsoleClient", client_name=f"{prefix}-console",
                                                      redirect_url=console.url)
            audience.append(console_client.user_pool_client_id)
            console.publish(assets_dir=config.console_assets, log_retention=config.log_retention,
                            removal_policy=removal,
                            config={"api_base": "", "auth": {
                                "mode": "cognito", "domain": sign_in_domain,
                                "client_id": console_client.user_pool_client_id, "redirect_uri": console.url,
                                "scopes": [scope.scope_name for scope in BROWSER_SCOPES], "token": "id"}})

        ops = Operations(
            self, "Operations", name=prefix, thresholds=config.alarms,
            apis={"jwt-api": jwt_api.api, "iam-api": iam_api.api},
            functions={"api": api_fn.function, "indexer": indexer.function, "timeline": timeline.function,
                       "remember": remember.function, "session-retention": session_retention.function,
                       "reflection": reflection.function},
            stream_consumers={"indexer": indexer.function, "timeline": timeline.function},
            dead_letter_queues={"indexer": indexer.dead_letter_queue, "timeline": timeline.dead_letter_queue,
                                "remember": remember_queue.dead_letter_queue},
            alarm_email=config.alarm_email, removal_policy=removal,
        )

        self.table, self.keywords, self.vectors, self.events, self.keys = table, keywords, vectors, events, keys
        self.api_function, self.indexer, self.timeline, self.users = api_fn, indexer, timeline, users
        self.jwt_api, self.iam_api, self.operations = jwt_api, iam_api, ops
        self.remember, self.remember_queue = remember, remember_queue
        self.session_retention = session_retention
        self.console = console
        self.reflection = reflection

        assert iam_api.invoke_policy is not None
        outputs = {
            "JwtApiUrl": (jwt_api.url, "Base URL for bearer tokens (Authorization: Bearer <JWT>)"),
            "IamApiUrl": (iam_api.url, "Base URL for SigV4-signed calls (service execute-api)"),
            "IamInvokePolicyArn": (iam_api.invoke_policy.managed_policy_arn,
                                   "Attach to a role to let it call the IAM API"),
            "JwtIssuer": (issuer, "Issuer the JWT authorizer trusts"),
            "JwtAudience": (",".join(audience), "Audiences (aud or client_id) the JWT authorizer accepts"),
            "TableName": (table.table_name, "DynamoDB item table"),
            "KeywordTableName": (keywords.table_name, "DynamoDB table of the keyword index"),
            "VectorBucketName": (vectors.bucket_name, "S3 Vectors bucket"),
            "VectorIndexName": (vectors.index_name, "S3 Vectors index"),
            "EventBusName": (events.bus.event_bus_name, "EventBridge bus for lifecycle events"),
            "AlarmTopicArn": (ops.topic.topic_arn, "SNS topic every alarm notifies"),
            "DashboardName": (ops.dashboard.dashboard_name, "CloudWatch dashboard"),
        }
        if users is not None:
            outputs["UserPoolId"] = (users.user_pool.user_pool_id, "Cognito user pool (the default JWT issuer)")
            outputs["UserPoolClientId"] = (users.client.user_pool_client_id, "Cognito app client (JWT audience)")
        if console is not None:
            outputs["ConsoleUrl"] = (console.url, "The browser console (sign in on the hosted UI)")
            outputs["ConsoleSignInDomain"] = (console.sign_in_domain, "Cognito hosted UI the console signs in on")
            outputs["ConsoleDistributionDomain"] = (console.distribution.distribution_domain_name,
                                                    "The distribution's own name (a console domain's DNS target)")
        for key, (value, description) in outputs.items():
            CfnOutput(self, key, value=value, description=description)

        Tags.of(self).add("memsvc:stack", prefix)
        for tag, value in config.tags.items():
            Tags.of(self).add(tag, value)

