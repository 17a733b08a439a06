"""The reflection function and its EventBridge Scheduler schedule, in a bare stack: the handler,
the schedule's input (the tenants) and rate, and each role's exact permissions."""

from __future__ import annotations

import json

from aws_cdk import Duration
from aws_cdk import aws_kms as kms
from aws_cdk.assertions import Template

from infra.constructs.reflection import ReflectionFunction
from tests.infra.helpers import resources_of
from tests.infra.test_functions import _grants, _logical, service_resources


def _template(bare_stack):
    stack = bare_stack()
    envelope = kms.Key(stack, "EnvelopeKey", enable_key_rotation=True)
    storage = kms.Key(stack, "StorageKey", enable_key_rotation=True)
    ReflectionFunction(stack, "Reflection", function_name="fn-reflection", judge_model_id="amazon.nova-micro-v1:0",
                       tenants=("acme", "globex"), every=Duration.hours(1),
                       **service_resources(stack, envelope, storage))
    return Template.from_stack(stack).to_json()


def test_the_schedule_invokes_the_function_with_the_tenants_hourly(bare_stack):
    t = _template(bare_stack)
    (fn_logical, fn), = [(k, r) for k, r in resources_of(t, "AWS::Lambda::Function").items()
                         if r["Properties"]["FunctionName"] == "fn-reflection"]
    assert fn["Properties"]["Handler"] == "functions.reflection.handler"
    assert fn["Properties"]["Timeout"] == 900
    (schedule,) = resources_of(t, "AWS::Scheduler::Schedule").values()
    props = schedule["Properties"]
    assert props["ScheduleExpression"] == "rate(1 hour)" and props["FlexibleTimeWindow"] == {"Mode": "OFF"}
    assert props["Target"]["Arn"] == {"Fn::GetAtt": [fn_logical, "Arn"]}
    assert json.loads(props["Target"]["Input"]) == {"tenants": ["acme", "globex"]}
    # The scheduler's role invokes this function only (no `:*` qualifier wildcard).
    assert _grants(t, "ReflectionSchedulerRole") == {("lambda:InvokeFunction", json.dumps(
        {"Fn::GetAtt": [fn_logical, "Arn"]}))}
    role = resources_of(t, "AWS::IAM::Role")[_logical(t, "AWS::IAM::Role", "ReflectionSchedulerRole")]
    principal = role["Properties"]["AssumeRolePolicyDocument"]["Statement"][0]["Principal"]
    assert principal == {"Service": "scheduler.amazonaws.com"}


def test_the_function_role_is_what_reflection_calls(bare_stack):
    grants = _grants(_template(bare_stack), "ReflectionServiceRole")
    assert {a for a, r in grants if r == "table"} == {
        "dynamodb:GetItem", "dynamodb:BatchGetItem", "dynamodb:Query", "dynamodb:PutItem"}
    # A user's live items by recency (`by_recent`); reflection never looks a memory up by its id.
    assert {r for a, r in grants if a == "dynamodb:Query"} == {"table", "table/index/by_recent"}
    assert {r for a, r in grants if a == "s3vectors:GetVectors"} == {"vector-index"}
    assert not any(a.startswith("s3vectors:") and a != "s3vectors:GetVectors" for a, _ in grants)  # embeds nothing
    assert {r for a, r in grants if a == "bedrock:InvokeModel"} == {"model/amazon.nova-micro-v1:0"}
    assert {a for a, r in grants if r == "EnvelopeKey"} == {"kms:GenerateDataKey", "kms:Decrypt"}
