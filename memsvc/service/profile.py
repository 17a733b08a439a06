"""`GET /v1/memory/profile`: a user's standing profile (issue 24), read in one request.

The profile is the user's most important current preferences and facts: typed memories of type
`preference` or `fact` in their agent and user layers (never the session layer: it is not
standing), neither superseded nor archived, ranked pinned first, then by importance (reflection's
effective importance where it wrote one, `core.reflection`), then by last use; deduplicated by
seed 002's same-fact heuristics (`core.reflection.dedupe_statements`: a statement of the same
fact as, or contradicting, a higher-ranked one is left out); then taken in that order while they
fit the tenant's `profile_token_budget` (cl100k_base tokens of the contents, counted as recall
counts them; one that does not fit is skipped, a smaller one after it may still fit).

Reflection rebuilds it at the end of each complete pass over the user's memories. It is stored
in the tenant config store under `profile#<user id>`, sealed under the tenant's data key and
bound to ("profile", user id) (`Sealer.seal_record`): never in plaintext, never indexed, not an
item (so no search, recall or timeline sees it). A `GET` before any reflection builds it from
the user's `reflection_max_memories` most recently written memories, and stores it.

Only the caller's own profile: there is no user parameter. The caller needs the right to search
their own subtree `["user", <caller>]`, as a recall of their own layers does (403 otherwise).
A `token_budget` smaller than the stored one cuts the profile the same way (a larger one returns
it as stored).
"""

from __future__ import annotations

import base64
import dataclasses
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from pydantic import Field

from memsvc.core.filters import get_path
from memsvc.core.layers import layer_of
from memsvc.core.models import Caller, StoredItem, from_epoch_us, to_epoch_us, to_rfc3339
from memsvc.core.reflection import (current_importance, dedupe_statements, effective_importance, last_active,
                                    profile_rank)
from memsvc.core.sessions import is_messages_namespace
from memsvc.core.timestamps import parse_rfc3339
from memsvc.core.typed_memory import TypedMemory
from memsvc.core.validation import Command, Integer
from memsvc.ports import Clock, ItemStore, TenantConfigStore
from memsvc.service.access import Access
from memsvc.service.sealing import Sealer
from memsvc.service.tenant_config import SettingsRegistry
from memsvc.tokens import count_tokens

__all__ = ["Profiles", "ProfileQuery", "Profile", "ProfileItem", "ProfileCandidate", "profile_candidate",
           "PROFILE_POOL", "PROFILE_TYPES", "PROFILE_LAYERS"]

PROFILE_TYPES = ("preference", "fact")
PROFILE_LAYERS = ("agent", "user")
PROFILE_POOL = 100  # the best candidates a profile is chosen from (then deduplicated and budgeted)
_SCAN_BOUND = 4  # a first profile reads at most this many rows per typed memory it may take
_Read = dict[tuple[tuple[str, ...], str], tuple[StoredItem, TypedMemory]]  # live typed memories, opened


class ProfileQuery(Command):
    """`GET /v1/memory/profile`."""

    token_budget: Integer | None = Field(None, ge=1, le=8000, description="cut the stored profile to this many "
                                         "cl100k_base tokens (default: the tenant's profile_token_budget)")


@dataclass(frozen=True)
class ProfileItem:
    id: str
    key: str
    namespace: tuple[str, ...]
    content: str
    type: str
    category: str | None
    importance: float
    tokens: int


@dataclass(frozen=True)
class Profile:
    user_id: str
    built_at: datetime
    items: list[ProfileItem]

    @property
    def token_count(self) -> int:
        return sum(i.tokens for i in self.items)


