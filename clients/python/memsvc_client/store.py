"""`MemsvcStore`: LangGraph's `BaseStore` over the memsvc HTTP API (API.md, "LangGraph store").

    store = MemsvcStore()                                   # MEMORY_SERVICE_URL + MEMORY_SERVICE_TOKEN
    store = MemsvcStore(url="http://127.0.0.1:8000", token=jwt)
    store = MemsvcStore(url="https://<id>.execute-api.eu-west-1.amazonaws.com")  # SigV4, botocore's chain

`batch`/`abatch` are the only primitives; `get/put/delete/search/list_namespaces` and their async
twins come from `BaseStore`. A batch runs like LangGraph's own stores (InMemory, SQLite, Postgres):
every read sees the state from before the batch's writes, and several puts to one key leave the
last one. Independent operations go out concurrently (a thread pool for `batch`, `asyncio.gather`
for `abatch`); only a put that a read of the same batch could see waits for the reads.

This package needs only httpx, botocore (for SigV4) and langgraph-checkpoint.
"""

from __future__ import annotations

import asyncio
import json
import math
import random
import re
import threading
import time
import weakref
from collections.abc import Callable, Generator, Iterable, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from email.utils import parsedate_to_datetime
from typing import Any
from urllib.parse import quote, urlsplit

import httpx
from langgraph.store.base import (
    BaseStore,
    GetOp,
    IndexConfig,
    InvalidNamespaceError,
    Item,
    ListNamespacesOp,
    MatchCondition,
    Op,
    PutOp,
    Result,
    SearchItem,
    SearchOp,
    TTLConfig,
    validate_op_namespace,
)

from memsvc_client.settings import ClientSettings

__all__ = [
    "MemsvcStore",
    "AsyncMemsvcStore",
    "AwsSigV4Auth",
    "MemsvcError",
    "InvalidArgumentError",
    "AuthError",
    "NotFoundError",
    "TransientError",
    "InvalidNamespaceError",
]

SEARCH_PAGE = 100  # the API's largest search `limit`
LIST_PAGE = 1000  # the API's largest list_namespaces `limit`
_RETRY_STATUS = frozenset({429, 502, 503, 504})
_EXECUTE_API_HOST = re.compile(r"\.execute-api\.([a-z0-9-]+)\.(?:vpce\.)?amazonaws\.com(?:\.cn)?$")
_sleep = time.sleep  # indirection so tests can observe back-off without waiting


# -- errors -----------------------------------------------------------------------------------


class MemsvcError(Exception):
    """An error answer from memsvc (or no answer at all): the API's `code`, `message`, `details`,
    `retryable`, plus the HTTP `status` (None when the request never got a response)."""

    def __init__(
        self,
        code: str,
        message: str,
        *,
        status: int | None = None,
        details: dict[str, Any] | None = None,
        retryable: bool = False,
        retry_after: float | None = None,
    ) -> None:
        super().__init__(f"{code}: {message}" + (f" (HTTP {status})" if status is not None else ""))
        self.code = code
        self.message = message
        self.status = status
        self.details = details or {}
        self.retryable = retryable
        self.retry_after = retry_after


class InvalidArgumentError(MemsvcError, ValueError):
    """400 INVALID_ARGUMENT or 413 CONTENT_TOO_LONG: the request itself is wrong."""


class AuthError(MemsvcError, PermissionError):
    """401 UNAUTHORIZED or 403 FORBIDDEN."""


class NotFoundError(MemsvcError, LookupError):
    """404 NOT_FOUND (`get` turns it into None, as LangGraph's stores do)."""


class PreconditionFailedError(MemsvcError):
    """412 PRECONDITION_FAILED: the object is no longer at the version `if_match` named."""


class TransientError(MemsvcError):
    """A retryable failure that outlived the retries: 429, 502/503/504, `retryable: true`, or no
    response (code `UNAVAILABLE`)."""


