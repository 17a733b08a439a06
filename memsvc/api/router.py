"""A small router over API Gateway HTTP API (payload 2.0) events.

Powertools' `APIGatewayHttpResolver` keeps the current event on a class attribute, so two
requests resolved at once in one process (the local server's threads) would see each
other's events. This router keeps all request state in the `Request` it passes down, so the
Lambda and the local server share one transport that is safe under concurrency.
"""

from __future__ import annotations

import base64
import json
import logging
import re
import time
import uuid
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass, field
from functools import cache, cached_property
from types import UnionType
from typing import Annotated, Any, Literal, Union, get_args, get_origin
from urllib.parse import parse_qsl

from pydantic import BaseModel

from memsvc.api.metering import operation_sample
from memsvc.core import strict_json
from memsvc.core.errors import InvalidArgument, MemsvcError, NotFound, RateLimited, echoed
from memsvc.core.models import Caller
from memsvc.core.validation import Command
from memsvc.ports import Metrics

__all__ = ["Request", "Response", "Router", "Route", "Call", "Handled", "query_fields", "query_kind", "check_event"]

log = logging.getLogger(__name__)


@dataclass
class Request:
    method: str
    path: str
    query: list[tuple[str, str]]
    headers: dict[str, str]
    body: str | bytes | None  # bytes: API Gateway base64-encoded it, so it may not be UTF-8
    event: dict[str, Any]
    path_params: dict[str, str] = field(default_factory=dict)
    request_id: str = ""

    def params(self, name: str) -> list[str]:
        """Every value of a repeated query parameter, read from `rawQueryString` (API
        Gateway joins repeated values with commas, which a segment may itself contain)."""
        return [v for k, v in self.query if k == name]

    def param(self, name: str) -> str | None:
        values = self.params(name)
        if len(values) > 1:
            raise InvalidArgument(f"query parameter {name!r} given more than once", details={"field": name})
        return values[0] if values else None

    def json(self) -> Any:
        body = self.body
        if isinstance(body, bytes):
            try:
                body = body.decode("utf-8")
            except UnicodeDecodeError:
                raise InvalidArgument("request body is not valid UTF-8", details={"field": "body"}) from None
        if not body:
            raise InvalidArgument("a JSON request body is required", details={"field": "body"})
        try:
            return strict_json.loads(body)
        except json.JSONDecodeError as exc:  # where, not why: exc.msg is the json module's text
            raise InvalidArgument(f"request body is not valid JSON (line {exc.lineno}, column {exc.colno})",
                                  details={"field": "body", "line": exc.lineno, "column": exc.colno}) from None
        except RecursionError:
            raise InvalidArgument("request body is nested too deeply", details={"field": "body"}) from None
        except strict_json.Refused as exc:
            raise InvalidArgument(str(exc), details={"field": exc.path}) from None


_INTEGER = re.compile(r"-?[0-9]+", re.ASCII)


@dataclass
class Response:
    """`body` is a JSON-able value or a pydantic model (serialized by pydantic's own encoder), or
    bytes of UTF-8 text sent as they are (with their own `content-type` in `headers`)."""

    status: int
    body: Any = None
    headers: dict[str, str] = field(default_factory=dict)

    def to_event(self) -> dict[str, Any]:
        headers = {"content-type": "application/json", **self.headers}
        if self.body is None:
            body = ""
            headers.pop("content-type")
        elif isinstance(self.body, BaseModel):
            body = self.body.model_dump_json()
        elif isinstance(self.body, bytes):
            body = self.body.decode("utf-8")
        else:
            body = json.dumps(self.body, separators=(",", ":"), ensure_ascii=False)
        return {"statusCode": self.status, "headers": headers, "body": body, "isBase64Encoded": False}


@dataclass(frozen=True)
class Call:
    """What a handler gets: the caller (None on public routes), the parsed query and body (instances
    of the route's models, or None), the path parameters, and the raw request."""

    caller: Caller | None
    query: Any
    body: Any
    path: dict[str, str]
    request: Request


