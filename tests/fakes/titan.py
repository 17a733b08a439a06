"""A stand-in for Titan Text Embeddings V2 behind a real boto3 `bedrock-runtime` client.

moto 5.2 answers InvokeModel with `{}`, which exercises nothing. This fake hooks botocore's
`before-call.bedrock-runtime.InvokeModel` event: a handler that returns `(http_response, parsed)`
short-circuits `BaseClient._make_api_call` before anything is signed or sent, and botocore then
treats the pair exactly like a real answer (a status >= 300 raises the modelled `ClientError`
subclass, e.g. `client.exceptions.ThrottlingException`). So the adapter under test runs its real
client code path: parameter validation, serialisation, error classes, `StreamingBody`.

What it emulates, as Titan V2 does:
- the request: JSON body with required `inputText` (1..50,000 characters), optional `dimensions`
  (256 | 512 | 1024, default 1024), `normalize` (bool, default true) and `embeddingTypes`; any
  other key, a wrong content type or an unknown model id is a `ValidationException`; a text over
  the token limit (8,192 by default; tokens approximated as words and punctuation marks) is the
  `ValidationException` Titan sends ("Too many input tokens. Max input tokens: ...");
- the response: `{"embedding", "inputTextTokenCount", "embeddingsByType"}` in a `StreamingBody`;
  the embedding is a hashed bag of words (texts sharing words are similar, texts sharing none are
  orthogonal), unit length when `normalize` is true, so semantic tests mean something;
- failures on demand: throttling, any modelled error code, read timeouts.

Anything the fake does not answer hits a `before-send` guard that raises `NetworkBlocked`: no
test can reach AWS through a client the fake is installed on.
"""

from __future__ import annotations

import hashlib
import io
import json
import math
import re
import threading
import time
import uuid
from collections.abc import Callable
from typing import Any
from urllib.parse import unquote

from botocore.awsrequest import AWSResponse
from botocore.exceptions import ReadTimeoutError
from botocore.response import StreamingBody

__all__ = ["TITAN_V2_MODEL_ID", "NetworkBlocked", "TitanFake", "install_titan_fake", "fake_embedding"]

TITAN_V2_MODEL_ID = "amazon.titan-embed-text-v2:0"
_DIMENSIONS = (256, 512, 1024)
_MAX_CHARS = 50_000
_KEYS = {"inputText", "dimensions", "normalize", "embeddingTypes"}
_MALFORMED = "Malformed input request: {}, please reformat your input and try again."
_MESSAGES = {  # what Bedrock says for each injected error
    "ThrottlingException": "Too many requests, please wait before trying again.",
    "ServiceQuotaExceededException": "Your request exceeds the service quota for your account.",
    "ServiceUnavailableException": "Bedrock is unable to process your request.",
    "InternalServerException": "The server encountered an internal error while processing the request.",
    "ModelNotReadyException": "The model is not ready to serve inference requests.",
    "ModelTimeoutException": "The request took too long to process.",
    "AccessDeniedException": "You don't have access to the model with the specified model ID.",
    "ValidationException": "Malformed input request, please reformat your input and try again.",
}


class NetworkBlocked(AssertionError):
    """A request was about to leave the process."""


def fake_embedding(text: str, dimension: int = 1024, normalize: bool = True) -> list[float]:
    """The fake's embedding: word counts hashed into `dimension` buckets (unit length if asked)."""
    vec = [0.0] * dimension
    words = re.findall(r"\w+", text.lower()) or [text.strip() or text]  # never all-zero
    for word in words:
        h = int.from_bytes(hashlib.sha256(word.encode("utf-8", "surrogatepass")).digest()[:4], "big")
        vec[h % dimension] += 1.0
    if normalize:
        norm = math.sqrt(sum(x * x for x in vec))
        vec = [x / norm for x in vec]
    return vec


def _token_count(text: str) -> int:
    return len(re.findall(r"\w+|[^\w\s]", text))


