"""Domain records shared by the service and every adapter. Pure data, no I/O."""

from __future__ import annotations

import base64
import uuid
from collections.abc import Collection, Sequence
from dataclasses import dataclass, field, replace
from functools import cached_property
from datetime import datetime, timedelta, timezone
from typing import Any, Literal, NamedTuple

__all__ = [
    "Caller",
    "StoredItem",
    "Change",
    "ChangeKind",
    "RememberAction",
    "FeedbackAction",
    "WriteAction",
    "LifecycleAction",
    "ACTION_REASONS",
    "EventKind",
    "RememberJob",
    "TimelineEvent",
    "expiry_event_id",
    "index_failure_event_id",
    "IndexAttempt",
    "attempt_mark",
    "read_attempt_mark",
    "Memory",
    "VectorHit",
    "VectorWrite",
    "VectorRef",
    "KeywordDoc",
    "FieldDoc",
    "ItemHead",
    "FieldHolderSets",
    "KeywordHit",
    "KeywordResult",
    "IndexFields",
    "utc",
    "to_rfc3339",
    "from_epoch_us",
    "to_epoch_us",
]

# A write (`add`, `update`) or a removal (`delete`, `expired`) of a memory; or, from the indexer's
# own bookkeeping on a version's row, its quarantine (`index_failed`, which the timeline records)
# and an admin's retry of it (`index_retry`, which sends it to the indexer again).
ChangeKind = Literal["add", "update", "delete", "expired", "index_failed", "index_retry"]
# A timeline event's kind: a change's, or one the service records directly (issue 24): an
# extracted `candidate` before consolidation decides it, an `error` of a failed extraction.
EventKind = Literal["add", "update", "delete", "expired", "index_failed", "candidate", "error"]
# An indexing attempt of a version that started and has not ended (`memsvc.service.indexer`):
# `batch` in the normal flow, `alone` when the version is run by itself after a batch of it died.
# Stored as `<attempt>:<run>` (`attempt_mark`), the run being the indexing process's own id: a
# mark of another run is a death, a mark of this very run only a mark it could not clear.
IndexAttempt = Literal["batch", "alone"]


def attempt_mark(attempt: IndexAttempt, run: str) -> str:
    return f"{attempt}:{run}"


def read_attempt_mark(mark: str) -> tuple[str, str]:
    """`(attempt, run)` of a stored mark."""
    attempt, _, run = mark.partition(":")
    return attempt, run
# What a remember call did with a version it wrote (API-AGENT.md: `memory.created`,
# `memory.updated`, `memory.superseded`); None for every other write.
RememberAction = Literal["created", "updated", "superseded"]
# What a version written by `POST /v1/memories/feedback` records: the signal, never the note.
FeedbackAction = Literal["feedback_useful", "feedback_wrong", "feedback_outdated"]
# What learning from conversations (issue 24) did with a version it wrote: an extracted candidate
# or a near-duplicate merged into it (`memory.merged`), reflection's own changes.
LifecycleAction = Literal["merged", "reflect_superseded", "importance_recomputed", "archived", "restored",
                          "duplicate_superseded"]
# Why a lifecycle change was made, in the service's words (never the memory's content).
ACTION_REASONS = {
    "merged": "a statement of the same fact was merged into this memory",
    "reflect_superseded": "a newer statement contradicts this memory",
    "importance_recomputed": "importance recomputed from use, recency and feedback",
    "archived": "decayed: low importance and not recalled for a long time",
    "restored": "restored from the archive",
    "duplicate_superseded": "merged into an older memory that states the same fact",
}
# The outcome a version carries in plaintext on its row and its timeline event; None for a plain write.
WriteAction = RememberAction | FeedbackAction | LifecycleAction
# None: every string leaf; False: not indexed; a list: these paths.
IndexFields = list[str] | None | Literal[False]


