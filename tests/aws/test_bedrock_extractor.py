"""The Bedrock entity extractor (Converse) offline: the request it sends (checked by botocore
against the real Converse model), the recorded answer shapes it reads (plain, fenced, malformed,
oversized), throttling retried by the client's retry mode and then raised as retryable (the
indexer's batch is delivered again), and what it never does: crash, or log the text.
The model is `tests/fakes/converse.py`: a fake, so what is tested is the adapter, not a model."""

from __future__ import annotations

import json
import os
from unittest import mock

import boto3
import pytest
from botocore.awsrequest import AWSResponse
from botocore.config import Config

from memsvc.adapters.aws.bedrock_extractor import (MAX_ENTITIES, MAX_RELATIONS, MAX_TEXT_CHARS, MAX_TOKENS,
                                                   BedrockExtractor, parse_extraction)
from memsvc.adapters.aws.clients import EXTRACTOR_RETRIES
from memsvc.core.errors import ProviderError, RateLimited
from tests.fakes.converse import RECORDED_EXTRACTION, RECORDED_EXTRACTION_FENCED, install_converse_fake

MODEL = "amazon.nova-micro-v1:0"
RECORDED_ENTITIES = [("Alice", "PERSON"), ("Project Atlas", "PROJECT"), ("memory leak", "CONCEPT"),
                     ("cache layer", "SYSTEM"), ("INC-42", "TICKET")]
RECORDED_RELATIONS = [("Alice", "Project Atlas", "WORKS_ON"), ("memory leak", "cache layer", "CAUSED_BY"),
                      ("memory leak", "Project Atlas", "PART_OF"), ("INC-42", "memory leak", "RELATES_TO")]


