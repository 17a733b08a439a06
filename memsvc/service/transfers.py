"""What export and import jobs share (issue 26): each job runs as a chain of bounded steps on the
queue `remember` and extraction use (the local jobs thread; SQS and the remember Lambda on AWS).
A step does one page of work, saves the job at its next version and queues the next step.

A step's queue message names the job version it continues, so a redelivered step finds the job
moved on and does nothing; a step that died before queueing its successor is queued again by the
next status read that finds the job quiet for `STALL_SECONDS`. Steps of different jobs (and
tenants) interleave on the queue: a big export never holds up another tenant's.
"""

from __future__ import annotations

import dataclasses
import uuid
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any

from memsvc.core.crypto import SealError, open_sealed, seal
from memsvc.core.errors import Conflict, InternalError, MemsvcError, NotFound
from memsvc.core.models import Caller, RememberJob
from memsvc.core.transfer_jobs import JOB_RETENTION_DAYS, TransferJob, TransferKind, TransferState
from memsvc.ports import Clock, RememberQueue, TransferStore
from memsvc.service.sealing import Sealer

__all__ = ["TransferSteps", "is_transfer_job", "transfer_kind", "STALL_SECONDS", "caller_of", "caller_doc"]

_PREFIX = "transfer:"
STALL_SECONDS = 120  # well past a step's budget: a running job this quiet lost its next step


class _StepLost(Conflict):
    """Another delivery of the step (or another request) saved the job first: this one's work is
    dropped."""

    def __init__(self) -> None:
        super().__init__("the job was changed by another request; read it again")


def is_transfer_job(job: RememberJob) -> bool:
    return job.candidate_id.startswith(_PREFIX)


def _part_aad(tenant: str, job_id: str, index: int) -> bytes:
    return f"memsvc-transfer-part\x00{tenant}\x00{job_id}\x00{index}".encode()


def transfer_kind(job: RememberJob) -> str:
    """`export` or `import`: which service runs the step."""
    return job.candidate_id.removeprefix(_PREFIX).split(":")[0]


def caller_doc(caller: Caller) -> dict[str, Any]:
    """Who started the job, as its steps act: never more than the admin who asked."""
    return {"tenant_id": caller.tenant_id, "user_id": caller.user_id, "roles": list(caller.roles),
            "client_id": caller.client_id, "principal_type": caller.principal_type}


def caller_of(doc: dict[str, Any]) -> Caller:
    return Caller(tenant_id=doc["tenant_id"], user_id=doc["user_id"], roles=tuple(doc["roles"]),
                  client_id=doc["client_id"], principal_type=doc["principal_type"])


class TransferSteps:
    def __init__(self, *, store: TransferStore, queue: RememberQueue, clock: Clock, sealer: Sealer) -> None:
        self.store = store
        self._queue = queue
        self._clock = clock
        self._sealer = sealer

    def put_part(self, tenant: str, job_id: str, index: int, data: bytes) -> None:
        """Every part is sealed at rest under the tenant's data key, whatever the file's own
        sealing: a plaintext export never lies in the clear in the store."""
        self.store.put_part(tenant, job_id, index, seal(self._sealer.data_key(tenant), data,
                                                        _part_aad(tenant, job_id, index)))

    def get_part(self, tenant: str, job_id: str, index: int) -> bytes | None:
        blob = self.store.get_part(tenant, job_id, index)
        if blob is None:
            return None
        try:
            return open_sealed(self._sealer.data_key(tenant), blob, _part_aad(tenant, job_id, index))
        except SealError as exc:
            raise InternalError("a part of a stored file could not be decrypted") from exc

    def last_part(self, tenant: str, job_id: str) -> int | None:
        return self.store.last_part(tenant, job_id)

    def new_job(self, caller: Caller, kind: TransferKind, *, state: TransferState, options: dict[str, Any],
                sealed: Callable[[str], bytes]) -> TransferJob:
        """A new job of the caller's tenant; `sealed(job_id)` gives its sealed state."""
        now = self._clock.now()
        self.store.purge_expired(caller.tenant_id, now)
        job_id = str(uuid.uuid4())
        job = TransferJob(tenant=caller.tenant_id, job_id=job_id, kind=kind, state=state, version=1,
                          created_at=now, updated_at=now, expires_at=now + timedelta(days=JOB_RETENTION_DAYS),
                          options={**options, "caller": caller_doc(caller)}, sealed=sealed(job_id))
        self.store.save_job(job, expected_version=None)
        return job

    def job(self, caller: Caller, job_id: str, kind: TransferKind) -> TransferJob:
        job = self.store.get_job(caller.tenant_id, job_id)
        if job is None or job.kind != kind or job.expires_at <= self._clock.now():
            raise NotFound(f"no {kind} job with this id", details={"id": job_id})
        return job

    def advance(self, job: TransferJob, **changes: Any) -> TransferJob:
        """Save the job's next version and queue its next step if it still has work. A step that
        raced another delivery of itself loses here, before queueing anything."""
        moved = dataclasses.replace(job, version=job.version + 1, updated_at=self._clock.now(), **changes)
        try:
            self.store.save_job(moved, expected_version=job.version)
        except Conflict:
            raise _StepLost() from None
        if moved.state in ("checking", "running"):
            self.queue_step(moved)
        return moved

    def queue_step(self, job: TransferJob) -> None:
        self._queue.enqueue(RememberJob(job.tenant, f"{_PREFIX}{job.kind}:{job.job_id}:{job.version}", b""))

    def nudge_if_stalled(self, job: TransferJob) -> None:
        if job.state in ("checking", "running") and job.updated_at <= self._clock.now() - timedelta(
                seconds=STALL_SECONDS):
            self.queue_step(job)

    def due_job(self, message: RememberJob) -> TransferJob | None:
        """The job a step message continues, or None when it has moved on (a redelivery)."""
        _, job_id, version = message.candidate_id.removeprefix(_PREFIX).split(":")
        job = self.store.get_job(message.tenant, job_id)
        if job is None or str(job.version) != version or job.state not in ("checking", "running"):
            return None
        return job

    def run(self, message: RememberJob, step: Callable[[TransferJob], TransferJob]) -> str:
        """Run one step; a failure the caller caused (a bad file) ends the job with its error, an
        outage is raised for the queue to retry."""
        job = self.due_job(message)
        if job is None:
            return "transfer_skipped"
        try:
            if step(job).state == "failed":  # on what only writing found (`DataImports.step`)
                return "transfer_failed"
        except _StepLost:
            return "transfer_skipped"  # another delivery of this step won
        except MemsvcError as exc:
            if exc.retryable:
                raise
            try:
                self.advance(job, state="failed", error=exc.to_body()["error"])
            except _StepLost:
                return "transfer_skipped"
            return "transfer_failed"
        return "transfer_step"

    def now(self) -> datetime:
        return self._clock.now()
