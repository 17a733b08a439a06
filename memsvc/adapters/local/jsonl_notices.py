"""Workflow events (plan status, task-context deletion), locally: appended to the events file in
the envelope EventBridge delivers (`source`, `detail-type`, `time`, `detail`), next to the
timeline's events (`memsvc serve --events-file PATH`)."""

from __future__ import annotations

import json
import threading
import uuid
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from memsvc.core.models import to_rfc3339
from memsvc.core.timeline import SOURCE

__all__ = ["JsonlNotices"]


class JsonlNotices:
    """`WorkflowNotices`."""

    def __init__(self, path: Path) -> None:
        self._path = path
        self._lock = threading.Lock()
        path.parent.mkdir(parents=True, exist_ok=True)

    def notify(self, detail_type: str, detail: dict[str, Any]) -> None:
        line = json.dumps({"id": str(uuid.uuid4()), "source": SOURCE, "detail-type": detail_type,
                           "time": to_rfc3339(datetime.now(timezone.utc)), "detail": detail}, ensure_ascii=False)
        with self._lock, self._path.open("a", encoding="utf-8") as f:
            f.write(line + "\n")