@dataclass(frozen=True)
class ProfileCandidate:
    """A memory that may enter the profile, as reflection's pool carries it between runs."""

    namespace: tuple[str, ...]
    key: str
    pinned: bool
    importance: float
    active: datetime

    def rank(self) -> tuple[float, float, float]:
        return profile_rank(self.pinned, self.importance, self.active)

    def to_json(self) -> list[Any]:
        return [list(self.namespace), self.key, self.pinned, self.importance, to_epoch_us(self.active)]

    @classmethod
    def from_json(cls, j: list[Any]) -> "ProfileCandidate":
        return cls(tuple(j[0]), j[1], j[2], j[3], from_epoch_us(j[4]))


def profile_candidate(row: StoredItem, typed: TypedMemory, *, importance: float | None = None,
                      now: datetime | None = None, decay_rate_per_day: float = 0.0) -> ProfileCandidate | None:
    """The row's memory as a profile candidate, or None when it may not enter a profile.
    `importance`: reflection's effective importance when it has one; else it is computed."""
    layer = layer_of(row.namespace)
    if (typed.type not in PROFILE_TYPES or typed.superseded or typed.archived or layer is None
            or layer.name not in PROFILE_LAYERS or is_messages_namespace(row.namespace)):
        return None
    active = last_active(typed, version=row.version, updated_at=row.updated_at, last_accessed_at=row.last_accessed_at)
    if importance is None:
        importance = (effective_importance(typed, access_count=row.access_count, active=active, now=now,
                                           decay_rate_per_day=decay_rate_per_day)
                      if now is not None else current_importance(typed, row.version))
    return ProfileCandidate(row.namespace, row.key, typed.pinned, importance, active)


def best_candidates(candidates: Iterable[ProfileCandidate], limit: int = PROFILE_POOL) -> list[ProfileCandidate]:
    """The best `limit` by rank, one per memory. O(n log n)."""
    unique = {(c.namespace, c.key): c for c in candidates}
    return sorted(unique.values(), key=ProfileCandidate.rank)[:limit]


