"""The route table: the only declaration of the HTTP API.

Each route names its method, path, query model, body model, response model and status; each
handler makes one service call and returns a model. The router parses with these models, the
OpenAPI document is generated from them, and `infra` declares API Gateway's routes from them.
"""

from __future__ import annotations

import base64
import hashlib
import json
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache
from typing import Any
from urllib.parse import unquote

from memsvc.api import schemas as s
from memsvc.api import langgraph_store_schemas as lgs
from memsvc.api import transfer_schemas as ts
from memsvc.api.identity import presented_claims
from memsvc.api.openapi import openapi_document
from memsvc.api.router import Call, Response, Route, Router
from memsvc.core.errors import InvalidArgument, NotFound
from memsvc.core.models import Caller, to_rfc3339
from memsvc.ports import Metrics
from memsvc.service.admin import Admin, PutPoliciesOptions
from memsvc.service.extraction import Extraction, ExtractionQueued
from memsvc.service.feedback import Feedback
from memsvc.service.history import HistoryQuery, MemoryHistory
from memsvc.service.langgraph_store_api import (LangGraphStoreApi, StoreDeleteItem, StoreGetItem,
                                                StoreListNamespaces, StorePutItem, StoreSearchItems)
from memsvc.service.data_export import DataExports, ExportPartQuery, StartExport
from memsvc.service.data_import import CreateImport, DataImports, ImportPart, StartImport
from memsvc.service.graph import (EntityRef, FindEntities, Graph, NeighboursQuery, PathQuery, PutEntity, PutRelation,
                                  RelatedQuery, RelationRef)
from memsvc.service.memories import Memories
from memsvc.service.profile import ProfileQuery, Profiles
from memsvc.service.recall import Recall
from memsvc.service.reflection import Reflection
from memsvc.service.restore import Restore
from memsvc.service.remember import Accepted, Remember
from memsvc.service.search import ListNamespaces, Search
from memsvc.service.semantic import SemanticMemories, SemanticRef
from memsvc.service.session_close import CloseSession
from memsvc.service.sessions import ListMessages, ListSessions, Sessions
from memsvc.service.tenant_config import TenantSettings
from memsvc.service.timeline import EventsQuery, TimelineReader
from memsvc.service.plans import CreatePlan, ListPlans, Plans, UpdatePlan
from memsvc.service.task_contexts import ChangeSubTasks, CreateTaskContext, TaskContexts, UpdateTaskContext
from memsvc.service.working_memory import ListWorking, PutWorking, WorkingMemory
from memsvc.service.workflow_rules import if_match
from memsvc.service.user_erasure import UserErasure

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
    extraction: Extraction
    feedback: Feedback
    sessions: Sessions
    close_session: CloseSession
    semantic: SemanticMemories
    task_contexts: TaskContexts
    plans: Plans
    working: WorkingMemory
    graph: Graph
    # Reflection, archive and profile (issue 24).
    restore: Restore
    profiles: Profiles
    reflection: Reflection
    # Memory history (issue 25).
    history: MemoryHistory
    # Export and import (issue 26).
    exports: DataExports
    imports: DataImports
    # Erasing a user (issue 26).
    user_erasure: UserErasure
    # The LangGraph Platform store API (issue 28).
    langgraph_store: LangGraphStoreApi


def _put_memory(app: Services, c: Call) -> s.PutMemoryOut:
    return s.PutMemoryOut.of(app.memories.put(c.caller, c.body))


def _get_memory(app: Services, c: Call) -> s.MemoryOut:
    q = c.query
    return s.MemoryOut.of(app.memories.get(c.caller, q.namespace, q.key, refresh_ttl=q.refresh_ttl))


def _delete_memory(app: Services, c: Call) -> None:
    app.memories.delete(c.caller, c.query.namespace, c.query.key)


def _search(app: Services, c: Call) -> s.SearchOut:
    return s.SearchOut.of(app.search.answer(c.caller, c.body, request_id=c.request.request_id))


def _feedback(app: Services, c: Call) -> s.FeedbackOut:
    return s.FeedbackOut.of(app.feedback.give(c.caller, c.body))


