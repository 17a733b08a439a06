"""Timeline events, locally, as JSON lines: the envelope EventBridge delivers to a rule's target
(`source`, `detail-type`, `time`, `detail`), so a consumer written against the file works
against the bus. Opt in with `memsvc serve --events-file PATH`."""

from __future__ import annotations

import json
import threading
from collections.abc import Sequence
from pathlib import Path

from memsvc.core.models import TimelineEvent, to_rfc3339
from memsvc.core.timeline import SOURCE, detail_type, event_detail

__all__ = ["JsonlPublisher"]


class JsonlPublisher:
    def __init__(self, path: Path) -> None:
        self._path = path
        self._lock = threading.Lock()
        path.parent.mkdir(parents=True, exist_ok=True)

    def publish(self, events: Sequence[TimelineEvent]) -> list[TimelineEvent]:
        lines = [
            json.dumps({
                "id": e.id,
                "source": SOURCE,
                "detail-type": detail_type(e),
                "time": to_rfc3339(e.occurred_at),
                "detail": event_detail(e),
            }, ensure_ascii=False)
            for e in events
        ]
        with self._lock, self._path.open("a", encoding="utf-8") as f:
            f.writelines(line + "\n" for line in lines)
        return []
