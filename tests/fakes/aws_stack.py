"""The AWS backend, offline: moto for DynamoDB (+ Streams), KMS and S3 Vectors, plus the small
fakes for what moto lacks (QueryVectors, Titan bodies, TTL expiry, stream `userIdentity`).

`AwsStack.drain()` reads the table's real stream records from moto's DynamoDB Streams, puts
them in the shape Lambda delivers (binary values base64, as in the JSON event) and calls the
real `functions.indexer.handler`, retrying from the first reported failure as the event
source mapping does. `AwsStack.expire()` is DynamoDB TTL: it deletes expired rows and marks
their REMOVE records with the service principal, which moto's stream does not do.
`AwsStack.fail()` makes one operation of one client answer with an AWS error (a botocore
`before-call` hook, optionally only for requests it selects), for the failure tests. Writes to
moto's DynamoDB are serialised (`_AtomicWrites`), as DynamoDB's conditional writes are atomic.
"""

from __future__ import annotations

import base64
import json
import os
import threading
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator

import boto3
from botocore.awsrequest import AWSResponse
from moto import mock_aws

from memsvc.adapters.aws.dynamo_store import TTL_ATTRIBUTE, table_definition
from memsvc.adapters.aws.s3vectors_index import NON_FILTERABLE_METADATA_KEYS
from memsvc.bootstrap import AwsApp, build_aws
from memsvc.core.models import to_epoch_us
from memsvc.settings import AwsSettings
from tests.fakes.s3vectors import install_query_vectors_fake
from tests.fakes.titan import install_titan_fake

REGION = "us-east-1"
TABLE = "memsvc-test"
BUCKET = "memsvc-test-vectors"
INDEX = "memories"


class LambdaContext:
    function_name = "memsvc-indexer"
    memory_limit_in_mb = 1024
    invoked_function_arn = f"arn:aws:lambda:{REGION}:123456789012:function:memsvc-indexer"
    aws_request_id = "test-request"

    @staticmethod
    def get_remaining_time_in_millis() -> int:
        return 60_000


@dataclass
class AwsStack:
    app: AwsApp
    clients: dict[str, Any]
    stream_arn: str
    _iterators: dict[str, str | None] = field(default_factory=dict)
    _ttl_deleted: set[tuple[str, str]] = field(default_factory=set)
    _pending: list[dict[str, Any]] = field(default_factory=list)
    invocations: list[dict[str, Any]] = field(default_factory=list)

    def read_stream(self) -> list[dict[str, Any]]:
        """New records from every shard, in order, as Lambda would deliver them."""
        streams = self.clients["dynamodbstreams"]
        shards = streams.describe_stream(StreamArn=self.stream_arn)["StreamDescription"]["Shards"]
        out = []
        for shard in shards:
            shard_id = shard["ShardId"]
            if shard_id not in self._iterators:
                self._iterators[shard_id] = streams.get_shard_iterator(
                    StreamArn=self.stream_arn, ShardId=shard_id, ShardIteratorType="TRIM_HORIZON"
                )["ShardIterator"]
            iterator = self._iterators[shard_id]
            while iterator:
                page = streams.get_records(ShardIterator=iterator, Limit=1000)
                iterator = page.get("NextShardIterator")
                out.extend(self._as_lambda_record(r) for r in page["Records"])
                if not page["Records"]:
                    break
            self._iterators[shard_id] = iterator
        return out

    def _as_lambda_record(self, record: dict[str, Any]) -> dict[str, Any]:
        record = json.loads(json.dumps(record, default=_jsonable))
        record["eventSourceARN"] = self.stream_arn
        keys = record["dynamodb"].get("Keys", {})
        ref = (keys.get("pk", {}).get("S"), keys.get("sk", {}).get("S"))
        if record["eventName"] == "REMOVE" and ref in self._ttl_deleted:
            record["userIdentity"] = {"type": "Service", "principalId": "dynamodb.amazonaws.com"}
        return record

    def drain(self, *, batch_size: int = 100, max_invocations: int = 50) -> int:
        """Deliver every pending stream record to the real indexer handler; returns invocations.
        A reported failure is redelivered from that record on (once per call of drain)."""
        from functions import indexer

        self._pending.extend(self.read_stream())
        calls = 0
        while self._pending and calls < max_invocations:
            batch = self._pending[:batch_size]
            event = {"Records": batch}
            response = indexer.handler(event, LambdaContext())
            calls += 1
            self.invocations.append({"records": len(batch), "response": response})
            failures = [f["itemIdentifier"] for f in response.get("batchItemFailures", [])]
            if failures:
                first = min(int(seq) for seq in failures)
                done = [r for r in batch if int(r["dynamodb"]["SequenceNumber"]) < first]
                self._pending = self._pending[len(done):]
                break
            self._pending = self._pending[len(batch):]
        return calls

    def fail(self, service: str, operation: str, *, code: str, status: int = 500,
             when: Callable[[dict[str, Any]], bool] | None = None) -> InjectedFailure:
        """Answer `operation` calls of `service`'s client with an AWS error (while installed, for
        the calls whose JSON request body `when` accepts). See `InjectedFailure`."""
        return InjectedFailure(self.clients[service], operation, code=code, status=status, when=when)

    def expire(self, now_epoch_seconds: float) -> int:
        """What DynamoDB TTL does (moto never does it): delete rows whose ttl has passed."""
        db = self.clients["dynamodb"]
        deleted = 0
        for page in db.get_paginator("scan").paginate(TableName=TABLE):  # test-only: the fake TTL scans
            for row in page["Items"]:
                ttl = row.get(TTL_ATTRIBUTE)
                if ttl and float(ttl["N"]) <= now_epoch_seconds:
                    db.delete_item(TableName=TABLE, Key={"pk": row["pk"], "sk": row["sk"]})
                    self._ttl_deleted.add((row["pk"]["S"], row["sk"]["S"]))
                    deleted += 1
        return deleted