def _error_from_response(response: httpx.Response) -> MemsvcError:
    status = response.status_code
    try:
        body = response.json()
    except ValueError:
        body = None
    err = body.get("error") if isinstance(body, dict) else None
    if isinstance(err, dict):
        code = str(err.get("code") or f"HTTP_{status}")
        message = str(err.get("message") or response.reason_phrase)
        details = err.get("details") if isinstance(err.get("details"), dict) else {}
        retryable = bool(err.get("retryable")) or status in _RETRY_STATUS
    else:  # e.g. API Gateway's own {"message": "Forbidden"}
        code = {401: "UNAUTHORIZED", 403: "FORBIDDEN", 404: "NOT_FOUND", 429: "RATE_LIMITED"}.get(
            status, f"HTTP_{status}"
        )
        message = (body.get("message") if isinstance(body, dict) else None) or response.text[:200]
        details, retryable = {}, status in _RETRY_STATUS
    kind: type[MemsvcError]
    if status in (400, 413):
        kind = InvalidArgumentError
    elif status in (401, 403):
        kind = AuthError
    elif status == 404:
        kind = NotFoundError
    elif status == 412:
        kind = PreconditionFailedError
    elif retryable:
        kind = TransientError
    else:
        kind = MemsvcError
    return kind(
        code,
        message,
        status=status,
        details=details,
        retryable=retryable,
        retry_after=_retry_after(response.headers.get("retry-after")),
    )


def _retry_after(raw: str | None) -> float | None:
    if not raw:
        return None
    try:
        return max(0.0, float(raw))
    except ValueError:
        pass
    try:
        return max(0.0, (parsedate_to_datetime(raw) - datetime.now(timezone.utc)).total_seconds())
    except (TypeError, ValueError):
        return None


# -- authentication ---------------------------------------------------------------------------


class _BearerAuth(httpx.Auth):
    def __init__(self, token: str | Callable[[], str]) -> None:
        self._token = token

    def auth_flow(self, request: httpx.Request) -> Generator[httpx.Request, httpx.Response, None]:
        token = self._token() if callable(self._token) else self._token
        request.headers["Authorization"] = f"Bearer {token}"
        yield request


class AwsSigV4Auth(httpx.Auth):
    """Signs an httpx request with SigV4 (botocore's signer) for API Gateway's IAM authorizer.

    The signature covers the method, the exact URL (path and query as sent), the body bytes and
    the headers `host`, `content-type` and every `x-*` header (so `X-Tenant-Id` cannot be
    swapped). `credentials` is a botocore `Credentials` (refreshed as needed) or anything with
    `access_key`, `secret_key` and `token`."""

    requires_request_body = True

    def __init__(self, credentials: Any, region: str, service: str = "execute-api") -> None:
        self.credentials = credentials
        self.region = region
        self.service = service

    def auth_flow(self, request: httpx.Request) -> Generator[httpx.Request, httpx.Response, None]:
        self.sign(request)
        yield request

    def sign(self, request: httpx.Request) -> None:
        from botocore.auth import SigV4Auth
        from botocore.awsrequest import AWSRequest

        creds = self.credentials
        if hasattr(creds, "get_frozen_credentials"):
            creds = creds.get_frozen_credentials()  # one consistent key/secret/token triple
        headers = {
            name: value
            for name, value in request.headers.items()
            if (name == "host" or name == "content-type" or name.startswith("x-")) and not name.startswith("x-amz-")
        }
        aws = AWSRequest(method=request.method, url=str(request.url), data=request.content, headers=headers)
        SigV4Auth(creds, self.service, self.region).add_auth(aws)
        for name in ("X-Amz-Date", "X-Amz-Security-Token", "Authorization"):
            if name in aws.headers:
                request.headers[name] = aws.headers[name]


def aws_region_from_url(url: str) -> str | None:
    """`eu-west-1` for `https://<id>.execute-api.eu-west-1.amazonaws.com/...`, else None."""
    host = (urlsplit(url).hostname or "").lower()
    match = _EXECUTE_API_HOST.search(host)
    return match.group(1) if match else None


# -- the store --------------------------------------------------------------------------------

# method, path, query, JSON body, and optionally the request's own headers (If-Match)
_Call = tuple[str, str, Sequence[tuple[str, str]], Any] | tuple[str, str, Sequence[tuple[str, str]], Any, Mapping[str, str]]


