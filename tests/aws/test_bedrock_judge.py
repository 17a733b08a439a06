"""The Bedrock same-fact judge (Converse) offline: the request it sends (checked by botocore
against the real Converse model), the recorded answer shapes it reads, and every failure read
as "no answer" (remember then creates; see tests/contract/test_remember.py for the whole flow).
The model is `tests/fakes/converse.py`: a fake, so what is tested is the adapter, not a model."""

from __future__ import annotations

import json
import os
from unittest import mock

import boto3
import pytest
from botocore.config import Config

from memsvc.adapters.aws.bedrock_judge import MAX_STATEMENT_CHARS, MAX_TOKENS, BedrockJudge, parse_answer
from memsvc.core.typed_memory import TypedMemory
from tests.fakes.converse import RECORDED_FENCED, RECORDED_PLAIN, install_converse_fake


@pytest.fixture
def client():
    fake_credentials = {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing"}
    with mock.patch.dict(os.environ, fake_credentials):
        yield boto3.client("bedrock-runtime", region_name="us-east-1",
                           config=Config(retries={"mode": "standard", "total_max_attempts": 1}))


@pytest.fixture
def fake(client):
    fake = install_converse_fake(client)
    yield fake
    fake.uninstall()


def judge(client, existing="I live in Berlin", candidate="I live in Munich", **kw):
    return BedrockJudge(client, lambda tenant: {"acme": "amazon.nova-micro-v1:0"}[tenant]).judge(
        "acme", TypedMemory(content=existing, **kw), TypedMemory(content=candidate))


def test_the_request_is_short_and_bounded(client, fake):
    judge(client, existing="A" * 5000, category="Home")
    (request,) = fake.requests
    assert request["inferenceConfig"] == {"maxTokens": MAX_TOKENS, "temperature": 0.0}
    assert MAX_TOKENS <= 64
    assert "JSON" in request["system"][0]["text"]
    text = request["messages"][0]["content"][0]["text"]
    assert text.startswith("A (category: Home): " + "A" * MAX_STATEMENT_CHARS + "\n")
    assert "A" * (MAX_STATEMENT_CHARS + 1) not in text and text.endswith("B: I live in Munich")


def test_the_model_id_is_the_tenants_setting(client, fake):
    seen = []
    client.meta.events.register("before-parameter-build.bedrock-runtime.Converse",
                                lambda params, **_: seen.append(params["modelId"]))
    judge(client)
    assert seen == ["amazon.nova-micro-v1:0"]


@pytest.mark.parametrize("response, relation", [
    (RECORDED_PLAIN, "same"),
    (RECORDED_FENCED, "contradiction"),
    ({**RECORDED_PLAIN, "output": {"message": {"role": "assistant", "content": [
        {"text": 'Here you go: {"same_fact": false, "contradiction": false} Hope that helps.'}]}}}, "different"),
])
def test_recorded_answers(response, relation):
    assert parse_answer(response).relation == relation


@pytest.mark.parametrize("text", [
    "They are the same fact.",  # prose
    '{"same_fact": true, "contradict',  # cut off by maxTokens
    '{"same_fact": "yes"}',  # not a boolean
    "",
])
def test_unusable_answers_are_no_answer(client, fake, text):
    fake.answer, fake.stop_reason = text, "max_tokens"
    assert judge(client) is None


@pytest.mark.parametrize("failure", ["ThrottlingException", "AccessDeniedException", "ModelTimeoutException",
                                     "ValidationException", "timeout"])
def test_failures_are_no_answer(client, fake, failure, caplog):
    fake.fail = failure
    assert judge(client, existing="my secret statement") is None
    assert "my secret statement" not in caplog.text  # logged by code, never the content


def test_the_heuristic_fake_answers_as_the_local_judge(client, fake):
    assert judge(client).relation == "contradiction"
    assert judge(client, candidate="I live in Berlin, Germany").relation == "same"
    assert json.loads(fake._heuristic(fake.requests[-1])) == {"same_fact": True, "contradiction": False}
