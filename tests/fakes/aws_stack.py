"""The AWS backend, offline: moto for DynamoDB (+ Streams; the item table and the keyword index's
table, whose `DynamoKeywordIndex` is `AwsStack.keywords` and which holds the knowledge graph's
`DynamoGraphStore` too), KMS, S3 Vectors, EventBridge and SQS, plus the small fakes for what moto
lacks (QueryVectors, Titan bodies, Converse answers for the same-fact judge and the entity
extractor, TTL expiry, stream `userIdentity`).

`AwsStack.drain()` reads the table's real stream records from moto's DynamoDB Streams, puts
them in the shape Lambda delivers (binary values base64, as in the JSON event) and hands them
to both stream consumers, as two independent event source mappings would: the real
`functions.indexer.handler` and the real `functions.timeline.handler`. Each consumer has its own
pending records and retries from its own first reported failure, as its mapping does (no
filter is applied: the handlers skip what the mappings' filters would drop).

The timeline publishes to a moto EventBridge bus (`EVENT_BUS`); a rule on it matching
`{"source": ["memsvc"]}` sends every event to an SQS queue, and `AwsStack.published()` reads
them back as the EventBridge envelopes a target receives. `AwsStack.expire()` is DynamoDB TTL:
it deletes expired rows and marks their REMOVE records with the service principal, which moto's
stream does not do.
`AwsStack.fail()` makes one operation of one client answer with an AWS error (a botocore
`before-call` hook, optionally only for requests it selects), for the failure tests. Writes to
moto's DynamoDB are serialised (`_AtomicWrites`), as DynamoDB's conditional writes are atomic.

moto's `TransactWriteItems` snapshots a whole table (a deep copy, once per action: up to 100 a
call) to roll back a cancelled transaction, and rolls back by replacing the table object. The
event log writes one transaction per batch of events, so on a table that grows through a test
session that is seconds per call and gigabytes of copies. While a stack is up,
`_item_rollback_transactions` keeps moto's transaction logic and answers but snapshots only the
items the transaction touches (and the stream's length), and rolls back in place. Likewise
moto's EventBridge compiles the same eight JSONPath expressions (with a fresh parser) for every
event it hands a target; `_cached_jsonpath` keeps the compiled ones.

Building a stack is most of what an AWS test costs, and two things made it slow without
testing anything. moto sets boto3's default session aside, so `boto3.client` made a session
per stack, which loaded and parsed every client's service model and the endpoint rules again;
the stacks' clients now come from one `_session()`. moto serialises each DynamoDB attribute
value of a response through a generic, shape-driven path (`_fast_attribute_values` writes the
same bytes directly: a third of a stream-heavy test's time). And moto's KMS generates an RSA-2048 key
pair for every key it creates, even a symmetric one, which never uses it (`_no_rsa_for_symmetric_keys`).
moto answers a Query by sorting the whole table first (`_partition_queries` hands it the asked
partition: the live AWS server's tables grow through the session).
"""

from __future__ import annotations

import base64
import copy
import functools
import json
import os
import threading
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator
from unittest import mock

import boto3
from botocore.awsrequest import AWSResponse
from botocore.config import Config
from moto import mock_aws

from memsvc.adapters.aws.clients import RETRIES, AwsClients
from memsvc.adapters.aws.dynamo_keywords import DynamoKeywordIndex, keyword_table_definition
from memsvc.adapters.aws.dynamo_store import TTL_ATTRIBUTE, table_definition
from memsvc.adapters.aws.s3vectors_index import NON_FILTERABLE_METADATA_KEYS
from memsvc.bootstrap import AwsApp, build_aws
from memsvc.core.models import to_epoch_us
from memsvc.settings import AwsSettings
from tests.fakes.converse import ConverseFake, install_converse_fake
from tests.fakes.s3vectors import S3VectorsFake, install_query_vectors_fake
from tests.fakes.titan import TitanFake, install_titan_fake

REGION = "us-east-1"
TABLE = "memsvc-test"
KEYWORD_TABLE = "memsvc-test-keywords"
BUCKET = "memsvc-test-vectors"
INDEX = "memories"
EVENT_BUS = "memsvc-test-events"
EVENT_RULE = "memsvc-test-all-events"
EVENT_QUEUE = "memsvc-test-events-tap"
REMEMBER_QUEUE = "memsvc-test-remember"
REMEMBER_DLQ = "memsvc-test-remember-dlq"
CONSUMERS = ("indexer", "timeline")  # the table stream's event source mappings


