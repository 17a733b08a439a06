"""Changes -> vectors, keyword documents and the knowledge graph. Idempotent and version-aware:
replaying a change, or applying an older one after a newer, never puts a stale entry back; a
delete always wins over the write it follows.

A batch of changes goes through a pipeline: the items' texts read (each value decrypted once:
the graph step gets its texts from there), cut into chunks of at most `chunk_texts` texts (the
model's best batch), the chunks embedded several at once on the embedding pool, when there is
one; then the derived indexes of the whole unit of work written together, one write per store
(vectors, keyword documents with their field tokens); then each item's graph step, one write to
the graph store; and last the items are marked indexed in one write to the item store (`_mark`).
A further derived index is one more write in `_write`.

Bounded work (issue 22). Work on one version has a budget (`memsvc.core.index_budget.ItemBudget`:
time, checked between stages, and bounds on what each stage produces), and a version that goes
over it, or fails on its own, is quarantined: set aside on its row, listed in the index status,
put on the timeline (`index_failed`), retried by an admin, while everything behind it goes on.
A version is only ever blamed for what it did alone:
- a unit of work (the batch's graph step and texts per item, its chunks' embedding and writes)
  that fails, or goes over the budget, while it holds several items sends them to run one by one;
  a unit holding one item is that item's doing, and it is quarantined;
- failures that are nobody's item are retried later, never blamed: throttling, a dependency
  down (retryable errors, an embedding model that fails for a known-good text too, a model
  slower than the budget), and whatever is not the content's doing (a store locked, closed or
  full: see `_blame`);
- a process that dies mid-batch (out of memory, killed, a Lambda timeout) cannot say so: each
  version's attempt is marked on its row before any work (`IndexBacklog.begin_attempts`), with
  the run's id, and the next delivery finds the mark. A version whose batch died in another run
  is run alone; one that was alone when another run died is quarantined. Two deaths, not one,
  because a process can also die for reasons of its own (a deploy, a reboot) while it indexes a
  healthy item; and a mark of this very run is no death, only a mark it failed to clear.
"""

from __future__ import annotations

from datetime import datetime

import logging
import threading
import time
import uuid
from collections import Counter, deque
from collections.abc import Callable, Container, Sequence
from concurrent.futures import Executor, Future
from dataclasses import dataclass, field, replace
from typing import Any

from memsvc.core.errors import Conflict, EmbeddingFailed, InvalidArgument, MemsvcError, OverIndexBudget, RateLimited
from memsvc.core.field_tokens import value_fields
from memsvc.core.index_budget import ItemBudget, OverBudget, Stopwatch
from memsvc.core.keywords import term_counts
from memsvc.core.message_context import MESSAGE_FIELD, is_session_message, turn_of, turn_texts
from memsvc.core.models import (Change, FieldDoc, IndexAttempt, KeywordDoc, StoredItem, VectorRef, VectorWrite,
                                 attempt_mark, read_attempt_mark)
from memsvc.core.paths import MAX_INDEXED_FIELDS, extract_texts, worth_embedding
from memsvc.core.sessions import message_key
from memsvc.ports import Clock, Embedder, IndexBacklog, KeywordIndex, SystemClock, VectorIndex
from memsvc.service.graph_indexer import GraphIndexer
from memsvc.service.sealing import Sealer
from memsvc.service.tenant_config import SettingsRegistry

__all__ = ["Indexer", "Settled", "DIED_ALONE"]

log = logging.getLogger(__name__)

DIED_ALONE = "the process died twice while indexing it, the second time with it alone"
# PEP 249's names for a database's own trouble (not the data's: that is DataError, IntegrityError).
_DATABASE_TROUBLE = frozenset({"OperationalError", "InterfaceError", "InternalError", "ProgrammingError"})
# A text every embedding model takes, made new each time so that no embedding cache answers it.
_PROBE_TEXT = "a known-good text to embed ({})"
_MARGIN = 5.0  # seconds kept, after the last unit of work may end, to answer the stream's batch
_TURN_ROUNDS = 3  # times a message is indexed again, at most, while its turn before keeps changing
_CONTENT_CHANGES = ("add", "update", "delete", "expired")  # what changes a message's value, or ends it


@dataclass(frozen=True)
class _TurnBefore:
    """Where a message's context was read (`Indexer._as_turn`): the key of the turn before, and
    the id of the version read there (None: nothing live)."""

    key: str
    memory_id: str | None


@dataclass(frozen=True)
class _Prepared:
    """An item's texts to embed, as (path, text), and its blind field tokens: one decryption's worth."""

    texts: list[tuple[str, str]]
    field_doc: FieldDoc | None
    turn_before: _TurnBefore | None = None  # a message's: what its context was read from
    own_texts: list[str] = field(default_factory=list)  # its indexed fields' texts as they are (the graph's)
    reused: list[list[float] | None] = field(default_factory=list)  # per text: its vector, when known already

    def known_vectors(self) -> list[list[float] | None]:
        return self.reused or [None] * len(self.texts)


_Known = dict[int, dict[tuple[str, str], list[float]]]  # by ref: vectors by (path, text)


@dataclass
class _Embedded:
    """A chunk of items on its way through the pipeline: their texts, embedded."""

    refs: list[int]
    items: list[StoredItem]
    fields: list[list[tuple[str, str]]]  # per item: (path, text) of each indexed field
    field_docs: list[FieldDoc | None]  # per item: its blind field tokens, from the same decryption
    keyword_docs: list[KeywordDoc | None]
    vectors: list[list[float]]  # one per text, in the order of `fields`
    seconds: float  # the embedder call's time
    faults: dict[int, Exception] = field(default_factory=dict)  # items left out of the chunk, and why
    written: list[list[str]] = field(default_factory=list)  # per item: the vector fields written
    turns_before: list[_TurnBefore | None] = field(default_factory=list)  # per item: a message's context
    embedded_texts: list[int] = field(default_factory=list)  # per item: its texts the model embedded
    write_seconds: float = 0.0


@dataclass
class _Outcome:
    """What became of a unit of work's items (by ref) that did not get indexed."""

    retry: set[int] = field(default_factory=set)  # nobody's fault: deliver again later
    suspects: set[int] = field(default_factory=set)  # failed among others: to run alone
    blamed: dict[int, str] = field(default_factory=dict)  # failed alone: to quarantine, with why


