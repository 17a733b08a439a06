"""The LangGraph Platform store API (issue 28) on API Gateway: its five routes come from the route
table like every other, behind the same authorizer (JWT, or IAM on the IAM API, listed in its
invoke policy)."""

from __future__ import annotations

import aws_cdk as cdk
from aws_cdk import aws_apigatewayv2_authorizers as authorizers
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_logs as logs
from aws_cdk.assertions import Template

from infra.config import Throttle
from infra.constructs import ServiceHttpApi
from infra.routes import service_routes
from tests.infra.helpers import only, resources_of

STORE_ROUTES = {"PUT /store/items", "GET /store/items", "DELETE /store/items", "POST /store/items/search",
                "POST /store/namespaces"}


def _template(bare_stack, authorizer) -> dict:
    stack = bare_stack()
    handler = lambda_.Function(stack, "Fn", runtime=lambda_.Runtime.PYTHON_3_12, handler="x.handler",
                               code=lambda_.Code.from_inline("def handler(e, c): pass"))
    ServiceHttpApi(stack, "Api", api_name="svc", description="d", handler=handler, routes=service_routes(),
                   authorizer=authorizer, throttle=Throttle(50, 100), public_route_throttle=Throttle(5, 10),
                   access_log_retention=logs.RetentionDays.ONE_MONTH, removal_policy=cdk.RemovalPolicy.DESTROY,
                   invoke_policy_name="svc-invoke")
    return Template.from_stack(stack).to_json()


def _routes(template: dict) -> dict[str, dict]:
    return {r["Properties"]["RouteKey"]: r["Properties"]
            for r in resources_of(template, "AWS::ApiGatewayV2::Route").values()}


def test_the_store_routes_are_behind_the_jwt_authorizer(bare_stack):
    template = _template(bare_stack, authorizers.HttpJwtAuthorizer("Jwt", "https://issuer.example",
                                                                   jwt_audience=["aud"]))
    routes = _routes(template)
    (authorizer_id,) = resources_of(template, "AWS::ApiGatewayV2::Authorizer")
    assert STORE_ROUTES <= set(routes)
    for key in STORE_ROUTES:
        assert routes[key]["AuthorizationType"] == "JWT" and routes[key]["AuthorizerId"] == {"Ref": authorizer_id}


def test_the_store_routes_are_behind_iam_and_in_the_invoke_policy(bare_stack):
    template = _template(bare_stack, authorizers.HttpIamAuthorizer())
    routes = _routes(template)
    for key in STORE_ROUTES:
        assert routes[key]["AuthorizationType"] == "AWS_IAM"
    (statement,) = only(template, "AWS::IAM::ManagedPolicy")["PolicyDocument"]["Statement"]
    assert "/$default/*/store/*" in {r["Fn::Join"][1][-1] for r in statement["Resource"]}
