"""The event timeline: changes -> events (and, where configured, published events), and the
scoped, paged reads of `GET /v1/memories/events`.

Recording is one consumer of the change feed: the local feed worker, or the `timeline` Lambda on the table's
stream. Delivery in is at least once; the log refuses an event id it already holds, so a
replayed change never makes a second event. Publishing happens after recording, for every
event of the batch (replays included), so a crash between the two loses nothing: the bus is
at least once, and `detail.id` names the event for consumers that deduplicate.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from itertools import groupby
from operator import itemgetter
from typing import Any, Literal

from pydantic import Field

from memsvc.core.errors import InvalidArgument
from memsvc.core.filters import get_path
from memsvc.core.models import Caller, Change, EventKind, TimelineEvent, from_epoch_us, to_epoch_us
from memsvc.core.timeline import KINDS
from memsvc.core.validation import Command, Cursor, Integer, NamespacePrefix, Timestamp
from memsvc.ports import EventLog, EventPublisher
from memsvc.service.access import Access
from memsvc.service.sealing import CursorCodec, Sealer
from memsvc.service.user_erasure import ErasureLedger

__all__ = ["Timeline", "TimelineReader", "EventsQuery", "EventView", "EventPage", "MAX_EVENTS_PAGE"]

log = logging.getLogger(__name__)


class Timeline:
    def __init__(self, log_: EventLog, publisher: EventPublisher | None = None,
                 erasures: ErasureLedger | None = None) -> None:
        self.log = log_
        self.publisher = publisher
        # A change of an erased user made before the erasure, still in the change feed then,
        # records nothing: the erasure stripped the timeline. Locally only: the names of the
        # erasure records need the tenant's data key, which the timeline Lambda does not hold.
        self.erasures = erasures

    def apply(self, changes: Sequence[Change]) -> set[int]:
        """Record (then publish) the changes' events; returns the seqs that must be retried."""
        erased: dict[tuple[str, str], datetime | None] = {}
        try:
            sources = [(c.seq, e) for c in changes for e in TimelineEvent.of_change(c)
                       if self.erasures is None
                       or not self.erasures.written_before_erasure(e.tenant, e.namespace, e.changed_at, erased)]
        except Exception:
            log.exception("reading the erasure records failed; the batch will be retried")
            return {c.seq for c in changes}
        if not sources:  # nothing, or only retries (no event)
            return set()
        try:
            recorded = list(zip((seq for seq, _ in sources), self.log.record([e for _, e in sources])))
            failed: set[int] = set()
        except Exception:
            log.exception("recording a batch of timeline events failed; recording its changes one at a time")
            recorded, failed = self._record_each_change(sources)
        if self.publisher is None or not recorded:
            return failed
        try:
            unpublished = {e.id for e in self.publisher.publish([e for _, e in recorded])}
        except Exception:
            log.exception("publishing timeline events failed; the batch will be retried")
            return {c.seq for c in changes}
        return failed | {seq for seq, e in recorded if e.id in unpublished}

    def _record_each_change(self, sources: Sequence[tuple[int, TimelineEvent]]
                            ) -> tuple[list[tuple[int, TimelineEvent]], set[int]]:
        """Record a batch that failed as a whole change by change, so that one change that cannot
        be recorded holds up only its own tenant: that tenant's later changes wait behind it (its
        timeline keeps its order), every other tenant's are recorded now. A failing dependency
        costs one call per tenant of the batch. Returns what was recorded, by change seq, and the
        seqs to retry."""
        recorded: list[tuple[int, TimelineEvent]] = []
        failed: set[int] = set()
        held_up: set[str] = set()
        for seq, group in groupby(sources, key=itemgetter(0)):
            events = [e for _, e in group]
            tenant = events[0].tenant
            if tenant in held_up:
                failed.add(seq)
                continue
            try:
                recorded += [(seq, e) for e in self.log.record(events)]
            except Exception as exc:  # its type only: a message could quote a value
                log.error("a change's timeline events could not be recorded; it will be retried",
                          extra={"seq": seq, "error": type(exc).__name__})
                held_up.add(tenant)
                failed.add(seq)
        return recorded, failed

    def notify(self, events: Sequence[TimelineEvent]) -> bool:
        """Record (then publish) events the service makes itself, not from a change (an extraction's
        `candidate` and `error`). Best effort: a failure is logged, never raised, and False is
        returned (the work they tell of stands on its own). Ids make a repeat a no-op."""
        try:
            recorded = self.log.record(events)
            if self.publisher is not None:
                self.publisher.publish(recorded)
        except Exception:
            log.exception("recording or publishing the service's own timeline events failed")
            return False
        return True