def _recall(app: Services, c: Call) -> s.RecallOut:
    return s.RecallOut.of(app.recall.recall(c.caller, c.body, request_id=c.request.request_id))


def _list_namespaces(app: Services, c: Call) -> s.NamespacesOut:
    return s.NamespacesOut.of(app.search.namespace_listing(c.caller, c.query))


def _identity(app: Services, c: Call) -> s.IdentityOut:
    """No policy decides this: it repeats what the caller's own credentials say, and reads nothing
    of the tenant's (a caller every policy denies can still see who they are signed in as)."""
    caller = c.caller
    return s.IdentityOut(tenant_id=caller.tenant_id, user_id=caller.user_id, roles=list(caller.roles),
                         auth="iam" if caller.principal_type == "iam" else "jwt",
                         claims=presented_claims(c.request.event))


def _remember(app: Services, c: Call) -> Response:
    outcome = app.remember.remember(c.caller, c.body)
    if isinstance(outcome, Accepted):
        return Response(202, s.RememberAcceptedOut(candidate_id=outcome.candidate_id))
    return Response(200, s.RememberOut.of(outcome))


def _extract(app: Services, c: Call) -> Response:
    outcome = app.extraction.extract(c.caller, c.body)
    if isinstance(outcome, ExtractionQueued):
        return Response(202, s.ExtractQueuedOut(job_id=outcome.job_id, status=outcome.reason))
    return Response(200, s.ExtractOut.of(outcome))


def _events(app: Services, c: Call) -> s.EventsOut:
    return s.EventsOut.of(app.timeline.events(c.caller, c.query))


def _history(app: Services, c: Call) -> s.HistoryOut:
    return s.HistoryOut.of(app.history.history(c.caller, c.query))


def _erase_user(app: Services, c: Call) -> Response:
    receipt = app.user_erasure.erase(c.caller, _param(c, "user_id"))
    return Response(200 if receipt.status == "completed" else 202, s.ErasureReceiptOut.of(receipt))


def _erasure(app: Services, c: Call) -> s.ErasureReceiptOut:
    return s.ErasureReceiptOut.of(app.user_erasure.status(c.caller, _param(c, "user_id")))


def _get_policies(app: Services, c: Call) -> s.PoliciesOut:
    return s.PoliciesOut.of(app.admin.get_policies(c.caller))


def _put_policies(app: Services, c: Call) -> s.PoliciesOut | s.PolicyCheckOut:
    checked = app.admin.put_policies(c.caller, c.body, dry_run=c.query.dry_run,
                                     if_match=c.request.headers.get("if-match"))
    return s.PolicyCheckOut(valid=True) if c.query.dry_run else s.PoliciesOut.of(checked)


def _force_delete(app: Services, c: Call) -> None:
    app.admin.force_delete(c.caller, c.path["id"])


def _index_status(app: Services, c: Call) -> s.IndexStatusOut:
    return s.IndexStatusOut.of(app.admin.index_status(c.caller))


def _index_trigger(app: Services, c: Call) -> s.IndexTriggerOut:
    return s.IndexTriggerOut.of(app.admin.index_trigger(c.caller))


def _index_retry(app: Services, c: Call) -> s.IndexRetryOut:
    return s.IndexRetryOut.of(app.admin.index_retry(c.caller, c.body))


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


def _create_session(app: Services, c: Call) -> s.SessionOut:
    return s.SessionOut.of(app.sessions.create(c.caller, c.body))


def _list_sessions(app: Services, c: Call) -> s.SessionsOut:
    views, cursor = app.sessions.list(c.caller, c.query)
    return s.SessionsOut(sessions=[s.SessionOut.of(v) for v in views], count=len(views), next_cursor=cursor)


def _get_session(app: Services, c: Call) -> s.SessionOut:
    return s.SessionOut.of(app.sessions.get(c.caller, _param(c, "id")))


def _put_session(app: Services, c: Call) -> s.SessionOut:
    expected = if_match(c.request.headers.get("if-match"))
    return s.SessionOut.of(app.sessions.update(c.caller, _param(c, "id"), c.body, if_match=expected))


def _delete_session(app: Services, c: Call) -> None:
    app.sessions.delete(c.caller, _param(c, "id"))


