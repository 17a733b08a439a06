"""Point-in-time recovery of a deployment's DynamoDB tables into new tables, set up as the stack
sets up its own, and a new S3 Vectors index beside the stack's (`memsvc.aws_restore` drives it).

A restore copies a table's items, keys and secondary indexes, and its encryption when asked;
it does not copy the stream, TTL, point-in-time recovery or deletion protection (DynamoDB's
documentation, "Restoring a DynamoDB table to a point in time"): `configure_like` sets those as
the source table has them. Every step checks what is there first, so a run cut short anywhere is
finished by running the steps again.

The restored keyword table holds the derived rows as the indexer had left them at that second:
rows of versions superseded or deleted before it, whose removal had not been indexed yet, beside
those of the live versions. `clear_derived_rows` removes every derived row and keeps the
explicitly written graph (source data), so the rebuild starts from nothing.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Mapping
from datetime import datetime
from typing import Any, NamedTuple

from botocore.exceptions import BotoCoreError, ClientError

from memsvc.adapters.aws.dynamo_store import item_from_row
from memsvc.adapters.aws.s3vectors_index import NON_FILTERABLE_METADATA_KEYS
from memsvc.core.models import StoredItem

__all__ = ["DerivedRowsCleared", "PointInTimeError", "PointInTimeRestore", "deployed_environment", "stack_clients"]

INDEXER_HANDLER = "functions.indexer.handler"  # its function's environment names every resource
# The keyword table's rows (`T#<tenant>#<kind>...`; a tenant id has no `#`), from the modules that
# write them: derived, and deleted whole before a rebuild: keyword postings, document records and
# statistics (dynamo_keywords), field-token postings, indexed postings and records (dynamo_fields),
# the graph's markers (dynamo_graph). The graph's adjacency rows are mentions (derived, `M` after
# the namespace) or explicit edges (`X`, source); its nodes are kept with their mention count set
# to 0, which the rebuild counts up again (`DynamoGraphStore.integrity_scan` then drops a node
# that is neither mentioned nor explicitly written, as the graph drops one whose last mention goes).
_DERIVED_KINDS = frozenset({"W", "D", "S", "FT", "FI", "FD", "GK"})
_ADJACENCY, _NODE, _GRAPH_STATISTICS = "G", "GN", "GSTAT#"
_END = "\x1f"  # after the namespace in an adjacency sort key
_BATCH_WRITE = 25
_WRITE_ATTEMPTS = 8


class DerivedRowsCleared(NamedTuple):
    tenants: frozenset[str]  # tenants that had rows in the table
    deleted: int  # rows deleted
    nodes_reset: int  # graph nodes kept, their mention count set to 0


class PointInTimeError(Exception):
    """Why a step of the recovery failed, with AWS's own reason."""


