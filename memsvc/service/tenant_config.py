"""Per-tenant configuration: the policy bundle and the admin settings.

Both live in the item store, so every instance sees an admin's change; each instance caches
them for `cache_seconds`, which bounds how long an old policy can still be in force.
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, StrictBool, StrictFloat, StrictStr, ValidationError, model_validator

from memsvc.core import slots
from memsvc.core.contention import WRITE_ATTEMPTS, backoff
from memsvc.core.errors import Conflict, InvalidArgument, PreconditionFailed
from memsvc.core.policy import BUILTIN_VERSION, CompiledPolicies, compile_bundle, default_bundle
from memsvc.core.validation import MAX_DEPTH, Command, Integer, error_message
from memsvc.ports import TenantConfigStore

__all__ = ["TenantSettings", "SettingsPatch", "RecallWeights", "RerankSetting", "SettingsRegistry", "PolicyRegistry",
           "MAX_VALUE_BYTES"]

# A memory's value and attributes, as compact UTF-8 JSON, together. DynamoDB items stop at
# 400 KB; this leaves room for the envelope and the plaintext metadata.
MAX_VALUE_BYTES = 256 * 1024


class RecallWeights(BaseModel):
    """Recall's composite relevance (seed 002): `match*m + importance*i + recency*r + pinned*p`."""

    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)

    match: float = Field(0.55, ge=0, le=1, description="weight of the hybrid match (0..1)")
    importance: float = Field(0.20, ge=0, le=1, description="weight of the memory's importance (0..1)")
    recency: float = Field(0.15, ge=0, le=1, description="weight of the decay (1 - decay_rate_per_day)^days")
    pinned: float = Field(0.10, ge=0, le=1, description="weight of pinned (1 when pinned, else 0)")

    @model_validator(mode="after")
    def _sum_to_one(self) -> "RecallWeights":
        total = self.match + self.importance + self.recency + self.pinned
        if abs(total - 1.0) > 1e-6:  # relevance is in 0..1 only if the weights sum to 1
            raise ValueError(f"the recall weights must sum to 1, not {total:g}")
        return self


class RerankSetting(BaseModel):
    """Search's rerank step (`memsvc.service.rerank`): off unless enabled. Memories' texts are sent
    to the reranker: Bedrock on AWS, the operator's `MEMSVC_RERANK_URL` locally."""

    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)

    enabled: bool = Field(False, description="Reorder a hybrid or keyword query's best candidates by a reranker.")
    model_id: str | None = Field(None, min_length=1, max_length=2048, pattern=r"^[A-Za-z0-9._:/-]+$",
                                 description="The rerank model (on AWS a Bedrock model id or ARN the deployment "
                                             "may invoke); null: the deployment's.")
    top_n: int = Field(30, ge=2, le=100, description="How many of the fused ranking's best are reranked.")


