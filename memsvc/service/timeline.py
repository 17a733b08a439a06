"""Changes -> the event timeline (and, where configured, published events).

One consumer of the change feed: the local feed worker, or the `timeline` Lambda on the table's
stream. Delivery in is at least once; the log refuses an event id it already holds, so a
replayed change never makes a second event. Publishing happens after recording, for every
event of the batch (replays included), so a crash between the two loses nothing: the bus is
at least once, and `detail.id` names the event for consumers that deduplicate.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

from memsvc.core.models import Change, TimelineEvent
from memsvc.ports import EventLog, EventPublisher

__all__ = ["Timeline"]

log = logging.getLogger(__name__)


class Timeline:
    def __init__(self, log_: EventLog, publisher: EventPublisher | None = None) -> None:
        self.log = log_
        self.publisher = publisher

    def apply(self, changes: Sequence[Change]) -> set[int]:
        """Record (then publish) the changes' events; returns the seqs that must be retried."""
        if not changes:
            return set()
        sources = [(c.seq, e) for c in changes for e in TimelineEvent.of_change(c)]
        try:
            recorded = self.log.record([e for _, e in sources])
        except Exception:
            log.exception("recording timeline events failed; the batch will be retried")
            return {c.seq for c in changes}
        if self.publisher is None:
            return set()
        try:
            unpublished = {e.id for e in self.publisher.publish(recorded)}
        except Exception:
            log.exception("publishing timeline events failed; the batch will be retried")
            return {c.seq for c in changes}
        return {seq for (seq, _), e in zip(sources, recorded) if e.id in unpublished}
