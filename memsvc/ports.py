"""The ports: what the service needs from the outside world, as Protocols.

Every port has a local adapter (`memsvc.adapters.local`) and an AWS one; both pass the
contract suite in `tests/contract`.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any, Protocol

from memsvc.core.extraction import Candidate, ConversationMessage
from memsvc.core.filters import Filter
from memsvc.core.graph import DerivedMemory, Extraction, GraphEdge, GraphNode, Mention, ValidAt
from memsvc.core.same_fact import Verdict
from memsvc.core.sessions import SessionRecord
from memsvc.core.typed_memory import TypedMemory
from memsvc.core.workflow import PlanRecord, TaskRecord, WorkingRecord
from memsvc.core.transfer_jobs import TransferJob
from memsvc.core.models import (Change, ChangeKind, FieldDoc, ItemHead, KeywordDoc, KeywordResult, RememberJob, StoredItem, TimelineEvent,
                                VectorHit, VectorRef, VectorWrite)

__all__ = ["ItemStore", "IndexBacklog", "DataKeyStore", "TenantConfigStore", "LocalExpiry", "ChangeFeed", "EventLog",
           "EventPublisher", "VectorIndex", "KeywordIndex", "FieldHolders", "Embedder", "KeyProvider", "Clock",
           "SystemClock", "Metrics", "OperationSample", "GraphQuerySample", "SameFactJudge", "RateLimiter",
           "RememberQueue", "SessionStore", "BusEvents", "WorkflowStore", "EntityExtractor", "GraphStore",
           "Reranker", "LanguageModel", "MemoryExtractor", "TransferStore", "ExportKeys",
           "UserDataStores"]


class ItemStore(Protocol):
    """The source of truth for memories. Every call is bound to one tenant."""

    def get(self, tenant: str, namespace: tuple[str, ...], key: str) -> StoredItem | None:
        """The key's current row, tombstones and expired rows included (the service hides them)."""

    def get_many(
        self, tenant: str, refs: Sequence[tuple[tuple[str, ...], str]]
    ) -> dict[tuple[tuple[str, ...], str], StoredItem]: ...

    def get_by_id(self, tenant: str, memory_id: str) -> StoredItem | None:
        """The row whose current version has this id (a tombstone included), or None: an older
        version's id names nothing. On DynamoDB through an index that follows writes by a moment."""

    def write(self, item: StoredItem, *, kind: ChangeKind, old: StoredItem | None) -> None:
        """Write `item` if the key's stored version is still `old.version` (absent when `old` is
        None), and record the change in the same transaction. Raises `Conflict` otherwise. Its
        attempt and quarantine marks are not written: a version starts afresh."""

    def write_many(self, writes: Sequence[tuple[StoredItem, ChangeKind, StoredItem | None]]
                   ) -> list[Exception | None]:
        """`write` of each (item, kind, old), of distinct keys, in one transaction where the store
        has one that holds them (an import's page: one commit, not one per item); in order, None
        for each written, or the `Conflict` (or other failure) of one that wrote nothing."""

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

    def list_namespaces(self, tenant: str, prefix: tuple[str, ...], now: datetime, *,
                        keep: Callable[[tuple[str, ...]], bool] | None = None) -> Iterator[tuple[str, ...]]:
        """Distinct namespaces under the prefix holding at least one live, unexpired item, in
        ascending order, lazily. `keep`, if given, is asked about each namespace in that order
        before anything else is read about it: a namespace it refuses costs no read (on DynamoDB,
        finding a live item is a Query per namespace)."""

    def count_live(self, tenant: str, namespace: tuple[str, ...], now: datetime, cap: int) -> int:
        """The live, unexpired items of exactly this namespace (not below it), counted up to `cap`:
        `cap` means at least that many. Work in proportion to the count, bounded by the cap; a
        store whose expired rows wait long for removal (DynamoDB's TTL) bounds the rows it reads
        past them too (a small multiple of the cap), and may then count low, never high."""

    def namespaces_after(self, tenant: str, prefix: tuple[str, ...], after: tuple[str, ...] | None,
                         limit: int) -> list[tuple[str, ...]]:
        """Up to `limit` namespaces under the prefix that hold rows (live or not), in the order of
        their encoded form, after `after` (from the first when None): a walk over a tenant's
        namespaces a page at a time, each page's work in proportion to it (an export's)."""

    def time_span(self, tenant: str) -> tuple[datetime, datetime] | None:
        """(earliest, latest): bounds of the times of the tenant's current memories (each one's
        `[valid_start, valid_end)`, `StoredItem`), in O(log n); None when the store cannot tell
        (rows from before those bounds, whose times are in their sealed values; DynamoDB, which
        has no index for it) or holds none."""

    def live_heads(self, tenant: str, prefix: tuple[str, ...], now: datetime) -> Iterator[ItemHead]:
        """Live, unexpired items under the prefix without their sealed parts, in `scan_live`'s
        order (newest `updated_at` first), fetched lazily."""

    def ping(self) -> None: ...


