"""The change feed's consumers, driven one batch at a time with at-least-once delivery (locally;
on AWS each consumer is a Lambda on the table's stream, and the event source mapping does this)."""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from memsvc.core.models import Change
from memsvc.ports import ChangeFeed

__all__ = ["FeedConsumer", "CycleResult"]

log = logging.getLogger(__name__)


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
    cycle and, after `max_attempts`, parked as a dead letter so the feed keeps moving. A poison
    memory never gets here: the indexer quarantines it and reports its change done, so only a
    failing dependency holds the feed up, and only for `max_attempts` cycles. A batch whose
    process died before its ack is read again at the next start (its attempt marks tell the
    indexer what happened: `memsvc.service.indexer`).
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

    def drain(self, max_batches: int = 1000, *, stopping: Callable[[], bool] = lambda: False) -> CycleResult:
        """Batches until none is left, one fails, `max_batches` ran or `stopping()` (checked
        between batches, so that a process shutting down never closes its stores under one)."""
        total = CycleResult()
        for _ in range(max_batches):
            if stopping():
                break
            r = self.run_batch()
            total.processed.update(r.processed)
            total.failed += r.failed
            total.parked += r.parked
            if r.total == 0 or r.failed:
                break
        return total

    def pending(self, tenant: str) -> int:
        return self._feed.pending(self.consumer, tenant)
