"""An OpenAI-compatible chat completions endpoint on 127.0.0.1 (what `MEMSVC_LLM_URL` names:
Ollama, vLLM, llama.cpp's server ...), for the language-model adapter's tests and the local
opt-in model's wiring tests. It records each request (path, headers, body) and answers:
- by default, in OpenAI's response shape, with what a model agreeing with the local heuristics
  would say to our prompts (`tests/fakes/converse.heuristic_answer`): no model, so what is tested
  is the wiring of extraction, the judge and the graph to it;
- with `replies` set, the next of them (status, JSON or bytes), the last one repeated;
with `headers` added, and a byte at a time when `drip_seconds` is set, as a slow endpoint would."""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from tests.fakes.converse import heuristic_answer

__all__ = ["ChatEndpoint"]


class ChatEndpoint:
    def __init__(self) -> None:
        self.requests: list[tuple[str, dict[str, str], dict[str, Any]]] = []
        self.replies: list[tuple[int, Any]] | None = None
        self.headers: dict[str, str] = {}
        self.drip_seconds: float | None = None
        endpoint = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_POST(self) -> None:  # noqa: N802 (the stdlib's name)
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                endpoint.requests.append((self.path, dict(self.headers), body))
                status, answer = endpoint.answer(body)
                payload = answer if isinstance(answer, bytes) else json.dumps(answer).encode()
                head = (f"HTTP/1.1 {status} X\r\nContent-Type: application/json\r\nContent-Length: {len(payload)}\r\n"
                        + "".join(f"{k}: {v}\r\n" for k, v in endpoint.headers.items()) + "\r\n").encode()
                try:
                    if endpoint.drip_seconds is None:
                        self.wfile.write(head + payload)
                        return
                    for i in range(len(head + payload)):
                        self.wfile.write((head + payload)[i:i + 1])
                        self.wfile.flush()
                        time.sleep(endpoint.drip_seconds)
                except OSError:  # the client gave up
                    self.close_connection = True

            def log_message(self, *args: Any) -> None:
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}/v1"
        threading.Thread(target=self._server.serve_forever, args=(0.05,), daemon=True).start()

    @property
    def systems(self) -> list[str]:
        """The system prompt of each request, in order."""
        return [body["messages"][0]["content"] for _, _, body in self.requests]

    def answer(self, body: dict[str, Any]) -> tuple[int, Any]:
        if self.replies is not None:
            return self.replies[min(len(self.requests), len(self.replies)) - 1]
        system, text = body["messages"][0]["content"], body["messages"][1]["content"]
        return 200, {"id": "chatcmpl-fake", "object": "chat.completion", "created": 1767225600,
                     "model": body["model"],
                     "choices": [{"index": 0, "finish_reason": "stop",
                                  "message": {"role": "assistant", "content": heuristic_answer(system, text)}}],
                     "usage": {"prompt_tokens": 100, "completion_tokens": 20, "total_tokens": 120}}

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()
