"""Background reflection over one user's typed memories (issue 24): merge near-duplicates, resolve
contradictions, recompute importance, archive what decayed, rebuild the profile. The rules are
`memsvc.core.reflection`'s; this module reads, applies them and writes.

- *Scope.* The live typed memories under `["user", U]` in the agent, user and session layers,
  less the tenant's `reflection_exempt_layers` (default `["session"]`); never session messages.
  Merges and supersessions stay out of `["user", U, "semantic"]` (its keys are callers'
  external ids); importance and the archive apply there too. A memory with a TTL is examined but
  never written: a write would restart its expiry.
- *Bounded and resumable.* The user's memories are taken in (namespace, key) order from a cursor,
  whole namespaces at a time, at most `reflection_max_memories` per run (a namespace larger than
  that is taken in parts; near-duplicates across its parts wait for a pass that sees them
  together). The cursor, the pool of profile candidates and the time of the last complete pass
  are kept per user in the tenant config store (`reflection#<user id>`; cursor and pool sealed).
  The next run continues there; the run that reaches the end rebuilds the profile
  (`service.profile`) and starts the next pass from the beginning.
- *Idempotent.* Every rule writes only when something changed (`core.reflection`), so a second
  run with nothing new writes nothing.
- *Concurrent writes win.* Every write is conditional on the version read; a memory written in
  between is skipped (counted in `skipped`) and met again in the next pass.
- *The judge* (check-range pairs) is asked at most `MAX_JUDGE_CALLS` times per run; past that
  such pairs are left alone until the next pass (on AWS each is a Bedrock call).
- *Every change is on the timeline* with its action and reason (`core.models.ACTION_REASONS`):
  `merged`, `duplicate_superseded`, `reflect_superseded`, `importance_recomputed`, `archived`.
  Reflection writes as the service, not as a caller: no policy or governance check (it only
  recombines values that passed them), the policy attributes of the version read.
- *Schedule.* `run_due` reflects the users whose last complete pass is older than
  `reflection_interval_hours` (or whose pass is unfinished), at most `max_users` per call: the
  local workers call it every few minutes, the AWS reflection function on its schedule.
"""

from __future__ import annotations

import base64
import bisect
import dataclasses
import logging
import random
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from pydantic import Field, StrictStr, field_validator

from memsvc.core.consolidation import stored_value
from memsvc.core.errors import Conflict
from memsvc.core.layers import SEMANTIC_SEGMENT, layer_of
from memsvc.core.models import Caller, LifecycleAction, StoredItem, to_rfc3339
from memsvc.core.reflection import (Member, NeighbourSearch, consolidate, effective_importance, importance_moved,
                                    last_active, older_neighbours, should_archive, with_bookkeeping)
from memsvc.core.same_fact import Verdict
from memsvc.core.sessions import is_messages_namespace
from memsvc.core.timestamps import parse_rfc3339
from memsvc.core.typed_memory import CONTENT_FIELDS, TypedMemory
from memsvc.core.validation import Command
from memsvc.ports import Clock, ItemStore, SameFactJudge, TenantConfigStore, VectorIndex
from memsvc.service.access import Access
from memsvc.service.memories import Memories
from memsvc.service.profile import ProfileCandidate, Profiles, best_candidates, profile_candidate
from memsvc.service.remember import thresholds_of
from memsvc.service.sealing import Sealer
from memsvc.service.tenant_config import SettingsRegistry, TenantSettings

__all__ = ["Reflection", "ReflectUser", "ReflectionRun", "MAX_JUDGE_CALLS", "REFLECTED_LAYERS", "REQUEST_BUDGET"]

log = logging.getLogger(__name__)

