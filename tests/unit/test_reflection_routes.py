"""The reflection, restore and profile routes through the router (local backend, in process):
bodies and query parameters parse, the answers have their documented shapes, and another user or
tenant gets 403, 404 or an empty answer."""

from __future__ import annotations

import json

from memsvc.local_server import build_event
from memsvc.service.remember import RememberMemory
from tests.conftest import alice


def _call(local_app, method: str, path: str, *, sub: str = "alice", tenant: str = "acme", roles: str | None = None,
          body: dict | None = None, query: str = "") -> tuple[int, dict]:
    claims = {"sub": sub, "tenant_id": tenant, **({"roles": roles} if roles else {})}
    event = build_event(method=method, path=path, raw_query=query, headers={"content-type": "application/json"},
                        body=json.dumps(body).encode() if body is not None else None, source_ip="127.0.0.1",
                        authorizer={"jwt": {"claims": claims, "scopes": None}})
    answer = local_app.router.handle(event)
    return answer["statusCode"], json.loads(answer["body"]) if answer["body"] else {}


def test_reflect_profile_and_restore_routes(local_app):
    remember = local_app.services.remember
    memory = remember.remember(alice(), RememberMemory(content="The user prefers green tea", type="preference")).memory
    local_app.workers.run_cycle("indexer")

    assert _call(local_app, "POST", "/admin/v1/memories/reflect", body={"user_id": "alice"})[0] == 403
    status, run = _call(local_app, "POST", "/admin/v1/memories/reflect", sub="root", roles="admin", body={"user_id": "alice"})
    assert status == 200 and run["examined"] == 1 and run["done"] is True and run["next_cursor"] is None
    status, other = _call(local_app, "POST", "/admin/v1/memories/reflect", sub="root", tenant="globex", roles="admin",
                          body={"user_id": "alice"})
    assert (status, other["examined"]) == (200, 0)
    assert _call(local_app, "POST", "/admin/v1/memories/reflect", sub="root", roles="admin", body={})[0] == 400

    status, profile = _call(local_app, "GET", "/v1/memory/profile")
    assert status == 200 and [i["content"] for i in profile["items"]] == ["The user prefers green tea"]
    assert set(profile["items"][0]) == {"id", "key", "namespace", "content", "type", "category", "importance"}
    assert profile["token_count"] > 0 and profile["user_id"] == "alice"
    assert _call(local_app, "GET", "/v1/memory/profile", query="token_budget=1")[1]["items"] == []
    assert _call(local_app, "GET", "/v1/memory/profile", query="token_budget=0")[0] == 400
    assert _call(local_app, "GET", "/v1/memory/profile", sub="bob")[1]["items"] == []
    assert _call(local_app, "GET", "/v1/memory/profile", tenant="globex")[1]["items"] == []

    status, restored = _call(local_app, "POST", "/v1/memories/restore", body={"id": memory.id})
    assert status == 200 and restored["restored"] is False and restored["memory"]["id"] == memory.id
    assert _call(local_app, "POST", "/v1/memories/restore", sub="bob", body={"id": memory.id})[0] == 404
    assert _call(local_app, "POST", "/v1/memories/restore", tenant="globex", body={"id": memory.id})[0] == 404
    assert _call(local_app, "POST", "/v1/memories/restore", body={"id": "nope"})[0] == 400
