"""The edge and operations constructs in bare stacks: the HTTP API, the user pool, monitoring."""

from __future__ import annotations

import json

import aws_cdk as cdk
import pytest
from aws_cdk import aws_apigatewayv2 as apigw
from aws_cdk import aws_apigatewayv2_authorizers as authorizers
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_logs as logs
from aws_cdk import aws_sqs as sqs
from aws_cdk.assertions import Template

from infra.config import ENVIRONMENTS, Throttle
from infra.constructs import Operations, ServiceHttpApi, UserDirectory
from infra.constructs.api import ACCESS_LOG_FORMAT
from infra.routes import PUBLIC_ROUTES, service_routes
from tests.infra.helpers import only, resources_of


def _handler(stack: cdk.Stack) -> lambda_.Function:
    return lambda_.Function(stack, "Fn", runtime=lambda_.Runtime.PYTHON_3_12, handler="x.handler",
                            code=lambda_.Code.from_inline("def handler(e, c): pass"))


def _api(bare_stack, *, authorizer=None, cors=(), policy=None) -> dict:
    stack = bare_stack()
    ServiceHttpApi(
        stack, "Api", api_name="svc", description="d", handler=_handler(stack), routes=service_routes(),
        authorizer=authorizer or authorizers.HttpJwtAuthorizer("Jwt", "https://issuer.example", jwt_audience=["aud"]),
        throttle=Throttle(50, 100), public_route_throttle=Throttle(5, 10),
        access_log_retention=logs.RetentionDays.ONE_MONTH, removal_policy=cdk.RemovalPolicy.DESTROY,
        cors_allowed_origins=cors, invoke_policy_name=policy)
    return Template.from_stack(stack).to_json()


def test_routes_are_the_routers_routes_and_only_health_is_public(bare_stack):
    template = _api(bare_stack)
    (authorizer_id,) = resources_of(template, "AWS::ApiGatewayV2::Authorizer")
    routes = {r["Properties"]["RouteKey"]: r["Properties"] for r in resources_of(template, "AWS::ApiGatewayV2::Route").values()}
    assert set(routes) == {r.route_key for r in service_routes()}
    assert "GET /openapi.json" in routes and "DELETE /admin/v1/memories/{id}" in routes
    for key, route in routes.items():
        if key == "GET /health":
            assert route["AuthorizationType"] == "NONE" and "AuthorizerId" not in route
        else:
            assert route["AuthorizationType"] == "JWT", key
            assert route["AuthorizerId"] == {"Ref": authorizer_id}, key
    assert PUBLIC_ROUTES == {("GET", "/health")}
    jwt = only(template, "AWS::ApiGatewayV2::Authorizer")
    assert jwt["AuthorizerType"] == "JWT"
    assert jwt["IdentitySource"] == ["$request.header.Authorization"]
    assert jwt["JwtConfiguration"] == {"Issuer": "https://issuer.example", "Audience": ["aud"]}


def test_iam_routes_use_sigv4_and_the_invoke_policy_lists_them(bare_stack):
    template = _api(bare_stack, authorizer=authorizers.HttpIamAuthorizer(), policy="svc-invoke")
    assert not resources_of(template, "AWS::ApiGatewayV2::Authorizer")
    routes = {r["Properties"]["RouteKey"]: r["Properties"] for r in resources_of(template, "AWS::ApiGatewayV2::Route").values()}
    for key, route in routes.items():
        assert route["AuthorizationType"] == ("NONE" if key == "GET /health" else "AWS_IAM"), key
    policy = only(template, "AWS::IAM::ManagedPolicy")
    assert policy["ManagedPolicyName"] == "svc-invoke"
    (statement,) = policy["PolicyDocument"]["Statement"]
    assert statement["Action"] == "execute-api:Invoke"
    rendered = sorted(r["Fn::Join"][1][-1] for r in statement["Resource"])
    # Every route but the public one, by the first segment of its path: a fixed size however many
    # routes there are (IAM caps a managed policy at 6,144 characters).
    paths = [key.split(" ")[1] for key in routes if key != "GET /health"]
    assert rendered == sorted({"/$default/*" + (p if p.count("/") == 1 else "/" + p.split("/")[1] + "/*") for p in paths})


