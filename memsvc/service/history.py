"""`GET /v1/memories/history`: every version of one memory, newest first, from the timeline (the
key's version events, through the event log's per-key index) and the item store (the current row,
which the timeline may not have recorded yet). No copy of the data is kept for it.

Who wrote a version is not recorded anywhere (neither the item row nor the event carries the
caller), so a version has no actor.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any

from pydantic import Field, StrictStr

from memsvc.core.errors import Forbidden, InvalidArgument, NotFound
from memsvc.core.models import Caller, EventKind, StoredItem, TimelineEvent, WriteAction, from_epoch_us, to_epoch_us
from memsvc.core.namespaces import validate_key
from memsvc.core.validation import Command, Cursor, Integer, Namespace
from memsvc.ports import EventLog, ItemStore
from memsvc.service.access import Access
from memsvc.service.sealing import CursorCodec, Sealer

__all__ = ["HistoryQuery", "HistoryVersion", "HistoryPage", "MemoryHistory", "MAX_HISTORY_PAGE"]

MAX_HISTORY_PAGE = 100
_CURSOR_PURPOSE = "history"


class HistoryQuery(Command):
    """`GET /v1/memories/history`."""

    namespace: Namespace = Field(alias="ns", description="One namespace segment; repeat once per segment")
    key: StrictStr = Field(min_length=1, description="The memory's key")
    limit: Integer = Field(20, ge=1, le=MAX_HISTORY_PAGE, description="Page size")
    cursor: Cursor | None = Field(None, description=(
        "The previous page's next_cursor; only a cursor this service gave this tenant for this key (400 otherwise)"))


@dataclass(frozen=True)
class HistoryVersion:
    """One version of the key: the event that wrote it (or the item row, before the timeline has it)."""

    event_id: str
    memory_id: str  # for delete/expired, the memory removed
    version: int
    kind: EventKind
    action: WriteAction | None
    reason: str | None
    occurred_at: datetime  # when the change happened (an imported version: in its source)
    expires_at: datetime | None
    value: dict[str, Any] | None
    attributes: dict[str, Any] | None
    recorded: bool  # False: the current row, not yet on the timeline
    # Its place on the timeline (recorded versions), for cursors: not part of what the version is.
    stamp: datetime | None = field(default=None, compare=False)
    # The next version's (id, version, kind): a version's id is its event's (for add/update, the
    # memory id; for delete, the tombstone's).
    replaced_by: tuple[str, int, str] | None = None

    @property
    def superseded_by(self) -> str | None:
        """A typed memory's `superseded_by` (the key that replaced it), from its value."""
        link = (self.value or {}).get("superseded_by")
        return link if isinstance(link, str) else None


@dataclass(frozen=True)
class HistoryPage:
    versions: list[HistoryVersion]
    next_cursor: str | None  # null on the last page
    # On the last page: the oldest version still held, when it is not version 1 (the earlier ones
    # are past the tenant's retention); None otherwise.
    past_retention_before: int | None
    retention_days: int


