"""The answers of the export and import routes (issue 26)."""

from __future__ import annotations

from typing import Any, Literal, Self

from pydantic import Field

from memsvc.api.schemas import Answer, Rfc3339
from memsvc.core.transfer_jobs import TransferJob

__all__ = ["TransferJobOut", "ExportPartOut"]


class TransferJobOut(Answer):
    id: str
    kind: Literal["export", "import"]
    state: Literal["uploading", "checking", "running", "done", "failed"]
    created_at: Rfc3339
    updated_at: Rfc3339
    expires_at: Rfc3339 = Field(description="the job and its file are removed then")
    parts: int = Field(description="an export's file parts, to download in order (an import's are uploaded)")
    bytes: int = Field(description="of an export's file so far")
    done: int = Field(description="records exported, checked (state checking) or imported")
    total: int | None = Field(description="records in all, once known (an export at its end, an import after its "
                                          "check)")
    counts: dict[str, dict[str, int]] = Field(
        description="per record kind (memory_version: one version of a memory's history): exported; or create, "
                    "update, skip, expired, no_plan, remapped, not_carried (a version over a key with versions of "
                    "its own)")
    remapped: list[dict[str, Any]] = Field(description="memories written under a new id and version (the first 100)")
    scope: dict[str, Any] | None = Field(None, description="an export's scope")
    encryption: str | None = Field(None, description="an export's: passphrase, kms or none")
    dry_run: bool | None = None
    source: dict[str, Any] | None = Field(None, description="an import's file: its tenant, scope and time")
    error: dict[str, Any] | None = Field(None, description="why the job failed: the error envelope's body")

    @classmethod
    def of(cls, job: TransferJob) -> Self:
        options = job.options
        return cls(id=job.job_id, kind=job.kind, state=job.state, created_at=job.created_at,
                   updated_at=job.updated_at, expires_at=job.expires_at, parts=job.parts, bytes=job.bytes,
                   done=job.done, total=job.total, counts=job.counts, remapped=job.remapped,
                   scope=options.get("scope"), encryption=options.get("encryption"), dry_run=options.get("dry_run"),
                   source=options.get("file"), error=job.error)


class ExportPartOut(Answer):
    index: int
    parts: int = Field(description="how many parts the file has")
    data: str = Field(description="the part's bytes, base64: the file is the parts' bytes in order")