def _append_message(app: Services, c: Call) -> s.AppendedMessageOut:
    appended = app.sessions.append(c.caller, _param(c, "id"), c.body)
    return s.AppendedMessageOut(message_id=appended.message_id, seq=appended.seq, created_at=appended.created_at)


def _list_messages(app: Services, c: Call) -> s.MessagesOut:
    page = app.sessions.messages(c.caller, _param(c, "id"), c.query)
    return s.MessagesOut(messages=[s.MessageOut(**vars(v)) for v in page.messages], count=len(page.messages),
                         next_after_seq=page.next_after_seq)


def _close_session(app: Services, c: Call) -> s.SessionClosedOut:
    closed = app.close_session.close(c.caller, _param(c, "id"))
    return s.SessionClosedOut(promoted=closed.promoted, blocked=closed.blocked, deleted=closed.deleted,
                              delete_after=closed.delete_after, extraction_pending=closed.extraction_pending)


def _upsert_semantic(app: Services, c: Call) -> s.SemanticUpsertOut:
    done = app.semantic.upsert(c.caller, c.body)
    return s.SemanticUpsertOut(id=done.id, external_id=done.external_id, content_hash=done.content_hash,
                               action=done.action)


def _get_semantic(app: Services, c: Call) -> s.SemanticOut:
    return s.SemanticOut.of(app.semantic.get(c.caller, c.query))


def _delete_semantic(app: Services, c: Call) -> None:
    app.semantic.delete(c.caller, c.query)
def _param(c: Call, name: str) -> str:
    """A path parameter as the caller meant it, decoded exactly once. API Gateway's HTTP API
    decodes the path before the Lambda sees it and hands over `pathParameters` decoded; `memsvc
    serve` passes the path as sent, so its segment is decoded here (`a%2Fb` is the id `a/b`)."""
    decoded = (c.request.event.get("pathParameters") or {}).get(name)
    if decoded is not None:
        return decoded
    try:
        return unquote(c.path[name], errors="strict")
    except UnicodeDecodeError:
        raise InvalidArgument(f"{name} is not percent-encoded UTF-8", details={"field": name}) from None


def _create_task_context(app: Services, c: Call) -> Response:
    record = app.task_contexts.create(c.caller, c.body)
    return Response(201, s.TaskContextCreatedOut(task_id=record.task_id, created_at=to_rfc3339(record.created_at),
                                                 version=record.version))


def _get_task_context(app: Services, c: Call) -> s.TaskContextOut:
    return s.TaskContextOut(**app.task_contexts.get(c.caller, _param(c, "task_id")).to_json())


def _put_task_context(app: Services, c: Call) -> s.TaskContextOut:
    expected = if_match(c.request.headers.get("if-match"))
    return s.TaskContextOut(**app.task_contexts.update(c.caller, _param(c, "task_id"), c.body,
                                                       expected_version=expected).to_json())


def _delete_task_context(app: Services, c: Call) -> None:
    app.task_contexts.delete(c.caller, _param(c, "task_id"))


def _task_context_by_subtask(app: Services, c: Call) -> s.TaskContextOut:
    return s.TaskContextOut(**app.task_contexts.by_subtask(c.caller, _param(c, "subtask_id")).to_json())


def _change_sub_tasks(app: Services, c: Call) -> s.SubTasksOut:
    changed = app.task_contexts.change_sub_tasks(c.caller, _param(c, "task_id"), c.body)
    return s.SubTasksOut(sub_tasks=list(changed.sub_tasks), remaining=len(changed.sub_tasks),
                         removed=list(changed.removed), version=changed.version)


def _create_plan(app: Services, c: Call) -> Response:
    return Response(201, s.PlanOut(**app.plans.create(c.caller, c.body).to_json()))


def _list_plans(app: Services, c: Call) -> s.PlansOut:
    page = app.plans.list(c.caller, c.query)
    plans = [s.PlanOut(**p.to_json()) for p in page.plans]
    return s.PlansOut(plans=plans, count=len(plans), next_cursor=page.next_cursor)


def _get_plan(app: Services, c: Call) -> s.PlanOut:
    return s.PlanOut(**app.plans.get(c.caller, _param(c, "plan_id")).to_json())


