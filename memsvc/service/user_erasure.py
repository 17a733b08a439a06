"""Erasing a user (`DELETE /admin/v1/users/{user_id}`, issue 26): every row of the user, in every
store, a bounded number of pages per request, resumable, with a receipt.

What is the user's: every row under the user's namespaces (`["user", U, ...]`: the user, agent and
session layers, semantic upserts, sessions' messages) in the item store and in everything derived
from it, and every row keyed by the user id (sessions, plans and working memory, task contexts the
user created, queued jobs the user's calls made, rate-limit counters, the user's profile and
reflection state). Memories the user wrote into shared namespaces (project, team, org, company)
are the project's: they stay (see docs/data-ownership.md, "Erasing a user").

The erasure keeps one record per (tenant, user) in the tenant's config store, named by a keyed
hash of the user id (`ErasureLedger.record_name`), never by the id: the record is what makes a repeated DELETE
idempotent and an interrupted one resumable. While it runs, the record holds the user id sealed
(a worker continues it from there); once done it holds only the receipt.
"""

from __future__ import annotations

import base64
import logging
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Literal

from memsvc.core.errors import InternalError, InvalidArgument, NotFound
from memsvc.core.models import Caller, RememberJob, StoredItem, to_rfc3339
from memsvc.core.timestamps import parse_rfc3339
from memsvc.ports import BusEvents, Clock, TenantConfigStore, UserDataStores
from memsvc.service.access import Access
from memsvc.service.profile import _doc_name as _profile_name
from memsvc.service.reflection import _state_name as _reflection_name
from memsvc.service.sealing import Sealer
from memsvc.service.transfers import is_transfer_job

__all__ = ["UserErasure", "ErasureLedger", "ErasureReceipt", "check_user_id", "job_users", "semantic_digest",
           "USER_ID_SCHEMA", "MAX_USER_ID_BYTES", "PAGE_ROWS", "PAGES_PER_REQUEST", "RECORD_PREFIX", "user_config_names"]

log = logging.getLogger(__name__)

MAX_USER_ID_BYTES = 256
# `check_user_id` as far as JSON Schema can say it (it counts characters, not bytes).
USER_ID_SCHEMA = {"type": "string", "minLength": 1, "maxLength": MAX_USER_ID_BYTES,
                  "pattern": "^[^\\u0000-\\u001f\\u007f-\\u009f]+$",
                  "description": f"a user id as tokens carry it: 1 to {MAX_USER_ID_BYTES} bytes of UTF-8, no control "
                                 "character"}
# Rows one store removes per page: a page is one transaction (locally) or a few batch requests.
PAGE_ROWS = 1_000
# Pages one request (or one worker turn) does at most, so that a request's work is bounded:
# 60,000 rows, a few seconds locally. A bigger user answers 202 and is continued by the next
# DELETE, or by the local worker.
PAGES_PER_REQUEST = 60
RECORD_PREFIX = "erasure#"  # every erasure record's name starts so (`ErasureLedger.record_name`)
# Domain separation: the record's name is the keyed hash the field ids use, of a string no
# field path of a value is.
_PSEUDONYM_DOMAIN = "\x00user-erasure\x00"
USER_ERASED = "user.erased"


def user_config_names(user_id: str) -> tuple[str, ...]:
    """The tenant config rows named after a user: `service.profile`'s standing profile and
    `service.reflection`'s state."""
    return _profile_name(user_id), _reflection_name(user_id)


def check_user_id(value: str) -> str:
    """A user id as callers' tokens carry it: 1 to 256 bytes of UTF-8, no control character."""
    try:
        size = len(value.encode("utf-8"))
    except UnicodeEncodeError:  # a lone surrogate: no token's subject
        size = 0
    if not 0 < size <= MAX_USER_ID_BYTES or any(ord(ch) < 0x20 or 0x7F <= ord(ch) < 0xA0 for ch in value):
        raise InvalidArgument(f"user_id must be 1 to {MAX_USER_ID_BYTES} bytes of UTF-8 without control characters",
                              details={"field": "user_id", "max_bytes": MAX_USER_ID_BYTES})
    return value


