"""What every consumer of the table's stream does with a batch, whatever it applies the changes to:
read the records as changes, apply them, and answer Lambda with the records to retry
(`ReportBatchItemFailures`: Lambda retries from the first of them)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from aws_lambda_powertools.utilities.batch import BatchProcessor, EventType, process_partial_response
from aws_lambda_powertools.utilities.data_classes.dynamo_db_stream_event import DynamoDBRecord

from memsvc.adapters.aws.dynamo_store import change_from_stream_record
from memsvc.core.models import Change

__all__ = ["StreamBatch", "process_stream_batch"]


class ChangeNotApplied(Exception):
    """This record's change was not applied; Lambda retries it."""


@dataclass
class StreamBatch:
    records: list[dict[str, Any]]
    changes: list[Change]
    unreadable: set[str]  # sequence numbers of records that are no readable change
    failed: set[str]  # sequence numbers reported for retry (the unreadable ones included)
    response: dict[str, Any]


def process_stream_batch(event: dict[str, Any], context: Any, logger: Any, *, action: str,
                         apply: Callable[[Sequence[Change]], set[int]]) -> StreamBatch:
    """`apply` gets the batch's changes at once (records that are no change to a memory are
    skipped) and returns the seqs that failed; an exception from it fails every change. A record
    that cannot be read now never will be: it is reported, so after the mapping's retries its
    position goes to the on-failure destination instead of being dropped."""
    records = event.get("Records") or []
    changes, unreadable = [], set()
    for record in records:
        try:
            change = change_from_stream_record(record)
        except Exception as exc:
            unreadable.add(_seq(record))
            logger.error("unreadable stream record", extra={"seq": _seq(record), "event_name": record.get("eventName"),
                                                            "error": type(exc).__name__})
            continue
        if change is not None:
            changes.append(change)
    try:
        failed = apply(changes) if changes else set()
    except Exception as exc:  # e.g. the table itself failing: retry the batch's changes
        logger.error(f"{action} the batch failed", extra={"error": type(exc).__name__,
                                                           "code": getattr(exc, "code", None)})
        failed = {c.seq for c in changes}
    failed_seqs = {str(s) for s in failed} | {s for s in unreadable if s}

    def record_handler(record: DynamoDBRecord) -> None:
        if record.dynamodb is not None and record.dynamodb.sequence_number in failed_seqs:
            raise ChangeNotApplied(f"stream record {record.dynamodb.sequence_number} not applied")

    processor = BatchProcessor(event_type=EventType.DynamoDBStreams, raise_on_entire_batch_failure=False)
    response = process_partial_response(event=event, record_handler=record_handler, processor=processor,
                                        context=context)
    return StreamBatch(records, changes, unreadable, failed_seqs, response)


def _seq(record: dict[str, Any]) -> str:
    return str((record.get("dynamodb") or {}).get("SequenceNumber") or "")