def _put_plan(app: Services, c: Call) -> s.PlanOut:
    expected = if_match(c.request.headers.get("if-match"))
    return s.PlanOut(**app.plans.update(c.caller, _param(c, "plan_id"), c.body, expected_version=expected).to_json())


def _delete_plan(app: Services, c: Call) -> None:
    app.plans.delete(c.caller, _param(c, "plan_id"))


def _put_working(app: Services, c: Call) -> s.WorkingValueOut:
    expected = if_match(c.request.headers.get("if-match"))
    return s.WorkingValueOut(**app.working.put(c.caller, _param(c, "plan_id"), _param(c, "key"), c.body,
                                               if_match=expected).to_json())


def _get_working(app: Services, c: Call) -> s.WorkingValueOut:
    return s.WorkingValueOut(**app.working.get(c.caller, _param(c, "plan_id"), _param(c, "key")).to_json())


def _list_working(app: Services, c: Call) -> s.WorkingValuesOut:
    page = app.working.list(c.caller, _param(c, "plan_id"), c.query)
    return s.WorkingValuesOut(items=[s.WorkingValueOut(**w.to_json()) for w in page.items],
                              next_cursor=page.next_cursor)


def _delete_working(app: Services, c: Call) -> None:
    app.working.delete(c.caller, _param(c, "plan_id"), _param(c, "key"))


def _delete_all_working(app: Services, c: Call) -> s.WorkingDeletedOut:
    plan_id = _param(c, "plan_id")
    return s.WorkingDeletedOut(deleted_count=app.working.delete_all(c.caller, plan_id), plan_id=plan_id)


def _find_entities(app: Services, c: Call) -> s.GraphEntitiesOut:
    return s.GraphEntitiesOut(entities=[s.GraphEntityOut.of(e) for e in app.graph.find_entities(c.caller, c.body)])


def _put_entity(app: Services, c: Call) -> s.GraphEntityOut:
    return s.GraphEntityOut.of(app.graph.put_entity(c.caller, c.body))


def _delete_entity(app: Services, c: Call) -> None:
    app.graph.delete_entity(c.caller, c.query)


def _put_relation(app: Services, c: Call) -> s.GraphRelationOut:
    edge = app.graph.put_relation(c.caller, c.body)
    return s.GraphRelationOut(namespace=list(edge.namespace), source=edge.source_id, type=edge.type,
                              target=edge.target_id, valid_from=edge.valid_from, valid_to=edge.valid_to)


def _delete_relation(app: Services, c: Call) -> None:
    app.graph.delete_relation(c.caller, c.query)


def _related(app: Services, c: Call) -> s.RelatedOut:
    return s.RelatedOut.of(app.graph.related(c.caller, c.body))


def _path(app: Services, c: Call) -> s.PathOut:
    return s.PathOut.of(app.graph.path(c.caller, c.body))


def _neighbours(app: Services, c: Call) -> s.NeighboursOut:
    return s.NeighboursOut.of(app.graph.neighbours(c.caller, c.body))


def _integrity_scan(app: Services, c: Call) -> s.IntegrityScanOut:
    return s.IntegrityScanOut(removed=app.graph.integrity_scan(c.caller))


def _restore(app: Services, c: Call) -> s.RestoreOut:
    return s.RestoreOut.of(app.restore.restore(c.caller, c.body))


def _reflect(app: Services, c: Call) -> s.ReflectOut:
    return s.ReflectOut.of(app.reflection.reflect(c.caller, c.body))


def _profile(app: Services, c: Call) -> s.ProfileOut:
    return s.ProfileOut.of(app.profiles.get(c.caller, c.query))


def _start_export(app: Services, c: Call) -> Response:
    return Response(202, ts.TransferJobOut.of(app.exports.start(c.caller, c.body)))


def _export_status(app: Services, c: Call) -> ts.TransferJobOut:
    return ts.TransferJobOut.of(app.exports.status(c.caller, c.path["id"]))


def _export_part(app: Services, c: Call) -> ts.ExportPartOut:
    data, parts = app.exports.part(c.caller, c.path["id"], c.query.index)
    return ts.ExportPartOut(index=c.query.index, parts=parts, data=base64.b64encode(data).decode("ascii"))