@dataclass(frozen=True)
class Route:
    """One row of the route table: the only declaration of an operation of the HTTP API.

    The query string is parsed into `query` and the JSON body into `body` (both `Command`
    models, so a wrong type or an unknown body field is a 400 naming the field); the handler
    returns a `response` model (or None, for a 204), or a `Response` when its status depends on
    the answer. The OpenAPI document and API Gateway's routes are derived from these rows."""

    method: str
    path: str
    summary: str
    handler: Callable[[Any, Call], Any]
    query: type[Command] | None = None
    body: type[Command] | None = None
    response: type[BaseModel] | None = None
    status: int = 200
    also: tuple[tuple[int, type[BaseModel]], ...] = ()  # other answers of its own, as (status, model)
    public: bool = False
    # Takes `If-Match: <version>` (412 when another version is current): a workflow object's version
    # number, or a policy bundle's version.
    if_match: Literal["number", "bundle"] | None = None
    content_type: str = "application/json"  # of the answer, for the OpenAPI document

    @property
    def admin_only(self) -> bool:
        """Every route under /admin/ is for admins alone: that is checked before the request is
        read, so someone else learns nothing of what the route would take."""
        return self.path.startswith("/admin/")

    @cached_property
    def pattern(self) -> re.Pattern[str]:
        """`{name}` matches one path segment, `{name:uuid}` only a UUID (so `/memories/settings`
        is never taken for a memory id)."""
        uuid_re = "[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}"
        regex = re.sub(r"\{(\w+):uuid\}", lambda m: f"(?P<{m.group(1)}>{uuid_re})", self.path)
        regex = re.sub(r"\{([A-Za-z_]\w*)\}", r"(?P<\1>[^/]+)", regex)
        return re.compile("^" + regex + "$")


@dataclass
class Handled:
    """What became of one request, for its metrics: filled in as far as the request got."""

    route: Route | None = None
    caller: Caller | None = None
    body: Any = None
    result: Any = None  # the answer's body (a model, usually)


class Router:
    def __init__(self, routes: Sequence[Route], services: Any, identify: Callable[[dict[str, Any]], Caller],
                 metrics: Metrics) -> None:
        self.routes = tuple(routes)
        self._services = services
        self._identify = identify
        self._metrics = metrics

    def handle(self, event: dict[str, Any], *, on_route: Callable[[Route], None] | None = None) -> dict[str, Any]:
        """Resolve one API Gateway v2 event to its response event. Never raises.

        `on_route` is told which route matched (before it runs), so a caller can label metrics
        and logs with the route template (`route.method`, `route.path`), never the raw path."""
        started = time.perf_counter()
        ctx = event.get("requestContext") if isinstance(event, dict) else None
        given_id = ctx.get("requestId") if isinstance(ctx, dict) else None
        request_id = given_id if isinstance(given_id, str) and given_id else str(uuid.uuid4())
        handled = Handled()
        try:
            check_event(event)
            response = self._dispatch(event, request_id, on_route, handled)
        except MemsvcError as exc:
            response = _error_response(exc)
        except Exception:
            log.exception("unhandled error", extra={"request_id": request_id})
            response = _internal_error(request_id)
        response.headers.setdefault("x-request-id", request_id)
        try:
            answer = response.to_event()
        except Exception:  # an answer that cannot be serialized: still the envelope, never a stack
            log.exception("serializing the response failed", extra={"request_id": request_id})
            response = _internal_error(request_id)
            answer = response.to_event()
        if not (handled.route is not None and handled.route.public):
            self._record(handled, response, (time.perf_counter() - started) * 1000)
        return answer

    def _record(self, handled: Handled, response: Response, latency_ms: float) -> None:
        try:
            self._metrics.record(operation_sample(handled, response, latency_ms))
        except Exception:  # a metric that cannot be recorded must not fail the request it describes
            log.exception("recording metrics failed")

    def _dispatch(self, event: dict[str, Any], request_id: str, on_route: Callable[[Route], None] | None,
                  handled: Handled) -> Response:
        ctx = event.get("requestContext") or {}
        method = (ctx.get("http") or {}).get("method", "GET").upper()
        path = event.get("rawPath") or "/"
        body = event.get("body")
        if body is not None and event.get("isBase64Encoded"):
            try:
                body = base64.b64decode(body, validate=True)  # decoded as UTF-8, strictly, by Request.json
            except ValueError:  # binascii.Error, or a str that is not ASCII
                raise InvalidArgument("request body is not valid base64", details={"field": "body"}) from None
        allowed: list[str] = []
        for route in self.routes:
            match = route.pattern.match(path)
            if not match:
                continue
            if route.method != method:
                allowed.append(route.method)
                continue
            request = Request(
                method=method,
                path=path,
                query=_query_pairs(event.get("rawQueryString") or ""),
                headers={k.lower(): v for k, v in (event.get("headers") or {}).items()},
                body=body,
                event=event,
                path_params=match.groupdict(),
                request_id=request_id,
            )
            if on_route is not None:
                on_route(route)
            handled.route = route
            handled.caller = caller = None if route.public else self._identify(event)
            if route.admin_only:
                self._services.admin.require_admin(caller)
            refuse_encoded_body(request)
            if route.query is None:
                refuse_query(request)
            if route.body is None:
                refuse_body(request)
            call = Call(
                caller=caller,
                query=None if route.query is None else route.query.parse(query_fields(route.query, request),
                                                                          whole="query"),
                body=None if route.body is None else route.body.parse(request.json()),
                path=request.path_params,
                request=request,
            )
            handled.body = call.body
            result = route.handler(self._services, call)
            response = result if isinstance(result, Response) else Response(route.status, result)
            handled.result = response.body
            return response
        if allowed:
            return Response(
                405,
                {"error": {"code": "METHOD_NOT_ALLOWED", "message": f"method {echoed(method)} not allowed here",
                           "retryable": False, "details": {"allowed": sorted(set(allowed))}}},
                {"allow": ", ".join(sorted(set(allowed)))},
            )
        raise NotFound(f"no route for {echoed(path)}")


