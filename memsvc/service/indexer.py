"""Changes -> vectors and keyword documents. Idempotent and version-aware: replaying a change, or
applying an older one after a newer, never puts a stale entry back; a delete always wins over the
write it follows.

A batch of changes goes through a pipeline: read the items' texts, cut them into chunks of at most
`chunk_texts` texts, embed each chunk (on the embedding pool, when there is one), then write its
derived indexes and mark its items indexed (on the calling thread). While one chunk is written
the next ones are embedded, so neither the model nor the stores wait for the other. A further
derived index is one more write in `_write`."""

from __future__ import annotations

import logging
import threading
import time
from collections import Counter, deque
from collections.abc import Sequence
from concurrent.futures import Executor, Future
from dataclasses import dataclass
from typing import Any

from memsvc.core.errors import EmbeddingFailed, InvalidArgument, MemsvcError, RateLimited
from memsvc.core.field_tokens import value_fields
from memsvc.core.keywords import term_counts
from memsvc.core.models import Change, FieldDoc, KeywordDoc, StoredItem, VectorRef, VectorWrite
from memsvc.core.paths import MAX_INDEXED_FIELDS, extract_texts
from memsvc.ports import Embedder, IndexBacklog, KeywordIndex, VectorIndex
from memsvc.service.graph_indexer import GraphIndexer
from memsvc.service.sealing import Sealer
from memsvc.service.tenant_config import SettingsRegistry

__all__ = ["Indexer"]

log = logging.getLogger(__name__)



@dataclass
class _Embedded:
    """A chunk of items on its way through the pipeline: their texts, embedded."""

    items: list[StoredItem]
    fields: list[list[tuple[str, str]]]  # per item: (path, text) of each indexed field
    field_docs: list[FieldDoc | None]  # per item: its blind field tokens, from the same decryption
    vectors: list[list[float]]  # one per text, in the order of `fields`
    seconds: float  # the embedder call's time

    @property
    def texts(self) -> int:
        return len(self.vectors)


