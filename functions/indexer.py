"""The indexer Lambda: DynamoDB stream -> embed -> S3 Vectors.

The whole batch goes to the indexer at once (so embeddings and vector writes are shared across
records); records whose changes failed are reported as partial batch failures, so Lambda
retries from the first of them and nothing before it is redone.
"""

from __future__ import annotations

from typing import Any

from aws_lambda_powertools import Logger, Metrics
from aws_lambda_powertools.metrics import MetricUnit
from aws_lambda_powertools.utilities.batch import BatchProcessor, EventType, process_partial_response
from aws_lambda_powertools.utilities.data_classes.dynamo_db_stream_event import DynamoDBRecord

from functions.runtime import aws_app
from memsvc.adapters.aws.dynamo_store import change_from_stream_record

logger = Logger(service="memsvc-indexer")
metrics = Metrics(namespace="memsvc", service="indexer")


class ChangeNotIndexed(Exception):
    """This record's change could not be applied; Lambda retries it."""


@metrics.log_metrics
@logger.inject_lambda_context(clear_state=True)
def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    app = aws_app()
    changes = [c for c in (change_from_stream_record(r) for r in event.get("Records", [])) if c is not None]
    before = app.service.indexer.stats_total()
    failed = app.service.indexer.apply(changes) if changes else set()
    after = app.service.indexer.stats_total()

    def record_handler(record: DynamoDBRecord) -> None:
        if int(record.dynamodb.sequence_number) in failed:
            raise ChangeNotIndexed(f"change {record.dynamodb.sequence_number} not indexed")

    processor = BatchProcessor(event_type=EventType.DynamoDBStreams)
    response = process_partial_response(event=event, record_handler=record_handler, processor=processor,
                                         context=context)
    metrics.add_metric(name="Changes", unit=MetricUnit.Count, value=len(changes))
    metrics.add_metric(name="ChangesFailed", unit=MetricUnit.Count, value=len(failed))
    metrics.add_metric(name="EmbeddedTexts", unit=MetricUnit.Count,
                       value=after["embedded_texts"] - before["embedded_texts"])
    logger.info("batch", extra={"records": len(event.get("Records", [])), "changes": len(changes),
                                "failed": len(failed)})
    return response
