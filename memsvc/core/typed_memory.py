"""Typed memories (API-AGENT.md "Typed memories", seeds 002 and 004): an item whose value has a
`content` and a `type`, plus the bookkeeping the service maintains. Pure.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, Literal

__all__ = ["MEMORY_TYPES", "MEMORY_KINDS", "MAX_CONTENT_CHARS", "CONTENT_FIELDS", "TypedMemory", "is_typed",
           "is_superseded"]

MEMORY_TYPES = ("fact", "preference", "decision", "note")
MEMORY_KINDS = ("semantic", "episodic")
MAX_CONTENT_CHARS = 8000
CONTENT_FIELDS = ["content"]  # only the content is embedded and keyword-indexed

MemoryType = Literal["fact", "preference", "decision", "note"]
MemoryKind = Literal["semantic", "episodic"]


@dataclass(frozen=True)
class TypedMemory:
    """A typed memory's value. `access_count` and `last_accessed_at` count recalls; the links
    (`superseded_by`, `merged_from`, `promoted_from`) name other memories by key."""

    content: str
    type: MemoryType = "fact"
    kind: MemoryKind = "semantic"
    importance: float = 0.5
    pinned: bool = False
    tags: tuple[str, ...] = ()
    category: str | None = None
    source: str | None = None
    access_count: int = 0
    last_accessed_at: str | None = None  # RFC 3339
    superseded_by: str | None = None
    merged_from: tuple[str, ...] = ()
    promoted_from: dict[str, Any] | None = None
    # Reflection's state (`core.reflection`): archived (RFC 3339) until a recall returns it or it
    # is restored; and its bookkeeping, which describes only the version reflection wrote
    # (`reflected_version`): any later write makes the stated `importance` and the write's own
    # time count again until the next run.
    archived_at: str | None = None
    effective_importance: float | None = None
    active_at: str | None = None  # the last use before reflection's write (its write is no use)
    reflected_version: int | None = None
    # Valid time (issue 25, `core.validity`): when the stated fact held, [valid_from, valid_to),
    # RFC 3339 in UTC. Unset: from the key's creation on, open.
    valid_from: str | None = None
    valid_to: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)  # fields a caller added, kept as they are

    @property
    def superseded(self) -> bool:
        return self.superseded_by is not None or "superseded" in self.tags

    @property
    def archived(self) -> bool:
        return self.archived_at is not None

    def reflected(self, version: int) -> bool:
        """Whether reflection's bookkeeping describes this version (it wrote it)."""
        return self.reflected_version == version

    def to_value(self) -> dict[str, Any]:
        value = asdict(self)
        extra = value.pop("extra")
        for name in _UNSET_LEFT_OUT:  # a memory without these (reflection's, valid time) reads as it always did
            if value[name] is None:
                del value[name]
        value["tags"] = list(self.tags)
        value["merged_from"] = list(self.merged_from)
        return {**extra, **value}

    @classmethod
    def from_value(cls, value: dict[str, Any]) -> "TypedMemory | None":
        """The typed memory a value holds, or None for a plain item (no string `content`, or a
        `type` that is not one of the four). O(number of top-level fields and tags)."""
        if not is_typed(value):
            return None
        content, type_ = value["content"], value.get("type", "fact")
        known = {f for f in cls.__dataclass_fields__ if f != "extra"}

        def pick(name: str, ok: type | tuple[type, ...], default: Any) -> Any:
            v = value.get(name, default)
            return v if isinstance(v, ok) and not (ok is not bool and isinstance(v, bool)) else default

        importance = pick("importance", (int, float), 0.5)
        return cls(
            content=content,
            type=type_,
            kind=value.get("kind") if value.get("kind") in MEMORY_KINDS else "semantic",
            importance=min(1.0, max(0.0, float(importance))),
            pinned=value.get("pinned") is True,
            tags=tuple(t for t in pick("tags", list, []) if isinstance(t, str)),
            category=pick("category", str, None),
            source=pick("source", str, None),
            access_count=pick("access_count", int, 0),
            last_accessed_at=pick("last_accessed_at", str, None),
            superseded_by=pick("superseded_by", str, None),
            merged_from=tuple(k for k in pick("merged_from", list, []) if isinstance(k, str)),
            promoted_from=pick("promoted_from", dict, None),
            archived_at=pick("archived_at", str, None),
            effective_importance=_unit(pick("effective_importance", (int, float), None)),
            active_at=pick("active_at", str, None),
            reflected_version=pick("reflected_version", int, None),
            valid_from=pick("valid_from", str, None),
            valid_to=pick("valid_to", str, None),
            extra={k: v for k, v in value.items() if k not in known},
        )


# `is_typed` and `is_superseded` answer as `from_value(value)` and its `superseded` would, without
# building the memory: `as_of` checks every candidate a search opens (`core.validity`).
def is_typed(value: dict[str, Any]) -> bool:
    return isinstance(value.get("content"), str) and value.get("type", "fact") in MEMORY_TYPES


def is_superseded(value: dict[str, Any]) -> bool:
    tags = value.get("tags")
    return isinstance(value.get("superseded_by"), str) or (isinstance(tags, list) and "superseded" in tags)


_UNSET_LEFT_OUT = ("archived_at", "effective_importance", "active_at", "reflected_version", "valid_from", "valid_to")


def _unit(v: float | None) -> float | None:
    return None if v is None else min(1.0, max(0.0, float(v)))