def test_stage_throttles_logs_and_has_no_cors_by_default(bare_stack):
    template = _api(bare_stack)
    stage = only(template, "AWS::ApiGatewayV2::Stage")
    assert stage["StageName"] == "$default" and stage["AutoDeploy"] is True
    assert stage["DefaultRouteSettings"] == {"ThrottlingRateLimit": 50, "ThrottlingBurstLimit": 100}
    assert stage["RouteSettings"] == {"GET /health": {"ThrottlingRateLimit": 5, "ThrottlingBurstLimit": 10}}
    log_format = json.loads(stage["AccessLogSettings"]["Format"])
    assert log_format == ACCESS_LOG_FORMAT
    rendered = stage["AccessLogSettings"]["Format"]
    # The route template only: no path, no query string (they carry namespaces and keys).
    for leak in ("$context.path", "$context.resourcePath", "querystring", "$context.requestOverride"):
        assert leak not in rendered
    assert log_format["routeKey"] == "$context.routeKey"
    group = only(template, "AWS::Logs::LogGroup")
    assert group["LogGroupName"] == "/aws/apigateway/svc" and group["RetentionInDays"] == 30
    assert "CorsConfiguration" not in only(template, "AWS::ApiGatewayV2::Api")


def test_cors_only_for_configured_origins(bare_stack):
    template = _api(bare_stack, cors=("https://app.example.com",))
    cors = only(template, "AWS::ApiGatewayV2::Api")["CorsConfiguration"]
    assert cors["AllowOrigins"] == ["https://app.example.com"]
    assert cors["AllowHeaders"] == ["authorization", "content-type"]
    assert "AllowCredentials" not in cors


def test_one_lambda_permission_scoped_to_the_api(bare_stack):
    template = _api(bare_stack)
    (permission,) = resources_of(template, "AWS::Lambda::Permission").values()
    props = permission["Properties"]
    assert props["Principal"] == "apigateway.amazonaws.com"
    api_id = next(iter(resources_of(template, "AWS::ApiGatewayV2::Api")))
    assert {"Ref": api_id} in props["SourceArn"]["Fn::Join"][1]


@pytest.mark.parametrize("mode", ["FULL_FUNCTION", "AUDIT_ONLY"])
def test_user_pool_is_admin_only_mfa_and_tenant_immutable(bare_stack, mode):
    stack = bare_stack()
    UserDirectory(stack, "Users", pool_name="pool", threat_protection=mode,
                  removal_policy=cdk.RemovalPolicy.RETAIN, deletion_protection=True)
    template = Template.from_stack(stack).to_json()
    pool = only(template, "AWS::Cognito::UserPool")
    assert pool["AdminCreateUserConfig"]["AllowAdminCreateUserOnly"] is True
    assert pool["MfaConfiguration"] == "ON"
    assert pool["EnabledMfas"] == ["SOFTWARE_TOKEN_MFA"]
    assert pool["UserPoolTier"] == "PLUS"
    assert pool["UserPoolAddOns"] == {"AdvancedSecurityMode": "ENFORCED" if mode == "FULL_FUNCTION" else "AUDIT"}
    assert pool["DeletionProtection"] == "ACTIVE"
    policy = pool["Policies"]["PasswordPolicy"]
    assert policy["MinimumLength"] >= 14
    assert all(policy[k] for k in ("RequireLowercase", "RequireUppercase", "RequireNumbers", "RequireSymbols"))
    (tenant,) = [a for a in pool["Schema"] if a["Name"] == "tenant_id"]
    assert tenant["Mutable"] is False
    client = only(template, "AWS::Cognito::UserPoolClient")
    assert "custom:tenant_id" in client["ReadAttributes"]
    assert "custom:tenant_id" not in client["WriteAttributes"]
    assert client["GenerateSecret"] is False
    assert client["PreventUserExistenceErrors"] == "ENABLED"
    assert client["EnableTokenRevocation"] is True
    group = only(template, "AWS::Cognito::UserPoolGroup")
    assert group["GroupName"] == "admin"