@dataclass(frozen=True)
class _LoopClient:
    """One event loop's HTTP client, and the gate that keeps at most `max_concurrency` of the
    store's requests in flight on that loop, however many coroutines call at once. Without it,
    thousands of concurrent calls all queue inside httpcore's pool, whose every state change
    rescans the whole queue: the loop spins on one core for minutes."""

    http: httpx.AsyncClient
    gate: asyncio.Semaphore
_Handler = Generator[_Call, Any, Result]


class MemsvcStore(BaseStore):
    """A LangGraph `BaseStore` backed by memsvc.

    Args:
        url: the service's base URL (with the API Gateway stage, if any). Default:
            `MEMORY_SERVICE_URL`.
        token: a bearer token (a JWT), or a function returning a fresh one for each request.
            Default: `MEMORY_SERVICE_TOKEN`, unless SigV4 is asked for.
        aws_region, credentials: sign with SigV4 (service `execute-api`) instead. `credentials`
            is a botocore `Credentials`; without it botocore's default chain is used (environment,
            profile, SSO, container or instance role). The region defaults to the one in an
            `execute-api.<region>.amazonaws.com` URL. With no token at all, an execute-api URL
            means SigV4.
        tenant_id: sent as `X-Tenant-Id` (IAM callers pick their tenant this way).
        ttl: LangGraph's `TTLConfig`: `default_ttl` (minutes) for puts that name none,
            `refresh_on_read` (default True) for reads that don't say. `sweep_interval_minutes`
            and `omit_expired` need nothing here: the service sweeps, and never returns expired
            items.
        index: LangGraph's `IndexConfig`; only `fields` is used (the default `index_fields` of a
            put). The service embeds with its own model, so `dims` and `embed` are ignored.
        read_your_writes: puts wait until the item is indexed (`sync_index`), so a search right
            after a put finds it, as with LangGraph's own stores. Default True.
        search_mode: the `mode` of searches with a query (`hybrid`, `semantic` or `keyword`;
            LangGraph's `search` has no such argument). Default None: the service's default, hybrid.
        timeout: seconds per HTTP request. max_retries: retries of a retryable failure.
        backoff: first back-off in seconds (doubles, with jitter, up to `max_backoff`).
        max_concurrency: requests the store has in flight at once (per thread pool, and per event
            loop for the async calls), however many calls are made concurrently.
    """

    supports_ttl = True

    def __init__(
        self,
        url: str | None = None,
        token: str | Callable[[], str] | None = None,
        *,
        aws_region: str | None = None,
        credentials: Any = None,
        tenant_id: str | None = None,
        ttl: TTLConfig | None = None,
        index: IndexConfig | None = None,
        read_your_writes: bool = True,
        search_mode: str | None = None,
        timeout: float = 30.0,
        max_retries: int = 3,
        backoff: float = 0.25,
        max_backoff: float = 8.0,
        max_retry_after: float = 60.0,
        max_concurrency: int = 8,
        headers: Mapping[str, str] | None = None,
        transport: httpx.BaseTransport | None = None,
        async_transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        settings = ClientSettings.from_env() if url is None or token is None else None
        url = url or (settings.url if settings else None)
        if not url:
            raise ValueError("no service URL: pass url=... or set MEMORY_SERVICE_URL")
        self.url = url.rstrip("/")
        self.auth = self._pick_auth(url, token, aws_region, credentials, settings)
        self.ttl_config = ttl
        fields = (index or {}).get("fields")
        self._default_index: list[str] | None = None if not fields or fields == ["$"] else list(fields)
        self.read_your_writes = read_your_writes
        self.search_mode = search_mode
        self._headers = {"Accept": "application/json", **(headers or {})}
        if tenant_id:
            self._headers["X-Tenant-Id"] = tenant_id
        self._timeout = httpx.Timeout(timeout, connect=min(timeout, 10.0))
        self._limits = httpx.Limits(max_connections=max(10, max_concurrency), max_keepalive_connections=max_concurrency)
        self._max_retries = max_retries
        self._backoff = backoff
        self._max_backoff = max_backoff
        self._max_retry_after = max_retry_after
        self._max_concurrency = max(1, max_concurrency)
        self._async_transport = async_transport
        self._client = httpx.Client(
            timeout=self._timeout, limits=self._limits, headers=self._headers, transport=transport
        )
        # httpx's async pool belongs to one event loop: one AsyncClient per loop the store meets.
        self._aclients: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _LoopClient] = (
            weakref.WeakKeyDictionary()
        )
        self._pool: ThreadPoolExecutor | None = None
        self._lock = threading.Lock()
        self._expiries: dict[tuple[tuple[str, ...], str], datetime] = {}  # what `sweep_ttl` counts

    @staticmethod
    def _pick_auth(url, token, aws_region, credentials, settings) -> httpx.Auth:
        sigv4_asked = credentials is not None or aws_region is not None
        if token is None and not sigv4_asked and settings is not None:
            token = settings.token
        if token is not None:
            return _BearerAuth(token)
        region = aws_region or aws_region_from_url(url)
        if not (sigv4_asked or region):
            raise ValueError(
                "no credentials: pass token=... or set MEMORY_SERVICE_TOKEN; SigV4 is used for an "
                "execute-api URL, or when aws_region= or credentials= is given"
            )
        import botocore.session

        session = botocore.session.Session()
        region = region or session.get_config_variable("region")
        if not region:
            raise ValueError("SigV4 needs a region: pass aws_region=... (the URL does not name one)")
        if credentials is None:
            credentials = session.get_credentials()
            if credentials is None:
                raise ValueError("SigV4: botocore found no AWS credentials (environment, profile or role)")
        return AwsSigV4Auth(credentials, region)

    # -- lifecycle --

    def close(self) -> None:
        """Close the sync client and the thread pool. Async clients are closed by `aclose()`."""
        self._client.close()
        with self._lock:
            pool, self._pool = self._pool, None
        if pool is not None:
            pool.shutdown(wait=True)

    async def aclose(self) -> None:
        client = self._aclients.pop(asyncio.get_running_loop(), None)
        if client is not None:
            await client.http.aclose()
        self.close()

    def __enter__(self) -> MemsvcStore:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    async def __aenter__(self) -> MemsvcStore:
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.aclose()

    # -- TTL: LangGraph's SQLite and Postgres stores sweep from the client; the service sweeps itself --

    def sweep_ttl(self) -> int:
        """The number of items this store has seen (written, read or found) with an expiry that
        has passed since, each counted once. The service deletes expired items by itself and
        never returns one, so there is nothing to delete here; items written by other clients
        are not counted."""
        now = datetime.now(timezone.utc)
        with self._lock:
            expired = [item for item, expires in self._expiries.items() if expires <= now]
            for item in expired:
                del self._expiries[item]
        return len(expired)

    def start_ttl_sweeper(self, sweep_interval_minutes: int | None = None) -> Future[None]:
        """No sweeper to start (the service sweeps): a future that is already done."""
        future: Future[None] = Future()
        future.set_result(None)
        return future

    def stop_ttl_sweeper(self, timeout: float | None = None) -> bool:
        """True: no sweeper runs here."""
        return True

    def _saw(self, namespace: Sequence[str], key: str, expires_at: str | None) -> None:
        with self._lock:
            if expires_at is None:
                self._expiries.pop((tuple(namespace), key), None)
            else:
                self._expiries[(tuple(namespace), key)] = _timestamp(expires_at)

    # -- batch --

    def batch(self, ops: Iterable[Op]) -> list[Result]:
        ops = list(ops)
        results: list[Result] = [None] * len(ops)
        for phase in _plan(ops):
            if len(phase) == 1:
                i, op = phase[0]
                results[i] = self._drive(self._handler(op))
                continue
            pool = self._thread_pool()
            futures = [(i, pool.submit(self._drive, self._handler(op))) for i, op in phase]
            errors = []
            for i, future in futures:
                try:
                    results[i] = future.result()
                except Exception as exc:  # wait for the others, then raise the first by op order
                    errors.append(exc)
            if errors:
                raise errors[0]
        return results

    async def abatch(self, ops: Iterable[Op]) -> list[Result]:
        ops = list(ops)
        results: list[Result] = [None] * len(ops)
        client = self._async_client()
        for phase in _plan(ops):
            outcomes = await asyncio.gather(
                *(self._adrive(self._handler(op), client) for _, op in phase), return_exceptions=True
            )
            errors = [o for o in outcomes if isinstance(o, BaseException)]
            if errors:
                raise errors[0]
            for (i, _), outcome in zip(phase, outcomes):
                results[i] = outcome
        return results

    def _thread_pool(self) -> ThreadPoolExecutor:
        with self._lock:
            if self._pool is None:
                self._pool = ThreadPoolExecutor(self._max_concurrency, thread_name_prefix="memsvc-store")
            return self._pool

    def _async_client(self) -> _LoopClient:
        loop = asyncio.get_running_loop()
        with self._lock:
            client = self._aclients.get(loop)
            if client is None:
                http = httpx.AsyncClient(
                    timeout=self._timeout, limits=self._limits, headers=self._headers, transport=self._async_transport
                )
                client = self._aclients[loop] = _LoopClient(http, asyncio.Semaphore(self._max_concurrency))
            return client

    # -- one operation: a generator that yields HTTP calls and returns the op's result --

    def _handler(self, op: Op) -> _Handler:
        if isinstance(op, GetOp):
            return self._get(op)
        if isinstance(op, PutOp):
            return self._put(op)
        if isinstance(op, SearchOp):
            return self._search(op)
        return self._list_namespaces(op)

    def _get(self, op: GetOp) -> _Handler:
        query = _ns_key(op.namespace, op.key)
        if op.refresh_ttl:
            query.append(("refresh_ttl", "true"))
        try:
            data = yield ("GET", "/v1/memories", query, None)
        except NotFoundError:
            self._saw(op.namespace, op.key, None)
            return None
        self._saw(data["namespace"], data["key"], data.get("expires_at"))
        return Item(
            value=data["value"],
            key=data["key"],
            namespace=tuple(data["namespace"]),
            created_at=_timestamp(data["created_at"]),
            updated_at=_timestamp(data["updated_at"]),
        )

    def _put(self, op: PutOp) -> _Handler:
        if op.value is None:
            yield ("DELETE", "/v1/memories", _ns_key(op.namespace, op.key), None)
            self._saw(op.namespace, op.key, None)
            return None
        body: dict[str, Any] = {"namespace": list(op.namespace), "key": op.key, "value": dict(op.value)}
        ttl_seconds = minutes_to_ttl_seconds(op.ttl)
        if ttl_seconds is not None:
            body["ttl_seconds"] = ttl_seconds
        index = op.index if op.index is not None else self._default_index
        if index is not None:
            body["index_fields"] = False if index is False else list(index)
        if self.read_your_writes:
            body["sync_index"] = True
        data = yield ("PUT", "/v1/memories", (), body)
        self._saw(op.namespace, op.key, (data or {}).get("expires_at"))
        return None

    def _search(self, op: SearchOp) -> _Handler:
        body: dict[str, Any] = {"namespace_prefix": list(op.namespace_prefix)}
        if op.query and op.query.strip():  # LangGraph's stores treat "" as no query
            body["query"] = op.query
            if self.search_mode is not None:
                body["mode"] = self.search_mode
        if op.filter:
            body["filter"] = translate_filter(op.filter)
        if op.refresh_ttl:
            body["refresh_ttl"] = True
        found: list[SearchItem] = []
        offset, remaining = op.offset, op.limit
        while remaining > 0:
            page = min(remaining, SEARCH_PAGE)
            data = yield ("POST", "/v1/memories/search", (), {**body, "limit": page, "offset": offset})
            items = data["items"]
            for d in items:
                self._saw(d["namespace"], d["key"], d.get("expires_at"))
            found.extend(
                SearchItem(
                    namespace=tuple(d["namespace"]),
                    key=d["key"],
                    value=d["value"],
                    created_at=_timestamp(d["created_at"]),
                    updated_at=_timestamp(d["updated_at"]),
                    score=d.get("score"),
                )
                for d in items
            )
            if len(items) < page:
                break
            offset, remaining = offset + page, remaining - page
        return found

    def _list_namespaces(self, op: ListNamespacesOp) -> _Handler:
        merged = _merge_conditions(op.match_conditions or ())
        if merged is None:  # two conditions that no namespace can meet together
            return []
        prefix, suffix = merged
        base = [("prefix", s) for s in prefix] + [("suffix", s) for s in suffix]
        depth = [("max_depth", str(op.max_depth))] if op.max_depth is not None else []
        found: list[tuple[str, ...]] = []
        offset, remaining = op.offset, op.limit
        while remaining > 0:
            page = min(remaining, LIST_PAGE)
            query = [*base, *depth, ("limit", str(page)), ("offset", str(offset))]
            try:
                data = yield ("GET", "/v1/memories/namespaces", query, None)
            except InvalidArgumentError as exc:
                # Deeper than the tenant's max_depth: no namespace is that deep, so it is no limit.
                if depth and op.max_depth >= 1 and exc.details.get("field") == "max_depth":
                    depth = []
                    continue
                raise
            namespaces = [tuple(ns) for ns in data["namespaces"]]
            found.extend(namespaces)
            if len(namespaces) < page:
                break
            offset, remaining = offset + page, remaining - page
        return found

    # -- HTTP with retries --

    def _request(self, client: httpx.Client | httpx.AsyncClient, call: _Call) -> httpx.Request:
        method, path, query, body, *extra_headers = call
        url = self.url + path
        if query:
            # RFC 3986 encoding (what SigV4's canonical form uses): a space is %20, never "+".
            url += "?" + "&".join(f"{quote(k, safe='-_.~')}={quote(v, safe='-_.~')}" for k, v in query)
        content = None
        headers = dict(extra_headers[0]) if extra_headers else {}
        if body is not None:
            content = json.dumps(body, separators=(",", ":"), ensure_ascii=False).encode()
            headers["Content-Type"] = "application/json"
        return client.build_request(method, url, content=content, headers=headers)

    def _retry_delay(self, error: MemsvcError, attempt: int) -> float | None:
        if not error.retryable or attempt >= self._max_retries:
            return None
        if error.retry_after is not None:
            return error.retry_after if error.retry_after <= self._max_retry_after else None
        ceiling = min(self._max_backoff, self._backoff * 2**attempt)
        return ceiling / 2 + random.uniform(0, ceiling / 2)

    def _call(self, call: _Call) -> Any:
        attempt = 0
        while True:
            try:
                response = self._client.send(self._request(self._client, call), auth=self.auth)
            except httpx.TransportError as exc:
                error: MemsvcError = _transport_error(exc)
            else:
                if _answered(response, call):
                    return _body(response, call)
                error = _error_from_response(response)
            delay = self._retry_delay(error, attempt)
            if delay is None:
                raise error
            _sleep(delay)
            attempt += 1

    async def _acall(self, client: _LoopClient, call: _Call) -> Any:
        attempt = 0
        while True:
            try:
                async with client.gate:
                    response = await client.http.send(self._request(client.http, call), auth=self.auth)
            except httpx.TransportError as exc:
                error: MemsvcError = _transport_error(exc)
            else:
                if _answered(response, call):
                    return _body(response, call)
                error = _error_from_response(response)
            delay = self._retry_delay(error, attempt)
            if delay is None:
                raise error
            await asyncio.sleep(delay)
            attempt += 1

    def _drive(self, handler: _Handler) -> Result:
        try:
            call = next(handler)
            while True:
                try:
                    data = self._call(call)
                except MemsvcError as exc:
                    call = handler.throw(exc)
                else:
                    call = handler.send(data)
        except StopIteration as done:
            return done.value

    async def _adrive(self, handler: _Handler, client: _LoopClient) -> Result:
        try:
            call = next(handler)
            while True:
                try:
                    data = await self._acall(client, call)
                except MemsvcError as exc:
                    call = handler.throw(exc)
                else:
                    call = handler.send(data)
        except StopIteration as done:
            return done.value


