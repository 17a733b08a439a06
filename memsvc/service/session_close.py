"""Closing a session: seed 001's promotion, then the session's retention (API-AGENT.md
"Agent workflow state").

The session layer's typed memories (its namespace exactly, not its messages) with `importance
>= promotion_threshold` are copied, PII redacted (`core.pii`), into the target layer:
`project` when the session's metadata names a `project_id`, else the tenant's `promote_to`
(`user`, or `agent` for a session with an agent). A memory marked `sensitive` or `private` (in
its value, its `metadata`, its attributes or its tags) is not: it counts in `blocked` and in the metric
`memory.promotion.blocked`. So does a memory the target layer refuses: a `project_id` naming a
project the session's user may not write, or a governance policy uploaded since the memory was
written. Such a session still closes. The copy's key is derived from the session and the source key, so
a second close finds its copies there and promotes nothing twice, not even a copy deleted since.
"""

from __future__ import annotations

import hashlib
import json
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from memsvc.core.errors import Conflict, Forbidden, PolicyViolation
from memsvc.core.models import Caller, StoredItem, to_rfc3339
from memsvc.core.pii import redact_memory_fields
from memsvc.core.sessions import SessionRecord, session_namespace
from memsvc.core.typed_memory import CONTENT_FIELDS, TypedMemory
from memsvc.ports import BusEvents, Clock, ItemStore, Metrics
from memsvc.service.access import Access
from memsvc.service.memories import Memories
from memsvc.service.sealing import Sealer
from memsvc.service.sessions import Sessions
from memsvc.service.tenant_config import SettingsRegistry
from memsvc.service.workflow_rules import notify

__all__ = ["CloseSession", "Closed", "BLOCKED_METRIC", "CLOSED_DETAIL_TYPE"]

BLOCKED_METRIC = "memory.promotion.blocked"
CLOSED_DETAIL_TYPE = "memsvc.session.closed"
_MARKS = ("sensitive", "private")


@dataclass(frozen=True)
class Closed:
    promoted: int
    blocked: int
    deleted: bool  # the session and its data are gone now (auto-delete with a retention of 0 days)
    delete_after: str | None  # RFC 3339: when auto-delete removes them
    extraction_pending: bool  # messages left to extract (the model failed, or a long backlog): a job finishes it