MAX_JUDGE_CALLS = 1000  # on AWS each is a Bedrock call (Nova Micro: ~150 tokens)
_BOOKKEEPING = ("archived_at", "effective_importance", "active_at", "reflected_version")
REFLECTED_LAYERS = ("agent", "user", "session")  # the layers that belong to one user
# Memories one admin-triggered run takes: it answers a request (on Lambda, within the API's 25 s,
# pure-Python comparisons at ~11 µs a pair: 500 x 500 is ~1.4 s at worst).
REQUEST_BUDGET = 500
_STATEMENT_ACTIONS = frozenset({None, "created", "updated", "merged"})


class ReflectUser(Command):
    """`POST /admin/v1/memories/reflect`."""

    user_id: StrictStr = Field(min_length=1, max_length=256, json_schema_extra={"pattern": "^[^\\x00-\\x1f\\x7f]+$"},
                               description="the user whose memories to reflect on: a namespace segment, no control "
                                           "characters")

    @field_validator("user_id")
    @classmethod
    def _a_segment(cls, value: str) -> str:
        if any(ord(c) < 0x20 or ord(c) == 0x7F for c in value) or not value.strip():
            raise ValueError("must be a user id: no control characters, not blank")
        return value


@dataclass
class ReflectionRun:
    user_id: str
    examined: int = 0
    merged: int = 0
    superseded: int = 0
    importance_updated: int = 0
    archived: int = 0
    skipped: int = 0  # written by someone else meanwhile: left for the next pass
    judge_calls: int = 0
    done: bool = True  # the pass reached the user's last memory (the profile was rebuilt)
    next_cursor: tuple[tuple[str, ...], str] | None = None  # where the next run starts


@dataclass
class _Read:
    row: StoredItem
    value: dict[str, Any]
    attributes: dict[str, Any] | None
    typed: TypedMemory


@dataclass
class _State:
    cursor: tuple[tuple[str, ...], str] | None = None
    pool: list[ProfileCandidate] = field(default_factory=list)
    last_done_at: datetime | None = None


