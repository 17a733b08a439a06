"""Changes -> vectors. Idempotent and version-aware: replaying a change, or applying an older
one after a newer, never puts a stale vector back; a delete always wins over the write it follows."""

from __future__ import annotations

import logging
import threading
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from memsvc.core.errors import EmbeddingFailed, MemsvcError
from memsvc.core.models import Change, StoredItem
from memsvc.core.paths import extract_texts
from memsvc.ports import ChangeFeed, Embedder, VectorIndex
from memsvc.service.sealing import Sealer

__all__ = ["Indexer", "FeedConsumer", "CycleResult", "MAX_INDEXED_FIELDS"]

log = logging.getLogger(__name__)

MAX_INDEXED_FIELDS = 64


class Indexer:
    def __init__(self, vectors: VectorIndex, embedder: Embedder, sealer: Sealer) -> None:
        self._vectors = vectors
        self._embedder = embedder
        self._sealer = sealer
        self._stats_lock = threading.Lock()
        self._stats: dict[str, Counter] = {}

    def texts_of(self, item: StoredItem) -> list[tuple[str, str]]:
        if item.index_fields is False or item.value_ct is None:
            return []
        value = self._sealer.open_json(item.tenant, item.namespace, item.key, item.version, "value", item.value_ct)
        return extract_texts(value, item.index_fields)[:MAX_INDEXED_FIELDS]

    def index_items(self, items: Sequence[StoredItem]) -> None:
        """Embed the items' fields in one embedder call and make them the items' vectors."""
        todo = [i for i in items if (self._vectors.indexed_version(i.tenant, i.namespace, i.key) or 0) < i.version]
        fields = [self.texts_of(i) for i in todo]
        texts = [text for item_fields in fields for _, text in item_fields]
        started = time.perf_counter()
        try:
            vectors = self._embedder.embed(texts) if texts else []
        except MemsvcError:
            raise
        except Exception as exc:
            raise EmbeddingFailed("the embedding model failed; the write is kept and will be indexed later") from exc
        embedded = time.perf_counter()
        at = 0
        for item, item_fields in zip(todo, fields):
            named = [(path, vectors[at + n]) for n, (path, _) in enumerate(item_fields)]
            at += len(item_fields)
            self._vectors.replace(
                item.tenant,
                item.namespace,
                item.key,
                memory_id=item.id,
                version=item.version,
                policy_attributes=item.policy_attributes,
                vectors=named,
            )
        written = time.perf_counter()
        with self._stats_lock:  # time is shared by the items of one call in proportion to their texts
            for item, item_fields in zip(todo, fields):
                share = len(item_fields) / len(texts) if texts else 1 / len(todo)
                c = self._stats.setdefault(item.tenant, Counter())
                c["embedded_texts"] += len(item_fields)
                c["embed_seconds"] += (embedded - started) * share
                c["indexed_items"] += 1
                c["write_seconds"] += (written - embedded) / len(todo)

    def stats(self, tenant: str) -> dict[str, float]:
        """This process's indexing totals for one tenant (embedding time apart from index writes)."""
        with self._stats_lock:
            c = self._stats.get(tenant, Counter())
            return {k: round(c[k], 6) for k in ("embedded_texts", "embed_seconds", "indexed_items", "write_seconds")}

    def apply(self, changes: Sequence[Change]) -> set[int]:
        """Apply a batch of changes; returns the seqs that failed (to be retried)."""
        latest: dict[tuple[str, tuple[str, ...], str], Change] = {}
        for change in changes:  # within a batch only each key's newest change matters
            k = (change.tenant, change.new.namespace, change.new.key)
            if k not in latest or latest[k].new.version < change.new.version:
                latest[k] = change
        failed: set[int] = set()
        upserts: list[Change] = []
        for change in latest.values():
            if change.kind in ("delete", "expired"):
                try:
                    self._vectors.remove(
                        change.tenant, change.new.namespace, change.new.key, version=change.new.version
                    )
                except Exception:
                    log.exception("vector removal failed", extra={"seq": change.seq})
                    failed.add(change.seq)
            else:
                upserts.append(change)
        if upserts:
            try:
                self.index_items([c.new for c in upserts])
            except Exception:
                log.exception("indexing a batch failed; retrying item by item")
                for change in upserts:
                    try:
                        self.index_items([change.new])
                    except Exception:
                        failed.add(change.seq)
        if failed:  # a failed key fails every change of that key in the batch, so order holds
            bad_keys = {(c.tenant, c.new.namespace, c.new.key) for c in changes if c.seq in failed}
            failed |= {c.seq for c in changes if (c.tenant, c.new.namespace, c.new.key) in bad_keys}
        return failed


@dataclass
class CycleResult:
    processed: Counter = field(default_factory=Counter)  # tenant -> changes consumed
    failed: int = 0
    parked: int = 0

    @property
    def total(self) -> int:
        return sum(self.processed.values())


class FeedConsumer:
    """Drives one named consumer over the change feed with at-least-once delivery.

    A batch is acknowledged up to its first failure; the failed change is retried on the next
    cycle and, after `max_attempts`, parked as a dead letter so the feed keeps moving.
    """

    def __init__(
        self,
        feed: ChangeFeed,
        consumer: str,
        handler: Callable[[Sequence[Change]], set[int]],
        *,
        batch_size: int = 64,
        max_attempts: int = 5,
    ) -> None:
        self._feed = feed
        self.consumer = consumer
        self._handler = handler
        self._batch_size = batch_size
        self._max_attempts = max_attempts
        self._attempts: Counter = Counter()

    def run_batch(self) -> CycleResult:
        result = CycleResult()
        changes = self._feed.read(self.consumer, self._batch_size)
        if not changes:
            return result
        failed = self._handler(changes)
        done = [c for c in changes if not failed or c.seq < min(failed)]
        if failed:
            head = next(c for c in changes if c.seq == min(failed))
            self._attempts[head.seq] += 1
            result.failed = 1
            if self._attempts[head.seq] >= self._max_attempts:
                self._feed.park(self.consumer, head, "exhausted retries")
                log.error("parked a change after %d attempts", self._max_attempts, extra={"seq": head.seq})
                del self._attempts[head.seq]
                done.append(head)
                result.parked = 1
        if done:
            self._feed.ack(self.consumer, max(c.seq for c in done))
            for c in done:
                result.processed[c.tenant] += 1
        return result

    def drain(self, max_batches: int = 1000) -> CycleResult:
        total = CycleResult()
        for _ in range(max_batches):
            r = self.run_batch()
            total.processed.update(r.processed)
            total.failed += r.failed
            total.parked += r.parked
            if r.total == 0 or r.failed:
                break
        return total

    def pending(self, tenant: str) -> int:
        return self._feed.pending(self.consumer, tenant)