class AsyncMemsvcStore(MemsvcStore):
    """`MemsvcStore` shaped like LangGraph's async stores (`AsyncPostgresStore`,
    `AsyncSqliteStore`), for code written against them: `sweep_ttl`, `start_ttl_sweeper` and
    `stop_ttl_sweeper` are coroutines, and a synchronous call on a thread that runs an event
    loop raises `asyncio.InvalidStateError` instead of blocking that loop. Other threads may
    still make synchronous calls."""

    def batch(self, ops: Iterable[Op]) -> list[Result]:
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            return super().batch(ops)
        raise asyncio.InvalidStateError(
            f"Synchronous calls to {type(self).__name__} detected in the main event loop. This would block "
            "the loop: use the asynchronous interface there, e.g. `await store.aget(...)` for `store.get(...)`."
        )

    async def sweep_ttl(self) -> int:  # type: ignore[override]
        return MemsvcStore.sweep_ttl(self)

    async def start_ttl_sweeper(self, sweep_interval_minutes: int | None = None) -> asyncio.Task[None]:  # type: ignore[override]
        """No sweeper to start (the service sweeps): a task that ends at once."""
        return asyncio.create_task(asyncio.sleep(0))

    async def stop_ttl_sweeper(self, timeout: float | None = None) -> bool:  # type: ignore[override]
        return True


