"""The route table: the only declaration of the HTTP API.

Each route names its method, path, query model, body model, response model and status; each
handler makes one service call and returns a model. The router parses with these models, the
OpenAPI document is generated from them, and `infra` declares API Gateway's routes from them.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any
from urllib.parse import unquote

from memsvc.api import schemas as s
from memsvc.api.openapi import openapi_document
from memsvc.api.router import Call, Response, Route, Router
from memsvc.core.errors import InvalidArgument, NotFound
from memsvc.core.models import Caller
from memsvc.ports import Metrics
from memsvc.service.admin import Admin
from memsvc.service.memories import Memories
from memsvc.service.recall import Recall
from memsvc.service.remember import Accepted, Remember
from memsvc.service.search import ListNamespaces, Search
from memsvc.service.semantic import SemanticMemories, SemanticRef
from memsvc.service.session_close import CloseSession
from memsvc.service.sessions import ListMessages, ListSessions, Sessions, parse_if_match
from memsvc.service.tenant_config import TenantSettings
from memsvc.service.timeline import EventsQuery, TimelineReader

__all__ = ["ROUTES", "Services", "build_router"]


@dataclass(frozen=True)
class Services:
    memories: Memories
    search: Search
    recall: Recall
    timeline: TimelineReader
    admin: Admin
    health: Callable[[], dict[str, Any]]
    metrics: Metrics
    remember: Remember
    sessions: Sessions
    close_session: CloseSession
    semantic: SemanticMemories


def _put_memory(app: Services, c: Call) -> s.PutMemoryOut:
    return s.PutMemoryOut.of(app.memories.put(c.caller, c.body))


def _get_memory(app: Services, c: Call) -> s.MemoryOut:
    q = c.query
    return s.MemoryOut.of(app.memories.get(c.caller, q.namespace, q.key, refresh_ttl=q.refresh_ttl))


def _delete_memory(app: Services, c: Call) -> None:
    app.memories.delete(c.caller, c.query.namespace, c.query.key)


def _search(app: Services, c: Call) -> s.SearchOut:
    return s.SearchOut(items=[s.SearchItemOut.of(m) for m in app.search.search(c.caller, c.body)])


def _recall(app: Services, c: Call) -> s.RecallOut:
    return s.RecallOut.of(app.recall.recall(c.caller, c.body, request_id=c.request.request_id))


def _list_namespaces(app: Services, c: Call) -> s.NamespacesOut:
    return s.NamespacesOut(namespaces=[list(ns) for ns in app.search.list_namespaces(c.caller, c.query)])


def _remember(app: Services, c: Call) -> Response:
    outcome = app.remember.remember(c.caller, c.body)
    if isinstance(outcome, Accepted):
        return Response(202, s.RememberAcceptedOut(candidate_id=outcome.candidate_id))
    return Response(200, s.RememberOut.of(outcome))


def _events(app: Services, c: Call) -> s.EventsOut:
    return s.EventsOut.of(app.timeline.events(c.caller, c.query))


def _get_policies(app: Services, c: Call) -> s.PoliciesOut:
    return s.PoliciesOut.of(app.admin.get_policies(c.caller))


def _put_policies(app: Services, c: Call) -> s.PoliciesOut:
    return s.PoliciesOut.of(app.admin.put_policies(c.caller, c.body))


def _force_delete(app: Services, c: Call) -> None:
    app.admin.force_delete(c.caller, c.path["id"])


def _index_status(app: Services, c: Call) -> s.IndexStatusOut:
    return s.IndexStatusOut.of(app.admin.index_status(c.caller))


def _index_trigger(app: Services, c: Call) -> s.IndexTriggerOut:
    return s.IndexTriggerOut.of(app.admin.index_trigger(c.caller))


def _get_settings(app: Services, c: Call) -> TenantSettings:
    return app.admin.get_settings(c.caller)


def _put_settings(app: Services, c: Call) -> TenantSettings:
    return app.admin.put_settings(c.caller, c.body)


def _health(app: Services, c: Call) -> Response:
    report = s.HealthOut.model_validate(app.health())
    return Response(503 if report.status == "unhealthy" else 200, report)


def _metrics(app: Services, c: Call) -> Response:
    exposition = app.metrics.exposition()
    if exposition is None:
        raise NotFound("metrics are published to CloudWatch as EMF here, not served over HTTP")
    text, content_type = exposition
    return Response(200, text, {"content-type": content_type})


def _session_id(c: Call) -> str:
    """The path's session id, percent-decoded: an id holding `/` travels as `%2F`."""
    try:
        return unquote(c.path["id"], errors="strict")
    except UnicodeDecodeError:
        raise InvalidArgument("the session id is not percent-encoded UTF-8", details={"field": "id"}) from None


