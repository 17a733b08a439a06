"""Structured logs and CloudWatch EMF metrics for the Lambda functions (Powertools).

What is recorded, and what never is:

- Nothing a caller stored or asked for reaches a log line or a metric: no value, no attribute,
  no search query, no namespace or key, no raw path or query string (a path and a query carry
  namespace segments and keys). Logs carry route templates, status and error codes, counts,
  stream sequence numbers and memory ids; metric dimensions are the service, the route template
  and the error code, each from a small fixed set.
- The functions never log the incoming event (`log_event=False` is passed explicitly, so
  `POWERTOOLS_LOGGER_LOG_EVENT=true` cannot turn it on) nor a response body.
- The AWS SDK's loggers are held at WARNING whatever the log level: at DEBUG botocore logs
  request and response bodies, which would put Titan's input text and KMS data keys in the logs.
- The service's own loggers (`memsvc.*`) are given the function's handler and JSON formatter, so
  every line is structured and carries the invocation's keys.

Everything here is read once, at cold start: `POWERTOOLS_SERVICE_NAME` (default: the function's
own name, `memsvc-api` / `memsvc-indexer`), `POWERTOOLS_METRICS_NAMESPACE` (default `memsvc`),
and the log level (`AWS_LAMBDA_LOG_LEVEL`, then `POWERTOOLS_LOG_LEVEL`, then `LOG_LEVEL`, then INFO).
"""

from __future__ import annotations

import logging
import os
import threading
import weakref
from typing import Any

from aws_lambda_powertools import Logger, Metrics
from aws_lambda_powertools.logging.utils import copy_config_to_registered_loggers
from aws_lambda_powertools.metrics import MetricUnit

__all__ = [
    "DEFAULT_NAMESPACE",
    "make_logger",
    "make_metrics",
    "metrics_namespace",
    "service_name",
    "embedder_stats",
    "add_embedding_metrics",
    "VectorMeter",
]

DEFAULT_NAMESPACE = "memsvc"
_SDK_LOGGERS = ("botocore", "boto3", "urllib3", "s3transfer")


def service_name(default: str) -> str:
    return os.environ.get("POWERTOOLS_SERVICE_NAME") or default


def metrics_namespace() -> str:
    return os.environ.get("POWERTOOLS_METRICS_NAMESPACE") or DEFAULT_NAMESPACE


def make_logger(default_service: str) -> Logger:
    """The function's JSON logger; the `memsvc` package logs through it too."""
    logger = Logger(service=service_name(default_service))
    logging.getLogger("memsvc")  # registered before copying, so its children inherit the config
    copy_config_to_registered_loggers(source_logger=logger, include={"memsvc"})
    for name in _SDK_LOGGERS:
        logging.getLogger(name).setLevel(logging.WARNING)
    return logger


def make_metrics(default_service: str) -> Metrics:
    return Metrics(namespace=metrics_namespace(), service=service_name(default_service))


# -- embedding: TitanEmbedder.stats deltas -------------------------------------------------------

_EMBEDDING_METRICS = (
    ("calls", "EmbeddingCalls"),  # InvokeModel requests sent, retries included (billed, throttled)
    ("cache_hits", "EmbeddingCacheHits"),
    ("cache_misses", "EmbeddingCacheMisses"),
    ("throttles", "EmbeddingThrottles"),
    ("failures", "EmbeddingFailures"),
)


def embedder_stats(embedder: Any) -> Any | None:
    """A snapshot of the embedder's counters (`TitanEmbedder.stats`), or None for an embedder
    that keeps none."""
    stats = getattr(embedder, "stats", None)
    return stats if stats is not None and all(hasattr(stats, f) for f, _ in _EMBEDDING_METRICS) else None


def add_embedding_metrics(metrics: Metrics, before: Any | None, after: Any | None) -> dict[str, int]:
    """Add this invocation's embedding metrics (after - before); returns the deltas for the log.
    Nothing is added when the invocation embedded nothing."""
    if before is None or after is None:
        return {}
    deltas = {name: getattr(after, field) - getattr(before, field) for field, name in _EMBEDDING_METRICS}
    if not any(deltas.values()):
        return {}
    for name, value in deltas.items():
        metrics.add_metric(name=name, unit=MetricUnit.Count, value=value)
    return deltas


# -- vectors: counted from the S3 Vectors client's own events ------------------------------------


class VectorMeter:
    """Counts the vectors S3 Vectors accepted (PutVectors) and the keys it deleted (DeleteVectors).

    It listens to the boto3 client's events, so it counts what was actually sent and answered
    with success, whatever part of the service sent it: `before-parameter-build` notes the size
    of the request in the request context, `after-call` adds it when the status is 2xx.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.written = 0
        self.deleted = 0
        # botocore would keep one handler per unique id anyway, but checks each handler's
        # signature first: a tenth of a millisecond on every invocation.
        self._watched: weakref.WeakSet = weakref.WeakSet()

    def watch(self, client: Any) -> None:
        """Listen to `client` (idempotent)."""
        if client in self._watched:
            return
        self._watched.add(client)
        events = client.meta.events
        uid = f"memsvc-vector-meter-{id(self)}"
        for op, field in (("PutVectors", "vectors"), ("DeleteVectors", "keys")):
            events.register(f"before-parameter-build.s3vectors.{op}", _note_size(field), unique_id=f"{uid}-{op}-size")
            events.register(f"after-call.s3vectors.{op}", self._counter(op), unique_id=f"{uid}-{op}-done")

    def snapshot(self) -> tuple[int, int]:
        with self._lock:
            return self.written, self.deleted

    def _counter(self, op: str):
        def after_call(http_response: Any = None, context: Any = None, **_: Any) -> None:
            status = getattr(http_response, "status_code", 500)
            n = (context or {}).get("memsvc_vector_count", 0)
            if status < 300 and n:
                with self._lock:
                    if op == "PutVectors":
                        self.written += n
                    else:
                        self.deleted += n

        return after_call


def _note_size(field: str):
    def before_parameter_build(params: Any = None, context: Any = None, **_: Any) -> None:
        if isinstance(context, dict) and isinstance(params, dict):
            context["memsvc_vector_count"] = len(params.get(field) or [])

    return before_parameter_build