# -- helpers ----------------------------------------------------------------------------------


def _plan(ops: list[Op]) -> list[list[tuple[int, Op]]]:
    """Validate the ops and split them into phases run one after the other, each concurrently.

    Like LangGraph's stores, reads see the state before the batch's writes, and of several puts
    to one key only the last is sent. Phase 1 holds every read and every put no read of this batch
    could observe; phase 2 the puts that some read could observe."""
    reads: list[tuple[int, Op]] = []
    puts: dict[tuple[tuple[str, ...], str], tuple[int, PutOp]] = {}
    for i, op in enumerate(ops):
        if not isinstance(op, (GetOp, PutOp, SearchOp, ListNamespacesOp)):
            raise ValueError(f"Unknown operation type: {type(op)}")
        validate_op_namespace(op)
        if isinstance(op, SearchOp) and op.filter:
            translate_filter(op.filter)  # an invalid key fails the batch before anything is sent
        if isinstance(op, PutOp):
            puts[(tuple(op.namespace), op.key)] = (i, op)
        else:
            reads.append((i, op))
    first, later = list(reads), []
    for (ns, key), put in puts.items():
        (later if any(_observes(op, ns, key) for _, op in reads) else first).append(put)
    first.sort(key=lambda pair: pair[0])
    later.sort(key=lambda pair: pair[0])
    return [phase for phase in (first, later) if phase]


