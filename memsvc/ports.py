"""The ports: what the service needs from the outside world, as Protocols.

Every port has a local adapter (`memsvc.adapters.local`) and an AWS one; both pass the
contract suite in `tests/contract`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any, Protocol

from memsvc.core.filters import Filter
from memsvc.core.same_fact import Verdict
from memsvc.core.sessions import SessionRecord
from memsvc.core.typed_memory import TypedMemory
from memsvc.core.workflow import PlanRecord, TaskRecord, WorkingRecord
from memsvc.core.models import (Change, ChangeKind, KeywordDoc, KeywordResult, RememberJob, StoredItem, TimelineEvent,
                                VectorHit, VectorRef, VectorWrite)

__all__ = ["ItemStore", "IndexBacklog", "DataKeyStore", "TenantConfigStore", "LocalExpiry", "ChangeFeed", "EventLog",
           "EventPublisher", "VectorIndex", "KeywordIndex", "Embedder", "KeyProvider", "Clock", "SystemClock", "Metrics",
           "OperationSample", "SameFactJudge", "RateLimiter", "RememberQueue", "SessionStore", "BusEvents",
           "WorkflowStore"]


class ItemStore(Protocol):
    """The source of truth for memories. Every call is bound to one tenant."""

    def get(self, tenant: str, namespace: tuple[str, ...], key: str) -> StoredItem | None:
        """The key's current row, tombstones and expired rows included (the service hides them)."""

    def get_many(
        self, tenant: str, refs: Sequence[tuple[tuple[str, ...], str]]
    ) -> dict[tuple[tuple[str, ...], str], StoredItem]: ...

    def get_by_id(self, tenant: str, memory_id: str) -> StoredItem | None: ...

    def write(self, item: StoredItem, *, kind: ChangeKind, old: StoredItem | None) -> None:
        """Write `item` if the key's stored version is still `old.version` (absent when `old` is
        None), and record the change in the same transaction. Raises `Conflict` otherwise."""

    def refresh_expiry(
        self, tenant: str, namespace: tuple[str, ...], key: str, *, version: int, expires_at: datetime
    ) -> bool:
        """Move a live item's expiry if it is still at `version`; no new version, no change record."""

    def record_accesses(
        self, tenant: str, accesses: Sequence[tuple[tuple[str, ...], str, str, int]], at: datetime
    ) -> None:
        """For each (namespace, key, memory id, count): add `count` to the row's `access_count` and
        set `last_accessed_at` to `at`, if the key's live row is still that memory (a newer version
        or a tombstone is left alone). No new version, no change record."""

    def scan_live(
        self, tenant: str, prefix: tuple[str, ...], now: datetime, *, page_size: int = 200
    ) -> Iterator[StoredItem]:
        """Live, unexpired items under the prefix, newest `updated_at` first, fetched lazily."""

    def list_namespaces(self, tenant: str, prefix: tuple[str, ...], now: datetime) -> list[tuple[str, ...]]:
        """Distinct namespaces under the prefix holding at least one live, unexpired item."""

    def ping(self) -> None: ...


class IndexBacklog(Protocol):
    """Which item versions have their vectors written (kept on the item rows themselves)."""

    def get(self, tenant: str, namespace: tuple[str, ...], key: str) -> StoredItem | None: ...

    def get_many(
        self, tenant: str, refs: Sequence[tuple[tuple[str, ...], str]]
    ) -> dict[tuple[tuple[str, ...], str], StoredItem]:
        """The keys' current rows, read as `get` reads them (the indexer reads a batch's at once)."""

    def mark_indexed(
        self, tenant: str, namespace: tuple[str, ...], key: str, *, version: int, fields: Sequence[str]
    ) -> bool:
        """Record that `version`'s vectors for `fields` are written, if the key is still at
        `version`; no new version, no change record. False when the item moved on."""

    def pending_index(self, tenant: str, now: datetime) -> int:
        """Live items whose current version is to be indexed and is not yet."""

    def unindexed(self, tenant: str, now: datetime, limit: int) -> list[StoredItem]: ...


class DataKeyStore(Protocol):
    """Where each tenant's wrapped data key is kept."""

    def get_wrapped_key(self, tenant: str) -> bytes | None: ...

    def put_wrapped_key_if_absent(self, tenant: str, wrapped: bytes) -> bytes:
        """Store the tenant's wrapped data key unless one exists; return the one that won."""


