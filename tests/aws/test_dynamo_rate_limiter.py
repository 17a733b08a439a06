"""The DynamoDB rate limiter on moto: a counter item per (tenant, user, window), counted only
under the limit by one conditional UpdateItem, with a TTL."""

from __future__ import annotations

from datetime import datetime, timezone
from concurrent.futures import ThreadPoolExecutor

from memsvc.adapters.aws.dynamo_rate_limiter import DynamoRateLimiter, rate_counter_key
from tests.fakes.aws_stack import TABLE, aws_stack
from tests.fakes.embedder import HashEmbedder

EXPIRES = datetime(2026, 1, 1, 2, tzinfo=timezone.utc)


def test_counts_to_the_limit_per_user_and_window():
    with aws_stack(embedder=HashEmbedder()) as stack:
        limiter = DynamoRateLimiter(stack.clients.dynamodb, TABLE)
        assert [limiter.try_acquire("acme", "alice", 7, 2, EXPIRES) for _ in range(3)] == [True, True, False]
        assert limiter.try_acquire("acme", "bob", 7, 2, EXPIRES)  # another user: another item
        assert limiter.try_acquire("globex", "alice", 7, 2, EXPIRES)  # another tenant
        assert limiter.try_acquire("acme", "alice", 8, 2, EXPIRES)  # the next window
        row = stack.clients.dynamodb.get_item(TableName=TABLE, Key=rate_counter_key("acme", "alice", 7))["Item"]
        assert row["used"] == {"N": "2"}  # the refused call was not counted
        assert row["ttl"] == {"N": str(int(EXPIRES.timestamp()))} and row["rt"] == {"S": "rate"}
        alice, bob = rate_counter_key("acme", "alice", 7), rate_counter_key("acme", "bob", 7)
        assert alice["pk"] != bob["pk"]  # users never share a partition


def test_concurrent_calls_never_count_past_the_limit():
    with aws_stack(embedder=HashEmbedder()) as stack:
        limiter = DynamoRateLimiter(stack.clients.dynamodb, TABLE)
        with ThreadPoolExecutor(8) as pool:
            allowed = list(pool.map(lambda _: limiter.try_acquire("acme", "alice", 1, 5, EXPIRES), range(20)))
        assert allowed.count(True) == 5