def _observes(op: Op, ns: tuple[str, ...], key: str) -> bool:
    """Could this read's result change if (ns, key) were written or deleted?"""
    if isinstance(op, GetOp):
        return tuple(op.namespace) == ns and op.key == key
    if isinstance(op, SearchOp):
        return ns[: len(op.namespace_prefix)] == tuple(op.namespace_prefix)
    assert isinstance(op, ListNamespacesOp)
    return all(_pattern_matches(c, ns) for c in op.match_conditions or ())


def _pattern_matches(condition: MatchCondition, ns: tuple[str, ...]) -> bool:
    path = tuple(condition.path)
    if len(ns) < len(path):
        return False
    part = ns[: len(path)] if condition.match_type == "prefix" else ns[len(ns) - len(path) :]
    return all(p == "*" or p == s for p, s in zip(path, part))


def _merge_conditions(conditions: Iterable[MatchCondition]) -> tuple[list[str], list[str]] | None:
    """The API takes one prefix and one suffix pattern; LangGraph allows several of each (all must
    hold). Merge them position by position; None when two literals clash."""
    merged: dict[str, list[str]] = {"prefix": [], "suffix": []}
    for condition in conditions:
        if condition.match_type not in merged:
            raise ValueError(f"Unsupported match type: {condition.match_type}")
        path = list(condition.path)
        into = merged[condition.match_type]
        if condition.match_type == "suffix":
            path, into = path[::-1], into[::-1]
        for i, segment in enumerate(path):
            if i == len(into):
                into.append(segment)
            elif into[i] == "*":
                into[i] = segment
            elif segment != "*" and segment != into[i]:
                return None
        merged[condition.match_type] = into[::-1] if condition.match_type == "suffix" else into
    return merged["prefix"], merged["suffix"]


