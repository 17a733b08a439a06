"""Workflow lifecycle events, locally: appended to the events file (`memsvc serve --events-file`)
in the envelope EventBridge delivers to a rule's target, like the timeline's events."""

from __future__ import annotations

import json
import threading
import uuid
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from memsvc.core.models import to_rfc3339
from memsvc.core.timeline import SOURCE

__all__ = ["JsonlBusEvents"]


class JsonlBusEvents:
    def __init__(self, path: Path) -> None:
        self._path = path
        self._lock = threading.Lock()
        path.parent.mkdir(parents=True, exist_ok=True)

    def publish(self, detail_type: str, detail: dict[str, Any]) -> None:
        line = json.dumps({"id": detail.get("id") or str(uuid.uuid4()), "source": SOURCE, "detail-type": detail_type,
                           "time": to_rfc3339(datetime.now(timezone.utc)), "detail": detail}, ensure_ascii=False)
        with self._lock, self._path.open("a", encoding="utf-8") as f:
            f.write(line + "\n")
