"""The event timeline's pure parts: kinds, stamps, and the published event's shape.

The published form (EventBridge, the local JSONL file) names the change and never carries the
value or the attributes: see docs/api.md, "The event timeline", and docs/events.md.
"""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import quote

from memsvc.core.models import ACTION_REASONS, TimelineEvent, to_rfc3339

__all__ = ["ScanTooWide", "SOURCE", "DETAIL_TYPES", "ACTION_DETAIL_TYPES", "ACTION_REASONS", "KINDS", "VERSION_KINDS", "detail_type", "next_stamp", "event_detail", "namespace_path", "put_events_entry"]

SOURCE = "memsvc"


class ScanTooWide(Exception):
    """An `EventLog.scan` given `max_rows` would read more rows than that (events of other kinds
    or namespaces sharing its partition or index range included): it stops instead of going on."""

    def __init__(self, max_rows: int) -> None:
        super().__init__(f"the scan would read more than {max_rows} timeline rows")
        self.max_rows = max_rows

DETAIL_TYPES = {
    "add": "Memory Added",
    "update": "Memory Updated",
    "delete": "Memory Deleted",
    "expired": "Memory Expired",
    # The indexer set the version aside (a poison item: over its budget, or it failed on its own);
    # it stays readable by key and filter, and an admin can retry it (docs/api.md, "Poison items").
    "index_failed": "memory.index_failed",
    # Recorded by the service itself, not from a change (issue 24): a candidate an extraction
    # found, before consolidation decides it; an extraction that failed and will be retried.
    "candidate": "memory.candidate",
    "error": "memory.error",
}
KINDS = frozenset(DETAIL_TYPES)
# The kinds that write a version of a key (a memory's history); the others tell of a version.
VERSION_KINDS = frozenset({"add", "update", "delete", "expired"})
# A version remember or feedback wrote is published under its outcome instead (API-AGENT.md), with
# the change's `kind` (add/update) still in the detail.
ACTION_DETAIL_TYPES = {
    "created": "memory.created",
    "updated": "memory.updated",
    "superseded": "memory.superseded",
    # `POST /v1/memories/feedback`: one detail-type, the signal in the detail's `action`.
    "feedback_useful": "memory.feedback",
    "feedback_wrong": "memory.feedback",
    "feedback_outdated": "memory.feedback",
    # Learning from conversations (issue 24): a candidate or a near-duplicate merged into this
    # memory, and reflection's changes. Each carries its reason (`ACTION_REASONS`).
    "merged": "memory.merged",
    "reflect_superseded": "memory.superseded",
    "importance_recomputed": "memory.updated",
    "archived": "memory.archived",
    "restored": "memory.restored",
    "duplicate_superseded": "memory.superseded",
}


def next_stamp(changed_at_us: int, last_stamp_us: int | None) -> int:
    """The stamp of the tenant's next event: its own time, unless that would not be after the
    last stamp (a change recorded late, or two in one microsecond)."""
    return changed_at_us if last_stamp_us is None or changed_at_us > last_stamp_us else last_stamp_us + 1


def event_detail(event: TimelineEvent) -> dict[str, Any]:
    """The event as published: what changed, when, never the value or the attributes."""
    assert event.occurred_at is not None, "only recorded events are published"
    return {
        "id": event.id,
        "tenant": event.tenant,
        "namespace": list(event.namespace),
        "namespace_path": namespace_path(event.namespace),
        "key": event.key,
        "memory_id": event.memory_id,
        "version": event.version,
        "kind": event.kind,
        "occurred_at": to_rfc3339(event.occurred_at),
        "expires_at": to_rfc3339(event.expires_at),
        **({"action": event.action} if event.action else {}),
        **({"reason": event.reason} if event.reason else {}),
    }


def detail_type(event: TimelineEvent) -> str:
    return ACTION_DETAIL_TYPES[event.action] if event.action else DETAIL_TYPES[event.kind]


def namespace_path(namespace) -> str:
    """Each segment percent-encoded and followed by "/": `user/alice/notes/`. EventBridge matches
    arrays element by element, so a rule can only follow a subtree by a string prefix; the
    trailing "/" makes `user/alice/` match ["user", "alice", ...] and never ["user", "alicea"]."""
    return "".join(quote(segment, safe="") + "/" for segment in namespace)


def put_events_entry(event: TimelineEvent, bus_name: str) -> dict[str, Any]:
    """One `PutEvents` entry for the environment's bus."""
    assert event.occurred_at is not None
    return {
        "Source": SOURCE,
        "DetailType": detail_type(event),
        "Detail": json.dumps(event_detail(event), separators=(",", ":"), ensure_ascii=False),
        "Time": event.occurred_at,
        "EventBusName": bus_name,
    }

