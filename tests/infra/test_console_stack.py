"""The console on AWS (infra/constructs/console.py): a private bucket behind CloudFront with
Origin Access Control, the JWT API behind the same distribution, strict security headers, the
hosted UI and the console's app client, config.json, and the switch that leaves it all out."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from dataclasses import replace
from pathlib import Path

import aws_cdk as cdk
import pytest
from cdk_nag import AwsSolutionsChecks

from infra.config import ENVIRONMENTS, ExternalJwtIssuer
from infra.constructs.console import ConsoleSite, api_path_patterns, console_csp
from infra.routes import service_routes
from infra.stack import MemsvcStack
from tests.infra.helpers import CONSOLE_PLACEHOLDER, as_list, new_app, only, resources_of

ENVS = sorted(ENVIRONMENTS)
CACHING_DISABLED = "4135ea2d-6df8-44a3-9df3-4b5a84be39ad"  # CloudFront's managed policies' ids
CACHING_OPTIMIZED = "658327ea-f89d-4fab-a63d-7e88639e58f6"
ALL_VIEWER_EXCEPT_HOST_HEADER = "b689b0a8-53d0-40ab-baf2-68738e2966ac"


def _logical(template: dict, type_: str, prefix: str) -> str:
    (found,) = [k for k in resources_of(template, type_) if k.startswith(prefix)]
    return found


def _distribution(template: dict) -> dict:
    return only(template, "AWS::CloudFront::Distribution")["DistributionConfig"]


def _console_url(template: dict) -> dict:
    distribution = _logical(template, "AWS::CloudFront::Distribution", "ConsoleDistribution")
    return {"Fn::Join": ["", ["https://", {"Fn::GetAtt": [distribution, "DomainName"]}, "/console/"]]}


def _sign_in_domain(template: dict) -> dict:
    domain = _logical(template, "AWS::Cognito::UserPoolDomain", "UsersPoolHostedUi")
    return {"Fn::Join": ["", [{"Ref": domain}, ".auth.us-east-1.amazoncognito.com"]]}


@pytest.mark.parametrize("env", ENVS)
def test_the_bucket_is_private_and_read_only_by_the_distribution(assembly, env):
    t = assembly.templates[env]
    bucket_id = _logical(t, "AWS::S3::Bucket", "ConsoleBucket")
    bucket = only(t, "AWS::S3::Bucket")
    assert bucket["PublicAccessBlockConfiguration"] == {
        "BlockPublicAcls": True, "BlockPublicPolicy": True, "IgnorePublicAcls": True, "RestrictPublicBuckets": True}
    assert bucket["BucketEncryption"]["ServerSideEncryptionConfiguration"] == [
        {"ServerSideEncryptionByDefault": {"SSEAlgorithm": "AES256"}}]
    assert "WebsiteConfiguration" not in bucket
    statements = only(t, "AWS::S3::BucketPolicy")["PolicyDocument"]["Statement"]
    (deny,) = [s for s in statements if s["Effect"] == "Deny"]
    assert deny["Condition"] == {"Bool": {"aws:SecureTransport": "false"}}
    (allow,) = [s for s in statements if s["Effect"] == "Allow"]
    distribution_id = _logical(t, "AWS::CloudFront::Distribution", "ConsoleDistribution")
    assert allow["Principal"] == {"Service": "cloudfront.amazonaws.com"} and allow["Action"] == "s3:GetObject"
    assert {"Ref": distribution_id} in allow["Condition"]["StringEquals"]["AWS:SourceArn"]["Fn::Join"][1]
    oac_id = _logical(t, "AWS::CloudFront::OriginAccessControl", "ConsoleDistribution")
    oac = only(t, "AWS::CloudFront::OriginAccessControl")["OriginAccessControlConfig"]
    assert (oac["OriginAccessControlOriginType"], oac["SigningBehavior"], oac["SigningProtocol"]) == (
        "s3", "always", "sigv4")
    (s3_origin,) = [o for o in _distribution(t)["Origins"] if "S3OriginConfig" in o]
    assert s3_origin["DomainName"] == {"Fn::GetAtt": [bucket_id, "RegionalDomainName"]}
    assert s3_origin["OriginAccessControlId"] == {"Fn::GetAtt": [oac_id, "Id"]}
    assert s3_origin["S3OriginConfig"] == {"OriginAccessIdentity": ""}


@pytest.mark.parametrize("env", ENVS)
def test_every_response_carries_the_strict_headers_over_https_only(assembly, env):
    t = assembly.templates[env]
    config = _distribution(t)
    behaviors = [config["DefaultCacheBehavior"], *config["CacheBehaviors"]]
    policy_id = _logical(t, "AWS::CloudFront::ResponseHeadersPolicy", "ConsoleSecurityHeaders")
    for behavior in behaviors:
        assert behavior["ViewerProtocolPolicy"] == "redirect-to-https"
        assert behavior["ResponseHeadersPolicyId"] == {"Ref": policy_id}
    headers = only(t, "AWS::CloudFront::ResponseHeadersPolicy")["ResponseHeadersPolicyConfig"]["SecurityHeadersConfig"]
    csp = headers["ContentSecurityPolicy"]
    assert csp["Override"] is True
    parts = csp["ContentSecurityPolicy"]["Fn::Join"][1]
    assert parts[1] == {"Ref": _logical(t, "AWS::Cognito::UserPoolDomain", "UsersPoolHostedUi")}
    text = "".join(p if isinstance(p, str) else "SIGNIN" for p in parts)
    assert text == console_csp("https://SIGNIN.auth.us-east-1.amazoncognito.com")
    directives = dict(d.strip().split(" ", 1) for d in text.split(";"))
    assert directives["script-src"] == "'self'" and directives["default-src"] == "'none'"
    assert directives["connect-src"] == "'self' https://SIGNIN.auth.us-east-1.amazoncognito.com"
    assert directives["frame-ancestors"] == "'none'" and directives["form-action"] == "'none'"
    assert "unsafe" not in text and "*" not in text
    assert headers["StrictTransportSecurity"]["AccessControlMaxAgeSec"] >= 31536000
    assert headers["ContentTypeOptions"] == {"Override": True}
    assert headers["FrameOptions"] == {"FrameOption": "DENY", "Override": True}
    assert headers["ReferrerPolicy"] == {"ReferrerPolicy": "no-referrer", "Override": True}


@pytest.mark.parametrize("env", ENVS)
def test_the_api_is_behind_the_same_distribution_uncached_and_without_cors(assembly, env):
    """Same origin: the console calls `/v1/...` on the distribution, which forwards every header
    but Host (the bearer token included) to the JWT API over TLS 1.2, caching nothing."""
    t = assembly.templates[env]
    config = _distribution(t)
    (api_origin,) = [o for o in config["Origins"] if "CustomOriginConfig" in o]
    jwt_api = next(k for k, r in resources_of(t, "AWS::ApiGatewayV2::Api").items()
                   if r["Properties"]["Name"] == f"memsvc-{env}-jwt")
    assert api_origin["DomainName"]["Fn::Join"][1][0] == {"Ref": jwt_api}
    assert api_origin["CustomOriginConfig"] == {"OriginProtocolPolicy": "https-only", "OriginSSLProtocols": ["TLSv1.2"]}
    patterns = {b["PathPattern"]: b for b in config["CacheBehaviors"]}
    assert set(patterns) == set(api_path_patterns([r.path for r in service_routes()]))
    assert {"/v1/*", "/admin/*", "/health"} <= set(patterns)
    for behavior in patterns.values():
        assert behavior["TargetOriginId"] == api_origin["Id"]
        assert behavior["CachePolicyId"] == CACHING_DISABLED
        assert behavior["OriginRequestPolicyId"] == ALL_VIEWER_EXCEPT_HOST_HEADER
        assert {"GET", "PUT", "POST", "DELETE"} <= set(behavior["AllowedMethods"])
    default = config["DefaultCacheBehavior"]
    assert default["TargetOriginId"] != api_origin["Id"] and default["CachePolicyId"] == CACHING_OPTIMIZED
    assert default["AllowedMethods"] == ["GET", "HEAD"]
    router = _logical(t, "AWS::CloudFront::Function", "ConsoleRouter")
    assert default["FunctionAssociations"] == [
        {"EventType": "viewer-request", "FunctionARN": {"Fn::GetAtt": [router, "FunctionARN"]}}]
    assert "CorsConfiguration" not in resources_of(t, "AWS::ApiGatewayV2::Api")[jwt_api]["Properties"]


def test_api_path_patterns_cover_each_first_segment_once():
    assert api_path_patterns(["/v1/memories", "/v1/x/y", "/health", "/admin/v1/a", "/openapi.json"]) == [
        "/admin/*", "/health", "/openapi.json", "/v1/*"]


def _run_router(template: dict, uris: list[str]) -> list[dict]:
    code = only(template, "AWS::CloudFront::Function")["FunctionCode"]
    script = code + "\nconst uris = JSON.parse(process.argv[1]);\n" + \
        "console.log(JSON.stringify(uris.map((uri) => handler({request: {uri: uri, headers: {}}}))));\n"
    out = subprocess.run([shutil.which("node") or "node", "-e", script, json.dumps(uris)],
                         capture_output=True, text=True, check=True, timeout=60)
    return json.loads(out.stdout)


def test_the_router_serves_only_the_console(assembly):
    t = assembly.templates["dev"]
    assert only(t, "AWS::CloudFront::Function")["FunctionConfig"]["Runtime"] == "cloudfront-js-2.0"
    root, bare, index, script, other, traversal = _run_router(
        t, ["/", "/console", "/console/", "/console/js/main.js", "/private/secret", "/consolex/index.html"])
    for redirect in (root, bare):
        assert redirect["statusCode"] == 308 and redirect["headers"]["location"] == {"value": "/console/"}
    assert index["uri"] == "/console/index.html"
    assert script["uri"] == "/console/js/main.js"
    for refused in (other, traversal):
        assert refused["statusCode"] == 404
        assert json.loads(refused["body"]["data"])["error"]["code"] == "NOT_FOUND"


@pytest.mark.parametrize("env", ENVS)
def test_the_console_client_has_the_code_grant_only_back_to_the_console(assembly, env):
    t = assembly.templates[env]
    clients = {k: r["Properties"] for k, r in resources_of(t, "AWS::Cognito::UserPoolClient").items()}
    console_id = _logical(t, "AWS::Cognito::UserPoolClient", "UsersPoolConsoleClient")
    console = clients.pop(console_id)
    assert console["AllowedOAuthFlows"] == ["code"] and console["AllowedOAuthFlowsUserPoolClient"] is True
    assert sorted(console["AllowedOAuthScopes"]) == ["email", "openid", "profile"]
    assert console["CallbackURLs"] == console["LogoutURLs"] == [_console_url(t)]
    assert console["SupportedIdentityProviders"] == ["COGNITO"]
    assert console["GenerateSecret"] is False
    assert console["ExplicitAuthFlows"] == ["ALLOW_REFRESH_TOKEN_AUTH"]
    assert console["PreventUserExistenceErrors"] == "ENABLED"
    assert (console["IdTokenValidity"], console["AccessTokenValidity"]) == (60, 60)
    assert console["TokenValidityUnits"]["IdToken"] == console["TokenValidityUnits"]["AccessToken"] == "minutes"
    assert "custom:tenant_id" in console["ReadAttributes"] and "custom:tenant_id" not in console["WriteAttributes"]
    # The service client has no OAuth at all: the hosted UI serves the console only.
    (service,) = clients.values()
    assert service["AllowedOAuthFlowsUserPoolClient"] is False and "AllowedOAuthFlows" not in service
    # ...and keeps every flow an agent or script signs in with, and its month-long refresh.
    assert sorted(service["ExplicitAuthFlows"]) == [
        "ALLOW_REFRESH_TOKEN_AUTH", "ALLOW_USER_PASSWORD_AUTH", "ALLOW_USER_SRP_AUTH"]
    assert (service["RefreshTokenValidity"], service["TokenValidityUnits"]["RefreshToken"]) == (30 * 24 * 60, "minutes")
    assert service["GenerateSecret"] is False and "custom:tenant_id" not in service["WriteAttributes"]
    domain = only(t, "AWS::Cognito::UserPoolDomain")
    assert domain["Domain"] == {"Fn::Join": ["", [f"memsvc-{env}-", {"Ref": "AWS::AccountId"}]]}
    (authorizer,) = resources_of(t, "AWS::ApiGatewayV2::Authorizer").values()
    assert {"Ref": console_id} in authorizer["Properties"]["JwtConfiguration"]["Audience"]


@pytest.mark.parametrize("env", ENVS)
def test_config_json_names_the_hosted_ui_the_client_and_the_id_token(assembly, env):
    t = assembly.templates[env]
    (deployment,) = resources_of(t, "Custom::CDKBucketDeployment").values()
    props = deployment["Properties"]
    assert props["DestinationBucketName"] == {"Ref": _logical(t, "AWS::S3::Bucket", "ConsoleBucket")}
    assert props["DestinationBucketKeyPrefix"] == "console/" and props["Prune"] is True
    assert props["DistributionId"] == {"Ref": _logical(t, "AWS::CloudFront::Distribution", "ConsoleDistribution")}
    assert props["DistributionPaths"] == ["/console/*"]
    assert props["RetainOnDelete"] is ENVIRONMENTS[env].retain_data
    files, config_json = (assembly.outdir / f"asset.{key.removesuffix('.zip')}" for key in props["SourceObjectKeys"])
    assert (files / "index.html").read_text() == (CONSOLE_PLACEHOLDER / "index.html").read_text()
    markers = props["SourceMarkers"][1]
    text = (config_json / "config.json").read_text()
    config = json.loads(re.sub(r"<<marker:0xbaba:(\d+)>>", lambda m: json.dumps(f"marker{m[1]}"), text))
    auth = config.pop("auth")
    assert config == {"api_base": ""}  # same origin: the API is behind the distribution

    def marker(name: str) -> dict:
        join = markers[f"<<marker:0xbaba:{name.removeprefix('marker')}>>"]["Fn::Join"]
        return {"Fn::Join": ["", [p.strip('"') if isinstance(p, str) else p for p in join[1] if p != '"']]}

    assert {k: marker(v) if k in ("domain", "client_id", "redirect_uri") else v for k, v in auth.items()} == {
        "mode": "cognito", "domain": _sign_in_domain(t),
        "client_id": {"Fn::Join": ["", [{"Ref": _logical(t, "AWS::Cognito::UserPoolClient",
                                                         "UsersPoolConsoleClient")}]]},
        "redirect_uri": _console_url(t), "scopes": ["openid", "email", "profile"], "token": "id"}


@pytest.mark.parametrize("env", ENVS)
def test_the_files_handler_writes_only_the_console_bucket(assembly, env):
    t = assembly.templates[env]
    policy = next(r["Properties"] for k, r in resources_of(t, "AWS::IAM::Policy").items()
                  if k.startswith("CustomCDKBucketDeployment"))
    bucket = _logical(t, "AWS::S3::Bucket", "ConsoleBucket")
    writes = ("s3:PutObject", "s3:DeleteObject*")
    for statement in policy["PolicyDocument"]["Statement"]:
        actions = as_list(statement["Action"])
        if any(a in actions for a in writes):
            assert json.dumps(statement["Resource"]).count("ConsoleBucket") == len(statement["Resource"])
            assert bucket in json.dumps(statement["Resource"])
        elif any(a.startswith("cloudfront:") for a in actions):
            assert sorted(actions) == ["cloudfront:CreateInvalidation", "cloudfront:GetInvalidation"]
        else:
            assert all(a.startswith(("s3:Get", "s3:List")) for a in actions)
            assert "cdk-hnb659fds-assets" in json.dumps(statement["Resource"])
    # CDK allows invalidating every distribution; a Deny leaves the handler only this stack's own.
    distribution = _logical(t, "AWS::CloudFront::Distribution", "ConsoleDistribution")
    (deny,) = [st for st in policy["PolicyDocument"]["Statement"] if st["Effect"] == "Deny"]
    assert sorted(as_list(deny["Action"])) == ["cloudfront:CreateInvalidation", "cloudfront:GetInvalidation"]
    assert distribution in json.dumps(deny["NotResource"]) and "Resource" not in deny


@pytest.mark.parametrize("env", ENVS)
def test_outputs_name_the_console_and_its_sign_in_domain(assembly, env):
    outputs = assembly.templates[env]["Outputs"]
    assert outputs["ConsoleUrl"]["Value"] == _console_url(assembly.templates[env])
    assert outputs["ConsoleSignInDomain"]["Value"] == _sign_in_domain(assembly.templates[env])


def test_the_switch_off_leaves_the_console_out(tmp_path):
    config = replace(ENVIRONMENTS["dev"], name="plain", console=False, console_assets=CONSOLE_PLACEHOLDER)
    app = new_app(tmp_path)
    MemsvcStack(app, "Plain", config=config)
    t = json.loads(json.dumps(app.synth().get_stack_by_name("memsvc-plain").template))
    for type_ in ("AWS::S3::Bucket", "AWS::CloudFront::Distribution", "AWS::CloudFront::Function",
                  "AWS::CloudFront::ResponseHeadersPolicy", "AWS::Cognito::UserPoolDomain",
                  "Custom::CDKBucketDeployment"):
        assert not resources_of(t, type_), type_
    (client,) = resources_of(t, "AWS::Cognito::UserPoolClient")
    (authorizer,) = resources_of(t, "AWS::ApiGatewayV2::Authorizer").values()
    assert authorizer["Properties"]["JwtConfiguration"]["Audience"] == [{"Ref": client}]
    assert not {"ConsoleUrl", "ConsoleSignInDomain"} & set(t["Outputs"])
    # no files handler: the stack's own six functions and their dependencies layer
    assert len(resources_of(t, "AWS::Lambda::Function")) == 6
    assert len(resources_of(t, "AWS::Lambda::LayerVersion")) == 1


def test_the_console_needs_the_stacks_user_pool():
    with pytest.raises(ValueError, match="console=False"):
        replace(ENVIRONMENTS["dev"], jwt_issuer=ExternalJwtIssuer("https://login.example.com/", ("memsvc",)))
    assert replace(ENVIRONMENTS["dev"], console=False,
                   jwt_issuer=ExternalJwtIssuer("https://login.example.com/", ("memsvc",))).console is False


def test_publishing_refuses_a_directory_without_a_built_console(bare_stack, tmp_path: Path):
    stack = bare_stack()
    api = cdk.aws_apigatewayv2.HttpApi(stack, "Api")
    site = ConsoleSite(stack, "Console", api=api, api_paths=["/v1/x"], sign_in_domain="signin.example.com",
                       removal_policy=cdk.RemovalPolicy.DESTROY)
    with pytest.raises(ValueError, match="make console"):
        site.publish(assets_dir=tmp_path, config={}, log_retention=cdk.aws_logs.RetentionDays.ONE_DAY,
                     removal_policy=cdk.RemovalPolicy.DESTROY)


def test_a_console_domain_gets_its_certificate_and_tls_1_2(tmp_path):
    certificate = "arn:aws:acm:us-east-1:123456789012:certificate/abc"
    config = replace(ENVIRONMENTS["dev"], name="branded", console_assets=CONSOLE_PLACEHOLDER,
                     console_domain="console.example.com", console_certificate_arn=certificate)
    app = new_app(tmp_path)
    MemsvcStack(app, "Branded", config=config)
    cdk.Validations.of(app).add_plugins(AwsSolutionsChecks(app, write_suppressions_to_cloud_formation=True))
    synthesized = app.synth()  # raises on any finding not acknowledged: CFR4 is met, not acknowledged
    t = json.loads(json.dumps(synthesized.get_stack_by_name("memsvc-branded").template))
    distribution = _distribution(t)
    assert distribution["Aliases"] == ["console.example.com"]
    assert distribution["ViewerCertificate"] == {
        "AcmCertificateArn": certificate, "MinimumProtocolVersion": "TLSv1.2_2021", "SslSupportMethod": "sni-only"}
    console = next(
        r["Properties"] for k, r in resources_of(t, "AWS::Cognito::UserPoolClient").items()
        if k.startswith("UsersPoolConsoleClient"))
    assert console["CallbackURLs"] == ["https://console.example.com/console/"]
    assert t["Outputs"]["ConsoleUrl"]["Value"] == "https://console.example.com/console/"
    def suppressed(type_: str) -> set[str]:
        return {rule["id"] for r in resources_of(t, type_).values()
                for rule in r.get("Metadata", {}).get("cdk_nag", {}).get("rules_to_suppress", [])}

    assert "AwsSolutions-CFR4" not in suppressed("AWS::CloudFront::Distribution")
    assert "AwsSolutions-CFR3" in suppressed("AWS::CloudFront::Distribution")  # the others stay
    with pytest.raises(ValueError, match="us-east-1"):
        replace(config, console_certificate_arn="arn:aws:acm:eu-west-1:123456789012:certificate/abc")
    with pytest.raises(ValueError, match="needs its certificate"):
        MemsvcStack(new_app(), "Half", config=replace(config, name="half", console_certificate_arn=None))
