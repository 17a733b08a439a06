"""One HTTP API (API Gateway v2) in front of the API function, with one way in.

API Gateway allows one authorizer per route, so the stack builds two of these on the same
function: one whose routes use a JWT authorizer and one whose routes use IAM (SigV4). Both
serve the same paths, so a client picks its way in by base URL alone.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence

import jsii
from aws_cdk import Duration, RemovalPolicy
from aws_cdk import aws_apigateway as apigw_v1
from aws_cdk import aws_apigatewayv2 as apigw
from aws_cdk import aws_apigatewayv2_integrations as integrations
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_logs as logs
from constructs import Construct

from infra.config import Throttle
from infra.nag import acknowledge, acknowledge_wildcard_resources
from infra.routes import ServiceRoute

__all__ = ["ServiceHttpApi", "ACCESS_LOG_FORMAT", "STAGE", "authenticated_paths"]

STAGE = "$default"  # URLs have no stage segment: https://<id>.execute-api.<region>.amazonaws.com/v1/...

# One JSON line per request. The route *template* only (`GET /v1/memories`): never the path or
# the query string, which carry namespace segments, keys and memory ids. Who called: the JWT
# subject or the IAM principal (whichever applies; the other is "-").
ACCESS_LOG_FORMAT = {
    "requestId": "$context.requestId",
    "time": "$context.requestTime",
    "ip": "$context.identity.sourceIp",
    "userAgent": "$context.identity.userAgent",
    "routeKey": "$context.routeKey",
    "status": "$context.status",
    "protocol": "$context.protocol",
    "responseLength": "$context.responseLength",
    "responseLatencyMs": "$context.responseLatency",
    "integrationLatencyMs": "$context.integrationLatency",
    "integrationStatus": "$context.integrationStatus",
    "integrationError": "$context.integrationErrorMessage",
    "error": "$context.error.message",
    "authorizerError": "$context.authorizer.error",
    "jwtSub": "$context.authorizer.claims.sub",
    "iamPrincipal": "$context.identity.userArn",
}


@jsii.implements(apigw.IAccessLogSettings)
class _AccessLogSettings:
    def __init__(self, destination: apigw.IAccessLogDestination, format: apigw_v1.AccessLogFormat) -> None:
        self._destination = destination
        self._format = format

    @property
    def destination(self) -> apigw.IAccessLogDestination:
        return self._destination

    @property
    def format(self) -> apigw_v1.AccessLogFormat:
        return self._format


def _construct_id(route: ServiceRoute) -> str:
    return route.method.title() + "".join(p.strip("{}").title() for p in re.split(r"[/._-]", route.path) if p)


class ServiceHttpApi(Construct):
    """`routes` on `handler`, each with `authorizer` except the public ones; a `$default` stage
    with throttling (tighter on public routes), JSON access logs and CORS only for
    `cors_allowed_origins`. With `invoke_policy_name`, a managed policy granting
    `execute-api:Invoke` on the authenticated routes is created for callers to attach."""

    def __init__(
        self,
        scope: Construct,
        id: str,
        *,
        api_name: str,
        description: str,
        handler: lambda_.IFunction,
        routes: Sequence[ServiceRoute],
        authorizer: apigw.IHttpRouteAuthorizer,
        throttle: Throttle,
        public_route_throttle: Throttle,
        access_log_retention: logs.RetentionDays,
        removal_policy: RemovalPolicy,
        cors_allowed_origins: Sequence[str] = (),
        invoke_policy_name: str | None = None,
    ) -> None:
        super().__init__(scope, id)
        cors = None
        if cors_allowed_origins:
            cors = apigw.CorsPreflightOptions(
                allow_origins=list(cors_allowed_origins),
                allow_methods=[apigw.CorsHttpMethod.GET, apigw.CorsHttpMethod.PUT,
                               apigw.CorsHttpMethod.POST, apigw.CorsHttpMethod.DELETE],
                allow_headers=["authorization", "content-type"],
                expose_headers=["x-request-id", "retry-after"],
                max_age=Duration.hours(1),
            )
        self.api = apigw.HttpApi(self, "Api", api_name=api_name, description=description,
                                 create_default_stage=False, cors_preflight=cors)
        self.access_logs = logs.LogGroup(
            self, "AccessLogs", log_group_name=f"/aws/apigateway/{api_name}",
            retention=access_log_retention, removal_policy=removal_policy)
        self.stage = apigw.HttpStage(
            self, "Stage",
            http_api=self.api,
            stage_name=STAGE,
            auto_deploy=True,
            throttle=apigw.ThrottleSettings(rate_limit=throttle.rate_per_second, burst_limit=throttle.burst),
            access_log_settings=_AccessLogSettings(
                apigw.LogGroupLogDestination(self.access_logs),
                apigw_v1.AccessLogFormat.custom(json.dumps(ACCESS_LOG_FORMAT, separators=(",", ":")))),
        )
        # One permission for the API (not one per route): the Lambda's resource policy stays
        # small, and it names this API's ARN, so no other API can invoke the function.
        integration = integrations.HttpLambdaIntegration(
            "Lambda", handler, scope_permission_to_route=False,
            payload_format_version=apigw.PayloadFormatVersion.VERSION_2_0)
        self.routes: dict[str, apigw.HttpRoute] = {}
        public_settings = {}
        for route in routes:
            http_route = apigw.HttpRoute(
                self, _construct_id(route),
                http_api=self.api,
                route_key=apigw.HttpRouteKey.with_(route.path, apigw.HttpMethod(route.method)),
                integration=integration,
                authorizer=apigw.HttpNoneAuthorizer() if route.public else authorizer,
            )
            self.routes[route.route_key] = http_route
            if route.public:
                public_settings[route.route_key] = {
                    "ThrottlingRateLimit": public_route_throttle.rate_per_second,
                    "ThrottlingBurstLimit": public_route_throttle.burst,
                }
                self.stage.node.add_dependency(http_route)  # route settings name the route
                acknowledge(http_route, "AwsSolutions-APIG4",
                            f"{route.route_key} is the health check: it must answer uptime probes without "
                            "credentials, returns only each component's status (no data, no tenant), and has "
                            "its own tight throttle. It is the only route without an authorizer.")
        if public_settings:
            stage_resource = self.stage.node.default_child
            assert isinstance(stage_resource, apigw.CfnStage)
            stage_resource.add_property_override("RouteSettings", public_settings)

        self.invoke_policy: iam.ManagedPolicy | None = None
        if invoke_policy_name:
            route_arns = [self.api.arn_for_execute_api("*", path, STAGE) for path in authenticated_paths(routes)]
            self.invoke_policy = iam.ManagedPolicy(
                self, "InvokePolicy",
                managed_policy_name=invoke_policy_name,
                description=f"Call every authenticated route of {api_name} (attach to trusted backends)",
                statements=[iam.PolicyStatement(sid="InvokeServiceRoutes", actions=["execute-api:Invoke"],
                                                resources=route_arns)],
            )
            acknowledge_wildcard_resources(
                self.invoke_policy, route_arns,
                "Every authenticated route, by the first segment of its path (/v1, /admin, /store), on this "
                "API and stage only: no public route shares one. One ARN per route would pass IAM's 6,144 "
                "characters for a managed policy at about 65 routes.")

    @property
    def url(self) -> str:
        """The base URL, ending in `/` (the `$default` stage adds no path)."""
        return f"{self.api.api_endpoint}/"


def authenticated_paths(routes: Sequence[ServiceRoute]) -> list[str]:
    """The authenticated routes by the first segment of their paths (`/v1/*`; `/metrics` itself
    when it is a route), which no public route may share: a wildcard under each grants exactly
    the authenticated routes, today's and tomorrow's."""
    def top(route: ServiceRoute) -> str:
        return route.path.split("/")[1]

    shared = {top(r) for r in routes if not r.public} & {top(r) for r in routes if r.public}
    assert not shared, f"a public route shares a path's first segment with authenticated ones: {shared}"
    return sorted({f"/{top(r)}" if r.path == f"/{top(r)}" else f"/{top(r)}/*" for r in routes if not r.public})