def job_users(sealer: Sealer) -> Callable[[RememberJob], set[str]]:
    """Whom a queued job (`remember` with `wait: false`, an extraction) acts for: its caller, and
    the user whose layer or namespace it writes. An export or import step holds no user's data
    (its job row does: the transfers store); a job that cannot be opened cannot run either, and
    must not stop every erasure of its tenant."""
    def users(job: RememberJob) -> set[str]:
        if is_transfer_job(job):
            return set()
        try:
            payload = sealer.open_job(job.tenant, job.candidate_id, job.sealed)
        except InternalError:
            log.warning("an erasure passed over a queued job that cannot be opened", extra={"tenant": job.tenant})
            return set()
        found = {payload["caller"]["user_id"]}
        command = payload.get("command") or {}
        if named := (command.get("identifiers") or {}).get("user_id"):
            found.add(named)
        namespace = command.get("namespace") or []
        if len(namespace) >= 2 and namespace[0] == "user":
            found.add(namespace[1])
        return found
    return users


def semantic_digest(sealer: Sealer) -> Callable[[StoredItem], str | None]:
    """The content hash a semantic upsert keeps in its memory's value (`service.semantic`), which
    names the memory's pointer row in the workflow store."""
    def digest(item: StoredItem) -> str | None:
        found = (sealer.open_value(item) or {}).get("content_hash")
        return found if isinstance(found, str) else None
    return digest


@dataclass(frozen=True)
class ErasureReceipt:
    user_id: str
    erasure_id: str
    status: Literal["running", "completed"]
    started_at: datetime
    completed_at: datetime | None
    erased: dict[str, int]  # rows per store (for the timeline: entries stripped)


@dataclass
class _Record:
    erasure_id: str
    status: Literal["running", "completed"]
    started_at: datetime
    completed_at: datetime | None = None
    erased: dict[str, int] = field(default_factory=dict)
    next_store: int = 0
    cursor: str | None = None  # where the store `next_store` goes on
    sealed_user: bytes | None = None
    # Rows this pass over the stores removed: a pass that removed any is followed by another.
    in_pass: int = 0

    def doc(self) -> dict[str, Any]:
        return {"erasure_id": self.erasure_id, "status": self.status, "started_at": to_rfc3339(self.started_at),
                "completed_at": to_rfc3339(self.completed_at) if self.completed_at else None,
                "erased": self.erased, "next_store": self.next_store, "cursor": self.cursor,
                "sealed_user": base64.b64encode(self.sealed_user).decode("ascii") if self.sealed_user else None,
                "in_pass": self.in_pass}

    @classmethod
    def of(cls, doc: Mapping[str, Any]) -> _Record:
        return cls(erasure_id=doc["erasure_id"], status=doc["status"], started_at=parse_rfc3339(doc["started_at"]),
                   completed_at=parse_rfc3339(doc["completed_at"]) if doc.get("completed_at") else None,
                   erased=dict(doc["erased"]), next_store=int(doc["next_store"]), cursor=doc.get("cursor"),
                   sealed_user=base64.b64decode(doc["sealed_user"]) if doc.get("sealed_user") else None,
                   in_pass=int(doc.get("in_pass", 0)))

    def receipt(self, user_id: str) -> ErasureReceipt:
        return ErasureReceipt(user_id, self.erasure_id, self.status, self.started_at, self.completed_at,
                              dict(self.erased))