class Profiles:
    def __init__(self, *, items: ItemStore, configs: TenantConfigStore, sealer: Sealer, settings: SettingsRegistry,
                 access: Access, clock: Clock) -> None:
        self._items = items
        self._configs = configs
        self._sealer = sealer
        self._settings = settings
        self._access = access
        self._clock = clock

    def get(self, caller: Caller, q: ProfileQuery) -> Profile:
        """The stored profile, as its memories are now: one that was deleted, expired, superseded or
        archived since it was built is left out, one rewritten is shown as it reads now (one
        batched read); only what the caller's search scope reaches."""
        user = caller.user_id
        scope, scope_filter = self._access.scope(caller, "search",
                                                 self._access.namespace_to_read(caller, ("user", user)), {})
        profile = self.stored(caller.tenant_id, user)
        if profile is None:
            profile, read = self._build_from_recent(caller.tenant_id, user)
            rows = {ref: row for ref, (row, _) in read.items()}  # as just read
        else:
            rows = self._items.get_many(caller.tenant_id, [(i.namespace, i.key) for i in profile.items])
        now = self._clock.now()
        current = []
        for item in profile.items:
            row = rows.get((item.namespace, item.key))
            if row is None or not row.is_live(now) or row.value_ct is None or item.namespace[:len(scope)] != scope \
                    or not scope_filter.matches(lambda path: get_path(row.policy_attributes, path)):
                continue
            if row.id != item.id:
                typed = TypedMemory.from_value(self._sealer.open_value(row) or {})
                if typed is None or profile_candidate(row, typed, importance=item.importance) is None:
                    continue
                item = dataclasses.replace(item, id=row.id, content=typed.content, type=typed.type,
                                           category=typed.category, tokens=count_tokens(typed.content))
            current.append(item)
        budget = self._settings.get(caller.tenant_id).profile_token_budget if q.token_budget is None \
            else q.token_budget
        return Profile(profile.user_id, profile.built_at, _fit(current, budget))

    def stored(self, tenant: str, user: str) -> Profile | None:
        doc = self._configs.get_config(tenant, _doc_name(user))
        if doc is None:
            return None
        payload = self._sealer.open_record(tenant, ("profile", user), base64.b64decode(doc["sealed"]))
        return Profile(user, parse_rfc3339(payload["built_at"]),
                       [ProfileItem(i["id"], i["key"], tuple(i["namespace"]), i["content"], i["type"], i["category"],
                                    i["importance"], i["tokens"]) for i in payload["items"]])

    def _build_from_recent(self, tenant: str, user: str) -> tuple[Profile, _Read]:
        """The profile of the user's most recently written memories (before any reflection), and
        its candidates as read."""
        settings = self._settings.get(tenant)
        now = self._clock.now()
        candidates = []
        read: _Read = {}
        seen = 0
        # The newest typed memories, at most `reflection_max_memories` of them; messages are passed
        # over without counting, within a bound on everything read.
        for n, row in enumerate(self._items.scan_live(tenant, ("user", user), now)):
            if seen >= settings.reflection_max_memories or n >= _SCAN_BOUND * settings.reflection_max_memories:
                break
            if is_messages_namespace(row.namespace) or row.value_ct is None:
                continue
            seen += 1
            typed = TypedMemory.from_value(self._sealer.open_value(row) or {})
            if typed is not None and (c := profile_candidate(row, typed, now=now,
                                                              decay_rate_per_day=settings.decay_rate_per_day)):
                candidates.append(c)
                read[(row.namespace, row.key)] = (row, typed)
        pool = best_candidates(candidates)
        read = {(c.namespace, c.key): read[(c.namespace, c.key)] for c in pool}
        return self._build(tenant, user, pool, read), read

    def build(self, tenant: str, user: str, pool: Sequence[ProfileCandidate]) -> Profile:
        """Build the profile from `pool` (best first), reading each memory as it is now, and store it."""
        now = self._clock.now()
        read: _Read = {}
        for ref, row in self._items.get_many(tenant, [(c.namespace, c.key) for c in pool]).items():
            if row.is_live(now) and row.value_ct is not None:
                typed = TypedMemory.from_value(self._sealer.open_value(row) or {})
                if typed is not None:
                    read[ref] = (row, typed)
        return self._build(tenant, user, pool, read)

    def _build(self, tenant: str, user: str, pool: Sequence[ProfileCandidate], read: _Read) -> Profile:
        """The profile of `pool`'s memories as `read` holds them (live typed ones), stored."""
        chosen: list[tuple[ProfileCandidate, StoredItem, TypedMemory]] = []
        for c in sorted(pool, key=ProfileCandidate.rank):
            row, typed = read.get((c.namespace, c.key), (None, None))
            if row is not None and typed is not None and \
                    profile_candidate(row, typed, importance=c.importance) is not None:
                chosen.append((c, row, typed))
        kept = dedupe_statements([typed.content for _, _, typed in chosen])
        items = [ProfileItem(row.id, row.key, row.namespace, typed.content, typed.type, typed.category,
                             round(c.importance, 6), count_tokens(typed.content))
                 for c, row, typed in (chosen[i] for i in kept)]
        profile = Profile(user, self._clock.now(), _fit(items, self._settings.get(tenant).profile_token_budget))
        payload = {"built_at": to_rfc3339(profile.built_at), "items": [
            {"id": i.id, "key": i.key, "namespace": list(i.namespace), "content": i.content, "type": i.type,
             "category": i.category, "importance": i.importance, "tokens": i.tokens} for i in profile.items]}
        sealed = self._sealer.seal_record(tenant, ("profile", user), payload)
        self._configs.put_config(tenant, _doc_name(user), {"sealed": base64.b64encode(sealed).decode("ascii")})
        return profile


def _fit(items: Sequence[ProfileItem], budget: int) -> list[ProfileItem]:
    """Items in order while they fit `budget` tokens; one that does not fit is skipped."""
    out, used = [], 0
    for item in items:
        if used + item.tokens <= budget:
            out.append(item)
            used += item.tokens
    return out


def _doc_name(user: str) -> str:
    return f"profile#{user}"
