"""`BedrockLanguageModel` on a real bedrock-runtime client with botocore's Stubber (moto has no
Bedrock): the Converse request it sends (validated against botocore's service model), the
recorded answer shape it reads (`tests/fixtures/llm`), and every failure mapped to our errors in
our words. Timeouts and broken connections, which the Stubber cannot make, are raised on the
wire (`before-send`) of an unstubbed client."""

from __future__ import annotations

import json
from pathlib import Path

import boto3
import pytest
from botocore.config import Config
from botocore.exceptions import EndpointConnectionError, ReadTimeoutError
from botocore.stub import Stubber

from memsvc.adapters.aws.bedrock_llm import BedrockLanguageModel
from memsvc.core.errors import ProviderError, RateLimited

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "llm"
MODEL = "amazon.nova-lite-v1:0"
SYSTEM = "Answer with one JSON object."
SECRET = "my secret conversation"


@pytest.fixture
def client(monkeypatch):
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    return boto3.client("bedrock-runtime", region_name="us-east-1",
                        config=Config(retries={"mode": "standard", "total_max_attempts": 1}))


@pytest.fixture
def stubber(client):
    with Stubber(client) as stubber:
        yield stubber
        stubber.assert_no_pending_responses()


def request(model=MODEL, max_tokens=1200):
    return {"modelId": model, "system": [{"text": SYSTEM}],
            "messages": [{"role": "user", "content": [{"text": SECRET}]},
                         {"role": "assistant", "content": [{"text": "Noted."}]},
                         {"role": "user", "content": [{"text": "and more"}]}],
            "inferenceConfig": {"maxTokens": max_tokens, "temperature": 0.0}}


def ask(client, model_id=None, max_tokens=1200):
    return BedrockLanguageModel(client, MODEL).chat_json(
        SYSTEM, [("user", SECRET), ("assistant", "Noted."), ("user", "and more")], max_tokens=max_tokens,
        model_id=model_id)


def answer(text: str, stop_reason: str = "end_turn") -> dict:
    recorded = json.loads((FIXTURES / "converse_nova_lite.json").read_text())
    return {**recorded, "output": {"message": {"role": "assistant", "content": [{"text": text}]}},
            "stopReason": stop_reason}


def test_the_recorded_answer_is_read_from_one_converse_call(client, stubber):
    stubber.add_response("converse", json.loads((FIXTURES / "converse_nova_lite.json").read_text()), request())
    memories = ask(client)["memories"]
    assert [m["content"] for m in memories] == ["User is vegetarian", "User lives in Lisbon",
                                                "User plans to visit Tokyo in March 2027"]


def test_the_tenants_model_and_the_callers_bound_are_sent(client, stubber):
    stubber.add_response("converse", answer('{"ok": true}'), request(model="us.amazon.nova-pro-v1:0", max_tokens=40))
    assert ask(client, model_id="us.amazon.nova-pro-v1:0", max_tokens=40) == {"ok": True}


@pytest.mark.parametrize(("text", "expected"), [
    ('```json\n{"memories": []}\n```', {"memories": []}),
    ('Here is what I found: {"memories": []} Let me know!', {"memories": []}),
    ('[{"content": "User is vegetarian"}]', [{"content": "User is vegetarian"}]),
])
def test_json_is_read_from_wrapped_answers(client, stubber, text, expected):
    stubber.add_response("converse", answer(text), request())
    assert ask(client) == expected


def test_text_blocks_are_joined_and_others_ignored(client, stubber):
    response = answer("")
    response["output"]["message"]["content"] = [{"text": '{"memories": '}, {"text": "[]}"}]
    stubber.add_response("converse", response, request())
    assert ask(client) == {"memories": []}


@pytest.mark.parametrize(("text", "stop_reason", "words"), [
    ("The user seems to be vegetarian.", "end_turn", "held no JSON"),
    ('{"memories": [{"content": "User is veg', "max_tokens", "cut off"),
    ("", "end_turn", "held no JSON"),
])
def test_an_answer_without_complete_json_is_malformed(client, stubber, text, stop_reason, words, caplog):
    stubber.add_response("converse", answer(text, stop_reason), request())
    with pytest.raises(ProviderError, match=words) as raised:
        ask(client)
    assert raised.value.details["reason"] == "malformed" and raised.value.retryable
    assert "vegetarian" not in raised.value.message and "veg" not in caplog.text


def test_an_answer_cut_off_after_its_json_closed_is_still_read(client, stubber):
    stubber.add_response("converse", answer('{"memories": []}\nI hope this', "max_tokens"), request())
    assert ask(client) == {"memories": []}


@pytest.mark.parametrize(("code", "status", "error", "reason"), [
    ("ThrottlingException", 429, RateLimited, None),
    ("ServiceUnavailableException", 503, ProviderError, "unavailable"),
    ("InternalServerException", 500, ProviderError, "unavailable"),
    ("ModelErrorException", 424, ProviderError, "unavailable"),
    ("ModelTimeoutException", 408, ProviderError, "timeout"),
    ("ValidationException", 400, ProviderError, "refused"),
    ("AccessDeniedException", 403, ProviderError, "refused"),
    ("ResourceNotFoundException", 404, ProviderError, "refused"),
])
def test_bedrock_errors_are_ours(client, stubber, caplog, code, status, error, reason):
    stubber.add_client_error("converse", service_error_code=code, service_message=f"{SECRET} was rejected",
                             http_status_code=status, expected_params=request())
    with pytest.raises(error) as raised:
        ask(client)
    assert type(raised.value) is error and raised.value.details.get("reason") == reason
    assert raised.value.details["aws_error_code"] == code
    assert SECRET not in raised.value.message and SECRET not in caplog.text


@pytest.mark.parametrize(("failure", "reason"), [
    (lambda request: ReadTimeoutError(endpoint_url=request.url), "timeout"),
    (lambda request: EndpointConnectionError(endpoint_url=request.url), "unavailable"),
])
def test_timeouts_and_broken_connections_are_ours(client, failure, reason):
    def send(request, **_):
        raise failure(request)

    client.meta.events.register("before-send.bedrock-runtime.Converse", send)
    with pytest.raises(ProviderError) as raised:
        ask(client)
    assert raised.value.details["reason"] == reason and "amazonaws" not in raised.value.message


def test_a_request_botocore_refuses_to_send_is_refused(client):
    sent = []
    client.meta.events.register("before-send.bedrock-runtime.Converse", lambda request, **_: sent.append(request))
    with pytest.raises(ProviderError) as raised:
        BedrockLanguageModel(client, MODEL).chat_json(SYSTEM, [("user", "hi")], max_tokens=0)  # maxTokens >= 1
    assert raised.value.details["reason"] == "refused" and sent == []
