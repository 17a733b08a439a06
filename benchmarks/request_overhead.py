"""`python -m benchmarks.request_overhead`: what one small request costs, over HTTP and through the Lambda handler.

HTTP: a throwaway `memsvc serve` (local backend, temporary data dir, free port) holding one small
memory. One sequential client on one kept-alive `httpx.Client` sends `--requests` of each kind
after a short warm-up: an unknown path (the router's 404: the floor every request pays), `GET
/health`, a GET of the memory, `GET /openapi.json` and a filter search in the memory's namespace;
then the same GET through `MemsvcStore` (the LangGraph store of `memsvc-client`, as issue 29 and
`benchmarks.peers` measure it).
Latencies are client-side (`time.perf_counter`), percentiles nearest-rank; the client shares the
machine with the server.

Lambda (`--lambda-requests`, 0 to skip): `functions.api.handler` in this process, on the AWS
backend of the tests (moto and the in-repo fakes, `tests.fakes.aws_stack`), warm: the same 404 and
GET of one memory. Each invocation's time spent inside AWS client calls (moto, standing in for
DynamoDB and KMS) is measured and taken off, so `handler` is the function's own work per
invocation.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import platform
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any
from unittest import mock

from benchmarks.bench import Server, percentile
from benchmarks.peers import free_port, loadavg, say

__all__ = ["main"]

TENANT = "overhead"
USER = "overhead-user"
NAMESPACE = ["user", USER, "notes"]
KEY = "small"
VALUE = {"text": "Prefers a window seat on long flights", "n": 1}
WARMUP = 50
TOKEN_TTL_S = 24 * 3600


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.request_overhead",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--requests", type=int, default=2000, help="timed HTTP requests of each kind")
    parser.add_argument("--lambda-requests", type=int, default=1000,
                        help="timed Lambda invocations of each kind (0: skip the Lambda section)")
    parser.add_argument("--port", type=int, default=0, help="the server's port (default: a free one)")
    parser.add_argument("--json", type=Path, help="also write the results here")
    args = parser.parse_args(argv)
    results: dict[str, Any] = {"python": platform.python_version(), "load_before": loadavg()}
    results["http"] = measure_http(args.requests, args.port or free_port())
    if args.lambda_requests > 0:
        results["lambda"] = measure_lambda(args.lambda_requests)
    results["load_after"] = loadavg()
    say(f"load average {results['load_before']} before, {results['load_after']} after")
    if args.json:
        args.json.write_text(json.dumps(results, indent=2))
    return 0


def measure_http(requests: int, port: int) -> dict[str, Any]:
    import httpx
    from memsvc_client import MemsvcStore

    from memsvc.adapters.local.issuer import LocalIssuer

    with tempfile.TemporaryDirectory(prefix="memsvc-overhead-") as tmp:
        server = Server(Path(tmp), port)
        server.start()
        try:
            token = LocalIssuer(server.data_dir / "keys").mint(sub=USER, tenant=TENANT, ttl_seconds=TOKEN_TTL_S)
            with httpx.Client(base_url=server.base_url, headers={"Authorization": f"Bearer {token}"},
                              timeout=30.0) as client, MemsvcStore(url=server.base_url, token=token) as store:
                _answered(200, lambda: client.put("/v1/memories", json={
                    "namespace": NAMESPACE, "key": KEY, "value": VALUE, "index_fields": False}))()
                get_params = [("ns", s) for s in NAMESPACE] + [("key", KEY)]
                search = {"namespace_prefix": NAMESPACE, "filter": {"n": 1}, "limit": 10}
                kinds = {
                    "404 unknown path": _answered(404, lambda: client.get("/no/such/route")),
                    "GET /health": _answered(200, lambda: client.get("/health")),
                    "GET one memory": _answered(200, lambda: client.get("/v1/memories", params=get_params)),
                    "GET /openapi.json": _answered(200, lambda: client.get("/openapi.json")),
                    "filter search, one namespace": _answered(
                        200, lambda: client.post("/v1/memories/search", json=search)),
                    "GET one memory, MemsvcStore": lambda: _found(store.get(tuple(NAMESPACE), KEY)),
                }
                say(f"HTTP: memsvc serve on {server.base_url}, {requests} sequential requests of each kind, "
                    f"one kept-alive connection, load {loadavg()}")
                out = {}
                for name, send in kinds.items():
                    out[name] = _summary(_timed(send, requests))
                    say(f"  {name:<30} p50 {out[name]['p50_ms']:7.3f} ms  p95 {out[name]['p95_ms']:7.3f} ms")
                return out
        finally:
            server.stop()


def measure_lambda(requests: int) -> dict[str, Any]:
    from functions import api
    from tests.fakes.aws_stack import LambdaContext, aws_stack
    from tests.fakes.embedder import HashEmbedder

    class Context(LambdaContext):
        function_name = "memsvc-api"
        invoked_function_arn = "arn:aws:lambda:us-east-1:123456789012:function:memsvc-api"
        aws_request_id = "request-overhead"

    aws_by_call: list[float] = []  # the milliseconds each invocation spent in AWS calls

    def invoke(event: dict[str, Any], status: int) -> Callable[[], None]:
        def send() -> None:
            aws_ms.clear()
            answer = api.handler(event, Context())
            aws_by_call.append(sum(aws_ms))
            if answer["statusCode"] != status:
                raise RuntimeError(f"HTTP {answer['statusCode']}: {answer['body'][:200]}")
        return send

    embedder = HashEmbedder()
    query = "&".join(f"ns={s}" for s in NAMESPACE) + f"&key={KEY}"
    put = json.dumps({"namespace": NAMESPACE, "key": KEY, "value": VALUE, "index_fields": False})
    out: dict[str, Any] = {}
    with aws_stack(dimension=embedder.dimension, embedder=embedder), _quiet(api.logger.registered_handler), \
            _aws_call_clock() as aws_ms:
        invoke(_lambda_event("PUT", "/v1/memories", "", put), 200)()
        kinds = {"404 unknown path": invoke(_lambda_event("GET", "/no/such/route", "", None), 404),
                 "GET one memory": invoke(_lambda_event("GET", "/v1/memories", query, None), 200)}
        for name, send in kinds.items():
            aws_by_call.clear()
            total = _timed(send, requests)
            own = [t - aws for t, aws in zip(total, aws_by_call[WARMUP:])]
            out[name] = {"invocation": _summary(total), "handler": _summary(own)}
    say(f"Lambda: functions.api.handler in process (Python {platform.python_version()}), moto behind it, "
        f"{requests} warm invocations of each kind")
    for name, row in out.items():
        say(f"  {name:<30} whole p50 {row['invocation']['p50_ms']:7.3f} ms  p95 {row['invocation']['p95_ms']:7.3f} ms"
            f"   without AWS calls p50 {row['handler']['p50_ms']:7.3f} ms  p95 {row['handler']['p95_ms']:7.3f} ms")
    return out


def _timed(send: Callable[[], Any], requests: int) -> list[float]:
    """Milliseconds of each of `requests` calls of `send`, after `WARMUP` untimed ones. `send`
    raises on a wrong answer."""
    samples = []
    for i in range(WARMUP + requests):
        started = time.perf_counter()
        send()
        if i >= WARMUP:
            samples.append((time.perf_counter() - started) * 1000)
    return samples


def _answered(status: int, send: Callable[[], Any]) -> Callable[[], None]:
    def checked() -> None:
        response = send()
        if response.status_code != status:
            raise RuntimeError(f"{response.request.method} {response.request.url.path}: "
                               f"HTTP {response.status_code} {response.text[:200]}")
    return checked


def _found(value: Any) -> None:
    if value is None:
        raise RuntimeError("MemsvcStore.get found no memory")


def _summary(samples: list[float]) -> dict[str, Any]:
    ordered = sorted(samples)
    return {"n": len(ordered), "p50_ms": round(percentile(ordered, 50), 3), "p95_ms": round(percentile(ordered, 95), 3)}


def _lambda_event(method: str, path: str, query: str, body: str | None) -> dict[str, Any]:
    event: dict[str, Any] = {
        "version": "2.0", "routeKey": "$default", "rawPath": path, "rawQueryString": query,
        "headers": {"content-type": "application/json"}, "isBase64Encoded": False,
        "requestContext": {"requestId": "request-overhead", "stage": "$default",
                           "http": {"method": method, "path": path},
                           "authorizer": {"jwt": {"claims": {"sub": USER, "tenant_id": TENANT}, "scopes": None}}},
    }
    if body is not None:
        event["body"] = body
    return event


@contextmanager
def _aws_call_clock() -> Iterator[list[float]]:
    """Each AWS client call's milliseconds, appended to the list yielded."""
    from botocore.client import BaseClient

    spent: list[float] = []
    make_call = BaseClient._make_api_call

    def timed(client: BaseClient, operation: str, params: dict[str, Any]) -> Any:
        started = time.perf_counter()
        try:
            return make_call(client, operation, params)
        finally:
            spent.append((time.perf_counter() - started) * 1000)

    with mock.patch.object(BaseClient, "_make_api_call", timed):
        yield spent


@contextmanager
def _quiet(log_handler: logging.StreamHandler) -> Iterator[None]:
    """The handler writes a log line and prints an EMF document per invocation: to /dev/null, not the terminal."""
    with open(os.devnull, "w") as devnull, mock.patch("sys.stdout", devnull):
        terminal = log_handler.setStream(devnull)
        try:
            yield
        finally:
            log_handler.setStream(terminal)


if __name__ == "__main__":
    raise SystemExit(main())
