"""The local rate limiter: one counter row per (tenant, subject, window) in SQLite."""

from __future__ import annotations

from datetime import datetime
from pathlib import Path

from memsvc.adapters.local.sqlite_db import SqliteFile
from memsvc.core.models import to_epoch_us

__all__ = ["SqliteRateLimiter"]

_SCHEMA = """
CREATE TABLE IF NOT EXISTS rate_counters (
    tenant TEXT NOT NULL, subject TEXT NOT NULL, window INTEGER NOT NULL,
    used INTEGER NOT NULL, expires_at INTEGER NOT NULL,
    PRIMARY KEY (tenant, subject, window)
) WITHOUT ROWID;
"""


class SqliteRateLimiter:
    """`RateLimiter`: the check and the count are one transaction, so concurrent requests never
    count past the limit. Expired counters are dropped as new ones are written."""

    def __init__(self, path: Path) -> None:
        self._db = SqliteFile(path, _SCHEMA)

    def try_acquire(self, tenant: str, subject: str, window: int, limit: int, expires_at: datetime) -> bool:
        expires = to_epoch_us(expires_at)
        with self._db.tx() as conn:
            row = conn.execute("SELECT used FROM rate_counters WHERE tenant = ? AND subject = ? AND window = ?",
                               (tenant, subject, window)).fetchone()
            if row is not None and row[0] >= limit:
                return False
            if row is None:
                conn.execute("DELETE FROM rate_counters WHERE tenant = ? AND subject = ? AND window < ?",
                             (tenant, subject, window))
                conn.execute("INSERT INTO rate_counters (tenant, subject, window, used, expires_at) "
                             "VALUES (?, ?, ?, 1, ?)", (tenant, subject, window, expires))
            else:
                conn.execute("UPDATE rate_counters SET used = used + 1 WHERE tenant = ? AND subject = ? AND window = ?",
                             (tenant, subject, window))
            return True
