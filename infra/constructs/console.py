"""The browser console on AWS: its built files in a private bucket, served by CloudFront under
`/console/`, with the JWT API behind the same distribution.

The API is reached through the distribution (same origin) rather than at its own URL: a CORS
rule naming the distribution and a CSP naming the API would make each resource depend on the
other, which CloudFormation cannot create. Same origin also means no CORS at all, and a CSP whose
`connect-src` is only `'self'` and the hosted sign-in domain.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from aws_cdk import DefaultStackSynthesizer, Duration, RemovalPolicy, Stack
from aws_cdk import aws_apigatewayv2 as apigw
from aws_cdk import aws_certificatemanager as acm
from aws_cdk import aws_cloudfront as cloudfront
from aws_cdk import aws_cloudfront_origins as origins
from aws_cdk import aws_iam as iam
from aws_cdk import aws_logs as logs
from aws_cdk import aws_s3 as s3
from aws_cdk import aws_s3_deployment as s3deploy
from constructs import Construct

from infra.nag import acknowledge, acknowledge_wildcard_resources
from memsvc.console_assets import CONSOLE_CSP

__all__ = ["ConsoleSite", "CONSOLE_PREFIX", "console_csp", "api_path_patterns"]

CONSOLE_PREFIX = "console/"  # the bucket's key prefix and the URL path: https://<distribution>/console/

# A viewer-request function on everything that is not the API: `/` and `/console` go to the
# console, a path ending in `/` gets its index.html, and nothing outside `/console/` reaches the
# bucket.
_ROUTER = """\
function handler(event) {
  var request = event.request;
  var uri = request.uri;
  if (uri === "/" || uri === "/console") {
    return {statusCode: 308, statusDescription: "Permanent Redirect", headers: {location: {value: "/console/"}}};
  }
  if (uri.indexOf("/console/") !== 0) {
    return {
      statusCode: 404, statusDescription: "Not Found",
      headers: {"content-type": {value: "application/json"}},
      body: {encoding: "text", data: NOT_FOUND}
    };
  }
  if (uri.endsWith("/")) {
    request.uri = uri + "index.html";
  }
  return request;
}
"""
_NOT_FOUND = {"error": {"code": "NOT_FOUND", "message": "no such page", "retryable": False, "details": {}}}


def console_csp(sign_in_origin: str) -> str:
    """The Content-Security-Policy `memsvc serve` sends, with the hosted UI's origin added to
    `connect-src` for the token exchange."""
    return CONSOLE_CSP.replace("connect-src 'self';", f"connect-src 'self' {sign_in_origin};", 1)


def api_path_patterns(paths: Sequence[str]) -> list[str]:
    """CloudFront path patterns covering the API's route paths by their first segment: `/v1/*`
    for `/v1/...`, the path itself for a one-segment route (`/health`)."""
    patterns = set()
    for path in paths:
        top = path.split("/")[1]
        patterns.add(f"/{top}" if path == f"/{top}" else f"/{top}/*")
    return sorted(patterns)


class ConsoleSite(Construct):
    """A private bucket (S3-managed encryption, TLS only, all public access blocked, no website
    hosting) read only by the distribution through Origin Access Control; the distribution
    redirects HTTP to HTTPS, routes the API's paths to `api` uncached with every viewer header
    but Host, and puts the console's security headers on every response. With `domain_name`
    (and its ACM certificate, in us-east-1) it answers there with TLS 1.2 at least; without,
    on its *.cloudfront.net name, whose TLS policy CloudFront fixes. `publish` uploads the
    built console and its `config.json`."""

    def __init__(
        self,
        scope: Construct,
        id: str,
        *,
        api: apigw.IHttpApi,
        api_paths: Sequence[str],
        sign_in_domain: str,
        removal_policy: RemovalPolicy,
        domain_name: str | None = None,
        certificate_arn: str | None = None,
    ) -> None:
        super().__init__(scope, id)
        if (domain_name is None) != (certificate_arn is None):
            raise ValueError("a console domain name needs its certificate, and a certificate its domain name")
        stack = Stack.of(self)
        self.sign_in_domain = sign_in_domain
        self.bucket = s3.Bucket(
            self, "Bucket",
            block_public_access=s3.BlockPublicAccess.BLOCK_ALL,
            encryption=s3.BucketEncryption.S3_MANAGED,
            enforce_ssl=True,
            object_ownership=s3.ObjectOwnership.BUCKET_OWNER_ENFORCED,
            removal_policy=removal_policy,
        )
        acknowledge(self.bucket, "AwsSolutions-S1",
                    "The bucket holds only the console's built files, which anyone who loads the page receives; the "
                    "distribution is its only reader (Origin Access Control) and the stack's deployment its only "
                    "writer, so server access logs would record nothing that is not already public or a deployment.")
        self.headers = cloudfront.ResponseHeadersPolicy(
            self, "SecurityHeaders",
            comment="memsvc console: strict CSP, HSTS, no sniffing, no framing, no referrer",
            security_headers_behavior=cloudfront.ResponseSecurityHeadersBehavior(
                content_security_policy=cloudfront.ResponseHeadersContentSecurityPolicy(
                    content_security_policy=console_csp(f"https://{sign_in_domain}"), override=True),
                strict_transport_security=cloudfront.ResponseHeadersStrictTransportSecurity(
                    access_control_max_age=Duration.days(365), include_subdomains=True, override=True),
                content_type_options=cloudfront.ResponseHeadersContentTypeOptions(override=True),
                frame_options=cloudfront.ResponseHeadersFrameOptions(
                    frame_option=cloudfront.HeadersFrameOption.DENY, override=True),
                referrer_policy=cloudfront.ResponseHeadersReferrerPolicy(
                    referrer_policy=cloudfront.HeadersReferrerPolicy.NO_REFERRER, override=True),
            ),
        )
        self.router = cloudfront.Function(
            self, "Router",
            runtime=cloudfront.FunctionRuntime.JS_2_0,
            comment="memsvc console: / and /console to /console/, index.html for directories, 404 elsewhere",
            code=cloudfront.FunctionCode.from_inline(
                _ROUTER.replace("NOT_FOUND", json.dumps(json.dumps(_NOT_FOUND, separators=(",", ":"))))),
        )
        api_origin = origins.HttpOrigin(
            f"{api.api_id}.execute-api.{stack.region}.{stack.url_suffix}",
            protocol_policy=cloudfront.OriginProtocolPolicy.HTTPS_ONLY,
            origin_ssl_protocols=[cloudfront.OriginSslPolicy.TLS_V1_2],
        )
        api_behavior = cloudfront.BehaviorOptions(
            origin=api_origin,
            viewer_protocol_policy=cloudfront.ViewerProtocolPolicy.REDIRECT_TO_HTTPS,
            allowed_methods=cloudfront.AllowedMethods.ALLOW_ALL,
            cache_policy=cloudfront.CachePolicy.CACHING_DISABLED,
            # Authorization reaches the API (allowed with caching off); Host would not match its domain.
            origin_request_policy=cloudfront.OriginRequestPolicy.ALL_VIEWER_EXCEPT_HOST_HEADER,
            response_headers_policy=self.headers,
        )
        self.distribution = cloudfront.Distribution(
            self, "Distribution",
            comment=f"memsvc console and API ({stack.stack_name})",
            default_behavior=cloudfront.BehaviorOptions(
                origin=origins.S3BucketOrigin.with_origin_access_control(self.bucket),
                viewer_protocol_policy=cloudfront.ViewerProtocolPolicy.REDIRECT_TO_HTTPS,
                allowed_methods=cloudfront.AllowedMethods.ALLOW_GET_HEAD,
                cache_policy=cloudfront.CachePolicy.CACHING_OPTIMIZED,
                response_headers_policy=self.headers,
                function_associations=[cloudfront.FunctionAssociation(
                    function=self.router, event_type=cloudfront.FunctionEventType.VIEWER_REQUEST)],
            ),
            additional_behaviors={pattern: api_behavior for pattern in api_path_patterns(api_paths)},
            http_version=cloudfront.HttpVersion.HTTP2_AND_3,
            price_class=cloudfront.PriceClass.PRICE_CLASS_100,
            **_viewer_tls(self, domain_name, certificate_arn),
        )
        self._domain_name = domain_name
        acknowledge(self.distribution, "AwsSolutions-CFR1",
                    "The console and the API serve every country the service's users are in; access is decided by "
                    "the JWT authorizer on each API call, not by where a request comes from.")
        acknowledge(self.distribution, "AwsSolutions-CFR2",
                    "The API behind the distribution throttles per stage and authenticates every route but the health "
                    "check; the console is static files. A WAF web ACL is an account-level choice (cost, rules) this "
                    "stack leaves to the operator.")
        acknowledge(self.distribution, "AwsSolutions-CFR3",
                    "The stack has no log bucket; every API request through the distribution is logged by the API "
                    "stage's JSON access log, and the rest are the console's static files, identical for everyone.")
        if domain_name is None:
            acknowledge(self.distribution, "AwsSolutions-CFR4",
                        "Without a console domain in the environment's config the distribution answers on its "
                        "*.cloudfront.net name, whose certificate's TLS policy CloudFront fixes; with one (and its ACM "
                        "certificate) the distribution requires TLS 1.2.")

    @property
    def domain_name(self) -> str:
        """Where browsers reach the console: the configured domain, else the distribution's own."""
        return self._domain_name or self.distribution.distribution_domain_name

    @property
    def url(self) -> str:
        """The console's address, also its sign-in redirect URL: `https://<distribution>/console/`."""
        return f"https://{self.domain_name}/{CONSOLE_PREFIX}"

    def publish(self, *, assets_dir: Path, config: Mapping[str, Any], log_retention: logs.RetentionDays,
                removal_policy: RemovalPolicy) -> s3deploy.BucketDeployment:
        """Upload the built console under `console/` with `config.json` (written at deploy time, so
        it can name the distribution and the app client), drop files a new build no longer has,
        and invalidate the distribution's copies. The files go when the stack does, unless it
        retains its data."""
        if not (assets_dir / "index.html").is_file():
            raise ValueError(f"{assets_dir} has no index.html: build the console first (make console)")
        log_group = logs.LogGroup(self, "DeploymentLogs", retention=log_retention, removal_policy=removal_policy)
        deployment = s3deploy.BucketDeployment(
            self, "Files",
            sources=[s3deploy.Source.asset(str(assets_dir)), s3deploy.Source.json_data("config.json", dict(config))],
            destination_bucket=self.bucket,
            destination_key_prefix=CONSOLE_PREFIX,
            distribution=self.distribution,
            distribution_paths=[f"/{CONSOLE_PREFIX}*"],
            prune=True,
            retain_on_delete=removal_policy is RemovalPolicy.RETAIN,
            log_group=log_group,
        )
        # CDK grants the handler invalidations on every distribution of the account; it needs ours.
        deployment.handler_role.add_to_principal_policy(iam.PolicyStatement(
            effect=iam.Effect.DENY, actions=["cloudfront:CreateInvalidation", "cloudfront:GetInvalidation"],
            not_resources=[self.distribution.distribution_arn]))
        self._acknowledge_deployment_handler(deployment)
        return deployment

    def _acknowledge_deployment_handler(self, deployment: s3deploy.BucketDeployment) -> None:
        """CDK builds the handler that copies the files (one per stack, beside the stack's own
        functions) and its role; these findings are about CDK's choices there."""
        stack = Stack.of(self)
        handler = next(child for child in stack.node.children
                       if child.node.id.startswith("Custom::CDKBucketDeployment"))
        acknowledge(handler.node.default_child, "AwsSolutions-L1",
                    "CDK's BucketDeployment handler (it copies the console's files at deploy time) runs on the Python "
                    "runtime aws-cdk-lib ships it with; upgrading aws-cdk-lib moves it, this stack cannot.")
        role = deployment.handler_role
        acknowledge(role, "AwsSolutions-IAM4[Policy::arn:<AWS::Partition>:iam::aws:policy/service-role/"
                          "AWSLambdaBasicExecutionRole]",
                    "CDK's BucketDeployment handler role carries AWSLambdaBasicExecutionRole to write its logs (to "
                    "the console's deployment log group, with the environment's retention); CDK builds that role.")
        grants = ("CDK's BucketDeployment grants its handler read on the CDK asset bucket (the console's zip and "
                  "config.json) and read-write on the console bucket (an `aws s3 sync --delete` under console/), "
                  "with aws-cdk-lib's grant action groups; no other bucket is named.")
        for action in ("s3:GetBucket*", "s3:GetObject*", "s3:List*", "s3:Abort*", "s3:DeleteObject*"):
            acknowledge(role, f"AwsSolutions-IAM5[Action::{action}]", grants)
        asset_bucket = cdk_asset_bucket_name(stack)
        acknowledge_wildcard_resources(role, [self.bucket.arn_for_objects("*"), f"arn:aws:s3:::{asset_bucket}/*"],
                                       grants)
        acknowledge(role, "AwsSolutions-IAM5[Resource::*]",
                    "cloudfront:CreateInvalidation and GetInvalidation, which CDK's BucketDeployment grants on every "
                    "distribution; a Deny on every distribution but this stack's own leaves the handler only the "
                    "invalidation of /console/* it makes after each upload.")


def _viewer_tls(scope: Construct, domain_name: str | None, certificate_arn: str | None) -> dict[str, Any]:
    if domain_name is None or certificate_arn is None:
        return {}
    return {
        "domain_names": [domain_name],
        "certificate": acm.Certificate.from_certificate_arn(scope, "Certificate", certificate_arn),
        "minimum_protocol_version": cloudfront.SecurityPolicyProtocol.TLS_V1_2_2021,
        "ssl_support_method": cloudfront.SSLMethod.SNI,
    }


def cdk_asset_bucket_name(stack: Stack) -> str:
    """The CDK bootstrap bucket the stack's file assets are uploaded to."""
    qualifier = stack.synthesizer.bootstrap_qualifier or DefaultStackSynthesizer.DEFAULT_QUALIFIER
    return f"cdk-{qualifier}-assets-{stack.account}-{stack.region}"