class ErasureLedger:
    """The erasure records, and what the feed consumers ask of them: since when a user's rows are
    being erased, so that a change of the user's made before that (one still in the change feed
    or the table's stream when the erasure ran) adds nothing back."""

    def __init__(self, configs: TenantConfigStore, sealer: Sealer) -> None:
        self._configs = configs
        self._sealer = sealer

    def record_name(self, tenant: str, user_id: str) -> str:
        return RECORD_PREFIX + self._sealer.field_id(tenant, _PSEUDONYM_DOMAIN + user_id)

    def get(self, tenant: str, name: str) -> _Record | None:
        doc = self._configs.get_config(tenant, name)
        return _Record.of(doc) if doc else None

    def put(self, tenant: str, name: str, record: _Record) -> None:
        self._configs.put_config(tenant, name, record.doc())

    def erased_since(self, tenant: str, user_id: str) -> datetime | None:
        """When the user's last erasure started, or None when the user was never erased."""
        record = self.get(tenant, self.record_name(tenant, user_id))
        return record.started_at if record is not None else None

    def written_before_erasure(self, tenant: str, namespace: tuple[str, ...], at: datetime,
                               cache: dict[tuple[str, str], datetime | None]) -> bool:
        """Whether a change made `at` to `namespace` is of a user erased since (`cache`: one
        lookup per user per batch)."""
        if len(namespace) < 2 or namespace[0] != "user":
            return False
        user = (tenant, namespace[1])
        if user not in cache:
            cache[user] = self.erased_since(tenant, namespace[1])
        since = cache[user]
        return since is not None and at <= since


