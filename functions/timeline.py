"""The timeline Lambda: DynamoDB stream -> the event log (on the table) -> EventBridge.

The whole batch goes to the timeline at once (`memsvc.service.timeline.Timeline.apply`): it
records one event per change in the event log, then publishes every event of the batch to the
environment's bus (`MEMSVC_EVENT_BUS_NAME`; none configured, nothing is published). The records
whose changes were not recorded, or whose events EventBridge would not take after the
publisher's retries, are reported as partial batch failures (`ReportBatchItemFailures`), so
Lambda retries from the first of them. Redelivery is safe: the log refuses an event id it
already holds (a replayed change records nothing new and keeps its stamp), and publishing again
is what at-least-once means on the bus (`detail.id` names the event for consumers that
deduplicate). The timeline copies the value's ciphertext into the log and never decrypts it.

Records that are no change to a memory are skipped (the mapping's filter drops most of them
before they cost an invocation): registry, key, config and timeline rows, index marks and TTL
refreshes, TTL purges of tombstones. A record that cannot be read at all is reported as failed,
so after the mapping's retries its position goes to the on-failure destination instead of being
dropped.

Metrics (namespace `POWERTOOLS_METRICS_NAMESPACE`, default `memsvc`; dimension `service`), per
batch: `Records`, `UnreadableRecords`, `Events` (one per change, replays included, but an admin's
retry of a quarantined memory, which is no event), `AddEvents`, `UpdateEvents`, `DeleteEvents`,
`ExpiredEvents`, `IndexFailedEvents`, `EventsFailed` (events whose change is
reported for retry), `EventsPublished` and `EventsRejected` (entries EventBridge accepted, and
refused in a response, retried ones included), `PutEventsCalls`, `PutEventsErrors` (whole
requests refused); `ColdStart`. Logs carry counts, kinds, stream sequence numbers and error
codes, never a namespace, a key, a value or an event's detail.
"""

from __future__ import annotations

import threading
from collections import Counter
from typing import Any

from aws_lambda_powertools.metrics import MetricUnit

from functions.observability import make_logger, make_metrics
from functions.runtime import aws_app
from functions.stream import process_stream_batch

logger = make_logger("memsvc-timeline")
metrics = make_metrics("memsvc-timeline")

_KIND_METRICS = (("add", "AddEvents"), ("update", "UpdateEvents"), ("delete", "DeleteEvents"),
                 ("expired", "ExpiredEvents"), ("index_failed", "IndexFailedEvents"))


class PublishMeter:
    """Counts what EventBridge answered to `PutEvents`, from the client's own `after-call` event
    (so it counts every request the publisher sent, retries included): requests, entries
    accepted, entries refused in a response, and requests refused as a whole."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.calls = self.accepted = self.rejected = self.errors = 0

    def watch(self, client: Any) -> None:
        """Listen to `client` (idempotent: botocore keeps one handler per unique id)."""
        service = client.meta.service_model.service_id.hyphenize()
        client.meta.events.register(f"after-call.{service}.PutEvents", self._after_call,
                                    unique_id=f"memsvc-publish-meter-{id(self)}")

    def snapshot(self) -> tuple[int, int, int, int]:
        with self._lock:
            return self.calls, self.accepted, self.rejected, self.errors

    def _after_call(self, http_response: Any = None, parsed: Any = None, **_: Any) -> None:
        status = getattr(http_response, "status_code", 500)
        parsed = parsed if isinstance(parsed, dict) else {}
        with self._lock:
            self.calls += 1
            if status >= 300:
                self.errors += 1
                return
            entries = parsed.get("Entries") or []
            failed = sum(1 for e in entries if e.get("ErrorCode"))
            self.accepted += len(entries) - failed
            self.rejected += failed


publish_meter = PublishMeter()


@metrics.log_metrics(capture_cold_start_metric=True)
@logger.inject_lambda_context(log_event=False, clear_state=True)
def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    app = aws_app()  # a misconfigured function fails the whole batch: Lambda retries it, nothing is lost
    publish_meter.watch(app.clients.events)
    before = publish_meter.snapshot()
    batch = process_stream_batch(event, context, logger, action="recording", apply=app.timeline.apply)
    records, changes, unreadable, failed_seqs = batch.records, batch.changes, batch.unreadable, batch.failed

    calls, accepted, rejected, errors = (a - b for a, b in zip(publish_meter.snapshot(), before))
    kinds = Counter(c.kind for c in changes)
    events_failed = sum(1 for c in changes if str(c.seq) in failed_seqs)
    metrics.add_metric(name="Records", unit=MetricUnit.Count, value=len(records))
    metrics.add_metric(name="UnreadableRecords", unit=MetricUnit.Count, value=len(unreadable))
    metrics.add_metric(name="Events", unit=MetricUnit.Count,
                       value=sum(1 for c in changes if c.kind != "index_retry"))  # a retry is no event
    for kind, name in _KIND_METRICS:
        metrics.add_metric(name=name, unit=MetricUnit.Count, value=kinds.get(kind, 0))
    metrics.add_metric(name="EventsFailed", unit=MetricUnit.Count, value=events_failed)
    metrics.add_metric(name="EventsPublished", unit=MetricUnit.Count, value=accepted)
    metrics.add_metric(name="EventsRejected", unit=MetricUnit.Count, value=rejected)
    metrics.add_metric(name="PutEventsCalls", unit=MetricUnit.Count, value=calls)
    metrics.add_metric(name="PutEventsErrors", unit=MetricUnit.Count, value=errors)

    summary: dict[str, Any] = {
        "records": len(records),
        "events": dict(kinds),
        "failed": sorted(failed_seqs, key=lambda s: (len(s), s)),
        "published": accepted,
        "rejected": rejected,
        "put_events_calls": calls,
        "put_events_errors": errors,
    }
    if failed_seqs:
        logger.warning("batch", extra=summary)
    else:
        logger.info("batch", extra=summary)
    return batch.response

