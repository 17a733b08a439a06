"""Events API Gateway never sends, handed to the API Lambda (`functions/api.py`): each is a 400 in
the error envelope, never a raw exception or a 500, and acts on nothing."""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import pytest

from tests.aws.test_functions import NS, TENANT, call_api, load_event
from tests.unit.test_error_text import assert_no_internal_text


def _set(path: str, value: Any) -> Callable[[dict[str, Any]], None]:
    """An edit of the event: the part at the dotted `path` set to `value`."""
    *parents, last = path.split(".")

    def edit(event: dict[str, Any]) -> None:
        for name in parents:
            event = event[name]
        event[last] = value

    return edit


MALFORMED = {
    "requestContext a string": ("requestContext", _set("requestContext", "ctx")),
    "requestContext a list": ("requestContext", _set("requestContext", [{"requestId": "r"}])),
    "requestContext.http a string": ("requestContext.http", _set("requestContext.http", "GET")),
    "a method that is no string": ("requestContext.http", _set("requestContext.http.method", 7)),
    "authorizer a string": ("requestContext.authorizer", _set("requestContext.authorizer", "jwt")),
    "claims a list": ("requestContext.authorizer.jwt.claims", _set("requestContext.authorizer.jwt.claims", ["a"])),
    "headers a string": ("headers", _set("headers", "authorization: x")),
    "a header that is no string": ("headers", _set("headers.x-tenant-id", ["acme"])),
    "queryStringParameters a list": ("queryStringParameters", _set("queryStringParameters", ["ns=user"])),
    "a query parameter that is no string": ("queryStringParameters", _set("queryStringParameters", {"key": None})),
    "pathParameters a number": ("pathParameters", _set("pathParameters", 3)),
    "a path parameter that is no string": ("pathParameters", _set("pathParameters", {"id": {"a": 1}})),
    "rawPath a number": ("rawPath", _set("rawPath", 12)),
    "body an object": ("body", _set("body", {"a": 1})),
    "isBase64Encoded a string": ("isBase64Encoded", _set("isBase64Encoded", "false")),
}


@pytest.mark.parametrize("case", list(MALFORMED))
def test_an_event_api_gateway_never_sends_is_a_400_envelope(stack, case):
    field, edit = MALFORMED[case]
    event = copy.deepcopy(load_event("api_jwt_put"))
    edit(event)
    status, body, headers = call_api(event)
    assert status == 400
    assert set(body) == {"error"}
    assert set(body["error"]) == {"code", "message", "retryable", "details"}
    assert (body["error"]["code"], body["error"]["retryable"]) == ("INVALID_ARGUMENT", False)
    assert body["error"]["details"] == {"field": field}
    assert headers["x-request-id"]
    assert_no_internal_text(body)
    assert stack.app.store.get(TENANT, NS, "hotel") is None  # the put acted on nothing


@pytest.mark.parametrize("event", [[], "an event", 7, None])
def test_an_event_that_is_not_an_object_is_a_400_envelope(stack, event):
    status, body, _ = call_api(event)  # type: ignore[arg-type]
    assert (status, body["error"]["code"], body["error"]["details"]) == (400, "INVALID_ARGUMENT", {"field": "event"})


@pytest.mark.parametrize("raw_path", [12, ["/prod/v1/memories"], {"path": "/prod"}])
def test_a_path_that_is_no_string_on_a_named_stage_is_a_400_envelope(stack, raw_path):
    event = copy.deepcopy(load_event("api_jwt_put"))
    event["requestContext"]["stage"] = "prod"  # the stage is cut from a string path before routing
    event["rawPath"] = raw_path
    status, body, _ = call_api(event)
    assert (status, body["error"]["code"], body["error"]["details"]) == (400, "INVALID_ARGUMENT", {"field": "rawPath"})
    assert stack.app.store.get(TENANT, NS, "hotel") is None
