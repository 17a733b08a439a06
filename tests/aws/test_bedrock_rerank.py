"""`BedrockReranker` on a real bedrock-agent-runtime client with botocore's Stubber (moto has no
Bedrock): every request is checked against the service model that ships with botocore (the
client validates its parameters before the stub answers, and the Stubber validates the recorded
answer against the output shape)."""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import boto3
import pytest
from botocore.exceptions import ClientError, ReadTimeoutError
from botocore.stub import Stubber
from botocore.validate import validate_parameters

from memsvc.adapters.aws.bedrock_rerank import (AMAZON_RERANK_V1, COHERE_RERANK_V3_5, RERANK_CONNECT_TIMEOUT_SECONDS,
                                                RERANK_READ_TIMEOUT_SECONDS, RERANK_RETRIES, RERANK_TIMEOUT_SECONDS,
                                                BedrockReranker, model_arn, rerank_client, rerank_config)
from memsvc.bootstrap import build_aws
from memsvc.core.models import Caller
from memsvc.service.memories import PutMemory
from memsvc.service.search import SearchQuery
from memsvc.service.tenant_config import RerankSetting, SettingsPatch
from memsvc.settings import AwsSettings
from tests.fakes.aws_stack import BUCKET, INDEX, KEYWORD_TABLE, REGION as AWS_REGION, TABLE

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "rerank"
TEXTS = ["the ferry leaves at noon", "bring sunscreen", "Maria started pottery classes in May"]
REGION = "us-west-2"


@pytest.fixture
def client(monkeypatch):
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    client = boto3.session.Session(region_name=REGION).client("bedrock-agent-runtime")
    with Stubber(client) as stubber:
        client.stubber = stubber
        yield client


def expected_request(model: str, texts=TEXTS, query="what did Maria start?"):
    return {
        "queries": [{"type": "TEXT", "textQuery": {"text": query}}],
        "sources": [{"type": "INLINE", "inlineDocumentSource": {"type": "TEXT", "textDocument": {"text": t}}}
                    for t in texts],
        "rerankingConfiguration": {"type": "BEDROCK_RERANKING_MODEL", "bedrockRerankingConfiguration": {
            "numberOfResults": len(texts),
            "modelConfiguration": {"modelArn": f"arn:aws:bedrock:{REGION}::foundation-model/{model}"}}},
    }


def test_the_recorded_answer_is_read_back_in_input_order(client):
    request = expected_request(AMAZON_RERANK_V1)
    validate_parameters(request, client.meta.service_model.operation_model("Rerank").input_shape)
    client.stubber.add_response("rerank", json.loads((FIXTURES / "bedrock_rerank.json").read_text()), request)
    scores = BedrockReranker(client, model_id=AMAZON_RERANK_V1).rerank("what did Maria start?", TEXTS, model_id=None)
    assert scores == [0.1519, 0.0022, 0.7834]
    client.stubber.assert_no_pending_responses()


def test_the_tenants_model_is_asked_instead_of_the_deployments(client):
    client.stubber.add_response("rerank", {"results": [{"index": 0, "relevanceScore": 0.5}]},
                                expected_request(COHERE_RERANK_V3_5, texts=["one"], query="q"))
    assert BedrockReranker(client, model_id=AMAZON_RERANK_V1).rerank("q", ["one"], model_id=COHERE_RERANK_V3_5) == [0.5]
    client.stubber.assert_no_pending_responses()


def test_a_model_arn_is_sent_as_it_is():
    arn = "arn:aws:bedrock:eu-central-1::foundation-model/cohere.rerank-v3-5:0"
    assert model_arn(arn, partition="aws", region=REGION) == arn
    assert model_arn(AMAZON_RERANK_V1, partition="aws-cn", region="cn-north-1") == (
        "arn:aws-cn:bedrock:cn-north-1::foundation-model/amazon.rerank-v1:0")


@pytest.mark.parametrize("code", ["ThrottlingException", "AccessDeniedException", "ValidationException",
                                  "InternalServerException"])
def test_a_refusal_is_raised_for_the_rerank_step_to_catch(client, code):
    client.stubber.add_client_error("rerank", service_error_code=code, http_status_code=400)
    with pytest.raises(ClientError):
        BedrockReranker(client, model_id=AMAZON_RERANK_V1).rerank("q", TEXTS, model_id=None)


@pytest.mark.parametrize("results", [
    [{"index": 0, "relevanceScore": 0.1}, {"index": 1, "relevanceScore": 0.2}],  # a text unscored
    [{"index": 0, "relevanceScore": 0.1}, {"index": 0, "relevanceScore": 0.2}, {"index": 1, "relevanceScore": 0.3}],
    [{"index": 0, "relevanceScore": 0.1}, {"index": 1, "relevanceScore": 0.2},
     {"index": 2, "relevanceScore": float("inf")}],
])
def test_an_answer_that_does_not_score_every_text_once_is_refused(client, results):
    client.stubber.add_response("rerank", {"results": results})
    with pytest.raises(ValueError):
        BedrockReranker(client, model_id=AMAZON_RERANK_V1).rerank("q", TEXTS, model_id=None)


def test_nothing_to_rerank_makes_no_call(client):
    assert BedrockReranker(client, model_id=AMAZON_RERANK_V1).rerank("q", [], model_id=None) == []
    client.stubber.assert_no_pending_responses()


