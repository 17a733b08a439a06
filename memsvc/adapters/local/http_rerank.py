"""`Reranker` on an HTTP `/rerank` endpoint the operator runs (`MEMSVC_RERANK_URL`).

Two wire shapes are spoken, the two that rerank servers offer:

- Cohere's (also Jina's, Infinity's, vLLM's): POST `{model?, query, documents, top_n}` ->
  `{results: [{index, relevance_score}]}`;
- Hugging Face Text Embeddings Inference's: POST `{query, texts}` -> `[{index, score}]`.

`api="auto"` sends Cohere's request first and, when the endpoint refuses its shape (400, 404,
422: TEI answers 422 to a body without `texts`), TEI's; the shape of the first answer that
scored every text is kept by the adapter. An answer is read by its own shape (a list is TEI's,
an object with `results` Cohere's), whichever was asked.

One deadline per call (`timeout_seconds`, monotonic) bounds all of it: the connect, sending,
the status line and headers, the body, and in `auto` mode both attempts (`bounded_http`: a
server dripping its answer a byte at a time cannot hold a search past it). One connection per
call, through the standard library's `http.client`.

Nothing is retried: the rerank step keeps the fused order when a call fails, and a search must
not wait twice. The query and the texts go to the endpoint and nowhere else: never logged.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any, Literal

from memsvc.adapters.local.bounded_http import Deadline, Endpoint, post_json
from memsvc.core.rerank_results import scores_in_order

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
        timeout_seconds: for the whole call: connect, request, answer (and in `auto` mode, a
            second request after the first shape was refused).

    A tenant's `model_id` is sent as Cohere's `model` (TEI serves one model and is not told).
    """

    def __init__(self, url: str, *, api: RerankApi = "auto", timeout_seconds: float = 2.0) -> None:
        self._endpoint = Endpoint.of(url, name="the rerank URL")
        self._api = api
        self._timeout = timeout_seconds

    def rerank(self, query: str, texts: Sequence[str], *, model_id: str | None) -> list[float]:
        if not texts:
            return []
        deadline = Deadline(self._timeout)
        tei = {"query": query, "texts": list(texts)}
        if self._api == "tei":
            return _scores(self._post(tei, deadline), len(texts))
        try:
            answer = self._post({**({"model": model_id} if model_id else {}), "query": query, "documents": list(texts),
                                 "top_n": len(texts)}, deadline)
            shape: RerankApi = "cohere"
        except RerankRefused as refused:
            if self._api == "cohere" or refused.status not in _WRONG_SHAPE:
                raise
            answer, shape = self._post(tei, deadline), "tei"
        scores = _scores(answer, len(texts))
        self._api = shape  # found out: later calls send this shape alone
        return scores

    def _post(self, body: dict[str, Any], deadline: Deadline) -> Any:
        answer = post_json(self._endpoint, body, deadline=deadline, max_bytes=MAX_ANSWER_BYTES)
        if not 200 <= answer.status < 300:
            raise RerankRefused(answer.status)
        return json.loads(answer.body)


def _scores(answer: Any, count: int) -> list[float]:
    """One score per text, in input order, from either shape (TEI's list, Cohere's `results`)."""
    if isinstance(answer, dict):
        return scores_in_order(answer.get("results"), count, "relevance_score")
    return scores_in_order(answer, count, "score")
