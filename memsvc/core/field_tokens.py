"""What a filter's equality conditions are decided on without decrypting: a value's fields as
(dot path, equality key) pairs, which the sealer turns into blind field tokens.

A pair is emitted for every node a filter path reaches (`get_path`): each object field, each
list element (`tags.0`, so `{"tags.0": {"in": [...]}}` works), and objects and lists as a whole
(`{"meta": {"lang": "en"}}` compares whole objects, as `eq` does). Equal tokens mean `eq`-equal
values at the same path, `filters.equality_key` says when; an item holding no token of a
condition's path does not have the field, or has a value equal to nothing that was asked.
"""

from __future__ import annotations

from typing import Any

from memsvc.core.filters import equality_key

__all__ = ["MAX_FIELD_TOKENS", "value_fields", "decidable_path"]

# Nodes of one value that get tokens. A bigger value gets none at all: every filter on it is
# decided by decrypting it, as before tokens existed (its tokens would cost more than they save).
MAX_FIELD_TOKENS = 512


def value_fields(value: Any) -> list[tuple[str, str]] | None:
    """(path, equality key) of every node of `value` below its root that a filter path reaches;
    None when there are more than `MAX_FIELD_TOKENS`."""
    out: list[tuple[str, str]] = []
    try:
        _walk(value, "", out)
    except _TooMany:
        return None
    return out


def decidable_path(path: str) -> bool:
    """Whether tokens decide a condition on `path`: not when a segment is a number with a leading
    zero (`tags.01`), which `get_path` reads as index 1 of a list, but tokens name `tags.1`."""
    return not any(len(part) > 1 and part.isascii() and part.isdigit() and part[0] == "0"
                   for part in path.split("."))


class _TooMany(Exception):
    pass


def _walk(node: Any, path: str, out: list[tuple[str, str]]) -> None:
    if isinstance(node, dict):
        # A key holding a dot, or empty, is out of every dot path's reach.
        children = [(k, v) for k, v in node.items() if isinstance(k, str) and k and "." not in k]
    elif isinstance(node, list):
        children = [(str(i), v) for i, v in enumerate(node)]
    else:
        return
    for name, child in children:
        child_path = f"{path}.{name}" if path else name
        key = equality_key(child)
        if key is not None:
            if len(out) >= MAX_FIELD_TOKENS:
                raise _TooMany
            out.append((child_path, key))
        _walk(child, child_path, out)