def utc(dt: datetime) -> datetime:
    return dt.replace(tzinfo=timezone.utc) if dt.tzinfo is None else dt.astimezone(timezone.utc)


def to_rfc3339(dt: datetime | None) -> str | None:
    if dt is None:
        return None
    return utc(dt).isoformat(timespec="microseconds").replace("+00:00", "Z")


# By arithmetic on timedeltas, exact from year 1 to 9999 (a stated valid time may lie anywhere
# there): `fromtimestamp` fails near year 9999, and `int(timestamp())` rounds towards zero before 1970.
_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)
_MICROSECOND = timedelta(microseconds=1)


def to_epoch_us(dt: datetime) -> int:
    return (utc(dt) - _EPOCH) // _MICROSECOND


def from_epoch_us(us: int) -> datetime:
    return _EPOCH + timedelta(microseconds=us)


@dataclass(frozen=True)
class Caller:
    """Who is asking, as the authorizer established it."""

    tenant_id: str
    user_id: str
    roles: tuple[str, ...] = ()
    client_id: str = ""
    principal_type: Literal["user", "iam"] = "user"
    jwt_claims: dict[str, Any] = field(default_factory=dict, hash=False, compare=False)

    @property
    def is_admin(self) -> bool:
        return "admin" in self.roles or "service" in self.roles

    def policy_context(self) -> dict[str, Any]:
        return {
            "tenant_id": self.tenant_id,
            "user_id": self.user_id,
            "client_id": self.client_id,
            "roles": list(self.roles),
            "principal_type": self.principal_type,
            "jwt_claims": self.jwt_claims,
        }