class Reflection:
    def __init__(self, *, items: ItemStore, memories: Memories, vectors: VectorIndex, sealer: Sealer,
                 settings: SettingsRegistry, configs: TenantConfigStore, judge: SameFactJudge, access: Access,
                 profiles: Profiles, clock: Clock, neighbours: NeighbourSearch = older_neighbours) -> None:
        self._items = items
        self._neighbours = neighbours  # blocked matrix products where numpy is installed
        self._memories = memories
        self._vectors = vectors
        self._sealer = sealer
        self._settings = settings
        self._configs = configs
        self._judge = judge
        self._access = access
        self._profiles = profiles
        self._clock = clock

    def reflect(self, caller: Caller, cmd: ReflectUser) -> ReflectionRun:
        """The admin trigger: one run for `cmd.user_id` of the caller's tenant, whatever the schedule,
        of at most `REQUEST_BUDGET` memories (it answers a request: call again with the run not
        `done` to go on from its cursor; the schedule takes the tenant's whole budget)."""
        self._access.admin(caller)
        return self.run(caller.tenant_id, cmd.user_id,
                        budget=min(REQUEST_BUDGET, self._settings.get(caller.tenant_id).reflection_max_memories))

    def run_due(self, tenants: Iterable[str], *, max_users: int = 20) -> int:
        """One run for each user who is due (see the module's doc), at most `max_users` tried in
        all; returns how many ran. A user's failure is logged, not counted, and does not stop the
        others (that user is due again next time)."""
        ran = tried = 0
        for tenant in tenants:
            settings = self._settings.get(tenant)
            if not settings.reflection_enabled:
                continue
            now = self._clock.now()
            users = sorted({ns[1] for ns in self._items.list_namespaces(tenant, ("user",), now) if len(ns) >= 2})
            # In a random order: users who keep failing (a throttled dependency) never hold up the
            # same others pass after pass.
            random.shuffle(users)
            for user in users:
                if tried >= max_users:
                    return ran
                doc = self._configs.get_config(tenant, _state_name(user)) or {}
                last_done = _last_done(doc)
                if not doc.get("unfinished") and last_done is not None and \
                        now - last_done < timedelta(hours=settings.reflection_interval_hours):
                    continue
                tried += 1
                try:
                    self._run(tenant, user, doc)
                    ran += 1
                except Exception as exc:  # one user's failure (a throttled dependency) is the next pass's
                    # The type only: an adapter's message may quote what it was given.
                    log.warning("reflection failed", extra={"tenant": tenant, "error": type(exc).__name__})
        return ran

    def run(self, tenant: str, user_id: str, *, budget: int | None = None) -> ReflectionRun:
        return self._run(tenant, user_id, self._configs.get_config(tenant, _state_name(user_id)), budget=budget)

    def _run(self, tenant: str, user_id: str, doc: dict[str, Any] | None, *,
             budget: int | None = None) -> ReflectionRun:
        """One run from the user's state `doc` (as stored, read once by the caller)."""
        settings = self._settings.get(tenant)
        cap = budget or settings.reflection_max_memories
        now = self._clock.now()
        state = self._load(tenant, user_id, doc)
        refs = sorted((h.namespace, h.key) for h in self._items.live_heads(tenant, ("user", user_id), now)
                      if _reflected(h.namespace, settings))
        start = bisect.bisect_right(refs, state.cursor) if state.cursor is not None else 0
        chunk = _chunk(refs, start, cap)
        stats = ReflectionRun(user_id)
        memories = self._read(tenant, chunk, now)
        stats.examined = len(memories)
        changed, outcome = self._consolidate(tenant, memories, settings, stats)
        written, candidates = self._write(tenant, memories, changed, outcome, settings, now, stats)
        self._memories.settle(written, sync_index=False)
        pool = best_candidates([*state.pool, *candidates])
        stats.done = start + len(chunk) >= len(refs)
        if stats.done:
            self._profiles.build(tenant, user_id, pool)
            self._save(tenant, user_id, _State(None, [], now))
        else:
            stats.next_cursor = chunk[-1]
            self._save(tenant, user_id, _State(chunk[-1], pool, state.last_done_at))
        log.info("reflection run", extra={"tenant": tenant, "examined": stats.examined, "merged": stats.merged,
                                          "superseded": stats.superseded, "archived": stats.archived,
                                          "importance_updated": stats.importance_updated, "done": stats.done})
        return stats

    # -- the steps -------------------------------------------------------------------------------

    def _read(self, tenant: str, chunk: Sequence[tuple[tuple[str, ...], str]], now: datetime) -> list[_Read]:
        rows = self._items.get_many(tenant, list(chunk))
        out = []
        for ref in chunk:
            row = rows.get(ref)
            if row is None or not row.is_live(now) or row.value_ct is None:
                continue
            value, attributes = self._sealer.open_item(row)
            typed = TypedMemory.from_value(value or {})
            if typed is not None:
                out.append(_Read(row, value or {}, attributes, typed))
        return out

    def _consolidate(self, tenant: str, memories: Sequence[_Read], settings: TenantSettings,
                     stats: ReflectionRun) -> tuple[dict[str, TypedMemory], dict[str, str]]:
        """Merges and supersessions, per (namespace, kind, category); keyed by `namespace\\x1fkey`."""
        thresholds = thresholds_of(settings)
        eligible = [m for m in memories if not m.typed.superseded and m.row.expires_at is None
                    and (len(m.row.namespace) < 3 or m.row.namespace[2] != SEMANTIC_SEGMENT)]
        field_id = self._sealer.field_id(tenant, CONTENT_FIELDS[0])
        vectors = self._vectors.vectors_of(tenant, [(m.row.id, field_id) for m in eligible]) if eligible else {}
        groups: dict[tuple[Any, ...], list[Member]] = defaultdict(list)
        for m in eligible:
            vector = vectors.get((m.row.id, field_id))
            if vector is not None:  # a version not indexed yet waits for the next pass
                category = m.typed.category.casefold() if m.typed.category else None
                groups[(m.row.namespace, m.typed.kind, category)].append(
                    Member(m.row.key, m.typed, _stated_at(m.row), vector))

        def judge(existing: TypedMemory, candidate: TypedMemory) -> Verdict | None:
            if stats.judge_calls >= MAX_JUDGE_CALLS:
                return None
            stats.judge_calls += 1
            return self._judge.judge(tenant, existing, candidate)

        changed: dict[str, TypedMemory] = {}
        outcome: dict[str, str] = {}
        for (namespace, _, _), members in groups.items():
            if len(members) > 1:  # keys within one namespace; here keyed across them
                group_changed, group_outcome, _ = consolidate(members, thresholds, judge, self._neighbours)
                changed.update((_ref_key(namespace, k), v) for k, v in group_changed.items())
                outcome.update((_ref_key(namespace, k), v) for k, v in group_outcome.items())
        return changed, outcome

    def _write(self, tenant: str, memories: Sequence[_Read], changed: dict[str, TypedMemory], outcome: dict[str, str],
               settings: TenantSettings, now: datetime,
               stats: ReflectionRun) -> tuple[list[StoredItem], list[ProfileCandidate]]:
        by_key = {_ref_key(m.row.namespace, m.row.key): m for m in memories}
        active = {k: last_active(m.typed, version=m.row.version, updated_at=m.row.updated_at,
                                 last_accessed_at=m.row.last_accessed_at) for k, m in by_key.items()}
        # A merged memory was last used when the latest of the memories merged into it was.
        for k, o in outcome.items():
            if o == "duplicate_superseded" and (into := changed[k].superseded_by) is not None:
                into_key = _ref_key(by_key[k].row.namespace, into)
                active[into_key] = max(active[into_key], active[k])
        written: list[StoredItem] = []
        candidates: list[ProfileCandidate] = []
        unwritten: set[str] = set()  # merges that lost a race: their duplicates stay as they are
        # A merge target first, then the duplicate it absorbs: the newer statement is never
        # superseded unless the memory taking its wording was written (a run cut off in between
        # leaves two current copies, merged again by the next pass: nothing is lost).
        for k, m in sorted(by_key.items(), key=lambda kv: outcome.get(kv[0]) == "duplicate_superseded"):
            typed = changed.get(k, m.typed)
            action: LifecycleAction | None = outcome.get(k)  # type: ignore[assignment]
            if action == "duplicate_superseded" and _ref_key(m.row.namespace, typed.superseded_by or "") in unwritten:
                stats.skipped += 1
                continue
            effective = None
            if not typed.superseded:
                effective = effective_importance(typed, access_count=m.row.access_count, active=active[k], now=now,
                                                 decay_rate_per_day=settings.decay_rate_per_day)
                if action is None and m.row.expires_at is None and not typed.archived:
                    if settings.archive_below > 0 and should_archive(
                            typed, effective, active[k], now, archive_below=settings.archive_below,
                            archive_after_days=settings.archive_after_days):
                        action = "archived"
                        typed = dataclasses.replace(typed, archived_at=to_rfc3339(now))
                    elif importance_moved(typed, m.row.version, effective):
                        action = "importance_recomputed"
                typed = with_bookkeeping(typed, effective=effective, active=active[k], next_version=m.row.version + 1)
            if action is not None:
                item = self._write_one(m, typed, action)
                if item is None:
                    stats.skipped += 1
                    unwritten.add(k)
                    continue
                written.append(item)
                _count(stats, action)
                row = item
            else:
                row = m.row
            if effective is not None and (c := profile_candidate(row, typed, importance=effective)) is not None:
                candidates.append(c)
        return written, candidates

    def _write_one(self, m: _Read, typed: TypedMemory, action: LifecycleAction) -> StoredItem | None:
        row = m.row
        if action in ("importance_recomputed", "archived"):  # edited field by field: the rest stays as stored
            value = {**m.value, **{name: getattr(typed, name) for name in _BOOKKEEPING
                                   if getattr(typed, name) is not None}}
        else:  # recombined, as remember's consolidation writes it
            value = stored_value(typed)
        try:
            return self._memories.write_version(
                row.tenant, row.namespace, row.key, value, old=row,
                attributes=m.attributes, policy_attributes=row.policy_attributes, index_fields=row.index_fields,
                ttl_seconds=row.ttl_seconds, action=action)
        except Conflict:
            return None

    # -- the per-user state ------------------------------------------------------------------------

    def _load(self, tenant: str, user: str, doc: dict[str, Any] | None) -> _State:
        if not doc:
            return _State()
        last_done = _last_done(doc)
        if not doc.get("sealed"):
            return _State(None, [], last_done)
        sealed = self._sealer.open_record(tenant, ("reflection", user), base64.b64decode(doc["sealed"]))
        cursor = (tuple(sealed["cursor"][0]), sealed["cursor"][1]) if sealed.get("cursor") else None
        return _State(cursor, [ProfileCandidate.from_json(c) for c in sealed.get("pool", [])], last_done)

    def _save(self, tenant: str, user: str, state: _State) -> None:
        """The cursor and pool name the user's namespaces and keys and rank their memories: sealed.
        When the pass is due and whether one is unfinished are the schedule's plaintext."""
        doc: dict[str, Any] = {"last_done_at": to_rfc3339(state.last_done_at), "unfinished": state.cursor is not None}
        if state.cursor is not None:
            payload = {"cursor": [list(state.cursor[0]), state.cursor[1]], "pool": [c.to_json() for c in state.pool]}
            doc["sealed"] = base64.b64encode(self._sealer.seal_record(tenant, ("reflection", user), payload)).decode()
        self._configs.put_config(tenant, _state_name(user), doc)


