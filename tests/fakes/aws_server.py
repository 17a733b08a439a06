"""`memsvc serve`, but on the AWS backend, offline: the HTTP API of `memsvc.local_server` in
front of `build_aws(...)` on moto (DynamoDB + Streams, KMS, S3 Vectors) and the fakes of
`tests/fakes/aws_stack.py`.

    python -m tests.fakes.aws_server --port 8001 --data-dir /tmp/aws-data

What is real and what is emulated:

- The router, the service layer and every AWS adapter (`memsvc.adapters.aws.*`) are the
  production code; boto3 talks to moto's in-process DynamoDB, DynamoDB Streams, KMS and
  S3 Vectors. QueryVectors is the exact-cosine fake of `tests/fakes/s3vectors.py`.
- The stream consumer is the real indexer Lambda: a thread calls `AwsStack.drain()` every
  ~0.2 s, which reads the table's records from moto's DynamoDB Streams and hands them, shaped
  as Lambda's event, to `functions.indexer.handler` (what the event source mapping does).
- DynamoDB TTL is a thread calling `AwsStack.expire(now)` every ~1 s (moto never expires
  anything); the REMOVE records it causes carry the TTL service identity, as on AWS.
- The embedder is the local MiniLM model (`MiniLMEmbedder`, 384 dims), not the Titan fake:
  the backend (storage, streams, vector index, keys) is what this server puts under test, and
  the semantic scenarios need a real model to rank by meaning. Titan's request/response
  bodies, retries and caching are covered by `tests/aws/test_titan.py`.
- Bearer tokens are verified with `LocalIssuer(<data-dir>/keys)` (the JWT authorizer's job on
  AWS), so tokens minted for `memsvc serve` on the same data dir work here too.

All state lives in this process (moto is in-memory): nothing survives a restart, and the
data dir holds only the token keys and the log.
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

DRAIN_INTERVAL = 0.2  # the stream -> indexer Lambda
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


def _check_mock_is_global(stack) -> None:
    """moto's `mock_aws` patches botocore process-wide; prove it from a thread other than the one
    that started it (the API requests run on the server's worker threads)."""
    from tests.fakes.aws_stack import TABLE

    def probe() -> str:
        return stack.clients["dynamodb"].describe_table(TableName=TABLE)["Table"]["TableStatus"]

    with ThreadPoolExecutor(1) as pool:
        status = pool.submit(probe).result(timeout=30)
    if status != "ACTIVE":
        raise RuntimeError(f"moto's table is {status!r} from a worker thread: is mock_aws active there?")


def serve(port: int, data_dir: Path, *, host: str = "127.0.0.1", log_level: str = "warning") -> int:
    import uvicorn

    from memsvc.adapters.local.embedder import MiniLMEmbedder
    from memsvc.adapters.local.issuer import LocalIssuer
    from memsvc.local_server import LocalServer
    from tests.fakes.aws_stack import aws_stack

    logging.basicConfig(level=log_level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    data_dir.mkdir(parents=True, exist_ok=True)

    def on_signal(signum, frame):
        raise _Shutdown(signal.Signals(signum).name)

    # uvicorn captures SIGTERM/SIGINT for a graceful shutdown, then restores this handler and
    # re-raises the signal: the handler turns it into an exception, so the stack is torn down.
    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)

    embedder = MiniLMEmbedder()
    stop = threading.Event()
    threads: list[threading.Thread] = []
    try:
        with aws_stack(dimension=embedder.dimension, embedder=embedder) as stack:
            _check_mock_is_global(stack)
            threads.append(_every(DRAIN_INTERVAL, stack.drain, stop, "stream-indexer"))
            threads.append(_every(EXPIRE_INTERVAL, lambda: stack.expire(time.time()), stop, "dynamodb-ttl"))
            print(f"memsvc (aws on moto): keys in {data_dir}, embedder {embedder.model_id}", file=sys.stderr)
            print(f"memsvc (aws on moto): listening on http://{host}:{port}", file=sys.stderr)
            try:
                uvicorn.run(LocalServer(stack.app.router, LocalIssuer(data_dir / "keys")), host=host, port=port,
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
    args = parser.parse_args(argv)
    return serve(args.port, args.data_dir, host=args.host, log_level=args.log_level)


if __name__ == "__main__":
    sys.exit(main())