def test_the_client_is_made_on_first_use_with_one_attempt_bounded_by_the_rerank_timeout(monkeypatch):
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    lazy = rerank_client(REGION)
    assert lazy._client is None
    config = lazy.meta.config
    assert lazy.meta.service_model.service_name == "bedrock-agent-runtime" and lazy.meta.region_name == REGION
    assert config.retries == RERANK_RETRIES == {"mode": "standard", "total_max_attempts": 1}
    assert (config.connect_timeout, config.read_timeout) == (
        RERANK_CONNECT_TIMEOUT_SECONDS, RERANK_READ_TIMEOUT_SECONDS)
    assert config.connect_timeout + config.read_timeout == RERANK_TIMEOUT_SECONDS <= 3
    shorter = rerank_config(1.0)
    assert shorter.connect_timeout + shorter.read_timeout == 1.0 and shorter.connect_timeout < shorter.read_timeout


class SlowBedrock:
    """An endpoint on 127.0.0.1 that counts requests and answers each with `status` after `delay` s."""

    def __init__(self, status: int = 200, delay: float = 0.0) -> None:
        self.requests, self.status, self.delay = 0, status, delay
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802
                self.rfile.read(int(self.headers["Content-Length"]))
                fake.requests += 1
                time.sleep(fake.delay)
                body = b'{"message": "slow down"}'
                self.send_response(fake.status)
                self.send_header("Content-Type", "application/json")
                self.send_header("x-amzn-ErrorType", "ThrottlingException")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def client(self, timeout_seconds: float = RERANK_TIMEOUT_SECONDS):
        return boto3.session.Session(region_name=REGION).client(
            "bedrock-agent-runtime", endpoint_url=f"http://127.0.0.1:{self.server.server_address[1]}",
            config=rerank_config(timeout_seconds))

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.mark.parametrize("status", [429, 503])
def test_a_throttle_or_a_5xx_is_not_retried(monkeypatch, status):
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    bedrock = SlowBedrock(status=status)
    try:
        with pytest.raises(ClientError):
            BedrockReranker(bedrock.client(), model_id=AMAZON_RERANK_V1).rerank("q", TEXTS, model_id=None)
        assert bedrock.requests == 1
    finally:
        bedrock.close()


def test_a_slow_answer_ends_the_call_at_the_rerank_timeout(monkeypatch):
    """Generous margin: one attempt of 0.5 s must end well within 3 s (two attempts and a backoff would not)."""
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    bedrock = SlowBedrock(delay=5.0)
    try:
        started = time.monotonic()
        with pytest.raises(ReadTimeoutError):
            BedrockReranker(bedrock.client(0.5), model_id=AMAZON_RERANK_V1).rerank("q", TEXTS, model_id=None)
        assert time.monotonic() - started < 3.0 and bedrock.requests == 1
    finally:
        bedrock.close()


# -- the rerank step on the AWS backend (moto), its Bedrock client stubbed ---------------------

ALICE = Caller(tenant_id="acme", user_id="alice", roles=("user",))
NOTES = {"a": "harbour ferry timetable at noon", "b": "ferry tickets sold on board", "c": "harbour zebra crossing"}


@pytest.fixture
def reranking_app(stack, client):
    """The API function's app on the stack, reranking through the stubbed client (acme's `rerank` still off)."""
    for key, text in NOTES.items():
        stack.app.services.memories.put(ALICE, PutMemory(namespace=["user", "alice"], key=key, value={"text": text}))
    stack.drain(consumers=("indexer",))
    key_id = stack.clients.kms.list_keys()["Keys"][0]["KeyId"]
    settings = AwsSettings(region=AWS_REGION, table_name=TABLE, keyword_table_name=KEYWORD_TABLE,
                           vector_bucket=BUCKET, vector_index=INDEX, kms_key_id=key_id,
                           embedding_dimension=stack.embedder.dimension)
    return build_aws(settings, clients=stack.clients, embedder=stack.embedder, clock=stack.clock,
                     reranker=BedrockReranker(client, model_id=AMAZON_RERANK_V1))


def ranked_keys(app, tenant: str = "acme") -> list[str]:
    caller = Caller(tenant_id=tenant, user_id="alice", roles=("user",))
    found = app.services.search.search(caller, SearchQuery(namespace_prefix=["user", "alice"], query="harbour ferry"))
    return [m.key for m in found]


def test_bedrock_orders_the_fused_candidates_on_the_aws_backend(reranking_app, client):
    fused = ranked_keys(reranking_app)  # no call: rerank is off
    reranking_app.settings.update("acme", SettingsPatch(rerank=RerankSetting(enabled=True)))
    client.stubber.add_response("rerank", {"results": [
        {"index": i, "relevanceScore": float(i)} for i in range(len(fused))]})  # the fused order reversed
    assert ranked_keys(reranking_app) == fused[::-1]
    client.stubber.assert_no_pending_responses()


def test_a_failing_bedrock_leaves_the_fused_order_on_the_aws_backend(reranking_app, client):
    fused = ranked_keys(reranking_app)
    reranking_app.settings.update("acme", SettingsPatch(rerank=RerankSetting(enabled=True)))
    client.stubber.add_client_error("rerank", service_error_code="ThrottlingException", http_status_code=429)
    assert ranked_keys(reranking_app) == fused
    client.stubber.assert_no_pending_responses()
