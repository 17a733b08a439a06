"""`LanguageModel` on an OpenAI-compatible chat endpoint the operator names (`MEMSVC_LLM_URL`):
Ollama, vLLM, llama.cpp's server, LM Studio, OpenAI itself.

One POST to `.../chat/completions` per question: `{model, messages, temperature: 0, max_tokens,
response_format: {"type": "json_object"}}`, the system prompt as the first message. An endpoint
that answers 400 to it (some take only `json_schema` formats, some none) is asked once more
without `response_format` in the same call; when that is answered, the adapter stops sending it.
The prompts ask for JSON anyway, and the answer's first JSON value is read whatever surrounds it
(`core.model_answers`).

One deadline (`timeout_seconds`, monotonic) bounds the whole call, both attempts included, and
the answer's size is capped (`bounded_http`): a stalled or dripping endpoint cannot hold the
caller past it. Nothing is retried beyond that: the callers retry later (learning from
conversations, the graph's indexer) or go without (the judge).

Failures, in our words (never the endpoint's or the model's text, which may quote the
conversation): 429 -> `RateLimited`; a timeout -> `ProviderError` reason `timeout`; a 5xx or a
failed connection -> `unavailable`; another error status -> `refused`; an answer cut off
(`finish_reason: length`) before its JSON closed, or holding none -> `malformed`. The messages
go to the endpoint and nowhere else: never logged.
"""

from __future__ import annotations

import http.client
import json
import logging
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit, urlunsplit

from memsvc.adapters.local.bounded_http import AnswerTooLarge, Deadline, Endpoint, HttpAnswer, post_json
from memsvc.core.errors import MemsvcError, ProviderError, RateLimited
from memsvc.core.model_answers import first_json

if TYPE_CHECKING:
    from memsvc.ports import LanguageModel
    from memsvc.settings import LocalSettings

__all__ = ["OpenAiLanguageModel", "local_language_model", "chat_completions_url", "MAX_ANSWER_BYTES"]

log = logging.getLogger(__name__)

# A completion of ~1,200 tokens is ~5 KB of text, twice that escaped, plus the envelope: a few
# tens of KB at most. Far more is no answer of ours (a runaway server, the wrong endpoint).
MAX_ANSWER_BYTES = 256 * 1024
_PROVIDER = "openai-compatible"
_JSON_MODE = {"type": "json_object"}


def chat_completions_url(url: str) -> str:
    """The chat completions URL from what an operator writes: the base URL the OpenAI clients take
    (`http://127.0.0.1:11434/v1`), the endpoint itself (`.../v1/chat/completions`), or a bare
    server (`http://127.0.0.1:8080`, served under `/v1`)."""
    parts = urlsplit(url.strip())
    path = parts.path.rstrip("/")
    if not path.endswith("/chat/completions"):
        path = (path or "/v1") + "/chat/completions"
    return urlunsplit(parts._replace(path=path))


