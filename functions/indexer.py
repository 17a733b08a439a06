"""The indexer Lambda: DynamoDB stream -> embed -> S3 Vectors.

The whole batch goes to the indexer at once: its current rows are read with one `BatchGetItem`
per 100 keys, and its texts are embedded in chunks of up to 500 (one `PutVectors` each), the
next chunk while the previous one is written (`memsvc.service.indexer`). The records whose
changes failed are reported as partial batch failures (`ReportBatchItemFailures`), so Lambda
retries from the first of them. Redelivery is safe: the indexer is idempotent and
version-aware (see `memsvc.service.indexer`), so a record applied twice changes nothing and an
item a batch already indexed is not embedded again.

Records that are no change to a memory are skipped: namespace-registry and key rows, index and
attempt marks and TTL refreshes (a MODIFY that keeps the version), TTL purges of tombstones, a
quarantine (the timeline's). A record that cannot be read at all is reported as failed, so after
the mapping's retries it goes to the on-failure destination instead of being dropped.

A poison memory never fails its record: it is quarantined (on its row, in `/index/status`, an
`index_failed` event) and its record reported done, so the shard moves on for every tenant. What
bounds an invocation (docs/api.md, "Poison items"): each memory's budget (`ItemBudget`: 30 s, checked
between stages, and linear size bounds), no unit of work started unless a budget still fits in
the invocation's time left, and the function's own timeout (300 s) and memory (1024 MB). A
memory that takes the function down past those (a timeout, out of memory) left its attempt
marked on its row: the mapping's retry runs it alone, and quarantines it if it was alone when
the function died again.

Metrics (namespace `POWERTOOLS_METRICS_NAMESPACE`, default `memsvc`; dimension `service`), per
batch: `Records`, `Changes`, `ExpiredChanges`, `ChangesFailed`, `EmbeddedTexts` (texts the
model embedded), `ReusedTexts` (an update's unchanged fields: the previous version's vectors),
`VectorsWritten`, `VectorsDeleted`, `Quarantined` (memories set aside as poison), and with
Titan `EmbeddingCalls`, `EmbeddingCacheHits`, `EmbeddingCacheMisses`, `EmbeddingThrottles`, `EmbeddingFailures`; the knowledge graph's
entity extraction (Bedrock Converse): `ExtractionCalls`, `ExtractionMalformed` (answers that
were not the JSON asked for: no graph for that memory), `ExtractionRejected`, `ExtractionFailed`
(throttled or failed after the client's retries: the change is retried), `ExtractionInputTokens`,
`ExtractionOutputTokens`; `ColdStart`.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from aws_lambda_powertools.metrics import MetricUnit

from functions.observability import VectorMeter, add_embedding_metrics, embedder_stats, make_logger, make_metrics
from functions.runtime import aws_app
from functions.stream import process_stream_batch

logger = make_logger("memsvc-indexer")
metrics = make_metrics("memsvc-indexer")
vector_meter = VectorMeter()


@metrics.log_metrics(capture_cold_start_metric=True)
@logger.inject_lambda_context(log_event=False, clear_state=True)
def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    app = aws_app()  # a misconfigured function fails the whole batch: Lambda retries it, nothing is lost
    vector_meter.watch(app.clients.s3vectors)
    indexer = app.indexer
    totals_before, embedding_before = indexer.stats_total(), embedder_stats(app.embedder)
    extraction_before = app.extractor.stats() if app.extractor is not None else {}
    vectors_before = vector_meter.snapshot()
    batch = process_stream_batch(event, context, logger, action="indexing", apply=lambda changes: indexer.apply(
        changes, seconds_left=context.get_remaining_time_in_millis() / 1000))
    records, changes, failed_seqs = batch.records, batch.changes, batch.failed

    totals_after = indexer.stats_total()
    embedded = int(totals_after["embedded_texts"] - totals_before["embedded_texts"])
    reused = int(totals_after["reused_texts"] - totals_before["reused_texts"])
    quarantined = int(totals_after["quarantined_items"] - totals_before["quarantined_items"])
    written, deleted = (a - b for a, b in zip(vector_meter.snapshot(), vectors_before))
    kinds = Counter(c.kind for c in changes)
    metrics.add_metric(name="Records", unit=MetricUnit.Count, value=len(records))
    metrics.add_metric(name="Changes", unit=MetricUnit.Count, value=len(changes))
    metrics.add_metric(name="ExpiredChanges", unit=MetricUnit.Count, value=kinds.get("expired", 0))
    metrics.add_metric(name="ChangesFailed", unit=MetricUnit.Count, value=len(failed_seqs))
    metrics.add_metric(name="EmbeddedTexts", unit=MetricUnit.Count, value=embedded)
    metrics.add_metric(name="ReusedTexts", unit=MetricUnit.Count, value=reused)
    metrics.add_metric(name="VectorsWritten", unit=MetricUnit.Count, value=written)
    metrics.add_metric(name="VectorsDeleted", unit=MetricUnit.Count, value=deleted)
    metrics.add_metric(name="Quarantined", unit=MetricUnit.Count, value=quarantined)
    embedding = add_embedding_metrics(metrics, embedding_before, embedder_stats(app.embedder))
    extraction = {name: count - extraction_before[name] for name, count in app.extractor.stats().items()} \
        if app.extractor is not None else {}
    for name, count in extraction.items():
        metric = "Extraction" + "".join(part.title() for part in name.split("_"))  # calls -> ExtractionCalls
        metrics.add_metric(name=metric, unit=MetricUnit.Count, value=count)

    summary: dict[str, Any] = {
        "records": len(records),
        "changes": dict(kinds),
        "failed": sorted(failed_seqs, key=lambda s: (len(s), s)),
        "embedded_texts": embedded,
        "reused_texts": reused,
        "vectors_written": written,
        "vectors_deleted": deleted,
        "quarantined": quarantined,
    }
    if embedding:
        summary["embedding"] = embedding
    if extraction.get("calls"):
        summary["extraction"] = extraction
    if failed_seqs or quarantined:
        logger.warning("batch", extra=summary)
    else:
        logger.info("batch", extra=summary)
    return batch.response

