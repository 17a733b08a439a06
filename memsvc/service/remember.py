"""`POST /v1/memories/remember`: write a typed memory with consolidation (API-AGENT.md "Typed
memories", seed 002).

The candidate is compared with its nearest neighbours in the target namespace (same kind, same
category when given) and, by seed 002's thresholds (tenant settings) and the same-fact judge,
creates a memory, updates (merges into) its neighbour, or supersedes a neighbour it
contradicts. An identical content in the namespace is `unchanged`.

Concurrency: a created memory's key is derived from its namespace and content
(`core.consolidation.candidate_key`), and every write is conditional on the version read. When
a write loses a race the whole decision is made again on what is now stored, so two identical
remembers at once end as one `created` and one `unchanged`, never two copies.
"""

from __future__ import annotations

import dataclasses
import math
import random
import time
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Annotated, Any, Literal

from pydantic import ConfigDict, Field, StrictBool, StrictFloat, StrictStr, StringConstraints

from memsvc.core.consolidation import Decision, Thresholds, candidate_key, decide, merge, stored_value, supersede
from memsvc.core.errors import Conflict, ContentTooLong, InvalidArgument, RateLimited
from memsvc.core.layers import (LAYER_NAMES, accessible_layers, identifiers_schema, layer_namespace, layer_needs_schema,
                                resolve_identifiers)
from memsvc.core.models import Caller, Memory, RememberAction, RememberJob, StoredItem, WriteAction, to_rfc3339
from memsvc.core.policy import CompiledPolicies
from memsvc.core.same_fact import normalize_content
from memsvc.core.typed_memory import CONTENT_FIELDS, MAX_CONTENT_CHARS, MemoryKind, MemoryType, TypedMemory
from memsvc.core.validation import Command, Integer, Namespace, NonBlank, Timestamp
from memsvc.core.validity import instant
from memsvc.ports import Clock, ItemStore, RateLimiter, RememberQueue, SameFactJudge
from memsvc.service.access import Access
from memsvc.service.access_recorder import AccessRecorder
from memsvc.service.memories import MAX_TTL_SECONDS, Memories, open_memory
from memsvc.service.sealing import Sealer
from memsvc.service.search import Search, SearchQuery
from memsvc.service.tenant_config import TenantSettings

__all__ = ["Remember", "RememberMemory", "Remembered", "Accepted", "caller_record", "caller_of", "thresholds_of"]

_DECISION_ATTEMPTS = 8  # decisions remade after a lost race before a retryable 409
_KEY_SLOTS = 8  # candidate keys probed when earlier ones hold memories the candidate may not reuse
_MAX_TAGS = 64

Tag = Annotated[StrictStr, StringConstraints(min_length=1, max_length=128)]


class RememberMemory(Command):
    """`POST /v1/memories/remember`."""

    # namespace is instead of layer and identifiers. The three may be left out but not be null:
    # "absent" has one spelling, so the schema states the whole rule.
    model_config = ConfigDict(json_schema_extra={
        "dependentSchemas": {"namespace": {"not": {"anyOf": [{"required": ["layer"]}, {"required": ["identifiers"]}]}}},
        "allOf": layer_needs_schema("layer", many=False),
    })

    content: NonBlank = Field(min_length=1, json_schema_extra={"maxLength": MAX_CONTENT_CHARS},
                               description=f"the statement to remember; at most {MAX_CONTENT_CHARS} characters (413)")
    type: MemoryType = "fact"
    kind: MemoryKind = "semantic"
    layer: StrictStr = Field(  # type: ignore[assignment]
        None, json_schema_extra={"enum": list(LAYER_NAMES), "default": "user"},
        description="default user (INVALID_LAYER for another name); it needs its identifiers (MISSING_IDENTIFIER)")
    identifiers: dict[StrictStr, StrictStr] = Field(  # type: ignore[assignment]
        None, json_schema_extra=identifiers_schema(nullable=False),
        description="agent_id, user_id (default: the caller), session_id, project_id, team_id, org_id")
    namespace: Namespace = Field(None, description="instead of layer and identifiers")  # type: ignore[assignment]
    category: StrictStr | None = Field(None, min_length=1, max_length=128)
    tags: list[Tag] = Field([], max_length=_MAX_TAGS)
    importance: StrictFloat = Field(0.5, ge=0, le=1)
    pinned: StrictBool = False
    source: StrictStr | None = Field(None, min_length=1, max_length=256)
    ttl_seconds: Integer | None = Field(None, ge=1, le=MAX_TTL_SECONDS, description="null = never expires")
    consolidate: StrictBool = Field(True, description="compare with neighbours; false always creates")
    wait: StrictBool = Field(True, description="false: 202 with a candidate_id at once, decided in the background")
    # Valid time (issue 25): when the stated fact holds, not when the item expires (ttl_seconds).
    valid_from: Timestamp | None = Field(None, description="RFC 3339: the fact holds from then (default: from now)")
    valid_to: Timestamp | None = Field(None, description="RFC 3339, after valid_from (one already past needs "
                                                         "valid_from): the fact holds until then (default: open; "
                                                         "closed when a newer statement supersedes it)")

    def candidate(self) -> TypedMemory:
        return TypedMemory(content=self.content, type=self.type, kind=self.kind, importance=float(self.importance),
                           pinned=self.pinned, tags=tuple(dict.fromkeys(self.tags)), category=self.category,
                           source=self.source, valid_from=to_rfc3339(self.valid_from),
                           valid_to=to_rfc3339(self.valid_to))


