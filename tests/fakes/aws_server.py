"""`memsvc serve`, but on the AWS backend, offline: the same HTTP API (`memsvc.local_server`) in
front of `build_aws(...)` on moto, inside `tests.fakes.aws_stack.aws_stack(...)`.

    python -m tests.fakes.aws_server --port 8001 --data-dir /tmp/aws-data

The `live_server` fixture (tests/conftest.py) runs it as the `aws` backend of the HTTP tests.

What runs:

- The router, the service layer and every AWS adapter (`memsvc.adapters.aws.*`) are the
  production code; their boto3 clients talk to moto's in-process DynamoDB (+ Streams; the item
  table and the keyword index's table), KMS and S3 Vectors, with the fakes of `aws_stack` for
  what moto lacks (QueryVectors: exact cosine and the real filter operators; stream
  `userIdentity` for TTL deletes).
- The stream consumers are the real Lambdas: a thread calls `AwsStack.drain()` every ~0.2 s,
  which reads the table's records from moto's DynamoDB Streams and hands them, shaped as
  Lambda's event, to `functions.indexer.handler` and to `functions.timeline.handler`, each with
  its own position (what two event source mappings do). The timeline publishes to a moto
  EventBridge bus.
- The remember queue (`wait: false`) is drained by a thread calling `AwsStack.run_remember_jobs()`
  every ~0.2 s: SQS (moto) -> the real `functions.remember.handler`, as its event source mapping.
- DynamoDB TTL is a thread calling `AwsStack.expire(now)` every ~1 s (moto never expires
  anything). Its REMOVE records carry the TTL service identity, as on AWS. As on AWS, reads hide
  an expired item from the moment it expires, whenever TTL gets to delete it.
- The embedder is the local MiniLM model (`MiniLMEmbedder`, 384 dims), not the Titan fake: the
  backend (storage, streams, vector index, keys) is what this server puts under test, and the
  semantic scenarios need a real model to rank by meaning. Titan (request and response bodies,
  retries, the embedding cache) is covered by its own tests, `tests/aws/test_titan.py`.
- Bearer tokens are verified with `LocalIssuer(<data-dir>/keys)` (the JWT authorizer's job on
  AWS), so the tokens the tests mint for `memsvc serve` work here the same way.
- SIGTERM (or SIGINT) shuts down cleanly: uvicorn drains the requests, the two threads stop,
  moto is torn down, exit status 0.

What this process changes in moto (none of it changes an answer: the aws contract and Lambda
tests pass with them installed, and GetItem/BatchGetItem/Query/Scan/GetRecords responses were
compared equal with and without them):

- moto's backends are not thread-safe (a Query on an index iterates the whole table while
  another thread may insert into it; the QueryVectors fake iterates the index while the indexer
  writes to it). Real services are, so every call into moto is serialised by one lock
  (`_serialise_moto`). Conditional writes keep their own atomicity (`aws_stack._AtomicWrites`).
- Speed, so that the doubled HTTP suite stays within the test budget: moto's response
  serialiser probes every member of every DynamoDB attribute value (`aws_stack`'s
  `_fast_attribute_values`, which every stack installs, writes them directly, byte for byte the
  same); moto's Query sorts the whole table before
  looking at it (`_fast_table_queries` hands it the partition, or for an index the unsorted
  table; the query orders its results itself); the TTL thread's Scan reads the due rows from
  moto's table instead of deep-copying and serialising every row every second (`_DueRowsScan`;
  the deletes still go through DeleteItem and the stream).

`mock_aws` patches botocore process-wide; `_check_mock_is_global` proves, before serving, that
a request thread reaches moto. All state lives in this process: nothing survives a restart,
and the data dir holds only the token keys.
"""

from __future__ import annotations

import argparse
import logging
import signal
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

log = logging.getLogger("memsvc.aws_server")

DRAIN_INTERVAL = 0.2  # the stream -> the indexer and timeline Lambdas
EXPIRE_INTERVAL = 1.0  # DynamoDB TTL


class _Shutdown(Exception):
    """Raised by the SIGTERM/SIGINT handler to unwind the main thread through every `finally`."""