def _create_import(app: Services, c: Call) -> Response:
    return Response(201, ts.TransferJobOut.of(app.imports.create(c.caller, c.body)))


def _import_part(app: Services, c: Call) -> None:
    app.imports.put_part(c.caller, c.path["id"], c.body)


def _start_import(app: Services, c: Call) -> Response:
    return Response(202, ts.TransferJobOut.of(app.imports.start(c.caller, c.path["id"], c.body)))


def _import_status(app: Services, c: Call) -> ts.TransferJobOut:
    return ts.TransferJobOut.of(app.imports.status(c.caller, c.path["id"]))


def _store_put_item(app: Services, c: Call) -> None:
    app.langgraph_store.put_item(c.caller, c.body)


def _store_get_item(app: Services, c: Call) -> lgs.StoreItemOrNullOut:
    return lgs.StoreItemOrNullOut.of(app.langgraph_store.get_item(c.caller, c.query))


def _store_delete_item(app: Services, c: Call) -> None:
    app.langgraph_store.delete_item(c.caller, c.body)


def _store_search_items(app: Services, c: Call) -> lgs.StoreSearchOut:
    return lgs.StoreSearchOut.of(app.langgraph_store.search_items(c.caller, c.body, request_id=c.request.request_id))


def _store_list_namespaces(app: Services, c: Call) -> lgs.StoreNamespacesOut:
    found = app.langgraph_store.list_namespaces(c.caller, c.body)
    return lgs.StoreNamespacesOut(namespaces=[list(ns) for ns in found])


@cache
def _openapi_json() -> tuple[bytes, str]:
    """The document and its ETag, built once: the route table never changes, and a build takes
    tens of milliseconds."""
    body = json.dumps(openapi_document(ROUTES), separators=(",", ":"), ensure_ascii=False).encode()
    return body, f'"{hashlib.sha256(body).hexdigest()[:32]}"'


def _openapi(app: Services, c: Call) -> Response:
    body, etag = _openapi_json()
    if _matches(c.request.headers.get("if-none-match"), etag):
        return Response(304, None, {"etag": etag})
    return Response(200, body, {"content-type": "application/json", "etag": etag})


