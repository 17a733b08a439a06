"""The remember Lambda on moto's SQS: a queued candidate is decided by the real handler; one that
keeps failing is reported as a partial batch failure each time, then moved by the queue's redrive
policy to the dead-letter queue, still sealed: nothing is lost, nothing is in plaintext."""

from __future__ import annotations

import json

from memsvc.core.errors import Forbidden
from memsvc.service.remember import RememberMemory
from tests.conftest import alice
from tests.fakes.aws_stack import aws_stack
from tests.fakes.embedder import HashEmbedder


def _deny(caller, op, namespace, key):
    raise Forbidden(f"not allowed to {op} here")


def test_a_failing_candidate_ends_in_the_dead_letter_queue(monkeypatch):
    with aws_stack(embedder=HashEmbedder()) as stack:
        remember = stack.app.services.remember
        remember.remember(alice(), RememberMemory(content="The user's cat is called Miso", wait=False))
        monkeypatch.setattr(remember._access, "authorize", _deny)  # e.g. a policy changed since
        responses = [stack.run_remember_jobs() for _ in range(6)]
        assert [len(r["batchItemFailures"]) for r in responses[:5]] == [1, 1, 1, 1, 1]
        assert responses[5]["records"] == 0  # the sixth receive finds it moved away
        page = stack.sqs.receive_message(QueueUrl=stack.remember_dlq_url, MaxNumberOfMessages=10)
        (message,) = page["Messages"]
        body = json.loads(message["Body"])
        assert set(body) == {"tenant", "candidate_id", "sealed"} and "Miso" not in message["Body"]

        monkeypatch.undo()  # redriven once the cause is fixed, it is decided
        stack.sqs.send_message(QueueUrl=stack.remember_queue_url, MessageBody=message["Body"])
        assert stack.run_remember_jobs()["batchItemFailures"] == []
        got = stack.app.services.memories.get(alice(), ["user", "alice", "memories"], body["candidate_id"])
        assert got.value["content"] == "The user's cat is called Miso"
