"""`GET /v1/identity` for a SigV4 (IAM) caller, in-process: API Gateway's IAM authorizer context
is what only a deployment gives, so the router is handed one here."""

from __future__ import annotations

import json

from memsvc.local_server import build_event

IAM = {"accessKey": "ASIAEXAMPLEKEY", "accountId": "123456789012", "callerId": "AROAEXAMPLE:worker",
       "cognitoIdentity": None, "principalOrgId": "o-example", "userArn": "arn:aws:sts::123456789012:assumed-role/w/x",
       "userId": "AROAEXAMPLE:worker"}


def identity(app, headers: dict[str, str]) -> tuple[int, dict]:
    event = build_event(method="GET", path="/v1/identity", raw_query="", headers=headers, body=None,
                        source_ip="10.0.0.1", authorizer={"iam": IAM})
    response = app.router.handle(event)
    return response["statusCode"], json.loads(response["body"])


def test_an_iam_caller_sees_its_principal_and_never_its_access_key(local_app):
    status, me = identity(local_app, {"x-tenant-id": "acme"})
    assert status == 200, me
    assert me == {"tenant_id": "acme", "user_id": IAM["userArn"], "roles": ["service"], "auth": "iam", "claims": {
        "accountId": "123456789012", "userArn": IAM["userArn"], "userId": "AROAEXAMPLE:worker",
        "callerId": "AROAEXAMPLE:worker", "principalOrgId": "o-example"}}
    assert "ASIAEXAMPLEKEY" not in json.dumps(me)


def test_an_iam_caller_of_another_tenant_sees_that_tenant(local_app):
    assert identity(local_app, {"x-tenant-id": "globex"})[1]["tenant_id"] == "globex"