class CloseSession:
    def __init__(self, *, sessions: Sessions, items: ItemStore, memories: Memories, sealer: Sealer, access: Access,
                 settings: SettingsRegistry, clock: Clock, metrics: Metrics, bus: BusEvents | None,
                 extract_at_close: Callable[[Caller, SessionRecord], bool] = lambda caller, record: True) -> None:
        self._sessions = sessions
        self._extract_at_close = extract_at_close  # `Extraction.at_close`
        self._items = items
        self._memories = memories
        self._sealer = sealer
        self._access = access
        self._settings = settings
        self._clock = clock
        self._metrics = metrics
        self._bus = bus

    def close(self, caller: Caller, session_id: str) -> Closed:
        record = self._sessions.record(caller, session_id)
        settings = self._settings.get(caller.tenant_id)
        # Before promotion, as issue 24 asks (what it learns goes to the user layer itself); False:
        # messages are left (the model failed, or a long backlog), kept until a job extracts them.
        extracted = self._extract_at_close(caller, record)
        promoted = blocked = 0
        if settings.promote_important:
            target = self._target(record, settings.promote_to)
            promoted, blocked = self._promote(caller, record, target, settings.promotion_threshold)
        if blocked:
            self._metrics.count(BLOCKED_METRIC, caller.tenant_id, blocked)
        delete_after = None
        if settings.session_auto_delete:
            delete_after = (record.closed_at or self._clock.now()) + timedelta(days=settings.session_retention_days)
        closed = self._sessions.mark_closed(caller, session_id, delete_after=delete_after)
        deleted = False
        if delete_after is not None and delete_after <= self._clock.now() and extracted:
            self._sessions.remove(caller.tenant_id, caller.user_id, session_id)
            deleted = True
        notify(self._bus, CLOSED_DETAIL_TYPE, {
            "id": str(uuid.uuid5(uuid.NAMESPACE_URL, json.dumps(
                ["session.closed", caller.tenant_id, caller.user_id, session_id, closed.version]))),
            "tenant": caller.tenant_id, "user_id": caller.user_id, "session_id": session_id,
            "agent_id": record.agent_id, "closed_at": to_rfc3339(closed.closed_at), "promoted": promoted,
            "blocked": blocked, "deleted": deleted,
            "delete_after": to_rfc3339(delete_after) if delete_after else None,
        })
        return Closed(promoted=promoted, blocked=blocked, deleted=deleted,
                      delete_after=to_rfc3339(delete_after) if delete_after and not deleted else None,
                      extraction_pending=not extracted)

    def _target(self, record: SessionRecord, promote_to: str) -> tuple[str, ...]:
        project_id = self._sessions.open_metadata(record).get("project_id")
        if isinstance(project_id, str) and project_id:
            return ("project", project_id)
        if promote_to == "agent" and record.agent_id:
            return ("user", record.user_id, "agents", record.agent_id)
        return ("user", record.user_id, "memories")

    def _promote(self, caller: Caller, record: SessionRecord, target: tuple[str, ...],
                 threshold: float) -> tuple[int, int]:
        source_ns = session_namespace(record.user_id, record.session_id)
        candidates: list[tuple[StoredItem, TypedMemory]] = []
        blocked = 0
        for item in self._sessions.items_of(caller.tenant_id, source_ns):
            if not item.is_live(self._clock.now()):
                continue
            value, attributes = self._sealer.open_item(item)
            memory = TypedMemory.from_value(value or {})
            if memory is None or memory.superseded or memory.importance < threshold:
                continue
            if _marked(value or {}, attributes):
                blocked += 1
            else:
                candidates.append((item, memory))
        if not candidates:
            return 0, blocked
        try:
            policies = self._access.authorize(caller, "write", target, None)
            self._access.namespace_to_write(caller, target)
        except Forbidden:
            # The session names a project its user may not write: closing must still work, and
            # nothing goes where the caller could not have put it.
            return 0, blocked + len(candidates)
        promoted = 0
        for item, memory in candidates:
            key = _promoted_key(record, item.key)
            copy = redact_memory_fields(TypedMemory(
                content=memory.content, type=memory.type, kind=memory.kind, importance=memory.importance,
                pinned=memory.pinned, tags=memory.tags, category=memory.category, source=memory.source,
                promoted_from={"namespace": list(item.namespace), "key": item.key, "id": item.id,
                               "session_id": record.session_id},
            )).to_value()
            try:
                self._access.govern(caller, target, key, copy, None)
            except PolicyViolation:
                blocked += 1  # a governance bundle uploaded after the memory was written refuses it
                continue
            attrs = policies.extract_attributes(target, key, copy, None, caller.policy_context())
            old = self._items.get(caller.tenant_id, target, key)
            if old is not None:
                continue  # promoted by an earlier close (and maybe deleted or expired since: it stays so)
            try:
                written = self._memories.write_version(caller.tenant_id, target, key, copy, old=old, attributes=None,
                                                       policy_attributes=attrs, index_fields=CONTENT_FIELDS,
                                                       ttl_seconds=None)
            except Conflict:
                continue  # a concurrent close wrote it first
            self._memories.settle([written], sync_index=False)
            promoted += 1
        return promoted, blocked


def _marked(value: dict[str, Any], attributes: dict[str, Any] | None) -> bool:
    """`sensitive: true` or `private: true` in the value, its `metadata` or the attributes, or a
    tag of that name (remember's callers can only mark a memory by its tags)."""
    metadata = value.get("metadata") if isinstance(value.get("metadata"), dict) else {}
    tags = value.get("tags") if isinstance(value.get("tags"), list) else []
    return any(where.get(mark) is True for where in (value, metadata, attributes or {}) for mark in _MARKS) or \
        any(tag in _MARKS for tag in tags)


def _promoted_key(record: SessionRecord, source_key: str) -> str:
    """Derived from the session's lifetime (a deleted session's id can start over) and the source key."""
    lifetime = [record.user_id, record.session_id, to_rfc3339(record.created_at)]
    digest = hashlib.sha256(json.dumps([*lifetime, source_key]).encode()).hexdigest()[:32]
    return f"promoted-{digest}"
