"""The indexer Lambda: DynamoDB stream -> embed -> S3 Vectors.

The whole batch goes to the indexer at once (embeddings are shared across its records); the
records whose changes failed are reported as partial batch failures (`ReportBatchItemFailures`),
so Lambda retries from the first of them. Redelivery is safe: the indexer is idempotent and
version-aware (see `memsvc.service.indexer`), so a record applied twice changes nothing and an
item a batch already indexed is not embedded again.

Records that are no change to a memory are skipped: namespace-registry and key rows, index marks
and TTL refreshes (a MODIFY that keeps the version), TTL purges of tombstones. A record that
cannot be read at all is reported as failed, so after the mapping's retries it goes to the
on-failure destination instead of being dropped.

Metrics (namespace `POWERTOOLS_METRICS_NAMESPACE`, default `memsvc`; dimension `service`), per
batch: `Records`, `Changes`, `ExpiredChanges`, `ChangesFailed`, `EmbeddedTexts`,
`VectorsWritten`, `VectorsDeleted`, and with Titan `EmbeddingCalls`, `EmbeddingCacheHits`,
`EmbeddingCacheMisses`, `EmbeddingThrottles`, `EmbeddingFailures`; `ColdStart`.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from aws_lambda_powertools.metrics import MetricUnit
from aws_lambda_powertools.utilities.batch import BatchProcessor, EventType, process_partial_response
from aws_lambda_powertools.utilities.data_classes.dynamo_db_stream_event import DynamoDBRecord

from functions.observability import VectorMeter, add_embedding_metrics, embedder_stats, make_logger, make_metrics
from functions.runtime import aws_app
from memsvc.adapters.aws.dynamo_store import change_from_stream_record

logger = make_logger("memsvc-indexer")
metrics = make_metrics("memsvc-indexer")
vector_meter = VectorMeter()


class ChangeNotIndexed(Exception):
    """This record's change could not be applied; Lambda retries it."""


@metrics.log_metrics(capture_cold_start_metric=True)
@logger.inject_lambda_context(log_event=False, clear_state=True)
def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    records = event.get("Records") or []
    app = aws_app()  # a misconfigured function fails the whole batch: Lambda retries it, nothing is lost
    vector_meter.watch(app.clients.get("s3vectors"))

    changes, unreadable = [], set()
    for record in records:
        try:
            change = change_from_stream_record(record)
        except Exception as exc:  # a record we cannot read now never will be: retried, then parked
            unreadable.add(_seq(record))
            logger.error("unreadable stream record", extra={"seq": _seq(record), "event_name": record.get("eventName"),
                                                            "error": type(exc).__name__})
            continue
        if change is not None:
            changes.append(change)

    indexer = app.service.indexer
    totals_before, embedding_before = indexer.stats_total(), embedder_stats(app.embedder)
    vectors_before = vector_meter.snapshot()
    try:
        failed = indexer.apply(changes) if changes else set()
    except Exception as exc:  # e.g. the table itself failing: retry the batch's changes
        logger.error("indexing the batch failed", extra={"error": type(exc).__name__,
                                                         "code": getattr(exc, "code", None)})
        failed = {c.seq for c in changes}
    failed_seqs = {str(s) for s in failed} | {s for s in unreadable if s}

    def record_handler(record: DynamoDBRecord) -> None:
        if record.dynamodb is not None and record.dynamodb.sequence_number in failed_seqs:
            raise ChangeNotIndexed(f"stream record {record.dynamodb.sequence_number} not applied")

    processor = BatchProcessor(event_type=EventType.DynamoDBStreams, raise_on_entire_batch_failure=False)
    response = process_partial_response(event=event, record_handler=record_handler, processor=processor,
                                        context=context)

    totals_after = indexer.stats_total()
    embedded = int(totals_after["embedded_texts"] - totals_before["embedded_texts"])
    written, deleted = (a - b for a, b in zip(vector_meter.snapshot(), vectors_before))
    kinds = Counter(c.kind for c in changes)
    metrics.add_metric(name="Records", unit=MetricUnit.Count, value=len(records))
    metrics.add_metric(name="Changes", unit=MetricUnit.Count, value=len(changes))
    metrics.add_metric(name="ExpiredChanges", unit=MetricUnit.Count, value=kinds.get("expired", 0))
    metrics.add_metric(name="ChangesFailed", unit=MetricUnit.Count, value=len(failed_seqs))
    metrics.add_metric(name="EmbeddedTexts", unit=MetricUnit.Count, value=embedded)
    metrics.add_metric(name="VectorsWritten", unit=MetricUnit.Count, value=written)
    metrics.add_metric(name="VectorsDeleted", unit=MetricUnit.Count, value=deleted)
    embedding = add_embedding_metrics(metrics, embedding_before, embedder_stats(app.embedder))

    summary: dict[str, Any] = {
        "records": len(records),
        "changes": dict(kinds),
        "failed": sorted(failed_seqs, key=lambda s: (len(s), s)),
        "embedded_texts": embedded,
        "vectors_written": written,
        "vectors_deleted": deleted,
    }
    if embedding:
        summary["embedding"] = embedding
    if failed_seqs:
        logger.warning("batch", extra=summary)
    else:
        logger.info("batch", extra=summary)
    return response


def _seq(record: dict[str, Any]) -> str:
    return str((record.get("dynamodb") or {}).get("SequenceNumber") or "")