def translate_filter(filter: Mapping[str, Any]) -> dict[str, Any]:
    """LangGraph's filter in the API's form. Operator objects (`{"$gt": 3}`) and scalars pass
    through; a nested object without operators (`{"meta": {"lang": "en"}}`, which InMemoryStore
    matches field by field) becomes dot paths (`{"meta.lang": "en"}`). Infinities and NaN, which
    JSON cannot carry, go as `{"$numberDouble": "Infinity" | "-Infinity" | "NaN"}`.

    Raises LangGraph's `ValueError("Invalid filter key: ...")` for a key that is not a dot path
    of non-empty names, before anything is sent."""
    out: dict[str, Any] = {}

    def walk(prefix: str, spec: Mapping[str, Any]) -> None:
        for name, value in spec.items():
            if not isinstance(name, str) or "" in name.split("."):
                raise ValueError(
                    f"Invalid filter key: {name!r}. Filter keys must be dot paths of non-empty field names."
                )
            path = f"{prefix}.{name}" if prefix else name
            if isinstance(value, Mapping) and value and not any(str(k).startswith("$") for k in value):
                walk(path, value)
            elif isinstance(value, Mapping):
                out[path] = {op: _encode_negated(operand) if op == "$not" and isinstance(operand, Mapping)
                             else _encode_operand(operand) for op, operand in value.items()}
            else:
                out[path] = _encode_operand(value)

    walk("", filter)
    return out


