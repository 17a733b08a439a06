"""The local transfer store: export and import jobs and their files' parts in their own SQLite
file (`transfers.db` in the data dir), outside the item store's change feed."""

from __future__ import annotations

import json
from datetime import datetime
from pathlib import Path

from memsvc.adapters.local.sqlite_db import SqliteFile
from memsvc.core.errors import Conflict
from memsvc.core.models import to_epoch_us
from memsvc.core.transfer_jobs import TransferJob, job_doc, job_of_doc

__all__ = ["SqliteTransferStore"]

_SCHEMA = """
CREATE TABLE IF NOT EXISTS transfer_jobs (
    tenant TEXT NOT NULL, job_id TEXT NOT NULL, version INTEGER NOT NULL, expires_at INTEGER NOT NULL,
    doc TEXT NOT NULL, sealed BLOB NOT NULL,
    PRIMARY KEY (tenant, job_id)
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS transfer_jobs_expiry ON transfer_jobs (tenant, expires_at);
CREATE TABLE IF NOT EXISTS transfer_parts (
    tenant TEXT NOT NULL, job_id TEXT NOT NULL, idx INTEGER NOT NULL, data BLOB NOT NULL,
    PRIMARY KEY (tenant, job_id, idx)
);
"""


class SqliteTransferStore:
    """`TransferStore`."""

    def __init__(self, path: Path) -> None:
        self._db = SqliteFile(path, _SCHEMA)

    def save_job(self, job: TransferJob, *, expected_version: int | None) -> None:
        with self._db.tx() as conn:
            row = conn.execute("SELECT version FROM transfer_jobs WHERE tenant = ? AND job_id = ?",
                               (job.tenant, job.job_id)).fetchone()
            if (row[0] if row else None) != expected_version:
                raise Conflict("the job was changed by another step", details={"job_id": job.job_id})
            conn.execute("INSERT OR REPLACE INTO transfer_jobs (tenant, job_id, version, expires_at, doc, sealed) "
                         "VALUES (?, ?, ?, ?, ?, ?)",
                         (job.tenant, job.job_id, job.version, to_epoch_us(job.expires_at), json.dumps(job_doc(job)),
                          job.sealed))

    def get_job(self, tenant: str, job_id: str) -> TransferJob | None:
        row = self._db.conn().execute("SELECT version, doc, sealed FROM transfer_jobs WHERE tenant = ? AND job_id = ?",
                                      (tenant, job_id)).fetchone()
        return job_of_doc(tenant, job_id, row[0], json.loads(row[1]), bytes(row[2])) if row else None

    def put_part(self, tenant: str, job_id: str, index: int, data: bytes) -> None:
        with self._db.tx() as conn:
            conn.execute("INSERT OR REPLACE INTO transfer_parts (tenant, job_id, idx, data) VALUES (?, ?, ?, ?)",
                         (tenant, job_id, index, data))

    def get_part(self, tenant: str, job_id: str, index: int) -> bytes | None:
        row = self._db.conn().execute("SELECT data FROM transfer_parts WHERE tenant = ? AND job_id = ? AND idx = ?",
                                      (tenant, job_id, index)).fetchone()
        return bytes(row[0]) if row else None

    def last_part(self, tenant: str, job_id: str) -> int | None:
        return self._db.conn().execute("SELECT MAX(idx) FROM transfer_parts WHERE tenant = ? AND job_id = ?",
                                       (tenant, job_id)).fetchone()[0]

    def purge_expired(self, tenant: str, now: datetime) -> int:
        with self._db.tx() as conn:
            due = [r[0] for r in conn.execute("SELECT job_id FROM transfer_jobs WHERE tenant = ? AND expires_at <= ?",
                                              (tenant, to_epoch_us(now)))]
            for job_id in due:
                conn.execute("DELETE FROM transfer_parts WHERE tenant = ? AND job_id = ?", (tenant, job_id))
                conn.execute("DELETE FROM transfer_jobs WHERE tenant = ? AND job_id = ?", (tenant, job_id))
        return len(due)