class PointInTimeRestore:
    def __init__(self, dynamodb: Any, s3vectors: Any, *, poll_seconds: float = 20.0,
                 sleep: Callable[[float], None] = time.sleep) -> None:
        self._dynamodb = dynamodb
        self._s3vectors = s3vectors
        self._poll_seconds = poll_seconds
        self._sleep = sleep

    def check_restorable(self, table: str, at: datetime) -> None:
        """`at` lies in the table's recovery window, or `PointInTimeError` says what the window is."""
        backups = _call("DescribeContinuousBackups", table, self._dynamodb.describe_continuous_backups,
                        TableName=table)["ContinuousBackupsDescription"]
        recovery = backups.get("PointInTimeRecoveryDescription", {})
        if recovery.get("PointInTimeRecoveryStatus") != "ENABLED":
            raise PointInTimeError(f"{table} has no point-in-time recovery enabled")
        earliest, latest = recovery["EarliestRestorableDateTime"], recovery["LatestRestorableDateTime"]
        if not earliest <= at <= latest:
            raise PointInTimeError(f"{table} can be restored to a time from {earliest.isoformat()} to "
                                   f"{latest.isoformat()}, not {at.isoformat()}")

    def restore_table(self, source: str, target: str, at: datetime) -> None:
        """Start restoring `source` as it was at `at` into the new table `target`, on demand and
        under the source's KMS key."""
        described = self._describe(source)
        restore: dict[str, Any] = {"SourceTableName": source, "TargetTableName": target, "RestoreDateTime": at,
                                   "BillingModeOverride": "PAY_PER_REQUEST"}
        key_arn = described.get("SSEDescription", {}).get("KMSMasterKeyArn")
        if key_arn:
            restore["SSESpecificationOverride"] = {"Enabled": True, "SSEType": "KMS", "KMSMasterKeyId": key_arn}
        _call("RestoreTableToPointInTime", target, self._dynamodb.restore_table_to_point_in_time, **restore)

    def restore_or_check(self, source: str, target: str, at: datetime) -> bool:
        """Start restoring `source` into `target` unless `target` exists (an earlier run started
        it); whether a restore was started."""
        if self.table_exists(target):
            return False
        self.check_restorable(source, at)
        self.restore_table(source, target, at)
        return True

    def wait_active(self, table: str) -> None:
        """Until the table is ACTIVE: a restore takes minutes to hours, with the table's size."""
        while self._describe(table)["TableStatus"] != "ACTIVE":
            self._sleep(self._poll_seconds)

    def configure_like(self, source: str, target: str) -> None:
        """Give `target` the stream, TTL, point-in-time recovery and deletion protection `source` has."""
        described, restored = self._describe(source), self._describe(target)
        stream = described.get("StreamSpecification", {})
        if stream.get("StreamEnabled") and not restored.get("StreamSpecification", {}).get("StreamEnabled"):
            _call("UpdateTable", target, self._dynamodb.update_table, TableName=target,
                  StreamSpecification={"StreamEnabled": True, "StreamViewType": stream["StreamViewType"]})
            self.wait_active(target)
        ttl = _call("DescribeTimeToLive", source, self._dynamodb.describe_time_to_live,
                    TableName=source)["TimeToLiveDescription"]
        restored_ttl = _call("DescribeTimeToLive", target, self._dynamodb.describe_time_to_live,
                             TableName=target)["TimeToLiveDescription"]
        if ttl.get("TimeToLiveStatus") in ("ENABLED", "ENABLING") and restored_ttl.get("TimeToLiveStatus") not in (
                "ENABLED", "ENABLING"):  # DynamoDB refuses to enable it twice
            _call("UpdateTimeToLive", target, self._dynamodb.update_time_to_live, TableName=target,
                  TimeToLiveSpecification={"Enabled": True, "AttributeName": ttl["AttributeName"]})
        _call("UpdateContinuousBackups", target, self._dynamodb.update_continuous_backups, TableName=target,
              PointInTimeRecoverySpecification={"PointInTimeRecoveryEnabled": True})
        if described.get("DeletionProtectionEnabled") and not restored.get("DeletionProtectionEnabled"):
            _call("UpdateTable", target, self._dynamodb.update_table, TableName=target, DeletionProtectionEnabled=True)
            self.wait_active(target)

    def clear_derived_rows(self, table: str) -> DerivedRowsCleared:
        """Delete the restored keyword table's derived rows, keep its explicit graph (module
        comment, `_DERIVED_KINDS`). A Scan of the whole table, which nothing else writes yet."""
        tenants: set[str] = set()
        doomed: list[dict[str, Any]] = []
        deleted = nodes_reset = 0
        for page in _pages(self._dynamodb, table, ProjectionExpression="pk, sk, #mc",
                           ExpressionAttributeNames={"#mc": "mc"}):
            for row in page:
                pk, sk = row["pk"]["S"], row["sk"]["S"]
                key = {"pk": row["pk"], "sk": row["sk"]}
                if pk.startswith(_GRAPH_STATISTICS):
                    doomed.append(key)  # counted again below, from what is kept
                    continue
                parts = pk.split("#", 3)
                if len(parts) < 3 or parts[0] != "T":
                    continue
                tenants.add(parts[1])
                kind = parts[2]
                if kind in _DERIVED_KINDS or (kind == _ADJACENCY and sk.split(_END, 2)[1:2] == ["M"]):
                    doomed.append(key)
                elif kind == _NODE and row.get("mc", {}).get("N", "0") != "0":
                    _call("UpdateItem", table, self._dynamodb.update_item, TableName=table, Key=key,
                          UpdateExpression="SET #mc = :zero", ExpressionAttributeNames={"#mc": "mc"},
                          ExpressionAttributeValues={":zero": {"N": "0"}})
                    nodes_reset += 1
                if len(doomed) >= _BATCH_WRITE:
                    deleted += self._delete(table, doomed[:_BATCH_WRITE])
                    del doomed[:_BATCH_WRITE]
        while doomed:
            deleted += self._delete(table, doomed[:_BATCH_WRITE])
            del doomed[:_BATCH_WRITE]
        self._recount_graph(table)
        return DerivedRowsCleared(frozenset(tenants), deleted, nodes_reset)

    def _delete(self, table: str, keys: list[dict[str, Any]]) -> int:
        requests = [{"DeleteRequest": {"Key": key}} for key in keys]
        for attempt in range(_WRITE_ATTEMPTS):
            left = _call("BatchWriteItem", table, self._dynamodb.batch_write_item,
                         RequestItems={table: requests}).get("UnprocessedItems", {}).get(table, [])
            if not left:
                return len(keys)
            requests = left
            self._sleep(min(0.05 * 2 ** attempt, 2.0))
        raise PointInTimeError(f"BatchWriteItem on {table} left rows undeleted after {_WRITE_ATTEMPTS} attempts "
                               "(throttled): run again with resume")

    def _recount_graph(self, table: str) -> None:
        """The graph's statistics rows (`GSTAT#0..15`, for operators) as what is kept: its nodes and
        explicit edges (each stored at both ends, counted at its source's `O` row), no mentions;
        the rebuild adds what it writes."""
        nodes = edges = 0
        for page in _pages(self._dynamodb, table, ProjectionExpression="pk, sk"):
            for row in page:
                parts = row["pk"]["S"].split("#", 3)
                if len(parts) < 3 or parts[0] != "T":
                    continue
                if parts[2] == _NODE:
                    nodes += 1
                elif parts[2] == _ADJACENCY and row["sk"]["S"].split(_END, 3)[1:3] == ["X", "O"]:
                    edges += 1
        _call("PutItem", table, self._dynamodb.put_item, TableName=table,
              Item={"pk": {"S": f"{_GRAPH_STATISTICS}0"}, "sk": {"S": "GSTAT"}, "nodes": {"N": str(nodes)},
                    "edges": {"N": str(edges)}, "mentions": {"N": "0"}})

    def live_items(self, table: str, now: datetime, *, page_size: int = 500) -> Iterator[StoredItem]:
        """Every tenant's live items in `table`, in no order, a page of the whole table at a time:
        what a restored table's indexes are rebuilt from. A Scan, which only this operator's tool
        makes (the service's roles never scan the item table)."""
        scan: dict[str, Any] = {"TableName": table, "Limit": page_size,
                                "FilterExpression": "rt = :item AND attribute_not_exists(#del)",
                                "ExpressionAttributeNames": {"#del": "del"},
                                "ExpressionAttributeValues": {":item": {"S": "item"}}}
        while True:
            page = _call("Scan", table, self._dynamodb.scan, **scan)
            for row in page.get("Items", []):
                item = item_from_row(row)
                if item.expires_at is None or item.expires_at > now:
                    yield item
            if "LastEvaluatedKey" not in page:
                return
            scan["ExclusiveStartKey"] = page["LastEvaluatedKey"]

    def table_exists(self, table: str) -> bool:
        try:
            self._dynamodb.describe_table(TableName=table)
        except ClientError as exc:
            if exc.response.get("Error", {}).get("Code") == "ResourceNotFoundException":
                return False
            raise PointInTimeError(_reason("DescribeTable", table, exc)) from None
        except BotoCoreError as exc:
            raise PointInTimeError(_reason("DescribeTable", table, exc)) from None
        return True

    def index_exists(self, bucket: str, index: str) -> bool:
        try:
            self._s3vectors.get_index(vectorBucketName=bucket, indexName=index)
        except ClientError as exc:
            if exc.response.get("Error", {}).get("Code") in ("NotFoundException", "ResourceNotFoundException"):
                return False
            raise PointInTimeError(_reason("GetIndex", index, exc)) from None
        except BotoCoreError as exc:
            raise PointInTimeError(_reason("GetIndex", index, exc)) from None
        return True

    def create_index_like(self, bucket: str, source: str, target: str) -> None:
        """A new, empty index in `bucket` with `source`'s data type, dimension, metric and
        encryption, and the metadata keys the adapter declares non-filterable."""
        index = _call("GetIndex", source, self._s3vectors.get_index, vectorBucketName=bucket, indexName=source)["index"]
        create: dict[str, Any] = {
            "vectorBucketName": bucket, "indexName": target, "dataType": index["dataType"],
            "dimension": index["dimension"], "distanceMetric": index["distanceMetric"],
            "metadataConfiguration": {"nonFilterableMetadataKeys": list(NON_FILTERABLE_METADATA_KEYS)}}
        if index.get("encryptionConfiguration"):
            create["encryptionConfiguration"] = index["encryptionConfiguration"]
        _call("CreateIndex", target, self._s3vectors.create_index, **create)

    def _describe(self, table: str) -> dict[str, Any]:
        return _call("DescribeTable", table, self._dynamodb.describe_table, TableName=table)["Table"]