@dataclass
class Settled:
    """What became of a set of items: those to retry later and those quarantined (by ref)."""

    failed: set[int] = field(default_factory=set)
    quarantined: set[int] = field(default_factory=set)


class _Probe:
    """Whether the embedding model answers a known-good text, and whether the stores answer a ping
    (each asked once per batch, and only after an item failed alone): if not, its failure is
    nobody's item."""

    def __init__(self, embedder: Embedder, stores: Sequence[Any]) -> None:
        self._embedder = embedder
        self._stores = stores
        self.answered: bool | None = None
        self._stores_answered: bool | None = None

    def stores_work(self) -> bool:
        if self._stores_answered is None:
            try:
                for store in self._stores:
                    store.ping()
                self._stores_answered = True
            except Exception:
                log.warning("a store does not answer; the failures are retried")
                self._stores_answered = False
        return self._stores_answered

    def model_works(self) -> bool:
        if self.answered is None:
            try:
                self._embedder.embed([_PROBE_TEXT.format(uuid.uuid4().hex)])
                self.answered = True
            except Exception:
                log.warning("the embedding model fails for a known-good text; its failures are retried")
                self.answered = False
        return self.answered


# A lone chunk with this many characters of text (a few hundred tokens) is embedded on the pool in
# parts, one per core (`Indexer._embed`).
SPREAD_CHARS = 2000


