"""The reflection function (functions/reflection.py) on moto: the schedule's input names the
tenants; each invocation reflects their due users, and a user is due again only after the
tenant's reflection_interval_hours."""

from __future__ import annotations

from functions import reflection, runtime
from memsvc.core.models import Caller
from memsvc.service.remember import RememberMemory
from tests.fakes.aws_stack import LambdaContext

ALICE = Caller(tenant_id="acme", user_id="alice")
A = "The user prefers Python for scripting tasks at work"
B = "The user prefers Python for scripting tasks at work daily"


def test_reflects_the_due_users_of_the_named_tenants(stack):
    runtime.set_app(stack.app)
    try:
        remember = stack.app.services.remember
        remember.remember(ALICE, RememberMemory(content=A, consolidate=False))
        stack.clock.advance(1)
        remember.remember(ALICE, RememberMemory(content=B, consolidate=False))
        stack.drain()
        assert reflection.handler({"tenants": ["globex"]}, LambdaContext()) == {"reflected": 0}
        assert reflection.handler({"tenants": ["acme"]}, LambdaContext()) == {"reflected": 1}
        merged = [m for m in stack.app.services.search.search(ALICE, _everything()) if not m.value["superseded_by"]]
        assert [m.value["content"] for m in merged] == [B]
        assert reflection.handler({"tenants": ["acme"]}, LambdaContext()) == {"reflected": 0}  # not due yet
        stack.clock.advance(25 * 3600)
        assert reflection.handler({"tenants": ["acme"]}, LambdaContext()) == {"reflected": 1}
        assert reflection.handler({}, LambdaContext()) == {"reflected": 0}  # no tenant named, nothing done
    finally:
        runtime.set_app(None)


def _everything():
    from memsvc.service.search import SearchQuery

    return SearchQuery(namespace_prefix=["user", "alice"], limit=10)