class IndexBacklog(Protocol):
    """Each version's indexing state, kept on the item rows themselves: indexed (`indexed_fields`),
    an attempt in flight (`index_attempt`), quarantined (`index_error`). A write starts its version
    afresh, so a rewritten or deleted key leaves quarantine by itself."""

    def ping(self) -> None: ...

    def get(self, tenant: str, namespace: tuple[str, ...], key: str) -> StoredItem | None: ...

    def get_many(
        self, tenant: str, refs: Sequence[tuple[tuple[str, ...], str]]
    ) -> dict[tuple[tuple[str, ...], str], StoredItem]:
        """The keys' current rows, read as `get` reads them (the indexer reads a batch's at once)."""

    def mark_indexed(self, marks: Sequence[tuple[StoredItem, Sequence[str]]]) -> list[bool]:
        """For each (version, fields): record that the version's vectors for `fields` are written,
        and end its attempt, if its key is still at that version and it is not quarantined; no new
        version, no change record. Returns whether each was marked, in order (a batch's marks in
        one write where the store has transactions)."""

    def pending_index(self, tenant: str, now: datetime) -> int:
        """Live items whose current version is to be indexed and is not yet (quarantined ones are
        not pending)."""

    def unindexed(self, tenant: str, now: datetime, limit: int) -> list[StoredItem]:
        """Some of the versions `pending_index` counts."""

    def begin_attempts(self, items: Sequence[StoredItem], attempt: str) -> None:
        """Persist, before any work on them, that these versions are being indexed (`index_attempt`
        = `attempt`, an `attempt_mark`),
        each while it is still its key's version; a process that dies midway leaves the mark for the
        next one to find. No new version, no change record."""

    def end_attempts(self, items: Sequence[StoredItem]) -> None:
        """Clear the attempt marks of these versions (an attempt that ended without `mark_indexed`
        or `quarantine`: it will be retried, or needed no mark)."""

    def quarantine(self, item: StoredItem, reason: str, at: datetime) -> bool:
        """Set the version aside (`index_error` = `reason`, `quarantined_at` = `at`; its attempt
        ended), if the key is still at it, live and not quarantined, and record an `index_failed`
        change of it (the timeline's). It leaves `pending_index` for `quarantined`. False
        otherwise."""

    def release(self, item: StoredItem) -> bool:
        """An admin's retry: clear the version's quarantine, if the key is still at it and it is
        quarantined, and record an `index_retry` change of it (the indexer's). False otherwise."""

    def quarantined(self, tenant: str, now: datetime, limit: int) -> tuple[int, list[StoredItem]]:
        """How many live versions of the tenant are quarantined, and up to `limit` of them (the
        oldest locally; on DynamoDB the first in its index's key order), by `quarantined_at`."""


class DataKeyStore(Protocol):
    """Where each tenant's wrapped data key is kept."""

    def get_wrapped_key(self, tenant: str) -> bytes | None: ...

    def put_wrapped_key_if_absent(self, tenant: str, wrapped: bytes) -> bytes:
        """Store the tenant's wrapped data key unless one exists; return the one that won."""


class TenantConfigStore(Protocol):
    """Per-tenant documents: the policy bundle and the admin settings."""

    def get_config(self, tenant: str, name: str) -> dict[str, Any] | None: ...

    def put_config(self, tenant: str, name: str, doc: dict[str, Any]) -> None: ...

    def swap_config(self, tenant: str, name: str, doc: dict[str, Any], *, expected: dict[str, Any] | None) -> bool:
        """Store `doc` only if the stored document is still `expected` (None: there is none);
        False, storing nothing, when another writer changed it first."""


