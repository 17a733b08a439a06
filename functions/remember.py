"""The remember Lambda: SQS (the remember queue) -> the `remember` decision of each queued
candidate (`wait: false`), and the queued extractions (`POST /v1/memories/extract` with `wait:
false` or after a model failure, sessions' extraction), with the same service code as the API's.

A message holds the tenant, the candidate id and the sealed request (`SqsRememberQueue`). Each
record is decided on its own; the ones that fail are reported as partial batch failures
(`ReportBatchItemFailures`), so SQS makes them visible again after the visibility timeout, and
after the queue's `maxReceiveCount` moves them to its dead-letter queue, where nothing is lost.
Redelivery is safe: a candidate already decided is found `unchanged` (its key is derived from
its namespace and content).

Metrics (namespace `POWERTOOLS_METRICS_NAMESPACE`, default `memsvc`): `Records`, `Created`,
`Updated`, `Superseded`, `Unchanged`, `Extracted` (an extraction job that extracted), `Failed`;
`ColdStart`. Logs carry message ids, actions and error codes, never the content.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from aws_lambda_powertools.metrics import MetricUnit

from functions.observability import make_logger, make_metrics
from functions.runtime import aws_app
from memsvc.adapters.aws.sqs_remember_queue import job_of_message
from memsvc.bootstrap import run_queued_job

logger = make_logger("memsvc-remember")
metrics = make_metrics("memsvc-remember")

_ACTIONS = (("created", "Created"), ("updated", "Updated"), ("superseded", "Superseded"), ("unchanged", "Unchanged"),
            ("extracted", "Extracted"))


@metrics.log_metrics(capture_cold_start_metric=True)
@logger.inject_lambda_context(log_event=False, clear_state=True)
def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    app = aws_app()  # a misconfigured function fails the whole batch: SQS redelivers it
    records = event.get("Records") or []
    actions: Counter[str] = Counter()
    failures = []
    for record in records:
        try:
            attempts = int(record.get("attributes", {}).get("ApproximateReceiveCount", "1")) - 1
            actions[run_queued_job(app.services, job_of_message(record["body"], attempts=attempts))] += 1
        except Exception as exc:
            logger.warning("remember job failed", extra={"message_id": record.get("messageId"),
                                                          "error": getattr(exc, "code", type(exc).__name__)})
            failures.append({"itemIdentifier": record["messageId"]})
    metrics.add_metric(name="Records", unit=MetricUnit.Count, value=len(records))
    for action, name in _ACTIONS:
        metrics.add_metric(name=name, unit=MetricUnit.Count, value=actions.get(action, 0))
    metrics.add_metric(name="Failed", unit=MetricUnit.Count, value=len(failures))
    logger.info("batch", extra={"records": len(records), "actions": dict(actions), "failed": len(failures)})
    return {"batchItemFailures": failures}
