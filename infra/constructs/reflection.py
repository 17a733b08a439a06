"""The reflection function and its EventBridge Scheduler schedule (functions/reflection.py)."""

from __future__ import annotations

import json
from collections.abc import Sequence

from aws_cdk import Duration
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_scheduler as scheduler
from constructs import Construct

from infra.constructs.functions import (LambdaPackage, ServiceFunction, ServiceSettings, _tenant_context_only,
                                        service_environment)
from infra.constructs.remember import model_arn
from infra.constructs.table import ItemTable, KeywordTable
from infra.constructs.vectors import VectorStore
from memsvc.adapters.aws.dynamo_store import GSI_RECENT

__all__ = ["ReflectionFunction"]


class ReflectionFunction(Construct):
    """Calls (from the code, `Reflection.run_due`): DynamoDB Query on the table (the namespace
    registry, a user's live items) and on `by_recent`, GetItem and PutItem (the reflection
    state and the profile, in the config rows), BatchGetItem (the memories examined), PutItem
    (their new versions, conditional on the version read); KMS GenerateDataKey and Decrypt on the envelope key
    (memories, the sealed state and profile); S3 Vectors GetVectors (the stored vectors compared;
    nothing is embedded); Bedrock InvokeModel on the judge model (check-range pairs). New
    versions are indexed by the indexer from the stream, as every write is."""

    def __init__(self, scope: Construct, id: str, *, function_name: str, package: LambdaPackage, table: ItemTable,
                 keywords: KeywordTable, vectors: VectorStore, envelope_key: kms.IKey, storage_key: kms.IKey,
                 settings: ServiceSettings, judge_model_id: str, tenants: Sequence[str], every: Duration) -> None:
        super().__init__(scope, id)
        self.service = ServiceFunction(
            self, "Service", function_name=function_name, handler="functions.reflection.handler",
            description="memsvc reflection: merges, supersedes, archives and rebuilds profiles of due users",
            package=package,
            environment=service_environment(service="reflection", table=table, keywords=keywords, vectors=vectors,
                                            envelope_key=envelope_key, settings=settings),
            memory_mb=1024, timeout=Duration.minutes(15), log_retention=settings.log_retention,
            removal_policy=settings.removal_policy)
        s = self.service
        s.allow(sid="ItemTable", resources=[table.table_arn], actions=[
            "dynamodb:GetItem", "dynamodb:BatchGetItem", "dynamodb:Query", "dynamodb:PutItem"])
        s.allow(sid="ItemTableIndexes", actions=["dynamodb:Query"], resources=[table.index_arn(GSI_RECENT)])
        s.allow(sid="StorageKey", actions=["kms:Decrypt", "kms:DescribeKey", "kms:GenerateDataKey"],
                resources=[storage_key.key_arn])
        s.allow(sid="TenantDataKeys", actions=["kms:GenerateDataKey", "kms:Decrypt"],
                resources=[envelope_key.key_arn], conditions=_tenant_context_only())
        s.allow(sid="VectorIndex", resources=[vectors.index_arn], actions=["s3vectors:GetVectors"])
        s.allow(sid="SameFactJudge", actions=["bedrock:InvokeModel"], resources=[model_arn(self, judge_model_id)])
        # The schedule's own role may invoke this function and nothing else (no `:*` qualifier
        # wildcard, which the L2 target's grant would add).
        self.scheduler_role = iam.Role(self, "SchedulerRole",
                                       assumed_by=iam.ServicePrincipal("scheduler.amazonaws.com"),
                                       description=f"lets EventBridge Scheduler invoke {function_name}")
        self.scheduler_role.add_to_policy(iam.PolicyStatement(actions=["lambda:InvokeFunction"],
                                                              resources=[s.function.function_arn]))
        self.schedule = scheduler.CfnSchedule(
            self, "Schedule", description=f"runs {function_name}",
            schedule_expression=f"rate({int(every.to_hours())} hour{'s' if every.to_hours() != 1 else ''})",
            flexible_time_window=scheduler.CfnSchedule.FlexibleTimeWindowProperty(mode="OFF"),
            target=scheduler.CfnSchedule.TargetProperty(
                arn=s.function.function_arn, role_arn=self.scheduler_role.role_arn,
                input=json.dumps({"tenants": list(tenants)}),
                retry_policy=scheduler.CfnSchedule.RetryPolicyProperty(maximum_retry_attempts=2)))
        self.function = s.function
        self.role = s.role
        self.log_group = s.log_group