class LocalExpiry(Protocol):
    """What the local sweeper needs; on AWS, DynamoDB TTL does this work."""

    def write(self, item: StoredItem, *, kind: ChangeKind, old: StoredItem | None) -> None: ...

    def expired(self, now: datetime, limit: int) -> list[StoredItem]:
        """Live rows whose TTL has passed, across tenants."""

    def purge_tombstones(self, tenant: str | None, before: datetime) -> int: ...

    def tenants_with_tombstones(self) -> list[str]: ...


class ChangeFeed(Protocol):
    """Changes in commit order, consumed at least once by named consumers, each tenant's changes a
    lane of their own: read and acknowledged apart from other tenants'."""

    def lanes(self, consumer: str) -> list[str]:
        """The tenants with changes the consumer has not acknowledged, in name order."""

    def read(self, consumer: str, limit: int, *, tenant: str | None = None,
             max_weight: int | None = None) -> list[Change]:
        """The next `limit` changes of the tenant's lane (None: of every lane, in feed order), cut
        after the first change that brings their `Change.weight` to `max_weight`."""

    def ack(self, consumer: str, tenant: str, upto_seq: int) -> None: ...

    def park(self, consumer: str, change: Change, error: str) -> None:
        """Set a poison change aside (a dead-letter record) so the consumer can move on."""


