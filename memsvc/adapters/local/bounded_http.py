"""One JSON POST to an endpoint the operator runs, bounded by one deadline and one answer size.

One deadline per call (monotonic) bounds all of it: the connect, sending, the status line and
headers, the body. A socket's own timeout bounds one read, so a server dripping a byte at a time
would never trip it: every read and write is given the time left before it, and the call fails
with `TimeoutError` once none is left. (Name resolution and a TLS handshake are bounded by the
time left when they start.) Callers making two attempts charge both to one `Deadline`.

The client is the standard library's `http.client`, one connection per call (a loopback connect
costs about 0.1 ms; a pooled keep-alive connection would have to survive the server closing it).
Used by `http_rerank` and `openai_llm`. Nothing here logs what is sent or answered.
"""

from __future__ import annotations

import http.client
import io
import json
import socket
import time
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from memsvc.core import slots

__all__ = ["Deadline", "Endpoint", "HttpAnswer", "AnswerTooLarge", "post_json"]

_CHUNK_BYTES = 64 * 1024


class AnswerTooLarge(ValueError):
    """The answer's body went past the caller's cap: no answer of the kind asked for."""

    def __init__(self) -> None:
        super().__init__("the answer is too large")


class Deadline:
    """The end of one call, on the monotonic clock."""

    def __init__(self, seconds: float) -> None:
        self._end = time.monotonic() + seconds

    def left(self) -> float:
        """Seconds left; TimeoutError when there are none."""
        left = self._end - time.monotonic()
        if left <= 0:
            raise TimeoutError("the call ran out of time")
        return left


@dataclass(frozen=True)
class Endpoint:
    """An http:// or https:// URL, split once."""

    https: bool
    host: str
    port: int | None
    path: str

    @classmethod
    def of(cls, url: str, *, name: str = "the URL") -> Endpoint:
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"{name} must be an http:// or https:// URL")
        path = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
        return cls(parts.scheme == "https", parts.hostname, parts.port, path)


@dataclass(frozen=True)
class HttpAnswer:
    status: int
    body: bytes  # read only for a 2xx status: nothing in an error's body is used
    retry_after: str | None = None  # the Retry-After header, as sent


def post_json(endpoint: Endpoint, body: Any, *, deadline: Deadline, max_bytes: int,
              headers: dict[str, str] | None = None) -> HttpAnswer:
    """POST `body` as JSON. Raises `TimeoutError` past the deadline, `AnswerTooLarge` past
    `max_bytes`, `OSError` or `http.client.HTTPException` when the connection fails."""
    with slots.released():  # waiting on the network: the request's slot serves others meanwhile
        return _post_json(endpoint, body, deadline=deadline, max_bytes=max_bytes, headers=headers)


def _post_json(endpoint: Endpoint, body: Any, *, deadline: Deadline, max_bytes: int,
               headers: dict[str, str] | None) -> HttpAnswer:
    connection_type = _HttpsConnection if endpoint.https else _HttpConnection
    connection = connection_type(endpoint.host, endpoint.port, deadline=deadline)
    try:
        connection.request("POST", endpoint.path, body=json.dumps(body).encode(),
                           headers={"Content-Type": "application/json", "Accept": "application/json",
                                    **(headers or {})})
        response = connection.getresponse()
        if not 200 <= response.status < 300:
            return HttpAnswer(response.status, b"", response.getheader("Retry-After"))
        payload = bytearray()
        while chunk := response.read(_CHUNK_BYTES):
            payload += chunk
            if len(payload) > max_bytes:
                raise AnswerTooLarge()
        return HttpAnswer(response.status, bytes(payload))
    finally:
        connection.close()


class _DeadlineSocket:
    """A connected socket whose every read and write may wait only for the time left to the
    call's deadline (`http.client` reads the status line and headers through `makefile`)."""

    def __init__(self, sock: socket.socket, deadline: Deadline) -> None:
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

    def __init__(self, host: str, port: int | None, *, deadline: Deadline) -> None:
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
