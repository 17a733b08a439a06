"""`memsvc serve`'s HTTP protocol (`local_server.EnvelopeHttpProtocol`) driven without a socket:
a fake transport records what is written and whether it closed, and a fake loop holds the read
timer, so a slow client is a timer fired by hand, not a wait. (The live-socket cases, malformed
requests and heads too large, are in tests/api/test_bad_input.py.)"""

from __future__ import annotations

import json

import pytest
from uvicorn.config import Config
from uvicorn.server import ServerState

from memsvc.local_server import MAX_HEAD_BYTES, REQUEST_READ_SECONDS, EnvelopeHttpProtocol


class Timer:
    def __init__(self, delay: float, callback) -> None:
        self.delay, self.callback, self.cancelled = delay, callback, False

    def cancel(self) -> None:
        self.cancelled = True

    def fire(self) -> None:
        self.cancelled = True  # done: no longer live
        self.callback()


class Loop:
    """What the protocol asks of its event loop: timers (kept, fired by the test) and tasks
    (the application's answer, which these tests never run)."""

    def __init__(self) -> None:
        self.timers: list[Timer] = []

    def call_later(self, delay: float, callback, *args) -> Timer:
        timer = Timer(delay, lambda: callback(*args))
        self.timers.append(timer)
        return timer

    def create_task(self, coroutine, **_):
        coroutine.close()
        return _Task()

    def live(self) -> list[Timer]:
        return [t for t in self.timers if not t.cancelled and t.delay == REQUEST_READ_SECONDS]


class _Task:
    def add_done_callback(self, _) -> None:
        pass


class Transport:
    def __init__(self) -> None:
        self.written, self.closed, self.reading = b"", False, True

    def write(self, data: bytes) -> None:
        self.written += data

    def close(self) -> None:
        self.closed = True

    def is_closing(self) -> bool:
        return self.closed

    def get_extra_info(self, name: str, default=None):
        return {"peername": ("127.0.0.1", 5000), "sockname": ("127.0.0.1", 8000)}.get(name, default)

    def pause_reading(self) -> None:
        self.reading = False

    def resume_reading(self) -> None:
        self.reading = True


async def _app(scope, receive, send) -> None:  # never run: the fake loop closes its coroutine
    pass


@pytest.fixture
def connection():
    loop, transport = Loop(), Transport()
    protocol = EnvelopeHttpProtocol(Config(app=_app, lifespan="off", ws="none"), ServerState(), {}, _loop=loop)
    protocol.connection_made(transport)
    return protocol, loop, transport


def test_a_connection_that_never_sends_is_closed_when_its_read_timer_fires(connection):
    protocol, loop, transport = connection
    (timer,) = loop.live()
    assert not transport.closed
    timer.fire()
    assert transport.closed and transport.written == b""


def test_half_a_head_is_closed_when_the_timer_fires(connection):
    protocol, loop, transport = connection
    protocol.data_received(b"GET /health HTTP/1.1\r\nHost: x\r\n")
    (timer,) = loop.live()  # the connection's clock goes on: no new one for its first request
    timer.fire()
    assert transport.closed


def test_a_body_that_never_completes_is_closed_when_the_timer_fires(connection):
    protocol, loop, transport = connection
    protocol.data_received(b"PUT /v1/memories HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n{")
    (timer,) = loop.live()
    timer.fire()
    assert transport.closed


def test_a_whole_request_stops_the_clock_and_the_next_request_starts_its_own(connection):
    protocol, loop, transport = connection
    protocol.data_received(b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n")
    assert loop.live() == []  # the answer being computed is not timed
    protocol.data_received(b"GET /health HTTP/1.1\r\n")  # the next request, pipelined
    (timer,) = loop.live()
    timer.fire()
    assert transport.closed


def test_a_closed_connection_leaves_no_timer(connection):
    protocol, loop, transport = connection
    protocol.connection_lost(None)
    assert loop.live() == []


def test_a_head_over_the_limit_gets_the_413_envelope_and_closes(connection):
    protocol, loop, transport = connection
    protocol.data_received(b"GET /health HTTP/1.1\r\nHost: x\r\nX-Pad: " + b"a" * MAX_HEAD_BYTES + b"\r\n\r\n")
    head, _, body = transport.written.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 413 ") and b"content-type: application/json" in head
    assert json.loads(body)["error"] == {"code": "CONTENT_TOO_LONG", "message": "request line and headers too large",
                                         "retryable": False, "details": {"max_bytes": MAX_HEAD_BYTES}}
    assert transport.closed


@pytest.mark.parametrize("opening", [
    b"GET /health HTTP/1.1\r\nHost: x\r\nX-Endless: ",
    # after a chunked body's last chunk come trailers: header lines httptools buffers the same way
    b"POST /v1/memories/search HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n2\r\n{}\r\n0\r\nX-Trailer: ",
], ids=["header", "trailer"])
def test_an_endless_header_line_is_cut_after_about_a_megabyte(connection, opening):
    protocol, loop, transport = connection
    protocol.data_received(opening)
    fed = 0
    while not transport.closed and fed < 64 * 1024 * 1024:
        protocol.data_received(b"a" * 65536)
        fed += 65536
    assert transport.closed and fed <= MAX_HEAD_BYTES + 2 * 1024 * 1024
    assert transport.written.startswith(b"HTTP/1.1 413 ")


def test_a_pipelined_request_waiting_for_the_answer_before_it_is_not_timed(connection):
    """uvicorn stops reading a pipelined request until the request before it is answered: that
    wait is the server's, so the clock stops, and the request gets a fresh one when its turn
    comes (closing earlier would lose the first request's answer)."""
    protocol, loop, transport = connection
    protocol.data_received(b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n"
                           b"PUT /v1/memories HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n{")
    assert protocol.pipeline and not transport.reading  # the first one is still being answered
    assert loop.live() == []
    protocol.on_response_complete()  # the first answer is sent: the PUT's turn
    assert not protocol.pipeline and transport.reading
    (timer,) = loop.live()
    timer.fire()
    assert transport.closed


def test_an_idle_connection_s_first_request_gets_its_own_clock(connection):
    protocol, loop, transport = connection
    (idle,) = loop.live()
    protocol.data_received(b"GET /health HTTP/1.1\r\n")
    (request,) = loop.live()
    assert request is not idle and idle.cancelled


def test_a_large_chunked_body_is_not_counted_as_head(connection):
    protocol, loop, transport = connection
    protocol.data_received(b"POST /v1/memories/search HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n")
    for _ in range(256):  # 4 MiB in 16 KiB chunks: past the head's slack, all of it body
        protocol.data_received(b"4000\r\n" + b"b" * 0x4000 + b"\r\n")
        protocol.flow.resume_reading()  # as the application reading the body would
    assert not transport.closed and transport.written == b""


def test_an_upgrade_request_is_taken_as_plain_http_without_a_warning_each(connection, caplog):
    protocol, loop, transport = connection
    with caplog.at_level("DEBUG", logger="uvicorn.error"):
        protocol.data_received(b"GET /health HTTP/1.1\r\nHost: x\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n"
                               b"Sec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n")
    assert protocol.cycle is not None and protocol.scope["path"] == "/health"  # handed on as an HTTP request
    assert not transport.closed and [r for r in caplog.records if r.levelname == "WARNING"] == []
