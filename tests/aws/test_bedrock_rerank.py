"""`BedrockReranker` on a real bedrock-agent-runtime client with botocore's Stubber (moto has no
Bedrock): every request is checked against the service model that ships with botocore (the
client validates its parameters before the stub answers, and the Stubber validates the recorded
answer against the output shape)."""

from __future__ import annotations

import json
from pathlib import Path

import boto3
import pytest
from botocore.exceptions import ClientError
from botocore.stub import Stubber
from botocore.validate import validate_parameters

from memsvc.adapters.aws.bedrock_rerank import (AMAZON_RERANK_V1, COHERE_RERANK_V3_5, RERANK_READ_TIMEOUT_SECONDS,
                                                RERANK_RETRIES, BedrockReranker, model_arn, rerank_client)
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


def test_the_client_is_made_on_first_use_with_short_timeouts_and_one_retry(monkeypatch):
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    lazy = rerank_client(REGION)
    assert lazy._client is None
    config = lazy.meta.config
    assert lazy.meta.service_model.service_name == "bedrock-agent-runtime" and lazy.meta.region_name == REGION
    assert config.retries == RERANK_RETRIES == {"mode": "standard", "total_max_attempts": 2}
    assert config.read_timeout == RERANK_READ_TIMEOUT_SECONDS <= 5


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
