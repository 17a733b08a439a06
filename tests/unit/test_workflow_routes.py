"""Workflow path parameters are decoded exactly once, whichever transport delivered them."""

from __future__ import annotations

import json

from memsvc.core.models import Caller
from memsvc.local_server import build_event
from memsvc.service.task_contexts import CreateTaskContext

ALICE = Caller(tenant_id="acme", user_id="alice")
CLAIMS = {"jwt": {"claims": {"sub": "alice", "tenant_id": "acme"}, "scopes": None}}


def _get(local_app, raw_path: str, path_parameters: dict[str, str] | None = None) -> dict:
    event = build_event(method="GET", path=raw_path, raw_query="", headers={}, body=None, source_ip="127.0.0.1",
                        authorizer=CLAIMS)
    if path_parameters is not None:
        event["pathParameters"] = path_parameters
    answer = local_app.router.handle(event)
    return {"status": answer["statusCode"], **(json.loads(answer["body"]) if answer["body"] else {})}


def test_the_raw_path_is_decoded_once(local_app):
    local_app.services.task_contexts.create(ALICE, CreateTaskContext(task_id="a%2Fb", event_type="e"))
    local_app.services.task_contexts.create(ALICE, CreateTaskContext(task_id="a/b", event_type="e"))
    assert _get(local_app, "/v1/memory/task-context/a%252Fb")["task_id"] == "a%2Fb"
    assert _get(local_app, "/v1/memory/task-context/a%2Fb")["task_id"] == "a/b"
    assert _get(local_app, "/v1/memory/task-context/%FF")["status"] == 400


def test_api_gateways_decoded_path_parameters_win(local_app):
    """API Gateway decodes `a%252Fb` to `a%2Fb` in the path and in `pathParameters`: the id is
    `a%2Fb`, not the `a/b` a second decoding would make of it."""
    local_app.services.task_contexts.create(ALICE, CreateTaskContext(task_id="a%2Fb", event_type="e"))
    got = _get(local_app, "/v1/memory/task-context/a%2Fb", {"task_id": "a%2Fb"})
    assert got["task_id"] == "a%2Fb"
