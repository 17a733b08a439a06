"""Entity extraction on AWS: one Bedrock Converse call per memory text to a small model (Amazon
Nova Micro by default, `AwsSettings.extraction_model_id`), off the write path, in the indexer.

The prompt (`service.llm_uses`, shared with `LlmEntityExtractor`) is bounded: the text is cut
to `MAX_TEXT_CHARS`, the answer is asked for as one JSON object of at most `MAX_ENTITIES`
entities and `MAX_RELATIONS` relations, and `maxTokens` bounds what the model may write (and
what it costs). Temperature 0: the same text gives the same graph.

What can go wrong, and what happens:
- throttling, a timeout, a 5xx: botocore's retry mode on the client (`AwsClients.extractor_runtime`,
  adaptive, several attempts) retries; once they are spent the call raises `RateLimited` or
  `ProviderError` (both retryable), the indexer reports the change as failed, and the stream
  mapping delivers it again later. Nothing is lost.
- a request Bedrock refuses as invalid: no other attempt can succeed, so the memory gets no
  graph (counted as `rejected`), as it would for a malformed answer.
- an answer that is not the JSON asked for (prose, cut off by `maxTokens`, wrong shapes): no
  graph for that memory, counted as `malformed`. Never a crash, never a retry loop.
- an answer with more than the caps: the first entities and relations are kept.
What failed is logged by code only: never the text.
"""

from __future__ import annotations

import json
import logging
import threading
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from memsvc.adapters.aws.errors import aws_error, error_code
from memsvc.core.errors import InvalidArgument
from memsvc.core.graph import Extraction
from memsvc.service.llm_uses import EXTRACTION_MAX_TOKENS as MAX_TOKENS
from memsvc.service.llm_uses import EXTRACTION_SYSTEM_PROMPT as SYSTEM_PROMPT
from memsvc.service.llm_uses import MAX_ENTITIES, MAX_RELATIONS, MAX_TEXT_CHARS, extraction_of

__all__ = ["BedrockExtractor", "SYSTEM_PROMPT", "MAX_TEXT_CHARS", "MAX_ENTITIES", "MAX_RELATIONS", "MAX_TOKENS",
           "parse_extraction"]

log = logging.getLogger(__name__)


def parse_extraction(response: dict[str, Any]) -> Extraction | None:
    """The extraction in a Converse response, capped (`service.llm_uses.extraction_of`); None if
    it holds no such JSON object. O(size of the response), which `MAX_TOKENS` bounds."""
    content = response.get("output", {}).get("message", {}).get("content") or []
    text = "".join(block.get("text", "") for block in content if isinstance(block, dict))
    start, end = text.find("{"), text.rfind("}")  # models like to wrap it in ```json fences
    if start < 0 or end < start:
        return None
    try:
        answer = json.loads(text[start : end + 1])
    except ValueError:
        return None
    return extraction_of(answer)


class BedrockExtractor:
    """`EntityExtractor` on Bedrock Converse. `client` is a `bedrock-runtime` client with retries
    of its own (`AwsClients.extractor_runtime`). Thread-safe; `stats()` counts what happened."""

    def __init__(self, client: Any, model_id: str) -> None:
        self._client = client
        self._model_id = model_id
        self._lock = threading.Lock()
        self._stats = {"calls": 0, "malformed": 0, "rejected": 0, "failed": 0, "input_tokens": 0, "output_tokens": 0}

    def extract(self, text: str) -> Extraction:
        if not text.strip():
            return Extraction()
        try:
            response = self._client.converse(
                modelId=self._model_id,
                system=[{"text": SYSTEM_PROMPT}],
                messages=[{"role": "user", "content": [{"text": text[:MAX_TEXT_CHARS]}]}],
                inferenceConfig={"maxTokens": MAX_TOKENS, "temperature": 0.0},
            )
        except (ClientError, BotoCoreError) as exc:
            error = aws_error(exc, service="Bedrock", operation="Converse")
            if isinstance(error, InvalidArgument):  # no other attempt can succeed: no graph
                self._count(calls=1, rejected=1)
                log.warning("entity extraction refused; no graph for this memory",
                            extra={"model_id": self._model_id, "error": error_code(exc)})
                return Extraction()
            self._count(calls=1, failed=1)
            raise error from None  # retryable: the indexer's batch is delivered again
        usage = response.get("usage") or {}
        self._count(calls=1, input_tokens=int(usage.get("inputTokens", 0)),
                    output_tokens=int(usage.get("outputTokens", 0)))
        extraction = parse_extraction(response)
        if extraction is None:
            self._count(malformed=1)
            log.warning("entity extraction gave no usable answer; no graph for this memory",
                        extra={"model_id": self._model_id, "stop_reason": response.get("stopReason")})
            return Extraction()
        return extraction

    def stats(self) -> dict[str, int]:
        with self._lock:
            return dict(self._stats)

    def _count(self, **amounts: int) -> None:
        with self._lock:
            for name, amount in amounts.items():
                self._stats[name] += amount
