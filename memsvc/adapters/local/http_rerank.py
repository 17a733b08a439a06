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
the status line and headers, the body, and in `auto` mode both attempts. A socket's own timeout
bounds one read, so a server dripping a byte at a time would never trip it: every read and write
is given the time left before it, and the call fails with `TimeoutError` once none is left.
(Name resolution and a TLS handshake are bounded by the time left when they start.)

The client is the standard library's `http.client`, one connection per call (a loopback connect
costs about 0.1 ms; a pooled keep-alive connection would have to survive the server closing it).
Nothing is retried: the rerank step keeps the fused order when a call fails, and a search must
not wait twice. The query and the texts go to the endpoint and nowhere else: never logged.
"""

from __future__ import annotations

import http.client
import io
import json
import socket
import time
from collections.abc import Sequence
from typing import Any, Literal
from urllib.parse import urlsplit

from memsvc.core.rerank_results import scores_in_order

__all__ = ["HttpReranker", "RerankApi", "RerankRefused", "MAX_ANSWER_BYTES"]

RerankApi = Literal["auto", "cohere", "tei"]
# An answer is a score per text (at most the step's top_n, 100): a few KB. More is no answer of ours.
MAX_ANSWER_BYTES = 1 << 20
_WRONG_SHAPE = {400, 404, 422}
_CHUNK_BYTES = 64 * 1024


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
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError("the rerank URL must be an http:// or https:// URL")
        self._connection = _HttpsConnection if parts.scheme == "https" else _HttpConnection
        self._host, self._port = parts.hostname, parts.port
        self._path = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
        self._api = api
        self._timeout = timeout_seconds

    def rerank(self, query: str, texts: Sequence[str], *, model_id: str | None) -> list[float]:
        if not texts:
            return []
        deadline = _Deadline(self._timeout)
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

    def _post(self, body: dict[str, Any], deadline: _Deadline) -> Any:
        connection = self._connection(self._host, self._port, deadline=deadline)
        try:
            connection.request("POST", self._path, body=json.dumps(body).encode(),
                               headers={"Content-Type": "application/json", "Accept": "application/json"})
            response = connection.getresponse()
            if not 200 <= response.status < 300:
                raise RerankRefused(response.status)
            payload = bytearray()
            while chunk := response.read(_CHUNK_BYTES):
                payload += chunk
                if len(payload) > MAX_ANSWER_BYTES:
                    raise ValueError("the rerank answer is too large")
        finally:
            connection.close()
        return json.loads(payload)


class _Deadline:
    """The end of one rerank call, on the monotonic clock."""

    def __init__(self, seconds: float) -> None:
        self._end = time.monotonic() + seconds

    def left(self) -> float:
        """Seconds left; TimeoutError when there are none."""
        left = self._end - time.monotonic()
        if left <= 0:
            raise TimeoutError("the rerank call ran out of time")
        return left


class _DeadlineSocket:
    """A connected socket whose every read and write may wait only for the time left to the
    call's deadline (`http.client` reads the status line and headers through `makefile`)."""

    def __init__(self, sock: socket.socket, deadline: _Deadline) -> None:
        self._sock = sock
        self._deadline = deadline

    def recv_into(self, buffer: Any, nbytes: int = 0, flags: int = 0) -> int:
        self._sock.settimeout(self._deadline.left())
        return self._sock.recv_into(buffer, nbytes, flags)

    def recv(self, bufsize: int, flags: int = 0) -> bytes:
        self._sock.settimeout(self._deadline.left())
        return self._sock.recv(bufsize, flags)

    def sendall(self, data: Any, flags: int = 0) -> None:
        self._sock.settimeout(self._deadline.left())  # since 3.5, the bound of the whole sendall
        self._sock.sendall(data, flags)

    def send(self, data: Any, flags: int = 0) -> int:
        self._sock.settimeout(self._deadline.left())
        return self._sock.send(data, flags)

    def makefile(self, mode: str = "r", *args: Any, **kwargs: Any) -> io.BufferedReader:
        if mode != "rb":
            raise ValueError("only a binary reader is made")
        self._sock._io_refs += 1  # type: ignore[attr-defined]  # as socket.makefile does; SocketIO.close undoes it
        return io.BufferedReader(socket.SocketIO(self, "rb"))  # type: ignore[arg-type]

    def __getattr__(self, name: str) -> Any:
        return getattr(self._sock, name)


class _DeadlineConnection:
    """Mixed into `http.client`'s connections: connects within the time left, then reads and
    writes through a `_DeadlineSocket`."""

    def __init__(self, host: str, port: int | None, *, deadline: _Deadline) -> None:
        super().__init__(host, port, timeout=deadline.left())  # type: ignore[call-arg]
        self._deadline = deadline

    def connect(self) -> None:
        self.timeout = self._deadline.left()
        super().connect()  # type: ignore[misc]
        self.sock = _DeadlineSocket(self.sock, self._deadline)  # type: ignore[has-type]


class _HttpConnection(_DeadlineConnection, http.client.HTTPConnection):
    pass


class _HttpsConnection(_DeadlineConnection, http.client.HTTPSConnection):
    pass


def _scores(answer: Any, count: int) -> list[float]:
    """One score per text, in input order, from either shape (TEI's list, Cohere's `results`)."""
    if isinstance(answer, dict):
        return scores_in_order(answer.get("results"), count, "relevance_score")
    return scores_in_order(answer, count, "score")