@dataclass(frozen=True)
class StoredItem:
    """One key's current row as the item store holds it: sealed value, plaintext metadata.

    A tombstone (`deleted` set) keeps the key's version counter alive after a delete or an
    expiry, so a replayed older change can never resurrect vectors or events.
    """

    tenant: str
    namespace: tuple[str, ...]
    key: str
    id: str
    version: int
    value_ct: bytes | None
    attributes_ct: bytes | None
    policy_attributes: dict[str, Any]
    index_fields: IndexFields
    created_at: datetime
    updated_at: datetime
    expires_at: datetime | None = None
    deleted: Literal["delete", "expired"] | None = None
    ttl_seconds: int | None = None  # kept so a read can refresh the expiry (LangGraph's refresh_ttl)
    # The fields whose vectors are written for this version; None until the indexer marks it.
    indexed_fields: tuple[str, ...] | None = None
    # Set by remember (or feedback) on the version it wrote, in plaintext, so the change and its
    # timeline event say what consolidation (or the feedback) did. Names only the outcome, never
    # the content or a feedback's note.
    action: WriteAction | None = None
    # Recall's bookkeeping (plaintext, like the timestamps): how often the key's memory was
    # returned, and when last. Updated in place, without a new version or a change record.
    access_count: int = 0
    last_accessed_at: datetime | None = None
    # The indexer's own marks on this version (plaintext; never carried over by a write, so a new
    # version starts afresh): an attempt in flight, and why and when the version was quarantined.
    index_attempt: str | None = None  # `attempt_mark`
    index_error: str | None = None
    quarantined_at: datetime | None = None
    # When the memory states it held, `[valid_start, valid_end)` as `core.validity.interval` reads
    # its value (valid_end None: still holds), in plaintext beside the sealed value, so that an
    # `as_of` search rejects what did not hold then without decrypting it (issue 25). valid_start
    # is None on a row written before these bounds: it is decided on its opened value.
    valid_start: datetime | None = None
    valid_end: datetime | None = None

    def is_live(self, now: datetime) -> bool:
        return self.deleted is None and (self.expires_at is None or self.expires_at > now)

    def tombstone(self, *, kind: Literal["delete", "expired"], at: datetime, new_id: str) -> "StoredItem":
        return replace(
            self,
            id=new_id,
            version=self.version + 1,
            value_ct=None,
            attributes_ct=None,
            updated_at=at,
            deleted=kind,
            indexed_fields=None,
            action=None,
            index_attempt=None,
            index_error=None,
            quarantined_at=None,
        )

    def to_record(self) -> dict[str, Any]:
        """A JSON-safe form for change feeds and events (ciphertexts stay sealed)."""
        return {
            "tenant": self.tenant,
            "namespace": list(self.namespace),
            "key": self.key,
            "id": self.id,
            "version": self.version,
            "value_ct": _b64(self.value_ct),
            "attributes_ct": _b64(self.attributes_ct),
            "policy_attributes": self.policy_attributes,
            "index_fields": self.index_fields,
            "created_at": to_epoch_us(self.created_at),
            "updated_at": to_epoch_us(self.updated_at),
            "expires_at": to_epoch_us(self.expires_at) if self.expires_at else None,
            "deleted": self.deleted,
            "ttl_seconds": self.ttl_seconds,
            "indexed_fields": list(self.indexed_fields) if self.indexed_fields is not None else None,
            "action": self.action,
            "access_count": self.access_count,
            "last_accessed_at": to_epoch_us(self.last_accessed_at) if self.last_accessed_at else None,
            "index_attempt": self.index_attempt,
            "index_error": self.index_error,
            "quarantined_at": to_epoch_us(self.quarantined_at) if self.quarantined_at else None,
        }

    @classmethod
    def from_record(cls, r: dict[str, Any]) -> "StoredItem":
        return cls(
            tenant=r["tenant"],
            namespace=tuple(r["namespace"]),
            key=r["key"],
            id=r["id"],
            version=int(r["version"]),
            value_ct=_unb64(r["value_ct"]),
            attributes_ct=_unb64(r["attributes_ct"]),
            policy_attributes=r["policy_attributes"] or {},
            index_fields=r["index_fields"],
            created_at=from_epoch_us(r["created_at"]),
            updated_at=from_epoch_us(r["updated_at"]),
            expires_at=from_epoch_us(r["expires_at"]) if r["expires_at"] is not None else None,
            deleted=r["deleted"],
            ttl_seconds=r.get("ttl_seconds"),
            indexed_fields=tuple(r["indexed_fields"]) if r.get("indexed_fields") is not None else None,
            action=r.get("action"),
            access_count=r.get("access_count") or 0,
            last_accessed_at=from_epoch_us(r["last_accessed_at"]) if r.get("last_accessed_at") else None,
            index_attempt=r.get("index_attempt"),
            index_error=r.get("index_error"),
            quarantined_at=from_epoch_us(r["quarantined_at"]) if r.get("quarantined_at") else None,
        )


CHANGE_BASE_WEIGHT = 1024


@dataclass(frozen=True)
class Change:
    """One entry of the change feed: what happened to a key, with the row before and after."""

    seq: int
    kind: ChangeKind
    new: StoredItem
    old: StoredItem | None
    occurred_at: datetime

    @property
    def tenant(self) -> str:
        return self.new.tenant

    @property
    def weight(self) -> int:
        """What consuming it is expected to cost, in bytes: the sealed value the indexer opens and
        embeds, and a fixed part for the rest (a tenant's turn at a consumer is sized in it)."""
        return CHANGE_BASE_WEIGHT + len(self.new.value_ct or b"")