class OpenAiLanguageModel:
    """Args:
        url: the endpoint's base URL or its `/chat/completions` URL (`chat_completions_url`).
        model: the model the endpoint runs (`llama3.2:3b`, `Qwen/Qwen2.5-7B-Instruct`, `gpt-4o-mini`).
        api_key: sent as `Authorization: Bearer`; None for endpoints without one (Ollama, llama.cpp).
        timeout_seconds: for the whole call (connect, request, answer, and a second attempt
            without `response_format`).
    """

    def __init__(self, url: str, model: str, api_key: str | None = None, timeout_seconds: float = 30.0) -> None:
        self._endpoint = Endpoint.of(chat_completions_url(url), name="the language model URL")
        self.model_id = model
        self._headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self._timeout = timeout_seconds
        self._json_mode = True  # until the endpoint refuses `response_format`

    def chat_json(self, system: str, messages: Sequence[tuple[str, str]], *, max_tokens: int,
                  model_id: str | None = None) -> Any:
        deadline = Deadline(self._timeout)
        body = {"model": model_id or self.model_id,
                "messages": [{"role": "system", "content": system},
                             *({"role": role, "content": text} for role, text in messages)],
                "temperature": 0, "max_tokens": max_tokens}
        if self._json_mode:
            answer = self._post({**body, "response_format": _JSON_MODE}, deadline)
            if answer.status == 400:  # perhaps the format it does not take: once more without
                answer = self._post(body, deadline)
                if 200 <= answer.status < 300:
                    self._json_mode = False
        else:
            answer = self._post(body, deadline)
        if not 200 <= answer.status < 300:
            raise _refusal(answer)
        return _json_of(answer.body)

    def _post(self, body: dict[str, Any], deadline: Deadline) -> HttpAnswer:
        try:
            return post_json(self._endpoint, body, deadline=deadline, max_bytes=MAX_ANSWER_BYTES,
                             headers=self._headers)
        except TimeoutError:  # the deadline's, or a socket's waiting for the time left
            log.warning("the language model endpoint did not answer in time")
            raise _error("the language model endpoint did not answer in time", "timeout") from None
        except AnswerTooLarge:
            log.warning("the language model endpoint's answer is too large")
            raise _error("the language model endpoint's answer is too large", "malformed") from None
        except (OSError, http.client.HTTPException) as exc:
            log.warning("the language model endpoint is unreachable", extra={"error": type(exc).__name__})
            raise _error("the language model endpoint is unreachable", "unavailable") from None


def _json_of(payload: bytes) -> Any:
    """The first JSON value in a chat completion's first choice."""
    try:
        completion = json.loads(payload)
    except ValueError:
        completion = None
    choices = completion.get("choices") if isinstance(completion, dict) else None
    choice = choices[0] if isinstance(choices, list) and choices and isinstance(choices[0], dict) else {}
    message = choice.get("message")
    content = message.get("content") if isinstance(message, dict) else None
    answer = first_json(content) if isinstance(content, str) else None
    if answer is None:
        cut_off = choice.get("finish_reason") == "length"
        log.warning("the language model gave no usable answer", extra={"finish_reason": choice.get("finish_reason")})
        raise _error("the language model's answer was cut off before its JSON closed" if cut_off
                     else "the language model's answer held no JSON", "malformed")
    return answer


def _refusal(answer: HttpAnswer) -> MemsvcError:
    log.warning("the language model endpoint answered %d", answer.status)
    if answer.status == 429:
        return RateLimited("the language model endpoint is throttling requests; try again shortly",
                           retry_after_seconds=_seconds(answer.retry_after),
                           details={"provider": _PROVIDER, "status": 429})
    if answer.status == 408 or answer.status == 504:
        return _error(f"the language model endpoint timed out ({answer.status})", "timeout", answer.status)
    if answer.status >= 500:
        return _error(f"the language model endpoint failed ({answer.status})", "unavailable", answer.status)
    return _error(f"the language model endpoint refused the request ({answer.status})", "refused", answer.status)


def _error(message: str, reason: str, status: int | None = None) -> ProviderError:
    details: dict[str, Any] = {"provider": _PROVIDER, "reason": reason}
    if status is not None:
        details["status"] = status
    return ProviderError(message, details=details)


def _seconds(retry_after: str | None) -> int:
    """Retry-After in whole seconds (1..60); its HTTP-date form is read as 1."""
    try:
        return min(60, max(1, int(retry_after or "1")))
    except ValueError:
        return 1


def local_language_model(settings: LocalSettings) -> LanguageModel | None:
    """The chat endpoint the operator named (`MEMSVC_LLM_URL`, `MEMSVC_LLM_MODEL`), if any."""
    if settings.llm_url is None:
        return None
    if not settings.llm_model:
        raise ValueError("MEMSVC_LLM_URL is set without MEMSVC_LLM_MODEL: name the model the endpoint should run")
    return OpenAiLanguageModel(settings.llm_url, settings.llm_model, api_key=settings.llm_api_key,
                               timeout_seconds=settings.llm_timeout_seconds)