class TenantSettings(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)

    max_depth: int = Field(10, ge=1, le=MAX_DEPTH, description="Most segments a new namespace may have.")
    tombstone_retention_days: int = Field(
        90, ge=1, le=3650, description="How long delete/expiry tombstones (and events) are kept."
    )
    reachable_depth: int = Field(
        10, ge=1, le=MAX_DEPTH,
        description="Most segments a namespace to read or delete may have: the highest max_depth the tenant has "
                    "ever had, so lowering max_depth strands no item. Not settable.",
    )

    keyword_index: bool = Field(
        True, description="Index memories' texts as blind keyword terms for keyword and hybrid search, and their "
                          "fields as blind tokens that decide filters without decrypting. Turning it off removes "
                          "both at once (filters then decrypt); turning it on indexes new writes.")
    rerank: RerankSetting = Field(default_factory=RerankSetting,
                                  description="Search's rerank step; its texts leave the process for the reranker.")

    # Remember (API-AGENT.md "Typed memories", seed 002). The deployment's defaults depend on the
    # embedding model (`core.consolidation.CALIBRATED_THRESHOLDS`); these are seed 002's.
    semantic_auto_update: float = Field(0.90, ge=0, le=1, description="Cosine at or above which a semantic "
                                        "memory's nearest neighbour is updated instead of a memory created.")
    semantic_check_low: float = Field(0.80, ge=0, le=1, description="Cosine from which (up to "
                                      "semantic_auto_update) the same-fact judge decides; below it, a new memory.")
    episodic_auto_update: float = Field(0.92, ge=0, le=1, description="As semantic_auto_update, for episodic memories.")
    episodic_check_low: float = Field(0.85, ge=0, le=1, description="As semantic_check_low, for episodic memories.")
    episodic_merge_window_hours: int = Field(72, ge=1, le=24 * 365, description="An episodic memory merges only "
                                             "into a neighbour created at most this many hours ago.")
    neighbors_k: int = Field(10, ge=1, le=50, description="Neighbours remember compares a candidate with.")
    remember_per_hour: int = Field(120, ge=1, le=1_000_000, description="Remember calls per user per clock hour; "
                                   "more are refused with 429 RATE_LIMITED and Retry-After.")
    judge_model_id: str = Field("amazon.nova-micro-v1:0", min_length=1, max_length=256,
                                description="The Bedrock model (Converse API) that judges same-fact pairs on AWS.")
    recall_weights: RecallWeights = Field(default_factory=RecallWeights,
                                          description="Recall's composite relevance weights; they sum to 1.")
    decay_rate_per_day: float = Field(
        0.01, ge=0, lt=1, description="Recall's recency: (1 - rate)^days since the memory was last written.")
    recall_min_match: float = Field(
        0.07, ge=0, le=1,
        description="The hybrid match under which a memory is no match for recall, whatever its importance, "
                    "recency or pin (calibrated to MiniLM: unrelated texts score up to about 0.06).")
    recall_cut_gap: float = Field(
        0.1, ge=0, le=1,
        description="Recall's adaptive cut: going down from the most relevant memory, recall stops at the first "
                    "drop in relevance of more than this (the best always stays); 1 turns it off.")
    recall_cut_margin: float = Field(
        0.14, ge=0, le=1,
        description="Recall's adaptive cut: a memory more than this below the best one's relevance is left out "
                    "(the best always stays); 1 turns it off.")
    # Sessions (API-AGENT.md "Agent workflow state", seed 001's promotion at session close).
    promote_important: bool = Field(True, description="Promote a session's important memories when it is closed.")
    promotion_threshold: float = Field(0.8, ge=0, le=1, description="Importance from which a session memory is "
                                       "promoted at close.")
    promote_to: Literal["user", "agent"] = Field("user", description="The layer promoted memories go to (a session "
                                                 "whose metadata names a project_id promotes to that project).")
    session_auto_delete: bool = Field(False, description="Delete a closed session's layer and messages after "
                                      "session_retention_days.")
    session_retention_days: int = Field(30, ge=0, le=3650, description="Days a closed session is kept with "
                                        "session_auto_delete (0: at close).")
    # Learning from conversations (issue 24).
    session_extract: Literal["off", "on_close", "continuous"] = Field(
        "off", description="A new session's extract setting when it names none: off; on_close (extract its "
                           "messages when it is closed, before promotion); continuous (in the background, every "
                           "extract_every_messages messages or after extract_idle_seconds without one).")
    extract_every_messages: int = Field(10, ge=1, le=100, description="A continuous session's messages per "
                                        "extraction batch.")
    extract_idle_seconds: int = Field(120, ge=10, le=900, description="A continuous session's messages are "
                                      "extracted once it has had none for this long.")
    extraction_model_id: str | None = Field(None, min_length=1, max_length=256,
                                            description="The Bedrock model (Converse API) that extracts memories "
                                                        "from conversations on AWS; null: the deployment's "
                                                        "(MEMSVC_MEMORY_EXTRACTION_MODEL_ID).")
    # -- reflection settings (issue 24) go below this line --
    # Background reflection, the archive and the profile (`memsvc.core.reflection`,
    # docs/agent-memory.md, "Reflection, archive and profile").
    reflection_enabled: bool = Field(True, description="Reflect on each user's memories in the background "
                                     "every reflection_interval_hours (POST /admin/v1/memories/reflect runs it regardless).")
    reflection_interval_hours: int = Field(24, ge=1, le=24 * 30, description="Hours between two complete "
                                           "reflection passes over a user's memories.")
    reflection_max_memories: int = Field(5000, ge=10, le=50_000, description="Memories one reflection run "
                                         "examines at most; a pass over more continues in the next run.")
    archive_below: float = Field(0.1, ge=0, le=1, description="Effective importance under which a memory unused "
                                 "for archive_after_days is archived (0: never).")
    archive_after_days: int = Field(90, ge=1, le=3650, description="Days without a recall or a write before a "
                                    "memory may be archived.")
    reflection_exempt_layers: list[Literal["agent", "user", "session"]] = Field(
        default_factory=lambda: ["session"], description="Layers reflection leaves alone (no merge, archive or "
                                                        "importance change).")
    profile_token_budget: int = Field(500, ge=1, le=8000, description="cl100k_base tokens of the user profile "
                                      "(GET /v1/memory/profile) at most.")

    @model_validator(mode="after")
    def _reach_what_was_writable(self) -> "TenantSettings":
        self.reachable_depth = max(self.reachable_depth, self.max_depth)
        return self

    @model_validator(mode="after")
    def _check_range_below_auto_update(self) -> "TenantSettings":
        for kind in ("semantic", "episodic"):
            if getattr(self, f"{kind}_check_low") > getattr(self, f"{kind}_auto_update"):
                raise ValueError(f"{kind}_check_low must not exceed {kind}_auto_update")
        return self


