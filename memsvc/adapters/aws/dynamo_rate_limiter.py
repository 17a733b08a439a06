"""The AWS rate limiter: a counter item per (tenant, subject, window) in the item table.

Each counter has its own partition key, so users never share a hot partition. One conditional
`UpdateItem` counts a use only while under the limit (atomic in DynamoDB); the item carries a
TTL, so DynamoDB forgets it after its window. Its `rt` is `rate`, which the stream consumers'
filters drop before any invocation.
"""

from __future__ import annotations

import math
from datetime import datetime
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from memsvc.adapters.aws.dynamo_store import TTL_ATTRIBUTE
from memsvc.adapters.aws.errors import aws_error

__all__ = ["DynamoRateLimiter", "rate_counter_key"]


def rate_counter_key(tenant: str, subject: str, window: int) -> dict[str, Any]:
    return {"pk": {"S": f"T#{tenant}#RATE#{subject}#{window}"}, "sk": {"S": "RATE"}}


class DynamoRateLimiter:
    """`RateLimiter`."""

    def __init__(self, client: Any, table_name: str) -> None:
        self._db = client
        self._table = table_name

    def try_acquire(self, tenant: str, subject: str, window: int, limit: int, expires_at: datetime) -> bool:
        try:
            self._db.update_item(
                TableName=self._table,
                Key=rate_counter_key(tenant, subject, window),
                UpdateExpression="SET rt = :rt, #ttl = :ttl ADD used :one",
                ConditionExpression="attribute_not_exists(used) OR used < :limit",
                ExpressionAttributeNames={"#ttl": TTL_ATTRIBUTE},
                ExpressionAttributeValues={":one": {"N": "1"}, ":rt": {"S": "rate"}, ":limit": {"N": str(limit)},
                                           ":ttl": {"N": str(math.ceil(expires_at.timestamp()))}},
            )
            return True
        except ClientError as exc:
            if exc.response["Error"]["Code"] == "ConditionalCheckFailedException":
                return False
            raise aws_error(exc, service="DynamoDB", operation="UpdateItem") from None
        except BotoCoreError as exc:
            raise aws_error(exc, service="DynamoDB", operation="UpdateItem") from None
