"""Semantic upsert (API-AGENT.md "Agent workflow state"): a user's facts kept once each.

A memory is keyed by its `external_id` (`e:<id>`) when it has one, else by the SHA-256 of its
normalised content (`h:<hash>`): Unicode NFKC, case-folded, whitespace collapsed and trimmed, so
"Likes  Tea" and "likes tea" are one memory. Sending the same content (and metadata) again is
`unchanged`: no write, so no new version and no event. It is stored as a typed memory in
["user", U, "semantic"], which `core.layers` counts as the user layer, so recall finds it.

Only what an upsert wrote is a semantic memory (`source: "semantic"` and a `content_hash`): a
plain `PUT /v1/memories` into the same namespace is the user's own item, which these routes
treat as absent rather than refuse (the namespace is the user's, and the item API lets a user
write anywhere under ["user", U]). A memory kept under an external id is found by its content
hash through a pointer in the workflow store (`add_semantic_hash`), one keyed read.
Two upserts of the same new content race on a conditional create: one is `created`, the other
re-reads and is `unchanged`.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal

from pydantic import ConfigDict, Field, StrictStr, model_validator

from memsvc.core.contention import WRITE_ATTEMPTS, backoff
from memsvc.core.errors import Conflict, NotFound
from memsvc.core.layers import SEMANTIC_SEGMENT
from memsvc.core.models import Caller, StoredItem
from memsvc.core.typed_memory import CONTENT_FIELDS, MAX_CONTENT_CHARS, TypedMemory
from memsvc.core.unicode_text import normalize
from memsvc.core.validation import Command
from memsvc.ports import Clock, ItemStore, WorkflowStore
from memsvc.service.memories import Expected, Memories, PutMemory
from memsvc.service.sealing import Sealer
from memsvc.service.sessions import MAX_ID_CHARS

__all__ = ["SemanticMemories", "UpsertSemantic", "SemanticRef", "Upserted", "SemanticView", "content_hash"]

SemanticAction = Literal["created", "updated", "unchanged"]


class UpsertSemantic(Command):
    """`POST /v1/memory/semantic`."""

    content: StrictStr = Field(min_length=1, max_length=MAX_CONTENT_CHARS)
    external_id: StrictStr | None = Field(None, min_length=1, max_length=MAX_ID_CHARS)
    metadata: dict[StrictStr, Any] = Field({})


class SemanticRef(Command):
    """`GET` / `DELETE /v1/memory/semantic`: exactly one of the two."""

    model_config = ConfigDict(json_schema_extra={"oneOf": [{"required": ["external_id"]},
                                                           {"required": ["content_hash"]}]})

    external_id: StrictStr = Field(None, min_length=1, max_length=MAX_ID_CHARS)  # type: ignore[assignment]
    content_hash: StrictStr = Field(None, pattern="^[0-9a-f]{64}$")  # type: ignore[assignment]

    @model_validator(mode="after")
    def _one_of(self) -> "SemanticRef":
        if (self.external_id is None) == (self.content_hash is None):
            raise ValueError("give exactly one of external_id and content_hash")
        return self


@dataclass(frozen=True)
class Upserted:
    id: str
    external_id: str | None
    content_hash: str
    action: SemanticAction


@dataclass(frozen=True)
class SemanticView:
    id: str
    external_id: str | None
    content_hash: str
    content: str
    metadata: dict[str, Any]
    namespace: tuple[str, ...]
    key: str
    version: int
    created_at: datetime
    updated_at: datetime


def content_hash(content: str) -> str:
    """What duplicate contents share: SHA-256 of the content NFKC-normalised, case folded and its
    whitespace collapsed. O(len(content))."""
    normalised = " ".join(normalize("NFKC", content).casefold().split())
    return hashlib.sha256(normalised.encode("utf-8")).hexdigest()


class SemanticMemories:
    def __init__(self, *, items: ItemStore, memories: Memories, sealer: Sealer, clock: Clock,
                 hashes: WorkflowStore) -> None:
        self._items = items
        self._memories = memories
        self._sealer = sealer
        self._clock = clock
        self._hashes = hashes

    def upsert(self, caller: Caller, cmd: UpsertSemantic) -> Upserted:
        digest = content_hash(cmd.content)
        ns = _namespace(caller)
        key = f"e:{cmd.external_id}" if cmd.external_id is not None else f"h:{digest}"
        value = TypedMemory(content=cmd.content, type="fact", kind="semantic", source="semantic",
                            extra={"external_id": cmd.external_id, "content_hash": digest,
                                   "metadata": cmd.metadata}).to_value()
        if cmd.external_id is not None:
            # Before the write, so a memory with this content is never without its pointer.
            self._hashes.add_semantic_hash(caller.tenant_id, caller.user_id, digest, key)
        for attempt in range(WRITE_ATTEMPTS):
            backoff(attempt)
            row = self._items.get(caller.tenant_id, ns, key)
            current = self._semantic(row)
            if current is not None and current[1].get("content_hash") == digest \
                    and current[1].get("metadata") == cmd.metadata:
                return Upserted(current[0].id, cmd.external_id, digest, "unchanged")
            try:
                written = self._memories.put(caller, PutMemory(namespace=list(ns), key=key, value=value,
                                                               index_fields=CONTENT_FIELDS), only_over=Expected(row))
            except Conflict:
                continue  # a concurrent upsert wrote first: decide again from what it wrote
            if current is not None and current[1].get("content_hash") != digest and cmd.external_id is not None:
                self._hashes.drop_semantic_hash(caller.tenant_id, caller.user_id, current[1]["content_hash"], key)
            return Upserted(written.id, cmd.external_id, digest, "updated" if current is not None else "created")
        raise Conflict("too many concurrent writes to this semantic memory; retry", details={"key": key})

    def get(self, caller: Caller, ref: SemanticRef) -> SemanticView:
        item, value = self._find(caller, ref)
        return SemanticView(id=item.id, external_id=value.get("external_id"), content_hash=value["content_hash"],
                            content=value.get("content", ""), metadata=value.get("metadata") or {},
                            namespace=item.namespace, key=item.key, version=item.version,
                            created_at=item.created_at, updated_at=item.updated_at)

    def delete(self, caller: Caller, ref: SemanticRef) -> None:
        """Idempotent: deleting what is not there is fine."""
        try:
            item, value = self._find(caller, ref)
        except NotFound:
            return
        self._memories.delete(caller, item.namespace, item.key)
        if item.key.startswith("e:"):
            self._hashes.drop_semantic_hash(caller.tenant_id, caller.user_id, value["content_hash"], item.key)

    def _find(self, caller: Caller, ref: SemanticRef) -> tuple[StoredItem, dict[str, Any]]:
        ns = _namespace(caller)
        if ref.external_id is not None:
            candidates = [f"e:{ref.external_id}"]
        else:
            candidates = [f"h:{ref.content_hash}",
                          *self._hashes.semantic_hash_keys(caller.tenant_id, caller.user_id, ref.content_hash)]
        for key in candidates:
            found = self._semantic(self._items.get(caller.tenant_id, ns, key))
            # A pointer outlives its memory's content when a crash came between them: checked here.
            if found is not None and (ref.content_hash is None or found[1]["content_hash"] == ref.content_hash):
                return found
        raise NotFound("no semantic memory with this id or hash")

    def _semantic(self, item: StoredItem | None) -> tuple[StoredItem, dict[str, Any]] | None:
        """The live item and its value, if an upsert wrote it (anything else under the namespace is
        treated as absent)."""
        if item is None or not item.is_live(self._clock.now()):
            return None
        value = self._sealer.open_value(item) or {}
        if value.get("source") != "semantic" or not isinstance(value.get("content_hash"), str):
            return None
        return item, value


def _namespace(caller: Caller) -> tuple[str, ...]:
    return ("user", caller.user_id, SEMANTIC_SEGMENT)