_BELOW = "at most the auto-update threshold of its kind, as it is after this change"


class SettingsPatch(Command):
    """`PUT /admin/v1/memories/settings`: the settings to change; the others keep their values.
    After the change, each `*_check_low` must not exceed its `*_auto_update` (400 otherwise)."""

    # Absent means "keep"; null is refused like any other wrong type.
    max_depth: Integer = Field(None, ge=1, le=MAX_DEPTH)  # type: ignore[assignment]
    tombstone_retention_days: Integer = Field(None, ge=1, le=3650)  # type: ignore[assignment]
    keyword_index: StrictBool = Field(None)  # type: ignore[assignment]
    rerank: RerankSetting = Field(None, description="replaced as a whole; locally it needs "  # type: ignore[assignment]
                                                    "MEMSVC_RERANK_URL to be enabled")
    semantic_auto_update: StrictFloat = Field(None, ge=0, le=1)  # type: ignore[assignment]
    semantic_check_low: StrictFloat = Field(None, ge=0, le=1, description=_BELOW)  # type: ignore[assignment]
    episodic_auto_update: StrictFloat = Field(None, ge=0, le=1)  # type: ignore[assignment]
    episodic_check_low: StrictFloat = Field(None, ge=0, le=1, description=_BELOW)  # type: ignore[assignment]
    episodic_merge_window_hours: Integer = Field(None, ge=1, le=24 * 365)  # type: ignore[assignment]
    neighbors_k: Integer = Field(None, ge=1, le=50)  # type: ignore[assignment]
    remember_per_hour: Integer = Field(None, ge=1, le=1_000_000)  # type: ignore[assignment]
    judge_model_id: StrictStr = Field(None, min_length=1, max_length=256)  # type: ignore[assignment]
    recall_weights: RecallWeights = Field(None, description="they must sum to 1")  # type: ignore[assignment]
    decay_rate_per_day: StrictFloat = Field(None, ge=0, lt=1)  # type: ignore[assignment]
    recall_min_match: StrictFloat = Field(None, ge=0, le=1)  # type: ignore[assignment]
    recall_cut_gap: StrictFloat = Field(None, ge=0, le=1)  # type: ignore[assignment]
    recall_cut_margin: StrictFloat = Field(None, ge=0, le=1)  # type: ignore[assignment]
    promote_important: StrictBool = Field(None)  # type: ignore[assignment]
    promotion_threshold: StrictFloat = Field(None, ge=0, le=1)  # type: ignore[assignment]
    promote_to: Literal["user", "agent"] = Field(None)  # type: ignore[assignment]
    session_auto_delete: StrictBool = Field(None)  # type: ignore[assignment]
    session_retention_days: Integer = Field(None, ge=0, le=3650)  # type: ignore[assignment]
    # Extraction (issue 24).
    session_extract: Literal["off", "on_close", "continuous"] = Field(None)  # type: ignore[assignment]
    extract_every_messages: Integer = Field(None, ge=1, le=100)  # type: ignore[assignment]
    extract_idle_seconds: Integer = Field(None, ge=10, le=900)  # type: ignore[assignment]
    extraction_model_id: StrictStr | None = Field(None, min_length=1, max_length=256,
                                                  description="null: the deployment's model")
    # Reflection (issue 24).
    reflection_enabled: StrictBool = Field(None)  # type: ignore[assignment]
    reflection_interval_hours: Integer = Field(None, ge=1, le=24 * 30)  # type: ignore[assignment]
    reflection_max_memories: Integer = Field(None, ge=10, le=50_000)  # type: ignore[assignment]
    archive_below: StrictFloat = Field(None, ge=0, le=1)  # type: ignore[assignment]
    archive_after_days: Integer = Field(None, ge=1, le=3650)  # type: ignore[assignment]
    reflection_exempt_layers: list[Literal["agent", "user", "session"]] = Field(  # type: ignore[assignment]
        None, description="replaced as a whole")
    profile_token_budget: Integer = Field(None, ge=1, le=8000)  # type: ignore[assignment]