class LambdaContext:
    function_name = "memsvc-indexer"
    memory_limit_in_mb = 1024
    invoked_function_arn = f"arn:aws:lambda:{REGION}:123456789012:function:memsvc-indexer"
    aws_request_id = "test-request"

    @staticmethod
    def get_remaining_time_in_millis() -> int:
        return 60_000


class TimelineContext(LambdaContext):
    function_name = "memsvc-timeline"
    invoked_function_arn = f"arn:aws:lambda:{REGION}:123456789012:function:memsvc-timeline"
    aws_request_id = "test-timeline-request"


def _handlers() -> dict[str, tuple[Callable[..., dict[str, Any]], type[LambdaContext]]]:
    from functions import indexer, timeline

    return {"indexer": (indexer.handler, LambdaContext), "timeline": (timeline.handler, TimelineContext)}


@dataclass
class AwsStack:
    app: AwsApp
    clients: AwsClients  # the app's clients, on moto, with the fakes installed
    streams: Any  # a `dynamodbstreams` client, for the table's stream records
    sqs: Any  # an `sqs` client, for the queue the bus's rule feeds
    stream_arn: str
    s3vectors: S3VectorsFake
    titan: TitanFake
    keywords: DynamoKeywordIndex  # on the keywords table, with the app's DynamoDB client
    queue_url: str = ""
    converse: ConverseFake | None = None  # the same-fact judge's model
    remember_queue_url: str = ""
    remember_dlq_url: str = ""
    ttl_reader: Any = None  # the DynamoDB client `expire` scans through (default: the app's)
    build_app: Callable[[], AwsApp] | None = None  # what a Lambda's cold start builds (`cold_start`)
    _iterators: dict[str, str | None] = field(default_factory=dict)
    _ttl_deleted: set[tuple[str, str]] = field(default_factory=set)
    # Per consumer: the records its mapping has yet to deliver, and its invocations so far.
    pending: dict[str, list[dict[str, Any]]] = field(default_factory=lambda: {c: [] for c in CONSUMERS})
    calls: dict[str, list[dict[str, Any]]] = field(default_factory=lambda: {c: [] for c in CONSUMERS})
    _published: list[dict[str, Any]] = field(default_factory=list)

    def cold_start(self) -> None:
        """The Lambdas' next invocations start in a new execution environment, as after one that
        died (a timeout, out of memory): their adapters, the indexer's run included, built anew."""
        from functions import runtime

        runtime.set_app(self.build_app())

    @property
    def invocations(self) -> list[dict[str, Any]]:
        """The indexer's invocations: `{"records": n, "response": ...}` each."""
        return self.calls["indexer"]

    @property
    def timeline_invocations(self) -> list[dict[str, Any]]:
        return self.calls["timeline"]

    @property
    def publisher(self) -> Any:
        """The timeline's `EventBridgePublisher` (tests pin its backoff through `_sleep`)."""
        return self.app.timeline.publisher

    def read_stream(self, *, queue_for: tuple[str, ...] = ("timeline",)) -> list[dict[str, Any]]:
        """New records from every shard, in order, as Lambda would deliver them.

        The caller takes them for the indexer (deliver them by hand, or through `_pending`);
        they are also queued for the consumers in `queue_for`, by default the timeline, whose
        own mapping would see every record too. `queue_for=()` takes them for nobody else."""
        streams = self.streams
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
        for consumer in queue_for:
            self.pending[consumer].extend(out)
        return out

    def _as_lambda_record(self, record: dict[str, Any]) -> dict[str, Any]:
        record = json.loads(json.dumps(record, default=_jsonable))
        record["eventSourceARN"] = self.stream_arn
        keys = record["dynamodb"].get("Keys", {})
        ref = (keys.get("pk", {}).get("S"), keys.get("sk", {}).get("S"))
        if record["eventName"] == "REMOVE" and ref in self._ttl_deleted:
            record["userIdentity"] = {"type": "Service", "principalId": "dynamodb.amazonaws.com"}
        return record

    def drain(self, *, batch_size: int = 100, max_invocations: int = 50,
              consumers: tuple[str, ...] = CONSUMERS) -> int:
        """Deliver every pending stream record to each of `consumers` (default: the indexer and
        the timeline), as their event source mappings would; returns the invocations made.

        New records are queued for every consumer, drained or not (a consumer left out only
        lags). Each consumer gets batches of its own pending records; when a handler reports
        failures, that consumer stops at the first failed record, which its next drain delivers
        again, as Lambda does after `ReportBatchItemFailures`."""
        unknown = set(consumers) - set(CONSUMERS)
        if unknown:
            raise ValueError(f"unknown consumers {sorted(unknown)}; known: {CONSUMERS}")
        self.read_stream(queue_for=CONSUMERS)
        handlers = _handlers()
        total = 0
        for consumer in consumers:
            handler, context = handlers[consumer]
            calls = 0
            while self.pending[consumer] and calls < max_invocations:
                batch = self.pending[consumer][:batch_size]
                response = handler({"Records": batch}, context())
                calls += 1
                self.calls[consumer].append({"records": len(batch), "response": response})
                if consumer == "timeline":
                    self._collect_published()
                failures = [f["itemIdentifier"] for f in response.get("batchItemFailures", [])]
                if failures:
                    first = min(int(seq) for seq in failures)
                    done = [r for r in batch if int(r["dynamodb"]["SequenceNumber"]) < first]
                    self.pending[consumer] = self.pending[consumer][len(done):]
                    break
                self.pending[consumer] = self.pending[consumer][len(batch):]
            total += calls
        return total

    def run_remember_jobs(self, *, max_messages: int = 10) -> dict[str, Any]:
        """What the remember queue's event source mapping does: receive a batch and invoke the
        real `functions.remember.handler` with it (the SQS event shape), delete what it did not
        report as failed. Failed messages stay for a later receive (their visibility timeout is
        0 here, so the next call sees them again)."""
        from functions import remember

        page = self.sqs.receive_message(QueueUrl=self.remember_queue_url, MaxNumberOfMessages=max_messages,
                                        AttributeNames=["ApproximateReceiveCount"], WaitTimeSeconds=0)
        messages = page.get("Messages") or []
        if not messages:
            return {"batchItemFailures": [], "records": 0}
        records = [{"messageId": m["MessageId"], "receiptHandle": m["ReceiptHandle"], "body": m["Body"],
                    "attributes": m.get("Attributes", {}), "eventSource": "aws:sqs"} for m in messages]
        response = remember.handler({"Records": records}, LambdaContext())
        failed = {f["itemIdentifier"] for f in response["batchItemFailures"]}
        for m in messages:
            if m["MessageId"] in failed:
                self.sqs.change_message_visibility(QueueUrl=self.remember_queue_url, ReceiptHandle=m["ReceiptHandle"],
                                                   VisibilityTimeout=0)
            else:
                self.sqs.delete_message(QueueUrl=self.remember_queue_url, ReceiptHandle=m["ReceiptHandle"])
        return {**response, "records": len(records)}

    def remember_queue_bodies(self) -> list[str]:
        """The bodies of the messages now on the remember queue (made visible again at once)."""
        page = self.sqs.receive_message(QueueUrl=self.remember_queue_url, MaxNumberOfMessages=10, WaitTimeSeconds=0)
        messages = page.get("Messages") or []
        for m in messages:
            self.sqs.change_message_visibility(QueueUrl=self.remember_queue_url, ReceiptHandle=m["ReceiptHandle"],
                                               VisibilityTimeout=0)
        return [m["Body"] for m in messages]

    def published(self) -> list[dict[str, Any]]:
        """Every event published to the bus so far, in arrival order, as the EventBridge
        envelope a rule's target receives (`source`, `detail-type`, `time`, `detail`, ...)."""
        self._collect_published()
        return list(self._published)

    def _collect_published(self) -> None:
        """Move what the rule delivered from the queue to `_published`. `drain` does it after each
        timeline invocation: moto's SQS walks the whole queue for every message it sends or
        receives, so the queue is kept short."""
        sqs = self.sqs
        while True:
            page = sqs.receive_message(QueueUrl=self.queue_url, MaxNumberOfMessages=10, WaitTimeSeconds=0)
            messages = page.get("Messages") or []
            if not messages:
                return
            for message in messages:
                self._published.append(json.loads(message["Body"]))
            sqs.delete_message_batch(QueueUrl=self.queue_url, Entries=[
                {"Id": str(n), "ReceiptHandle": m["ReceiptHandle"]} for n, m in enumerate(messages)])

    def fail(self, service: str, operation: str, *, code: str, status: int = 500,
             when: Callable[[dict[str, Any]], bool] | None = None) -> InjectedFailure:
        """Answer `operation` calls of `service`'s client with an AWS error (while installed, for
        the calls whose JSON request body `when` accepts). See `InjectedFailure`."""
        return InjectedFailure(getattr(self.clients, service.replace("-", "_")), operation, code=code, status=status,
                               when=when)

    def expire(self, now_epoch_seconds: float) -> int:
        """What DynamoDB TTL does (moto never does it): delete rows whose ttl has passed."""
        db = self.ttl_reader or self.clients.dynamodb
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
    so two threads can both pass `version = :v`. This proxy gives moto DynamoDB's atomicity.
    Reads take the lock too: moto rolls a cancelled transaction back by swapping the table
    objects (`_item_rollback_transactions` then puts them back), and a read in between would
    find no table; DynamoDB never shows a reader a half-undone transaction."""

    _WRITES = {"put_item", "update_item", "delete_item", "transact_write_items", "batch_write_item",
               "get_item", "query", "batch_get_item"}

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


class _TableMarker:
    """What moto's transaction takes for its copy of a table while `_item_rollback_transactions`
    is installed: restoring it means "roll back the items this transaction touched"."""

    def __init__(self, table: Any) -> None:
        self.table = table


class _CopyDuringTransactions:
    """Stands in for the `copy` module inside `moto.dynamodb.models`: inside a transaction, the
    deep copy of a whole table becomes a `_TableMarker`; everything else is the real `copy`."""

    def __init__(self, table_type: type) -> None:
        self._table_type = table_type
        self.active = threading.local()

    def __getattr__(self, name: str) -> Any:
        return getattr(copy, name)

    def deepcopy(self, value: Any, memo: Any = None) -> Any:
        if getattr(self.active, "on", False) and isinstance(value, self._table_type):
            return _TableMarker(value)
        return copy.deepcopy(value, memo)


@contextmanager
def _item_rollback_transactions() -> Iterator[None]:
    """Install, for the duration, moto's `transact_write_items` with item-level snapshots (see the
    module docstring). moto's code runs unchanged; when it rolls back (it puts its "copies" back
    in `tables`), the touched items are restored from their own copies and the stream is cut back
    to its length before the call, in place. What it answers and what it leaves are the same."""
    from moto.dynamodb import models as ddb_models
    from moto.dynamodb.models.dynamo_type import DynamoType
    from moto.dynamodb.models.table import Table

    backend_type = ddb_models.DynamoDBBackend
    original = backend_type.transact_write_items
    shim = _CopyDuringTransactions(Table)

    def snapshot(backend: Any, transact_items: list[dict[str, Any]]) -> tuple[list, list]:
        items, streams, seen = [], [], set()
        for entry in transact_items:
            try:
                _, op = next(iter(entry.items()))
                table = backend.tables[op["TableName"]]
                attrs = op["Item"] if "Item" in op else op["Key"]
                hash_value = DynamoType(attrs[table.hash_key_attr])
                range_value = DynamoType(attrs[table.range_key_attr]) if table.range_key_attr else None
            except (KeyError, TypeError, AttributeError, StopIteration):
                continue  # moto refuses this action before writing it
            items.append((table, hash_value, range_value, copy.deepcopy(table.get_item(hash_value, range_value))))
            if table.stream_shard is not None and id(table) not in seen:
                seen.add(id(table))
                streams.append((table.stream_shard, len(table.stream_shard.items)))
        return items, streams

    def transact_write_items(self: Any, transact_items: list[dict[str, Any]]) -> Any:
        items, streams = snapshot(self, transact_items)
        shim.active.on = True
        try:
            return original(self, transact_items)
        finally:
            shim.active.on = False
            markers = {name: t for name, t in self.tables.items() if isinstance(t, _TableMarker)}
            if markers:  # moto rolled back: put the tables back, then undo their writes
                for name, marker in markers.items():
                    self.tables[name] = marker.table
                for table, hash_value, range_value, before in reversed(items):
                    if range_value is None:
                        table.items.pop(hash_value, None)
                        if before is not None:
                            table.items[hash_value] = before
                    elif before is not None:
                        table.items[hash_value][range_value] = before
                    elif hash_value in table.items:  # (a defaultdict: do not make empty partitions)
                        table.items[hash_value].pop(range_value, None)
                for shard, length in streams:
                    del shard.items[length:]

    saved_copy = ddb_models.copy
    ddb_models.copy = shim
    backend_type.transact_write_items = transact_write_items
    try:
        yield
    finally:
        backend_type.transact_write_items = original
        ddb_models.copy = saved_copy


@functools.cache
def _session() -> boto3.Session:
    """The stacks' one boto3 session: it keeps the service models it has loaded. Each client
    copies the session's event hooks, so what a test installs on one stack's clients (fakes,
    injected failures) never reaches another stack's."""
    return boto3.Session(region_name=REGION)