class TenantConfigStore(Protocol):
    """Per-tenant documents: the policy bundle and the admin settings."""

    def get_config(self, tenant: str, name: str) -> dict[str, Any] | None: ...

    def put_config(self, tenant: str, name: str, doc: dict[str, Any]) -> None: ...


class LocalExpiry(Protocol):
    """What the local sweeper needs; on AWS, DynamoDB TTL does this work."""

    def write(self, item: StoredItem, *, kind: ChangeKind, old: StoredItem | None) -> None: ...

    def expired(self, now: datetime, limit: int) -> list[StoredItem]:
        """Live rows whose TTL has passed, across tenants."""

    def purge_tombstones(self, tenant: str | None, before: datetime) -> int: ...

    def tenants_with_tombstones(self) -> list[str]: ...


class ChangeFeed(Protocol):
    """Changes in commit order, consumed at least once by named consumers."""

    def read(self, consumer: str, limit: int) -> list[Change]: ...

    def ack(self, consumer: str, upto_seq: int) -> None: ...

    def pending(self, consumer: str, tenant: str) -> int: ...

    def park(self, consumer: str, change: Change, error: str) -> None:
        """Set a poison change aside (a dead-letter record) so the consumer can move on."""


class EventLog(Protocol):
    """The event timeline: per tenant, events in `occurred_at` order, recorded exactly once.

    Written by one consumer of the change feed; read by `GET /v1/memories/events`.
    """

    def record(self, events: Sequence[TimelineEvent]) -> list[TimelineEvent]:
        """Append `events` (in the order given, per tenant), each stamped with `occurred_at` =
        max(its `changed_at`, the tenant's last stamp + 1 µs), atomically with that stamp. An
        event whose id the log already holds is not recorded again. Returns every event as the
        log holds it (stamped), in input order, replays included."""

    def scan(
        self,
        tenant: str,
        prefix: tuple[str, ...],
        *,
        kinds: frozenset[str],
        start_after: tuple[datetime, str] | None = None,
        after: datetime | None = None,
        before: datetime | None = None,
        page_size: int = 100,
    ) -> Iterator[TimelineEvent]:
        """The tenant's events under `prefix` of these kinds, in (`occurred_at`, `id`) order,
        strictly after `start_after` and `after` and strictly before `before`, fetched lazily.
        Never yields an event stamped below one it has already yielded."""

    def purge(self, tenant: str, before: datetime) -> int:
        """Drop events stamped before `before` (retention); 0 where the database expires them."""

    def tenants(self) -> list[str]:
        """Tenants holding events (for the retention sweep); [] where the database expires them."""


class EventPublisher(Protocol):
    """Publishes recorded timeline events outside the service (EventBridge, a JSONL file)."""

    def publish(self, events: Sequence[TimelineEvent]) -> list[TimelineEvent]:
        """Publish each event once, retrying what fails; returns those that still failed."""


class VectorIndex(Protocol):
    """Derived from the item store, keyed by (memory id, field). A memory id is new for every
    write, so versions never share a vector; the service decides which ids are current."""

    max_top_k: int
    # Whether a query answering fewer than `top_k` hits has found every match. An index that
    # filters during an approximate search (S3 Vectors' CLASSIC mode) can come up short.
    short_page_is_end: bool

    def put_many(self, writes: Sequence[VectorWrite]) -> None:
        """Write these memory versions' vectors, as few requests as the index allows. Idempotent.
        Raises `InvalidArgument`, before writing anything, if the index can never hold one of them."""

    def delete_many(self, refs: Sequence[VectorRef]) -> None:
        """Remove these vectors (absent ones are fine), as few requests as the index allows."""

    def query(
        self,
        tenant: str,
        prefix: tuple[str, ...],
        pushdown: Filter,
        vector: Sequence[float],
        top_k: int,
    ) -> list[VectorHit]:
        """Best `top_k` vectors (not memories) by cosine similarity, best first. Fewer than `top_k`
        means no more match only where `short_page_is_end` says so."""

    def vectors_of(self, tenant: str, refs: Sequence[tuple[str, str]]) -> dict[tuple[str, str], list[float]]:
        """The stored vectors of these (memory id, field) pairs, unit length; absent ones are left out."""

    def ping(self) -> None: ...