# Bounds on what a process keeps per tenant and per stored bundle, so that many tenants, or an
# admin storing bundle after bundle, cannot grow it without end: a tenant's cached settings or
# policies (the least recently put first out), and compiled bundles (least recently used
# out; each holds up to `policy.MAX_BUNDLE_BYTES` of sources; one left out compiles again).
MAX_CACHED_TENANTS = 10_000
MAX_COMPILED_BUNDLES = 64


class _TtlCache:
    def __init__(self, seconds: float) -> None:
        self._seconds = seconds
        self._entries: dict[str, tuple[Any, float]] = {}
        self._lock = threading.Lock()

    def get(self, tenant: str) -> Any | None:
        with self._lock:
            hit = self._entries.get(tenant)
            return hit[0] if hit and hit[1] > time.monotonic() else None

    def put(self, tenant: str, value: Any) -> None:
        with self._lock:
            self._entries.pop(tenant, None)  # to the end: the least recently put entries are first
            self._entries[tenant] = (value, time.monotonic() + self._seconds)
            while len(self._entries) > MAX_CACHED_TENANTS:
                del self._entries[next(iter(self._entries))]


_SETTINGS_FORMAT = 3  # stored settings since e5-small (`SettingsRegistry._stored`)
# The embedding-calibrated values every tenant held while MiniLM was the only local model: a
# document stored before format 3 holds them as defaults, not choices.
_MINILM_ERA = {"semantic_auto_update": 0.90, "semantic_check_low": 0.55, "episodic_auto_update": 0.92,
               "episodic_check_low": 0.60, "recall_min_match": 0.07, "recall_cut_gap": 0.1, "recall_cut_margin": 0.14}