class TitanFake:
    """The installed fake: its knobs, what it was asked, and how busy it got.

    Failures are consumed one per request, throttles first, then `fail_next` (with `fail_code`),
    then timeouts; `error_for(text)` may name an error code for particular texts.
    """

    def __init__(self, client: Any, *, dimension: int, max_tokens: int, latency: float,
                 ignore_normalize: bool, model_ids: tuple[str, ...]) -> None:
        self.client = client
        self.default_dimension = dimension
        self.max_tokens = max_tokens
        self.latency = latency
        self.ignore_normalize = ignore_normalize
        self.model_ids = model_ids
        self.throttle_next = 0
        self.throttle_code = "ThrottlingException"
        self.fail_next = 0
        self.fail_code = "ServiceUnavailableException"
        self.timeout_next = 0
        self.error_for: Callable[[str], str | None] | None = None
        self.calls: list[dict[str, Any]] = []  # {"model_id", "content_type", "accept", "body", "url", "outcome"}
        self.in_flight = 0
        self.max_in_flight = 0
        self._lock = threading.Lock()
        self._uid = uuid.uuid4().hex

    @property
    def bodies(self) -> list[dict[str, Any]]:
        return [c["body"] for c in self.calls]

    def uninstall(self) -> None:
        events = self.client.meta.events
        events.unregister("before-call.bedrock-runtime.InvokeModel", unique_id=f"titan-fake-{self._uid}")
        events.unregister("before-send.bedrock-runtime", unique_id=f"titan-guard-{self._uid}")

    # -- botocore hooks -------------------------------------------------------------------------

    def _on_call(self, params: dict[str, Any], **_: Any) -> tuple[AWSResponse, dict[str, Any]]:
        with self._lock:
            self.in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self.in_flight)
        try:
            if self.latency:
                time.sleep(self.latency)
            return self._answer(params)
        finally:
            with self._lock:
                self.in_flight -= 1

    def _answer(self, params: dict[str, Any]) -> tuple[AWSResponse, dict[str, Any]]:
        raw = params["body"]
        raw = raw.encode() if isinstance(raw, str) else bytes(raw)
        try:
            body: Any = json.loads(raw)
        except ValueError:
            body = raw
        call = {
            "model_id": unquote(params["url_path"].split("/")[2]),
            "content_type": params["headers"].get("Content-Type"),
            "accept": params["headers"].get("Accept"),
            "body": body,
            "url": params["url"],
        }
        with self._lock:
            self.calls.append(call)
            injected = None
            if self.throttle_next:
                self.throttle_next -= 1
                injected = self.throttle_code
            elif self.fail_next:
                self.fail_next -= 1
                injected = self.fail_code
            elif self.timeout_next:
                self.timeout_next -= 1
                injected = "timeout"
        if injected is None and self.error_for and isinstance(body, dict):
            injected = self.error_for(str(body.get("inputText", "")))
        if injected == "timeout":
            call["outcome"] = "timeout"
            raise ReadTimeoutError(endpoint_url=params["url"])
        if injected:
            return self._error(call, injected, _MESSAGES.get(injected, injected))
        problem = self._validate(call)
        if problem:
            return self._error(call, "ValidationException", problem)
        text = body["inputText"]
        dimension = body.get("dimensions", self.default_dimension)
        normalize = body.get("normalize", True) and not self.ignore_normalize
        vector = fake_embedding(text, dimension, normalize)
        tokens = _token_count(text)
        payload = json.dumps({
            "embedding": vector,
            "embeddingsByType": {"float": vector},
            "inputTextTokenCount": tokens,
        }).encode()
        call["outcome"] = "ok"
        headers = {"content-type": "application/json", "x-amzn-bedrock-input-token-count": str(tokens)}
        parsed = {
            "body": StreamingBody(io.BytesIO(payload), len(payload)),
            "contentType": "application/json",
            "ResponseMetadata": {"HTTPStatusCode": 200, "HTTPHeaders": headers, "RetryAttempts": 0},
        }
        return AWSResponse(params["url"], 200, headers, None), parsed

    def _validate(self, call: dict[str, Any]) -> str | None:
        body = call["body"]
        if call["model_id"] not in self.model_ids:
            return "The provided model identifier is invalid."
        if call["content_type"] != "application/json":
            return "The provided content type is not supported."
        if not isinstance(body, dict):
            return _MALFORMED.format("#: expected type: JSONObject")
        for key in body:
            if key not in _KEYS:
                return _MALFORMED.format(f"#: extraneous key [{key}] is not permitted")
        if "inputText" not in body:
            return _MALFORMED.format("#: required key [inputText] not found")
        text = body["inputText"]
        if not isinstance(text, str):
            return _MALFORMED.format(f"#/inputText: expected type: String, found: {type(text).__name__}")
        if not 1 <= len(text) <= _MAX_CHARS:
            bound = "minLength: 1" if not text else f"maxLength: {_MAX_CHARS}"
            return _MALFORMED.format(f"#/inputText: expected {bound}, actual: {len(text)}")
        dims = body.get("dimensions", self.default_dimension)
        if isinstance(dims, bool) or dims not in _DIMENSIONS:
            return _MALFORMED.format(f"#/dimensions: {dims} is not a valid enum value")
        if not isinstance(body.get("normalize", True), bool):
            return _MALFORMED.format("#/normalize: expected type: Boolean")
        types = body.get("embeddingTypes", ["float"])
        if not isinstance(types, list) or not types or not set(types) <= {"float", "binary"}:
            return _MALFORMED.format("#/embeddingTypes: invalid value")
        tokens = _token_count(text)
        if tokens > self.max_tokens:
            return (f"400 Bad Request: Too many input tokens. Max input tokens: {self.max_tokens}, "
                    f"request input token count: {tokens}")
        return None

    def _error(self, call: dict[str, Any], code: str, message: str) -> tuple[AWSResponse, dict[str, Any]]:
        call["outcome"] = code
        shape = self.client.meta.service_model.shape_for(code)  # the status Bedrock uses for it
        status = shape.metadata.get("error", {}).get("httpStatusCode", 400)
        headers = {"x-amzn-errortype": f"{code}:http://internal.amazon.com/coral/com.amazon.bedrock/"}
        parsed = {
            "Error": {"Code": code, "Message": message},
            "message": message,
            "ResponseMetadata": {"HTTPStatusCode": status, "HTTPHeaders": headers, "RetryAttempts": 0},
        }
        return AWSResponse(call["url"], status, headers, None), parsed

    def _guard(self, request: Any, **_: Any) -> None:
        raise NetworkBlocked(f"a test tried to send {request.method} {request.url}")