MAX_EVENTS_PAGE = 200
_CURSOR_PURPOSE = "events"



class EventsQuery(Command):
    """`GET /v1/memories/events`."""

    namespace_prefix: NamespacePrefix = Field([], alias="ns", description="Namespace prefix; repeat per segment")
    kinds: list[EventKind] = Field([], description="Event kinds to include; repeat per kind; default all")
    after: Timestamp | None = Field(None, description="Only events that occurred after this RFC 3339 time")
    before: Timestamp | None = Field(None, description="Only events that occurred before this RFC 3339 time")
    after_cursor: Cursor | None = Field(None, description=(
        "The previous page's after_cursor (or a resume_cursor); only a cursor this service gave this tenant (400 "
        "otherwise)"))
    limit: Integer = Field(50, ge=1, le=MAX_EVENTS_PAGE, description="Page size")


@dataclass(frozen=True)
class EventView:
    """A timeline event as its caller sees it: value and attributes opened for add/update."""

    event: TimelineEvent
    value: dict[str, Any] | None
    attributes: dict[str, Any] | None


@dataclass(frozen=True)
class EventPage:
    events: list[EventView]
    after_cursor: str | None  # null when the walk is done
    resume_cursor: str | None  # where to pick up later, to tail the timeline


class TimelineReader:
    def __init__(self, *, log_: EventLog, sealer: Sealer, cursors: CursorCodec, access: Access) -> None:
        self._log = log_
        self._sealer = sealer
        self._cursors = cursors
        self._access = access

    def events(self, caller: Caller, q: EventsQuery) -> EventPage:
        """The timeline under a prefix, scoped like search, one page at a time.

        A page is read one event past `limit`, so `after_cursor` is null exactly when the walk
        has reached the present. The cursor is sealed with the tenant's data key: opaque, and a
        forged, altered or other tenant's cursor fails to open (a 400).
        """
        prefix = self._access.namespace_to_read(caller, q.namespace_prefix, allow_empty=True)
        start_after = self._position(caller.tenant_id, q.after_cursor) if q.after_cursor is not None else None
        scope, scope_filter = self._access.scope(caller, "events", prefix, {})
        page: list[TimelineEvent] = []
        more = False
        for event in self._log.scan(caller.tenant_id, scope, kinds=frozenset(q.kinds) or KINDS,
                                    start_after=start_after, after=q.after, before=q.before,
                                    page_size=min(q.limit + 1, MAX_EVENTS_PAGE)):
            if not scope_filter.matches(lambda path: get_path(event.policy_attributes, path)):
                continue
            if len(page) == q.limit:
                more = True
                break
            page.append(event)
        views = [EventView(e, *self._sealer.open_item(e)) for e in page]
        last = self._cursor(caller.tenant_id, page[-1]) if page else q.after_cursor
        return EventPage(views, after_cursor=last if more else None, resume_cursor=last)

    def _cursor(self, tenant: str, event: TimelineEvent) -> str:
        assert event.occurred_at is not None
        return self._cursors.encode(tenant, _CURSOR_PURPOSE, {"s": to_epoch_us(event.occurred_at), "i": event.id})

    def _position(self, tenant: str, cursor: str) -> tuple[datetime, str]:
        position = self._cursors.decode(tenant, _CURSOR_PURPOSE, cursor, field="after_cursor")
        stamp, event_id = position.get("s"), position.get("i")
        if not isinstance(stamp, int) or not isinstance(event_id, str):  # sealed by us, so only if we changed format
            raise InvalidArgument("after_cursor is not a cursor this service gave this caller",
                                  details={"field": "after_cursor"})
        return from_epoch_us(stamp), event_id