class SettingsRegistry:
    """`defaults` are the deployment's defaults where they differ from `TenantSettings`' own (the
    remember thresholds calibrated for the embedding model in use); a tenant's stored settings
    override them."""

    def __init__(self, store: TenantConfigStore, *, cache_seconds: float = 2.0,
                 defaults: dict[str, Any] | None = None, rerank_available: bool = True) -> None:
        self._store = store
        self._rerank_available = rerank_available  # False: no reranker configured (local, no MEMSVC_RERANK_URL)
        self._cache = _TtlCache(cache_seconds)
        self._defaults = defaults or {}

    def get(self, tenant: str) -> TenantSettings:
        cached = self._cache.get(tenant)
        if cached is None:
            cached = self._of(self._store.get_config(tenant, "settings"))
            self._cache.put(tenant, cached)
        return cached

    def _of(self, stored: dict[str, Any] | None) -> TenantSettings:
        return TenantSettings.model_validate({**self._defaults, **self._stored(stored)})

    def _stored(self, doc: dict[str, Any] | None) -> dict[str, Any]:
        """The tenant's stored settings. An update stores them all (settings checked against each
        other stay consistent, `reachable_depth` keeps its history) but the deployment's
        model-calibrated `defaults` it left as they were, so that those follow the embedding model
        (`memsvc reindex` to another), marked with `_SETTINGS_FORMAT`. In a document stored before,
        the MiniLM-era defaults are dropped likewise, and `recall_min_match`'s default before
        issue 23's fusion (0.25, unmarked documents) follows the new one."""
        stored = dict(doc or {})
        stored_format = stored.pop("format", None)
        if stored_format is None and stored.get("recall_min_match") == 0.25:
            del stored["recall_min_match"]
        if stored_format != _SETTINGS_FORMAT:
            stored = {k: v for k, v in stored.items() if not (k in _MINILM_ERA and v == _MINILM_ERA[k])}
        return stored

    def update(self, tenant: str, patch: SettingsPatch) -> TenantSettings:
        if patch.rerank is not None and patch.rerank.enabled and not self._rerank_available:
            raise InvalidArgument("rerank needs a rerank endpoint: start the server with MEMSVC_RERANK_URL set",
                                  details={"field": "rerank"})
        # Read, merge, then store only over what was read: two admins changing different settings
        # at once both land (the loser of the race merges again), and neither is lost.
        for attempt in range(WRITE_ATTEMPTS):
            backoff(attempt)
            stored = self._store.get_config(tenant, "settings")
            try:
                merged = TenantSettings.model_validate({**self._of(stored).model_dump(),
                                                        **patch.model_dump(exclude_unset=True)})
            except ValidationError as exc:  # a rule across fields (a check range above its auto-update)
                raise InvalidArgument(error_message(exc.errors()[0]), details={"field": "settings"}) from None
            doc = {**_chosen(merged.model_dump(), self._defaults), "format": _SETTINGS_FORMAT}
            if self._store.swap_config(tenant, "settings", doc, expected=stored):
                self._cache.put(tenant, merged)
                return merged
        raise Conflict("the settings kept changing while this change was in flight; try again")


def _chosen(settings: dict[str, Any], defaults: dict[str, Any]) -> dict[str, Any]:
    """What an update stores: every setting but the model-calibrated defaults left as they were. A
    threshold pair is kept whole once either is chosen, so that its check (check_low at most
    auto_update) holds whatever the other's default becomes."""
    left = {k for k, v in settings.items() if k in defaults and v == defaults[k]}
    for kind in ("semantic", "episodic"):
        pair = {f"{kind}_auto_update", f"{kind}_check_low"}
        if not pair <= left:
            left -= pair
    return {k: v for k, v in settings.items() if k not in left}


def _still_to_write(stored: dict[str, Any] | None, replacing: str, version: str) -> bool:
    """Whether bundle `version` is still to be written over the `stored` document (None: the
    built-in bundle): not when it is in force already; `PreconditionFailed` when the version in
    force is neither it nor `replacing`."""
    current = stored["version"] if stored is not None else BUILTIN_VERSION
    if current == version:
        return False
    if current != replacing:
        raise PreconditionFailed(
            "the policy bundle in force is not the version this upload replaces: read it again, and make your "
            "change on top of it", details={"expected_version": replacing, "current_version": current})
    return True


