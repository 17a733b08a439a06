"""`Reranker` on an HTTP `/rerank` endpoint the operator runs (`MEMSVC_RERANK_URL`).

Two wire shapes are spoken, the two that rerank servers offer:

- Cohere's (also Jina's, Infinity's, vLLM's): POST `{model?, query, documents, top_n}` ->
  `{results: [{index, relevance_score}]}`;
- Hugging Face Text Embeddings Inference's: POST `{query, texts}` -> `[{index, score}]`.

`api="auto"` sends Cohere's request first and, when the endpoint refuses its shape (400, 404,
422: TEI answers 422 to a body without `texts`), TEI's; the shape that worked is kept for the
process. An answer is read by its own shape (a list is TEI's, an object with `results`
Cohere's), whichever was asked.

The client is the standard library's `http.client`, one connection per call (a loopback connect
costs about 0.1 ms; a pooled keep-alive connection would have to survive the server closing it).
Nothing is retried: the rerank step keeps the fused order when a call fails, and a search must
not wait twice. The query and the texts go to the endpoint and nowhere else: never logged.
"""

from __future__ import annotations

import http.client
import json
import math
from collections.abc import Sequence
from typing import Any, Literal
from urllib.parse import urlsplit

__all__ = ["HttpReranker", "RerankApi", "RerankRefused", "MAX_ANSWER_BYTES"]

RerankApi = Literal["auto", "cohere", "tei"]
# An answer is a score per text (at most the step's top_n, 100): a few KB. More is no answer of ours.
MAX_ANSWER_BYTES = 1 << 20
_WRONG_SHAPE = {400, 404, 422}


class RerankRefused(Exception):
    """The endpoint answered with an error status."""

    def __init__(self, status: int) -> None:
        super().__init__(f"the rerank endpoint answered {status}")
        self.status = status


class HttpReranker:
    """Args:
        url: the endpoint itself, `http://127.0.0.1:8080/rerank` (TEI) or `.../v1/rerank`.
        api: which request shape to send; `auto` finds out on the first call.
        timeout_seconds: for the connection and for the answer, each.

    A tenant's `model_id` is sent as Cohere's `model` (TEI serves one model and is not told).
    """

    def __init__(self, url: str, *, api: RerankApi = "auto", timeout_seconds: float = 2.0) -> None:
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError("the rerank URL must be an http:// or https:// URL")
        self._connection = http.client.HTTPSConnection if parts.scheme == "https" else http.client.HTTPConnection
        self._host, self._port = parts.hostname, parts.port
        self._path = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
        self._api = api
        self._timeout = timeout_seconds

    def rerank(self, query: str, texts: Sequence[str], *, model_id: str | None) -> list[float]:
        if not texts:
            return []
        if self._api == "tei":
            return _scores(self._post({"query": query, "texts": list(texts)}), len(texts))
        try:
            answer = self._post({**({"model": model_id} if model_id else {}), "query": query, "documents": list(texts),
                                 "top_n": len(texts)})
        except RerankRefused as refused:
            if self._api == "cohere" or refused.status not in _WRONG_SHAPE:
                raise
            answer = self._post({"query": query, "texts": list(texts)})
            self._api = "tei"
        else:
            self._api = "cohere"
        return _scores(answer, len(texts))

    def _post(self, body: dict[str, Any]) -> Any:
        connection = self._connection(self._host, self._port, timeout=self._timeout)
        try:
            connection.request("POST", self._path, body=json.dumps(body).encode(),
                               headers={"Content-Type": "application/json", "Accept": "application/json"})
            response = connection.getresponse()
            payload = response.read(MAX_ANSWER_BYTES + 1)
        finally:
            connection.close()
        if not 200 <= response.status < 300:
            raise RerankRefused(response.status)
        if len(payload) > MAX_ANSWER_BYTES:
            raise ValueError("the rerank answer is too large")
        return json.loads(payload)


def _scores(answer: Any, count: int) -> list[float]:
    """One score per text, in input order, from either shape; ValueError unless every text has
    exactly one finite score."""
    if isinstance(answer, list):
        results, name = answer, "score"
    elif isinstance(answer, dict) and isinstance(answer.get("results"), list):
        results, name = answer["results"], "relevance_score"
    else:
        raise ValueError("the rerank answer has no results")
    scores: list[float | None] = [None] * count
    for result in results:
        index = result.get("index") if isinstance(result, dict) else None
        score = result.get(name) if isinstance(result, dict) else None
        if (not isinstance(index, int) or isinstance(index, bool) or not 0 <= index < count
                or scores[index] is not None):
            raise ValueError("a rerank result has no index of a text sent")
        if not isinstance(score, (int, float)) or isinstance(score, bool) or not math.isfinite(score):
            raise ValueError("a rerank result has no finite score")
        scores[index] = float(score)
    if any(s is None for s in scores):
        raise ValueError("the rerank answer leaves texts unscored")
    return scores  # type: ignore[return-value]