def _create_session(app: Services, c: Call) -> s.SessionOut:
    return s.SessionOut.of(app.sessions.create(c.caller, c.body))


def _list_sessions(app: Services, c: Call) -> s.SessionsOut:
    views, cursor = app.sessions.list(c.caller, c.query)
    return s.SessionsOut(sessions=[s.SessionOut.of(v) for v in views], count=len(views), next_cursor=cursor)


def _get_session(app: Services, c: Call) -> s.SessionOut:
    return s.SessionOut.of(app.sessions.get(c.caller, _session_id(c)))


def _put_session(app: Services, c: Call) -> s.SessionOut:
    if_match = parse_if_match(c.request.headers.get("if-match"))
    return s.SessionOut.of(app.sessions.update(c.caller, _session_id(c), c.body, if_match=if_match))


def _delete_session(app: Services, c: Call) -> None:
    app.sessions.delete(c.caller, _session_id(c))


def _append_message(app: Services, c: Call) -> s.AppendedMessageOut:
    appended = app.sessions.append(c.caller, _session_id(c), c.body)
    return s.AppendedMessageOut(message_id=appended.message_id, seq=appended.seq, created_at=appended.created_at)


def _list_messages(app: Services, c: Call) -> s.MessagesOut:
    views = app.sessions.messages(c.caller, _session_id(c), c.query)
    return s.MessagesOut(messages=[s.MessageOut(**vars(v)) for v in views], count=len(views))


def _close_session(app: Services, c: Call) -> s.SessionClosedOut:
    closed = app.close_session.close(c.caller, _session_id(c))
    return s.SessionClosedOut(promoted=closed.promoted, blocked=closed.blocked, deleted=closed.deleted,
                              delete_after=closed.delete_after)


def _upsert_semantic(app: Services, c: Call) -> s.SemanticUpsertOut:
    done = app.semantic.upsert(c.caller, c.body)
    return s.SemanticUpsertOut(id=done.id, external_id=done.external_id, content_hash=done.content_hash,
                               action=done.action)


def _get_semantic(app: Services, c: Call) -> s.SemanticOut:
    return s.SemanticOut.of(app.semantic.get(c.caller, c.query))


def _delete_semantic(app: Services, c: Call) -> None:
    app.semantic.delete(c.caller, c.query)


def _openapi(app: Services, c: Call) -> Response:
    return Response(200, openapi_document(ROUTES))