class UserErasure:
    def __init__(self, *, stores: UserDataStores, ledger: ErasureLedger, sealer: Sealer, access: Access,
                 clock: Clock, bus: BusEvents | None, page_rows: int = PAGE_ROWS,
                 seconds_per_request: float | None = None, timer: Callable[[], float] = time.monotonic,
                 new_id: Callable[[], str] = lambda: str(uuid.uuid4())) -> None:
        """`seconds_per_request`: no page starts after this long in one request or worker turn
        (a Lambda behind API Gateway answers within 30 s); None: pages alone bound the work."""
        self._stores = stores
        self._page_rows = page_rows
        self._seconds = seconds_per_request
        self._timer = timer
        self._ledger = ledger
        self._sealer = sealer
        self._access = access
        self._clock = clock
        self._bus = bus
        self._new_id = new_id
        # One run of a user's erasure at a time in this process (an admin's DELETE and the local
        # worker's turn), so its receipt counts each row once and `user.erased` goes out once.
        # A lock per erasure in progress, with how many hold or wait for it: dropped with the
        # last, so the map holds only erasures running now.
        self._guard = threading.Lock()
        self._runs: dict[tuple[str, str], tuple[threading.Lock, int]] = {}

    def erase(self, caller: Caller, user_id: str, *, pages: int = PAGES_PER_REQUEST) -> ErasureReceipt:
        """Start or continue erasing `user_id` of the caller's tenant, at most `pages` pages. A
        completed erasure is answered with its receipt when the user has had nothing since;
        otherwise (the user wrote again after it) a new erasure starts."""
        self._access.admin(caller)
        user_id = check_user_id(user_id)
        tenant = caller.tenant_id
        name = self._ledger.record_name(tenant, user_id)
        with self._running(tenant, name, wait=True):
            return self._erase(tenant, name, user_id, pages)

    def _erase(self, tenant: str, name: str, user_id: str, pages: int) -> ErasureReceipt:
        record = self._ledger.get(tenant, name)
        if record is not None and record.status == "completed":
            again = self._start(tenant, user_id)
            if self._run(tenant, user_id, again, pages=pages) and not any(again.erased.values()):
                return record.receipt(user_id)
            self._save(tenant, name, user_id, again)
            return again.receipt(user_id)
        if record is None:
            record = self._start(tenant, user_id)
            self._ledger.put(tenant, name, record)
        self._run(tenant, user_id, record, pages=pages, saving=lambda r: self._save(tenant, name, user_id, r))
        return record.receipt(user_id)

    def status(self, caller: Caller, user_id: str) -> ErasureReceipt:
        """The receipt of the user's last erasure."""
        self._access.admin(caller)
        user_id = check_user_id(user_id)
        record = self._ledger.get(caller.tenant_id, self._ledger.record_name(caller.tenant_id, user_id))
        if record is None:
            raise NotFound("this user was never erased", details={"user_id": user_id})
        return record.receipt(user_id)

    def continue_running(self, *, pages: int = PAGES_PER_REQUEST) -> int:
        """A background turn: continue every running erasure by at most `pages` pages each (one
        tenant's big erasure never holds up another's). Returns how many ran."""
        ran = 0
        for tenant, name in self._stores.running():
            with self._running(tenant, name, wait=False) as mine:
                if not mine:
                    continue  # a DELETE is running it now
                record = self._ledger.get(tenant, name)  # read under the lock: it may have finished
                if record is None or record.status != "running" or record.sealed_user is None:
                    continue
                user_id = self._sealer.open_record(tenant, ("erasure", record.erasure_id),
                                                   record.sealed_user)["user_id"]
                self._run(tenant, user_id, record, pages=pages, saving=lambda r: self._save(tenant, name, user_id, r))
                ran += 1
        return ran

    @contextmanager
    def _running(self, tenant: str, name: str, *, wait: bool) -> Iterator[bool]:
        """Hold the erasure's lock (`wait` False: only if free). Yields whether it is held."""
        key = (tenant, name)
        with self._guard:
            lock, users = self._runs.get(key, (threading.Lock(), 0))
            self._runs[key] = (lock, users + 1)
        try:
            held = lock.acquire(blocking=wait)
            try:
                yield held
            finally:
                if held:
                    lock.release()
        finally:
            with self._guard:
                lock, users = self._runs[key]
                if users == 1:
                    del self._runs[key]
                else:
                    self._runs[key] = (lock, users - 1)

    def _start(self, tenant: str, user_id: str) -> _Record:
        erasure_id = self._new_id()
        return _Record(erasure_id=erasure_id, status="running", started_at=self._clock.now(),
                       erased={store: 0 for store in self._stores.stores},
                       sealed_user=self._sealer.seal_record(tenant, ("erasure", erasure_id), {"user_id": user_id}))

    def _run(self, tenant: str, user_id: str, record: _Record, *, pages: int,
             saving: Callable[[_Record], None] = lambda record: None) -> bool:
        """Up to `pages` pages, store after store, `saving` the record after each, so that an
        interrupted erasure continues from the store it was in (a page repeated removes nothing
        twice). Whether the erasure is complete: a pass over every store that removed nothing.
        A pass that removed rows is followed by another, which finds what the user's writes
        (a token still valid, an agent still running) put behind it while it ran."""
        stores = self._stores.stores
        deadline = None if self._seconds is None else self._timer() + self._seconds
        while pages > 0 and record.next_store < len(stores) and (deadline is None or self._timer() < deadline):
            store = stores[record.next_store]
            removed, record.cursor = self._stores.erase(tenant, user_id, store, erasure_id=record.erasure_id,
                                                        limit=self._page_rows, cursor=record.cursor)
            pages -= 1
            record.erased[store] = record.erased.get(store, 0) + removed
            record.in_pass += removed
            if record.cursor is None:
                record.next_store += 1
            if record.next_store == len(stores):
                if record.in_pass or self._stores.left_for_another_pass(tenant, user_id):
                    record.next_store = record.in_pass = 0  # another pass
                else:
                    self._stores.finish(tenant)
                    record.status, record.completed_at, record.sealed_user = "completed", self._clock.now(), None
            saving(record)
        return record.status == "completed"

    def _save(self, tenant: str, name: str, user_id: str, record: _Record) -> None:
        """Keep the record; announce `user.erased` once it is complete."""
        self._ledger.put(tenant, name, record)
        if record.status == "completed" and self._bus is not None:
            self._bus.publish(USER_ERASED, {
                "id": record.erasure_id, "tenant": tenant, "user_id": user_id, "erasure_id": record.erasure_id,
                "started_at": to_rfc3339(record.started_at),
                "completed_at": to_rfc3339(record.completed_at) if record.completed_at else None,
                "erased": dict(record.erased)})
