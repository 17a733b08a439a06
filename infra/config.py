"""Per-environment configuration: the only place where `dev` and `prod` differ.

`MemsvcStack` takes one `EnvConfig` and nothing else; every construct gets its settings from
it through keyword arguments. Add an environment by adding an entry to `ENVIRONMENTS`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from aws_cdk import RemovalPolicy
from aws_cdk.aws_logs import RetentionDays

__all__ = [
    "LAMBDA_PYTHON",
    "LAMBDA_PLATFORMS",
    "TITAN_EMBED_TEXT_V2",
    "TITAN_DIMENSIONS",
    "MIN_UNRESERVED_CONCURRENCY",
    "CONSOLE_ASSETS",
    "CONSOLE_ASSETS_CONTEXT",
    "Throttle",
    "StreamConsumerSettings",
    "TIMELINE_STREAM",
    "AlarmThresholds",
    "ExternalJwtIssuer",
    "EnvConfig",
    "ENVIRONMENTS",
    "config_for",
]

# The Lambda runtime and the layer's wheels move together: `layers/build.py` installs cp312
# wheels for these platforms. x86_64 because celine-regorus (the Rego engine) ships its Linux
# wheel only as x86_64 manylinux_2_34, which the Amazon Linux 2023 runtimes (glibc 2.34) load.
# pip does not widen an explicit --platform to older glibcs, so each manylinux level a pinned
# wheel needs is named: tiktoken (recall's tokenizer) ships x86_64 only as manylinux_2_28.
LAMBDA_PYTHON = "3.12"
LAMBDA_PLATFORMS = ("manylinux2014_x86_64", "manylinux_2_28_x86_64", "manylinux_2_34_x86_64")

TITAN_EMBED_TEXT_V2 = "amazon.titan-embed-text-v2:0"
TITAN_DIMENSIONS = (256, 512, 1024)  # what Titan Text Embeddings V2 can return
MIN_UNRESERVED_CONCURRENCY = 100  # Lambda's floor of unreserved concurrency per account and region

# The built console (`make console`; committed) that the console's bucket receives. `cdk synth -c
# memsvc:consoleAssets=<dir>` deploys another directory instead: the template tests name a
# placeholder, so they synthesize while the console is being rebuilt.
CONSOLE_ASSETS = Path(__file__).resolve().parents[1] / "memsvc" / "console" / "static"
CONSOLE_ASSETS_CONTEXT = "memsvc:consoleAssets"


@dataclass(frozen=True)
class Throttle:
    rate_per_second: int
    burst: int


@dataclass(frozen=True)
class StreamConsumerSettings:
    """How a DynamoDB-stream consumer (the indexer, the timeline) reads the stream. The
    defaults are the indexer's."""

    batch_size: int = 100  # one Bedrock call per text, 8 at a time: ~100 records fit in seconds
    batching_window_seconds: int = 2  # PutVectors bills >= 128 KB a call: let batches fill
    retry_attempts: int = 5  # then the batch's position goes to the on-failure queue
    max_record_age_hours: int = 6  # the stream keeps 24 h; leave time to replay from the DLQ
    parallelization_factor: int = 1  # concurrent batches per shard (order per key is kept)


# The timeline: cheap per record (a few DynamoDB writes, PutEvents of 10), and what subscribers
# wait for, so batches are not held back to fill up. One batch per shard at a time: a tenant's
# stamps are serialised by its clock item anyway, and concurrent batches would only contend.
TIMELINE_STREAM = StreamConsumerSettings(batching_window_seconds=0)


@dataclass(frozen=True)
class AlarmThresholds:
    api_5xx_per_5min: int
    api_p99_latency_ms: int
    lambda_errors_per_5min: int
    lambda_throttles_per_5min: int
    stream_iterator_age_seconds: int
    dlq_visible_messages: int = 1  # any parked batch needs a human
    quarantined_per_5min: int = 1  # no valid memory is poison: any quarantine is a fault to look at
    # Hybrid search and recall answer without the model (degraded), so its failures raise no 5xx.
    embedding_failures_per_5min: int = 5


@dataclass(frozen=True)
class ExternalJwtIssuer:
    """Use an existing OIDC issuer (RS256, discovery + JWKS) instead of the stack's user pool."""

    issuer: str  # e.g. https://login.example.com/ (must match the token's `iss` exactly)
    audience: tuple[str, ...]  # accepted `aud` (or `client_id`) values


