"""Every route of API.md: parse, make one service call, shape the answer."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from memsvc.api import schemas as s
from memsvc.api.identity import caller_from_event
from memsvc.api.openapi import openapi_document
from memsvc.api.router import Request, Response, Route, Router
from memsvc.core.errors import InvalidArgument
from memsvc.core.models import Caller
from memsvc.service.memories import EventsQuery, MemoryService, PutMemory, SearchQuery

__all__ = ["build_router"]


def build_router(
    service: MemoryService,
    *,
    health: Callable[[], dict[str, Any]],
    identify: Callable[[dict[str, Any]], Caller] = caller_from_event,
) -> Router:
    router = Router(identify)

    def put_memory(req: Request, caller: Caller) -> Response:
        body = s.parse_body(s.PutMemoryBody, req.json())
        memory = service.put(caller, PutMemory(**body.model_dump()))
        return Response(200, s.memory_out(memory, value=False))

    def get_memory(req: Request, caller: Caller) -> Response:
        refresh = _flag(req, "refresh_ttl")
        return Response(200, s.memory_out(service.get(caller, req.params("ns"), _key(req), refresh_ttl=refresh)))

    def delete_memory(req: Request, caller: Caller) -> Response:
        service.delete(caller, req.params("ns"), _key(req))
        return Response(204)

    def search(req: Request, caller: Caller) -> Response:
        body = s.parse_body(s.SearchBody, req.json())
        found = service.search(caller, SearchQuery(**body.model_dump()))
        return Response(200, {"items": [s.memory_out(m, score=True) for m in found]})

    def list_namespaces(req: Request, caller: Caller) -> Response:
        found = service.list_namespaces(
            caller,
            prefix=req.params("prefix"),
            suffix=req.params("suffix"),
            max_depth=req.int_param("max_depth", None),
            limit=req.int_param("limit", 100),
            offset=req.int_param("offset", 0),
        )
        return Response(200, {"namespaces": [list(ns) for ns in found]})

    def events(req: Request, caller: Caller) -> Response:
        page = service.events(caller, EventsQuery(
            namespace_prefix=req.params("ns"),
            kinds=req.params("kinds"),
            after=req.param("after"),
            before=req.param("before"),
            after_cursor=req.param("after_cursor"),
            limit=req.int_param("limit", 50),
        ))
        return Response(200, {"events": [s.event_out(v) for v in page.events], "after_cursor": page.after_cursor,
                              "resume_cursor": page.resume_cursor})

    def get_policies(req: Request, caller: Caller) -> Response:
        return Response(200, service.get_policies(caller))

    def put_policies(req: Request, caller: Caller) -> Response:
        body = s.parse_body(s.PoliciesBody, req.json())
        return Response(200, service.put_policies(caller, body.model_dump()))

    def force_delete(req: Request, caller: Caller) -> Response:
        service.force_delete(caller, req.path_params["id"])
        return Response(204)

    def index_status(req: Request, caller: Caller) -> Response:
        return Response(200, service.index_status(caller))

    def index_trigger(req: Request, caller: Caller) -> Response:
        return Response(200, service.index_trigger(caller))

    def get_settings(req: Request, caller: Caller) -> Response:
        return Response(200, service.get_settings(caller).model_dump())

    def put_settings(req: Request, caller: Caller) -> Response:
        return Response(200, service.put_settings(caller, req.json()).model_dump())

    def get_health(req: Request, caller: None) -> Response:
        report = health()
        return Response(200 if report["status"] != "unhealthy" else 503, report)

    def get_openapi(req: Request, caller: None) -> Response:
        return Response(200, openapi_document(router.routes))

    ns_key = ("ns", "key")
    for route in [
        Route("PUT", "/v1/memories", put_memory, summary="Upsert a memory",
              body_model=s.PutMemoryBody, response_model=s.PutMemoryOut),
        Route("GET", "/v1/memories", get_memory, summary="Get a memory",
              response_model=s.MemoryOut, query_params=(*ns_key, "refresh_ttl")),
        Route("DELETE", "/v1/memories", delete_memory, summary="Delete a memory (idempotent)",
              status=204, query_params=ns_key),
        Route("POST", "/v1/memories/search", search, summary="Filter and semantic search",
              body_model=s.SearchBody, response_model=s.SearchOut),
        Route("GET", "/v1/memories/namespaces", list_namespaces, summary="List namespaces",
              response_model=s.NamespacesOut,
              query_params=("prefix", "suffix", "max_depth", "limit", "offset")),
        Route("GET", "/v1/memories/events", events, summary="The event timeline, oldest first",
              response_model=s.EventsOut,
              query_params=("ns", "kinds", "after", "before", "after_cursor", "limit")),
        Route("GET", "/admin/v1/memories/policies", get_policies, summary="The tenant's policy bundle",
              response_model=s.PoliciesOut),
        Route("PUT", "/admin/v1/memories/policies", put_policies, summary="Replace the tenant's policy bundle",
              body_model=s.PoliciesBody, response_model=s.PoliciesOut),
        Route("GET", "/admin/v1/memories/index/status", index_status, summary="Vector indexing backlog",
              response_model=s.IndexStatusOut),
        Route("POST", "/admin/v1/memories/index/trigger", index_trigger, summary="Run one indexing cycle now",
              response_model=s.IndexTriggerOut),
        Route("GET", "/admin/v1/memories/settings", get_settings, summary="The tenant's settings"),
        Route("PUT", "/admin/v1/memories/settings", put_settings, summary="Change the tenant's settings"),
        Route("DELETE", "/admin/v1/memories/{id:uuid}", force_delete, summary="Force-delete a memory by id", status=204),
        Route("GET", "/health", get_health, public=True, summary="Health of each component",
              response_model=s.HealthOut),
        Route("GET", "/openapi.json", get_openapi, public=True, summary="This document"),
    ]:
        router.add(route)
    return router


def _key(req: Request) -> Any:
    return req.param("key")


def _flag(req: Request, name: str) -> bool:
    raw = req.param(name)
    if raw is None or raw.lower() in ("false", "0"):
        return False
    if raw.lower() in ("true", "1", ""):
        return True
    raise InvalidArgument(f"query parameter {name!r} must be true or false", details={"field": name})