def moto_client(service: str, **kwargs: Any) -> Any:
    """A boto3 client from the stacks' one session, for tests that run moto without a stack."""
    return _session().client(service, region_name=REGION, **kwargs)


class SerialisedClient:
    """A client whose every call runs under one lock: moto's tables are not safe for concurrent use
    (a transaction deep-copies the table while other threads write); DynamoDB is, and applies each
    request atomically. The requests of concurrent writers still interleave."""

    def __init__(self, client: Any) -> None:
        self._client = client
        self._lock = threading.Lock()

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self._client, name)
        if not callable(attr):
            return attr

        def locked(*args: Any, **kwargs: Any) -> Any:
            with self._lock:
                return attr(*args, **kwargs)

        return locked


@contextmanager
def keyword_table_on_moto(table: str) -> Iterator[SerialisedClient]:
    """The keyword index's table (which the graph shares) on moto, with item-level transaction
    rollback, reached through a `SerialisedClient`, for tests that run an adapter without a stack."""
    with mock.patch.dict(os.environ, {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing"}):
        with mock_aws(), _item_rollback_transactions(), _partition_queries():
            client = SerialisedClient(moto_client("dynamodb"))
            client.create_table(**keyword_table_definition(table))
            yield client


@contextmanager
def _no_rsa_for_symmetric_keys() -> Iterator[None]:
    """moto's KMS `Key` generates an RSA-2048 private key whatever its spec (~0.1 s, often more),
    and only asymmetric keys ever use it (sign, verify, GetPublicKey); a symmetric key encrypts
    with its own key material. A symmetric key gets no pair; any other spec gets one as before."""
    from moto.kms import models as kms_models

    original = kms_models.generate_private_key

    def generate(key_spec: str) -> Any:
        return None if key_spec == "SYMMETRIC_DEFAULT" else original(key_spec)

    kms_models.generate_private_key = generate
    try:
        yield
    finally:
        kms_models.generate_private_key = original


class _NotWireForm(Exception):
    pass


@contextmanager
def _fast_attribute_values() -> Iterator[None]:
    """Serialise DynamoDB `AttributeValue`s in moto's responses directly instead of through its
    generic, shape-driven serialiser (which probes all ten members of every attribute value
    through alias lookups: ~1 ms per item, 2-5 ms per stream record, most of this server's CPU).
    The output is what the generic path produces: `S`/`N`/`SS`/`NS` strings, `BOOL`/`NULL` as
    is, `B`/`BS` through the serialiser's own base64, `M`/`L` recursively; anything else takes
    the generic path."""
    from moto.core import serialize

    generic = serialize.BaseJSONSerializer._serialize_type_structure

    def wire(serializer, value):
        if isinstance(value, dict) and len(value) == 1:
            ((kind, x),) = value.items()
            if kind in ("S", "N") and isinstance(x, str):
                return {kind: x}
            if kind in ("BOOL", "NULL") and isinstance(x, bool):
                return {kind: x}
            if kind == "B" and isinstance(x, (bytes, str)):
                return {kind: serializer._base64(x)}
            if kind in ("SS", "NS") and isinstance(x, list) and all(isinstance(v, str) for v in x):
                return {kind: list(x)}
            if kind == "BS" and isinstance(x, list) and all(isinstance(v, (bytes, str)) for v in x):
                return {kind: [serializer._base64(v) for v in x]}
            if kind == "M" and isinstance(x, dict):
                return {kind: {k: wire(serializer, v) for k, v in x.items()}}
            if kind == "L" and isinstance(x, list):
                return {kind: [wire(serializer, v) for v in x]}
        raise _NotWireForm

    def serialize_structure(self, serialized, value, shape, key):
        if key and shape.name == "AttributeValue":
            try:
                self._default_serialize(serialized, wire(self, value), shape, key)
                return
            except _NotWireForm:
                pass
        generic(self, serialized, value, shape, key)

    serialize.BaseJSONSerializer._serialize_type_structure = serialize_structure
    try:
        yield
    finally:
        serialize.BaseJSONSerializer._serialize_type_structure = generic


@contextmanager
def _partition_queries() -> Iterator[None]:
    """moto answers a Query from `Table.all_items()`, every item of the table sorted by its key
    (comparing `DynamoType`s, which convert their value on every comparison), and then keeps
    those of the asked partition: on tables that grow through a test, or through the session on
    the live AWS server, that sort is most of a query's time. While a query runs, `all_items`
    hands it only the asked partition's items (a table query), or every item unsorted (an index
    query, which sorts what it keeps by the index's key and the table's, a total order). moto's
    query filters and sorts them as before: what it answers is unchanged."""
    from moto.dynamodb.models.table import Table

    original_query, original_all_items = Table.query, Table.all_items
    asked = threading.local()

    def query(self: Any, hash_key: Any, *args: Any, **kwargs: Any) -> Any:
        index_name = args[6] if len(args) > 6 else kwargs.get("index_name")
        asked.query = (self, hash_key, index_name)
        try:
            return original_query(self, hash_key, *args, **kwargs)
        finally:
            asked.query = None

    def all_items(self: Any) -> list[Any]:
        table, hash_key, index_name = getattr(asked, "query", None) or (None, None, None)
        if table is not self:
            return original_all_items(self)
        if index_name is not None:
            return [item for partition in self.items.values()
                    for item in (partition.values() if self.range_key_attr else (partition,))]
        if hash_key is None or not self.range_key_attr:
            return original_all_items(self)
        return list(self.items.get(hash_key, {}).values())

    Table.query, Table.all_items = query, all_items
    try:
        yield
    finally:
        Table.query, Table.all_items = original_query, original_all_items


@contextmanager
def _cached_jsonpath() -> Iterator[None]:
    """moto's EventBridge parses its fixed input paths (`$.detail`, `$.source`, ...) anew for every
    event and target, ~10 ms each time; compiled expressions are immutable, so keep them."""
    import jsonpath_ng.ext

    original = jsonpath_ng.ext.parse
    jsonpath_ng.ext.parse = functools.lru_cache(maxsize=256)(original)
    try:
        yield
    finally:
        jsonpath_ng.ext.parse = original


def _jsonable(value: Any) -> Any:
    if isinstance(value, (bytes, bytearray)):
        return base64.b64encode(bytes(value)).decode()
    if hasattr(value, "isoformat"):
        return value.timestamp()
    return str(value)


@contextmanager
def aws_stack(*, dimension: int = 64, embedder: Any = None, clock: Any = None,
              default_tenant: str | None = None) -> Iterator[AwsStack]:
    fake_credentials = {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing", "AWS_DEFAULT_REGION": REGION}
    with mock.patch.dict(os.environ, fake_credentials):
        with mock_aws(), _item_rollback_transactions(), _cached_jsonpath(), _no_rsa_for_symmetric_keys(), \
                _fast_attribute_values(), _partition_queries():
            session = _session()
            clients = {name: session.client(name, region_name=REGION, config=Config(retries=RETRIES[name]))
                       for name in ("dynamodb", "s3vectors", "kms", "bedrock-runtime", "events")}
            sqs = session.client("sqs", region_name=REGION)
            # botocore now routes stream calls to an account-based host moto 5.2 doesn't serve
            streams = session.client(
                "dynamodbstreams", region_name=REGION, endpoint_url=f"https://streams.dynamodb.{REGION}.amazonaws.com")
            table = clients["dynamodb"].create_table(**table_definition(TABLE))["TableDescription"]
            clients["dynamodb"].update_time_to_live(
                TableName=TABLE, TimeToLiveSpecification={"Enabled": True, "AttributeName": TTL_ATTRIBUTE})
            clients["dynamodb"].create_table(**keyword_table_definition(KEYWORD_TABLE))
            key_id = clients["kms"].create_key(Description="memsvc test")["KeyMetadata"]["KeyId"]
            # The one KMS key exports may be sealed under (`export_kms_key_arns`).
            export_key_arn = clients["kms"].create_key(Description="memsvc exports")["KeyMetadata"]["Arn"]
            clients["s3vectors"].create_vector_bucket(vectorBucketName=BUCKET)
            clients["s3vectors"].create_index(
                vectorBucketName=BUCKET, indexName=INDEX, dataType="float32", dimension=dimension,
                distanceMetric="cosine",
                metadataConfiguration={"nonFilterableMetadataKeys": list(NON_FILTERABLE_METADATA_KEYS)},
            )
            queue_url = _event_tap(clients["events"], sqs)
            remember_dlq_url = sqs.create_queue(QueueName=REMEMBER_DLQ)["QueueUrl"]
            remember_dlq_arn = sqs.get_queue_attributes(QueueUrl=remember_dlq_url, AttributeNames=["QueueArn"])[
                "Attributes"]["QueueArn"]
            remember_queue_url = sqs.create_queue(QueueName=REMEMBER_QUEUE, Attributes={
                "RedrivePolicy": json.dumps({"deadLetterTargetArn": remember_dlq_arn, "maxReceiveCount": "5"})})["QueueUrl"]
            s3vectors = install_query_vectors_fake(clients["s3vectors"])
            titan = install_titan_fake(clients["bedrock-runtime"],
                                       dimension=dimension if dimension in (256, 512, 1024) else 1024)
            converse = install_converse_fake(clients["bedrock-runtime"])
            aws = AwsClients(dynamodb=_AtomicWrites(clients["dynamodb"]), s3vectors=clients["s3vectors"],
                             kms=clients["kms"], events=clients["events"], bedrock_runtime=clients["bedrock-runtime"],
                             sqs=sqs)
            settings = AwsSettings(region=REGION, table_name=TABLE, keyword_table_name=KEYWORD_TABLE,
                                   vector_bucket=BUCKET, vector_index=INDEX, kms_key_id=key_id,
                                   embedding_dimension=dimension, event_bus_name=EVENT_BUS,
                                   default_tenant=default_tenant, remember_queue_url=remember_queue_url,
                                   export_kms_key_arns=(export_key_arn,))
            app = build_aws(settings, clients=aws, embedder=embedder, clock=clock)
            from functions import runtime

            runtime.set_app(app)
            stack = AwsStack(app=app, clients=aws, streams=streams, sqs=sqs, stream_arn=table["LatestStreamArn"],
                             s3vectors=s3vectors, titan=titan,
                             keywords=app.keywords,
                             queue_url=queue_url, converse=converse, remember_queue_url=remember_queue_url,
                             remember_dlq_url=remember_dlq_url,
                             build_app=lambda: build_aws(settings, clients=aws, embedder=embedder, clock=clock))
            try:
                yield stack
            finally:
                runtime.set_app(None)


def _event_tap(events: Any, sqs: Any) -> str:
    """The bus, and a rule sending every memsvc event on it to a queue the tests read; the URL."""
    events.create_event_bus(Name=EVENT_BUS)
    queue_url = sqs.create_queue(QueueName=EVENT_QUEUE)["QueueUrl"]
    queue_arn = sqs.get_queue_attributes(QueueUrl=queue_url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
    events.put_rule(Name=EVENT_RULE, EventBusName=EVENT_BUS, EventPattern=json.dumps({"source": ["memsvc"]}))
    events.put_targets(Rule=EVENT_RULE, EventBusName=EVENT_BUS, Targets=[{"Id": "tap", "Arn": queue_arn}])
    return queue_url


def epoch(dt) -> float:
    return to_epoch_us(dt) / 1_000_000