def _every(interval: float, work, stop: threading.Event, name: str) -> threading.Thread:
    def loop() -> None:
        while not stop.wait(interval):
            try:
                work()
            except Exception:  # a failed cycle is retried on the next tick, as Lambda retries
                log.exception("%s cycle failed", name)

    thread = threading.Thread(target=loop, name=name, daemon=True)
    thread.start()
    return thread


def _fast_table_queries() -> None:
    """moto's `Table.query` starts from `all_items()`, which sorts the whole table on every
    call (O(n log n) comparisons of moto's attribute objects: ~0.1 s per query once the session's
    table has a few thousand rows), and then sorts what it keeps anyway. Within a query this
    hands it the candidates unsorted: a base-table query only its partition, an index query every
    item. What the query returns is unchanged (it orders its results itself, by the full key).
    Everything else (a Scan, whose paging relies on that order) still gets the sorted list."""
    import inspect

    from moto.dynamodb.models.table import Table

    sorted_all_items = Table.all_items
    query = Table.query
    signature = inspect.signature(query)
    scope = threading.local()

    def all_items(self):
        if not getattr(scope, "active", False):
            return sorted_all_items(self)
        if scope.partition is not None:
            bucket = self.items.get(scope.partition)
            if bucket is None:
                return []
            return list(bucket.values()) if self.range_key_attr else [bucket]
        if self.range_key_attr:
            return [item for bucket in self.items.values() for item in bucket.values()]
        return list(self.items.values())

    def query_unsorted(self, *args, **kwargs):
        bound = signature.bind(self, *args, **kwargs)
        scope.partition = None if bound.arguments.get("index_name") else bound.arguments.get("hash_key")
        scope.active = True
        try:
            return query(self, *args, **kwargs)
        finally:
            scope.active = False

    Table.all_items = all_items
    Table.query = query_unsorted


def _serialise_moto(clients: list) -> threading.RLock:
    """Every API call of these boto3 clients (and so every moto backend access, including the
    QueryVectors fake's, which runs in the call's before-call hook) under one process-wide lock."""
    lock = threading.RLock()
    for client in clients:
        raw = getattr(client, "_client", client)  # under aws_stack's _AtomicWrites proxy
        make_api_call = raw._make_api_call

        def locked(operation_name, api_params, _call=make_api_call):
            with lock:
                return _call(operation_name, api_params)

        raw._make_api_call = locked
    return lock


class _DueRowsScan:
    """The DynamoDB client as `AwsStack.expire` sees it: its Scan paginator yields one page with
    the keys and `ttl` of the rows due at `now`, read from moto's table under the moto lock
    (what a `ttl <= :now` filter with a key projection returns; expire() checks `ttl` itself).
    moto's own Scan deep-copies and serialises every row, 0.1-4 ms each, and this runs every
    second over a table that grows through the whole session. Everything else passes through.
    The table has a sort key, so each of moto's partitions is a dict of items."""

    def __init__(self, client, table, lock) -> None:
        self._client = client
        self._table = table
        self._lock = lock
        self.now = 0.0

    def __getattr__(self, name: str):
        return getattr(self._client, name)

    def get_paginator(self, operation: str):
        if operation != "scan":
            return self._client.get_paginator(operation)
        return self

    def paginate(self, **kwargs):
        from memsvc.adapters.aws.dynamo_store import TTL_ATTRIBUTE

        with self._lock:
            due = [item for bucket in self._table.items.values() for item in bucket.values()
                   if TTL_ATTRIBUTE in item.attrs and float(item.attrs[TTL_ATTRIBUTE].value) <= self.now]
            rows = [{name: item.attrs[name].to_json() for name in ("pk", "sk", TTL_ATTRIBUTE)} for item in due]
        yield {"Items": rows, "Count": len(rows)}


def _moto_table(name: str):
    import boto3
    from moto.dynamodb.models import dynamodb_backends
    from moto.iam.models import get_account_id_from

    from tests.fakes.aws_stack import REGION

    access_key = boto3.Session().get_credentials().get_frozen_credentials().access_key
    return dynamodb_backends[get_account_id_from(access_key)][REGION].get_table(name)


