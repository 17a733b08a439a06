"""The boto3 clients the AWS adapters use, built once per cold start, each with its retry mode.

botocore retries what another attempt can fix (throttling codes, 429, 500/502/503/504,
connection errors and timeouts) with exponential backoff and jitter, and in `standard` and
`adaptive` modes stops retrying when its retry quota is spent (a service that keeps failing
gets fewer retries, not more). It never retries a request the service refused
(`ValidationException`, `ConditionalCheckFailedException`, `TransactionCanceledException` whatever
its reasons, access denied): those are the adapters' to decide (see `memsvc.adapters.aws.errors`).

- DynamoDB, `standard`, 4 attempts (botocore's own default for DynamoDB). Not `adaptive`: its
  client-side rate limiter slows every call of the client once any call is throttled, and one
  hot partition of one tenant must not slow the others.
- KMS, S3 Vectors, EventBridge: `standard`, 3 attempts. They sit on request paths (a data key on
  a cache miss, a search) or behind a stream whose mapping retries the batch anyway.
- Bedrock Runtime: `adaptive`, 1 attempt. Every call goes to the same model under one account
  quota (requests and tokens per minute), so the client-side rate limiter is what is wanted: a
  throttled client paces its requests instead of sending more that will be throttled too. The
  retries are `TitanEmbedder`'s own (it counts every request and throttle for the embedding
  metrics, and stops a batch's queued texts at the first failure); two layers would multiply.
- Bedrock Runtime for entity extraction (`extractor_runtime`): `adaptive`, 5 attempts. It runs in
  the indexer, off the request path, so waiting out a throttle is better than failing the batch;
  what still fails is retried with the stream batch (`BedrockExtractor`).

The clients few requests or functions use (EventBridge, SQS, the judge's and the extractor's
Bedrock Runtime) are created on first use (`LazyClient`): each costs 3-8 ms of a cold start
whose first request most likely never calls it.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import boto3
from botocore.config import Config

__all__ = ["AwsClients", "LazyClient", "RETRIES", "JUDGE_READ_TIMEOUT_SECONDS", "EXTRACTOR_RETRIES", "EXTRACTOR_READ_TIMEOUT_SECONDS"]

# `total_max_attempts` counts the first request (botocore's `max_attempts` counts only retries).
RETRIES: dict[str, dict[str, Any]] = {
    "dynamodb": {"mode": "standard", "total_max_attempts": 4},
    "s3vectors": {"mode": "standard", "total_max_attempts": 3},
    "kms": {"mode": "standard", "total_max_attempts": 3},
    "events": {"mode": "standard", "total_max_attempts": 3},
    "bedrock-runtime": {"mode": "adaptive", "total_max_attempts": 1},
    "sqs": {"mode": "standard", "total_max_attempts": 3},
}
# The same-fact judge (Bedrock Converse) waits at most this long for an answer, then remember
# creates a new memory instead: a short answer from a small model takes well under a second.
JUDGE_READ_TIMEOUT_SECONDS = 4.0
# Entity extraction (Converse, up to 800 output tokens from a small model: a few seconds at most).
EXTRACTOR_RETRIES: dict[str, Any] = {"mode": "adaptive", "total_max_attempts": 5}
EXTRACTOR_READ_TIMEOUT_SECONDS = 20.0


class LazyClient:
    """Stands in for a boto3 client, created by `create` when an attribute is first asked for."""

    # A boto3 session is not thread-safe: its clients are created one at a time.
    _creating = threading.Lock()

    def __init__(self, create: Callable[[], Any]) -> None:
        self._create = create
        self._client: Any = None

    def __getattr__(self, name: str) -> Any:
        if self._client is None:
            with LazyClient._creating:
                if self._client is None:
                    self._client = self._create()
        return getattr(self._client, name)


@dataclass(frozen=True)
class AwsClients:
    """One boto3 client per AWS service the adapters call."""

    dynamodb: Any
    s3vectors: Any
    kms: Any
    events: Any
    bedrock_runtime: Any
    sqs: Any = None  # the remember queue (`wait: false`)
    judge_runtime: Any = None  # bedrock-runtime for the same-fact judge, short timeout; default bedrock_runtime
    extractor_runtime: Any = None  # bedrock-runtime for entity extraction, retrying; default bedrock_runtime

    @classmethod
    def create(cls, region: str, *, embedding_concurrency: int) -> AwsClients:
        session = boto3.session.Session(region_name=region)

        def client(service: str, **config: Any) -> Any:
            return session.client(service, config=Config(retries=dict(RETRIES[service]), **config))

        def on_first_use(service: str, **config: Any) -> LazyClient:
            return LazyClient(lambda: client(service, **config))

        return cls(
            dynamodb=client("dynamodb"),
            s3vectors=client("s3vectors"),
            kms=client("kms"),
            events=on_first_use("events"),
            # One pooled connection per concurrent InvokeModel; a text takes seconds at most.
            bedrock_runtime=client("bedrock-runtime", connect_timeout=3.0, read_timeout=15.0,
                                   max_pool_connections=max(10, embedding_concurrency)),
            sqs=on_first_use("sqs"),
            judge_runtime=on_first_use("bedrock-runtime", connect_timeout=2.0,
                                       read_timeout=JUDGE_READ_TIMEOUT_SECONDS),
            extractor_runtime=LazyClient(lambda: session.client("bedrock-runtime", config=Config(
                retries=dict(EXTRACTOR_RETRIES), connect_timeout=3.0, read_timeout=EXTRACTOR_READ_TIMEOUT_SECONDS))),
        )
