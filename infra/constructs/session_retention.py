"""The session retention function and its hourly schedule (functions/session_retention.py)."""

from __future__ import annotations

from aws_cdk import Duration
from aws_cdk import aws_events as events
from aws_cdk import aws_events_targets as targets
from aws_cdk import aws_kms as kms
from constructs import Construct

from infra.constructs.functions import LambdaPackage, ServiceFunction, ServiceSettings, service_environment
from infra.constructs.table import ItemTable, KeywordTable
from infra.constructs.vectors import VectorStore
from memsvc.adapters.aws.dynamo_store import GSI_RECENT

__all__ = ["SessionRetentionFunction"]


class SessionRetentionFunction(Construct):
    """Calls (from the code, `Sessions.remove_due`): DynamoDB Query on the table (the due
    markers, the namespace registry) and on `by_recent` (the session's live items), GetItem (the
    sessions, the items), PutItem (the tombstones), DeleteItem (a stale marker; inside
    TransactWriteItems, the session and its marker). No KMS data key: nothing is sealed or
    opened; the storage key because the table is encrypted with it."""

    def __init__(self, scope: Construct, id: str, *, function_name: str, package: LambdaPackage, table: ItemTable,
                 keywords: KeywordTable, vectors: VectorStore, envelope_key: kms.IKey, storage_key: kms.IKey,
                 settings: ServiceSettings) -> None:
        super().__init__(scope, id)
        self.service = ServiceFunction(
            self, "Service", function_name=function_name, handler="functions.session_retention.handler",
            description="memsvc session retention: removes auto-deleted sessions past their retention",
            package=package,
            environment=service_environment(service="session-retention", table=table, keywords=keywords,
                                            vectors=vectors, envelope_key=envelope_key, settings=settings),
            memory_mb=512, timeout=Duration.minutes(10), log_retention=settings.log_retention,
            removal_policy=settings.removal_policy)
        s = self.service
        s.allow(sid="ItemTable", resources=[table.table_arn], actions=[
            "dynamodb:GetItem", "dynamodb:Query", "dynamodb:PutItem", "dynamodb:DeleteItem"])
        s.allow(sid="ItemTableIndexes", actions=["dynamodb:Query"], resources=[table.index_arn(GSI_RECENT)])
        s.allow(sid="StorageKey", actions=["kms:Decrypt", "kms:DescribeKey", "kms:GenerateDataKey"],
                resources=[storage_key.key_arn])
        self.schedule = events.Rule(self, "Hourly", schedule=events.Schedule.rate(Duration.hours(1)),
                                    description=f"runs {function_name}",
                                    targets=[targets.LambdaFunction(s.function, retry_attempts=2)])
        self.function = s.function
        self.role = s.role
        self.log_group = s.log_group
