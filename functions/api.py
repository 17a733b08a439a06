"""The API Lambda: API Gateway HTTP API (payload 2.0) -> the same router `memsvc serve` runs.

Identity comes from what the authorizer put in the request context (JWT claims or the IAM
caller, see `memsvc.api.identity`). Adapters are built once per cold start (`functions.runtime`).

Metrics (namespace `POWERTOOLS_METRICS_NAMESPACE`, default `memsvc`), per request:
- `Requests` (Count) and `Latency` (Milliseconds), dimensions `service` + `route` and `service`
  alone; `route` is the route template (`PUT /v1/memories`), or `UNMATCHED` when no route
  matched. Never the raw path or query: they carry namespaces and keys.
- `ClientErrors` / `ServerErrors` (Count, same dimensions) for 4xx / 5xx answers.
- `Errors` (Count), dimensions `service` + `code` (the error code of the answer, e.g.
  `RATE_LIMITED`), one EMF document per error (`single_metric`, since `code` differs per request).
- `EmbeddingCalls`, `EmbeddingCacheHits`, ... when the request embedded something (a search
  query, `sync_index`) and the embedder is Titan.
- `VectorsWritten` / `VectorsDeleted` when it wrote vectors (`sync_index`).
- `ColdStart` (Powertools, dimensions `function_name` + `service`).
- Seed 001's `memory.operations.total`, `.errors`, `.latency` and `memory.search.results`, printed
  by the router through `memsvc.adapters.aws.emf_metrics` (per operation and per tenant).
"""

from __future__ import annotations

import json
import time
from typing import Any

from functions.gc_pause import collector_paused

with collector_paused():  # the cold start's imports (see functions.gc_pause)
    from aws_lambda_powertools import single_metric
    from aws_lambda_powertools.logging import correlation_paths
    from aws_lambda_powertools.metrics import MetricUnit

    from functions.observability import (
        VectorMeter,
        add_embedding_metrics,
        embedder_stats,
        make_logger,
        make_metrics,
        metrics_namespace,
        service_name,
    )
    from functions.runtime import aws_app
    from memsvc.api.router import Route

SERVICE = service_name("memsvc-api")
UNMATCHED = "UNMATCHED"

logger = make_logger("memsvc-api")
metrics = make_metrics("memsvc-api")
vector_meter = VectorMeter()


@metrics.log_metrics(capture_cold_start_metric=True)
@logger.inject_lambda_context(correlation_id_path=correlation_paths.API_GATEWAY_HTTP, log_event=False,
                              clear_state=True)
def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    started = time.perf_counter()
    matched: list[Route] = []
    try:
        app = aws_app()
    except Exception as exc:  # a misconfigured function (missing variable, bad value): say so, once per request
        problem = {"error": type(exc).__name__}
        if isinstance(exc, KeyError) and exc.args:
            problem["missing_variable"] = str(exc.args[0])
        logger.error("cold start failed", extra=problem)
        response = _internal_error(event)
        app = None
    if app is not None:
        vector_meter.watch(app.clients.s3vectors)
        embedding_before = embedder_stats(app.embedder)
        vectors_before = vector_meter.snapshot()
        response = app.router.handle(_without_stage(event), on_route=matched.append)
    route = f"{matched[0].method} {matched[0].path}" if matched else UNMATCHED
    status = int(response["statusCode"])
    code = _error_code(response) if status >= 400 else None
    latency_ms = (time.perf_counter() - started) * 1000

    metrics.add_dimension(name="route", value=route)
    metrics.add_dimensions(service=SERVICE)  # a second dimension set: the whole API
    metrics.add_metric(name="Requests", unit=MetricUnit.Count, value=1)
    metrics.add_metric(name="Latency", unit=MetricUnit.Milliseconds, value=latency_ms)
    if status >= 500:
        metrics.add_metric(name="ServerErrors", unit=MetricUnit.Count, value=1)
    elif status >= 400:
        metrics.add_metric(name="ClientErrors", unit=MetricUnit.Count, value=1)
    if code is not None:
        with single_metric(name="Errors", unit=MetricUnit.Count, value=1, namespace=metrics_namespace(),
                           default_dimensions={"service": SERVICE, "code": code}):
            pass
    extra: dict[str, Any] = {"route": route, "status": status, "latency_ms": round(latency_ms, 3)}
    if code is not None:
        extra["code"] = code
    if app is not None:
        embedding = add_embedding_metrics(metrics, embedding_before, embedder_stats(app.embedder))
        if embedding:
            extra["embedding"] = embedding
        written, deleted = (a - b for a, b in zip(vector_meter.snapshot(), vectors_before))
        if written:
            metrics.add_metric(name="VectorsWritten", unit=MetricUnit.Count, value=written)
            extra["vectors_written"] = written
        if deleted:
            metrics.add_metric(name="VectorsDeleted", unit=MetricUnit.Count, value=deleted)
            extra["vectors_deleted"] = deleted
    if status >= 500:
        logger.error("request", extra=extra)
    else:
        logger.info("request", extra=extra)
    return response


def _without_stage(event: Any) -> Any:
    """An HTTP API on a named stage puts the stage in `rawPath` (`/prod/v1/memories`); the
    `$default` stage does not. Routes are matched without it. An event of another shape is left
    as it is, for the router to refuse (`memsvc.api.router.check_event`)."""
    stage = _context_field(event, "stage")
    path = event.get("rawPath") if isinstance(event, dict) else None
    named = stage and stage != "$default"
    if named and isinstance(path, str) and (path == f"/{stage}" or path.startswith(f"/{stage}/")):
        return {**event, "rawPath": path[len(stage) + 1:] or "/"}
    return event


def _error_code(response: dict[str, Any]) -> str:
    try:
        code = json.loads(response.get("body") or "")["error"]["code"]
    except (ValueError, KeyError, TypeError):
        return "UNKNOWN"
    return code if isinstance(code, str) and code.isupper() and len(code) <= 64 else "UNKNOWN"


def _internal_error(event: Any) -> dict[str, Any]:
    request_id = _context_field(event, "requestId")
    body = {"error": {"code": "INTERNAL", "message": "internal error", "retryable": True,
                      "details": {"request_id": request_id}}}
    return {"statusCode": 500, "headers": {"content-type": "application/json", "x-request-id": request_id},
            "body": json.dumps(body, separators=(",", ":")), "isBase64Encoded": False}


def _context_field(event: Any, name: str) -> str:
    """A string of the event's request context; "" when the event has no such string."""
    ctx = event.get("requestContext") if isinstance(event, dict) else None
    value = ctx.get(name) if isinstance(ctx, dict) else None
    return value if isinstance(value, str) else ""
