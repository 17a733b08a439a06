"""`remember` with `wait: false` (API-AGENT.md): the queue the API hands candidates to, its
dead-letter queue, and the function that decides them (`functions/remember.py`).

Why a queue and not the table's stream: see `memsvc.adapters.aws.sqs_remember_queue`. A
message holds the candidate sealed under its tenant's data key, never the content in plaintext;
the queue is encrypted at rest as well (SQS-managed) and takes TLS only. A message that fails
`MAX_RECEIVES` times moves to the dead-letter queue, which keeps it `dlq_retention`.
"""

from __future__ import annotations

import aws_cdk as cdk
from aws_cdk import Duration, RemovalPolicy, Stack
from aws_cdk import aws_events as events
from aws_cdk import aws_kms as kms
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_sqs as sqs
from constructs import Construct

from infra.constructs.functions import (KEYWORD_TABLE_ACTIONS, LambdaPackage, ServiceFunction, ServiceSettings,
                                        _tenant_context_only, service_environment)
from infra.constructs.table import ItemTable, KeywordTable
from infra.constructs.vectors import VectorStore
from infra.nag import acknowledge
from memsvc.adapters.aws.dynamo_store import GSI_HISTORY, GSI_ID, GSI_PENDING, GSI_RECENT

__all__ = ["RememberQueue", "RememberFunction", "let_api_enqueue", "model_arn", "MAX_RECEIVES", "REMEMBER_QUEUE_URL_VARIABLE"]

MAX_RECEIVES = 5
REMEMBER_QUEUE_URL_VARIABLE = "MEMSVC_REMEMBER_QUEUE_URL"


def model_arn(scope: Construct, model_id: str) -> str:
    """A Bedrock foundation model's ARN in the stack's region (Titan, the judge model)."""
    return Stack.of(scope).format_arn(service="bedrock", account="", resource="foundation-model",
                                      resource_name=model_id, arn_format=cdk.ArnFormat.SLASH_RESOURCE_NAME)


class RememberQueue(Construct):
    def __init__(self, scope: Construct, id: str, *, queue_name: str, visibility_timeout: Duration,
                 dlq_retention: Duration, removal_policy: RemovalPolicy) -> None:
        super().__init__(scope, id)
        self.dead_letter_queue = sqs.Queue(
            self, "DeadLetters", queue_name=f"{queue_name}-dlq", encryption=sqs.QueueEncryption.SQS_MANAGED,
            enforce_ssl=True, retention_period=dlq_retention, removal_policy=removal_policy)
        acknowledge(self.dead_letter_queue, "AwsSolutions-SQS3",
                    "This queue is itself the remember queue's dead-letter queue: nothing consumes it "
                    "automatically (an operator redrives it), so a DLQ behind it would never receive a message.")
        self.queue = sqs.Queue(
            self, "Queue", queue_name=queue_name, encryption=sqs.QueueEncryption.SQS_MANAGED, enforce_ssl=True,
            visibility_timeout=visibility_timeout, retention_period=dlq_retention, removal_policy=removal_policy,
            dead_letter_queue=sqs.DeadLetterQueue(queue=self.dead_letter_queue, max_receive_count=MAX_RECEIVES))