_OBJECTS_OF_STRINGS = ("headers", "queryStringParameters", "pathParameters")
_STRINGS = ("rawPath", "rawQueryString", "body")


def check_event(event: Any) -> None:
    """Refuse an event of a shape API Gateway never sends (a hand-made or corrupted invocation):
    the parts the router and `Identity` read must be objects, and headers and parameters must map
    strings to strings. Linear in the event's top-level parts; nothing is echoed."""
    if not isinstance(event, dict):
        raise _malformed("event", "the event is not an object")
    for name in _OBJECTS_OF_STRINGS:
        part = event.get(name)
        if part is None:
            continue
        if not isinstance(part, dict):
            raise _malformed(name, f"{name} is not an object")
        if not all(isinstance(k, str) and isinstance(v, str) for k, v in part.items()):
            raise _malformed(name, f"{name} must map strings to strings")
    for name in _STRINGS:
        if event.get(name) is not None and not isinstance(event[name], str):
            raise _malformed(name, f"{name} is not a string")
    if not isinstance(event.get("isBase64Encoded", False), bool):
        raise _malformed("isBase64Encoded", "isBase64Encoded is not a boolean")
    ctx = event.get("requestContext")
    if ctx is None:
        return
    if not isinstance(ctx, dict):
        raise _malformed("requestContext", "requestContext is not an object")
    http = ctx.get("http")
    if http is not None and not (isinstance(http, dict) and isinstance(http.get("method", ""), str)):
        raise _malformed("requestContext.http", "requestContext.http is not an object with a string method")
    authorizer = ctx.get("authorizer")
    if authorizer is None:
        return
    if not isinstance(authorizer, dict):
        raise _malformed("requestContext.authorizer", "requestContext.authorizer is not an object")
    jwt = authorizer.get("jwt")
    if isinstance(jwt, dict) and not isinstance(jwt.get("claims") or {}, dict):
        raise _malformed("requestContext.authorizer.jwt.claims", "the JWT claims are not an object")


def _malformed(field: str, message: str) -> InvalidArgument:
    return InvalidArgument(f"malformed request event: {message}", details={"field": field})


def _query_pairs(raw_query: str) -> list[tuple[str, str]]:
    """The query string's parameters, decoded strictly: `%FF` is refused, not read as U+FFFD (which
    would name another key than the one sent)."""
    try:
        return parse_qsl(raw_query, keep_blank_values=True, errors="strict")
    except UnicodeDecodeError:
        raise InvalidArgument("the query string is not percent-encoded UTF-8", details={"field": "query"}) from None


def _refuse_unknown_parameters(request: Request, declared: Collection[str]) -> None:
    unknown = next((name for name, _ in request.query if name not in declared), None)
    if unknown is not None:
        raise InvalidArgument(f"unknown query parameter {unknown[:64]!r}; this route takes "
                              f"{', '.join(sorted(declared)) or 'none'}", details={"field": unknown[:64]})