def _stated_at(row: StoredItem) -> datetime:
    """When the memory's statement was made: its last write that set its content (a create, a
    remember update or merge, a plain write), else its first (feedback, reflection's bookkeeping
    and a restore keep the statement: their time is not its)."""
    return row.updated_at if row.action in _STATEMENT_ACTIONS else row.created_at


def _reflected(namespace: tuple[str, ...], settings: TenantSettings) -> bool:
    layer = layer_of(namespace)
    return (layer is not None and layer.name in REFLECTED_LAYERS and layer.name not in settings.reflection_exempt_layers
            and not is_messages_namespace(namespace))


def _chunk(refs: Sequence[tuple[tuple[str, ...], str]], start: int,
           cap: int) -> list[tuple[tuple[str, ...], str]]:
    """From `start`, whole namespaces while they fit `cap`; a namespace larger than `cap` alone is
    taken in parts. O(len(chunk))."""
    end = start
    while end < len(refs) and end - start < cap:
        ns = refs[end][0]
        ns_end = end
        while ns_end < len(refs) and refs[ns_end][0] == ns:
            ns_end += 1
        if ns_end - start > cap:
            if end == start:
                end = start + cap
            break
        end = ns_end
    return list(refs[start:end])


def _ref_key(namespace: tuple[str, ...], key: str) -> str:
    return "\x1f".join((*namespace, key))


def _count(stats: ReflectionRun, action: str) -> None:
    if action == "merged":
        stats.merged += 1
    elif action in ("duplicate_superseded", "reflect_superseded"):
        stats.superseded += 1
    elif action == "archived":
        stats.archived += 1
    elif action == "importance_recomputed":
        stats.importance_updated += 1


def _last_done(doc: dict[str, Any] | None) -> datetime | None:
    """When the user's last complete pass ended, from their state document."""
    return parse_rfc3339(doc["last_done_at"]) if doc and doc.get("last_done_at") else None


def _state_name(user: str) -> str:
    return f"reflection#{user}"
