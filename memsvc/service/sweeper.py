"""TTL cleanup: turn expired items into `expired` tombstones; past the tenant's
`tombstone_retention_days`, purge tombstones and timeline events."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta

from memsvc.core.errors import Conflict
from memsvc.core.models import expiry_event_id
from memsvc.ports import Clock, EventLog, LocalExpiry
from memsvc.service.tenant_config import SettingsRegistry

__all__ = ["Sweeper", "SweepResult"]


@dataclass
class SweepResult:
    expired: int = 0
    purged: int = 0
    purged_events: int = 0
    sessions_deleted: int = 0


class Sweeper:
    def __init__(self, store: LocalExpiry, settings: SettingsRegistry, clock: Clock, *, events: EventLog | None = None,
                 batch_size: int = 500, expired_sessions: Callable[[], int] | None = None) -> None:
        self._expired_sessions = expired_sessions  # removes auto-deleted sessions past retention
        self._store = store
        self._events = events
        self._settings = settings
        self._clock = clock
        self._batch_size = batch_size

    def sweep(self) -> SweepResult:
        result = SweepResult()
        now = self._clock.now()
        for item in self._store.expired(now, self._batch_size):
            tombstone = item.tombstone(kind="expired", at=item.expires_at or now, new_id=expiry_event_id(item.id))
            try:
                self._store.write(tombstone, kind="expired", old=item)
                result.expired += 1
            except Conflict:
                pass  # rewritten since we looked: the new write decides its own fate
        for tenant in self._store.tenants_with_tombstones():
            days = self._settings.get(tenant).tombstone_retention_days
            result.purged += self._store.purge_tombstones(tenant, now - timedelta(days=days))
        if self._events is not None:
            for tenant in self._events.tenants():
                days = self._settings.get(tenant).tombstone_retention_days
                result.purged_events += self._events.purge(tenant, now - timedelta(days=days))
        if self._expired_sessions is not None:
            result.sessions_deleted = self._expired_sessions()
        return result