@dataclass(frozen=True)
class TimelineEvent:
    """One entry of the event timeline: what a change did to a key, value still sealed.

    `id` is the id of the row the change wrote (for `delete`/`expired`, the tombstone's), so a
    replayed change yields the same event id and the log can refuse it. `occurred_at` is the
    timeline's stamp, set when the log records the event: the change's own time, moved forward
    just enough (1 µs past the tenant's previous stamp) that stamps only ever grow. That is what
    lets a cursor walk the timeline without missing an event recorded late.
    """

    tenant: str
    id: str
    kind: EventKind
    namespace: tuple[str, ...]
    key: str
    memory_id: str  # the memory the event is about; for delete/expired, the one removed
    version: int  # the key's version this change wrote
    changed_at: datetime  # when the change happened (the write, the delete, the expiry)
    expires_at: datetime | None
    policy_attributes: dict[str, Any]
    value_ct: bytes | None = None  # sealed for (tenant, namespace, key, version); add/update only
    attributes_ct: bytes | None = None
    occurred_at: datetime | None = None
    action: WriteAction | None = None  # add/update written by remember or feedback: what it did
    reason: str | None = None  # index_failed: why, in the service's words (never the memory's content)

    @classmethod
    def of_change(cls, change: "Change") -> list["TimelineEvent"]:
        """The change's event, preceded by an `expired` event when the row it replaced had
        expired but no sweeper or TTL had tombstoned it yet (a write over an expired memory is
        an `add`, and the expiry would otherwise never reach the timeline). That event's id is
        the one DynamoDB TTL's removal of the row would get, so the two are never both recorded.
        A quarantine is an `index_failed` event; an admin's retry is no event."""
        new, old = change.new, change.old
        if change.kind == "index_retry":
            return []
        if change.kind == "index_failed":
            assert new.quarantined_at is not None
            return [cls(tenant=new.tenant, id=index_failure_event_id(new.id, new.quarantined_at), kind="index_failed",
                        namespace=new.namespace, key=new.key, memory_id=new.id, version=new.version,
                        changed_at=new.quarantined_at, expires_at=new.expires_at,
                        policy_attributes=new.policy_attributes, reason=new.index_error)]
        removed = change.kind in ("delete", "expired")
        about = old if removed and old is not None else new
        events = [cls(
            tenant=new.tenant,
            id=new.id,
            kind=change.kind,
            namespace=new.namespace,
            key=new.key,
            memory_id=about.id,
            version=new.version,
            changed_at=change.occurred_at,
            expires_at=about.expires_at,
            policy_attributes=about.policy_attributes,
            value_ct=None if removed else new.value_ct,
            attributes_ct=None if removed else new.attributes_ct,
            action=None if removed else new.action,
            reason=None if removed or new.action is None else ACTION_REASONS.get(new.action),
        )]
        if (change.kind != "expired" and old is not None and old.deleted is None
                and old.expires_at is not None and old.expires_at <= change.occurred_at):
            events.insert(0, cls(
                tenant=old.tenant,
                id=expiry_event_id(old.id),
                kind="expired",
                namespace=old.namespace,
                key=old.key,
                memory_id=old.id,
                version=old.version,  # no tombstone was written: the version that expired
                changed_at=old.expires_at,
                expires_at=old.expires_at,
                policy_attributes=old.policy_attributes,
            ))
        return events


def index_failure_event_id(memory_id: str, quarantined_at: datetime) -> str:
    """The id of a version's `index_failed` event: one per quarantine (a version retried and
    quarantined again gets a second), the same however often the change is delivered."""
    return str(uuid.uuid5(uuid.NAMESPACE_URL, f"index_failed:{memory_id}:{to_epoch_us(quarantined_at)}"))


def expiry_event_id(memory_id: str) -> str:
    """The id of the `expired` event (and tombstone) of a memory that expired: derived from the
    memory's id, so every path that notices the expiry names it the same way."""
    return str(uuid.uuid5(uuid.NAMESPACE_URL, f"expired:{memory_id}"))


@dataclass(frozen=True)
class RememberJob:
    """A `remember` call with `wait: false`, waiting for its decision. `sealed` holds the caller
    and the request, sealed under the tenant's data key for (tenant, candidate id): a queue or a
    job table never holds the content in plaintext."""

    tenant: str
    candidate_id: str
    sealed: bytes
    attempts: int = 0


