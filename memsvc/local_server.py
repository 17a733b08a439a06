"""`memsvc serve`: HTTP in front of the same router the Lambda runs.

Each request becomes the API Gateway HTTP API (payload 2.0) event the real service would
deliver, after the bearer token has been verified as the JWT authorizer would verify it. Before
that, `/console` and `/docs` are answered here: the console's files and config, its loopback
sign-in helper, and the API reference (docs/console.md).

A token's signature is checked on one thread of its own, never on the event loop, so a flood of
bad tokens costs at most that thread and every request with a known token goes on being taken
in. Each verdict, valid or not, is kept by the token's SHA-256 (`TokenVerdicts`), and one token
sent many times at once is verified once (docs/api.md, "Identity").
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import json
import logging
import time
import uuid
from collections import OrderedDict
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime, timezone
from typing import Any
from urllib.parse import parse_qsl

from uvicorn.protocols.http.httptools_impl import STATUS_LINE, HttpToolsProtocol

from memsvc.adapters.local.fair_pool import FairPool
from memsvc.adapters.local.issuer import LEEWAY_SECONDS, InvalidToken, LocalIssuer
from memsvc.api.identity import LOCAL_DEFAULT_TENANT, claimed_tenant
from memsvc.api.router import Router
from memsvc.console_assets import (
    SIGN_IN_PATH,
    StaticSite,
    config_json,
    error_response as _error,
    loopback_request,
    parse_sign_in,
    sign_in_reachable,
)
from memsvc.core.errors import InvalidArgument, RateLimited
from memsvc.core.models import to_rfc3339

__all__ = ["LocalServer", "TokenVerdicts", "build_event", "stringify_claims", "MAX_BODY_BYTES", "MAX_HEAD_BYTES",
           "MAX_TOKEN_BYTES", "EnvelopeHttpProtocol"]

MAX_BODY_BYTES = 1024 * 1024
MAX_HEAD_BYTES = 32 * 1024  # the request line and headers (`EnvelopeHttpProtocol`)
_HEAD_READ_SLACK = 1024 * 1024  # non-body bytes read beyond it: a read may end mid-header
REQUEST_READ_SECONDS = 30.0  # to begin a request, and again to send it whole (1 MiB at 35 KB/s)
MAX_TOKEN_BYTES = 8 * 1024  # a token we mint is under 1 KiB; anything longer is refused unread
SIGN_IN_TTL_SECONDS = 3600
VERDICTS_KEPT = 4096  # of each kind: a flood of bad tokens never pushes out the good ones
INVALID_VERDICT_SECONDS = 60.0  # how long a refused token stays refused without a second look
MAX_VERIFYING = 256  # distinct tokens waiting for the verifying thread; past that, 429

log = logging.getLogger(__name__)


class LocalServer:
    """An ASGI application, answering on `threads` threads (`LocalSettings.request_threads`);
    with `console` and `docs` (memsvc.console_assets), it serves those sites too, and with
    `console_sign_in` the console's loopback sign-in helper. `clock` (epoch seconds) ages the
    token verdicts; `max_verifying` bounds the tokens waiting to be verified."""

    def __init__(self, router: Router, issuer: LocalIssuer, *, threads: int,
                 on_shutdown: Callable[[], None] = lambda: None, console: StaticSite | None = None,
                 docs: StaticSite | None = None, console_sign_in: bool = True,
                 clock: Callable[[], float] = time.time, max_verifying: int = MAX_VERIFYING) -> None:
        self._router = router
        self._issuer = issuer
        self._console = console
        self._console_sign_in = console_sign_in
        self._sites = tuple(site for site in (console, docs) if site is not None)
        self._on_shutdown = on_shutdown
        self._pool = FairPool(threads, name="memsvc-api")  # one tenant's burst never queues another's requests
        self._verdicts = TokenVerdicts(clock=clock)
        self._verifier = ThreadPoolExecutor(max_workers=1, thread_name_prefix="memsvc-verify")
        self._verifying: dict[bytes, asyncio.Future] = {}  # by token digest: one check for every copy waiting
        self._max_verifying = max_verifying

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] == "lifespan":
            while True:
                message = await receive()
                if message["type"] == "lifespan.startup":
                    await send({"type": "lifespan.startup.complete"})
                elif message["type"] == "lifespan.shutdown":
                    # uvicorn re-raises SIGTERM after this, so this is where the data is closed
                    self._pool.shutdown()
                    self._verifier.shutdown(wait=True)
                    self._on_shutdown()
                    await send({"type": "lifespan.shutdown.complete"})
                    return
        if scope["type"] != "http":
            return
        try:
            await self._http(scope, receive, send)
        except Exception:  # a bug of ours: the envelope, not uvicorn's plain-text 500
            log.exception("the local server failed a request")
            await _send(send, self._for_site(_error(500, "INTERNAL", "internal error"), _raw_path(scope)))

    async def _http(self, scope, receive, send) -> None:
        headers: dict[str, str] = {}
        for k, v in scope["headers"]:
            name = k.decode("latin-1").lower()
            headers[name] = f"{headers[name]},{v.decode('latin-1')}" if name in headers else v.decode("latin-1")
        path = _raw_path(scope)
        site = self._site_of(path)
        body = bytearray()
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":  # the client left mid-body: nothing to answer, nothing done
                return
            body += message.get("body", b"")
            if len(body) > MAX_BODY_BYTES:
                too_long = _error(413, "CONTENT_TOO_LONG", "request body too large", {"max_bytes": MAX_BODY_BYTES})
                return await _send(send, self._for_site(too_long, path))
            if not message.get("more_body"):
                break
        if site is not None:  # static files and the sign-in helper: no bearer token to check
            return await self._site(site, scope, path, headers, bytes(body), send)
        authorizer: dict[str, Any] | None = None
        tenant = user = ""  # whose turn this request waits for; without a token, no tenant's
        auth = headers.get("authorization", "")
        if auth:
            scheme, _, token = auth.partition(" ")
            if scheme.lower() != "bearer" or not token:
                return await _send(send, _error(401, "UNAUTHORIZED", "expected 'Authorization: Bearer <token>'"))
            try:
                claims = await self._claims(token.strip())
            except InvalidToken as exc:  # its text is ours (see LocalIssuer)
                return await _send(send, _error(401, "UNAUTHORIZED", f"invalid token: {exc}"))
            except _Busy:
                return await _send(send, _busy())
            authorizer = {"jwt": {"claims": stringify_claims(claims), "scopes": None}}
            tenant = str(claimed_tenant(claims, LOCAL_DEFAULT_TENANT))  # as the router will read it
            user = str(claims.get("sub", ""))
        event = build_event(
            method=scope["method"],
            path=path,
            raw_query=scope.get("query_string", b"").decode("latin-1"),
            headers=headers,
            body=bytes(body) if body else None,
            source_ip=(scope.get("client") or ("127.0.0.1", 0))[0],
            authorizer=authorizer,
        )
        response = await asyncio.wrap_future(self._pool.submit(tenant, self._router.handle, event, party=user))
        await _send(send, response)

    async def _claims(self, token: str) -> dict[str, Any]:
        """The token's claims, or InvalidToken: from its kept verdict, else from the verifying
        thread, whose verdict is then kept (`TokenVerdicts`). Runs on the event loop only."""
        if len(token) > MAX_TOKEN_BYTES:
            raise InvalidToken("the token is too long")
        digest = hashlib.sha256(token.encode("latin-1")).digest()
        kept = self._verdicts.get(digest)
        if kept is None:
            checking = self._verifying.get(digest)
            if checking is None:
                if len(self._verifying) >= self._max_verifying:
                    raise _Busy
                checking = asyncio.get_running_loop().run_in_executor(self._verifier, self._verdict_of, token)
                self._verifying[digest] = checking
                checking.add_done_callback(lambda done: self._settle(digest, done))
            kept = await asyncio.shield(checking)  # a caller that hangs up leaves the check to the others
        if isinstance(kept, str):
            raise InvalidToken(kept)
        return dict(kept)

    def _verdict_of(self, token: str) -> dict[str, Any] | str:
        """On the verifying thread: the claims, or why the token is refused."""
        try:
            return self._issuer.verify(token)
        except InvalidToken as exc:
            return str(exc)

    def _settle(self, digest: bytes, done: asyncio.Future) -> None:
        del self._verifying[digest]
        if not done.cancelled() and done.exception() is None:
            self._verdicts.put(digest, done.result())

    def _site_of(self, path: str) -> StaticSite | None:
        return next((site for site in self._sites if site.owns(path)), None)

    def _for_site(self, response: dict[str, Any], path: str) -> dict[str, Any]:
        """An error answered outside the site's own code: under a site, it carries the site's headers too."""
        site = self._site_of(path)
        return response if site is None else {**response, "headers": {**response["headers"], **site.headers()}}

    async def _site(self, site: StaticSite, scope, path: str, headers: dict[str, str], body: bytes, send) -> None:
        method = scope["method"].upper()
        client = scope.get("client")
        relative = site.relative(path)
        readable = method in ("GET", "HEAD")
        if (site is self._console and path == SIGN_IN_PATH and method == "POST" and self._console_sign_in
                and sign_in_reachable(client, headers)):
            response = await asyncio.wrap_future(self._pool.submit("", self._sign_in, site, body))
        elif path == site.prefix:
            response = site.redirect_to_directory() if readable else site.method_not_allowed(method)
        elif site is self._console and relative == "config.json":
            helper = self._console_sign_in and loopback_request(client, headers)
            response = (site.json(200, config_json(sign_in_helper=helper), cache="no-cache")
                        if readable else site.method_not_allowed(method))
        else:
            # A name that is no file is 404 whatever the method, so a refused sign-in answers
            # exactly as a POST to any missing name: a page elsewhere learns nothing.
            found = site.find(relative)
            if found is None:
                response = site.not_found()
            elif not readable:
                response = site.method_not_allowed(method)
            else:
                response = await asyncio.wrap_future(self._pool.submit("", site.file_response, found))
        await _send(send, response, head=method == "HEAD")

    def _sign_in(self, site: StaticSite, body: bytes) -> dict[str, Any]:
        try:
            who = parse_sign_in(body)
        except InvalidArgument as exc:
            return site.json(exc.status, exc.to_body())
        token = self._issuer.mint(sub=who.sub, tenant=who.tenant, roles=who.roles, projects=who.projects,
                                  teams=who.teams, orgs=who.orgs, ttl_seconds=SIGN_IN_TTL_SECONDS,
                                  client_id="memsvc-console")
        expires = datetime.fromtimestamp(self._issuer.verify(token)["exp"], timezone.utc)
        log.info("console sign-in: minted a token for sub sha256:%s, tenant %s, roles %s",
                 hashlib.sha256(who.sub.encode()).hexdigest()[:16], who.tenant or "(default)", who.roles)
        return site.json(200, {"token": token, "expires_at": to_rfc3339(expires)})


class _Busy(Exception):
    """More distinct tokens are waiting for the verifying thread than `max_verifying`."""


class TokenVerdicts:
    """What verifying each recently seen token said, by its SHA-256 digest (never the token):
    its claims until it expires (`exp` and the issuer's leeway), or why it was refused (in the
    issuer's words, which are ours) for `invalid_seconds`. Two LRUs of `kept` entries each, so
    refused tokens only ever push out refused ones. Not thread-safe: the server uses it on its
    event loop alone."""

    def __init__(self, *, clock: Callable[[], float] = time.time, kept: int = VERDICTS_KEPT,
                 invalid_seconds: float = INVALID_VERDICT_SECONDS) -> None:
        self._clock = clock
        self._kept = kept
        self._invalid_seconds = invalid_seconds
        self._valid: OrderedDict[bytes, tuple[float, dict[str, Any]]] = OrderedDict()
        self._invalid: OrderedDict[bytes, tuple[float, str]] = OrderedDict()

    def get(self, digest: bytes) -> dict[str, Any] | str | None:
        """The kept verdict, None when there is none (or it ran out). A valid token kept past its
        expiry is refused as expired, as the issuer would refuse it."""
        now = self._clock()
        for verdicts in (self._valid, self._invalid):
            kept = verdicts.get(digest)
            if kept is None:
                continue
            until, verdict = kept
            if now > until:
                del verdicts[digest]
                return "the token has expired" if verdicts is self._valid else None
            verdicts.move_to_end(digest)
            return verdict
        return None

    def put(self, digest: bytes, verdict: dict[str, Any] | str) -> None:
        if isinstance(verdict, str):
            self._keep(self._invalid, digest, self._clock() + self._invalid_seconds, verdict)
        else:
            self._keep(self._valid, digest, float(verdict["exp"]) + LEEWAY_SECONDS, verdict)

    def _keep(self, verdicts: OrderedDict, digest: bytes, until: float, verdict: Any) -> None:
        verdicts[digest] = (until, verdict)
        verdicts.move_to_end(digest)
        while len(verdicts) > self._kept:
            verdicts.popitem(last=False)


def _busy() -> dict[str, Any]:
    """429, retryable, as the router answers a RateLimited: the verifying thread has
    `max_verifying` tokens waiting."""
    busy = RateLimited("too many new tokens are waiting to be checked; try again shortly")
    response = _error(busy.status, busy.code, busy.message, busy.details, retryable=busy.retryable)
    response["headers"]["retry-after"] = str(busy.retry_after_seconds)
    return response


def _raw_path(scope) -> str:
    """As API Gateway's `rawPath`: still percent-encoded, so an id holding `/` (sent as `%2F`)
    stays one path segment; handlers decode their parameters."""
    return scope["raw_path"].decode("latin-1") if scope.get("raw_path") else scope["path"]


def build_event(*, method: str, path: str, raw_query: str, headers: dict[str, str], body: str | bytes | None,
                source_ip: str, authorizer: dict[str, Any] | None) -> dict[str, Any]:
    query: dict[str, str] = {}
    for k, v in parse_qsl(raw_query, keep_blank_values=True):
        query[k] = f"{query[k]},{v}" if k in query else v  # what API Gateway does with repeats
    now = time.time()
    ctx: dict[str, Any] = {
        "accountId": "local",
        "apiId": "local",
        "domainName": headers.get("host", "localhost"),
        "http": {"method": method.upper(), "path": path, "protocol": "HTTP/1.1",
                 "sourceIp": source_ip, "userAgent": headers.get("user-agent", "")},
        "requestId": str(uuid.uuid4()),
        "routeKey": "$default",
        "stage": "$default",
        "time": time.strftime("%d/%b/%Y:%H:%M:%S +0000", time.gmtime(now)),
        "timeEpoch": int(now * 1000),
    }
    if authorizer is not None:
        ctx["authorizer"] = authorizer
    event: dict[str, Any] = {
        "version": "2.0",
        "routeKey": "$default",
        "rawPath": path,
        "rawQueryString": raw_query,
        "headers": headers,
        "requestContext": ctx,
        "isBase64Encoded": False,
    }
    if query:
        event["queryStringParameters"] = query
    if isinstance(body, bytes):
        try:
            body = body.decode("utf-8")
        except UnicodeDecodeError:  # as API Gateway hands over a body that is not text
            body, event["isBase64Encoded"] = base64.b64encode(body).decode("ascii"), True
    if body is not None:
        event["body"] = body
    return event


def stringify_claims(claims: dict[str, Any]) -> dict[str, Any]:
    """Claims as the HTTP API JWT authorizer hands them over (scalars as strings), except that an
    array stays a list of its elements: API Gateway's "[a b]" cannot tell ["a b"] from ["a", "b"]
    (see memsvc.api.identity). A null stays None, so a null tenant claim is refused, not "null"."""
    out: dict[str, Any] = {}
    for k, v in claims.items():
        if isinstance(v, list):
            out[k] = [x if isinstance(x, str) else _claim_text(x) for x in v]
        else:
            out[k] = None if v is None else _claim_text(v)
    return out


def _claim_text(v: Any) -> str:
    if isinstance(v, str):
        return v
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (int, float)):
        return str(v)
    return json.dumps(v, separators=(",", ":"))


async def _send(send, response: dict[str, Any], *, head: bool = False) -> None:
    body = response.get("body") or b""
    if isinstance(body, str):
        body = body.encode()
    headers = [(k.encode("latin-1"), str(v).encode("latin-1")) for k, v in (response.get("headers") or {}).items()]
    headers.append((b"content-length", str(len(body)).encode()))
    await send({"type": "http.response.start", "status": response["statusCode"], "headers": headers})
    await send({"type": "http.response.body", "body": b"" if head else body})


class EnvelopeHttpProtocol(HttpToolsProtocol):
    """uvicorn's HTTP protocol (httptools) with a bounded request head, and the error envelope for
    a request it cannot take, not uvicorn's plain text.

    httptools buffers a header until its line ends, however long, and copies the buffer as it
    grows: one 100 MiB header held the event loop, every tenant's requests with it, for seconds.
    Here the request line and headers may hold `MAX_HEAD_BYTES` (API Gateway's HTTP APIs take
    10 KiB); past that, and for a malformed request, the connection gets a `413` or a `400` and
    closes. The headers' own sizes (a chunked body's trailers too) are counted as httptools hands
    them over; and every byte of a request that is not its body (head, chunk sizes, trailers) is
    counted as it is read, so no header is buffered past `MAX_HEAD_BYTES + _HEAD_READ_SLACK`.

    uvicorn also waits for a request's bytes without end: a connection that sends nothing, or half
    a head, or a body a byte a minute, was held open forever (slowloris: enough of them use up the
    server's file descriptors). Here a connection must begin a request within
    `REQUEST_READ_SECONDS`, and a request must arrive whole within as long again from its first
    byte; else the connection closes. Between requests, uvicorn's keep-alive timeout (5 s) closes
    an idle connection. Time the server takes is not counted: the clock stops when the request
    has arrived, and while a pipelined request waits for the answer before it (uvicorn stops
    reading it then)."""

    def connection_made(self, transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._head_bytes, self._other_bytes, self._body_in_read = 0, 0, 0
        self._head_too_large, self._message_open = False, False
        self._read_timer: asyncio.TimerHandle | None = None
        self._time_the_read()

    def connection_lost(self, exc: Exception | None) -> None:
        self._stop_the_read_timer()
        super().connection_lost(exc)

    def data_received(self, data: bytes) -> None:
        self._body_in_read = 0
        super().data_received(data)
        if self._message_open and not self.transport.is_closing():
            # The read's bytes less its body's; the end of a pipelined request before this one
            # may be counted too, which one read's worth of slack allows for.
            self._other_bytes += len(data) - self._body_in_read
            if self._other_bytes > MAX_HEAD_BYTES + _HEAD_READ_SLACK:
                self._head_too_large = True
                self.send_400_response("")

    def on_message_begin(self) -> None:
        self._message_open = True
        self._stop_the_read_timer()
        self._time_the_read()  # its own clock, from its first byte
        super().on_message_begin()

    def on_url(self, url: bytes) -> None:
        self._count_head(len(url))
        super().on_url(url)

    def on_header(self, name: bytes, value: bytes) -> None:
        self._count_head(len(name) + len(value))
        super().on_header(name, value)

    def on_headers_complete(self) -> None:
        super().on_headers_complete()
        if self.pipeline:  # queued behind an answer in progress: uvicorn stops reading it meanwhile
            self._stop_the_read_timer()

    def on_body(self, body: bytes) -> None:
        self._body_in_read += len(body)
        super().on_body(body)

    def on_message_complete(self) -> None:
        super().on_message_complete()
        self._stop_the_read_timer()
        self._head_bytes, self._other_bytes, self._message_open = 0, 0, False

    def on_response_complete(self) -> None:
        super().on_response_complete()
        if self._message_open and self._read_timer is None and not self.transport.is_closing():
            self._time_the_read()  # a queued request's turn: the rest of it has as long again

    def _time_the_read(self) -> None:
        if self._read_timer is None:
            self._read_timer = self.loop.call_later(REQUEST_READ_SECONDS, self._read_too_slow)

    def _stop_the_read_timer(self) -> None:
        if self._read_timer is not None:
            self._read_timer.cancel()
            self._read_timer = None

    def _read_too_slow(self) -> None:
        self._read_timer = None
        if not self.transport.is_closing():
            self.transport.close()

    def _count_head(self, size: int) -> None:
        self._head_bytes += size
        if self._head_bytes > MAX_HEAD_BYTES:
            self._head_too_large = True
            raise ValueError("request head too large")  # httptools stops; uvicorn sends the 400 below

    def _unsupported_upgrade_warning(self) -> None:
        pass  # `ws="none"` on purpose: an upgrade request is answered as plain HTTP; a warning each was log noise

    def send_400_response(self, msg: str) -> None:
        if self.cycle is not None and self.cycle.response_started and not self.cycle.response_complete:
            # an answer is on its way on this connection: no second one in the middle of it
            self.transport.close()
            return
        response = (_error(413, "CONTENT_TOO_LONG", "request line and headers too large",
                           {"max_bytes": MAX_HEAD_BYTES}) if self._head_too_large
                    else _error(400, "INVALID_ARGUMENT", "malformed HTTP request"))
        headers = [*self.server_state.default_headers,
                   *((k.encode("latin-1"), v.encode("latin-1")) for k, v in response["headers"].items()),
                   (b"cache-control", b"no-store"), (b"content-length", b"%d" % len(response["body"])),
                   (b"connection", b"close")]
        self.transport.write(STATUS_LINE[response["statusCode"]]
                             + b"".join(name + b": " + value + b"\r\n" for name, value in headers) + b"\r\n"
                             + response["body"])
        self.transport.close()