@dataclass(frozen=True)
class Remembered:
    action: Literal["created", "updated", "unchanged", "superseded"]
    memory: Memory
    neighbors: list[tuple[str, float]]  # (key, cosine), best first
    decision: Decision | None  # None: nothing to decide (unchanged)


@dataclass(frozen=True)
class Accepted:
    candidate_id: str


@dataclass(frozen=True)
class _Neighbour:
    memory: Memory
    typed: TypedMemory
    score: float


class Remember:
    def __init__(self, *, items: ItemStore, memories: Memories, search: Search, access: Access, sealer: Sealer,
                 clock: Clock, judge: SameFactJudge, limiter: RateLimiter, queue: RememberQueue,
                 accesses: AccessRecorder) -> None:
        self._items = items
        self._accesses = accesses
        self._memories = memories
        self._search = search
        self._access = access
        self._sealer = sealer
        self._clock = clock
        self._judge = judge
        self._limiter = limiter
        self._queue = queue

    def remember(self, caller: Caller, cmd: RememberMemory) -> Remembered | Accepted:
        ns, candidate, policies = self._admit(caller, cmd)
        self.take_rate(caller)
        if not cmd.wait:
            candidate_id = candidate_key(ns, candidate.content, key_space=self._sealer.statement_keys(caller.tenant_id))
            payload = {"caller": caller_record(caller), "command": cmd.model_dump(mode="json", exclude_unset=True)}
            self._queue.enqueue(RememberJob(caller.tenant_id, candidate_id,
                                            self._sealer.seal_job(caller.tenant_id, candidate_id, payload)))
            return Accepted(candidate_id)
        return self._decide(caller, ns, candidate, cmd, policies)

    def remember_extracted(self, caller: Caller, cmd: RememberMemory, provenance: dict[str, Any]) -> Remembered:
        """A candidate an extraction found (`service.extraction`), decided as `remember` decides
        it, with no rate taken (the extraction took one). Its value keeps `provenance`: the
        session and messages it came from. A candidate merged into a neighbour writes that
        neighbour with the action `merged` (`memory.merged` on the timeline), which then carries
        the newest provenance."""
        ns, candidate, policies = self._admit(caller, cmd)
        candidate = dataclasses.replace(candidate, extra={"provenance": provenance})
        return self._decide(caller, ns, candidate, cmd, policies, update_action="merged")

    def run_job(self, job: RememberJob) -> Remembered:
        """Decide a queued candidate (`wait: false`), as the caller who sent it; authorization and
        governance are checked again, against the policies in force now. Safe to run twice: the
        second run finds the first one's outcome and is `unchanged`."""
        payload = self._sealer.open_job(job.tenant, job.candidate_id, job.sealed)
        caller = caller_of(payload["caller"])
        cmd = RememberMemory.parse({**payload["command"], "wait": True})
        ns, candidate, policies = self._admit(caller, cmd)
        return self._decide(caller, ns, candidate, cmd, policies)

    # -- steps ---------------------------------------------------------------------------------

    def _admit(self, caller: Caller, cmd: RememberMemory) -> tuple[tuple[str, ...], TypedMemory, CompiledPolicies]:
        """Validate (400, 413), authorize as a write (403) and govern (422)."""
        if len(cmd.content) > MAX_CONTENT_CHARS:
            raise ContentTooLong(f"content has {len(cmd.content)} characters; the limit is {MAX_CONTENT_CHARS}",
                                 max_bytes=MAX_CONTENT_CHARS * 4,
                                 details={"field": "content", "max_chars": MAX_CONTENT_CHARS})
        if cmd.valid_from is not None and cmd.valid_to is not None and cmd.valid_to <= cmd.valid_from:
            raise InvalidArgument("valid_to must be after valid_from", details={"field": "valid_to"})
        if cmd.valid_from is None and cmd.valid_to is not None and cmd.valid_to <= self._clock.now():
            # Without a start the fact holds from now: an end already past would make it never hold.
            raise InvalidArgument("a valid_to in the past needs the valid_from the fact held from",
                                  details={"field": "valid_to"})
        ns = self._target(caller, cmd)
        candidate = cmd.candidate()
        key = candidate_key(ns, candidate.content, key_space=self._sealer.statement_keys(caller.tenant_id))
        policies = self._access.authorize(caller, "write", ns, key)
        self._access.govern(caller, ns, key, stored_value(candidate), None)
        return ns, candidate, policies

    def _target(self, caller: Caller, cmd: RememberMemory) -> tuple[str, ...]:
        if cmd.namespace is not None:
            if cmd.layer is not None or cmd.identifiers is not None:
                raise InvalidArgument("give either namespace, or layer with identifiers, not both",
                                      details={"field": "namespace"})
            return self._access.namespace_to_write(caller, cmd.namespace)
        identifiers = resolve_identifiers(caller, cmd.identifiers)
        layer = accessible_layers(identifiers, [cmd.layer or "user"])[0]
        return self._access.namespace_to_write(caller, layer_namespace(layer, identifiers))

    def take_rate(self, caller: Caller) -> None:
        """`remember_per_hour` per user, in fixed clock hours."""
        limit = self._access.settings_of(caller).remember_per_hour
        now = self._clock.now()
        window = math.floor(now.timestamp() / 3600)
        window_end = datetime.fromtimestamp((window + 1) * 3600, tz=now.tzinfo)
        if not self._limiter.try_acquire(caller.tenant_id, caller.user_id, window, limit,
                                         expires_at=window_end + timedelta(hours=1)):
            retry_after = max(1, math.ceil((window_end - now).total_seconds()))
            raise RateLimited(f"at most {limit} remember calls per hour; retry in {retry_after} s",
                              retry_after_seconds=retry_after, details={"limit": limit})

    def _decide(self, caller: Caller, ns: tuple[str, ...], candidate: TypedMemory, cmd: RememberMemory,
                policies: CompiledPolicies, *, update_action: WriteAction = "updated") -> Remembered:
        for attempt in range(_DECISION_ATTEMPTS):
            if attempt:
                time.sleep(random.uniform(0, min(0.2, 0.005 * 2**attempt)))
            try:
                return self._decide_once(caller, ns, candidate, cmd, policies, update_action)
            except Conflict:
                continue  # another write got there first: decide again on what is stored now
        raise Conflict("too many concurrent writes to these memories; retry", details={"namespace": list(ns)})

    def _decide_once(self, caller: Caller, ns: tuple[str, ...], candidate: TypedMemory, cmd: RememberMemory,
                     policies: CompiledPolicies, update_action: WriteAction) -> Remembered:
        tenant = caller.tenant_id
        settings = self._access.settings_of(caller)
        key, slot_row, identical = self._slot(tenant, ns, candidate.content)
        if identical is not None:
            return Remembered("unchanged", identical, [], None)
        neighbours = self._neighbours(caller, ns, candidate, settings.neighbors_k) if cmd.consolidate else []
        listed = [(n.memory.key, n.score) for n in neighbours]
        for n in neighbours:  # an identical content merged in under another key
            if normalize_content(n.typed.content) == normalize_content(candidate.content):
                return Remembered("unchanged", n.memory, listed, None)
        best = neighbours[0] if neighbours else None
        decision = decide(
            candidate, best.typed if best else None, best.score if best else 0.0,
            best.memory.created_at if best else None, thresholds_of(settings), self._clock.now(),
            judge=lambda: self._judge.judge(tenant, best.typed, candidate) if best else None,
        )
        write = _Writer(self._memories, caller, ns, policies)
        if decision.action == "create":
            item = write(key, candidate, old=slot_row, action="created", ttl_seconds=cmd.ttl_seconds)
            outcome: RememberAction = "created"
        elif decision.action == "update":
            assert best is not None
            merged = merge(best.typed, candidate, key, existing_created_at=best.memory.created_at)
            item = write(best.memory.key, merged, old=self._current(tenant, best.memory), action=update_action,
                         ttl_seconds=cmd.ttl_seconds or best.memory.ttl_seconds)
            # Seed 002's "access_count + 1, last_accessed_at now" for the merged memory: on the item
            # row's counters (recall's, outside the sealed value; the new version kept the old ones).
            self._accesses.record(tenant, [(item.namespace, item.key, item.id)], self._clock.now())
            outcome = "updated"
        else:
            assert best is not None
            # The neighbour is marked first, naming the key the new memory will have: if the
            # process stops in between, a retry creates that memory (the marked neighbour is no
            # longer a candidate), and nothing points nowhere for long.
            # The older fact held until the newer one's start: its valid_from, else now.
            ends_at = instant(candidate.valid_from) or self._clock.now()
            write(best.memory.key, supersede(best.typed, key, ends_at=ends_at), old=self._current(tenant, best.memory),
                  action="superseded", ttl_seconds=best.memory.ttl_seconds)
            item = write(key, candidate, old=slot_row, action="created", ttl_seconds=cmd.ttl_seconds)
            outcome = "superseded"
        self._memories.settle(write.items, sync_index=True)  # the next remember must find it as a neighbour
        return Remembered(outcome, open_memory(self._sealer, item), listed, decision)

    def _slot(self, tenant: str, ns: tuple[str, ...], content: str) -> tuple[str, StoredItem | None, Memory | None]:
        """The key a created memory gets, the row there (a tombstone, or None), and the memory
        already holding this very content (then nothing is written). A slot whose memory may not
        be reused (superseded since, or not a typed memory) passes to the next slot's key."""
        now = self._clock.now()
        key_space = self._sealer.statement_keys(tenant)
        for slot in range(_KEY_SLOTS):
            key = candidate_key(ns, content, key_space=key_space, slot=slot)
            row = self._items.get(tenant, ns, key)
            if row is None or not row.is_live(now):
                return key, row, None
            memory = open_memory(self._sealer, row)
            typed = TypedMemory.from_value(memory.value)
            if typed is not None and not typed.superseded:
                if normalize_content(typed.content) == normalize_content(content):
                    return key, row, memory
                # Merged since into a newer statement: the slot is that memory's, not ours.
        raise Conflict("every key for this content is taken; retry", details={"namespace": list(ns)})

    def _neighbours(self, caller: Caller, ns: tuple[str, ...], candidate: TypedMemory, k: int) -> list[_Neighbour]:
        """The best `k` typed memories of the target namespace itself (not those below it) by
        cosine similarity of their content: same kind, same category when the candidate has one,
        never a superseded one. Through `Search`, so the caller's search rights apply too."""
        condition: dict[str, Any] = {"kind": candidate.kind}
        if candidate.category is not None:
            condition["category"] = candidate.category
        found = self._search.search(caller, SearchQuery(namespace_prefix=list(ns), query=candidate.content,
                                                        mode="semantic", filter=condition, limit=k))
        out = []
        for memory in found:
            typed = TypedMemory.from_value(memory.value)
            if memory.namespace == ns and typed is not None and not typed.superseded:
                out.append(_Neighbour(memory, typed, memory.score or 0.0))
        return out

    def _current(self, tenant: str, memory: Memory) -> StoredItem:
        """The neighbour's row, if still the version that was judged; `Conflict` (decide again) if not."""
        row = self._items.get(tenant, memory.namespace, memory.key)
        if row is None or row.version != memory.version or not row.is_live(self._clock.now()):
            raise Conflict("the neighbour changed while remember decided")
        return row