class InjectedFailure:
    """A botocore `before-call` hook that answers matching calls with an AWS error instead of
    sending them: the adapter under test gets the modelled `ClientError`, as from the service.
    `count` is how many calls it failed; `remove()` uninstalls it."""

    def __init__(self, client: Any, operation: str, *, code: str, status: int,
                 when: Callable[[dict[str, Any]], bool] | None) -> None:
        self._events = client.meta.events
        self._event = f"before-call.{client.meta.service_model.service_id.hyphenize()}.{operation}"
        self._uid = f"injected-failure-{id(self)}"
        self.code, self.status, self.when, self.count = code, status, when, 0
        self._events.register(self._event, self._answer, unique_id=self._uid)

    def _answer(self, params: dict[str, Any], **_: Any):
        raw = params.get("body") or b"{}"
        try:
            body = json.loads(raw.decode() if isinstance(raw, bytes) else raw)
        except ValueError:
            body = {}
        if self.when is not None and not self.when(body):
            return None
        self.count += 1
        message = f"injected {self.code}"
        parsed = {"Error": {"Code": self.code, "Message": message}, "message": message,
                  "ResponseMetadata": {"HTTPStatusCode": self.status, "HTTPHeaders": {}, "RetryAttempts": 0}}
        return AWSResponse(params.get("url", "https://injected.invalid/"), self.status, {}, None), parsed

    def remove(self) -> None:
        self._events.unregister(self._event, unique_id=self._uid)


class _AtomicWrites:
    """DynamoDB applies a conditional write atomically; moto checks and writes without a lock,
    so two threads can both pass `version = :v`. This proxy gives moto DynamoDB's atomicity."""

    _WRITES = {"put_item", "update_item", "delete_item", "transact_write_items", "batch_write_item"}

    def __init__(self, client: Any) -> None:
        self._client = client
        self._lock = threading.Lock()

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self._client, name)
        if name not in self._WRITES:
            return attr

        def locked(*args: Any, **kwargs: Any) -> Any:
            with self._lock:
                return attr(*args, **kwargs)

        return locked


def _jsonable(value: Any) -> Any:
    if isinstance(value, (bytes, bytearray)):
        return base64.b64encode(bytes(value)).decode()
    if hasattr(value, "isoformat"):
        return value.timestamp()
    return str(value)


@contextmanager
def aws_stack(*, dimension: int = 64, embedder: Any = None, clock: Any = None) -> Iterator[AwsStack]:
    saved = {k: os.environ.get(k) for k in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_DEFAULT_REGION")}
    os.environ.update(AWS_ACCESS_KEY_ID="testing", AWS_SECRET_ACCESS_KEY="testing", AWS_DEFAULT_REGION=REGION)
    try:
        with mock_aws():
            clients = {name: boto3.client(name, region_name=REGION)
                       for name in ("dynamodb", "s3vectors", "kms", "bedrock-runtime")}
            # botocore now routes stream calls to an account-based host moto 5.2 doesn't serve
            clients["dynamodbstreams"] = boto3.client(
                "dynamodbstreams", region_name=REGION, endpoint_url=f"https://streams.dynamodb.{REGION}.amazonaws.com")
            table = clients["dynamodb"].create_table(**table_definition(TABLE))["TableDescription"]
            clients["dynamodb"].update_time_to_live(
                TableName=TABLE, TimeToLiveSpecification={"Enabled": True, "AttributeName": TTL_ATTRIBUTE})
            key_id = clients["kms"].create_key(Description="memsvc test")["KeyMetadata"]["KeyId"]
            clients["s3vectors"].create_vector_bucket(vectorBucketName=BUCKET)
            clients["s3vectors"].create_index(
                vectorBucketName=BUCKET, indexName=INDEX, dataType="float32", dimension=dimension,
                distanceMetric="cosine",
                metadataConfiguration={"nonFilterableMetadataKeys": list(NON_FILTERABLE_METADATA_KEYS)},
            )
            clients["dynamodb"] = _AtomicWrites(clients["dynamodb"])
            install_query_vectors_fake(clients["s3vectors"])
            titan = install_titan_fake(clients["bedrock-runtime"],
                                       dimension=dimension if dimension in (256, 512, 1024) else 1024)
            settings = AwsSettings(region=REGION, table_name=TABLE, vector_bucket=BUCKET, vector_index=INDEX,
                                   kms_key_id=key_id, embedding_dimension=dimension)
            app = build_aws(settings, clients=clients, embedder=embedder, clock=clock)
            from functions import runtime

            runtime.set_app(app)
            stack = AwsStack(app=app, clients=clients, stream_arn=table["LatestStreamArn"])
            stack.titan = titan  # type: ignore[attr-defined]
            try:
                yield stack
            finally:
                runtime.set_app(None)
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def epoch(dt) -> float:
    return to_epoch_us(dt) / 1_000_000
