"""`LanguageModel` on Bedrock: one Converse call per question (Amazon Nova Lite by default for
learning from conversations, `AwsSettings.memory_extraction_model_id`).

The system prompt and the messages go as Converse's `system` and `messages`, at temperature 0
with the caller's `maxTokens`; the answer's text blocks are joined and its first JSON value read
(`core.model_answers`). Retries are the client's (`AwsClients`); what still fails is raised:

- throttling (a throttling code or 429) -> `RateLimited`;
- a timeout (botocore's, or Bedrock's `ModelTimeoutException`) -> `ProviderError`, reason `timeout`;
- a 5xx, a model error, a broken connection -> `ProviderError`, reason `unavailable`;
- a request Bedrock (or botocore, checking it first) refuses: validation, access denied, an
  unknown model -> reason `refused`;
- an answer holding no JSON, or cut off by `maxTokens` before it closed -> reason `malformed`.

The messages are ours: never the model's text nor Bedrock's error message (either may quote the
conversation). What failed is logged by code only.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

from botocore.exceptions import (BotoCoreError, ClientError, ConnectTimeoutError, ParamValidationError,
                                 ReadTimeoutError)

from memsvc.adapters.aws.errors import THROTTLING_CODES, error_code
from memsvc.core.errors import MemsvcError, ProviderError, RateLimited
from memsvc.core.model_answers import first_json

__all__ = ["BedrockLanguageModel"]

log = logging.getLogger(__name__)

_TIMEOUT_CODES = frozenset({"ModelTimeoutException"})
_UNAVAILABLE_CODES = frozenset({"ModelErrorException", "ServiceUnavailableException", "InternalServerException"})


class BedrockLanguageModel:
    """Args:
        client: a bedrock-runtime client, with the retries and read timeout the use wants.
        model_id: the deployment's model (an id, an inference profile or an ARN).
    """

    def __init__(self, client: Any, model_id: str) -> None:
        self._client = client
        self.model_id = model_id

    def chat_json(self, system: str, messages: Sequence[tuple[str, str]], *, max_tokens: int,
                  model_id: str | None = None) -> Any:
        model = model_id or self.model_id
        try:
            response = self._client.converse(
                modelId=model,
                system=[{"text": system}],
                messages=[{"role": role, "content": [{"text": text}]} for role, text in messages],
                inferenceConfig={"maxTokens": max_tokens, "temperature": 0.0},
            )
        except (ClientError, BotoCoreError) as exc:
            raise _failure(exc, model) from None
        content = response.get("output", {}).get("message", {}).get("content") or []
        text = "".join(block["text"] for block in content
                       if isinstance(block, dict) and isinstance(block.get("text"), str))
        answer = first_json(text)
        if answer is None:
            cut_off = response.get("stopReason") == "max_tokens"
            log.warning("the language model gave no usable answer",
                        extra={"model_id": model, "stop_reason": response.get("stopReason")})
            raise ProviderError("the language model's answer was cut off before its JSON closed" if cut_off
                                else "the language model's answer held no JSON",
                                details={"provider": "Bedrock", "reason": "malformed"})
        return answer


def _failure(exc: ClientError | BotoCoreError, model: str) -> MemsvcError:
    code = error_code(exc)
    status = exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode", 0) if isinstance(exc, ClientError) else 0
    log.warning("the language model call failed", extra={"model_id": model, "error": code})
    details = {"provider": "Bedrock", "aws_error_code": code}
    if code in THROTTLING_CODES or status == 429:
        return RateLimited("Bedrock is throttling the language model; try again shortly", details=details)
    if isinstance(exc, (ReadTimeoutError, ConnectTimeoutError)) or code in _TIMEOUT_CODES:
        return ProviderError("the language model did not answer in time", details={**details, "reason": "timeout"})
    connection = isinstance(exc, BotoCoreError) and not isinstance(exc, ParamValidationError)
    if connection or code in _UNAVAILABLE_CODES or status >= 500:
        return ProviderError("the language model is unavailable", details={**details, "reason": "unavailable"})
    return ProviderError(f"Bedrock refused the language model request ({code})",
                         details={**details, "reason": "refused"})
