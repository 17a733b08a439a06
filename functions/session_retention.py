"""The session retention Lambda, run hourly by an EventBridge schedule: removes the closed
sessions whose `delete_after` has passed (tenant setting `session_auto_delete`), with their
messages and their layer's memories (`Sessions.remove_due`; the due markers are in the item
table, docs/aws-design.md "Sessions"). DynamoDB TTL cannot do this: it would drop rows without
the tombstones the timeline and the vector index follow.

Each run handles batches of 100 (removes them, or defers one whose messages still wait for
their extraction, `Sessions.remove_due`) until fewer are due or less than 30 s of the invocation
is left; what remains is the next run's. Logs carry counts only.
"""

from __future__ import annotations

from typing import Any

from functions.observability import make_logger
from functions.runtime import aws_app

logger = make_logger("memsvc-session-retention")

BATCH = 100
_RESERVE_MS = 30_000


@logger.inject_lambda_context(log_event=False, clear_state=True)
def handler(event: dict[str, Any], context: Any) -> dict[str, int]:
    sessions = aws_app().services.sessions
    handled = 0
    while context.get_remaining_time_in_millis() > _RESERVE_MS:
        batch = sessions.remove_due(BATCH)
        handled += batch
        if batch < BATCH:
            break
    logger.info("due sessions handled", extra={"handled": handled})
    return {"handled": handled}
