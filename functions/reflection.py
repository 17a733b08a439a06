"""The reflection Lambda, invoked by an EventBridge Scheduler schedule (infra/constructs/reflection.py):
background reflection (`memsvc.service.reflection`) for the users who are due.

Which tenants: the schedule's input names them, `{"tenants": [...]}` (infra/config.py
`reflection_tenants`; by default the deployment's default tenant). The table keeps no list of
tenants to walk cheaply (every row is under its tenant's key), so a deployment lists the tenants
it serves there. Within a tenant, users are found from its namespace registry (`["user", U, ...]`
namespaces holding live items).

Each invocation runs due users (`Reflection.run_due`, `BATCH` at a time) until fewer than a
batch ran (none is due, or some failed: they are due again at the next invocation) or less than
`_RESERVE_MS` of the invocation is left; an unfinished pass is due again, so a large user
continues in the same invocation or the next. Logs carry counts only.
"""

from __future__ import annotations

from typing import Any

from functions.observability import make_logger
from functions.runtime import aws_app

logger = make_logger("memsvc-reflection")

BATCH = 10
# A run cut off by the timeout is safe: its writes stand (each conditional on the version read),
# its cursor is not saved, and the next run goes over the same memories without changing them twice.
_RESERVE_MS = 30_000


@logger.inject_lambda_context(log_event=False, clear_state=True)
def handler(event: dict[str, Any], context: Any) -> dict[str, int]:
    tenants = [t for t in (event or {}).get("tenants", []) if isinstance(t, str) and t]
    reflection = aws_app().services.reflection
    ran = 0
    while context.get_remaining_time_in_millis() > _RESERVE_MS:
        batch = reflection.run_due(tenants, max_users=BATCH)
        ran += batch
        if batch < BATCH:
            break
    logger.info("users reflected", extra={"users": ran, "tenants": len(tenants)})
    return {"reflected": ran}