class RememberFunction(Construct):
    """The remember function: the queue -> the remember decision, as the API makes it.

    Calls (from the code, `Remember.run_job`): what the API's remember route calls. DynamoDB
    GetItem, BatchGetItem, Query, PutItem and UpdateItem on the table and Query on its GSIs;
    `KEYWORD_TABLE_ACTIONS` on the keyword table (the written memory is indexed inline); KMS
    GenerateDataKey and Decrypt on the envelope key (the tenant's data key opens the sealed
    candidate); S3 Vectors QueryVectors and GetVectors (the neighbour search), PutVectors and
    DeleteVectors; Bedrock InvokeModel on the embedding model, the judge model and the memory
    extraction model (Converse is authorized as InvokeModel); the queue's consume actions for its
    event source mapping. Queued extractions (`functions/remember.py` runs them too) also update
    a session's `extracted_seq` (UpdateItem), record `memory.candidate` and `memory.error` in the
    timeline (TransactWriteItems, authorized as its Put/Update actions) and put them on the bus
    (PutEvents). Export and import steps (issue 26) run here too: a memory's history is read
    through the `history` index (Query) and an import restores it on the timeline
    (TransactWriteItems).
    """

    def __init__(self, scope: Construct, id: str, *, function_name: str, package: LambdaPackage, table: ItemTable,
                 keywords: KeywordTable, vectors: VectorStore, envelope_key: kms.IKey, storage_key: kms.IKey,
                 settings: ServiceSettings, queue: RememberQueue, judge_model_id: str, memory_mb: int,
                 timeout: Duration, event_bus: events.IEventBus) -> None:
        super().__init__(scope, id)
        self.service = ServiceFunction(
            self, "Service", function_name=function_name, handler="functions.remember.handler",
            description="memsvc remember: SQS -> the consolidation decision of queued candidates",
            package=package,
            environment=service_environment(service="remember", table=table, keywords=keywords, vectors=vectors,
                                            envelope_key=envelope_key, settings=settings, event_bus=event_bus),
            memory_mb=memory_mb, timeout=timeout, log_retention=settings.log_retention,
            removal_policy=settings.removal_policy)
        s = self.service
        s.allow(sid="ItemTable", resources=[table.table_arn], actions=[
            "dynamodb:GetItem", "dynamodb:BatchGetItem", "dynamodb:Query", "dynamodb:PutItem", "dynamodb:UpdateItem"])
        s.allow(sid="ItemTableIndexes", actions=["dynamodb:Query"],
                resources=[table.index_arn(n) for n in (GSI_RECENT, GSI_ID, GSI_PENDING, GSI_HISTORY)])
        s.allow(sid="KeywordTable", actions=KEYWORD_TABLE_ACTIONS, resources=[keywords.table_arn])
        s.allow(sid="StorageKey", actions=["kms:Decrypt", "kms:DescribeKey", "kms:GenerateDataKey"],
                resources=[storage_key.key_arn])
        s.allow(sid="TenantDataKeys", actions=["kms:GenerateDataKey", "kms:Decrypt"],
                resources=[envelope_key.key_arn], conditions=_tenant_context_only())
        s.allow(sid="VectorIndex", resources=[vectors.index_arn], actions=[
            "s3vectors:QueryVectors", "s3vectors:GetVectors", "s3vectors:PutVectors", "s3vectors:DeleteVectors"])
        s.allow(sid="Models", actions=["bedrock:InvokeModel"],
                resources=[model_arn(self, settings.embedding_model_id), model_arn(self, judge_model_id),
                           model_arn(self, settings.memory_extraction_model_id)])
        s.allow(sid="EventBus", actions=["events:PutEvents"], resources=[event_bus.event_bus_arn])
        # A mapping with a fixed id (SqsEventSource names it after the queue, which differs per
        # environment), and the consume grant it needs.
        queue.queue.grant_consume_messages(s.role)
        # Queued extractions queue their follow-ups (a backlog's next batch, the wait for a session
        # to go idle) on the same queue.
        s.function.add_environment(REMEMBER_QUEUE_URL_VARIABLE, queue.queue.queue_url)
        s.allow(sid="RememberQueue", actions=["sqs:SendMessage"], resources=[queue.queue.queue_arn])
        self.mapping = lambda_.EventSourceMapping(
            self, "QueueMapping", target=s.function, event_source_arn=queue.queue.queue_arn, batch_size=10,
            report_batch_item_failures=True)
        self.mapping.node.add_dependency(s.role)
        self.function = s.function
        self.role = s.role
        self.log_group = s.log_group


def let_api_enqueue(api: ServiceFunction, queue: RememberQueue, judge_model_id: str,
                    memory_extraction_model_id: str) -> None:
    """The API's share of remember and extraction: it sends `wait: false` candidates and
    conversations (and sessions' extraction jobs) to the queue, and asks the judge model and the
    extraction model itself for `wait: true`."""
    api.function.add_environment(REMEMBER_QUEUE_URL_VARIABLE, queue.queue.queue_url)
    api.allow(sid="RememberQueue", actions=["sqs:SendMessage"], resources=[queue.queue.queue_arn])
    api.allow(sid="SameFactJudge", actions=["bedrock:InvokeModel"], resources=[model_arn(api, judge_model_id)])
    api.allow(sid="MemoryExtraction", actions=["bedrock:InvokeModel"],
              resources=[model_arn(api, memory_extraction_model_id)])
