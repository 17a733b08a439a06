"""An error message never carries internal text (issue 22): every path where a library's failure
could reach an answer, triggered in-process, says what failed in our words and names the field or
the policy file, never pydantic's, the JSON parser's, regorus's, SQLite's, botocore's or PyJWT's
text, a stack, SQL or policy source."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import re
import sqlite3
import time
from typing import Any

import jwt
import pytest
from botocore.exceptions import ClientError, EndpointConnectionError

from memsvc.adapters.aws.errors import aws_error
from memsvc.adapters.local.issuer import AUDIENCE, ISSUER, InvalidToken, LocalIssuer
from memsvc.local_server import LocalServer
from tests.api.helpers import asgi_get
from tests.conftest import alice
from tests.unit.test_router import ADMIN, ALICE, call

# Text that is some library's, never ours. A message or a detail holding one of these leaks.
INTERNAL_TEXT = (
    # pydantic
    "Input should", "validation error", "Extra inputs", "Field required", "Value error", "should have at",
    "function-before", "function-after", "list[", "literal[", "pydantic", "[type=",
    # the json module
    "Expecting", "Unterminated", "delimiter", "JSONDecodeError",
    # regorus (and see ENGINE_LOCATION)
    "-->", "  |", "error:", "Caused by", "backtrace", "regorus", "anyhow",
    # Python, SQLite, botocore, PyJWT
    "Traceback", "Error(", "sqlite", "SELECT", "botocore", "An error occurred", "Signature has expired",
    "Invalid audience", "Not enough segments", "alg value", "Signature verification failed",
)

ENGINE_LOCATION = re.compile(r"\.rego:\d+")  # regorus's `file.rego:4:1`; ours says "at line 4, column 1"


def assert_no_internal_text(body: Any, *quoted: str) -> None:
    text = json.dumps(body)
    for fragment in (*INTERNAL_TEXT, *quoted):
        assert fragment not in text, f"{fragment!r} in {text}"
    assert not ENGINE_LOCATION.search(text), text


def put_body(**over: Any) -> dict[str, Any]:
    return {"namespace": ["user", "alice", "n"], "key": "k", "value": {"text": "hi"}, **over}


# --- request bodies: the JSON parser and pydantic ----------------------------------------------


def test_a_body_that_is_not_json_names_line_and_column(local_app):
    event_body = '{"namespace": ["user",\n  "alice"'
    from memsvc.local_server import build_event, stringify_claims

    event = build_event(method="PUT", path="/v1/memories", raw_query="", headers={}, source_ip="127.0.0.1",
                        body=event_body, authorizer={"jwt": {"claims": stringify_claims(ALICE), "scopes": None}})
    response = local_app.router.handle(event)
    body = json.loads(response["body"])
    assert response["statusCode"] == 400
    assert body["error"]["message"] == "request body is not valid JSON (line 2, column 10)"
    assert body["error"]["details"] == {"field": "body", "line": 2, "column": 10}
    assert_no_internal_text(body)


BAD_BODIES = [
    ("PUT", "/v1/memories", put_body(value="SECRET-VALUE-1"), "value: must be an object"),
    ("PUT", "/v1/memories", put_body(key=5), "key: must be a string"),
    ("PUT", "/v1/memories", put_body(bogus="SECRET-VALUE-1"), "bogus: is not a field of this request"),
    ("PUT", "/v1/memories", put_body(namespace=["user", ""]), "namespace.1: must not be empty"),
    ("PUT", "/v1/memories", put_body(index_fields=5), "index_fields: must be false or a list of paths"),
    ("PUT", "/v1/memories", put_body(index_fields=["a", 5]), "index_fields.1: must be a string"),
    ("PUT", "/v1/memories", put_body(ttl_seconds="SECRET-VALUE-1"), "ttl_seconds: must be an integer"),
    ("PUT", "/v1/memories", put_body(ttl_seconds=0), "ttl_seconds: must be at least 1"),
    ("PUT", "/v1/memories", {"key": "k", "value": {}}, "namespace: is required"),
    ("POST", "/v1/memories/search", {"namespace_prefix": [], "mode": "SECRET-VALUE-1"},
     "mode: must be 'hybrid', 'semantic' or 'keyword'"),
    ("POST", "/v1/memories/search", {"namespace_prefix": [], "limit": 10**30}, "limit: must be at most 100"),
    ("POST", "/v1/memories/search", {"namespace_prefix": [], "limit": 2.5}, "limit: must be an integer"),
    ("PUT", "/admin/v1/memories/settings", {"max_depth": "SECRET-VALUE-1"}, "max_depth: must be an integer"),
    ("PUT", "/admin/v1/memories/policies", {"policies": {"authz.rego": 5}}, "policies.authz.rego: must be a string"),
]


@pytest.mark.parametrize("method,path,body,message", BAD_BODIES)
def test_a_body_of_the_wrong_shape_is_said_in_our_words(local_app, method, path, body, message):
    status, answer, _ = call(local_app, method, path, body=body, claims=ADMIN if "admin" in path else ALICE)
    assert status == 400, answer
    assert answer["error"]["message"] == message
    assert answer["error"]["details"]["field"] == message.split(".")[0].split(":")[0]
    assert_no_internal_text(answer, "SECRET-VALUE-1")


def test_a_settings_rule_across_fields_is_said_in_our_words(local_app):
    status, answer, _ = call(local_app, "PUT", "/admin/v1/memories/settings", claims=ADMIN,
                             body={"semantic_auto_update": 0.5, "semantic_check_low": 0.9})
    assert status == 400 and answer["error"]["details"] == {"field": "settings"}
    assert_no_internal_text(answer)


# --- policies: regorus ----------------------------------------------------------------------------


def test_a_policy_upload_with_a_syntax_error_names_file_line_and_column(local_app):
    _, current, _ = call(local_app, "GET", "/admin/v1/memories/policies", claims=ADMIN)
    policies = {**current["policies"], "authz.rego": "package memories.authz\n\nallow if input.key ==\n"}
    status, answer, _ = call(local_app, "PUT", "/admin/v1/memories/policies", claims=ADMIN,
                             body={"policies": policies})
    assert status == 400
    assert answer["error"]["message"] == ("the policy bundle is not valid Rego: a syntax error, in authz.rego at "
                                          "line 4, column 1")
    assert answer["error"]["details"] == {"policy_file": "authz.rego", "line": 4, "column": 1}
    assert_no_internal_text(answer, "input.key ==")


def test_a_policy_failing_on_a_write_never_quotes_the_value(local_app):
    _, current, _ = call(local_app, "GET", "/admin/v1/memories/policies", claims=ADMIN)
    governance = ('package memories.governance\n\n'
                  'violations contains {"policy": "p", "message": "m"} if input.value.n + 1 > 0\n')
    status, _, _ = call(local_app, "PUT", "/admin/v1/memories/policies", claims=ADMIN,
                        body={"policies": {**current["policies"], "governance.rego": governance}})
    assert status == 200
    status, answer, _ = call(local_app, "PUT", "/v1/memories", body=put_body(value={"n": "SECRET-VALUE-1"}),
                             claims=ALICE)
    assert status == 400
    assert answer["error"]["message"].startswith("governance policy failed: a built-in function given an argument")
    assert answer["error"]["details"] == {"policy_file": "governance.rego", "line": 3, "column": 67}
    assert_no_internal_text(answer, "SECRET-VALUE-1", "input.value")


# --- what the service itself cannot answer ---------------------------------------------------------


def test_a_store_failure_is_an_internal_error_without_sql(local_app, monkeypatch):
    def broken(*args: Any, **kwargs: Any) -> None:
        raise sqlite3.OperationalError("database is locked: SELECT value_ct FROM items WHERE key = 'SECRET-VALUE-1'")

    monkeypatch.setattr(local_app.store, "get", broken)
    status, answer, _ = call(local_app, "GET", "/v1/memories", "ns=user&ns=alice&ns=n&key=k", claims=ALICE)
    assert status == 500 and answer["error"]["message"] == "internal error"
    assert_no_internal_text(answer, "SECRET-VALUE-1", "locked")


def test_an_answer_that_cannot_be_serialized_is_the_envelope(local_app, monkeypatch, caplog):
    assert call(local_app, "PUT", "/v1/memories", body=put_body(), claims=ALICE)[0] == 200
    memory = local_app.services.memories.get(alice(), ["user", "alice", "n"], "k")
    broken = dataclasses.replace(memory, value={"x": object()})  # a bug of ours: no JSON for it
    monkeypatch.setattr(local_app.services.memories, "get", lambda *a, **k: broken)
    status, answer, headers = call(local_app, "GET", "/v1/memories", "ns=user&ns=alice&ns=n&key=k", claims=ALICE)
    assert status == 500 and answer["error"]["code"] == "INTERNAL"
    assert answer["error"]["details"]["request_id"] == headers["x-request-id"]
    assert_no_internal_text(answer, "serializ", "object at")
    assert "serializing the response failed" in caplog.text  # the stack is in the log


def test_aws_failures_name_the_code_never_the_message():
    said = "One or more parameter values were invalid: SECRET-VALUE-1 at https://dynamodb.us-east-1.amazonaws.com"
    for exc in (ClientError({"Error": {"Code": "ValidationException", "Message": said},
                             "ResponseMetadata": {"HTTPStatusCode": 400}}, "PutItem"),
                ClientError({"Error": {"Code": "AccessDeniedException", "Message": said}}, "PutItem"),
                EndpointConnectionError(endpoint_url="https://dynamodb.us-east-1.amazonaws.com")):
        error = aws_error(exc, service="DynamoDB", operation="PutItem")
        assert_no_internal_text(error.to_body(), "SECRET-VALUE-1", "amazonaws.com", "parameter values")


# --- tokens: PyJWT -------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def issuer(tmp_path_factory) -> LocalIssuer:
    return LocalIssuer(tmp_path_factory.mktemp("keys"))


def _signed(issuer: LocalIssuer, **over: Any) -> str:
    now = int(time.time())
    claims = {"iss": ISSUER, "aud": AUDIENCE, "sub": "alice", "iat": now, "exp": now + 600, **over}
    return jwt.encode({k: v for k, v in claims.items() if v is not None}, issuer._private, algorithm="RS256")


@pytest.mark.parametrize("kind,reason", [
    ("garbage", "the token is not a well-formed JWT"),
    ("expired", "the token has expired"),
    ("not-yet-valid", "the token is not valid yet"),
    ("audience", f"the token is not for audience {AUDIENCE}"),
    ("issuer", f"the token is not from issuer {ISSUER}"),
    ("no-sub", "the token lacks a required claim (exp, iss, aud, sub)"),
    ("hs256", "the token is not signed with RS256"),
    ("signature", "the token's signature does not verify"),
])
def test_a_refused_token_is_said_in_our_words(issuer, kind, reason):
    now = int(time.time())
    token = {
        "garbage": lambda: "not-a-jwt",
        "expired": lambda: _signed(issuer, iat=now - 3600, exp=now - 600),
        "not-yet-valid": lambda: _signed(issuer, nbf=now + 600),
        "audience": lambda: _signed(issuer, aud="someone-else"),
        "issuer": lambda: _signed(issuer, iss="https://evil.example.com"),
        "no-sub": lambda: _signed(issuer, sub=None),
        "hs256": lambda: jwt.encode({"sub": "alice"}, "k" * 32, algorithm="HS256"),
        "signature": lambda: _signed(issuer)[:-4] + "AAAA",
    }[kind]()
    with pytest.raises(InvalidToken) as info:
        issuer.verify(token)
    assert str(info.value) == reason


def _asgi(app: LocalServer, headers: list[tuple[bytes, bytes]]) -> tuple[int, dict[str, Any]]:
    sent = asyncio.run(asgi_get(app, "/v1/memories", headers=headers))
    return sent[0]["status"], json.loads(sent[1]["body"])


class _BrokenRouter:
    def handle(self, event: dict[str, Any]) -> dict[str, Any]:
        raise RuntimeError("Traceback: SECRET-VALUE-1")


def test_the_local_server_answers_token_and_own_failures_with_the_envelope(issuer):
    server = LocalServer(_BrokenRouter(), issuer, threads=1)  # type: ignore[arg-type]
    try:
        status, body = _asgi(server, [(b"authorization", b"Bearer " + _signed(issuer, aud="x").encode())])
        assert (status, body["error"]["message"]) == (401, f"invalid token: the token is not for audience {AUDIENCE}")
        assert_no_internal_text(body)
        status, body = _asgi(server, [(b"authorization", b"Bearer " + _signed(issuer).encode())])
        assert (status, body["error"]) == (500, {"code": "INTERNAL", "message": "internal error", "retryable": False,
                                                 "details": {}})
    finally:
        server._pool.shutdown()


def test_health_names_a_failing_component_in_our_words_only():
    from memsvc.bootstrap import health_report
    from memsvc.core.errors import EmbeddingFailed

    class Failing:
        model_id, dimension = "m", 3

        def ping(self):
            raise sqlite3.OperationalError("database disk image is malformed: /secret/path/memsvc.db")

        def embed(self, texts):
            raise EmbeddingFailed("the embedding model failed")

    report = health_report(store=Failing(), vectors=Failing(), keywords=Failing(), embedder=Failing())
    assert report["status"] == "unhealthy"
    assert {name: c["error"] for name, c in report["components"].items()} == {
        "store": "UNAVAILABLE", "vector_index": "UNAVAILABLE", "keyword_index": "UNAVAILABLE",
        "embedder": "EMBEDDING_FAILED"}
