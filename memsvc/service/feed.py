"""The change feed's consumers, driven one batch at a time with at-least-once delivery (locally;
on AWS each consumer is a Lambda on the table's stream, and the event source mapping does this)."""

from __future__ import annotations

import logging
import threading
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

    def add(self, other: "CycleResult") -> None:
        self.processed.update(other.processed)
        self.failed += other.failed
        self.parked += other.parked


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

    Several threads may run batches at once (the local indexer runs `INDEXER_THREADS`): each takes
    the next tenant whose turn is not under way, so a tenant's one change that takes long (a
    memory of many long fields) holds up its own lane and one thread, never the other tenants.
    A tenant's changes are never handed to two threads at once: its lane stays in order.

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
        self._turns_under_way: set[str] = set()
        self._failing: set[str] = set()  # tenants whose last turn failed
        self._lock = threading.Condition()  # over the five above: threads share this consumer

    def run_batch(self, *, retries: bool = True) -> CycleResult:
        """One turn: a batch of the next tenant whose turn is not under way on another thread
        (none left: an empty result). Without `retries`, not of a tenant whose last turn failed:
        the threads beyond the first leave those to it, so that a failing change is retried at
        one thread's backoff, not at several. A lane found empty (another thread or process
        acknowledged it since the lanes were listed) passes the turn to the next tenant."""
        tenants = self._feed.lanes(self.consumer)
        emptied: set[str] = set()
        while True:
            with self._lock:
                free = [t for t in tenants if t not in emptied and t not in self._turns_under_way
                        and (retries or t not in self._failing)]
                if not free:
                    return CycleResult()
                tenant = next((t for t in free if t > self._last_tenant), free[0])
                self._last_tenant = tenant
                self._turns_under_way.add(tenant)
                allowed = self._turn_weights.get(tenant, FIRST_TURN_WEIGHT)
            try:
                result = self._turn(tenant, allowed)
            finally:
                with self._lock:
                    self._turns_under_way.discard(tenant)
                    self._lock.notify_all()
            if result.total or result.failed:
                return result
            emptied.add(tenant)

    def pending(self) -> bool:
        """Whether any tenant's lane holds changes this consumer has not acknowledged."""
        return bool(self._feed.lanes(self.consumer))

    def wait_for_turns(self) -> bool:
        """Wait until no turn is under way on another thread; whether there was one."""
        with self._lock:
            waited = bool(self._turns_under_way)
            self._lock.wait_for(lambda: not self._turns_under_way)
            return waited

    def _turn(self, tenant: str, allowed: int) -> CycleResult:
        result = CycleResult()
        started = self._timer()
        changes = self._feed.read(self.consumer, self._batch_size, tenant=tenant, max_weight=allowed)
        if not changes:  # acknowledged since the lanes were listed
            return result
        failed = self._handler(changes)
        self._size_next_turn(tenant, allowed, sum(c.weight for c in changes), self._timer() - started)
        done = [c for c in changes if not failed or c.seq < min(failed)]
        head = next(c for c in changes if c.seq == min(failed)) if failed else None
        exhausted = False
        with self._lock:
            if head is not None:
                self._attempts[head.seq] += 1
                exhausted = self._attempts[head.seq] >= self._max_attempts
                if exhausted:
                    del self._attempts[head.seq]
            # A parked change is done with: the tenant's lane is any thread's again.
            (self._failing.add if head is not None and not exhausted else self._failing.discard)(tenant)
        if head is not None:
            result.failed = 1
            if exhausted:
                self._feed.park(self.consumer, head, "exhausted retries")
                log.error("parked a change after %d attempts", self._max_attempts, extra={"seq": head.seq})
                done.append(head)
                result.parked = 1
        if done:
            self._feed.ack(self.consumer, tenant, max(c.seq for c in done))
            for c in done:
                result.processed[c.tenant] += 1
        return result

    def _size_next_turn(self, tenant: str, allowed: int, weight: int, seconds: float) -> None:
        rate = weight / seconds if seconds > 0 else float("inf")
        with self._lock:
            if len(self._turn_weights) >= REMEMBERED_TURNS and tenant not in self._turn_weights:
                self._turn_weights.clear()
            self._turn_weights[tenant] = max(1, int(min(rate * TURN_SECONDS, 2 * max(allowed, weight))))

    def drain(self, max_batches: int = 1000, *, stopping: Callable[[], bool] = lambda: False,
              retries: bool = True) -> CycleResult:
        """Batches until none is left, one fails, `max_batches` ran or `stopping()` (checked
        between batches, so that a process shutting down never closes its stores under one)."""
        total = CycleResult()
        for _ in range(max_batches):
            if stopping():
                break
            r = self.run_batch(retries=retries)
            total.add(r)
            if r.total == 0 or r.failed:
                break
        return total
