"""Export and import jobs (issue 26): what the transfer store keeps of each. Pure data.

A job's file is kept as numbered parts of at most `MAX_PART_BYTES` (a DynamoDB item holds one),
downloaded and uploaded one part per request. `sealed` holds what the job's steps need and no one
may read: its cursor, its checksum so far, the export's content key, sealed under the tenant's
data key. The rest (state, counts) is plaintext: it names no content.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Literal

from memsvc.core.models import from_epoch_us, to_epoch_us

__all__ = ["TransferJob", "job_doc", "job_of_doc", "may_hold_user",
           "TransferKind", "TransferState", "MAX_PART_BYTES", "MAX_PARTS",
           "JOB_RETENTION_DAYS"]

TransferKind = Literal["export", "import"]
# An import is `uploading` until its parts are all there, `checking` its file from end to end
# (nothing is written until the whole file proves whole), then `running`.
TransferState = Literal["uploading", "checking", "running", "done", "failed"]
MAX_PART_BYTES = 256 * 1024
MAX_PARTS = 40_000  # 10 GiB
JOB_RETENTION_DAYS = 7  # a job and its parts are removed this long after it was created


@dataclass(frozen=True)
class TransferJob:
    tenant: str
    job_id: str
    kind: TransferKind
    state: TransferState
    version: int
    created_at: datetime
    updated_at: datetime
    expires_at: datetime
    parts: int = 0
    bytes: int = 0
    # Plaintext progress: records done and, when known, the total; per kind, what was done.
    done: int = 0
    total: int | None = None
    counts: dict[str, dict[str, int]] = field(default_factory=dict)
    remapped: list[dict[str, Any]] = field(default_factory=list)
    options: dict[str, Any] = field(default_factory=dict)  # scope, dry_run, encryption kind: no secret
    error: dict[str, Any] | None = None
    sealed: bytes = b""


def job_doc(job: TransferJob) -> dict[str, Any]:
    """The plaintext fields as one JSON document (both stores keep it whole; `sealed` beside it)."""
    return {"kind": job.kind, "state": job.state, "created_at": to_epoch_us(job.created_at),
            "updated_at": to_epoch_us(job.updated_at), "expires_at": to_epoch_us(job.expires_at),
            "parts": job.parts, "bytes": job.bytes, "done": job.done, "total": job.total, "counts": job.counts,
            "remapped": job.remapped, "options": job.options, "error": job.error}


def job_of_doc(tenant: str, job_id: str, version: int, doc: dict[str, Any], sealed: bytes) -> TransferJob:
    return TransferJob(tenant=tenant, job_id=job_id, kind=doc["kind"], state=doc["state"], version=version,
                       created_at=from_epoch_us(doc["created_at"]), updated_at=from_epoch_us(doc["updated_at"]),
                       expires_at=from_epoch_us(doc["expires_at"]), parts=doc["parts"], bytes=doc["bytes"],
                       done=doc["done"], total=doc["total"], counts=doc["counts"], remapped=doc["remapped"],
                       options=doc["options"], error=doc["error"], sealed=sealed)


def may_hold_user(job: TransferJob, user_id: str) -> bool:
    """Whether the job's row or file may hold anything of `user_id` (what erasing the user
    removes): a job the user ran; an export of the whole tenant, of the user, or of a prefix
    that holds the user's namespaces (`["user"]`, `["user", U, ...]`); and every import, whose
    file is the uploader's and may hold any user's records whatever its header says (one not yet
    started has not even been read)."""
    if (job.options.get("caller") or {}).get("user_id") == user_id or job.kind == "import":
        return True
    scope = job.options.get("scope") or {}
    if scope.get("tenant"):
        return True
    if scope.get("user_id") is not None:
        return scope["user_id"] == user_id
    prefix = list(scope.get("prefix") or [])
    return prefix[:1] == ["user"] and (len(prefix) < 2 or prefix[1] == user_id)
