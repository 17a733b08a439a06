"""The change feed's consumers, driven one batch at a time with at-least-once delivery (locally;
on AWS each consumer is a Lambda on the table's stream, and the event source mapping does this)."""

from __future__ import annotations

import logging
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from memsvc.core.models import Change
from memsvc.ports import ChangeFeed

__all__ = ["FeedConsumer", "CycleResult", "TURN_SECONDS", "FIRST_TURN_WEIGHT"]

log = logging.getLogger(__name__)


@dataclass
class CycleResult:
    processed: Counter = field(default_factory=Counter)  # tenant -> changes consumed
    failed: int = 0
    parked: int = 0

    @property
    def total(self) -> int:
        return sum(self.processed.values())


# How long one tenant's turn at a consumer should last. Another tenant's changes wait for the turn
# under way, so this bounds how long one tenant's backlog holds up the others': by a turn, or by
# its one change that takes longer (a turn holds at least one; the indexer's budget bounds that).
TURN_SECONDS = 1.0
# A tenant's first turn, in `Change.weight` (bytes): one large value, or some ten small ones.
FIRST_TURN_WEIGHT = 16 * 1024
# At most this many tenants' turn sizes are remembered (the others start again at the first size).
REMEMBERED_TURNS = 4096


class FeedConsumer:
    """Drives one named consumer over the change feed with at-least-once delivery.

    Tenants take turns: each batch is the next tenant's (round-robin in name order), from its own
    lane of the feed, acknowledged on its own. A turn is sized to last about `TURN_SECONDS` by the
    work the tenant's last turn got through (`Change.weight` per second), growing at most
    twofold a turn, so one tenant's burst of large memories delays another tenant's indexing by
    about a turn, not by the whole burst.

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
        timer: Callable[[], float] = time.monotonic,
    ) -> None:
        self._feed = feed
        self.consumer = consumer
        self._handler = handler
        self._batch_size = batch_size
        self._max_attempts = max_attempts
        self._timer = timer
        self._attempts: Counter = Counter()
        self._last_tenant = ""
        self._turn_weights: dict[str, int] = {}

    def run_batch(self) -> CycleResult:
        result = CycleResult()
        tenants = self._feed.lanes(self.consumer)
        if not tenants:
            return result
        tenant = next((t for t in tenants if t > self._last_tenant), tenants[0])
        self._last_tenant = tenant
        allowed = self._turn_weights.get(tenant, FIRST_TURN_WEIGHT)
        started = self._timer()
        changes = self._feed.read(self.consumer, self._batch_size, tenant=tenant, max_weight=allowed)
        if not changes:  # acknowledged between the two reads: by another process's consumer
            return result
        failed = self._handler(changes)
        self._size_next_turn(tenant, allowed, sum(c.weight for c in changes), self._timer() - started)
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
            self._feed.ack(self.consumer, tenant, max(c.seq for c in done))
            for c in done:
                result.processed[c.tenant] += 1
        return result

    def _size_next_turn(self, tenant: str, allowed: int, weight: int, seconds: float) -> None:
        rate = weight / seconds if seconds > 0 else float("inf")
        if len(self._turn_weights) >= REMEMBERED_TURNS and tenant not in self._turn_weights:
            self._turn_weights.clear()
        self._turn_weights[tenant] = max(1, int(min(rate * TURN_SECONDS, 2 * max(allowed, weight))))

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
