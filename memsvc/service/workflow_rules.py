"""What the workflow use cases (task contexts, plans, working memory, sessions) share: the id and
name types of their commands, the size limit of what they seal, `If-Match`, and publishing
their events."""

from __future__ import annotations

import json
import logging
from typing import Annotated, Any

from pydantic import AfterValidator, Field, StrictStr, StringConstraints

from memsvc.core.errors import ContentTooLong, InvalidArgument, PreconditionFailed
from memsvc.core.validation import if_match_tag
from memsvc.core.workflow import MAX_ID_BYTES, MAX_NAME_CHARS, check_id
from memsvc.ports import BusEvents
from memsvc.service.memories import check_nesting
from memsvc.service.tenant_config import MAX_VALUE_BYTES

__all__ = ["WorkflowId", "Name", "check_payload", "if_match", "check_version", "notify"]

log = logging.getLogger(__name__)
VERSION_NUMBER = "[0-9]{1,18}"  # a workflow object's version, as If-Match names it

def _id(value: str) -> str:
    try:
        return check_id(value, "id")
    except InvalidArgument as exc:
        raise ValueError(exc.message) from None


# `check_id` is the rule (bytes, which JSON Schema cannot count); the schema says what it can of it.
WorkflowId = Annotated[StrictStr, AfterValidator(_id), Field(
    json_schema_extra={"minLength": 1, "maxLength": MAX_ID_BYTES, "pattern": "^[^\\x00]+$"},
    description=f"1 to {MAX_ID_BYTES} bytes of UTF-8, no NUL")]
Name = Annotated[StrictStr, StringConstraints(min_length=1, max_length=MAX_NAME_CHARS)]


def check_payload(payload: dict[str, Any], what: str) -> None:
    """What gets sealed: nested at most `MAX_NESTING` levels, at most `MAX_VALUE_BYTES` as JSON (413)."""
    for name, part in payload.items():
        check_nesting(part, name)
    size = len(json.dumps(payload, separators=(",", ":"), ensure_ascii=False).encode())
    if size > MAX_VALUE_BYTES:
        raise ContentTooLong(f"{what} take {size} bytes as JSON; the limit is {MAX_VALUE_BYTES}",
                             max_bytes=MAX_VALUE_BYTES)


def if_match(header: str | None) -> int | None:
    """The version an `If-Match` header names (`3`, `"3"` or `W/"3"`); None without one, or for `*` (any
    current version: the routes answer 404 when there is none)."""
    tag = if_match_tag(header, VERSION_NUMBER, 'a version number, as 3 or "3"')
    return None if tag is None else int(tag)


def check_version(expected: int | None, current: int, what: str) -> None:
    """`If-Match`: a write naming a version (`expected`) goes ahead only on that version (412)."""
    if expected is not None and expected != current:
        raise PreconditionFailed(f"the {what} is not at the version If-Match names",
                                 details={"expected_version": expected, "current_version": current})


def notify(notices: BusEvents | None, detail_type: str, detail: dict[str, Any]) -> None:
    """After the write committed; a lost event never fails or undoes the write (logged instead)."""
    if notices is None:
        return
    try:
        notices.publish(detail_type, detail)
    except Exception:
        log.exception("workflow event not published", extra={"detail_type": detail_type})