class EventLog(Protocol):
    """The event timeline: per tenant, events in `occurred_at` order, recorded exactly once.

    Written by one consumer of the change feed; read by `GET /v1/memories/events` and, one key at
    a time, `GET /v1/memories/history`; search and recall with `known_at` read a scope's version
    events since then (`scan`, bounded) and each changed key's version then (`history`, one entry).
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
        max_rows: int | None = None,
    ) -> Iterator[TimelineEvent]:
        """The tenant's events under `prefix` of these kinds, in (`occurred_at`, `id`) order,
        strictly after `start_after` and `after` and strictly before `before`, fetched lazily.
        Never yields an event stamped below one it has already yielded. With `max_rows`: raises
        `core.timeline.ScanTooWide` rather than read more than that many rows, counting those of
        other kinds or namespaces that the scan's partition or index range holds and skips (a
        one-segment prefix reads the tenant's, one deeper than two segments its two-segment root's)."""

    def history(
        self, tenant: str, namespace: tuple[str, ...], key: str, *,
        before: tuple[datetime, str] | None = None, limit: int = 20,
    ) -> list[TimelineEvent]:
        """One key's version events (add, update, delete, expired), newest first, strictly before
        `before` in (`occurred_at`, `id`) order, at most `limit`. Read through a per-key index:
        the work is linear in `limit`, never in the tenant's or the namespace's history."""

    def versions_after(
        self, tenant: str, namespace: tuple[str, ...], key: str, *,
        after: tuple[datetime, str] | None, limit: int,
    ) -> list[TimelineEvent]:
        """`history` read the other way: the key's version events, oldest first, strictly after
        `after` in (`occurred_at`, `id`) order, at most `limit` (an export walks a key's history)."""

    def restore(self, events: Sequence[TimelineEvent]) -> list[bool]:
        """Insert events carried from another timeline (an import), in the order given per tenant,
        each stamped as `record` stamps (its own `occurred_at`, moved 1 µs past the tenant's latest
        stamp where it is not after it: nothing is inserted behind a reader); `changed_at` keeps
        when the change happened. An event whose id the log already holds is left as it is. In
        input order: True for each inserted."""

    def held(self, tenant: str, event_ids: Sequence[str]) -> set[str]:
        """Which of these event ids the tenant's log holds."""

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

    def exact(self, tenant: str) -> bool:
        """Whether `query` finds this tenant's exact best `top_k` (no vector it leaves out scores
        above its last hit): the local index below its ANN graph's size; never S3 Vectors."""

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

    def mean_direction(self, tenant: str, page: Sequence[tuple[str, str]]) -> list[float] | None:
        """The unit mean direction of `page`'s stored vectors (`core.ranking.mean_direction`,
        hybrid's distinct cosine); absent entries do not count; None when none is stored."""

    def cosines(self, tenant: str, directions: Sequence[Sequence[float]],
                refs: Sequence[tuple[str, str]]) -> dict[tuple[str, str], list[float]]:
        """Each of `refs`' stored vector's cosine with each of the unit `directions`, in their order
        (hybrid's distinct cosine: with a `mean_direction`, `core.ranking.commonness`, and with the
        query's vector for a memory the index did not hand over); absent refs are left out."""

    def ping(self) -> None: ...


class FieldHolders(Protocol):
    """`KeywordIndex.field_holders`' answer about the memory versions under a prefix (asked only
    about versions under it)."""

    def indexed(self, namespace: tuple[str, ...], memory_id: str) -> bool:
        """Whether the version's field tokens are all written (and so decide its filters)."""

    def tokens_held(self, namespace: tuple[str, ...], memory_id: str) -> Collection[str]:
        """The tokens the version holds: every one of those asked about that it holds, and
        perhaps others. A filter checks an item against a condition's tokens with it in the
        item's own token count, however many tokens the condition lists."""


class KeywordIndex(Protocol):
    """Blind-term postings, derived from the item store like the vectors: one document per memory
    version (its indexed texts), keyed by memory id. Terms are keyed hashes (`Sealer.term_id`),
    never words. Writes and deletes are idempotent, and safe to repeat after a crash midway."""

    def put_many(self, docs: Sequence[KeywordDoc], fields: Sequence[FieldDoc] = ()) -> None:
        """Index these memory versions' documents and field tokens (one already indexed is left as
        it is). A version counts as holding field tokens (`field_holders`) only once all its tokens
        are readable, so a search never sees part of them."""

    def replace_many(self, docs: Sequence[KeywordDoc], fields: Sequence[FieldDoc] = ()) -> None:
        """Index these memory versions' documents in place of the ones they have (a message whose
        turn before changed), and their field tokens as `put_many` does; an absent one is put. A
        search at any moment finds the version by its old document or by its new one, never by
        neither: the new postings land before the stale ones (old terms not in the new document)
        go. A delete of the version that overlaps a replacement wins: nothing of either document
        is left. Of two replacements of one version at once, the one that finishes last stands,
        whole (docs/search-and-retrieval.md, "Replacing a keyword document")."""

    def delete_many(self, tenant: str, memory_ids: Sequence[str]) -> None:
        """Remove these memory versions' documents and field tokens (absent ones are fine)."""

    def delete_tenant(self, tenant: str) -> int:
        """Remove every document and field token of the tenant (keyword indexing turned off);
        returns how many documents."""

    # How many field tokens one `field_holders` call may look up; None: any. A lookup that is a
    # request of its own (DynamoDB: a Query per token) is bounded per search; a filter's conditions
    # past it are decided on the values instead, as exactly.
    field_tokens_per_search: int | None

    def field_holders(self, tenant: str, prefix: tuple[str, ...], tokens: Sequence[str]) -> FieldHolders:
        """Under `prefix`: which memory versions have field tokens, and which of them hold each of
        `tokens` (a consistent read: what a finished `put_many` wrote is seen)."""

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


@dataclass(frozen=True)
class GraphQuerySample:
    """One knowledge-graph query, as seed 001's graph metrics see it (`graph_query_duration_seconds`,
    `graph_query_result_count`, `graph_traversal_depth`)."""

    query: str  # entities, related, path, neighbours, or recall (recall's graph expansion)
    tenant: str
    duration_seconds: float
    results: int  # entities, memories, or a path's entities
    depth: int  # hops expanded (0 for an entity lookup)


class Metrics(Protocol):
    """Seed 001's metrics (`memory.operations.*`, `memory.search.results`): pushed as CloudWatch EMF
    on AWS, scraped from `GET /metrics` locally."""

    def record(self, sample: OperationSample) -> None: ...

    def exposition(self) -> tuple[bytes, str] | None:
        """The metrics in Prometheus' text format and its content type, where they are scraped;
        None where they are pushed."""

    def count(self, name: str, tenant: str, n: int = 1) -> None:
        """Add `n` to a named counter of the tenant's (`memory.promotion.blocked`)."""

    def graph_query(self, sample: GraphQuerySample) -> None: ...

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

    def enqueue(self, job: RememberJob, *, delay_seconds: int = 0) -> None:
        """Store the job durably (it survives the process), then return. It runs no sooner than
        `delay_seconds` (at most 900) from now."""


class SessionStore(Protocol):
    """Session records per (tenant, user), and the appends that number a session's messages.
    A message is an item (`core.sessions.messages_namespace`) in the item store's own table, so
    that one transaction moves the session's counter and writes the message's item and its change."""

    def create(self, record: SessionRecord) -> None:
        """Raises `Conflict` when the session exists."""

    def get(self, tenant: str, user_id: str, session_id: str) -> SessionRecord | None: ...

    def update(self, record: SessionRecord, *, expected_version: int) -> None:
        """Replace what the API changes (sealed, agent id, times, version, close and deletion
        marks, the extract setting), never `seq` or `extracted_seq`, if the stored version is `expected_version`; `Conflict` otherwise
        (also when the session is gone)."""

    def claim_extraction(self, tenant: str, user_id: str, session_id: str, *, from_seq: int, now: datetime,
                         until: datetime) -> bool:
        """Take the lease on extracting the batch after `from_seq` until `until`, if `extracted_seq`
        is still `from_seq` and no other run holds an unexpired lease (no other field, no new
        version); False otherwise. A run that dies leaves the lease to expire."""

    def mark_extracted(self, tenant: str, user_id: str, session_id: str, *, from_seq: int, to_seq: int) -> bool:
        """Move the session's `extracted_seq` from `from_seq` to `to_seq` and end the lease (no other
        field, no new version), if it is still at `from_seq`; False otherwise (another run moved
        it, or the session is gone)."""

    def list(self, tenant: str, user_id: str, *, agent_id: str | None, limit: int,
             after: tuple[datetime, str] | None) -> list[SessionRecord]:
        """The user's sessions by `last_interaction` newest first (then session id), strictly
        after the `(last_interaction, session_id)` position `after`."""

    def delete(self, tenant: str, user_id: str, session_id: str) -> None:
        """Remove the record (absent is fine)."""

    def users_after(self, tenant: str, after: str | None, limit: int) -> list[str]:
        """Up to `limit` users of the tenant who have a session (or had one: a listing may keep a
        user whose sessions were deleted), in the store's order, after `after`: how an export
        finds the sessions of a user who has no memory and no message."""

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

    def list_tasks(self, tenant: str, *, creator: str | None, after: tuple[str, str] | None,
                   limit: int) -> list[TaskRecord]:
        """The tenant's task contexts (of `creator`, when given) by (creator, task_id), strictly
        after the position `after`: a keyed listing, never a scan (export, issue 26)."""

    def get_plan(self, tenant: str, user: str, plan_id: str) -> PlanRecord | None: ...

    def save_plan(self, plan: PlanRecord, *, previous: PlanRecord | None) -> None: ...

    def delete_plan(self, plan: PlanRecord) -> None:
        """Delete the plan (still at its version), then its working memory."""

    def list_plans(self, tenant: str, user: str, *, status: str | None, after: tuple[int, str] | None,
                   limit: int) -> list[PlanRecord]:
        """The user's plans (of `status`, when given), newest `created_at` first, strictly after
        the position `after` = (created_at µs, plan_id) of the last one of the previous page."""

    def plan_users_after(self, tenant: str, after: str | None, limit: int) -> list[str]:
        """Up to `limit` users of the tenant who have a plan (or had one), in the store's order,
        after `after`: how an export finds the plans of a user who has no memory and no message."""

    def put_working(self, record: WorkingRecord, *, expected_version: int | None = None) -> int | None:
        """Upsert, only while the user's plan `record.plan_id` exists (checked in the same
        transaction, so a put racing the plan's deletion cannot outlive it); the stored version
        (one more than the key's last, 1 when new) is returned, None when there is no such plan.
        With `expected_version`, only over that stored version (in the same transaction). Raises
        `StaleRecord` when a concurrent write won, or the key is not at `expected_version`."""

    def get_working(self, tenant: str, user: str, plan_id: str, key: str) -> WorkingRecord | None: ...

    def list_working(self, tenant: str, user: str, plan_id: str) -> list[WorkingRecord]:
        """Every key of the plan, by key, expired ones included (the service hides them)."""

    def iter_working(self, tenant: str, user: str, plan_id: str, *, after: str | None) -> Iterator[WorkingRecord]:
        """The plan's keys after `after`, by key, expired ones included, fetched lazily (a page
        of the store at a time), so a reader that stops early reads little more than it used."""

    def delete_working(self, tenant: str, user: str, plan_id: str, keys: Sequence[str]) -> None: ...

    def add_semantic_hash(self, tenant: str, user: str, digest: str, key: str) -> None:
        """Remember that the user's semantic memory `key` may hold content with SHA-256 `digest`
        (idempotent). A pointer only: readers check the memory itself."""

    def semantic_hash_keys(self, tenant: str, user: str, digest: str) -> list[str]:
        """The keys `add_semantic_hash` named for `digest` (one keyed read, never a scan)."""

    def drop_semantic_hash(self, tenant: str, user: str, digest: str, key: str) -> None: ...


class EntityExtractor(Protocol):
    """Reads entities and relations out of a memory's text (issue 15). Called by the indexer, off
    the write path: locally the deterministic `adapters.local.entity_patterns`, on AWS a Bedrock
    Converse call."""

    def extract(self, text: str) -> Extraction:
        """What `text` names. Deterministic for a given text where the extractor can be (a retried
        change must not change the graph). Raises `RateLimited` when throttled and
        `ProviderError` when the provider fails (the indexer retries the change later); an answer
        that cannot be read is an empty `Extraction`, never an error (retrying would not help)."""


class GraphStore(Protocol):
    """The knowledge graph's rows (`memsvc.core.graph`): nodes, mentions and edges per tenant and
    namespace, and one `DerivedMemory` marker per item key whose live version has derived rows. Names are never
    given to a store: ids are keyed hashes and display names are sealed (`GraphNode.name_ct`).

    Invariants every write keeps (the integrity scan repairs what a crash or a bug broke):
    - a node (tenant, namespace, entity id) exists while a mention in that namespace names it or
      it is `explicit` there;
    - every edge's source and target have a node in the edge's namespace;
    - a derived edge's and a mention's memory is its key's `DerivedMemory`.
    """

    def replace_memory(self, memory: DerivedMemory, nodes: Sequence[GraphNode], edges: Sequence[GraphEdge]) -> bool:
        """Atomically: if the key's marker is absent or at a lower version than `memory.version`,
        remove the mentions and derived edges of the key's earlier version, write a mention of
        `memory` for each node, upsert the nodes (a new node takes the given type; an existing one
        keeps its type and `explicit`), write the edges, drop the nodes left with no mention and
        not explicit together with every edge of their namespace touching them, and set the
        marker to `memory`. Otherwise change nothing (a replay, or an older version delivered
        late) and return False. Every node and edge is of `memory`'s tenant and namespace and
        edges' `key`/`memory_id` are `memory`'s (and each keeps its `valid_from`/`valid_to`); at most `MAX_ENTITIES_PER_MEMORY` nodes and
        `MAX_RELATIONS_PER_MEMORY` edges, and every edge's ends are among `nodes`."""

    def replace_many(self, memories: Sequence[tuple[DerivedMemory, Sequence[GraphNode], Sequence[GraphEdge]]]
                     ) -> list[bool | Exception]:
        """`replace_memory` for each (memory, nodes, edges) of distinct keys, in one transaction
        where the store has one that holds them; in order, whether each replaced, or the
        exception its replacement raised (it changed nothing; the others stand)."""

    def remove_memory(self, memory: DerivedMemory) -> bool:
        """The key was deleted or expired (`memory` is its tombstone): atomically remove the key's
        mentions and derived edges, the nodes left with no mention and not explicit (with every
        edge of their namespace touching them), and the key's marker, unless the marker is at a
        higher version than `memory.version` (a newer write's rows stay). No marker is left
        behind: a replayed older write is refused by the indexer, which reads the item store
        first (`GraphIndexer`). False when nothing was removed."""

    def put_entity(self, node: GraphNode) -> None:
        """Make the node explicit in its namespace (creating it, or setting `explicit` and `type`,
        and the sealed name, of the existing one). Idempotent."""

    def delete_entity(self, tenant: str, namespace: tuple[str, ...], entity_id: str) -> bool:
        """Remove the node's explicit mark and every explicit edge of the namespace touching it;
        the node itself goes too unless a mention keeps it (then its derived edges stay). False
        when the namespace had no explicit node of that id."""

    def put_relation(self, edge: GraphEdge) -> list[str]:
        """Write an explicit edge (`key` and `memory_id` None) if both its ends have a node in its
        namespace; returns the missing end ids (source first), writing nothing, when not.
        Atomic: an end deleted concurrently is either seen missing or keeps the edge valid until
        its own removal cascades. Idempotent; writing an edge that is there replaces its
        `valid_from` and `valid_to` with the given ones."""

    def delete_relation(self, edge: GraphEdge) -> bool:
        """Remove that explicit edge (derived edges go with their memory). False when absent."""

    def nodes(self, tenant: str, prefix: tuple[str, ...], entity_ids: Sequence[str]) -> list[GraphNode]:
        """The nodes of these ids in every namespace under `prefix` (one per namespace that has
        one), in (entity id, namespace) order."""

    def expand(self, tenant: str, prefix: tuple[str, ...], entity_ids: Sequence[str], *,
               limit: int, valid: ValidAt | None = None) -> list[GraphEdge]:
        """Edges in namespaces under `prefix` whose source or target is among `entity_ids` (one
        batched read: the traversals call it once per hop), at most `limit` of them, in no set
        order. An edge touching two of the ids is returned once. With `valid`, only the edges it
        admits (and `limit` counts those)."""

    def neighbours(self, tenant: str, prefix: tuple[str, ...], entity_id: str, *, direction: str,
                   relation: str | None, valid: ValidAt, limit: int, after: list[str | int] | None
                   ) -> tuple[list[GraphEdge], list[str | int] | None]:
        """A page of the edges in namespaces under `prefix` with `entity_id` at the end `direction`
        names (`out`: the source, `in`: the target, `both`), of type `relation` when given, that
        `valid` admits, in an order the store fixes (the same while nothing is written), starting
        after `after` (a position this method returned for the same arguments; None: the first
        page). At most `limit` edges, from at most `limit + 1` rows read through an index of the
        entity's edges: never a scan of all of them. Returns the page and the position after it,
        None at the end; a page may hold fewer than `limit` edges, or none, before the end (the
        rows read were of other types, directions or times)."""

    def memories_of(self, tenant: str, prefix: tuple[str, ...], entity_ids: Sequence[str], *,
                    limit: int) -> list[Mention]:
        """Mentions in namespaces under `prefix` of these entities, at most `limit`, in no set order."""

    def entities_of_memories(self, tenant: str, refs: Sequence[tuple[tuple[str, ...], str]]) -> list[Mention]:
        """The mentions derived from these item keys (namespace, key): their current versions'."""

    def derived_memories(self, tenant: str) -> Iterator[DerivedMemory]:
        """Every key's marker (the integrity scan checks them against the item store), fetched lazily."""

    def explicit_rows(self, tenant: str, prefix: tuple[str, ...]) -> tuple[list[GraphNode], list[GraphEdge]]:
        """What callers wrote under `prefix` (an export's): every explicit node, and every explicit
        edge with the nodes at its ends (explicit or not). One read of the tenant's nodes, as
        `integrity_scan`'s: fit for tenants of about 10k nodes."""

    def integrity_scan(self, tenant: str) -> dict[str, int]:
        """Count and remove what breaks an invariant: `edges` with an end missing from their
        namespace or a memory that is not its key's current marker, `mentions` of a memory that
        is not, and `nodes` with no mention that are not explicit. Returns those three counts."""

    def stats(self) -> dict[str, int]:
        """`nodes`, `edges` and `mentions` over every tenant, for operators and restores (cheap: an
        estimate where the database only keeps one). Never published: /health only pings."""

    def ping(self) -> None: ...


class Clock(Protocol):
    def now(self) -> datetime: ...


class SystemClock:
    def now(self) -> datetime:
        return datetime.now(timezone.utc)


class Reranker(Protocol):
    """A cross-encoder that scores texts against a query (issue 23's rerank step): Bedrock's
    Rerank API on AWS, an HTTP `/rerank` endpoint the operator runs locally. The texts are
    memories' plaintext: they leave the process for the model the deployment names."""

    def rerank(self, query: str, texts: Sequence[str], *, model_id: str | None) -> list[float]:
        """One relevance score per text, in input order, higher is more relevant. `model_id`: the
        tenant's choice of model, None for the deployment's. Raises on any failure (a timeout, an
        error status, an answer that does not score every text); the caller keeps its own order."""


class LanguageModel(Protocol):
    """A chat model that answers JSON (issue 24): Bedrock Converse on AWS, an OpenAI-compatible
    `/v1/chat/completions` endpoint the operator names locally (`MEMSVC_LLM_URL`). The messages
    are plaintext the caller stored: they go to the model the deployment names and nowhere else,
    never into a log."""

    model_id: str  # the deployment's model

    def chat_json(self, system: str, messages: Sequence[tuple[str, str]], *, max_tokens: int,
                  model_id: str | None = None) -> Any:
        """The JSON value (an object or an array) of the model's answer to `messages`, each a
        (role: "user" | "assistant", text) pair, under the `system` prompt, at temperature 0.
        `model_id`: a tenant's choice, None for the deployment's. The first JSON value in the
        answer's text is taken (models like to wrap it in ```json fences).
        Raises `RateLimited` when throttled, `ProviderError` otherwise: a timeout, a refused
        request, an error status, an answer cut off or holding no JSON (its message says which,
        in our words; `details["reason"]` is one of `timeout`, `unavailable`, `refused`,
        `malformed`)."""


class MemoryExtractor(Protocol):
    """Turns a conversation into candidate memories (`core.extraction`): the deterministic
    patterns locally, a language model where one is configured."""

    model_id: str  # "deterministic", or the language model's

    def extract(self, tenant: str, messages: Sequence[ConversationMessage]) -> list[Candidate]:
        """The memories worth keeping from `messages` (at most `core.extraction.MAX_CANDIDATES`),
        the most important first. Only what the user (or a named human speaker) says of
        themselves: never the assistant's own suggestions, questions or chit-chat. Raises
        `RateLimited` or `ProviderError` when a model fails (the caller retries later and loses
        nothing); an empty list when there is nothing to keep."""


class TransferStore(Protocol):
    """Export and import jobs (issue 26) and the parts of their files, per tenant. Outside the
    change feed: nothing here is indexed or put on the timeline."""

    def save_job(self, job: TransferJob, *, expected_version: int | None) -> None:
        """Write `job` if the stored one is at `expected_version` (absent when None); raises
        `Conflict` otherwise (a redelivered step lost to the one that ran)."""

    def get_job(self, tenant: str, job_id: str) -> TransferJob | None: ...

    def put_part(self, tenant: str, job_id: str, index: int, data: bytes) -> None:
        """Write (or write again) part `index` of the job's file; at most `MAX_PART_BYTES`."""

    def get_part(self, tenant: str, job_id: str, index: int) -> bytes | None: ...

    def last_part(self, tenant: str, job_id: str) -> int | None:
        """The highest index of a part of the job's file written so far (None before any)."""

    def purge_expired(self, tenant: str, now: datetime) -> int:
        """Remove the tenant's jobs past their `expires_at`, with their parts; how many jobs
        (0 where the database expires them itself)."""


class ExportKeys(Protocol):
    """Envelope keys of exports sealed under a KMS key the caller names (AWS only)."""

    def generate(self, key_id: str, tenant: str) -> tuple[bytes, bytes]:
        """A fresh 256-bit content key under `key_id`: (plaintext, wrapped). Raises
        `InvalidArgument` when the key cannot be used."""

    def decrypt(self, key_id: str, tenant: str, wrapped: bytes) -> bytes: ...


class UserDataStores(Protocol):
    """Every row of one user, store by store, for erasing the user (`service.user_erasure`):
    the rows of the user's namespaces (`["user", U, ...]`) and the rows keyed by the user id.
    Each call removes (or, for the timeline, strips) at most `limit` rows of one store, or reads
    at most `limit` rows looking for them. Repeating a call is harmless, so an erasure cut off
    midway is continued by calling again."""

    stores: tuple[str, ...]  # the store names, in the order an erasure goes through them

    def erase(self, tenant: str, user_id: str, store: str, *, erasure_id: str, limit: int,
              cursor: str | None) -> tuple[int, str | None]:
        """Remove up to `limit` of the user's rows of `store`, going on from `cursor` (None at
        first). Returns how many, and None when the store holds none of the user's rows now,
        else the cursor to go on from (opaque). The timeline's entries stay, stripped of content,
        under the namespace `["erased", erasure_id]`."""

    def finish(self, tenant: str) -> None:
        """After the last store: drop what storage keeps of removed rows beyond them (the local
        files' write-ahead logs); nothing where the database does that itself."""

    def left_for_another_pass(self, tenant: str, user_id: str) -> bool:
        """Whether a store left a row of the user's for a later pass, which the erasure must then
        make though its pass removed nothing (DynamoDB's namespace registry keeps the row of a
        namespace written again behind the memories step)."""

    def running(self) -> list[tuple[str, str]]:
        """(tenant, record name) of every erasure record (`TenantConfigStore`) whose erasure is
        still running, for a background worker to continue; [] where no worker does."""
