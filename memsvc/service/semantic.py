"""Semantic upsert (API-AGENT.md "Agent workflow state"): a user's facts kept once each.

A memory is keyed by its `external_id` (`e:<id>`) when it has one, else by the SHA-256 of its
normalised content (`h:<hash>`): Unicode NFKC, case-folded, whitespace collapsed and trimmed, so
"Likes  Tea" and "likes tea" are one memory. Sending the same content (and metadata) again is
`unchanged`: no write, so no new version and no event. It is stored as a typed memory in
["user", U, "semantic"], which `core.layers` counts as the user layer, so recall finds it.
"""

from __future__ import annotations

import hashlib
import unicodedata
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal

from pydantic import Field, StrictStr, model_validator

from memsvc.core.errors import NotFound
from memsvc.core.layers import SEMANTIC_SEGMENT
from memsvc.core.models import Caller, StoredItem
from memsvc.core.typed_memory import CONTENT_FIELDS, MAX_CONTENT_CHARS, TypedMemory
from memsvc.core.validation import Command
from memsvc.ports import Clock, ItemStore
from memsvc.service.memories import Memories, PutMemory
from memsvc.service.sealing import Sealer
from memsvc.service.sessions import MAX_ID_CHARS

__all__ = ["SemanticMemories", "UpsertSemantic", "SemanticRef", "Upserted", "SemanticView", "content_hash"]

SemanticAction = Literal["created", "updated", "unchanged"]


class UpsertSemantic(Command):
    """`POST /v1/memory/semantic`."""

    content: StrictStr = Field(min_length=1, max_length=MAX_CONTENT_CHARS)
    external_id: StrictStr | None = Field(None, min_length=1, max_length=MAX_ID_CHARS)
    metadata: dict[StrictStr, Any] = Field(default_factory=dict)


class SemanticRef(Command):
    """`GET` / `DELETE /v1/memory/semantic`: exactly one of the two."""

    external_id: StrictStr | None = Field(None, min_length=1, max_length=MAX_ID_CHARS)
    content_hash: StrictStr | None = Field(None, pattern="^[0-9a-f]{64}$")

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
    normalised = " ".join(unicodedata.normalize("NFKC", content).casefold().split())
    return hashlib.sha256(normalised.encode("utf-8")).hexdigest()


class SemanticMemories:
    def __init__(self, *, items: ItemStore, memories: Memories, sealer: Sealer, clock: Clock) -> None:
        self._items = items
        self._memories = memories
        self._sealer = sealer
        self._clock = clock

    def upsert(self, caller: Caller, cmd: UpsertSemantic) -> Upserted:
        digest = content_hash(cmd.content)
        ns = _namespace(caller)
        key = f"e:{cmd.external_id}" if cmd.external_id is not None else f"h:{digest}"
        current = self._live(caller, ns, key)
        if current is not None:
            value = self._sealer.open_value(current) or {}
            if value.get("content_hash") == digest and value.get("metadata") == cmd.metadata:
                return Upserted(current.id, cmd.external_id, digest, "unchanged")
        value = TypedMemory(content=cmd.content, type="fact", kind="semantic", source="semantic",
                            extra={"external_id": cmd.external_id, "content_hash": digest,
                                   "metadata": cmd.metadata}).to_value()
        written = self._memories.put(caller, PutMemory(namespace=list(ns), key=key, value=value,
                                                       index_fields=CONTENT_FIELDS))
        return Upserted(written.id, cmd.external_id, digest, "updated" if current is not None else "created")

    def get(self, caller: Caller, ref: SemanticRef) -> SemanticView:
        item = self._find(caller, ref)
        value = self._sealer.open_value(item) or {}
        return SemanticView(id=item.id, external_id=value.get("external_id"), content_hash=value["content_hash"],
                            content=value.get("content", ""), metadata=value.get("metadata") or {},
                            namespace=item.namespace, key=item.key, version=item.version,
                            created_at=item.created_at, updated_at=item.updated_at)

    def delete(self, caller: Caller, ref: SemanticRef) -> None:
        """Idempotent: deleting what is not there is fine."""
        try:
            item = self._find(caller, ref)
        except NotFound:
            return
        self._memories.delete(caller, item.namespace, item.key)

    def _find(self, caller: Caller, ref: SemanticRef) -> StoredItem:
        ns = _namespace(caller)
        if ref.external_id is not None:
            item = self._live(caller, ns, f"e:{ref.external_id}")
        else:
            item = self._live(caller, ns, f"h:{ref.content_hash}") or self._with_hash(caller, ns, ref.content_hash)
        if item is None:
            raise NotFound("no semantic memory with this id or hash")
        return item

    def _with_hash(self, caller: Caller, ns: tuple[str, ...], digest: str | None) -> StoredItem | None:
        """A memory kept under an external id whose content has this hash: the user's semantic
        namespace, read through (one namespace, a page at a time)."""
        for item in self._items.scan_live(caller.tenant_id, ns, self._clock.now()):
            if item.namespace == ns and (self._sealer.open_value(item) or {}).get("content_hash") == digest:
                return item
        return None

    def _live(self, caller: Caller, ns: tuple[str, ...], key: str) -> StoredItem | None:
        item = self._items.get(caller.tenant_id, ns, key)
        return item if item is not None and item.is_live(self._clock.now()) else None


def _namespace(caller: Caller) -> tuple[str, ...]:
    return ("user", caller.user_id, SEMANTIC_SEGMENT)