def _matches(if_none_match: str | None, etag: str) -> bool:
    """Whether an `If-None-Match` header names `etag` (weakly compared, as RFC 9110 asks) or is `*`."""
    tags = (tag.strip() for tag in (if_none_match or "").split(","))
    return any(tag == "*" or tag.removeprefix("W/") == etag for tag in tags)


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
          _remember, body=s.RememberBody, response=s.RememberOut, also=((202, s.RememberAcceptedOut),)),
    Route("POST", "/v1/memories/extract", "Learn typed memories from a conversation, each consolidated as remember "
          "does", _extract, body=s.ExtractBody, response=s.ExtractOut, also=((202, s.ExtractQueuedOut),)),
    Route("POST", "/v1/memories/feedback", "Feedback on a typed memory: useful raises its importance; wrong or "
          "outdated supersede it", _feedback, body=s.FeedbackBody, response=s.FeedbackOut),
    Route("GET", "/v1/memories/namespaces", "List namespaces", _list_namespaces, query=ListNamespaces,
          response=s.NamespacesOut),
    Route("GET", "/v1/memories/events", "The event timeline, oldest first", _events, query=EventsQuery,
          response=s.EventsOut),
    Route("GET", "/v1/memories/history", "Every version of one memory, newest first", _history,
          query=HistoryQuery, response=s.HistoryOut),
    Route("GET", "/admin/v1/memories/policies", "The tenant's policy bundle", _get_policies,
          response=s.PoliciesOut),
    Route("PUT", "/admin/v1/memories/policies", "Replace the tenant's policy bundle (dry_run: only check it)",
          _put_policies, query=PutPoliciesOptions, body=s.PoliciesBody, response=s.PutPoliciesOut,
          if_match="bundle"),
    Route("GET", "/admin/v1/memories/index/status", "Vector indexing backlog", _index_status,
          response=s.IndexStatusOut),
    Route("POST", "/admin/v1/memories/index/trigger", "Run one indexing cycle now", _index_trigger,
          response=s.IndexTriggerOut),
    Route("POST", "/admin/v1/memories/index/retry", "Send quarantined memories to the indexer again", _index_retry,
          body=s.IndexRetryBody, response=s.IndexRetryOut, status=202),
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
          body=s.UpdateSessionBody, response=s.SessionOut, if_match="number"),
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
    Route("POST", "/v1/memory/task-context", "Save a worker's task context (seed 003)", _create_task_context,
          body=CreateTaskContext, response=s.TaskContextCreatedOut, status=201),
    Route("GET", "/v1/memory/task-context/by-subtask/{subtask_id}", "The task context holding a sub-task",
          _task_context_by_subtask, response=s.TaskContextOut),
    Route("GET", "/v1/memory/task-context/{task_id}", "A task context", _get_task_context,
          response=s.TaskContextOut),
    Route("PUT", "/v1/memory/task-context/{task_id}", "Change some fields of a task context (If-Match: version)",
          _put_task_context, body=UpdateTaskContext, response=s.TaskContextOut, if_match="number"),
    Route("DELETE", "/v1/memory/task-context/{task_id}", "Delete a task context (idempotent)", _delete_task_context,
          status=204),
    Route("POST", "/v1/memory/task-context/{task_id}/sub-tasks", "Add and remove sub-tasks atomically",
          _change_sub_tasks, body=ChangeSubTasks, response=s.SubTasksOut),
    Route("POST", "/v1/memory/plans", "Create a plan", _create_plan, body=CreatePlan, response=s.PlanOut,
          status=201),
    Route("GET", "/v1/memory/plans", "The caller's plans, newest first", _list_plans, query=ListPlans,
          response=s.PlansOut),
    Route("GET", "/v1/memory/plans/{plan_id}", "A plan", _get_plan, response=s.PlanOut),
    Route("PUT", "/v1/memory/plans/{plan_id}", "Change a plan's status, state or goal_data (If-Match: version)",
          _put_plan, body=UpdatePlan, response=s.PlanOut, if_match="number"),
    Route("DELETE", "/v1/memory/plans/{plan_id}", "Delete a plan and its working memory (idempotent)",
          _delete_plan, status=204),
    Route("PUT", "/v1/memory/working/{plan_id}/{key}", "Set a working-memory value (If-Match: version)", _put_working,
          body=PutWorking, response=s.WorkingValueOut, if_match="number"),
    Route("GET", "/v1/memory/working/{plan_id}/{key}", "A working-memory value", _get_working,
          response=s.WorkingValueOut),
    Route("DELETE", "/v1/memory/working/{plan_id}/{key}", "Delete a working-memory value (404 when absent)",
          _delete_working, status=204),
    Route("GET", "/v1/memory/working/{plan_id}", "A plan's working-memory values, by key, a page at a time",
          _list_working, query=ListWorking, response=s.WorkingValuesOut),
    Route("DELETE", "/v1/memory/working/{plan_id}", "Delete a plan's working memory", _delete_all_working,
          response=s.WorkingDeletedOut),
    Route("POST", "/v1/graph/entities/find", "Knowledge-graph entities by name", _find_entities,
          body=FindEntities, response=s.GraphEntitiesOut),
    Route("PUT", "/v1/graph/entities", "Write an entity explicitly", _put_entity, body=PutEntity,
          response=s.GraphEntityOut),
    Route("DELETE", "/v1/graph/entities", "Delete an explicitly written entity and its explicit relations "
          "(idempotent)", _delete_entity, query=EntityRef, status=204),
    Route("PUT", "/v1/graph/relations", "Write a relation between two existing entities", _put_relation,
          body=PutRelation, response=s.GraphRelationOut),
    Route("DELETE", "/v1/graph/relations", "Delete an explicitly written relation (idempotent)", _delete_relation,
          query=RelationRef, status=204),
    Route("POST", "/v1/graph/related", "Memories related to an entity or a memory, nearest first", _related,
          body=RelatedQuery, response=s.RelatedOut),
    Route("POST", "/v1/graph/path", "The shortest path between two entities or memories", _path, body=PathQuery,
          response=s.PathOut),
    Route("POST", "/v1/graph/neighbours", "An entity's relations, each with the entity at its other end, a page "
          "at a time", _neighbours, body=NeighboursQuery, response=s.NeighboursOut),
    Route("POST", "/admin/v1/graph/integrity-scan", "Remove orphaned graph rows of the tenant", _integrity_scan,
          response=s.IntegrityScanOut),
    # Reflection, archive and profile (issue 24).
    Route("POST", "/v1/memories/restore", "Restore an archived typed memory", _restore, body=s.RestoreBody,
          response=s.RestoreOut),
    Route("GET", "/v1/memory/profile", "The caller's standing profile: their most important current preferences "
          "and facts, within a token budget", _profile, query=ProfileQuery, response=s.ProfileOut),
    Route("POST", "/admin/v1/memories/reflect", "Run reflection now over one user's memories (admin)", _reflect,
          body=s.ReflectBody, response=s.ReflectOut),
    # Erasing a user (issue 26).
    Route("DELETE", "/admin/v1/users/{user_id}", "Erase everything of one user of the tenant (admin; resumable: "
          "202 while pages remain, DELETE again to continue)", _erase_user, response=s.ErasureReceiptOut,
          also=((202, s.ErasureReceiptOut),)),
    Route("GET", "/admin/v1/users/{user_id}/erasure", "The receipt of the user's last erasure (admin)", _erasure,
          response=s.ErasureReceiptOut),
    # Export and import (issue 26, docs/export-format.md).
    Route("POST", "/admin/v1/exports", "Start exporting the tenant, a namespace prefix or a user (admin)",
          _start_export, body=StartExport, response=ts.TransferJobOut, status=202),
    Route("GET", "/admin/v1/exports/{id:uuid}", "An export job's progress", _export_status,
          response=ts.TransferJobOut),
    Route("GET", "/admin/v1/exports/{id:uuid}/parts", "A part of a finished export's file", _export_part,
          query=ExportPartQuery, response=ts.ExportPartOut),
    Route("POST", "/admin/v1/imports", "Create an import job to upload a file into (admin)", _create_import,
          body=CreateImport, response=ts.TransferJobOut, status=201),
    Route("PUT", "/admin/v1/imports/{id:uuid}/parts", "Upload a part of the file to import", _import_part,
          body=ImportPart, status=204),
    Route("POST", "/admin/v1/imports/{id:uuid}/start", "Open the uploaded file and start importing it",
          _start_import, body=StartImport, response=ts.TransferJobOut, status=202),
    Route("GET", "/admin/v1/imports/{id:uuid}", "An import job's progress and what it did", _import_status,
          response=ts.TransferJobOut),
    # The LangGraph Platform store API (issue 28): LangGraph's shapes on /v1/memories' services.
    Route("PUT", "/store/items", "LangGraph store: put an item (ttl in minutes)", _store_put_item,
          body=StorePutItem, status=204),
    Route("GET", "/store/items", "LangGraph store: an item, or null", _store_get_item, query=StoreGetItem,
          response=lgs.StoreItemOrNullOut),
    Route("DELETE", "/store/items", "LangGraph store: delete an item (idempotent)", _store_delete_item,
          body=StoreDeleteItem, status=204),
    Route("POST", "/store/items/search", "LangGraph store: search by filter, or by a query (hybrid)",
          _store_search_items, body=StoreSearchItems, response=lgs.StoreSearchOut),
    Route("POST", "/store/namespaces", "LangGraph store: list namespaces", _store_list_namespaces,
          body=StoreListNamespaces, response=lgs.StoreNamespacesOut),
    Route("GET", "/v1/identity", "Who the service takes the caller to be", _identity, response=s.IdentityOut),
    Route("GET", "/health", "Health of each component", _health, response=s.HealthOut, public=True,
          also=((503, s.HealthOut),)),
    Route("GET", "/openapi.json", "This document", _openapi, public=True),
    Route("GET", "/metrics", "Seed 001's metrics, in Prometheus' text format (memsvc serve)", _metrics,
          public=True, content_type="text/plain; version=0.0.4", also=((404, s.ErrorOut),)),
)


def build_router(services: Services, identify: Callable[[dict[str, Any]], Caller]) -> Router:
    """`identify` reads the caller from the authorizer's part of the event (`memsvc.api.identity`)."""
    return Router(ROUTES, services, identify, services.metrics)
