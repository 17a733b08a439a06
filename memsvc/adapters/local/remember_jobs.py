"""The local queue of `remember` calls with `wait: false`: durable rows in SQLite (the data
directory's `jobs.db`), drained by the background workers and left in place until decided, so a
process that stops midway resumes them at its next start.

A job that fails is retried with backoff; one that fails `max_attempts` times, or with an error
that retrying cannot fix (the caller lost the right to write there, a policy refuses it), is
parked (kept, with its error, for an operator) instead of deleted.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from pathlib import Path
from typing import Any

from memsvc.adapters.local.sqlite_db import SqliteFile
from memsvc.core.errors import MemsvcError
from memsvc.core.models import RememberJob, to_epoch_us
from memsvc.ports import Clock

__all__ = ["SqliteRememberQueue"]

log = logging.getLogger(__name__)

_SCHEMA = """
CREATE TABLE IF NOT EXISTS remember_jobs (
    tenant TEXT NOT NULL, candidate_id TEXT NOT NULL, sealed BLOB NOT NULL,
    attempts INTEGER NOT NULL DEFAULT 0, not_before INTEGER NOT NULL, enqueued_at INTEGER NOT NULL,
    parked TEXT,
    PRIMARY KEY (tenant, candidate_id)
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS remember_jobs_due ON remember_jobs (not_before) WHERE parked IS NULL;
"""


class SqliteRememberQueue:
    """`RememberQueue`. Jobs are keyed by (tenant, candidate id): the candidate id is derived
    from the namespace and content, so the same candidate queued twice is one job."""

    def __init__(self, path: Path, clock: Clock, *, max_attempts: int = 5,
                 on_enqueue: Callable[[], None] = lambda: None) -> None:
        self._db = SqliteFile(path, _SCHEMA)
        self._clock = clock
        self._max_attempts = max_attempts
        self._on_enqueue = on_enqueue  # wakes the worker

    def enqueue(self, job: RememberJob, *, delay_seconds: int = 0) -> None:
        now = to_epoch_us(self._clock.now())
        due = now + max(0, min(900, delay_seconds)) * 1_000_000
        with self._db.tx() as conn:
            # The same job queued again is one job; a parked one is given a fresh start (it was
            # asked for again: an extraction retried after its model came back).
            conn.execute("INSERT INTO remember_jobs (tenant, candidate_id, sealed, not_before, enqueued_at) "
                         "VALUES (?, ?, ?, ?, ?) ON CONFLICT (tenant, candidate_id) DO UPDATE SET "
                         "sealed = excluded.sealed, not_before = excluded.not_before, attempts = 0, parked = NULL "
                         "WHERE parked IS NOT NULL", (job.tenant, job.candidate_id, job.sealed, due, now))
        self._on_enqueue()

    def drain(self, run: Callable[[RememberJob], Any], *, limit: int = 100) -> int:
        """Run up to `limit` of the jobs that are due, tenants taking turns: each next job is the
        oldest due one of the tenant served longest ago in this drain (one not served yet first;
        among those, the one waiting longest). Chosen again before each job, so a job waits for at
        most one job of each other tenant with jobs due, never for another tenant's backlog (30
        queued extractions of one tenant kept another's remember waiting 66 s). A tenant's own
        due jobs run in the order they came, whichever user queued them: its users write to layers
        they share, where a later statement is best decided after an earlier one (a job backing
        off after a failure, or queued with a delay, runs when it is due). Returns how many ran."""
        last_turn: dict[str, int] = {}  # when each tenant was last served in this drain
        ran = 0
        while ran < limit:
            now = to_epoch_us(self._clock.now())
            due = self._db.conn().execute(
                "SELECT tenant, MIN(enqueued_at) FROM remember_jobs WHERE parked IS NULL AND not_before <= ? "
                "GROUP BY tenant", (now,)).fetchall()
            if not due:
                break
            tenant = min(due, key=lambda row: (last_turn.get(row[0], -1), row[1]))[0]
            row = self._db.conn().execute(
                "SELECT candidate_id, sealed, attempts FROM remember_jobs WHERE tenant = ? AND parked IS NULL "
                "AND not_before <= ? ORDER BY enqueued_at LIMIT 1", (tenant, now)).fetchone()
            if row is None:  # erased meanwhile (`LocalUserDataStores`), or taken by another process: choose again
                continue
            candidate_id, sealed, attempts = row
            job = RememberJob(tenant, candidate_id, bytes(sealed), attempts)
            last_turn[tenant] = ran
            ran += 1
            try:
                run(job)
            except Exception as exc:
                self._failed(job, exc)
            else:
                with self._db.tx() as conn:
                    conn.execute("DELETE FROM remember_jobs WHERE tenant = ? AND candidate_id = ?",
                                 (tenant, candidate_id))
        return ran

    def _failed(self, job: RememberJob, exc: Exception) -> None:
        attempts = job.attempts + 1
        hopeless = isinstance(exc, MemsvcError) and not exc.retryable and exc.status < 500
        parked = f"{type(exc).__name__}: {getattr(exc, 'code', '')}" if hopeless or attempts >= self._max_attempts else None
        log.warning("a remember job failed", extra={"tenant": job.tenant, "candidate_id": job.candidate_id,
                                                    "attempts": attempts, "parked": bool(parked)})
        backoff_us = min(2**attempts, 300) * 1_000_000
        with self._db.tx() as conn:
            conn.execute("UPDATE remember_jobs SET attempts = ?, not_before = ?, parked = ? "
                         "WHERE tenant = ? AND candidate_id = ?",
                         (attempts, to_epoch_us(self._clock.now()) + backoff_us, parked, job.tenant, job.candidate_id))

    def pending(self, tenant: str) -> int:
        return self._db.conn().execute("SELECT count(*) FROM remember_jobs WHERE tenant = ? AND parked IS NULL",
                                       (tenant,)).fetchone()[0]

    def parked(self, tenant: str) -> list[tuple[str, str]]:
        """(candidate id, error) of the tenant's parked jobs."""
        return self._db.conn().execute("SELECT candidate_id, parked FROM remember_jobs WHERE tenant = ? "
                                       "AND parked IS NOT NULL", (tenant,)).fetchall()