def install_titan_fake(
    client: Any,
    *,
    dimension: int = 1024,
    throttle_first: int = 0,
    fail_first: int = 0,
    fail_code: str = "ServiceUnavailableException",
    timeout_first: int = 0,
    error_for: Callable[[str], str | None] | None = None,
    max_tokens: int = 8192,
    latency: float = 0.0,
    ignore_normalize: bool = False,
    model_ids: tuple[str, ...] = (TITAN_V2_MODEL_ID,),
) -> TitanFake:
    """Serve `client`'s InvokeModel calls from the fake and block everything else it might send.

    `dimension` is what Titan uses when the body names none; `ignore_normalize` answers with raw
    (unnormalised) vectors, to check that the adapter normalises anyway; `latency` makes each call
    take that long, so concurrency can be observed (`max_in_flight`).
    """
    fake = TitanFake(client, dimension=dimension, max_tokens=max_tokens, latency=latency,
                     ignore_normalize=ignore_normalize, model_ids=model_ids)
    fake.throttle_next, fake.fail_next, fake.fail_code = throttle_first, fail_first, fail_code
    fake.timeout_next, fake.error_for = timeout_first, error_for
    events = client.meta.events
    events.register("before-call.bedrock-runtime.InvokeModel", fake._on_call, unique_id=f"titan-fake-{fake._uid}")
    events.register("before-send.bedrock-runtime", fake._guard, unique_id=f"titan-guard-{fake._uid}")
    return fake