class KeywordIndex(Protocol):
    """Blind-term postings, derived from the item store like the vectors: one document per memory
    version (its indexed texts), keyed by memory id. Terms are keyed hashes (`Sealer.term_id`),
    never words. Writes and deletes are idempotent, and safe to repeat after a crash midway."""

    def put_many(self, docs: Sequence[KeywordDoc]) -> None:
        """Index these memory versions (one already indexed is left as it is)."""

    def delete_many(self, tenant: str, memory_ids: Sequence[str]) -> None:
        """Remove these memory versions' documents (absent ones are fine)."""

    def delete_tenant(self, tenant: str) -> int:
        """Remove every document of the tenant (keyword indexing turned off); returns how many."""

    def query(
        self, tenant: str, prefix: tuple[str, ...], pushdown: Filter, terms: Sequence[str], top_k: int
    ) -> KeywordResult:
        """The best `top_k` documents under `prefix` by BM25 over `terms` (distinct), best first.
        Document frequencies, document count and average length are those of the documents under
        `prefix`, so a score says nothing about documents outside what was searched."""

    def ping(self) -> None: ...


class Embedder(Protocol):
    model_id: str
    dimension: int

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        """One unit-length vector per text, in order."""


class KeyProvider(Protocol):
    """Wraps and unwraps per-tenant data keys with a key-encryption key it never reveals."""

    def generate_data_key(self, tenant: str) -> tuple[bytes, bytes]:
        """A fresh 256-bit data key: (plaintext, wrapped)."""

    def decrypt_data_key(self, tenant: str, wrapped: bytes) -> bytes: ...


@dataclass(frozen=True)
class OperationSample:
    """One answered API operation, as seed 001's metrics see it. Every field is from a small fixed
    set or is the tenant id: nothing a caller stored or asked for (no namespace, key, value or query)."""

    operation: str  # the route template, `POST /v1/memories/search`; `UNMATCHED` when no route matched
    tenant: str  # the caller's tenant id; `-` when the caller is not known (no route, or refused identity)
    status: int
    code: str | None  # the error code of a failed answer (`NOT_FOUND`), else None
    latency_ms: float
    results: Mapping[str, int] | None = None  # search and recall: results per layer, and `all`


class Metrics(Protocol):
    """Seed 001's metrics (`memory.operations.*`, `memory.search.results`): pushed as CloudWatch EMF
    on AWS, scraped from `GET /metrics` locally."""

    def record(self, sample: OperationSample) -> None: ...

    def exposition(self) -> tuple[bytes, str] | None:
        """The metrics in Prometheus' text format and its content type, where they are scraped;
        None where they are pushed."""

    def count(self, name: str, tenant: str, n: int = 1) -> None:
        """Add `n` to a named counter of the tenant's (`memory.promotion.blocked`)."""

class SameFactJudge(Protocol):
    """Seed 002's same-fact classifier, asked about a candidate and a neighbour in the check range."""

    def judge(self, tenant: str, existing: TypedMemory, candidate: TypedMemory) -> Verdict | None:
        """Same fact, contradiction or different; None when no answer came (a timeout, a refusal,
        an unreadable answer): the caller then creates a new memory, so nothing is ever lost."""


class RateLimiter(Protocol):
    """Counts uses per (tenant, subject, fixed window)."""

    def try_acquire(self, tenant: str, subject: str, window: int, limit: int, expires_at: datetime) -> bool:
        """Count one use in `window` (a window number: e.g. epoch hours) if fewer than `limit` were
        counted there; False, counting nothing, when the window is full. `expires_at`: when the
        counter may be forgotten."""


class RememberQueue(Protocol):
    """Durable hand-off of `remember` calls with `wait: false` to a background worker."""

    def enqueue(self, job: RememberJob) -> None:
        """Store the job durably (it survives the process), then return."""


