"""`MemsvcClient` covers the route table: every (method, path) of API.md and API-AGENT.md has a
call that sends it, as the TypeScript client's `covers every route` test asks of that client. A
route the server gains fails here until it is added below (and to the client).

Left out: `/store/...`, LangGraph's store API over HTTP, for stores in other languages (the
TypeScript client's LangGraph.js store). Python's LangGraph store, `MemsvcStore`, is one itself,
over the `/v1/memories` routes."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import httpx
import pytest

from memsvc.api.routes import ROUTES
from memsvc_client import MemsvcClient, MemsvcStore

NS = ["user", "alice", "notes"]
UUID = "0b5a1b2c-3d4e-4f50-8a6b-7c8d9e0f1a2b"

CALLS: dict[str, Callable[[MemsvcClient], Any]] = {
    "PUT /v1/memories": lambda c: c.put(NS, "k", {"text": "hi"}),
    "GET /v1/memories": lambda c: c.get(NS, "k"),
    "DELETE /v1/memories": lambda c: c.delete(NS, "k"),
    "POST /v1/memories/search": lambda c: c.search(NS, query="hi"),
    "POST /v1/memories/recall": lambda c: c.recall("hi"),
    "POST /v1/memories/remember": lambda c: c.remember("I like tea"),
    "POST /v1/memories/extract": lambda c: c.extract([{"role": "user", "content": "I like tea"}]),
    "POST /v1/memories/feedback": lambda c: c.feedback(UUID, "useful"),
    "POST /v1/memories/restore": lambda c: c.restore(UUID),
    "GET /v1/memories/namespaces": lambda c: c.list_namespaces(prefix=["user"]),
    "GET /v1/memories/events": lambda c: c.events(["user"]),
    "GET /v1/memories/history": lambda c: c.history(NS, "k"),
    "GET /v1/memory/profile": lambda c: c.profile(token_budget=200),
    "GET /v1/identity": lambda c: c.identity(),
    "GET /health": lambda c: c.health(),
    "GET /openapi.json": lambda c: c.openapi(),
    "GET /metrics": lambda c: c.metrics(),
    "GET /admin/v1/memories/policies": lambda c: c.get_policies(),
    "PUT /admin/v1/memories/policies": lambda c: c.put_policies({"authz.rego": "package x"}),
    "GET /admin/v1/memories/index/status": lambda c: c.index_status(),
    "POST /admin/v1/memories/index/trigger": lambda c: c.index_trigger(),
    "POST /admin/v1/memories/index/retry": lambda c: c.index_retry([UUID]),
    "GET /admin/v1/memories/settings": lambda c: c.get_settings(),
    "PUT /admin/v1/memories/settings": lambda c: c.put_settings(max_depth=10),
    "DELETE /admin/v1/memories/{id}": lambda c: c.force_delete(UUID),
    "POST /admin/v1/memories/reflect": lambda c: c.reflect("alice"),
    "DELETE /admin/v1/users/{user_id}": lambda c: c.erase_user("alice"),
    "GET /admin/v1/users/{user_id}/erasure": lambda c: c.user_erasure("alice"),
    "POST /v1/memory/sessions": lambda c: c.create_session("s1"),
    "GET /v1/memory/sessions": lambda c: c.list_sessions(),
    "GET /v1/memory/sessions/{id}": lambda c: c.get_session("s1"),
    "PUT /v1/memory/sessions/{id}": lambda c: c.update_session("s1", title="t", if_match=1),
    "DELETE /v1/memory/sessions/{id}": lambda c: c.delete_session("s1"),
    "POST /v1/memory/sessions/{id}/messages": lambda c: c.add_message("s1", "user", "hello"),
    "GET /v1/memory/sessions/{id}/messages": lambda c: c.get_messages("s1"),
    "POST /v1/memory/sessions/{id}/close": lambda c: c.close_session("s1"),
    "POST /v1/memory/semantic": lambda c: c.upsert_semantic("tea", external_id="e1"),
    "GET /v1/memory/semantic": lambda c: c.get_semantic(external_id="e1"),
    "DELETE /v1/memory/semantic": lambda c: c.delete_semantic(external_id="e1"),
    "POST /v1/memory/task-context": lambda c: c.store_task_context("t1", "ev"),
    "GET /v1/memory/task-context/by-subtask/{subtask_id}": lambda c: c.get_task_by_subtask("st1"),
    "GET /v1/memory/task-context/{task_id}": lambda c: c.get_task_context("t1"),
    "PUT /v1/memory/task-context/{task_id}": lambda c: c.update_task_context("t1", state={}),
    "DELETE /v1/memory/task-context/{task_id}": lambda c: c.delete_task_context("t1"),
    "POST /v1/memory/task-context/{task_id}/sub-tasks": lambda c: c.change_sub_tasks("t1", add=["a"]),
    "POST /v1/memory/plans": lambda c: c.create_plan("p1", "goal"),
    "GET /v1/memory/plans": lambda c: c.list_plans(status="active"),
    "GET /v1/memory/plans/{plan_id}": lambda c: c.get_plan("p1"),
    "PUT /v1/memory/plans/{plan_id}": lambda c: c.update_plan("p1", status="completed"),
    "DELETE /v1/memory/plans/{plan_id}": lambda c: c.delete_plan("p1"),
    "PUT /v1/memory/working/{plan_id}/{key}": lambda c: c.set_working("p1", "k", 1),
    "GET /v1/memory/working/{plan_id}/{key}": lambda c: c.get_working("p1", "k"),
    "DELETE /v1/memory/working/{plan_id}/{key}": lambda c: c.delete_working("p1", "k"),
    "GET /v1/memory/working/{plan_id}": lambda c: c.list_working("p1"),
    "DELETE /v1/memory/working/{plan_id}": lambda c: c.delete_all_working("p1"),
    "POST /v1/graph/entities/find": lambda c: c.find_entities(["user"], ["Ada"]),
    "PUT /v1/graph/entities": lambda c: c.put_entity(NS, "Ada", "PERSON"),
    "DELETE /v1/graph/entities": lambda c: c.delete_entity(NS, "Ada"),
    "PUT /v1/graph/relations": lambda c: c.put_relation(NS, "Ada", "WORKS_ON", "Engine"),
    "DELETE /v1/graph/relations": lambda c: c.delete_relation(NS, "Ada", "WORKS_ON", "Engine"),
    "POST /v1/graph/related": lambda c: c.related(["user"], "Ada"),
    "POST /v1/graph/path": lambda c: c.path(["user"], "Ada", {"namespace": NS, "key": "k"}),
    "POST /v1/graph/neighbours": lambda c: c.neighbours(["user"], "Ada"),
    "POST /admin/v1/graph/integrity-scan": lambda c: c.graph_integrity_scan(),
    "POST /admin/v1/exports": lambda c: c.start_export(),
    "GET /admin/v1/exports/{id}": lambda c: c.export_status(UUID),
    "GET /admin/v1/exports/{id}/parts": lambda c: c.export_part(UUID, 0),
    "POST /admin/v1/imports": lambda c: c.create_import(),
    "PUT /admin/v1/imports/{id}/parts": lambda c: c.put_import_part(UUID, 0, b"\0"),
    "POST /admin/v1/imports/{id}/start": lambda c: c.start_import(UUID, parts=1),
    "GET /admin/v1/imports/{id}": lambda c: c.import_status(UUID),
}


def _template(path: str) -> re.Pattern[str]:
    return re.compile("^" + re.sub(r"\\\{[^}]+\\\}", "[^/]+", re.escape(path)) + "$")


def test_every_route_of_the_table_has_a_call():
    table = {f"{r.method} {r.path.replace(':uuid', '')}" for r in ROUTES if not r.path.startswith("/store/")}
    assert set(CALLS) == table


@pytest.mark.parametrize("route", sorted(CALLS))
def test_the_call_sends_its_route(route):
    sent: list[httpx.Request] = []

    def answer(request: httpx.Request) -> httpx.Response:
        sent.append(request)
        if request.url.path == "/metrics":
            return httpx.Response(200, text="memory_operations_total 1\n", headers={"content-type": "text/plain"})
        return httpx.Response(200, json={"items": [], "namespaces": [], "value": {}, "updated_at": None})

    store = MemsvcStore("http://memsvc.test", "token", transport=httpx.MockTransport(answer), max_retries=0)
    with MemsvcClient(store=store) as client:
        try:
            answered = CALLS[route](client)
        except (KeyError, ValueError):  # an answer shaped for another route: what was sent counts
            answered = None
    method, path = route.split(" ", 1)
    assert [(r.method, bool(_template(path).match(r.url.path))) for r in sent][:1] == [(method, True)]
    if route == "GET /metrics":
        assert answered == "memory_operations_total 1\n"  # the text, not JSON