def stack_clients(region: str) -> dict[str, Any]:
    """The clients `deployed_environment` reads a stack with."""
    import boto3

    session = boto3.Session(region_name=region)
    return {"cloudformation": session.client("cloudformation"), "lambda_client": session.client("lambda")}


def deployed_environment(stack: str, *, cloudformation: Any, lambda_client: Any) -> Mapping[str, str]:
    """The environment of the stack's indexer function, which names its tables, vector bucket and
    index, KMS key and embedding model (what `AwsSettings.from_env` reads)."""
    try:
        pages = cloudformation.get_paginator("list_stack_resources").paginate(StackName=stack)
        functions = [r["PhysicalResourceId"] for page in pages for r in page["StackResourceSummaries"]
                     if r["ResourceType"] == "AWS::Lambda::Function"]
        for name in functions:
            config = lambda_client.get_function_configuration(FunctionName=name)
            if config.get("Handler") == INDEXER_HANDLER:
                return config.get("Environment", {}).get("Variables", {})
    except (ClientError, BotoCoreError) as exc:
        raise PointInTimeError(_reason("reading the stack", stack, exc)) from None
    raise PointInTimeError(f"stack {stack} has no function with the handler {INDEXER_HANDLER}")


def _pages(dynamodb: Any, table: str, **scan: Any) -> Iterator[list[dict[str, Any]]]:
    scan = {"TableName": table, "ConsistentRead": True, **scan}
    while True:
        page = _call("Scan", table, dynamodb.scan, **scan)
        yield page.get("Items", [])
        if "LastEvaluatedKey" not in page:
            return
        scan["ExclusiveStartKey"] = page["LastEvaluatedKey"]


def _call(operation: str, name: str, method: Callable[..., dict[str, Any]], **params: Any) -> dict[str, Any]:
    try:
        return method(**params)
    except (ClientError, BotoCoreError) as exc:
        raise PointInTimeError(_reason(operation, name, exc)) from None


def _reason(operation: str, name: str, exc: Exception) -> str:
    """Our words, with AWS's error code (or the kind of client failure), never AWS's own text."""
    if isinstance(exc, ClientError):
        return f"{operation} on {name} failed: AWS answered {exc.response.get('Error', {}).get('Code') or 'an error'}"
    return f"{operation} on {name} failed: no answer from AWS ({type(exc).__name__})"
