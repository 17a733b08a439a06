"""`Reranker` on Amazon Bedrock's Rerank API (bedrock-agent-runtime `Rerank`): Amazon Rerank 1.0
(`amazon.rerank-v1:0`) or Cohere Rerank 3.5 (`cohere.rerank-v3-5:0`), the deployment's model
(`MEMSVC_RERANK_MODEL_ID`) unless the tenant's setting names another.

One request per search: the query and the candidates' texts inline, every candidate scored
(`numberOfResults` = their count). The texts are memories' plaintext sent to Bedrock in the
deployment's own account and region, like the texts Titan embeds. One attempt, never retried
(a search must not wait twice, nor through a backoff), whose connect and read timeouts sum to
`RERANK_TIMEOUT_SECONDS`: a throttle, a 5xx or a timeout fails the call and the rerank step keeps
the fused order. (botocore's read timeout bounds each socket read; Bedrock's endpoint does not
drip its answers.) Nothing here logs or keeps the query or a text.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import boto3
from botocore.config import Config

from memsvc.adapters.aws.clients import LazyClient
from memsvc.core.rerank_results import scores_in_order

__all__ = ["BedrockReranker", "AMAZON_RERANK_V1", "COHERE_RERANK_V3_5", "RERANK_RETRIES", "RERANK_TIMEOUT_SECONDS",
           "RERANK_CONNECT_TIMEOUT_SECONDS", "RERANK_READ_TIMEOUT_SECONDS", "rerank_config", "rerank_client",
           "model_arn"]

AMAZON_RERANK_V1 = "amazon.rerank-v1:0"
COHERE_RERANK_V3_5 = "cohere.rerank-v3-5:0"
# A search waits for this: a rerank of up to 100 short texts answers in well under a second.
# One attempt: `standard` mode counts the first (`total_max_attempts`), so no retry, no backoff.
RERANK_RETRIES: dict[str, Any] = {"mode": "standard", "total_max_attempts": 1}
RERANK_TIMEOUT_SECONDS = 3.0  # the most a search waits for Bedrock's rerank: connect + read
RERANK_CONNECT_TIMEOUT_SECONDS = 0.5  # to a regional AWS endpoint: tens of ms
RERANK_READ_TIMEOUT_SECONDS = RERANK_TIMEOUT_SECONDS - RERANK_CONNECT_TIMEOUT_SECONDS


def rerank_config(timeout_seconds: float = RERANK_TIMEOUT_SECONDS) -> Config:
    """One attempt whose connect and read timeouts sum to `timeout_seconds`."""
    connect = min(RERANK_CONNECT_TIMEOUT_SECONDS, timeout_seconds / 4)
    return Config(retries=dict(RERANK_RETRIES), connect_timeout=connect, read_timeout=timeout_seconds - connect)


def rerank_client(region: str, *, timeout_seconds: float = RERANK_TIMEOUT_SECONDS) -> LazyClient:
    """The bedrock-agent-runtime client, created on first use: most tenants never rerank, and a
    cold start should not pay for a client no request calls."""
    return LazyClient(lambda: boto3.session.Session(region_name=region).client(
        "bedrock-agent-runtime", config=rerank_config(timeout_seconds)))


def model_arn(model_id: str, *, partition: str, region: str) -> str:
    """Rerank takes a model ARN; a bare model id is the region's foundation model."""
    if model_id.startswith("arn:"):
        return model_id
    return f"arn:{partition}:bedrock:{region}::foundation-model/{model_id}"


class BedrockReranker:
    """Args:
        client: a bedrock-agent-runtime client (`rerank_client`); a bare model id names a
            foundation model of the client's region.
        model_id: the deployment's rerank model (an id or an ARN).
    """

    def __init__(self, client: Any, *, model_id: str) -> None:
        self._client = client
        self._model_id = model_id

    def rerank(self, query: str, texts: Sequence[str], *, model_id: str | None) -> list[float]:
        if not texts:
            return []
        meta = self._client.meta
        arn = model_arn(model_id or self._model_id, partition=meta.partition, region=meta.region_name)
        response = self._client.rerank(
            queries=[{"type": "TEXT", "textQuery": {"text": query}}],
            sources=[{"type": "INLINE", "inlineDocumentSource": {"type": "TEXT", "textDocument": {"text": text}}}
                     for text in texts],
            rerankingConfiguration={"type": "BEDROCK_RERANKING_MODEL", "bedrockRerankingConfiguration": {
                "numberOfResults": len(texts), "modelConfiguration": {"modelArn": arn}}},
        )
        return scores_in_order(response.get("results"), len(texts), "relevanceScore")
