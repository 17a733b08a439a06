"""The same-fact judge on AWS: one Bedrock Converse call to a small model (seed 002's "tiny LLM
same_fact? check"; Amazon Nova Micro by default, the tenant setting `judge_model_id`).

The prompt (`service.llm_uses`, shared with `LlmJudge`) is short and bounded (each statement
cut to `MAX_STATEMENT_CHARS`), the answer is asked for as one JSON object and bounded by
`maxTokens`, and the client's read timeout bounds the wait. Any failure (throttling, a
timeout, access denied, a refusal, an answer that is not the JSON asked for) is no answer: the
caller creates a new memory, so the candidate is never lost and never merged on a guess. What
failed is logged by code only: never the statements.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Callable
from typing import Any

from memsvc.adapters.aws.errors import error_code
from memsvc.core.same_fact import Verdict
from memsvc.core.typed_memory import TypedMemory
from memsvc.service.llm_uses import JUDGE_MAX_TOKENS as MAX_TOKENS
from memsvc.service.llm_uses import JUDGE_SYSTEM_PROMPT as SYSTEM_PROMPT
from memsvc.service.llm_uses import MAX_STATEMENT_CHARS, judge_prompt, verdict_of

__all__ = ["BedrockJudge", "SYSTEM_PROMPT", "MAX_STATEMENT_CHARS", "MAX_TOKENS", "judge_prompt", "parse_answer"]

log = logging.getLogger(__name__)

_OBJECT = re.compile(r"\{[^{}]*\}")


def parse_answer(response: dict[str, Any]) -> Verdict | None:
    """The verdict in a Converse response, or None if it holds no such JSON object."""
    content = response.get("output", {}).get("message", {}).get("content") or []
    text = "".join(block.get("text", "") for block in content if isinstance(block, dict))
    for match in _OBJECT.finditer(text):  # models like to wrap it in ```json fences
        try:
            answer = json.loads(match.group())
        except ValueError:
            continue
        verdict = verdict_of(answer)
        if verdict is not None:
            return verdict
    return None


class BedrockJudge:
    """`SameFactJudge`. `model_id(tenant)` reads the tenant's `judge_model_id`. The client should
    have a short read timeout and no retries of its own (`AwsClients.judge_runtime`): the judge
    sits on the request path, and a slow answer is worth less than creating a memory now."""

    def __init__(self, client: Any, model_id: Callable[[str], str]) -> None:
        self._client = client
        self._model_id = model_id

    def judge(self, tenant: str, existing: TypedMemory, candidate: TypedMemory) -> Verdict | None:
        model = self._model_id(tenant)
        try:
            response = self._client.converse(
                modelId=model,
                system=[{"text": SYSTEM_PROMPT}],
                messages=[{"role": "user", "content": [{"text": judge_prompt(existing, candidate)}]}],
                inferenceConfig={"maxTokens": MAX_TOKENS, "temperature": 0.0},
            )
        except Exception as exc:  # botocore's errors, timeouts, connection failures: no answer
            log.warning("the same-fact judge failed; creating a new memory",
                        extra={"model_id": model, "error": error_code(exc)})
            return None
        verdict = parse_answer(response)
        if verdict is None:
            log.warning("the same-fact judge gave no usable answer; creating a new memory",
                        extra={"model_id": model, "stop_reason": response.get("stopReason")})
        return verdict