class SessionStore(Protocol):
    """Session records per (tenant, user), and the appends that number a session's messages.
    A message is an item (`core.sessions.messages_namespace`) in the item store's own table, so
    that one transaction moves the session's counter and writes the message's item and its change."""

    def create(self, record: SessionRecord) -> None:
        """Raises `Conflict` when the session exists."""

    def get(self, tenant: str, user_id: str, session_id: str) -> SessionRecord | None: ...

    def update(self, record: SessionRecord, *, expected_version: int) -> None:
        """Replace what the API changes (sealed, agent id, times, version, close and deletion
        marks), never `seq`, if the stored version is `expected_version`; `Conflict` otherwise
        (also when the session is gone)."""

    def list(self, tenant: str, user_id: str, *, agent_id: str | None, limit: int,
             after: tuple[datetime, str] | None) -> list[SessionRecord]:
        """The user's sessions by `last_interaction` newest first (then session id), strictly
        after the `(last_interaction, session_id)` position `after`."""

    def delete(self, tenant: str, user_id: str, session_id: str) -> None:
        """Remove the record (absent is fine)."""

    def append(self, tenant: str, user_id: str, session_id: str, at: datetime,
               message: Callable[[int, StoredItem | None], StoredItem]) -> StoredItem | None:
        """Atomically: take the session's next seq, write `message(seq, row at that key)` as an
        `add` through the item store (change feed included), move `last_interaction` to `at`.
        None when the session does not exist. Raises `StoreUnavailable` when the store fails;
        then nothing is written."""

    def messages(self, tenant: str, namespace: tuple[str, ...], after_key: str, limit: int) -> list[StoredItem]:
        """Live items of the namespace with keys above `after_key`, in key order."""

    def due_for_deletion(self, now: datetime, limit: int) -> list[SessionRecord]:
        """Sessions of every tenant whose `delete_after` has passed."""


class BusEvents(Protocol):
    """Workflow lifecycle events (`memsvc.session.closed`, `memsvc.plan.status`,
    `memsvc.task-context.deleted`) on the event bus, published after the write they describe
    committed: EventBridge on AWS, the events file locally. Details name objects, never carry
    their values. Best effort: a failure is logged, never raised."""

    def publish(self, detail_type: str, detail: dict[str, Any]) -> None: ...


class WorkflowStore(Protocol):
    """Seed 003's agent workflow state (`memsvc.core.workflow`). Conditional writes raise
    `StaleRecord` when the record is not as `previous` says (absent when None)."""

    def get_task(self, tenant: str, task_id: str) -> TaskRecord | None: ...

    def task_of_subtask(self, tenant: str, subtask_id: str) -> str | None:
        """The id of the task context whose `sub_tasks` holds `subtask_id`."""

    def save_task(self, task: TaskRecord, *, previous: TaskRecord | None) -> None:
        """Write `task` and its sub-task index in one transaction. Raises `StaleRecord`, or
        `Conflict` naming the sub-task when one of its new sub-tasks belongs to another task."""

    def delete_task(self, task: TaskRecord) -> None:
        """Delete `task` (still at its version) and its sub-task index, in one transaction."""

    def get_plan(self, tenant: str, user: str, plan_id: str) -> PlanRecord | None: ...

    def save_plan(self, plan: PlanRecord, *, previous: PlanRecord | None) -> None: ...

    def delete_plan(self, plan: PlanRecord) -> None:
        """Delete the plan (still at its version), then its working memory."""

    def list_plans(self, tenant: str, user: str, *, status: str | None, after: tuple[int, str] | None,
                   limit: int) -> list[PlanRecord]:
        """The user's plans (of `status`, when given), newest `created_at` first, strictly after
        the position `after` = (created_at µs, plan_id) of the last one of the previous page."""

    def put_working(self, record: WorkingRecord) -> int:
        """Upsert; the stored version (one more than the key's last, 1 when new) is returned."""

    def get_working(self, tenant: str, user: str, plan_id: str, key: str) -> WorkingRecord | None: ...

    def list_working(self, tenant: str, user: str, plan_id: str) -> list[WorkingRecord]:
        """Every key of the plan, by key, expired ones included (the service hides them)."""

    def delete_working(self, tenant: str, user: str, plan_id: str, keys: Sequence[str]) -> None: ...


class Clock(Protocol):
    def now(self) -> datetime: ...


class SystemClock:
    def now(self) -> datetime:
        return datetime.now(timezone.utc)