def _encode_negated(operators: Mapping[str, Any]) -> dict[str, Any]:
    """A `$not`'s operators (`{"$not": {"$lt": inf}}`), their operands encoded as any other's."""
    return {op: _encode_operand(operand) for op, operand in operators.items()}


def _encode_operand(operand: Any) -> Any:
    if isinstance(operand, (list, tuple)):
        return [_encode_operand(x) for x in operand]
    if isinstance(operand, float) and not math.isfinite(operand):
        return {"$numberDouble": "NaN" if math.isnan(operand) else ("Infinity" if operand > 0 else "-Infinity")}
    return operand


def minutes_to_ttl_seconds(ttl: float | timedelta | None) -> int | None:
    """LangGraph's `ttl` (minutes) as the API's `ttl_seconds`: rounded up, at least 1 second."""
    if ttl is None:
        return None
    minutes = ttl.total_seconds() / 60 if isinstance(ttl, timedelta) else float(ttl)
    if not minutes > 0 or math.isinf(minutes):
        raise ValueError(f"ttl must be a positive number of minutes or None, got {ttl!r}")
    # round() first so 5/60 minutes is 5 s, not 6 s from 5.000000000000001
    return max(1, math.ceil(round(minutes * 60, 6)))


def _ns_key(namespace: Sequence[str], key: str) -> list[tuple[str, str]]:
    return [*(("ns", segment) for segment in namespace), ("key", key)]


def _timestamp(raw: str) -> datetime:
    ts = datetime.fromisoformat(raw)
    return ts if ts.tzinfo else ts.replace(tzinfo=timezone.utc)


def _answered(response: httpx.Response, call: _Call) -> bool:
    """A success, or an unhealthy service's health report (a `503` whose body is the report)."""
    return response.is_success or (response.status_code == 503 and tuple(call[:2]) == ("GET", "/health"))


def _body(response: httpx.Response, call: _Call) -> Any:
    """JSON (a body that is not is `_BadResponse`), but for the route that answers text, `GET
    /metrics` (Prometheus' format): its text."""
    if not response.content:
        return None
    if tuple(call[:2]) == ("GET", "/metrics"):
        return response.text
    return response.json()


def _transport_error(exc: httpx.TransportError) -> TransientError:
    error = TransientError("UNAVAILABLE", f"{type(exc).__name__}: {exc}", retryable=True)
    error.__cause__ = exc
    return error