ROUTES: tuple[Route, ...] = (
    Route("PUT", "/v1/memories", "Upsert a memory", _put_memory, body=s.PutMemoryBody, response=s.PutMemoryOut),
    Route("GET", "/v1/memories", "Get a memory", _get_memory, query=s.GetMemoryQuery, response=s.MemoryOut),
    Route("DELETE", "/v1/memories", "Delete a memory (idempotent)", _delete_memory, query=s.MemoryQuery,
          status=204),
    Route("POST", "/v1/memories/search", "Filter and semantic search", _search, body=s.SearchBody,
          response=s.SearchOut),
    Route("POST", "/v1/memories/recall", "Recall across layers: ranked, deduplicated, within a token budget",
          _recall, body=s.RecallBody, response=s.RecallOut),
    Route("POST", "/v1/memories/remember", "Remember a typed memory, consolidating it with its neighbours",
          _remember, body=s.RememberBody, response=s.RememberOut),
    Route("GET", "/v1/memories/namespaces", "List namespaces", _list_namespaces, query=ListNamespaces,
          response=s.NamespacesOut),
    Route("GET", "/v1/memories/events", "The event timeline, oldest first", _events, query=EventsQuery,
          response=s.EventsOut),
    Route("GET", "/admin/v1/memories/policies", "The tenant's policy bundle", _get_policies,
          response=s.PoliciesOut),
    Route("PUT", "/admin/v1/memories/policies", "Replace the tenant's policy bundle", _put_policies,
          body=s.PoliciesBody, response=s.PoliciesOut),
    Route("GET", "/admin/v1/memories/index/status", "Vector indexing backlog", _index_status,
          response=s.IndexStatusOut),
    Route("POST", "/admin/v1/memories/index/trigger", "Run one indexing cycle now", _index_trigger,
          response=s.IndexTriggerOut),
    Route("GET", "/admin/v1/memories/settings", "The tenant's settings", _get_settings, response=TenantSettings),
    Route("PUT", "/admin/v1/memories/settings", "Change some of the tenant's settings", _put_settings,
          body=s.SettingsBody, response=TenantSettings),
    Route("DELETE", "/admin/v1/memories/{id:uuid}", "Force-delete a memory by id", _force_delete, status=204),
    Route("POST", "/v1/memory/sessions", "Create a session (409 if it exists)", _create_session,
          body=s.CreateSessionBody, response=s.SessionOut, status=201),
    Route("GET", "/v1/memory/sessions", "The caller's sessions, last interaction first", _list_sessions,
          query=ListSessions, response=s.SessionsOut),
    Route("GET", "/v1/memory/sessions/{id}", "One of the caller's sessions", _get_session, response=s.SessionOut),
    Route("PUT", "/v1/memory/sessions/{id}", "Change a session (If-Match: version)", _put_session,
          body=s.UpdateSessionBody, response=s.SessionOut),
    Route("DELETE", "/v1/memory/sessions/{id}", "Delete a session, its messages and its layer (idempotent)",
          _delete_session, status=204),
    Route("POST", "/v1/memory/sessions/{id}/messages", "Append a message", _append_message,
          body=s.AppendMessageBody, response=s.AppendedMessageOut, status=201),
    Route("GET", "/v1/memory/sessions/{id}/messages", "A session's messages in order", _list_messages,
          query=ListMessages, response=s.MessagesOut),
    Route("POST", "/v1/memory/sessions/{id}/close", "Close a session: promote its important memories",
          _close_session, response=s.SessionClosedOut),
    Route("POST", "/v1/memory/semantic", "Upsert a semantic memory (dedup on external_id or content)",
          _upsert_semantic, body=s.UpsertSemanticBody, response=s.SemanticUpsertOut),
    Route("GET", "/v1/memory/semantic", "A semantic memory by external_id or content_hash", _get_semantic,
          query=SemanticRef, response=s.SemanticOut),
    Route("DELETE", "/v1/memory/semantic", "Delete a semantic memory (idempotent)", _delete_semantic,
          query=SemanticRef, status=204),
    Route("GET", "/health", "Health of each component", _health, response=s.HealthOut, public=True),
    Route("GET", "/openapi.json", "This document", _openapi, public=True),
    Route("GET", "/metrics", "Seed 001's metrics, in Prometheus' text format (memsvc serve)", _metrics,
          public=True, content_type="text/plain; version=0.0.4"),
)


def build_router(services: Services, identify: Callable[[dict[str, Any]], Caller]) -> Router:
    """`identify` reads the caller from the authorizer's part of the event (`memsvc.api.identity`)."""
    return Router(ROUTES, services, identify, services.metrics)