class Indexer:
    """Keeps the vector index, the keyword index and the graph in step with the item store.

    Entries are keyed by memory id (vectors by (memory id, field)) and a memory id is new for
    every write, so an old version can never overwrite a newer one's. What remains is
    bookkeeping: the item row records which fields of its version are indexed (`mark_indexed`,
    conditioned on the version), each change deletes what its previous row had indexed, and a
    write that lost the race to a newer version deletes what it just wrote. One kind of entry
    depends on another key: a session message's quote the turn before it, so a change to that
    turn indexes the message again in place (`_reindex_followers`), and every index of a message
    checks after writing that the turn it quoted is still there (`_reread_turns`).
    """

    def __init__(self, store: IndexBacklog, vectors: VectorIndex, embedder: Embedder, sealer: Sealer,
                 keywords: KeywordIndex, settings: SettingsRegistry, *, graph: GraphIndexer | None = None,
                 embed_pool: Executor | None = None, chunk_texts: int = 64, lookahead: int = 1,
                 budget: ItemBudget = ItemBudget(), clock: Clock | None = None,
                 timer: Callable[[], float] = time.monotonic) -> None:
        """`graph` is the knowledge graph's step. `embed_pool` runs the embedding of `apply`'s
        chunks when a batch has several, up to `lookahead` chunks ahead of the oldest one not yet
        received; without it they are embedded on the calling thread, one after the other.
        `index_items` always embeds on the calling thread: a request that indexes inline must not
        wait behind a backlog's chunks. A chunk holds at most `chunk_texts` texts (an item with
        more is a chunk of its own): one embedder call. `budget` bounds one version's work, timed
        by `timer` (seconds, monotonic); `clock` stamps quarantines."""
        self._store = store
        self._graph = graph
        self._embed_pool = embed_pool
        self._chunk_texts = chunk_texts
        self._lookahead = lookahead if embed_pool is not None else 0
        self._vectors = vectors
        self._keywords = keywords
        self._settings = settings
        self._embedder = embedder
        self._sealer = sealer
        self._budget = budget
        self._clock = clock or SystemClock()
        self.run_id = uuid.uuid4().hex[:16]  # this process's own, in the attempt marks it writes
        self._stopping = threading.Event()
        self._timer = timer
        self._stats_lock = threading.Lock()
        self._stats: dict[str, Counter] = {}

    # -- the three ways in ---------------------------------------------------------------------

    def apply(self, changes: Sequence[Change], *, seconds_left: float | None = None) -> set[int]:
        """Apply a batch of changes (at least once, in any order); returns the seqs to deliver
        again. A poison version is quarantined, not returned. `seconds_left`: the time the caller
        has (a Lambda's, before its timeout); a unit of work starts only while a whole budget and
        a margin still fit in it, and the changes it would have taken are returned instead."""
        deadline = None if seconds_left is None else self._timer() + seconds_left - self._budget.seconds - _MARGIN
        changes = [c for c in changes if c.kind != "index_failed"]  # the timeline's, not ours
        failed: set[int] = set()
        # Every write or removal retires what its previous row had indexed: its marked vectors, and
        # its keyword document, marked or not (an indexing run that stopped before the mark may
        # have written part of one; deleting an absent one is cheap). A retry's previous row is
        # the same version.
        retired = {c.seq: c.old for c in changes if c.old is not None and c.kind != "index_retry"}
        latest: dict[tuple[str, tuple[str, ...], str], Change] = {}
        for change in changes:  # only each key's newest write can still be current
            if change.kind in ("add", "update", "index_retry"):
                k = (change.tenant, change.new.namespace, change.new.key)
                if k not in latest or latest[k].new.version < change.new.version:
                    latest[k] = change
        by_tenant: dict[str, list[Change]] = {}
        for change in latest.values():
            by_tenant.setdefault(change.tenant, []).append(change)
        current: dict[int, StoredItem] = {}
        for tenant, tenant_changes in by_tenant.items():
            rows = self._store.get_many(tenant, [(c.new.namespace, c.new.key) for c in tenant_changes])
            for change in tenant_changes:
                item = rows.get((change.new.namespace, change.new.key))
                if (item is not None and item.id == change.new.id and item.deleted is None
                        and item.index_error is None and (item.indexed_fields is None or self._graph is not None)):
                    current[change.seq] = item  # indexed already or not: the graph step runs on it
        known = self._previous_vectors(changes, current)  # read before the retirement removes them
        try:
            self._retire(list(retired.values()))
        except Exception:
            log.exception("index removal failed; retrying change by change")
            for seq, old in retired.items():
                try:
                    self._retire([old])
                except Exception:
                    log.exception("index removal failed", extra={"seq": seq})
                    failed.add(seq)
        if self._graph is not None:
            failed |= self._graph.apply([c for c in changes if c.kind in ("delete", "expired")])
        failed |= self._isolated(current, feed=True, deadline=deadline, known=known).failed
        return failed | self._reindex_followers(changes, current, deadline)

    def _reindex_followers(self, changes: Sequence[Change], current: dict[int, StoredItem],
                           deadline: float | None) -> set[int]:
        """Index again, in place, each live message that follows a message these changes wrote,
        rewrote, deleted or expired: its entries quote the turn before it (`_as_turn`), and a
        deleted turn's words must leave them. Returns the seqs of the changes whose follower failed.

        A follower is read now, after its turn before's change committed, so it gets the turn as
        it is now; a deleted one is left alone (a session's sweep deletes the last message first:
        each deletion finds the message after it a tombstone, so none is re-indexed). One this
        batch indexes anyway (unmarked, in `current`) is not done twice. Its vectors are
        overwritten (same memory id and fields), its keyword document replaced (`_write`), and it
        is marked again; no attempt marks and no graph step: its version is the same.

        Why it converges: a session's changes reach this method in commit order (one feed consumer
        locally; on AWS one shard per partition key, the namespace's), so the follower re-index of
        the turn's last change runs after it. A follower indexed meanwhile outside the feed (a
        request's `sync_index`, an admin's trigger), having read the turn before earlier, may write
        after that; it rereads the turn after its write and indexes again if it moved
        (`_reread_turns`). So the last write of a follower's entries read the current turn."""
        wanted: dict[tuple[str, tuple[str, ...], str], set[int]] = {}
        for change in changes:
            ns, key = change.new.namespace, change.new.key
            if change.kind in _CONTENT_CHANGES and is_session_message(ns, key):
                after = message_key(int(key) + 1)
                if is_session_message(ns, after):
                    wanted.setdefault((change.tenant, ns, after), set()).add(change.seq)
        indexing = {(i.tenant, i.namespace, i.key) for i in current.values() if i.indexed_fields is None}
        by_tenant: dict[str, list[tuple[tuple[str, ...], str]]] = {}
        for tenant, ns, key in wanted:
            if (tenant, ns, key) not in indexing:
                by_tenant.setdefault(tenant, []).append((ns, key))
        followers: list[tuple[StoredItem, set[int]]] = []
        unread: set[int] = set()  # the changes whose followers could not be read: retried
        now = self._clock.now()
        for tenant, refs in by_tenant.items():
            try:
                rows = self._store.get_many(tenant, refs)
            except Exception:
                log.exception("reading the messages after changed ones failed; the changes will be retried")
                unread |= {seq for ref in refs for seq in wanted[(tenant, *ref)]}
                continue
            for ref in refs:
                row = rows.get(ref)
                if (row is not None and row.is_live(now) and row.index_error is None and row.value_ct is not None
                        and row.index_fields == [MESSAGE_FIELD]):
                    followers.append((row, wanted[(tenant, *ref)]))
        settled = self._isolated({n: item for n, (item, _) in enumerate(followers)}, feed=False, deadline=deadline,
                                 again=True)
        return unread | {seq for n in settled.failed for seq in followers[n][1]}

    def index_backlog(self, tenant: str, now: datetime, *, batch_size: int,
                      max_items: int | None = None) -> tuple[int, int, int]:
        """Index the tenant's pending items now (`index_pending`), in batches, until none are left,
        `max_items`, or a batch leaves some to retry later (a dependency is failing). Returns how
        many were processed, how many of those were quarantined and how many failed."""
        processed = quarantined = 0
        while max_items is None or processed < max_items:
            wanted = batch_size if max_items is None else min(batch_size, max_items - processed)
            items = self._store.unindexed(tenant, now, wanted)
            if not items:
                break
            settled = self.index_pending(items)
            processed += len(items)
            quarantined += len(settled.quarantined)
            if settled.failed:
                return processed, quarantined, len(settled.failed)
        return processed, quarantined, 0

    def index_pending(self, items: Sequence[StoredItem]) -> Settled:
        """Index these pending versions now (the admin's trigger, in a request), isolating a poison
        one as `apply` does. Neither attempt marks (the feed's consumer may hold this very version,
        and its marks are its own) nor the graph step (the feed's: its model is the indexer's)."""
        return self._isolated(dict(enumerate(items)), feed=False)

    def rebuild(self, items: Sequence[StoredItem]) -> Settled:
        """Index these live versions from nothing, whether or not they are marked indexed:
        vectors, keyword documents, field tokens and the graph step, then their marks (a restored
        item table whose marks point at indexes that do not hold its versions). Isolates a poison
        version as `apply` does. The attempt marks the versions carry were left by the processes of
        the table's past, not by a death of this run's, so they are set aside."""
        return self._isolated({n: replace(item, index_attempt=None) for n, item in enumerate(items)},
                              feed=True, again=True)

    def index_items(self, items: Sequence[StoredItem]) -> int:
        """Embed the items' fields in one embedder call, write their vectors, mark them indexed
        (`sync_index`: on the request's thread, never behind a backlog; no graph step, no marks).
        Returns how many items got vectors written. An item over a size bound raises
        `OverIndexBudget` (the feed's indexer will quarantine it), a slow or failing model
        `EmbeddingFailed`, a store its own error; the write is kept in every case, for the feed."""
        todo = [i for i in items if i.deleted is None and i.indexed_fields is None and i.index_error is None]
        try:
            prepared = [self._prepared(item, self._watch()) for item in todo]
            chunk = self._embedded(list(range(len(todo))), todo, prepared, self._watch)
            self._write(chunk)
            try:
                self._reread_turns(chunk, self._watch)
            except Conflict:  # the turn before kept changing: searchable now, left unmarked for the feed to finish
                return len(chunk.items)
            self._mark(chunk)
            if chunk.faults:
                raise next(iter(chunk.faults.values()))
        except OverBudget as exc:
            if exc.waiting_on_a_model:
                raise EmbeddingFailed("the embedding model was too slow; the write is kept and will be indexed later",
                                      details={"reason": str(exc)}) from None
            raise OverIndexBudget("indexing this memory went over its budget; the write is kept, and the "
                                  "indexer will set it aside", details={"reason": str(exc)}) from None
        return len(chunk.items)

    # -- isolating a poison version ------------------------------------------------------------

    def _isolated(self, items: dict[int, StoredItem], *, feed: bool, deadline: float | None = None,
                  again: bool = False, known: _Known | None = None) -> Settled:
        """Index the items (by ref) together, then the suspects one by one; quarantine what is to
        blame. For the `feed`'s consumer, attempts are marked on the rows first, the marks a dead
        process left are acted on (see the module docstring), and the graph step runs too. `again`:
        the items are indexed whether or not they are already. `known`: vectors of texts, by ref,
        that need no embedding (`_previous_vectors`)."""
        settled, probe = Settled(), _Probe(self._embedder, (self._store, self._vectors, self._keywords))
        died_alone, died_in_batch = self._deaths(items) if feed else ({}, {})
        for ref, item in died_alone.items():
            self._set_aside(ref, item, DIED_ALONE, settled)
        together = {r: i for r, i in items.items() if r not in died_alone and r not in died_in_batch}
        outcome = self._run(together, "batch" if feed else None, probe, deadline, graph=feed, again=again,
                            known=known)
        settled.failed |= outcome.retry
        for ref, reason in outcome.blamed.items():
            self._set_aside(ref, items[ref], reason, settled)
        later: list[StoredItem] = []
        for ref in sorted({*died_in_batch, *outcome.suspects}):  # in the batch's order
            if probe.answered is False or self._out_of_time(deadline):
                settled.failed.add(ref)  # the model is down, or no time is left: later, not alone now
                if ref in outcome.suspects:  # (a dead process's mark stays: it still says what happened)
                    later.append(items[ref])
                continue
            item = items[ref]
            fresh = self._store.get(item.tenant, item.namespace, item.key)  # the batch may have done it
            if fresh is None or fresh.id != item.id or fresh.deleted is not None or fresh.index_error is not None:
                continue
            alone = self._run({ref: fresh}, "alone" if feed else None, probe, deadline, graph=feed, again=again,
                              known=known)
            settled.failed |= alone.retry
            for reason in alone.blamed.values():
                self._set_aside(ref, fresh, reason, settled)
        if feed and later:
            self._end_attempts(later)
        return settled

    def _deaths(self, items: dict[int, StoredItem]) -> tuple[dict[int, StoredItem], dict[int, StoredItem]]:
        """The items whose attempt marks say a process died running them: `(alone, in a batch)`.
        A mark of this very run is no death, only a mark it failed to clear: its `batch` says
        nothing, and its `alone` is run alone again (that run ended in a retry)."""
        alone: dict[int, StoredItem] = {}
        in_batch: dict[int, StoredItem] = {}
        for ref, item in items.items():
            if item.index_attempt is None:
                continue
            attempt, run = read_attempt_mark(item.index_attempt)
            if attempt == "alone" and run != self.run_id:
                alone[ref] = item
            elif attempt == "alone" or run != self.run_id:
                in_batch[ref] = item
        return alone, in_batch

    def _run(self, items: dict[int, StoredItem], attempt: IndexAttempt | None, probe: _Probe,
             deadline: float | None, *, graph: bool, again: bool = False, known: _Known | None = None) -> _Outcome:
        """One unit of work over the items: mark the attempt; write the vector and keyword indexes
        of those not indexed yet (searchable at once: search goes by the item's current id); the
        graph step (with `graph`); then mark them indexed, which ends the attempt. A unit of one
        item charges its stages to one stopwatch; a unit of several gives each stage its own."""
        outcome = _Outcome()
        if not items:
            return outcome
        if self._out_of_time(deadline):
            return _Outcome(retry=set(items))
        alone = len(items) == 1
        try:
            if attempt is not None:
                self._store.begin_attempts(list(items.values()), attempt_mark(attempt, self.run_id))
        except Exception:
            log.exception("marking an indexing attempt failed; the changes will be retried")
            return _Outcome(retry=set(items))
        shared = Stopwatch(self._timer, self._budget.seconds) if alone else None
        watch = (lambda: shared) if shared is not None else self._watch
        todo = {r: i for r, i in items.items() if again or i.indexed_fields is None}
        prepared: dict[int, _Prepared] = {}
        for ref, item in todo.items():
            try:
                prepared[ref] = self._prepared(item, watch(), (known or {}).get(ref))
            except Exception as exc:
                self._fault(outcome, [ref], exc, alone, probe)
        written = self._index_pipelined(todo, prepared, outcome, watch, alone, probe)
        if graph and self._graph is not None:
            pending = {r: i for r, i in items.items() if not self._settled(outcome, r)}
            texts = {r: prepared[r].own_texts for r in pending if r in prepared}
            for ref, exc in self._graph.apply_each(pending, watch, texts).items():
                self._fault(outcome, [ref], exc, alone, probe)
        for chunk in written:  # an item to run alone or to quarantine is not marked: its entries go
            try:
                self._mark(chunk, failed={r for r in chunk.refs if r in outcome.suspects or r in outcome.blamed})
            except Exception as exc:
                self._fault(outcome, [r for r in chunk.refs if not self._settled(outcome, r)], exc, alone, probe)
        if attempt is not None:  # what got no mark_indexed (nor will get a quarantine or a rerun) ends here
            ended = [i for r, i in items.items() if r in outcome.retry or (i.indexed_fields is not None
                                                                           and not self._settled(outcome, r))]
            self._end_attempts(ended)
        return outcome

    def _end_attempts(self, items: list[StoredItem]) -> None:
        try:
            self._store.end_attempts(items)
        except Exception:  # a mark this process leaves is no death to it (`_deaths`)
            log.exception("clearing indexing attempts failed")

    @staticmethod
    def _settled(outcome: _Outcome, ref: int) -> bool:
        return ref in outcome.retry or ref in outcome.suspects or ref in outcome.blamed

    def _fault(self, outcome: _Outcome, refs: Sequence[int], exc: Exception, alone: bool, probe: _Probe) -> None:
        """File the refs of a failed unit of work: retried later, run alone now, or blamed."""
        if isinstance(exc, RateLimited):  # throttled: running them one by one would only deepen it
            log.warning("indexing was throttled; the changes will be retried")
            outcome.retry.update(refs)
        elif not alone:
            log.warning("indexing several items failed (%s); running them one by one", type(exc).__name__)
            outcome.suspects.update(refs)
        elif isinstance(exc, OverBudget) and exc.waiting_on_a_model:  # one item's call: the model is slow
            log.warning("a model was slower than the indexing budget; the change will be retried")
            outcome.retry.update(refs)
        elif (reason := self._blame(exc, probe)) is None:
            log.warning("indexing failed for a reason of its own (%s); the change will be retried", type(exc).__name__)
            outcome.retry.update(refs)
        else:
            outcome.blamed.update(dict.fromkeys(refs, reason))

    @staticmethod
    def _blame(exc: Exception, probe: _Probe) -> str | None:
        """Why an item that failed alone is to blame, in our words (never the exception's message,
        which may quote the memory); None when it is not: the machine's failures are retried, and
        parked by the feed after their attempts like any change that keeps failing. The machine's
        are a retryable error of ours (a dependency down or contended), a model that fails a
        known-good text too, an OS error (files, sockets, time-outs), a database's own trouble
        (`_DATABASE_TROUBLE`: locked, closed, gone) and stores that do not answer a ping; whatever
        else an item's work raises is the item's."""
        if isinstance(exc, OverBudget):
            return f"over its indexing budget: {exc}"
        if isinstance(exc, EmbeddingFailed):
            if not probe.model_works():
                return None
            return f"the embedding model failed on it ({type(exc.__cause__ or exc).__name__})"
        if isinstance(exc, MemsvcError):
            return None if exc.retryable else f"indexing it was refused ({exc.code})"
        if isinstance(exc, OSError) or any(c.__name__ in _DATABASE_TROUBLE for c in type(exc).__mro__):
            return None
        if not probe.stores_work():
            return None
        return f"indexing it raised {type(exc).__name__}"

    def _set_aside(self, ref: int, item: StoredItem, reason: str, settled: Settled) -> None:
        try:
            if self._store.quarantine(item, reason, self._clock.now()):
                settled.quarantined.add(ref)
                log.warning("quarantined a memory that cannot be indexed",
                            extra={"memory_id": item.id, "reason": reason})
                with self._stats_lock:
                    self._stats.setdefault(item.tenant, Counter())["quarantined_items"] += 1
        except Exception:
            log.exception("quarantining a memory failed; its change will be retried", extra={"memory_id": item.id})
            settled.failed.add(ref)

    def _watch(self) -> Stopwatch:
        return Stopwatch(self._timer, self._budget.seconds)

    def stop(self) -> None:
        """No unit of work starts from now on (the process is shutting down): what is left of a
        batch is retried by the next process, its attempt marks cleared, so that a clean stop
        is never taken for a death."""
        self._stopping.set()

    def _out_of_time(self, deadline: float | None) -> bool:
        return self._stopping.is_set() or (deadline is not None and self._timer() >= deadline)

    # -- the pipeline ----------------------------------------------------------------------------

    def _prepared(self, item: StoredItem, watch: Stopwatch,
                  known: dict[tuple[str, str], list[float]] | None = None) -> _Prepared:
        """What the item's version gives the indexes, from one decryption of its value: the
        (path, text) of each field to embed, and its blind field tokens; each checked against the
        budget as soon as it exists. `known`: vectors by (path, text) that need no embedding."""
        with_tokens = self._settings.get(item.tenant).keyword_index
        if item.value_ct is None or (item.index_fields is False and not with_tokens):
            return _Prepared([], None)
        value = self._sealer.open_value(item)
        texts = [] if item.index_fields is False else extract_texts(value, item.index_fields, limit=MAX_INDEXED_FIELDS)
        self._budget.check_texts(texts)  # the client's own (a message's turn: its content twice, a bounded context)
        own_texts = [text for _, text in texts]
        turn_before = None
        if texts and item.index_fields == [MESSAGE_FIELD] and is_session_message(item.namespace, item.key):
            texts, turn_before = self._as_turn(item, value, texts)
        watch.check("reading its texts")
        field_doc = self._field_doc(item, value) if with_tokens else None
        watch.check("its field tokens")
        if item.index_fields is None:  # every leaf: the keyword document's (`own_texts`), not every one's vector
            texts = worth_embedding(texts)
        reused = [known.get(pair) for pair in texts] if known else []
        return _Prepared(texts, field_doc, turn_before, own_texts, reused)

    def _as_turn(self, item: StoredItem, value: Any,
                 texts: list[tuple[str, str]]) -> tuple[list[tuple[str, str]], _TurnBefore | None]:
        """A message as `service.sessions` appends it, as its turn of the conversation
        (`core.message_context`), and where the turn before was read. The turn before is read now,
        at seq - 1: the store gave the seqs in order, each append committed before the next took
        its seq, so it is there unless it was deleted (then there is none). A retried or re-indexed
        message reads it again, as it is then; a change to it re-indexes this message
        (`_reindex_followers`)."""
        turn = turn_of(value)
        if turn is None:
            return texts, None
        if (seq := int(item.key)) <= 1:
            return turn_texts(turn, item.created_at, None), None
        key = message_key(seq - 1)
        row = self._live_turn(self._store.get(item.tenant, item.namespace, key))
        previous = None if row is None else turn_of(self._sealer.open_value(row))
        return turn_texts(turn, item.created_at, previous), _TurnBefore(key, None if row is None else row.id)

    def _live_turn(self, row: StoredItem | None) -> StoredItem | None:
        return row if row is not None and row.value_ct is not None and row.is_live(self._clock.now()) else None

    def _reread_turns(self, chunk: _Embedded, watch: Callable[[], Stopwatch]) -> None:
        """After a chunk is written: read each message's turn before again, and index again (in
        place) each message whose turn before changed since it was read, until none did. Another
        process may have deleted or rewritten that turn meanwhile, and that change's re-index of
        this message (`_reindex_followers`) may have written before this write did; so the last
        write of a message's entries is always one that read the turn before as it then was, and
        after the last change to it, they hold its current text (or none). A turn before that keeps
        changing is left, after `_TURN_ROUNDS`, to a retry (a retryable `Conflict`)."""
        for round_ in range(_TURN_ROUNDS + 1):
            moved = self._moved_turns(chunk)
            if not moved:
                return
            if round_ == _TURN_ROUNDS:
                raise Conflict("a message's turn before kept changing while it was indexed; it will be indexed again")
            for at in moved:
                item = chunk.items[at]
                prepared = self._prepared(item, watch())
                again = self._embedded([chunk.refs[at]], [item], [prepared], watch)
                if again.faults:
                    raise next(iter(again.faults.values()))
                self._write(again, replacing=True)
                chunk.fields[at], chunk.turns_before[at], chunk.written[at] = (prepared.texts, prepared.turn_before,
                                                                               again.written[0])

    def _moved_turns(self, chunk: _Embedded) -> list[int]:
        """The chunk's messages (by position) whose turn before is no longer the version read."""
        asked: dict[str, list[int]] = {}
        for at, (item, before) in enumerate(zip(chunk.items, chunk.turns_before)):
            if before is not None:
                asked.setdefault(item.tenant, []).append(at)
        moved = []
        for tenant, ats in asked.items():
            rows = self._store.get_many(tenant, [(chunk.items[at].namespace, chunk.turns_before[at].key) for at in ats])
            for at in ats:
                before = chunk.turns_before[at]
                row = self._live_turn(rows.get((chunk.items[at].namespace, before.key)))
                if (None if row is None else row.id) != before.memory_id:
                    moved.append(at)
        return moved

    def _index_pipelined(self, items: dict[int, StoredItem], prepared: dict[int, _Prepared], outcome: _Outcome,
                         watch: Callable[[], Stopwatch], alone: bool, probe: _Probe) -> list[_Embedded]:
        """Embed the prepared items' texts chunk by chunk, up to `lookahead` chunks at once on the
        pool, then write every chunk's indexes together: one write per store for the unit of
        work; if that fails, chunk by chunk (the writes are idempotent), so that a failure is
        pinned on one chunk's items, as when each chunk was written on its own. The first chunk,
        the batch's shortest texts, is written as soon as it is embedded when others follow: a
        small memory written beside another tenant's huge ones is searchable without waiting for
        theirs. Returns what was written (its items to mark), and files what fails in `outcome`."""
        chunks = self._chunks({ref: p.texts for ref, p in prepared.items()})
        # A batch of one chunk (a trickle of fresh writes) is embedded here and now: nothing to
        # overlap, and it is what the next search wants to find. A backlog goes to the pool.
        pool = self._embed_pool if len(chunks) > 1 else None
        in_flight: deque[tuple[list[int], Future]] = deque()
        embedded: list[_Embedded] = []
        written: list[_Embedded] = []
        first = len(chunks) > 1  # the first chunk, still to be written on its own

        def receive() -> None:
            nonlocal embedded, written, first
            embedded.extend(self._received(*in_flight.popleft(), outcome, alone, probe))
            if first and embedded:
                written, embedded, first = self._written(embedded, outcome, watch, alone, probe), [], False

        for chunk in chunks:
            in_flight.append((chunk, self._embed_later(pool, chunk, [items[r] for r in chunk],
                                                       [prepared[r] for r in chunk], watch)))
            if len(in_flight) > self._lookahead:
                receive()
        while in_flight:
            receive()
        return written + self._written(embedded, outcome, watch, alone, probe)

    def _written(self, embedded: list[_Embedded], outcome: _Outcome, watch: Callable[[], Stopwatch], alone: bool,
                 probe: _Probe) -> list[_Embedded]:
        """Write the embedded chunks' indexes, together, else chunk by chunk; returns what was written."""
        if len(embedded) > 1:
            unit = _joined(embedded)
            try:
                self._write(unit)
                self._reread_turns(unit, watch)
                return [unit]
            except Exception as exc:  # (its type only: a message could quote a value)
                log.warning("writing a batch's indexes failed (%s); writing them chunk by chunk", type(exc).__name__)
        written: list[_Embedded] = []  # a chunk that fails alone sends only its items to run alone
        for chunk in embedded:
            try:
                self._write(chunk)
                self._reread_turns(chunk, watch)
                written.append(chunk)
            except Exception as exc:
                self._fault(outcome, chunk.refs, exc, alone, probe)
        return written

    def _chunks(self, fields: dict[int, list[tuple[str, str]]]) -> list[list[int]]:
        """The batch's items in chunks of at most `chunk_texts` texts, by their longest text: a
        chunk of similar lengths pads little (the model pads each call to its longest text).
        Within a chunk the items keep the batch's order."""
        arrival = {ref: n for n, ref in enumerate(fields)}
        chunks: list[list[int]] = [[]]
        texts = 0
        for ref in sorted(fields, key=lambda ref: max((len(text) for _, text in fields[ref]), default=0)):
            item_fields = fields[ref]
            if chunks[-1] and texts + len(item_fields) > self._chunk_texts:
                chunks.append([])
                texts = 0
            chunks[-1].append(ref)
            texts += len(item_fields)
        return [sorted(c, key=arrival.__getitem__) for c in chunks if c]

    def _embed_later(self, pool: Executor | None, refs: list[int], items: list[StoredItem],
                     prepared: list[_Prepared], watch: Callable[[], Stopwatch]) -> Future:
        if pool is not None:
            return pool.submit(self._embedded, refs, items, prepared, watch)
        done: Future = Future()
        try:
            done.set_result(self._embedded(refs, items, prepared, watch, spread=self._embed_pool))
        except Exception as exc:
            done.set_exception(exc)
        return done

    def _embedded(self, refs: list[int], items: list[StoredItem], prepared: list[_Prepared],
                  watch: Callable[[], Stopwatch], *, spread: Executor | None = None) -> _Embedded:
        """The pipeline's middle stage: each item's keyword document (an item over its budget is
        left out of the chunk), then the chunk's texts whose vector is not known already
        (`_Prepared.reused`) embedded in one embedder call, or, for a lone chunk run outside the
        pool (`spread`: the pool) whose texts are long, in one call per core on the pool, at once.
        The chunk's stopwatch starts here, not while it waits for the pool."""
        stopwatch = watch()
        chunk = _Embedded([], [], [], [], [], [], 0.0)
        known: list[list[float] | None] = []  # per text of the chunk
        for ref, item, p in zip(refs, items, prepared):
            try:
                # Without index_fields every leaf is a keyword, though not every one is embedded.
                keyword_doc = self._keyword_doc(item, p.own_texts if item.index_fields is None
                                                else [text for _, text in p.texts])
            except Exception as exc:
                chunk.faults[ref] = exc
                continue
            chunk.refs.append(ref)
            chunk.items.append(item)
            chunk.fields.append(p.texts)
            chunk.field_docs.append(p.field_doc)
            chunk.keyword_docs.append(keyword_doc)
            chunk.turns_before.append(p.turn_before)
            item_known = p.known_vectors()
            known.extend(item_known)
            chunk.embedded_texts.append(item_known.count(None))
        stopwatch.check("keyword analysis")
        texts = [text for item_fields in chunk.fields for _, text in item_fields]
        started = self._timer()
        try:
            missing = [text for text, vector in zip(texts, known) if vector is None]
            fresh = iter(self._embed(missing, spread) if missing else [])
            chunk.vectors = [next(fresh) if vector is None else vector for vector in known]
        except MemsvcError:
            raise
        except Exception as exc:
            raise EmbeddingFailed("the embedding model failed; the write is kept and will be indexed later") from exc
        chunk.seconds = self._timer() - started
        stopwatch.check("embedding", model_seconds=chunk.seconds)
        return chunk

    def _embed(self, texts: list[str], spread: Executor | None) -> list[list[float]]:
        # A lone chunk in one call takes one core while the others idle: a large memory (up to 64
        # texts), or a tenant's turn of a few long texts (`memsvc.service.feed`). A trickle of
        # short texts stays one call: splitting it would cost more than it saves.
        if spread is None or len(texts) < 2 or sum(map(len, texts)) < SPREAD_CHARS:
            return self._embedder.embed(texts)
        size = min(self._chunk_texts, -(-len(texts) // max(self._lookahead, 1)))
        parts = [spread.submit(self._embedder.embed, texts[at:at + size]) for at in range(0, len(texts), size)]
        return [vector for part in parts for vector in part.result()]

    def _received(self, refs: list[int], embedding: Future, outcome: _Outcome, alone: bool,
                  probe: _Probe) -> list[_Embedded]:
        """One chunk's embedding, once done; nothing when it failed (that is filed in `outcome`)."""
        try:
            chunk = embedding.result()
        except Exception as exc:
            self._fault(outcome, refs, exc, alone, probe)
            return []
        for ref, exc in chunk.faults.items():
            self._fault(outcome, [ref], exc, alone, probe)
        return [chunk]

    def _write(self, chunk: _Embedded, *, replacing: bool = False) -> None:
        """The pipeline's last stage: write the derived indexes (`_mark` marks the items indexed).
        `replacing`: every item's keyword document may be there already (`_reread_turns`)."""
        todo, fields, vectors = chunk.items, chunk.fields, chunk.vectors
        if not todo:
            return
        started = self._timer()
        writes, at = [], 0
        for item, item_fields in zip(todo, fields):
            # Stored as keyed hashes: a value's field names are as private as the value.
            named = tuple((self._sealer.field_id(item.tenant, path), vectors[at + n])
                          for n, (path, _) in enumerate(item_fields))
            at += len(item_fields)
            writes.append(VectorWrite(item.tenant, item.namespace, item.key, item.id, item.version,
                                      item.policy_attributes, named))
        refused = self._put([w for w in writes if w.vectors])
        # A version indexed already is indexed again (a message whose turn before changed): vectors
        # the index now refuses are not left as they were, and its keyword document is replaced in
        # place (a put leaves an existing one as it is; a delete first would hide the message
        # from keyword search until the put), or deleted when it now has none.
        again = {item.id for item in todo if replacing or item.indexed_fields is not None}
        if stale := [VectorRef(i.tenant, i.id, name)
                     for i in todo if i.id in again and i.id in refused for name in i.indexed_fields or ()]:
            self._vectors.delete_many(stale)
        docs = [doc for doc in chunk.keyword_docs if doc is not None]
        tokens = [doc for doc in chunk.field_docs if doc is not None]
        self._keywords.put_many([d for d in docs if d.memory_id not in again],
                                [t for t in tokens if t.memory_id not in again])
        self._keywords.replace_many([d for d in docs if d.memory_id in again],
                                    [t for t in tokens if t.memory_id in again])
        documented = {doc.memory_id for doc in docs}
        gone: dict[str, list[str]] = {}
        for item in todo:
            if item.id in again and item.id not in documented:
                gone.setdefault(item.tenant, []).append(item.id)
        for tenant, memory_ids in gone.items():
            self._keywords.delete_many(tenant, memory_ids)
        chunk.written = [[] if item.id in refused else [name for name, _ in w.vectors] for item, w in zip(todo, writes)]
        chunk.write_seconds = self._timer() - started

    def _mark(self, chunk: _Embedded, *, failed: Container[int] = ()) -> None:
        """Mark a written chunk's items indexed, but those that `failed` since: what was written for
        them goes, as it does for an item that moved on meanwhile (or was set aside). Its next
        change sees no mark, so it would never delete these entries: we do."""
        started = self._timer()
        marks = [(item, names) for ref, item, names in zip(chunk.refs, chunk.items, chunk.written) if ref not in failed]
        marked = {item.id for (item, _), done in zip(marks, self._store.mark_indexed(marks)) if done}
        lost, lost_docs = [], []
        for item, names in zip(chunk.items, chunk.written):
            if item.id not in marked:
                lost.extend(VectorRef(item.tenant, item.id, name) for name in names)
                lost_docs.append(item)
        if lost:
            self._vectors.delete_many(lost)
        for item in lost_docs:
            self._keywords.delete_many(item.tenant, [item.id])
        seconds = chunk.write_seconds + self._timer() - started
        embedded = sum(chunk.embedded_texts)
        with self._stats_lock:  # an embedder call's time is shared by its items by the texts it embedded
            for item, item_fields, texts in zip(chunk.items, chunk.fields, chunk.embedded_texts):
                if item.id not in marked:
                    continue
                c = self._stats.setdefault(item.tenant, Counter())
                c["embedded_texts"] += texts
                c["reused_texts"] += len(item_fields) - texts
                c["embed_seconds"] += chunk.seconds * texts / embedded if embedded else 0.0
                c["indexed_items"] += 1
                c["write_seconds"] += seconds / len(chunk.items)

    def _keyword_doc(self, item: StoredItem, texts: list[str]) -> KeywordDoc | None:
        if not texts or not self._settings.get(item.tenant).keyword_index:
            return None
        counts = term_counts(texts)
        self._budget.check_terms(sum(counts.values()))
        if not counts:
            return None
        blind = self._sealer.term_ids(item.tenant, counts)
        terms: dict[str, int] = {}
        for term_id, tf in zip(blind, counts.values()):
            terms[term_id] = terms.get(term_id, 0) + tf
        return KeywordDoc(item.tenant, item.namespace, item.key, item.id, item.version, item.policy_attributes,
                          terms, sum(counts.values()))

    def _field_doc(self, item: StoredItem, value: Any) -> FieldDoc | None:
        """The version's blind field tokens, which filters decide on without decrypting it; none
        for a value with too many fields (then filters decrypt it). Only while the tenant's
        keyword indexing is on (`_prepared`)."""
        fields = value_fields(value)
        if fields is None:
            return None
        return FieldDoc(item.tenant, item.namespace, item.id, frozenset(self._sealer.field_tokens(item.tenant, fields)))

    def _put(self, writes: list[VectorWrite]) -> set[str]:
        """Write the vectors in as few requests as the index takes; returns the memory ids whose
        vectors the index refused as invalid. Retrying those can never succeed, so they are
        marked indexed without vectors (found by key and filter, not by meaning) instead of
        failing their change until it is parked. A refused request refuses all of its vectors,
        so a refused batch is split until the refused memories are found."""
        if not writes:
            return set()
        try:
            self._vectors.put_many(writes)
            return set()
        except InvalidArgument as exc:
            if len(writes) > 1:
                half = len(writes) // 2
                return self._put(writes[:half]) | self._put(writes[half:])
            log.warning("the vector index refused a memory's vectors; it stays unsearchable by meaning",
                        extra={"memory_id": writes[0].memory_id, "reason": exc.details.get("limit")
                               or exc.details.get("aws_error_code") or exc.details.get("field")})
            return {writes[0].memory_id}

    def _previous_vectors(self, changes: Sequence[Change], current: dict[int, StoredItem]) -> _Known:
        """For each update about to be indexed (in `current`, by seq, not indexed yet) whose
        previous version has vectors: those vectors by (path, text), so that a field whose text
        did not change is not embedded again (an attribute, a TTL or another field changed). Read
        before the retirement removes them; the previous version is decrypted for its texts. A
        session message's texts quote the turn before it, so its vectors are never taken over. A
        failure to read them costs only the model's time."""
        olds = {c.seq: c.old for c in changes
                if c.kind == "update" and c.seq in current and current[c.seq].indexed_fields is None
                and c.old is not None and c.old.indexed_fields and c.old.value_ct is not None
                and c.old.index_fields is not False and not is_session_message(c.old.namespace, c.old.key)}
        by_tenant: dict[str, list[int]] = {}
        for seq, old in olds.items():
            by_tenant.setdefault(old.tenant, []).append(seq)
        known: _Known = {}
        for tenant, seqs in by_tenant.items():
            try:
                stored = self._vectors.vectors_of(tenant, [(olds[s].id, name) for s in seqs
                                                           for name in olds[s].indexed_fields or ()])
            except Exception as exc:  # (its type only: a message could quote a value)
                log.warning("reading previous versions' vectors failed (%s); their fields are embedded again",
                            type(exc).__name__)
                continue
            for seq in seqs:
                old = olds[seq]
                try:
                    texts = extract_texts(self._sealer.open_value(old), old.index_fields, limit=MAX_INDEXED_FIELDS)
                except Exception as exc:
                    log.warning("reading a previous version's texts failed (%s); its fields are embedded again",
                                type(exc).__name__)
                    continue
                vectors = {(path, text): vector for path, text in texts
                           if (vector := stored.get((old.id, self._sealer.field_id(tenant, path)))) is not None}
                if vectors:
                    known[seq] = vectors
        return known

    def _retire(self, olds: Sequence[StoredItem]) -> None:
        refs = [VectorRef(old.tenant, old.id, name) for old in olds for name in old.indexed_fields or ()]
        if refs:
            self._vectors.delete_many(refs)
        by_tenant: dict[str, list[str]] = {}
        for old in olds:
            by_tenant.setdefault(old.tenant, []).append(old.id)
        for tenant, memory_ids in by_tenant.items():
            self._keywords.delete_many(tenant, memory_ids)

    # -- statistics --------------------------------------------------------------------------------

    _STATS = ("embedded_texts", "reused_texts", "embed_seconds", "indexed_items", "write_seconds",
              "quarantined_items")

    def stats(self, tenant: str) -> dict[str, float]:
        """This process's indexing totals for one tenant (embedding time apart from index writes):
        of the texts indexed, those the model embedded and those whose previous version's vector
        was taken over (`_previous_vectors`)."""
        with self._stats_lock:
            c = self._stats.get(tenant, Counter())
            return {k: round(c[k], 6) for k in self._STATS}

    def stats_total(self) -> dict[str, float]:
        """Totals over every tenant (for this process's own metrics, never shown to a caller)."""
        with self._stats_lock:
            total: Counter = Counter()
            for c in self._stats.values():
                total.update(c)
            return {k: total[k] for k in self._STATS}


def _joined(chunks: list[_Embedded]) -> _Embedded:
    """Embedded chunks as one, to be written together (their embedder calls' times summed)."""
    if len(chunks) == 1:
        return chunks[0]
    joined = _Embedded([], [], [], [], [], [], sum(c.seconds for c in chunks))
    for c in chunks:
        joined.refs += c.refs
        joined.items += c.items
        joined.fields += c.fields
        joined.field_docs += c.field_docs
        joined.keyword_docs += c.keyword_docs
        joined.vectors += c.vectors
        joined.turns_before += c.turns_before
        joined.embedded_texts += c.embedded_texts
    return joined
