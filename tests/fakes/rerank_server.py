"""A rerank endpoint on 127.0.0.1 for the tests and `benchmarks/rerank_latency.py`: a stdlib
HTTP server thread answering POST /rerank like Hugging Face TEI (`{query, texts}` ->
`[{index, score}]`, 422 to any other body) or like Cohere (`{query, documents, top_n}` ->
`{results: [{index, relevance_score}]}`), best first as they do.

Its "model" is trivial: by default a text scores the share of the query's words it holds. It
records every request body, and can be told to fail (`fail_with` = an HTTP status), to answer
something that is not a ranking (`garbage`), to wait before answering (`delay_seconds`), or to
send its answer a byte at a time (`drip_seconds` between bytes, from the status line on, or from
the body on with `drip_body_only`), as a slow or hostile endpoint would."""

from __future__ import annotations

import json
import re
import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Literal

__all__ = ["FakeRerankServer", "shared_words"]


def shared_words(query: str, text: str) -> float:
    words = set(re.findall(r"\w+", query.lower()))
    return len(words & set(re.findall(r"\w+", text.lower()))) / max(1, len(words))


class FakeRerankServer:
    def __init__(self, shape: Literal["tei", "cohere"] = "tei",
                 score: Callable[[str, str], float] = shared_words) -> None:
        self.shape = shape
        self.score = score
        self.requests: list[dict[str, Any]] = []
        self.fail_with: int | None = None
        self.garbage = False
        self.delay_seconds = 0.0
        self.drip_seconds: float | None = None
        self.drip_body_only = False
        fake = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_POST(self) -> None:  # noqa: N802 (the stdlib's name)
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                fake.requests.append(body)
                status, answer = fake.answer(body)
                payload = json.dumps(answer).encode()
                time.sleep(fake.delay_seconds)
                if fake.drip_seconds is None:
                    self.send_response(status)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(payload)))
                    self.end_headers()
                    self.wfile.write(payload)
                    return
                head = (f"HTTP/1.1 {status} OK\r\nContent-Type: application/json\r\n"
                        f"Content-Length: {len(payload)}\r\n\r\n").encode()
                if fake.drip_body_only:
                    self.wfile.write(head)
                    head = b""
                try:
                    for i in range(len(head + payload)):
                        self.wfile.write((head + payload)[i:i + 1])
                        self.wfile.flush()
                        time.sleep(fake.drip_seconds)
                except OSError:  # the client gave up
                    self.close_connection = True

            def log_message(self, *args: Any) -> None:
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, name="fake-rerank", daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}/rerank"

    def answer(self, body: dict[str, Any]) -> tuple[int, Any]:
        if self.fail_with is not None:
            return self.fail_with, {"error": "the model is not loaded"}
        texts = body.get("texts" if self.shape == "tei" else "documents")
        if not isinstance(texts, list) or not isinstance(body.get("query"), str):
            return 422, {"error": f"missing field `{'texts' if self.shape == 'tei' else 'documents'}`"}
        if self.garbage:
            return 200, {"scores": [0.5] * len(texts)}
        ranked = sorted(((self.score(body["query"], t), i) for i, t in enumerate(texts)), key=lambda s: -s[0])
        if self.shape == "tei":
            return 200, [{"index": i, "score": s} for s, i in ranked]
        return 200, {"results": [{"index": i, "relevance_score": s} for s, i in ranked[: body.get("top_n")]]}

    def __enter__(self) -> FakeRerankServer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()