class _Writer:
    """Writes typed memories into one namespace for one decision, and keeps what it wrote."""

    def __init__(self, memories: Memories, caller: Caller, ns: tuple[str, ...], policies: CompiledPolicies) -> None:
        self._memories, self._caller, self._ns, self._policies = memories, caller, ns, policies
        self.items: list[StoredItem] = []

    def __call__(self, key: str, memory: TypedMemory, *, old: StoredItem | None, action: WriteAction,
                 ttl_seconds: int | None) -> StoredItem:
        value = stored_value(memory)
        attributes = self._policies.extract_attributes(self._ns, key, value, None, self._caller.policy_context())
        item = self._memories.write_version(
            self._caller.tenant_id, self._ns, key, value, old=old, attributes=None, policy_attributes=attributes,
            index_fields=list(CONTENT_FIELDS), ttl_seconds=ttl_seconds, action=action)
        self.items.append(item)
        return item


def thresholds_of(settings: TenantSettings) -> Thresholds:
    """The tenant's consolidation thresholds, as remember and reflection decide by them."""
    return Thresholds(settings.semantic_auto_update, settings.semantic_check_low, settings.episodic_auto_update,
                      settings.episodic_check_low, settings.episodic_merge_window_hours)


def caller_record(caller: Caller) -> dict[str, Any]:
    """The caller as a queued job keeps it (JSON); `caller_of` reads it back."""
    return {**dataclasses.asdict(caller), "roles": list(caller.roles)}


def caller_of(record: dict[str, Any]) -> Caller:
    return Caller(**{**record, "roles": tuple(record["roles"])})