@dataclass(frozen=True)
class EnvConfig:
    name: str
    # Stateful resources (table, vector bucket and index, keys, user pool, logs) survive a
    # stack deletion, and the table and user pool refuse deletion, when True.
    retain_data: bool
    log_retention: RetentionDays
    access_log_retention: RetentionDays
    alarms: AlarmThresholds
    api_throttle: Throttle
    # Where it deploys. The region is required (DynamoDB's customer-managed-key settings and the
    # Bedrock model ARN are regional); it must offer S3 Vectors and Titan Text Embeddings V2.
    # account None: the account of the CLI's credentials at deploy time.
    region: str = "us-east-1"
    account: str | None = None
    # The embedding model and the S3 Vectors index dimension (fixed at index creation: a new
    # dimension means a new index and a re-index, so the index name is fixed to make that a
    # deliberate migration rather than a silent replacement).
    embedding_model_id: str = TITAN_EMBED_TEXT_V2
    vector_dimension: int = 1024
    embedding_concurrency: int = 8  # parallel InvokeModel calls per function instance
    data_key_cache_seconds: int = 300  # plaintext tenant data key kept in memory
    # Unauthenticated GET /health embeds a probe text: keep it cheap to abuse.
    health_throttle: Throttle = Throttle(rate_per_second=5, burst=10)
    api_memory_mb: int = 1024
    api_timeout_seconds: int = 25  # under HTTP API's 30 s integration limit
    # Reserved concurrency for the API function. None (every environment today): share the
    # account's pool. Lambda refuses a reservation that leaves fewer than 100 executions
    # unreserved, and a new account's quota can be as low as 10, so reserving is opt-in and must
    # name the account's concurrency quota (Service Quotas, "Concurrent executions") to be checked.
    api_reserved_concurrency: int | None = None
    account_concurrency_quota: int | None = None
    indexer_memory_mb: int = 1024
    indexer_timeout_seconds: int = 300
    indexer_stream: StreamConsumerSettings = StreamConsumerSettings()
    timeline_memory_mb: int = 512
    timeline_timeout_seconds: int = 120  # PutEvents retries back off for ~1.5 s at most per request
    timeline_stream: StreamConsumerSettings = TIMELINE_STREAM
    # remember (`wait: false` runs on its own function, fed by an SQS queue). The judge model is
    # the tenants' default `judge_model_id`; the roles may invoke only this one.
    judge_model_id: str = "amazon.nova-micro-v1:0"
    # The knowledge graph's entity extractor (Bedrock Converse, in the indexer); its role may
    # invoke only this one.
    extraction_model_id: str = "amazon.nova-micro-v1:0"
    # Learning from conversations (issue 24): the model that extracts memories from messages
    # (Bedrock Converse, in the API and remember functions); their roles may invoke only this one.
    memory_extraction_model_id: str = "amazon.nova-lite-v1:0"
    # Search's rerank step (Bedrock Rerank), for tenants that turn their `rerank` setting on: the
    # deployment's model, and the only one the API role may rerank with (`amazon.rerank-v1:0` or
    # `cohere.rerank-v3-5:0`). Rerank models are offered in fewer regions than Titan: where the
    # model is not, a tenant's rerank fails and search keeps its fused order.
    rerank_model_id: str = "amazon.rerank-v1:0"
    remember_memory_mb: int = 1024
    # Background reflection (functions/reflection.py): the tenants its schedule reflects (empty:
    # the default tenant, if any) and how often it looks for due users (each tenant's own
    # reflection_interval_hours decides who is due).
    reflection_tenants: tuple[str, ...] = ()
    reflection_schedule_hours: int = 1
    # A batch of 10 queued jobs runs one after another; an extraction job makes one model call
    # (a 15 s read timeout at most) and up to 20 remember decisions.
    remember_timeout_seconds: int = 300
    event_archive_retention_days: int = 30
    dlq_retention_days: int = 14
    log_level: str = "INFO"
    # The tenant of callers whose token (or IAM request) names none. None: they are refused (a
    # Cognito access token carries no tenant claim and must not land in a shared tenant).
    default_tenant: str | None = None
    # JWT: None creates a Cognito user pool and app client in the stack.
    jwt_issuer: ExternalJwtIssuer | None = None
    # Cognito threat protection (Plus feature plan): "FULL_FUNCTION" blocks risky sign-ins,
    # "AUDIT_ONLY" only records them.
    cognito_threat_protection: str = "FULL_FUNCTION"
    # Browser origins allowed to call the JWT API. Empty: no CORS (server-to-server only).
    cors_allowed_origins: tuple[str, ...] = ()
    # The browser console (infra/constructs/console.py): CloudFront serving the built console and
    # the JWT API at one origin, with sign-in on the user pool's hosted UI. It needs the stack's
    # user pool, so an environment with an external `jwt_issuer` turns it off.
    console: bool = True
    console_assets: Path = CONSOLE_ASSETS
    # The console's own domain (e.g. console.example.com), with the ARN of its ACM certificate,
    # which CloudFront requires in us-east-1; point the name's DNS at the distribution
    # (`ConsoleDistributionDomain`). None: the distribution's *.cloudfront.net name.
    console_domain: str | None = None
    console_certificate_arn: str | None = None
    # The KMS keys (full key ARNs) an admin may seal exports under (`kms_key_id`, issue 26): the
    # API role may GenerateDataKey and Decrypt with exactly these (for the export purpose only),
    # and the service refuses any other. Empty: exports are sealed with a passphrase only. Each
    # key's own policy must also let the stack's account (or the API role) use it.
    export_kms_key_arns: tuple[str, ...] = ()
    # Where alarm notifications go (an email subscription is added when set).
    alarm_email: str | None = None
    tags: dict[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.vector_dimension not in TITAN_DIMENSIONS:
            raise ValueError(f"vector_dimension must be one of {TITAN_DIMENSIONS} (Titan V2)")
        if self.console and self.jwt_issuer is not None:
            raise ValueError("the console signs in on the stack's user pool: "
                             "set console=False with an external jwt_issuer")
        if self.console_certificate_arn and not self.console_certificate_arn.startswith("arn:aws:acm:us-east-1:"):
            raise ValueError("console_certificate_arn is an ACM certificate in us-east-1 (CloudFront's region)")
        if self.cognito_threat_protection not in ("FULL_FUNCTION", "AUDIT_ONLY"):
            raise ValueError("cognito_threat_protection must be FULL_FUNCTION or AUDIT_ONLY")
        if any(not arn.startswith("arn:aws") or ":kms:" not in arn or ":key/" not in arn
               for arn in self.export_kms_key_arns):
            raise ValueError("export_kms_key_arns holds KMS key ARNs (arn:aws:kms:<region>:<account>:key/<id>)")
        if not self.name.isalnum() or not self.name.islower():
            raise ValueError("an environment name is lowercase letters and digits")
        if self.api_reserved_concurrency is not None:
            quota = self.account_concurrency_quota
            if quota is None or quota - self.api_reserved_concurrency < MIN_UNRESERVED_CONCURRENCY:
                raise ValueError(
                    f"api_reserved_concurrency={self.api_reserved_concurrency} needs an account concurrency "
                    f"quota of at least {self.api_reserved_concurrency + MIN_UNRESERVED_CONCURRENCY} (Lambda keeps "
                    f"{MIN_UNRESERVED_CONCURRENCY} unreserved); set account_concurrency_quota to the account's quota"
                )

    @property
    def prefix(self) -> str:
        """Physical-name prefix: `memsvc-dev-items`, `/aws/lambda/memsvc-prod-api`, ..."""
        return f"memsvc-{self.name}"

    @property
    def stack_name(self) -> str:
        return self.prefix

    @property
    def removal_policy(self) -> RemovalPolicy:
        return RemovalPolicy.RETAIN if self.retain_data else RemovalPolicy.DESTROY


ENVIRONMENTS: dict[str, EnvConfig] = {
    "dev": EnvConfig(
        name="dev",
        retain_data=False,
        log_retention=RetentionDays.TWO_WEEKS,
        access_log_retention=RetentionDays.TWO_WEEKS,
        api_throttle=Throttle(rate_per_second=50, burst=100),
        alarms=AlarmThresholds(
            api_5xx_per_5min=10,
            api_p99_latency_ms=5000,
            lambda_errors_per_5min=10,
            lambda_throttles_per_5min=10,
            stream_iterator_age_seconds=900,
        ),
        event_archive_retention_days=7,
        log_level="DEBUG",
        cognito_threat_protection="AUDIT_ONLY",
        tags={"memsvc:environment": "dev"},
    ),
    "prod": EnvConfig(
        name="prod",
        retain_data=True,
        log_retention=RetentionDays.ONE_YEAR,
        access_log_retention=RetentionDays.ONE_YEAR,
        api_throttle=Throttle(rate_per_second=500, burst=1000),
        alarms=AlarmThresholds(
            api_5xx_per_5min=5,
            api_p99_latency_ms=2000,
            lambda_errors_per_5min=5,
            lambda_throttles_per_5min=1,
            stream_iterator_age_seconds=300,
        ),
        indexer_stream=StreamConsumerSettings(parallelization_factor=2),
        event_archive_retention_days=365,
        tags={"memsvc:environment": "prod"},
    ),
}


def config_for(name: str) -> EnvConfig:
    try:
        return ENVIRONMENTS[name]
    except KeyError:
        raise ValueError(f"unknown environment {name!r}; known: {', '.join(ENVIRONMENTS)}") from None