@dataclass(frozen=True)
class Memory:
    """A decrypted memory as callers see it."""

    id: str
    namespace: tuple[str, ...]
    key: str
    value: dict[str, Any]
    attributes: dict[str, Any] | None
    created_at: datetime
    updated_at: datetime
    expires_at: datetime | None
    version: int
    score: float | None = None
    ttl_seconds: int | None = None
    scores: dict[str, float | None] | None = None  # per signal, when ranked by relevance
    # Asked with `known_at`: whether this version is still the key's current one (False: a version
    # since replaced, deleted or expired, from the timeline); None without known_at.
    current: bool | None = None


@dataclass(frozen=True)
class VectorHit:
    namespace: tuple[str, ...]
    key: str
    memory_id: str
    version: int
    field: str
    score: float


@dataclass(frozen=True)
class VectorWrite:
    """One memory version's vectors, one per (field, vector), for `VectorIndex.put_many`."""

    tenant: str
    namespace: tuple[str, ...]
    key: str
    memory_id: str
    version: int
    policy_attributes: dict[str, Any]
    vectors: tuple[tuple[str, Sequence[float]], ...]


@dataclass(frozen=True)
class VectorRef:
    """One vector, for `VectorIndex.delete_many`."""

    tenant: str
    memory_id: str
    field: str


@dataclass(frozen=True)
class KeywordDoc:
    """One memory version's keyword document, for `KeywordIndex.put_many`: its indexed texts as
    blind terms (keyed hashes) with their frequencies, and its length in terms."""

    tenant: str
    namespace: tuple[str, ...]
    key: str
    memory_id: str
    version: int
    policy_attributes: dict[str, Any]
    terms: dict[str, int]
    length: int


@dataclass(frozen=True)
class KeywordHit:
    namespace: tuple[str, ...]
    key: str
    memory_id: str
    version: int
    score: float  # BM25
    terms: int  # how many of the query's distinct terms the document holds


@dataclass(frozen=True)
class KeywordResult:
    """Hits best first, and the weight of the query: the summed IDF of its terms in the searched
    scope, which is what a document matching every term once at average length would score, so
    `score / query_weight` is a keyword match in about 0..1 that means the same across queries."""

    hits: list[KeywordHit]
    query_weight: float


class ItemHead(NamedTuple):
    """What a filter search reads of every live item in scope before deciding which to open:
    no sealed part. Items with equal policy attributes may share one dict (read-only). A named
    tuple: a search makes one per item in scope, and a frozen dataclass takes 5 times as long."""

    id: str
    namespace: tuple[str, ...]
    key: str
    policy_attributes: dict[str, Any]


@dataclass(frozen=True)
class FieldDoc:
    """One memory version's blind field tokens (`Sealer.field_tokens`), for `KeywordIndex.put_many`:
    what filters' equality conditions are decided on without decrypting it."""

    tenant: str
    namespace: tuple[str, ...]
    memory_id: str
    tokens: frozenset[str]


@dataclass(frozen=True)
class FieldHolderSets:
    """A `FieldHolders` read in full under a prefix: the memory versions whose field tokens are all
    written (`indexed`), and of those, which hold each token asked about."""

    indexed_ids: frozenset[str]
    holders: dict[str, frozenset[str]]

    def indexed(self, namespace: tuple[str, ...], memory_id: str) -> bool:
        return memory_id in self.indexed_ids

    def tokens_held(self, namespace: tuple[str, ...], memory_id: str) -> Collection[str]:
        return self._tokens_by_id.get(memory_id, ())

    @cached_property
    def _tokens_by_id(self) -> dict[str, set[str]]:
        """`holders` turned round, once: linear in what the index answered."""
        by_id: dict[str, set[str]] = {}
        for token, ids in self.holders.items():
            for memory_id in ids:
                by_id.setdefault(memory_id, set()).add(token)
        return by_id


def _b64(b: bytes | None) -> str | None:
    return None if b is None else base64.b64encode(b).decode("ascii")


def _unb64(s: str | None) -> bytes | None:
    return None if s is None else base64.b64decode(s)