class PolicyRegistry:
    def __init__(self, store: TenantConfigStore, *, cache_seconds: float = 2.0) -> None:
        self._store = store
        self._cache = _TtlCache(cache_seconds)
        self._default: CompiledPolicies | None = None
        self._compiled_by_version: OrderedDict[str, CompiledPolicies] = OrderedDict()
        self._compiling: dict[str, _Compiling] = {}
        self._lock = threading.Lock()

    def get(self, tenant: str) -> CompiledPolicies:
        cached = self._cache.get(tenant)
        if cached is not None:
            return cached
        doc = self._store.get_config(tenant, "policies")
        compiled = self._default_policies() if doc is None else self._compile(doc["policies"], doc["version"])
        self._cache.put(tenant, compiled)
        return compiled

    def replace(self, tenant: str, policies: Any, admin_context: dict[str, Any], *,
                replacing: str | None = None) -> CompiledPolicies:
        """Store a new bundle, unless `check` refuses it. `replacing`: the version the caller read;
        the bundle is written only over that version (412 when another is in force, also one that
        lands meanwhile), unless the bundle in force is this very one (a retry whose first attempt
        landed): then nothing changes."""
        compiled = self.check(policies, admin_context)
        doc = {"version": compiled.bundle.version, "policies": compiled.bundle.policies}
        if replacing is None:
            self._store.put_config(tenant, "policies", doc)
        else:
            self._write_over(tenant, replacing, doc)
        self._cache.put(tenant, compiled)
        return compiled

    def check(self, policies: Any, admin_context: dict[str, Any]) -> CompiledPolicies:
        """The bundle compiled and test-evaluated, unless it fails to compile or would deny
        `admin_context` (the uploading admin) the `admin` operation: nobody with that admin's roles
        could undo it. Stores nothing."""
        compiled = compile_bundle(policies)  # raises InvalidArgument with the compiler's message
        if not compiled.allow("admin", [], None, admin_context):
            raise InvalidArgument(
                "this bundle would deny you the admin operation, so you could not change it back: "
                'keep an allow rule for operation "admin" that matches your roles',
                details={"field": "policies"},
            )
        return compiled

    def check_replacing(self, tenant: str, policies: Any, admin_context: dict[str, Any],
                        replacing: str | None) -> CompiledPolicies:
        """`check`, and the version as `replace` would find it now. Stores nothing."""
        compiled = self.check(policies, admin_context)
        if replacing is not None:
            _still_to_write(self._store.get_config(tenant, "policies"), replacing, compiled.bundle.version)
        return compiled

    def _write_over(self, tenant: str, replacing: str, doc: dict[str, Any]) -> None:
        """Write `doc` over the bundle version `replacing` (see `replace`); a write that lost a race
        reads again (the winner may have written this very bundle, or changed and changed back)."""
        for attempt in range(WRITE_ATTEMPTS):
            backoff(attempt)
            stored = self._store.get_config(tenant, "policies")
            if not _still_to_write(stored, replacing, doc["version"]) or \
                    self._store.swap_config(tenant, "policies", doc, expected=stored):
                return
        raise Conflict("the policy bundle kept changing while this upload was in flight; try again")

    def _default_policies(self) -> CompiledPolicies:
        with self._lock:
            if self._default is None:
                self._default = compile_bundle(default_bundle(), version=BUILTIN_VERSION)
            return self._default

    def _compile(self, policies: dict[str, str], version: str) -> CompiledPolicies:
        """The stored bundle `version`, compiled once: the requests that need it while it compiles
        wait for that compile, instead of each taking a policy worker, which all tenants share,
        for the same seconds of work. A failed compile is every waiter's error, and the next
        request tries again; a compile cut short by something other than an error (an interrupt)
        is tried again by a waiter."""
        while True:
            with self._lock:
                compiled = self._compiled_by_version.get(version)
                if compiled is not None:
                    self._compiled_by_version.move_to_end(version)
                    return compiled
                flight = self._compiling.get(version)
                follower = flight is not None and not flight.done.is_set()  # a done one left behind: stale
                if follower:
                    flight.waiting += 1
                else:
                    flight = self._compiling[version] = _Compiling()
            if not follower:
                return self._lead(flight, policies, version)
            with slots.released():
                flight.done.wait()
            if flight.compiled is not None:
                return flight.compiled
            if isinstance(flight.error, Exception):
                raise flight.error

    def _lead(self, flight: "_Compiling", policies: dict[str, str], version: str) -> CompiledPolicies:
        try:
            flight.compiled = compile_bundle(policies, version=version, stored=True)
            return flight.compiled
        except BaseException as exc:
            flight.error = exc
            raise
        finally:
            try:
                with self._lock:
                    if self._compiling.get(version) is flight:
                        del self._compiling[version]
                    if flight.compiled is not None:
                        self._compiled_by_version[version] = flight.compiled
                        while len(self._compiled_by_version) > MAX_COMPILED_BUNDLES:
                            self._compiled_by_version.popitem(last=False)
            finally:
                flight.done.set()


class _Compiling:
    """A stored bundle's compile in progress (`PolicyRegistry._compile`)."""

    def __init__(self) -> None:
        self.done = threading.Event()
        self.waiting = 0  # requests waiting for it
        self.compiled: CompiledPolicies | None = None
        self.error: BaseException | None = None