def refuse_query(request: Request) -> None:
    """A route without query parameters refuses any, as a route with them refuses one it does not
    declare: `DELETE /admin/v1/users/{id}?dry_run=true` must not erase anyone."""
    _refuse_unknown_parameters(request, ())


def refuse_body(request: Request) -> None:
    """A route without a body takes none, or an empty JSON object; anything else is refused (a
    body that is not JSON as such), never ignored."""
    if request.body in (None, "", b""):
        return
    if request.json() != {}:
        raise InvalidArgument("this route takes no request body: send none, or {}", details={"field": "body"})


def refuse_encoded_body(request: Request) -> None:
    """A body is read as it arrives: one declared compressed or otherwise encoded (which neither
    API Gateway nor this server decodes) is refused rather than read as something else."""
    content = request.headers.get("content-encoding", "").strip().lower()
    if content not in ("", "identity"):
        raise InvalidArgument("a Content-Encoding is not supported: send the body unencoded",
                              details={"field": "content-encoding"})
    transfer = request.headers.get("transfer-encoding", "").lower()
    if any(coding.strip() not in ("", "chunked", "identity") for coding in transfer.split(",")):
        raise InvalidArgument("only the chunked Transfer-Encoding is supported", details={"field": "transfer-encoding"})


def query_fields(model: type[Command], request: Request) -> dict[str, Any]:
    """The query parameters a model declares, typed for it: a list field takes every repeat of
    its parameter; any other field exactly one value, an integer as ASCII digits and a boolean
    as true/false/1/0 (or empty, for true). A parameter the model does not declare is refused,
    as an unknown body field is: `?kind=delete` for `kinds` would otherwise answer every kind."""
    declared = _query_names(model)
    _refuse_unknown_parameters(request, declared)
    out: dict[str, Any] = {}
    for wire, kind in _query_plan(model):
        if kind == "array":
            if request.params(wire):
                out[wire] = request.params(wire)
            continue
        raw = request.param(wire)
        if raw is None:
            continue
        if kind == "integer":
            # ASCII digits only (int() also takes " 5" and "٥"); the model says what range it takes.
            if not _INTEGER.fullmatch(raw) or len(raw) > strict_json.MAX_INT_DIGITS:
                raise InvalidArgument(f"query parameter {wire!r} must be an integer", details={"field": wire})
            out[wire] = int(raw)
        elif kind == "boolean":
            if raw.lower() not in _BOOLEANS:
                raise InvalidArgument(f"query parameter {wire!r} must be true or false", details={"field": wire})
            out[wire] = _BOOLEANS[raw.lower()]
        else:
            out[wire] = raw
    return out


@cache
def _query_names(model: type[BaseModel]) -> frozenset[str]:
    return frozenset(wire for wire, _ in _query_plan(model))


@cache
def _query_plan(model: type[BaseModel]) -> tuple[tuple[str, str], ...]:
    """Each field's parameter name and kind, worked out once per model."""
    return tuple((info.alias or name, query_kind(info.annotation)) for name, info in model.model_fields.items())


def query_kind(annotation: Any) -> str:
    """The OpenAPI type of a query field: array, integer, boolean or string."""
    args = [a for a in get_args(annotation) if a is not type(None)] if get_origin(annotation) in (Union, UnionType) else []
    if args:
        return query_kind(args[0])
    if get_origin(annotation) is Annotated:
        return query_kind(get_args(annotation)[0])
    if get_origin(annotation) in (list, tuple):
        return "array"
    if annotation is bool:
        return "boolean"
    if annotation is int:
        return "integer"
    return "string"


_BOOLEANS = {"true": True, "1": True, "": True, "false": False, "0": False}


def _internal_error(request_id: str) -> Response:
    return Response(500, {"error": {"code": "INTERNAL", "message": "internal error", "retryable": False,
                                    "details": {"request_id": request_id}}}, {"x-request-id": request_id})


def _error_response(exc: MemsvcError) -> Response:
    headers = {}
    if isinstance(exc, RateLimited):
        headers["retry-after"] = str(exc.retry_after_seconds)
    return Response(exc.status, exc.to_body(), headers)
