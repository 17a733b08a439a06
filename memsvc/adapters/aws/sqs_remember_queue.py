"""The AWS queue of `remember` calls with `wait: false`: an SQS queue (with a dead-letter queue)
consumed by the remember function (`functions/remember.py`).

Why a queue and not a pending row on the table's stream: the stream's consumers (the indexer,
the timeline) process each shard in order, so a slow or failing judge call would hold up the
indexing of every memory behind it; a queue gives each candidate its own retries, visibility
timeout and dead-letter queue, and scales apart from the stream. The message holds the tenant,
the candidate id and the payload sealed under the tenant's data key (`Sealer.seal_job`): never
the content in plaintext.
"""

from __future__ import annotations

import base64
import json
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from memsvc.adapters.aws.errors import aws_error
from memsvc.core.models import RememberJob

__all__ = ["SqsRememberQueue", "job_message", "job_of_message"]


def job_message(job: RememberJob) -> str:
    return json.dumps({"tenant": job.tenant, "candidate_id": job.candidate_id,
                       "sealed": base64.b64encode(job.sealed).decode("ascii")}, separators=(",", ":"))


def job_of_message(body: str, *, attempts: int = 0) -> RememberJob:
    message = json.loads(body)
    return RememberJob(message["tenant"], message["candidate_id"], base64.b64decode(message["sealed"]), attempts)


class SqsRememberQueue:
    """`RememberQueue`: `SendMessage` returns once SQS has stored the message redundantly."""

    def __init__(self, client: Any, queue_url: str) -> None:
        self._sqs = client
        self._queue_url = queue_url

    def enqueue(self, job: RememberJob, *, delay_seconds: int = 0) -> None:
        try:
            self._sqs.send_message(QueueUrl=self._queue_url, MessageBody=job_message(job),
                                   DelaySeconds=max(0, min(900, delay_seconds)))
        except (ClientError, BotoCoreError) as exc:
            raise aws_error(exc, service="SQS", operation="SendMessage") from None
