"""Workflow lifecycle events on AWS: one `PutEvents` entry on the environment's bus, source
`memsvc`, the detail-type naming the event (`memsvc.session.closed`). The detail names objects
and counts, never their values. A failed entry is retried a few times; if it still fails the
event is logged by id and dropped, because the state change it reports is already committed
and the caller's request must not fail for it (consumers can read the state from the API)."""

from __future__ import annotations

import json
import logging
import time
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from memsvc.adapters.aws.errors import error_code
from memsvc.core.timeline import SOURCE

__all__ = ["EventBridgeBusEvents"]

log = logging.getLogger(__name__)


class EventBridgeBusEvents:
    def __init__(self, client: Any, bus_name: str, *, attempts: int = 3) -> None:
        self._client = client
        self._bus = bus_name
        self._attempts = attempts

    def publish(self, detail_type: str, detail: dict[str, Any]) -> None:
        entry = {"Source": SOURCE, "DetailType": detail_type, "EventBusName": self._bus,
                 "Detail": json.dumps(detail, separators=(",", ":"), ensure_ascii=False)}
        for attempt in range(self._attempts):
            try:
                response = self._client.put_events(Entries=[entry])
            except (ClientError, BotoCoreError) as exc:
                code = error_code(exc)
            else:
                if not response.get("FailedEntryCount"):
                    return
                code = response["Entries"][0].get("ErrorCode", "Unknown")
            time.sleep(0.05 * 2**attempt)
        log.error("%s event not published (%s)", detail_type, code, extra={"event_id": detail.get("id")})
