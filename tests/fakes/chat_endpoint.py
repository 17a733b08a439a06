"""A stand-in for an OpenAI-compatible chat endpoint (`MEMSVC_LLM_URL`: Ollama, vLLM, llama.cpp's
server ...) on 127.0.0.1: `POST /v1/chat/completions` answered in OpenAI's response shape with what
a model agreeing with the local heuristics would say (`tests/fakes/converse.heuristic_answer`),
or with `status` when it is set. It records the system prompt of every request. It is no model:
what it tests is the wiring of the local opt-in model into extraction, the judge and the graph."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from tests.fakes.converse import heuristic_answer

__all__ = ["ChatEndpoint"]


class ChatEndpoint:
    def __init__(self) -> None:
        self.systems: list[str] = []
        self.status = 200
        endpoint = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_POST(self) -> None:  # noqa: N802 (the stdlib's name)
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                system, text = body["messages"][0]["content"], body["messages"][1]["content"]
                endpoint.systems.append(system)
                if endpoint.status != 200:
                    payload = json.dumps({"error": {"message": "overloaded"}}).encode()
                else:
                    payload = json.dumps({
                        "id": "chatcmpl-fake", "object": "chat.completion", "created": 1767225600,
                        "model": body["model"],
                        "choices": [{"index": 0, "finish_reason": "stop",
                                     "message": {"role": "assistant", "content": heuristic_answer(system, text)}}],
                        "usage": {"prompt_tokens": 100, "completion_tokens": 20, "total_tokens": 120},
                    }).encode()
                self.send_response(endpoint.status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

            def log_message(self, *args: Any) -> None:
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}/v1"
        threading.Thread(target=self._server.serve_forever, args=(0.05,), daemon=True).start()

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()
