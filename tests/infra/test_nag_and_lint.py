"""cdk-nag's AWS Solutions checks and cfn-lint, over both synthesized environments."""

from __future__ import annotations

import json

from infra.constructs.api import authenticated_paths
from infra.lint import IGNORED_CHECKS, lint_templates
from infra.routes import service_routes

# Every suppression in the app, by finding. Adding one means adding it here, with a reason in
# the code that a reviewer accepts (the reasons are copied into the templates' metadata).
EXPECTED_ACKNOWLEDGMENTS = {
    "AwsSolutions-IAM5[Resource::*]",  # X-Ray and dynamodb:ListStreams have no resource type
    "AwsSolutions-L1",  # python3.12, deliberately (the layer's target)
    "AwsSolutions-SQS3",  # the DLQ itself has no DLQ
    "AwsSolutions-APIG4",  # GET /health is public
    # the IAM invoke policy: every method of the authenticated routes, by their paths' first segment
    *(f"AwsSolutions-IAM5[Resource::arn:aws:execute-api:us-east-1:<AWS::AccountId>:<IamApi1CA48018>"
      f"/$default/*{path}]" for path in authenticated_paths(service_routes())),
    # the console (infra/constructs/console.py): its bucket and distribution...
    "AwsSolutions-S1", "AwsSolutions-CFR1", "AwsSolutions-CFR2", "AwsSolutions-CFR3", "AwsSolutions-CFR4",
    # ...and CDK's handler that copies its files: CDK's runtime, role and grants
    "AwsSolutions-IAM4[Policy::arn:<AWS::Partition>:iam::aws:policy/service-role/AWSLambdaBasicExecutionRole]",
    *(f"AwsSolutions-IAM5[Action::{action}]"
      for action in ("s3:GetBucket*", "s3:GetObject*", "s3:List*", "s3:Abort*", "s3:DeleteObject*")),
    "AwsSolutions-IAM5[Resource::<ConsoleBucket86B6957C.Arn>/*]",
    "AwsSolutions-IAM5[Resource::arn:aws:s3:::cdk-hnb659fds-assets-<AWS::AccountId>-us-east-1/*]",
}


def test_no_unacknowledged_cdk_nag_finding(assembly):
    violations = [
        f"{v['ruleName']} ({v['severity']}): {[r['constructPath'] for r in v['violatingResources']]}"
        for report in assembly.nag_report["pluginReports"] for v in report["violations"]
    ]
    assert violations == [], "\n".join(violations)
    assert assembly.synth_error is None


def test_the_checks_are_live(tmp_path):
    """The same wiring reports a finding when there is one (so a clean report means something)."""
    import aws_cdk as cdk
    from aws_cdk import aws_sqs as sqs
    from cdk_nag import AwsSolutionsChecks

    from tests.infra.helpers import new_app

    app = new_app(tmp_path)
    stack = cdk.Stack(app, "Canary", env=cdk.Environment(region="us-east-1"))
    sqs.Queue(stack, "PlainQueue")  # no TLS-only policy, no DLQ
    cdk.Validations.of(app).add_plugins(AwsSolutionsChecks(app))
    try:
        app.synth()
    except Exception:
        pass
    report = json.loads((tmp_path / "policy-validation-report.json").read_text())
    rules = {v["ruleName"] for r in report["pluginReports"] for v in r["violations"]}
    assert {"AwsSolutions-SQS3", "AwsSolutions-SQS4"} <= rules


def test_every_suppression_is_known_and_explained(assembly):
    found: dict[str, set[str]] = {}
    for env, template in assembly.templates.items():
        for logical, resource in template["Resources"].items():
            for rule in resource.get("Metadata", {}).get("cdk_nag", {}).get("rules_to_suppress", []):
                assert len(rule["reason"]) >= 80, f"{env} {logical} {rule['id']}: reason too thin"
                found.setdefault(rule["id"], set()).add(logical)
    assert set(found) == EXPECTED_ACKNOWLEDGMENTS
    # Suppressions sit on the few resources they are about, not on the stack.
    assert found["AwsSolutions-APIG4"] == {"JwtApiGetHealth9FD64276", "IamApiGetHealthC0EF913C"}
    assert {r.rstrip("0123456789ABCDEF") for r in found["AwsSolutions-L1"]} == {
        "ApiServiceFunction", "IndexerServiceFunction", "TimelineServiceFunction", "RememberServiceFunction",
        "SessionRetentionServiceFunction", "ReflectionServiceFunction", "CustomCDKBucketDeployment"}


def test_cfn_lint_is_clean(assembly):
    paths = sorted(assembly.outdir.glob("*.template.json"))
    assert len(paths) == 2
    assert lint_templates(paths) == []
    assert set(IGNORED_CHECKS) == {"W3005"}
