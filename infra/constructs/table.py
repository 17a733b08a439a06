"""The DynamoDB tables, each declared from its adapter's own schema: the item table
(`table_definition()`) and the keyword index's table (`keyword_table_definition()`)."""

from __future__ import annotations

from typing import Any

from aws_cdk import RemovalPolicy
from aws_cdk import aws_dynamodb as ddb
from aws_cdk import aws_kms as kms
from constructs import Construct

from memsvc.adapters.aws.dynamo_keywords import keyword_table_definition
from memsvc.adapters.aws.dynamo_store import TTL_ATTRIBUTE, table_definition

__all__ = ["ItemTable", "KeywordTable"]

_TYPES = {"S": ddb.AttributeType.STRING, "N": ddb.AttributeType.NUMBER, "B": ddb.AttributeType.BINARY}
_PROJECTIONS = {"ALL": ddb.ProjectionType.ALL, "KEYS_ONLY": ddb.ProjectionType.KEYS_ONLY,
                "INCLUDE": ddb.ProjectionType.INCLUDE}


def _keys(schema: dict[str, Any], key_schema: list[dict[str, Any]]) -> dict[str, ddb.Attribute]:
    """`partition_key` and `sort_key` of a `TableV2` or index, from `CreateTable` arguments."""
    types = {a["AttributeName"]: _TYPES[a["AttributeType"]] for a in schema["AttributeDefinitions"]}
    out = {}
    for k in key_schema:
        role = "partition_key" if k["KeyType"] == "HASH" else "sort_key"
        out[role] = ddb.Attribute(name=k["AttributeName"], type=types[k["AttributeName"]])
    return out


class ItemTable(Construct):
    """DynamoDB `TableV2`: on demand, point-in-time recovery, the customer-managed `encryption_key`,
    TTL on `ttl`, stream NEW_AND_OLD_IMAGES, and exactly the keys and GSIs of
    `memsvc.adapters.aws.dynamo_store.table_definition` (the schema the adapter and its tests use)."""

    def __init__(
        self,
        scope: Construct,
        id: str,
        *,
        table_name: str,
        encryption_key: kms.IKey,
        removal_policy: RemovalPolicy,
        deletion_protection: bool,
    ) -> None:
        super().__init__(scope, id)
        schema = table_definition(table_name)
        if schema["BillingMode"] != "PAY_PER_REQUEST":
            raise ValueError("the adapter's schema is not on demand")
        if schema["StreamSpecification"].get("StreamViewType") != "NEW_AND_OLD_IMAGES":
            raise ValueError("the consumers need NEW_AND_OLD_IMAGES")
        def keys(key_schema: list[dict[str, Any]]) -> dict[str, ddb.Attribute]:
            return _keys(schema, key_schema)

        indexes = []
        for gsi in schema["GlobalSecondaryIndexes"]:
            projection = gsi["Projection"]
            indexes.append(ddb.GlobalSecondaryIndexPropsV2(
                index_name=gsi["IndexName"],
                projection_type=_PROJECTIONS[projection["ProjectionType"]],
                non_key_attributes=projection.get("NonKeyAttributes"),
                **keys(gsi["KeySchema"]),
            ))
        self.index_names: tuple[str, ...] = tuple(g["IndexName"] for g in schema["GlobalSecondaryIndexes"])
        self.table = ddb.TableV2(
            self, "Table",
            table_name=table_name,
            billing=ddb.Billing.on_demand(),
            encryption=ddb.TableEncryptionV2.customer_managed_key(encryption_key),
            point_in_time_recovery_specification=ddb.PointInTimeRecoverySpecification(
                point_in_time_recovery_enabled=True),
            time_to_live_attribute=TTL_ATTRIBUTE,
            dynamo_stream=ddb.StreamViewType.NEW_AND_OLD_IMAGES,
            deletion_protection=deletion_protection,
            removal_policy=removal_policy,
            global_secondary_indexes=indexes,
            **keys(schema["KeySchema"]),
        )

    @property
    def table_arn(self) -> str:
        return self.table.table_arn

    @property
    def table_name(self) -> str:
        return self.table.table_name

    @property
    def stream_arn(self) -> str:
        arn = self.table.table_stream_arn
        assert arn is not None  # the stream is always on
        return arn

    def index_arn(self, index_name: str) -> str:
        if index_name not in self.index_names:
            raise KeyError(index_name)
        return f"{self.table.table_arn}/index/{index_name}"


class KeywordTable(Construct):
    """The keyword index's DynamoDB `TableV2`: on demand, point-in-time recovery, the customer-managed
    `encryption_key`, and exactly the keys of `memsvc.adapters.aws.dynamo_keywords.keyword_table_definition`.
    No stream (postings must never reach the item table's consumers, and nothing consumes them), no
    TTL (postings go when their memory does, with the statistics), no secondary index."""

    def __init__(
        self,
        scope: Construct,
        id: str,
        *,
        table_name: str,
        encryption_key: kms.IKey,
        removal_policy: RemovalPolicy,
        deletion_protection: bool,
    ) -> None:
        super().__init__(scope, id)
        schema = keyword_table_definition(table_name)
        if schema["BillingMode"] != "PAY_PER_REQUEST":
            raise ValueError("the adapter's schema is not on demand")
        if {"StreamSpecification", "GlobalSecondaryIndexes", "LocalSecondaryIndexes"} & set(schema):
            raise ValueError("the keyword table has no stream and no secondary index")
        self.table = ddb.TableV2(
            self, "Table",
            table_name=table_name,
            billing=ddb.Billing.on_demand(),
            encryption=ddb.TableEncryptionV2.customer_managed_key(encryption_key),
            point_in_time_recovery_specification=ddb.PointInTimeRecoverySpecification(
                point_in_time_recovery_enabled=True),
            deletion_protection=deletion_protection,
            removal_policy=removal_policy,
            **_keys(schema, schema["KeySchema"]),
        )

    @property
    def table_arn(self) -> str:
        return self.table.table_arn

    @property
    def table_name(self) -> str:
        return self.table.table_name
