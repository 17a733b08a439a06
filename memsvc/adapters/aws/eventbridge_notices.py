"""Workflow events (plan status, task-context deletion) on EventBridge: one `PutEvents` entry
each, source `memsvc`, sent right after the write committed. botocore retries a throttled or
failed request; an entry still refused is logged (its detail-type and error code, never its
detail) and dropped: the write stands, so these events are at most once. Their details carry
ids and statuses, never a value."""

from __future__ import annotations

import json
import logging
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from memsvc.adapters.aws.errors import error_code
from memsvc.core.timeline import SOURCE

__all__ = ["EventBridgeNotices"]

log = logging.getLogger(__name__)


class EventBridgeNotices:
    """`WorkflowNotices`."""

    def __init__(self, client: Any, bus_name: str) -> None:
        self._client = client
        self.bus_name = bus_name

    def notify(self, detail_type: str, detail: dict[str, Any]) -> None:
        entry = {"Source": SOURCE, "DetailType": detail_type, "EventBusName": self.bus_name,
                 "Detail": json.dumps(detail, separators=(",", ":"))}
        try:
            answer = self._client.put_events(Entries=[entry])
        except (ClientError, BotoCoreError) as exc:  # after botocore's own retries
            log.error("PutEvents failed (%s); %s event not published", error_code(exc), detail_type)
            return
        if answer.get("FailedEntryCount"):
            code = (answer.get("Entries") or [{}])[0].get("ErrorCode")
            log.error("PutEvents refused the %s event (%s)", detail_type, code)