class Indexer:
    """Keeps the vector index and the keyword index in step with the item store.

    Entries are keyed by memory id (vectors by (memory id, field)) and a memory id is new for
    every write, so an old version can never overwrite a newer one's. What remains is
    bookkeeping: the item row records which fields of its version are indexed (`mark_indexed`,
    conditioned on the version), each change deletes what its previous row had indexed, and a
    write that lost the race to a newer version deletes what it just wrote.
    """

    def __init__(self, store: IndexBacklog, vectors: VectorIndex, embedder: Embedder, sealer: Sealer,
                 keywords: KeywordIndex, settings: SettingsRegistry, *, graph: GraphIndexer | None = None,
                 embed_pool: Executor | None = None, chunk_texts: int = 64, lookahead: int = 1) -> None:
        """`graph` is the knowledge graph's step. `embed_pool` runs the embedding of `apply`'s
        chunks when a batch has several, up to `lookahead` chunks ahead of the one being written;
        without it they are embedded on the calling thread, one after the other. `index_items`
        always embeds on the calling thread: a request that indexes inline must not wait behind a
        backlog's chunks. A chunk holds at most `chunk_texts` texts (an item with more is a chunk
        of its own), so its vectors go to the index in one request when that is what the index
        takes at most (S3 Vectors: 500)."""
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
        self._stats_lock = threading.Lock()
        self._stats: dict[str, Counter] = {}

    def _opened(self, item: StoredItem) -> tuple[list[tuple[str, str]], FieldDoc | None]:
        """What the item's version gives the indexes, from one decryption of its value: the
        (path, text) of each field to embed, and its blind field tokens."""
        with_tokens = self._settings.get(item.tenant).keyword_index
        if item.value_ct is None or (item.index_fields is False and not with_tokens):
            return [], None
        value = self._sealer.open_value(item)
        texts = [] if item.index_fields is False else extract_texts(value, item.index_fields)[:MAX_INDEXED_FIELDS]
        return texts, self._field_doc(item, value) if with_tokens else None

    def index_items(self, items: Sequence[StoredItem]) -> int:
        """Embed the items' fields in one embedder call, write their vectors, mark them indexed.
        Returns how many items got vectors written."""
        todo = [i for i in items if i.deleted is None and i.indexed_fields is None]
        opened = [self._opened(i) for i in todo]
        chunk = self._embedded(todo, [texts for texts, _ in opened], [doc for _, doc in opened])
        self._write(chunk)
        return len(chunk.items)

    def _embedded(self, todo: list[StoredItem], fields: list[list[tuple[str, str]]],
                  field_docs: list[FieldDoc | None]) -> _Embedded:
        """The pipeline's middle stage: embed the items' texts, in one embedder call."""
        texts = [text for item_fields in fields for _, text in item_fields]
        started = time.perf_counter()
        try:
            vectors = self._embedder.embed(texts) if texts else []
        except MemsvcError:
            raise
        except Exception as exc:
            raise EmbeddingFailed("the embedding model failed; the write is kept and will be indexed later") from exc
        return _Embedded(todo, fields, field_docs, vectors, time.perf_counter() - started)

    def _write(self, chunk: _Embedded) -> None:
        """The pipeline's second stage: write the derived indexes, then mark the items indexed."""
        todo, fields, vectors = chunk.items, chunk.fields, chunk.vectors
        if not todo:
            return
        started = time.perf_counter()
        writes, at = [], 0
        for item, item_fields in zip(todo, fields):
            # Stored as keyed hashes: a value's field names are as private as the value.
            named = tuple((self._sealer.field_id(item.tenant, path), vectors[at + n])
                          for n, (path, _) in enumerate(item_fields))
            at += len(item_fields)
            writes.append(VectorWrite(item.tenant, item.namespace, item.key, item.id, item.version,
                                      item.policy_attributes, named))
        refused = self._put([w for w in writes if w.vectors])
        self._keywords.put_many([doc for item, item_fields in zip(todo, fields)
                                 if (doc := self._keyword_doc(item, [text for _, text in item_fields]))])
        self._keywords.put_fields([doc for doc in chunk.field_docs if doc is not None])
        lost, lost_docs = [], []
        for item, write in zip(todo, writes):
            names = [] if item.id in refused else [field for field, _ in write.vectors]
            if not self._store.mark_indexed(item.tenant, item.namespace, item.key, version=item.version, fields=names):
                # The item moved on while we embedded. Its next change saw no mark, so it will not
                # delete these entries: we do.
                lost.extend(VectorRef(item.tenant, item.id, name) for name in names)
                lost_docs.append(item)
        if lost:
            self._vectors.delete_many(lost)
        for item in lost_docs:
            self._keywords.delete_many(item.tenant, [item.id])
        written = time.perf_counter()
        with self._stats_lock:  # an embedder call's time is shared by its items by their text count
            for item, item_fields in zip(todo, fields):
                share = len(item_fields) / chunk.texts if chunk.texts else 1 / len(todo)
                c = self._stats.setdefault(item.tenant, Counter())
                c["embedded_texts"] += len(item_fields)
                c["embed_seconds"] += chunk.seconds * share
                c["indexed_items"] += 1
                c["write_seconds"] += (written - started) / len(todo)

    def _keyword_doc(self, item: StoredItem, texts: list[str]) -> KeywordDoc | None:
        if not texts or not self._settings.get(item.tenant).keyword_index:
            return None
        counts = term_counts(texts)
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
        keyword indexing is on (`_opened`)."""
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

    def _retire(self, olds: Sequence[StoredItem]) -> None:
        refs = [VectorRef(old.tenant, old.id, name) for old in olds for name in old.indexed_fields or ()]
        if refs:
            self._vectors.delete_many(refs)
        by_tenant: dict[str, list[str]] = {}
        for old in olds:
            by_tenant.setdefault(old.tenant, []).append(old.id)
        for tenant, memory_ids in by_tenant.items():
            self._keywords.delete_many(tenant, memory_ids)

    def stats(self, tenant: str) -> dict[str, float]:
        """This process's indexing totals for one tenant (embedding time apart from index writes)."""
        with self._stats_lock:
            c = self._stats.get(tenant, Counter())
            return {k: round(c[k], 6) for k in ("embedded_texts", "embed_seconds", "indexed_items", "write_seconds")}

    def stats_total(self) -> dict[str, float]:
        """Totals over every tenant (for this process's own metrics, never shown to a caller)."""
        with self._stats_lock:
            total: Counter = Counter()
            for c in self._stats.values():
                total.update(c)
            return {k: total[k] for k in ("embedded_texts", "embed_seconds", "indexed_items", "write_seconds")}

    def apply(self, changes: Sequence[Change]) -> set[int]:
        """Apply a batch of changes (at least once, in any order); returns the seqs that failed."""
        failed: set[int] = set()
        # Every change retires what its previous row had indexed: its marked vectors, and its
        # keyword document, marked or not (an indexing run that stopped before the mark may have
        # written part of one; deleting an absent one is cheap).
        retired = {c.seq: c.old for c in changes if c.old is not None}
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
        latest: dict[tuple[str, tuple[str, ...], str], Change] = {}
        for change in changes:  # only each key's newest write can still be current
            if change.kind in ("add", "update"):
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
                if item is not None and item.id == change.new.id and item.deleted is None \
                        and item.indexed_fields is None:
                    current[change.seq] = item
        failed |= self._index_pipelined(current)
        if self._graph is not None:
            failed |= self._graph.apply(changes)
        return failed

    def _index_pipelined(self, current: dict[int, StoredItem]) -> set[int]:
        """Index the items chunk by chunk, embedding up to `lookahead` chunks ahead of the one
        being written; returns the seqs of the changes whose items failed."""
        try:
            opened = {seq: self._opened(item) for seq, item in current.items()}
        except RateLimited:  # the key provider: every item needs it, so all are retried later
            log.warning("reading a batch's texts was throttled; its changes will be retried")
            return set(current)
        except Exception:
            log.exception("reading a batch's texts failed; indexing item by item")
            return self._one_by_one(list(current), current)
        chunks = self._chunks({seq: texts for seq, (texts, _) in opened.items()})
        # A batch of one chunk (a trickle of fresh writes) is embedded here and now: nothing to
        # overlap, and it is what the next search wants to find. A backlog goes to the pool.
        pool = self._embed_pool if len(chunks) > 1 else None
        in_flight: deque[tuple[list[int], Future]] = deque()
        failed: set[int] = set()
        for chunk in chunks:
            in_flight.append((chunk, self._embed_later(pool, [current[s] for s in chunk], [opened[s] for s in chunk])))
            if len(in_flight) > self._lookahead:
                failed |= self._finish(*in_flight.popleft(), current)
        while in_flight:
            failed |= self._finish(*in_flight.popleft(), current)
        return failed

    def _chunks(self, fields: dict[int, list[tuple[str, str]]]) -> list[list[int]]:
        """The batch's items in chunks of at most `chunk_texts` texts, by their longest text: a
        chunk of similar lengths pads little (the model pads each call to its longest text).
        Within a chunk the items keep the batch's order."""
        arrival = {seq: n for n, seq in enumerate(fields)}
        chunks: list[list[int]] = [[]]
        texts = 0
        for seq in sorted(fields, key=lambda seq: max((len(text) for _, text in fields[seq]), default=0)):
            item_fields = fields[seq]
            if chunks[-1] and texts + len(item_fields) > self._chunk_texts:
                chunks.append([])
                texts = 0
            chunks[-1].append(seq)
            texts += len(item_fields)
        return [sorted(c, key=arrival.__getitem__) for c in chunks if c]

    def _embed_later(self, pool: Executor | None, items: list[StoredItem],
                     opened: list[tuple[list[tuple[str, str]], FieldDoc | None]]) -> Future:
        fields, field_docs = [texts for texts, _ in opened], [doc for _, doc in opened]
        if pool is not None:
            return pool.submit(self._embedded, items, fields, field_docs)
        done: Future = Future()
        try:
            done.set_result(self._embedded(items, fields, field_docs))
        except Exception as exc:
            done.set_exception(exc)
        return done

    def _finish(self, seqs: list[int], embedding: Future, current: dict[int, StoredItem]) -> set[int]:
        """Write one embedded chunk; returns the seqs that failed."""
        try:
            self._write(embedding.result())
            return set()
        except RateLimited:
            # Throttled (the model or the index): retrying each item now would only deepen
            # the throttling. Every change is retried later, with the feed's backoff.
            log.warning("indexing a batch was throttled; its changes will be retried")
            return set(seqs)
        except Exception:
            log.exception("indexing a batch failed; retrying item by item")
        return self._one_by_one(seqs, current)

    def _one_by_one(self, seqs: list[int], current: dict[int, StoredItem]) -> set[int]:
        failed = set()
        for seq in seqs:
            item = current[seq]
            try:
                # Read again: the failed batch may have indexed this item already.
                fresh = self._store.get(item.tenant, item.namespace, item.key)
                if fresh is not None and fresh.id == item.id:
                    self.index_items([fresh])
            except Exception:
                failed.add(seq)
        return failed