def _check_mock_is_global(stack) -> None:
    """moto's `mock_aws` patches botocore process-wide; prove it from a thread other than the one
    that started it (the API requests run on the server's worker threads)."""
    from tests.fakes.aws_stack import TABLE

    def probe() -> str:
        return stack.clients.dynamodb.describe_table(TableName=TABLE)["Table"]["TableStatus"]

    with ThreadPoolExecutor(1) as pool:
        status = pool.submit(probe).result(timeout=30)
    if status != "ACTIVE":
        raise RuntimeError(f"moto's table is {status!r} from a worker thread: is mock_aws active there?")


def serve(port: int, data_dir: Path, *, host: str = "127.0.0.1", log_level: str = "warning",
          titan: bool = False) -> int:
    import uvicorn

    from memsvc.adapters.local.embedder import MiniLMEmbedder
    from memsvc.adapters.local.issuer import LocalIssuer
    from memsvc.local_server import LocalServer
    from memsvc.settings import LocalSettings
    from tests.fakes.aws_stack import aws_stack

    logging.basicConfig(level=log_level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    data_dir.mkdir(parents=True, exist_ok=True)

    def on_signal(signum, frame):
        raise _Shutdown(signal.Signals(signum).name)

    # uvicorn captures SIGTERM/SIGINT for a graceful shutdown, then restores this handler and
    # re-raises the signal: the handler turns it into an exception, so the stack is torn down.
    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)

    _fast_table_queries()
    # `titan`: the production TitanEmbedder against the Titan fake (a hashed bag of words, 1024
    # dims), as `memsvc eval` on AWS is reported; otherwise MiniLM, which ranks by meaning.
    embedder = None if titan else MiniLMEmbedder()
    dimension = 1024 if titan else embedder.dimension
    stop = threading.Event()
    threads: list[threading.Thread] = []
    try:
        # Configured as a deployment that names `default` as its default tenant (`memsvc serve`'s), so
        # the HTTP tests run unchanged on both backends; the AWS default (none) is tested in tests/aws.
        with aws_stack(dimension=dimension, embedder=embedder, default_tenant="default") as stack:
            clients = stack.clients
            lock = _serialise_moto([clients.dynamodb, clients.s3vectors, clients.kms, clients.events,
                                    clients.bedrock_runtime, stack.streams, stack.sqs])
            _check_mock_is_global(stack)
            from tests.fakes.aws_stack import TABLE

            due = stack.ttl_reader = _DueRowsScan(clients.dynamodb, _moto_table(TABLE), lock)

            def expire() -> None:
                due.now = time.time()
                stack.expire(due.now)

            threads.append(_every(DRAIN_INTERVAL, stack.drain, stop, "stream-indexer"))
            threads.append(_every(EXPIRE_INTERVAL, expire, stop, "dynamodb-ttl"))
            # The remember queue's event source mapping: SQS -> the remember Lambda.
            threads.append(_every(DRAIN_INTERVAL, stack.run_remember_jobs, stop, "sqs-remember"))
            threads.append(_every(DRAIN_INTERVAL, stack.app.accesses.flush, stop, "recall-accesses"))  # the Lambda's thread
            print(f"memsvc (aws on moto): keys in {data_dir}, embedder {stack.app.embedder.model_id}",
                  file=sys.stderr)
            print(f"memsvc (aws on moto): listening on http://{host}:{port}", file=sys.stderr)
            try:
                uvicorn.run(LocalServer(stack.app.router, LocalIssuer(data_dir / "keys"),
                                        threads=LocalSettings(data_dir).request_threads()), host=host, port=port,
                            log_level=log_level, access_log=log_level == "debug", lifespan="on")
            finally:
                stop.set()
                for thread in threads:
                    thread.join(timeout=10)
    except _Shutdown:
        pass
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.fakes.aws_server", description=__doc__.split("\n")[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--data-dir", type=Path, required=True)
    parser.add_argument("--log-level", default="warning", choices=["debug", "info", "warning", "error"])
    parser.add_argument("--titan", action="store_true", help="embed with TitanEmbedder on the Titan fake, not MiniLM")
    args = parser.parse_args(argv)
    return serve(args.port, args.data_dir, host=args.host, log_level=args.log_level, titan=args.titan)


if __name__ == "__main__":
    sys.exit(main())