def test_operations_alarm_on_everything_the_issue_names(bare_stack):
    stack = bare_stack()
    api = apigw.HttpApi(stack, "HttpApi")
    fn = _handler(stack)
    queue = sqs.Queue(stack, "Dlq")
    thresholds = ENVIRONMENTS["prod"].alarms
    Operations(stack, "Ops", name="svc", thresholds=thresholds, apis={"jwt-api": api}, functions={"api": fn},
               stream_consumers={"indexer": fn}, dead_letter_queues={"indexer": queue},
               alarm_email="ops@example.com", removal_policy=cdk.RemovalPolicy.DESTROY)
    template = Template.from_stack(stack).to_json()
    alarms = {a["Properties"]["AlarmName"]: a["Properties"] for a in resources_of(template, "AWS::CloudWatch::Alarm").values()}
    assert set(alarms) == {"svc-jwt-api-5xx", "svc-jwt-api-latency-p99", "svc-api-errors", "svc-api-throttles",
                           "svc-indexer-iterator-age", "svc-indexer-dlq", "svc-indexer-quarantined",
                           "svc-api-embedding-failures", "svc-api-degraded-searches"}
    (topic_id,) = resources_of(template, "AWS::SNS::Topic")
    for name, alarm in alarms.items():
        assert alarm["AlarmActions"] == [{"Ref": topic_id}] and alarm["OKActions"] == [{"Ref": topic_id}], name
        assert alarm["ComparisonOperator"] == "GreaterThanOrEqualToThreshold"
        assert alarm["TreatMissingData"] == "notBreaching"
    assert alarms["svc-jwt-api-5xx"]["MetricName"] == "5xx"
    assert alarms["svc-jwt-api-5xx"]["Threshold"] == thresholds.api_5xx_per_5min
    assert alarms["svc-jwt-api-latency-p99"]["ExtendedStatistic"] == "p99"
    assert alarms["svc-jwt-api-latency-p99"]["Threshold"] == thresholds.api_p99_latency_ms
    assert alarms["svc-api-throttles"]["MetricName"] == "Throttles"
    assert alarms["svc-indexer-iterator-age"]["MetricName"] == "IteratorAge"
    assert alarms["svc-indexer-iterator-age"]["Threshold"] == thresholds.stream_iterator_age_seconds * 1000
    assert alarms["svc-indexer-dlq"]["MetricName"] == "ApproximateNumberOfMessagesVisible"
    assert alarms["svc-indexer-dlq"]["Threshold"] == 1
    quarantined = alarms["svc-indexer-quarantined"]
    assert (quarantined["MetricName"], quarantined["Namespace"], quarantined["Statistic"], quarantined["Threshold"]) \
        == ("Quarantined", "memsvc", "Sum", 1)
    assert quarantined["Dimensions"] == [{"Name": "service", "Value": "memsvc-indexer"}]
    embedding = alarms["svc-api-embedding-failures"]  # degraded searches answer 200: no 5xx alarm sees them
    assert (embedding["MetricName"], embedding["Namespace"], embedding["Statistic"], embedding["Threshold"]) \
        == ("EmbeddingFailures", "memsvc", "Sum", thresholds.embedding_failures_per_5min)
    assert embedding["Dimensions"] == [{"Name": "service", "Value": "memsvc-api"}]
    # A query embedding that times out degrades the search but is no EmbeddingFailures: the sum of
    # the per-tenant degraded-answer metric sees both, by a Metrics Insights query.
    degraded = alarms["svc-api-degraded-searches"]
    (query,) = degraded["Metrics"]
    assert query["Expression"] == ('SELECT SUM("memory.search.degraded") FROM SCHEMA("memsvc", service, tenant) '
                                   "WHERE service = 'memsvc-api'")
    assert query["Period"] == 300 and query.get("ReturnData", True) is True
    assert degraded["Threshold"] == thresholds.embedding_failures_per_5min and "MetricName" not in degraded
    topic = only(template, "AWS::SNS::Topic")
    assert "KmsMasterKeyId" in topic
    statements = only(template, "AWS::SNS::TopicPolicy")["PolicyDocument"]["Statement"]
    assert any(s["Effect"] == "Deny" and s["Condition"] == {"Bool": {"aws:SecureTransport": "false"}} for s in statements)
    (publish,) = [s for s in statements if s["Effect"] == "Allow"]
    assert publish["Principal"] == {"Service": "cloudwatch.amazonaws.com"} and publish["Action"] == "sns:Publish"
    assert only(template, "AWS::SNS::Subscription")["Endpoint"] == "ops@example.com"
    assert only(template, "AWS::CloudWatch::Dashboard")["DashboardName"] == "svc"
    parts = only(template, "AWS::CloudWatch::Dashboard")["DashboardBody"]["Fn::Join"][1]
    dashboard = json.loads("".join(p if isinstance(p, str) else "us-east-1" for p in parts))  # Ref: region
    searches = [m[0]["expression"] for w in dashboard["widgets"] for m in w["properties"].get("metrics", [])
                if isinstance(m[0], dict) and "expression" in m[0]]
    for name in ("memory.operations.total", "memory.operations.errors", "memory.operations.latency",
                 "memory.search.results", "memory.search.degraded"):  # seed 001's EMF metrics, found by SEARCH on their dimensions
        assert any(f'MetricName="{name}" service="memsvc-api"' in e for e in searches), name
    assert any(e.startswith("SLICE(SORT(SEARCH('{memsvc,tenant,service}") for e in searches)
    (key,) = resources_of(template, "AWS::KMS::Key").values()
    assert key["Properties"]["EnableKeyRotation"] is True
