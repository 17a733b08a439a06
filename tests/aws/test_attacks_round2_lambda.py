"""Crafted API Gateway events through the API Lambda on the moto stack (round 2 of the attacks,
tests/api/test_attacks_round2.py over HTTP): each is refused with the error envelope and 400,
never 500, and writes nothing."""

from __future__ import annotations

import base64
import copy
import json

import pytest

from tests.aws.test_functions import NS, TENANT, call_api, load_event


def _put_event(body: str, *, base64_encoded: bool) -> dict:
    event = copy.deepcopy(load_event("api_jwt_put"))
    event["body"], event["isBase64Encoded"] = body, base64_encoded
    return event


def _assert_refused(status: int, body: dict, field: str) -> None:
    assert status == 400, body
    assert set(body) == {"error"}
    assert body["error"]["code"] == "INVALID_ARGUMENT"
    assert body["error"]["details"] == {"field": field}


@pytest.mark.parametrize("body", ["not base64!", "abc", "ëyJ9", '{"namespace": []}'],
                         ids=["outside-the-alphabet", "cut-short", "not-ascii", "json-sent-as-base64"])
def test_a_body_flagged_base64_that_is_not_base64_is_400(stack, body):
    status, answer, _ = call_api(_put_event(body, base64_encoded=True))
    _assert_refused(status, answer, "body")
    assert stack.app.store.get(TENANT, NS, "hotel") is None


def test_a_base64_body_still_works(stack):
    text = load_event("api_jwt_put")["body"]
    status, answer, _ = call_api(_put_event(base64.b64encode(text.encode()).decode(), base64_encoded=True))
    assert status == 200, answer
    assert answer["key"] == "hotel"


@pytest.mark.parametrize("escaped", [True, False], ids=["json-escape", "raw-character"])
def test_a_lone_surrogate_in_an_event_body_is_400(stack, escaped):
    """API Gateway hands the body over as text; the surrogate may arrive escaped, or (from the
    event's own JSON) as the character itself."""
    body = json.loads(load_event("api_jwt_put")["body"])
    body["value"] = {"text": "\ud800"}
    text = json.dumps(body, ensure_ascii=escaped) if escaped else json.dumps(body, ensure_ascii=False)
    status, answer, _ = call_api(_put_event(text, base64_encoded=False))
    _assert_refused(status, answer, "value.text")
    assert stack.app.store.get(TENANT, NS, "hotel") is None


def test_a_raw_query_string_that_is_not_utf8_is_400(stack):
    assert call_api(load_event("api_jwt_put"))[0] == 200
    event = load_event("api_jwt_get")
    event["rawQueryString"] = event["rawQueryString"].replace("key=hotel", "key=%FF")
    status, answer, _ = call_api(event)
    _assert_refused(status, answer, "query")

