"""A cancelled DynamoDB transaction is a lost race only when another writer got there first:
throttling is a retryable 429, never a 409 that sends the caller to re-read and race again."""

from __future__ import annotations

from datetime import datetime, timezone

import pytest
from botocore.exceptions import ClientError

from memsvc.adapters.aws.dynamo_workflow import DynamoWorkflowStore
from memsvc.adapters.aws.errors import aws_error, lost_race
from memsvc.core.errors import ProviderError, RateLimited
from memsvc.core.workflow import StaleRecord, TaskRecord


def cancelled(*reasons: str) -> ClientError:
    return ClientError({"Error": {"Code": "TransactionCanceledException", "Message": "cancelled"},
                        "CancellationReasons": [{"Code": r} for r in reasons],
                        "ResponseMetadata": {"HTTPStatusCode": 400}}, "TransactWriteItems")


@pytest.mark.parametrize("error, race", [
    (cancelled("ConditionalCheckFailed", "None"), True),
    (cancelled("None", "TransactionConflict"), True),
    (cancelled("ConditionalCheckFailed", "TransactionConflict"), True),
    (cancelled("None", "ThrottlingError"), False),
    (cancelled("ConditionalCheckFailed", "ProvisionedThroughputExceeded"), False),
    (cancelled("ValidationError"), False),
    (cancelled("None"), False),
    (ClientError({"Error": {"Code": "ConditionalCheckFailedException"}}, "PutItem"), True),
    (ClientError({"Error": {"Code": "ThrottlingException"}}, "PutItem"), False),
])
def test_which_cancellations_are_races(error, race):
    assert lost_race(error) is race


def test_a_throttled_transaction_is_rate_limited_and_other_cancellations_are_provider_errors():
    assert isinstance(aws_error(cancelled("None", "ThrottlingError"), service="DynamoDB",
                                operation="TransactWriteItems"), RateLimited)
    other = aws_error(cancelled("ValidationError"), service="DynamoDB", operation="TransactWriteItems")
    assert isinstance(other, ProviderError) and not isinstance(other, RateLimited)


class Refusing:
    """A DynamoDB client whose transactions are all cancelled with the given reasons."""

    def __init__(self, *reasons: str) -> None:
        self.reasons = reasons

    def transact_write_items(self, **_):
        raise cancelled(*self.reasons)


def task() -> TaskRecord:
    now = datetime(2026, 1, 1, tzinfo=timezone.utc)
    return TaskRecord(tenant="acme", task_id="t1", creator="alice", plan_id=None, event_type="e", response_event=None,
                      response_topic="topic", sub_tasks=("s1",), sealed=b"x", version=1, created_at=now, updated_at=now)


def test_a_throttled_task_save_is_rate_limited_not_a_race():
    with pytest.raises(RateLimited):
        DynamoWorkflowStore(Refusing("None", "ThrottlingError"), "memsvc-test").save_task(task(), previous=None)


def test_a_task_save_that_lost_to_a_concurrent_transaction_is_a_race():
    store = DynamoWorkflowStore(Refusing("TransactionConflict", "None"), "memsvc-test")
    store.get_task = lambda tenant, task_id: None  # still absent, and its sub-task nobody else's:
    store.task_of_subtask = lambda tenant, subtask_id: None  # the save raced, nothing else is wrong
    with pytest.raises(StaleRecord):
        store.save_task(task(), previous=None)
