"""The AWS transfer store: export and import jobs and their files' parts as rows of the item table.

A job is one row (`T#<tenant>#XFER#<job id>`, sort key `JOB`) and each part one row of the same
partition (`P#<index>`, at most `MAX_PART_BYTES`, inside DynamoDB's 400 KB). Every row has `rt =
transfer`, which the stream consumers' filters drop, and a TTL (`JOB_RETENTION_DAYS` after the job
was created), so DynamoDB removes finished jobs and their files by itself. Each job also has a row
in its tenant's listing (`T#<tenant>#XFERS`, sort key the job id, the same TTL), written before the
job: how erasing a user finds the jobs whose files may hold the user.
"""

from __future__ import annotations

import json
import math
from datetime import datetime
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from memsvc.adapters.aws.dynamo_store import TTL_ATTRIBUTE
from memsvc.adapters.aws.errors import aws_error, lost_race
from memsvc.core.errors import Conflict
from memsvc.core.transfer_jobs import TransferJob, job_doc, job_of_doc

__all__ = ["DynamoTransferStore", "job_partition", "jobs_listing_pk"]


def _pk(tenant: str, job_id: str) -> dict[str, str]:
    return {"S": f"T#{tenant}#XFER#{job_id}"}


def job_partition(tenant: str, job_id: str) -> str:
    """The partition holding the job's row and its file's parts."""
    return _pk(tenant, job_id)["S"]


def jobs_listing_pk(tenant: str) -> str:
    return f"T#{tenant}#XFERS"


class DynamoTransferStore:
    """`TransferStore`."""

    def __init__(self, client: Any, table_name: str) -> None:
        self._db = client
        self._table = table_name

    def save_job(self, job: TransferJob, *, expected_version: int | None) -> None:
        condition: dict[str, Any] = (
            {"ConditionExpression": "attribute_not_exists(pk)"} if expected_version is None else
            {"ConditionExpression": "version = :v", "ExpressionAttributeValues": {":v": {"N": str(expected_version)}}})
        item = {"pk": _pk(job.tenant, job.job_id), "sk": {"S": "JOB"}, "rt": {"S": "transfer"},
                "version": {"N": str(job.version)}, "doc": {"S": json.dumps(job_doc(job))},
                "sealed": {"B": job.sealed or b"-"}, TTL_ATTRIBUTE: {"N": str(math.ceil(job.expires_at.timestamp()))}}
        try:
            if expected_version is None:
                self._db.put_item(TableName=self._table, Item={
                    "pk": {"S": jobs_listing_pk(job.tenant)}, "sk": {"S": job.job_id}, "rt": {"S": "transfer"},
                    TTL_ATTRIBUTE: item[TTL_ATTRIBUTE]})
            self._db.put_item(TableName=self._table, Item=item, **condition)
        except ClientError as exc:
            if lost_race(exc):
                raise Conflict("the job was changed by another step", details={"job_id": job.job_id}) from None
            raise aws_error(exc, service="DynamoDB", operation="PutItem") from None
        except BotoCoreError as exc:
            raise aws_error(exc, service="DynamoDB", operation="PutItem") from None

    def get_job(self, tenant: str, job_id: str) -> TransferJob | None:
        row = self._get(tenant, job_id, "JOB")
        if row is None:
            return None
        sealed = row["sealed"]["B"]
        return job_of_doc(tenant, job_id, int(row["version"]["N"]), json.loads(row["doc"]["S"]),
                          b"" if sealed == b"-" else sealed)

    def put_part(self, tenant: str, job_id: str, index: int, data: bytes) -> None:
        job = self.get_job(tenant, job_id)
        expires = {TTL_ATTRIBUTE: {"N": str(math.ceil(job.expires_at.timestamp()))}} if job else {}
        try:
            self._db.put_item(TableName=self._table, Item={
                "pk": _pk(tenant, job_id), "sk": {"S": f"P#{index:08d}"}, "rt": {"S": "transfer"},
                "data": {"B": data or b"-"}, "size": {"N": str(len(data))}, **expires})
        except (ClientError, BotoCoreError) as exc:
            raise aws_error(exc, service="DynamoDB", operation="PutItem") from None

    def get_part(self, tenant: str, job_id: str, index: int) -> bytes | None:
        row = self._get(tenant, job_id, f"P#{index:08d}")
        if row is None:
            return None
        return b"" if row["size"]["N"] == "0" else row["data"]["B"]

    def last_part(self, tenant: str, job_id: str) -> int | None:
        try:
            rows = self._db.query(
                TableName=self._table, KeyConditionExpression="pk = :p AND begins_with(sk, :part)",
                ExpressionAttributeValues={":p": _pk(tenant, job_id), ":part": {"S": "P#"}},
                ProjectionExpression="sk", ScanIndexForward=False, Limit=1, ConsistentRead=True)["Items"]
        except (ClientError, BotoCoreError) as exc:
            raise aws_error(exc, service="DynamoDB", operation="Query") from None
        return int(rows[0]["sk"]["S"][2:]) if rows else None

    def purge_expired(self, tenant: str, now: datetime) -> int:
        return 0  # the rows' TTL

    def _get(self, tenant: str, job_id: str, sk: str) -> dict[str, Any] | None:
        try:
            return self._db.get_item(TableName=self._table, Key={"pk": _pk(tenant, job_id), "sk": {"S": sk}},
                                     ConsistentRead=True).get("Item")
        except (ClientError, BotoCoreError) as exc:
            raise aws_error(exc, service="DynamoDB", operation="GetItem") from None
