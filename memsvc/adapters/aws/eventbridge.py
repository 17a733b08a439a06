"""The AWS event publisher: recorded timeline events -> `PutEvents` on the environment's bus.

One entry per event (`memsvc.core.timeline.put_events_entry`: source `memsvc`, a detail-type per
kind, a detail that names the change and never carries the value or the attributes; the schema
is docs/events.md). Entries go in requests of at most 10 (the API's limit) and under 256 KB of
entries (the documented size of a request's entries). One entry of ours stays under ~16 KB even
for the longest key and namespace the service accepts (tests/aws/test_eventbridge.py), so the
size limit never splits a request in practice; it is checked all the same.

`PutEvents` answers per entry, in request order: an entry that failed has an `ErrorCode`, and
`FailedEntryCount` says how many did. Only those entries are sent again, after a full-jitter
backoff, at most `max_attempts` times in all: botocore cannot do that, as it retries whole
requests that failed, never the entries of a request that succeeded. A whole request refused
for throttling or a service fault is botocore's to retry (`memsvc.adapters.aws.clients`); if it
still fails, its events are given up. Codes that another attempt cannot fix (AccessDenied,
MalformedDetail, ...) are not retried. `publish` returns the events that still failed; the
timeline reports their changes to Lambda, which delivers them again (the bus is at least once:
consumers deduplicate on `detail.id`).

Logs carry counts, error codes and event ids, never an entry's detail.
"""

from __future__ import annotations

import logging
import random as _random
import time
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from memsvc.adapters.aws.errors import error_code
from memsvc.core.models import TimelineEvent
from memsvc.core.timeline import put_events_entry

__all__ = ["EventBridgePublisher", "MAX_ENTRIES_PER_REQUEST", "MAX_REQUEST_BYTES", "entry_size"]

log = logging.getLogger(__name__)

MAX_ENTRIES_PER_REQUEST = 10
MAX_REQUEST_BYTES = 256 * 1024  # the entries of one PutEvents request, as EventBridge sizes them
# Per-entry codes the PutEvents reference lists as not retryable: another attempt gets the same.
NOT_RETRYABLE_ENTRY_CODES = frozenset({
    "AccessDeniedException", "InvalidAccountIdException", "InvalidArgument", "MalformedDetail",
    "RedactionFailure", "NotAuthorizedForSourceException", "NotAuthorizedForDetailTypeException",
})


def entry_size(entry: dict[str, Any]) -> int:
    """An entry's size as EventBridge counts it ("Calculating PutEvents event entry size"):
    14 bytes for `Time`, then the UTF-8 bytes of Source, DetailType, Detail and each resource."""
    size = 14 if entry.get("Time") is not None else 0
    for field in ("Source", "DetailType", "Detail"):
        size += len((entry.get(field) or "").encode("utf-8"))
    return size + sum(len(r.encode("utf-8")) for r in entry.get("Resources") or [])


class EventBridgePublisher:
    """`EventPublisher` on EventBridge `PutEvents`.

    Args:
        client: a boto3 `events` client.
        bus_name: the bus's name (or ARN).
        max_attempts: requests per entry at most, the first included.
        base_delay, max_delay: before attempt n+1 sleep `random() * min(max_delay,
            base_delay * 2**(n-1))` seconds (full jitter).
        sleep, random: injectable so tests do not sleep and can check the delays.
    """

    def __init__(
        self,
        client: Any,
        bus_name: str,
        *,
        max_attempts: int = 5,
        base_delay: float = 0.1,
        max_delay: float = 2.0,
        sleep: Callable[[float], None] = time.sleep,
        random: Callable[[], float] = _random.random,
    ) -> None:
        if not bus_name:
            raise ValueError("an event bus name is required")
        if max_attempts < 1:
            raise ValueError("max_attempts must be >= 1")
        self._client = client
        self.bus_name = bus_name
        self._max_attempts = max_attempts
        self._base_delay = base_delay
        self._max_delay = max_delay
        # Backoff hooks, public so that a test can observe the waits instead of sleeping them.
        self.sleep = sleep
        self.random = random

    def publish(self, events: Sequence[TimelineEvent]) -> list[TimelineEvent]:
        failed: set[int] = set()
        pending: list[tuple[int, dict[str, Any]]] = []
        for i, event in enumerate(events):
            entry = put_events_entry(event, self.bus_name)
            if entry_size(entry) >= MAX_REQUEST_BYTES:  # cannot happen for our details; never sent
                log.error("event entry over the PutEvents size limit", extra={"event_id": event.id})
                failed.add(i)
            else:
                pending.append((i, entry))
        for batch in _batches(pending):
            failed.update(self._put(batch, [events[i].id for i, _ in batch]))
        return [e for i, e in enumerate(events) if i in failed]

    def _put(self, batch: list[tuple[int, dict[str, Any]]], ids: list[str]) -> set[int]:
        """Send one request's entries until each is accepted or given up; the indexes given up."""
        given_up: set[int] = set()
        todo = batch
        for attempt in range(1, self._max_attempts + 1):
            if attempt > 1:
                self.sleep(self.random() * min(self._max_delay, self._base_delay * 2 ** (attempt - 2)))
            try:
                response = self._client.put_events(Entries=[entry for _, entry in todo])
            except (ClientError, BotoCoreError) as exc:  # after botocore's own retries
                log.error("PutEvents failed (%s); %d events not published", error_code(exc), len(todo))
                return given_up | {i for i, _ in todo}
            results = response.get("Entries") or []
            if not response.get("FailedEntryCount") and len(results) == len(todo):
                return given_up
            retry: list[tuple[int, dict[str, Any]]] = []
            codes: dict[str, int] = {}
            for n, (i, entry) in enumerate(todo):
                # Results are positional; a missing one (never documented) counts as a failure.
                code = results[n].get("ErrorCode") if n < len(results) else "MissingResult"
                if not code:
                    continue
                codes[code] = codes.get(code, 0) + 1
                if code in NOT_RETRYABLE_ENTRY_CODES:
                    given_up.add(i)
                else:
                    retry.append((i, entry))
            log.info("PutEvents rejected %d of %d entries (%s), attempt %d of %d",
                     sum(codes.values()), len(todo), codes, attempt, self._max_attempts)
            if not retry:
                break
            todo = retry
        else:
            given_up |= {i for i, _ in todo}
        if given_up:
            log.warning("%d events not published after retries", len(given_up),
                        extra={"event_ids": [ids[k] for k, (i, _) in enumerate(batch) if i in given_up]})
        return given_up


def _batches(entries: list[tuple[int, dict[str, Any]]]) -> Iterator[list[tuple[int, dict[str, Any]]]]:
    """Consecutive requests of at most 10 entries and under `MAX_REQUEST_BYTES` of entries."""
    batch: list[tuple[int, dict[str, Any]]] = []
    size = 0
    for item in entries:
        n = entry_size(item[1])
        if batch and (len(batch) == MAX_ENTRIES_PER_REQUEST or size + n >= MAX_REQUEST_BYTES):
            yield batch
            batch, size = [], 0
        batch.append(item)
        size += n
    if batch:
        yield batch