@pytest.fixture
def client():
    """The extractor's client, in `standard` mode with its number of attempts: `adaptive` adds a
    client-side rate limiter that waits on a condition (real time) after a throttle."""
    fake_credentials = {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing"}
    with mock.patch.dict(os.environ, fake_credentials):
        yield boto3.client("bedrock-runtime", region_name="us-east-1",
                           config=Config(retries={**EXTRACTOR_RETRIES, "mode": "standard"}))


@pytest.fixture
def fake(client):
    fake = install_converse_fake(client)
    yield fake
    fake.uninstall()


def answer(text: str) -> dict:
    return {**RECORDED_EXTRACTION, "output": {"message": {"role": "assistant", "content": [{"text": text}]}}}


def test_the_request_is_bounded_and_json_only(client, fake):
    fake.answer = RECORDED_EXTRACTION["output"]["message"]["content"][0]["text"]
    BedrockExtractor(client, MODEL).extract("x" * 10_000)
    (request,) = fake.requests
    assert request["inferenceConfig"] == {"maxTokens": MAX_TOKENS, "temperature": 0.0}
    system = request["system"][0]["text"]
    assert "JSON" in system and f"At most {MAX_ENTITIES} entities and {MAX_RELATIONS} relations" in system
    assert request["messages"][0]["content"][0]["text"] == "x" * MAX_TEXT_CHARS


def test_the_model_id_is_the_setting(client, fake):
    seen = []
    client.meta.events.register("before-parameter-build.bedrock-runtime.Converse",
                                lambda params, **_: seen.append(params["modelId"]))
    fake.answer = '{"entities": [], "relations": []}'
    BedrockExtractor(client, "us.amazon.nova-lite-v1:0").extract("Alice works on Atlas")
    assert seen == ["us.amazon.nova-lite-v1:0"]


@pytest.mark.parametrize("response", [RECORDED_EXTRACTION, RECORDED_EXTRACTION_FENCED])
def test_recorded_answers(response):
    extraction = parse_extraction(response)
    assert list(extraction.entities) == RECORDED_ENTITIES
    assert list(extraction.relations) == RECORDED_RELATIONS


def test_the_extractor_reads_the_answer_and_counts_tokens(client, fake):
    fake.answer = RECORDED_EXTRACTION_FENCED["output"]["message"]["content"][0]["text"]
    extractor = BedrockExtractor(client, MODEL)
    extraction = extractor.extract("Alice works on Project Atlas.")
    assert list(extraction.relations) == RECORDED_RELATIONS
    assert extractor.stats() == {"calls": 1, "malformed": 0, "rejected": 0, "failed": 0,
                                 "input_tokens": 170, "output_tokens": 15}


def test_an_oversized_answer_is_capped():
    names = [f"Service {n}" for n in range(3 * MAX_ENTITIES)]
    text = json.dumps({"entities": [{"name": n, "type": "SYSTEM"} for n in names],
                       "relations": [{"source": names[0], "target": names[n % MAX_ENTITIES + 1], "type": "USES"}
                                     for n in range(3 * MAX_RELATIONS)]})
    extraction = parse_extraction(answer(text))
    assert [name for name, _ in extraction.entities] == names[:MAX_ENTITIES]
    assert len(extraction.relations) == MAX_RELATIONS


def test_shapes_that_are_not_asked_for_are_dropped_one_by_one():
    text = json.dumps({"entities": [
        {"name": "Alice", "type": "PERSON"}, {"name": "alice ", "type": "PERSON"},  # the same node twice
        {"name": "Atlas", "type": "a product"},  # not in the vocabulary: CONCEPT
        {"name": " ", "type": "PERSON"}, {"name": 7, "type": "PERSON"}, "Bob", {"name": "y" * 201, "type": "X"}],
        "relations": [
            {"source": "ALICE", "target": "the atlas", "type": "likes"},  # by normalised name; RELATES_TO
            {"source": "Alice", "target": " Bob", "type": "KNOWS"},  # not listed: kept (the indexer adds it)
            {"source": "Alice", "target": "", "type": "KNOWS"},  # no name
            {"source": "Alice", "target": "alice", "type": "IS"},  # itself
            ["Alice", "Atlas"]]})
    extraction = parse_extraction(answer(text))
    assert list(extraction.entities) == [("Alice", "PERSON"), ("Atlas", "CONCEPT")]
    assert list(parse_extraction(answer(text.replace("likes", "works on"))).relations)[0] == (
        "Alice", "Atlas", "WORKS_ON")
    assert list(extraction.relations) == [("Alice", "Atlas", "RELATES_TO"), ("Alice", "Bob", "RELATES_TO")]


@pytest.mark.parametrize("text", [
    "Alice works on Atlas.",  # prose
    '{"entities": [{"name": "Alice", "type": "PER',  # cut off by maxTokens
    '{"entities": "Alice"}',  # not a list
    '["Alice"]',
    "",
])
def test_a_malformed_answer_is_no_graph_and_counted(client, fake, text, caplog):
    fake.answer, fake.stop_reason = text, "max_tokens"
    extractor = BedrockExtractor(client, MODEL)
    extraction = extractor.extract("my secret text about Alice")
    assert (list(extraction.entities), list(extraction.relations)) == ([], [])
    assert extractor.stats()["malformed"] == 1
    assert "my secret text" not in caplog.text


class Wire:
    """Converse answered on the wire (`before-send`, inside botocore's retry loop, unlike the
    `before-call` fake): each request gets the next of `statuses`, 429 as Bedrock's throttle."""

    def __init__(self, client, statuses: list[int]) -> None:
        self.statuses, self.sent = statuses, 0
        client.meta.events.register("before-send.bedrock-runtime.Converse", self._send)

    def _send(self, request, **_):
        status = self.statuses[min(self.sent, len(self.statuses) - 1)]
        self.sent += 1
        if status == 429:
            return AWSResponse(request.url, 429, {"x-amzn-ErrorType": "ThrottlingException:http://internal"},
                               _Raw(b'{"message": "Too many requests"}'))
        body = {key: RECORDED_EXTRACTION[key] for key in ("output", "stopReason", "usage", "metrics")}
        return AWSResponse(request.url, 200, {"content-type": "application/json"}, _Raw(json.dumps(body).encode()))


class _Raw:
    def __init__(self, content: bytes) -> None:
        self._content = content

    def stream(self, **_):
        yield self._content


def test_throttling_is_retried_by_the_client_then_raised_as_retryable(client, caplog):
    wire = Wire(client, [429])
    extractor = BedrockExtractor(client, MODEL)
    with mock.patch("time.sleep"):  # botocore's backoff between attempts
        with pytest.raises(RateLimited) as raised:
            extractor.extract("my secret text about Alice")
    assert raised.value.retryable
    assert wire.sent == EXTRACTOR_RETRIES["total_max_attempts"]
    assert extractor.stats()["failed"] == 1
    assert "my secret text" not in caplog.text


def test_a_throttle_then_an_answer_is_an_extraction(client):
    wire = Wire(client, [429, 429, 200])
    with mock.patch("time.sleep"):
        extraction = BedrockExtractor(client, MODEL).extract("Alice works on Project Atlas.")
    assert list(extraction.entities) == RECORDED_ENTITIES and wire.sent == 3


@pytest.mark.parametrize("failure", ["AccessDeniedException", "ModelTimeoutException", "timeout"])
def test_other_failures_are_retryable_errors(client, fake, failure):
    fake.fail = failure
    with mock.patch("time.sleep"), pytest.raises(ProviderError) as raised:
        BedrockExtractor(client, MODEL).extract("Alice works on Atlas")
    assert raised.value.retryable


def test_a_request_refused_as_invalid_is_no_graph(client, fake):
    fake.fail = "ValidationException"
    extractor = BedrockExtractor(client, MODEL)
    assert list(extractor.extract("Alice works on Atlas").entities) == []
    assert extractor.stats()["rejected"] == 1 and len(fake.requests) == 1


def test_an_empty_text_costs_no_call(client, fake):
    assert list(BedrockExtractor(client, MODEL).extract("  \n").entities) == []
    assert fake.requests == []
