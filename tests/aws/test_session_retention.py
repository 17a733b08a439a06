"""The session retention function (functions/session_retention.py) on moto: it removes the
closed sessions whose retention has passed, with their messages, and nothing else."""

from __future__ import annotations

from functions import runtime, session_retention
from memsvc.core.models import Caller
from memsvc.service.search import SearchQuery
from memsvc.service.sessions import AppendMessage, CreateSession, ListSessions
from memsvc.service.tenant_config import SettingsPatch
from tests.fakes.aws_stack import LambdaContext

ALICE = Caller(tenant_id="acme", user_id="alice")


def test_removes_due_sessions_only(stack):
    runtime.set_app(stack.app)
    try:
        services = stack.app.services
        stack.app.settings.update("acme", SettingsPatch(session_auto_delete=True, session_retention_days=2))
        for session_id in ("old", "kept"):
            services.sessions.create(ALICE, CreateSession(session_id=session_id))
            services.sessions.append(ALICE, session_id, AppendMessage(role="user", content=f"hello from {session_id}"))
        services.close_session.close(ALICE, "old")
        assert session_retention.handler({}, LambdaContext()) == {"handled": 0}
        stack.clock.advance(3 * 86400)
        assert session_retention.handler({}, LambdaContext()) == {"handled": 1}
        listed, _ = services.sessions.list(ALICE, ListSessions())
        assert [s.session_id for s in listed] == ["kept"]
        left = services.search.search(ALICE, SearchQuery(namespace_prefix=["user", "alice", "sessions"]))
        assert [m.namespace[3] for m in left] == ["kept"]
        assert session_retention.handler({}, LambdaContext()) == {"handled": 0}
    finally:
        runtime.set_app(None)
