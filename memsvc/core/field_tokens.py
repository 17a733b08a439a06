"""What a filter's equality conditions are decided on without decrypting: a value's fields as
(dot path, equality key) pairs, which the sealer turns into blind field tokens.

A pair is emitted for every scalar a filter path reaches (`get_path`): each object field and
each list element (`tags.0`, so `{"tags.0": {"in": [...]}}` works). Equal tokens mean `eq`-equal
values at the same path, `filters.equality_key` says when; an item holding no token of a
condition's path does not have a scalar there, or has one equal to nothing that was asked.

Lists and objects as a whole get no token: a condition with a list or object operand is decided
by decrypting (`field_filter`). Versions indexed before equality keys became linear hold tokens
of lists and objects under the old key encoding, which no key computed now matches; the rule
keeps their answers right without indexing them again.
"""

from __future__ import annotations

from typing import Any

from memsvc.core.filters import equality_key

__all__ = ["MAX_FIELD_TOKENS", "MAX_FIELD_PATH_CHARS", "value_fields", "decidable_path"]

# Nodes of one value that get tokens. A bigger value gets none at all: every filter on it is
# decided by decrypting it, as before tokens existed (its tokens would cost more than they save).
MAX_FIELD_TOKENS = 512
# A longer path gets no token, and a condition on it is decided by decrypting: each token hashes
# its path, and 512 paths as long as the value would make its tokens cost 512 times its size.
MAX_FIELD_PATH_CHARS = 256


def value_fields(value: Any) -> list[tuple[str, str]] | None:
    """(path, equality key) of every scalar of `value` below its root that a filter path reaches;
    None when there are more than `MAX_FIELD_TOKENS`.

    O(size of `value`): each node is visited once, a path is joined only for a scalar that gets a
    token (at most `MAX_FIELD_TOKENS` + 1, each path at most `MAX_FIELD_PATH_CHARS`), and each key
    is as long as its scalar. Recursion goes as deep as the value is nested, which the API bounds
    (`memories.MAX_NESTING`)."""
    out: list[tuple[str, str]] = []
    try:
        _walk(value, [], 0, out)
    except _TooMany:
        return None
    return out


def decidable_path(path: str) -> bool:
    """Whether tokens decide a condition on `path`: not when it is longer than
    `MAX_FIELD_PATH_CHARS`, nor when a segment is a number with a leading zero (`tags.01`), which
    `get_path` reads as index 1 of a list, but tokens name `tags.1`. O(len(path))."""
    return len(path) <= MAX_FIELD_PATH_CHARS and not any(
        len(part) > 1 and part.isascii() and part.isdigit() and part[0] == "0" for part in path.split("."))


class _TooMany(Exception):
    pass


def _walk(node: Any, names: list[str], length: int, out: list[tuple[str, str]]) -> None:
    """Emits the scalars below `node`, whose path is `names` joined by dots (`length` chars)."""
    if isinstance(node, dict):
        # A key holding a dot, or empty, is out of every dot path's reach.
        children = [(k, v) for k, v in node.items() if isinstance(k, str) and k and "." not in k]
    elif isinstance(node, list):
        children = [(str(i), v) for i, v in enumerate(node)]
    else:
        return
    for name, child in children:
        child_length = length + len(name) + (1 if names else 0)
        if child_length > MAX_FIELD_PATH_CHARS:
            continue  # so is every path below it: not decidable
        names.append(name)
        if isinstance(child, (dict, list)):
            _walk(child, names, child_length, out)
        elif (key := equality_key(child)) is not None:
            if len(out) >= MAX_FIELD_TOKENS:
                raise _TooMany
            out.append((".".join(names), key))
        names.pop()
