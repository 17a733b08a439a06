"""Sessions and their messages (API-AGENT.md "Agent workflow state"; seed 004's conversations).

A session belongs to (tenant, user): every lookup is keyed by the caller's own user id, so
another user's session is simply not there (404, and nothing tells it exists). A message is an
item under `["user", U, "sessions", S, "messages"]` keyed by its zero-padded seq, written in
the same store transaction that takes the seq and moves `last_interaction`; the indexer embeds
it off the write path, like every item, so search and recall find it. It indexes the message as a
turn (`core.message_context`): its date, its speaker (its `name`, or its role) and the turn before
it, which it reads then, under seq - 1. Nothing of that turn is copied into the value: the store
assigns the seq, so only once the message is written is the turn before it known for certain.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from typing import Any, Literal

from pydantic import Field, StrictStr

from memsvc.core.contention import WRITE_ATTEMPTS, backoff
from memsvc.core.errors import Conflict, ContentTooLong, InvalidArgument, NotFound, PreconditionFailed
from memsvc.core.message_context import MAX_NAME_CHARS, MESSAGE_FIELD
from memsvc.core.models import Caller, StoredItem, from_epoch_us, to_epoch_us
from memsvc.core.namespaces import MAX_NAMESPACE_BYTES
from memsvc.core.pages import json_size, take_page
from memsvc.core.sessions import MESSAGE_KEY_DIGITS, SessionRecord, message_key, messages_namespace, session_closed, session_namespace
from memsvc.core.validation import Command, Cursor, Integer, Timestamp, non_blank
from memsvc.ports import Clock, ItemStore, SessionStore
from memsvc.service.access import Access
from memsvc.service.memories import Memories, check_nesting
from memsvc.service.workflow_rules import check_version
from memsvc.service.sealing import CursorCodec, Sealer

__all__ = ["Sessions", "CreateSession", "UpdateSession", "ListSessions", "AppendMessage", "ListMessages",
           "SessionView", "MessageView", "MessagePage", "AppendedMessage", "MAX_METADATA_BYTES",
           "MAX_MESSAGE_BYTES", "MAX_ID_CHARS"]

MAX_ID_CHARS = 256
MAX_TITLE_CHARS = 1000
MAX_METADATA_BYTES = 64 * 1024  # title and metadata, as compact UTF-8 JSON
MAX_MESSAGE_BYTES = 128 * 1024  # a message's content, in UTF-8
_CURSOR_PURPOSE = "sessions"
_PAGE = 200
# How long auto-delete waits for a closed session's messages to be extracted when extraction
# failed at close (the model was down): the retention promise is kept within this.
EXTRACTION_GRACE = timedelta(hours=24)

_METADATA_RULES = f"title and metadata take at most {MAX_METADATA_BYTES} bytes as JSON (413)"
# A session id is a namespace segment with no control characters (`_segment` checks it, and says so).
SESSION_ID_PATTERN = "^[^\\x00-\\x1f\\x7f]+$"
_CURSOR_RULE = "; only a cursor this listing gave this caller (400 otherwise)"
ExtractMode = Literal["off", "on_close", "continuous"]
_EXTRACT_RULES = ("learn memories from the messages: off; on_close (when the session is closed, before promotion); "
                  "continuous (in the background, in batches)")


class CreateSession(Command):
    """`POST /v1/memory/sessions`."""

    session_id: StrictStr = Field(
        min_length=1, max_length=MAX_ID_CHARS, json_schema_extra={"pattern": SESSION_ID_PATTERN},
        description="a segment of the session's namespaces: no control characters, and short enough that "
                    f"they fit {MAX_NAMESPACE_BYTES} bytes percent-encoded (a character outside ASCII takes 6 to 12)")
    agent_id: StrictStr | None = Field(None, min_length=1, max_length=MAX_ID_CHARS)
    title: StrictStr | None = Field(None, max_length=MAX_TITLE_CHARS)
    metadata: dict[StrictStr, Any] = Field({}, description="sealed at rest; a project_id here "
                                           f"makes close promote to that project; {_METADATA_RULES}")
    extract: ExtractMode | None = Field(None, description=_EXTRACT_RULES + "; default: the tenant's session_extract")


class UpdateSession(Command):
    """`PUT /v1/memory/sessions/{id}`: what is given changes; `last_interaction` defaults to now."""

    last_interaction: Timestamp | None = None
    title: StrictStr | None = Field(None, max_length=MAX_TITLE_CHARS)
    metadata: dict[StrictStr, Any] | None = Field(None, description=_METADATA_RULES)
    extract: ExtractMode | None = Field(None, description=_EXTRACT_RULES)


class ListSessions(Command):
    """`GET /v1/memory/sessions`."""

    limit: Integer = Field(20, ge=1, le=100)
    cursor: Cursor | None = Field(None, description="the previous page's next_cursor" + _CURSOR_RULE)
    agent_id: StrictStr | None = Field(None, min_length=1, max_length=MAX_ID_CHARS)


SpeakerName = non_blank(max_length=MAX_NAME_CHARS)


class AppendMessage(Command):
    """`POST /v1/memory/sessions/{id}/messages`."""

    role: Literal["user", "assistant", "system", "tool"]
    content: StrictStr = Field(min_length=1, description=f"at most {MAX_MESSAGE_BYTES} bytes of UTF-8 (413)")
    name: SpeakerName | None = Field(None, description=(
        f"who spoke (e.g. Maria), at most {MAX_NAME_CHARS} characters; the message is indexed as this "
        "speaker's turn, its role's without one"))
    correlation_id: StrictStr | None = Field(None, min_length=1, max_length=MAX_ID_CHARS)


class ListMessages(Command):
    """`GET /v1/memory/sessions/{id}/messages`."""

    # A seq past the keys' digits would compare as text out of order with the stored keys.
    after_seq: Integer = Field(0, ge=0, le=10**MESSAGE_KEY_DIGITS - 1, description="only messages with a higher seq")
    limit: Integer = Field(100, ge=1, le=500)


@dataclass(frozen=True)
class MessagePage:
    messages: list[MessageView]
    next_after_seq: int | None


@dataclass(frozen=True)
class SessionView:
    session_id: str
    agent_id: str | None
    title: str | None
    metadata: dict[str, Any]
    created_at: datetime
    updated_at: datetime
    last_interaction: datetime
    version: int
    message_count: int
    closed_at: datetime | None
    delete_after: datetime | None
    extract: str
    extracted_seq: int


@dataclass(frozen=True)
class AppendedMessage:
    message_id: str
    seq: int
    created_at: datetime


@dataclass(frozen=True)
class MessageView:
    message_id: str
    seq: int
    role: str
    name: str | None
    content: str
    correlation_id: str | None
    created_at: datetime


class Sessions:
    def __init__(self, *, store: SessionStore, items: ItemStore, memories: Memories, sealer: Sealer,
                 cursors: CursorCodec, access: Access, clock: Clock,
                 on_append: Callable[[Caller, SessionRecord, int], None] = lambda caller, record, seq: None) -> None:
        self._store = store
        self._on_append = on_append  # continuous extraction's scheduling (`service.extraction`)
        self._items = items
        self._memories = memories
        self._sealer = sealer
        self._cursors = cursors
        self._access = access
        self._clock = clock

    # -- the session record --------------------------------------------------------------------

    def create(self, caller: Caller, cmd: CreateSession) -> SessionView:
        session_id = _segment(cmd.session_id, "session_id")
        self._check_namespace(caller, session_id)
        now = self._clock.now()
        record = SessionRecord(
            tenant=caller.tenant_id, user_id=caller.user_id, session_id=session_id, agent_id=cmd.agent_id,
            sealed=self._seal(caller, session_id, cmd.title, cmd.metadata), created_at=now, updated_at=now,
            last_interaction=now, extract=cmd.extract or self._access.settings_of(caller).session_extract,
        )
        self._store.create(record)
        return self._view(record)

    def get(self, caller: Caller, session_id: str) -> SessionView:
        return self._view(self.record(caller, session_id))

    def record(self, caller: Caller, session_id: str) -> SessionRecord:
        """The caller's own session; `NotFound` for anyone else's, exactly as for none at all."""
        record = self._store.get(caller.tenant_id, caller.user_id, session_id)
        if record is None:
            raise NotFound("no session with this id", details={"session_id": session_id})
        return record

    def list(self, caller: Caller, query: ListSessions) -> tuple[list[SessionView], str | None]:
        after = None
        if query.cursor is not None:
            position = self._cursors.decode(caller.tenant_id, _CURSOR_PURPOSE, query.cursor, field="cursor")
            if position.get("u") != caller.user_id or position.get("a") != query.agent_id:
                raise InvalidArgument("cursor is from another listing", details={"field": "cursor"})
            after = (from_epoch_us(position["li"]), position["s"])
        records = self._store.list(caller.tenant_id, caller.user_id, agent_id=query.agent_id,
                                   limit=query.limit + 1, after=after)
        page, more = records[: query.limit], len(records) > query.limit
        cursor = None
        if more:
            last = page[-1]
            cursor = self._cursors.encode(caller.tenant_id, _CURSOR_PURPOSE, {
                "u": caller.user_id, "a": query.agent_id, "li": to_epoch_us(last.last_interaction),
                "s": last.session_id})
        return [self._view(r) for r in page], cursor

    def update(self, caller: Caller, session_id: str, cmd: UpdateSession, *, if_match: int | None) -> SessionView:
        """Without `If-Match`, a write that loses to another (a PUT, a close) is made again on
        what that one left."""
        for attempt in range(WRITE_ATTEMPTS):
            backoff(attempt)
            record = self.record(caller, session_id)
            check_version(if_match, record.version, "session")
            sealed = record.sealed
            if cmd.title is not None or cmd.metadata is not None:
                current = self._open(record)
                title = cmd.title if cmd.title is not None else current.get("title")
                metadata = cmd.metadata if cmd.metadata is not None else current.get("metadata", {})
                sealed = self._seal(caller, session_id, title, metadata)
            now = self._clock.now()
            updated = replace(record, sealed=sealed, updated_at=now, version=record.version + 1,
                              last_interaction=cmd.last_interaction or now, extract=cmd.extract or record.extract)
            try:
                self._store_update(updated, record.version, if_match)
            except Conflict:
                continue
            return self._view(updated)
        raise Conflict("too many concurrent writes to this session; retry", details={"session_id": session_id})

    def delete(self, caller: Caller, session_id: str) -> None:
        """The session, its messages and its layer's memories; idempotent."""
        for namespace in (session_namespace(caller.user_id, session_id), messages_namespace(caller.user_id, session_id)):
            self._access.authorize(caller, "delete", namespace, None)
        self.remove(caller.tenant_id, caller.user_id, session_id)

    def remove(self, tenant: str, user_id: str, session_id: str) -> int:
        """Tombstone every live item under the session's namespace (its layer, its messages), drop
        the record, then sweep the messages once more. The stores append only while the record is
        there, so an append that read the session before it went has committed by then, and the
        last, consistent pass finds it. A failure midway leaves the session there to delete again."""
        removed = self._sweep_layer(tenant, user_id, session_id) + self._sweep_messages(tenant, user_id, session_id)
        self._store.delete(tenant, user_id, session_id)
        return removed + self._sweep_messages(tenant, user_id, session_id)

    def _sweep_layer(self, tenant: str, user_id: str, session_id: str) -> int:
        """Everything under the session's namespace that the store lists (on DynamoDB an index,
        which can lag a write: the messages get their own consistent pass), its messages among
        it, last key first (`_sweep_messages` says why)."""
        found = sorted(((item.namespace, item.key) for item in
                        self._items.scan_live(tenant, session_namespace(user_id, session_id), self._clock.now())),
                       reverse=True)
        return sum(self._memories.delete_current(tenant, namespace, key, expected_id=None) for namespace, key in found)

    def _sweep_messages(self, tenant: str, user_id: str, session_id: str) -> int:
        """Last message first: the indexer re-indexes the message after a deleted one (its entries
        quote the turn before), and a message deleted before its turn before is a tombstone by
        then, so a sweep re-indexes none, however far the indexer runs behind or ahead of it."""
        namespace = messages_namespace(user_id, session_id)
        return sum(self._memories.delete_current(tenant, namespace, item.key, expected_id=None)
                   for item in reversed(list(self.items_of(tenant, namespace))))

    def items_of(self, tenant: str, namespace: tuple[str, ...]) -> Iterator[StoredItem]:
        """The live items of exactly this namespace, in key order, read consistently page by page."""
        after = ""
        while True:
            page = self._store.messages(tenant, namespace, after, _PAGE)
            yield from page
            if len(page) < _PAGE:
                return
            after = page[-1].key

    def remove_due(self, limit: int = 100) -> int:
        """Auto-delete: remove the closed sessions whose `delete_after` has passed (the local
        sweeper and the AWS retention function call this); how many due sessions were handled
        (removed, or deferred). A session whose messages still wait for their extraction (retried
        in the background) is deferred once, to `EXTRACTION_GRACE` after its close: no longer due
        till then, so it never holds up the sessions due behind it."""
        now = self._clock.now()
        due = self._store.due_for_deletion(now, limit)
        for record in due:
            closed_at = record.closed_at or now
            if record.extract != "off" and record.extracted_seq < record.seq and now < closed_at + EXTRACTION_GRACE:
                try:
                    self._store.update(replace(record, delete_after=closed_at + EXTRACTION_GRACE),
                                       expected_version=record.version)
                except Conflict:
                    pass  # reopened, or changed by a close or PUT since: the next sweep sees it as it is
                continue
            self.remove(record.tenant, record.user_id, record.session_id)
        return len(due)

    def mark_closed(self, caller: Caller, session_id: str, *, delete_after: datetime | None) -> SessionRecord:
        """Close the session (again: the first close's time stays), set or clear its deletion time;
        made again on what a concurrent PUT left. A close that changes nothing writes nothing: a
        retried close keeps the version an `If-Match` holder read."""
        for attempt in range(WRITE_ATTEMPTS):
            backoff(attempt)
            record = self.record(caller, session_id)
            if record.closed_at is not None and record.delete_after == delete_after:
                return record
            now = self._clock.now()
            closed = replace(record, closed_at=record.closed_at or now, delete_after=delete_after, updated_at=now,
                             version=record.version + 1)
            try:
                self._store_update(closed, record.version, None)
            except Conflict:
                continue
            return closed
        raise Conflict("too many concurrent writes to this session; retry", details={"session_id": session_id})

    def open_metadata(self, record: SessionRecord) -> dict[str, Any]:
        return self._open(record).get("metadata") or {}

    # -- messages --------------------------------------------------------------------------------

    def append(self, caller: Caller, session_id: str, cmd: AppendMessage) -> AppendedMessage:
        size = len(cmd.content.encode("utf-8"))
        if size > MAX_MESSAGE_BYTES:
            raise ContentTooLong(f"content takes {size} bytes; the limit is {MAX_MESSAGE_BYTES}",
                                 max_bytes=MAX_MESSAGE_BYTES)
        record = self.record(caller, session_id)
        if record.closed_at is not None:
            raise session_closed(session_id)
        ns = messages_namespace(caller.user_id, session_id)
        value: dict[str, Any] = {"role": cmd.role, "content": cmd.content}
        if cmd.name is not None:
            value["name"] = cmd.name
        if cmd.correlation_id is not None:
            value["correlation_id"] = cmd.correlation_id
        policies = self._access.authorize(caller, "write", ns, None)
        self._access.govern(caller, ns, "message", value, None)
        policy_attributes = policies.extract_attributes(ns, "message", value, None, caller.policy_context())

        def message(seq: int, old: StoredItem | None) -> StoredItem:
            return self._memories.build_version(caller.tenant_id, ns, message_key(seq), {**value, "seq": seq},
                                                old=old, attributes=None, policy_attributes=policy_attributes,
                                                index_fields=[MESSAGE_FIELD], ttl_seconds=None)

        item = self._store.append(caller.tenant_id, caller.user_id, session_id, self._clock.now(), message)
        if item is None:  # deleted between the read and the append
            raise NotFound("no session with this id", details={"session_id": session_id})
        self._memories.settle([item], sync_index=False)
        self._on_append(caller, record, int(item.key))
        return AppendedMessage(message_id=item.id, seq=int(item.key), created_at=item.created_at)

    def messages(self, caller: Caller, session_id: str, query: ListMessages) -> MessagePage:
        """In seq order, at most `limit` of them and at most `core.pages.PAGE_BYTES` of content (at
        least one message), so a page always fits a Lambda response. `next_after_seq` is set when
        more follow."""
        self.record(caller, session_id)
        namespace = messages_namespace(caller.user_id, session_id)
        self._access.authorize(caller, "read", namespace, None)
        items = self._store.messages(caller.tenant_id, namespace, message_key(query.after_seq), query.limit + 1)
        views = (self._message(item) for item in items if item.key.isascii() and item.key.isdigit())
        page, more = take_page(views, lambda view: json_size(view.content), limit=query.limit)
        return MessagePage(page, next_after_seq=page[-1].seq if more else None)

    def conversation(self, record: SessionRecord, *, after_seq: int, limit: int) -> list[MessageView]:
        """The session's messages after `after_seq`, in seq order, at most `limit` (extraction's read:
        its caller authorized the session's user already)."""
        namespace = messages_namespace(record.user_id, record.session_id)
        items = self._store.messages(record.tenant, namespace, message_key(after_seq), limit)
        return [self._message(item) for item in items if item.key.isascii() and item.key.isdigit()]

    def _message(self, item: StoredItem) -> MessageView:
        """(Keys that are not seqs belong to items put there through `/v1/memories`: not messages. Such
        an item, or one written over a message that way, may hold anything: what is not a string
        reads as absent.)"""
        value = self._sealer.open_value(item)
        value = value if isinstance(value, dict) else {}

        def text(name: str) -> str | None:
            return value[name] if isinstance(value.get(name), str) else None

        return MessageView(message_id=item.id, seq=int(item.key), role=text("role") or "", name=text("name"),
                           content=text("content") or "", correlation_id=text("correlation_id"),
                           created_at=item.created_at)

    # -- plumbing --------------------------------------------------------------------------------

    def _check_namespace(self, caller: Caller, session_id: str) -> None:
        """The session's namespaces must be writable where its messages and memories will go."""
        for namespace in (session_namespace(caller.user_id, session_id), messages_namespace(caller.user_id, session_id)):
            try:
                self._access.namespace_to_write(caller, namespace)
            except InvalidArgument as exc:
                if exc.details.get("reason") != "too_long":
                    raise
                # The request names no namespace: say which of its fields made one too long.
                raise InvalidArgument(
                    "session_id is too long for this user's session namespaces: percent-encoded, with "
                    f"the user id, they take at most {MAX_NAMESPACE_BYTES} bytes, and a character outside "
                    "ASCII takes 6 to 12 of them",
                    details={"field": "session_id", "reason": "too_long", "max_bytes": MAX_NAMESPACE_BYTES}) from None
            self._access.authorize(caller, "write", namespace, None)

    def _store_update(self, record: SessionRecord, expected: int, if_match: int | None) -> None:
        try:
            self._store.update(record, expected_version=expected)
        except Conflict:
            if if_match is not None:
                raise PreconditionFailed("the session changed; read it again",
                                         details={"expected_version": if_match}) from None
            raise

    def _seal(self, caller: Caller, session_id: str, title: str | None, metadata: dict[str, Any]) -> bytes:
        check_nesting(metadata, "metadata")
        payload = {"title": title, "metadata": metadata}
        size = len(json.dumps(payload, separators=(",", ":"), ensure_ascii=False).encode())
        if size > MAX_METADATA_BYTES:
            raise ContentTooLong(f"title and metadata take {size} bytes as JSON; the limit is {MAX_METADATA_BYTES}",
                                 max_bytes=MAX_METADATA_BYTES)
        return self._sealer.seal_record(caller.tenant_id, ("session", caller.user_id, session_id), payload)

    def _open(self, record: SessionRecord) -> dict[str, Any]:
        return self._sealer.open_record(record.tenant, ("session", record.user_id, record.session_id),
                                        record.sealed)

    def _view(self, record: SessionRecord) -> SessionView:
        opened = self._open(record)
        return SessionView(
            session_id=record.session_id, agent_id=record.agent_id, title=opened.get("title"),
            metadata=opened.get("metadata") or {}, created_at=record.created_at, updated_at=record.updated_at,
            last_interaction=record.last_interaction, version=record.version, message_count=record.seq,
            closed_at=record.closed_at, delete_after=record.delete_after, extract=record.extract,
            extracted_seq=record.extracted_seq,
        )


def _segment(value: str, field: str) -> str:
    if any(ord(c) < 0x20 or ord(c) == 0x7F for c in value):
        raise InvalidArgument(f"{field} must not contain control characters", details={"field": field})
    return value