class MemoryHistory:
    def __init__(self, *, log_: EventLog, items: ItemStore, sealer: Sealer, cursors: CursorCodec,
                 access: Access) -> None:
        self._log = log_
        self._items = items
        self._sealer = sealer
        self._cursors = cursors
        self._access = access

    def history(self, caller: Caller, q: HistoryQuery) -> HistoryPage:
        """One page of the key's versions, newest first. A caller who may not read the key gets
        the same 404 as for a key never written, so the answer tells nothing about it."""
        ns = self._access.namespace_to_read(caller, q.namespace)
        key = validate_key(q.key)
        tenant = caller.tenant_id
        try:
            self._access.authorize(caller, "read", ns, key)
        except Forbidden:
            raise _not_found(ns, key) from None
        scope = _scope(ns, key)
        if q.cursor is None:
            before, newer = None, None
        else:
            before, newer = self._position(tenant, q.cursor, scope)
        events = self._log.history(tenant, ns, key, before=before, limit=q.limit + 1)
        current: list[HistoryVersion] = []
        gap = False
        if q.cursor is None:
            row = self._items.get(tenant, ns, key)
            # The row is newer than what the timeline holds when it is not the newest event's
            # version (by id: a key re-added after DynamoDB's TTL removed its row starts at
            # version 1 again).
            if row is not None and (not events or row.id != events[0].id):
                current.append(self._of_row(row, events[0] if events else None))
                # More than one write not recorded yet: what lies between is not known here.
                gap = bool(events) and row.version != events[0].version + 1
            if not current and not events:
                raise _not_found(ns, key)
        more = len(current) + len(events) > q.limit
        # Only the page's versions are decrypted (one more event is read to know whether it is the last).
        page = _link(current + [self._of_event(e) for e in events[: q.limit - len(current)]], newer)
        if gap and len(page) > 1:
            page[1] = replace(page[1], replaced_by=None)  # replaced by a version not recorded yet
        next_cursor = self._cursor(tenant, scope, page[-1], events[0]) if more else None
        oldest = page[-1].version if page else None
        return HistoryPage(
            versions=page, next_cursor=next_cursor,
            past_retention_before=oldest if not more and oldest is not None and oldest > 1 else None,
            retention_days=self._access.settings_of(caller).tombstone_retention_days)

    def _of_event(self, e: TimelineEvent) -> HistoryVersion:
        value, attributes = self._sealer.open_item(e)
        assert e.occurred_at is not None
        return HistoryVersion(event_id=e.id, memory_id=e.memory_id, version=e.version, kind=e.kind,
                              action=e.action, reason=e.reason, occurred_at=e.changed_at,
                              expires_at=e.expires_at, value=value, attributes=attributes, recorded=True,
                              stamp=e.occurred_at)

    def _of_row(self, row: StoredItem, newest: TimelineEvent | None) -> HistoryVersion:
        """The current row as a version the timeline has not recorded yet (it records changes a
        moment after they are written). Its kind is inferred as the event's would be."""
        value, attributes = self._sealer.open_item(row)
        kind: EventKind
        if row.deleted is not None:
            kind = row.deleted
        elif newest is None or row.version != newest.version + 1:  # the one before it is not known here
            kind = "add" if row.version == 1 else "update"
        else:
            kind = "add" if newest.kind in ("delete", "expired") else "update"
        removed = newest.memory_id if row.deleted and newest and newest.version == row.version - 1 else row.id
        return HistoryVersion(event_id=row.id, memory_id=removed, version=row.version, kind=kind,
                              action=None if row.deleted else row.action, reason=None, occurred_at=row.updated_at,
                              expires_at=row.expires_at, value=value, attributes=attributes, recorded=False)

    def _cursor(self, tenant: str, scope: str, last: HistoryVersion, newest: TimelineEvent) -> str:
        """Where the next page starts: below the page's last version. When that is the unrecorded
        current row (a page of 1), just above the newest event read: stamps are unique per tenant,
        so `(stamp + 1 µs, "")` takes that event and nothing recorded since, which may be the row."""
        if last.recorded:
            assert last.stamp is not None
            stamp, event_id = to_epoch_us(last.stamp), last.event_id
        else:
            assert newest.occurred_at is not None
            stamp, event_id = to_epoch_us(newest.occurred_at) + 1, ""
        return self._cursors.encode(tenant, _CURSOR_PURPOSE, {
            "k": scope, "r": [last.event_id, last.version, last.kind], "s": stamp, "i": event_id})

    def _position(self, tenant: str, cursor: str, scope: str
                  ) -> tuple[tuple[datetime, str], tuple[str, int, str]]:
        """(the page starts strictly below this (stamp, id); the version just above it, which
        replaced the page's first)."""
        p = self._cursors.decode(tenant, _CURSOR_PURPOSE, cursor, field="cursor")
        if p.get("k") != scope:
            raise InvalidArgument("cursor belongs to another memory's history", details={"field": "cursor"})
        stamp, event_id, (newer_id, version, kind) = p["s"], p["i"], p["r"]
        return (from_epoch_us(stamp), event_id), (newer_id, version, kind)


def _link(page: list[HistoryVersion], newer: tuple[str, int, str] | None) -> list[HistoryVersion]:
    """Each version with what replaced it: the version above it (on this page, or the previous one's)."""
    out = []
    for version in page:
        out.append(replace(version, replaced_by=newer))
        newer = (version.event_id, version.version, version.kind)
    return out


def _scope(ns: tuple[str, ...], key: str) -> str:
    """Binds a cursor to its key: a digest, so the cursor stays short and says nothing of the key."""
    return hashlib.sha256(json.dumps([list(ns), key]).encode()).hexdigest()[:22]


def _not_found(ns: tuple[str, ...], key: str) -> NotFound:
    return NotFound("no history for this namespace and key", details={"namespace": list(ns), "key": key})
