"""The API Lambda: API Gateway HTTP API (payload 2.0) -> the same router `memsvc serve` runs."""

from __future__ import annotations

import time
from typing import Any

from aws_lambda_powertools import Logger, Metrics
from aws_lambda_powertools.metrics import MetricUnit

from functions.runtime import aws_app

logger = Logger(service="memsvc-api")
metrics = Metrics(namespace="memsvc", service="api")


@metrics.log_metrics
@logger.inject_lambda_context(clear_state=True)
def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    started = time.perf_counter()
    response = aws_app().router.handle(event)
    status = response["statusCode"]
    # Route templates only (never paths: a path carries namespace segments and keys).
    logger.info("request", extra={"method": (event.get("requestContext") or {}).get("http", {}).get("method"),
                                  "status": status, "request_id": response["headers"].get("x-request-id")})
    metrics.add_metric(name="Requests", unit=MetricUnit.Count, value=1)
    metrics.add_metric(name="Latency", unit=MetricUnit.Milliseconds, value=(time.perf_counter() - started) * 1000)
    if status >= 400:
        metrics.add_metric(name="ClientErrors" if status < 500 else "ServerErrors", unit=MetricUnit.Count, value=1)
    return response
