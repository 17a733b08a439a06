"""The namespace codec: validation, the stored (encoded) form and prefix matching.

A namespace `["user", "alice"]` is stored as `"user\\x1ealice"`: each segment percent-encoded
with `quote(s, safe='')`, joined with `\\x1e`. Encoded segments are printable ASCII, so they
never contain `\\x1e` or `\\x1f`, and a prefix is a plain string range that stops at segment
boundaries.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import lru_cache
from typing import Any
from urllib.parse import quote, unquote

from memsvc.core.errors import InvalidArgument

__all__ = [
    "MAX_NAMESPACE_BYTES",
    "SEP",
    "MAX_KEY_BYTES",
    "encode_namespace",
    "decode_namespace",
    "validate_namespace",
    "validate_key",
    "prefix_range",
    "is_under",
    "ancestors",
    "match_namespace_pattern",
]

SEP = "\x1e"
_AFTER_SEP = "\x1f"
MAX_KEY_BYTES = 1024
# The stored form (percent-encoded, so non-ASCII costs 3 bytes a byte) must fit, on every backend
# (so a namespace that works locally works on AWS), in DynamoDB's 1024-byte index sort key even
# inside the item's partition key: `T#<tenant of up to 128>#N#<namespace>` sorts the `pending`
# index, and the timeline's `T#<tenant>#TL#R#<first two segments>` sits in the same column.
MAX_NAMESPACE_BYTES = 880


def encode_namespace(ns: Sequence[str]) -> str:
    """The stored form of a namespace: percent-encoded segments joined with `SEP`."""
    return SEP.join(map(_quoted, ns))


# Both directions are pure and run for every item a request reads: remembered, they cost a
# dictionary lookup instead of percent-coding each segment again.
@lru_cache(maxsize=65_536)
def _quoted(segment: str) -> str:
    return quote(segment, safe="")


@lru_cache(maxsize=65_536)
def decode_namespace(s: str) -> tuple[str, ...]:
    """The reverse of `encode_namespace`; `""` decodes to `()`."""
    if not s:
        return ()
    return tuple(unquote(segment) for segment in s.split(SEP))


def validate_namespace(ns: Any, *, max_depth: int, allow_empty: bool = False) -> tuple[str, ...]:
    """Check a namespace (or, with `allow_empty`, a search prefix) and return it as a tuple.

    Raises `InvalidArgument` unless `ns` is a list or tuple of 1..max_depth non-empty strings
    (0..max_depth with `allow_empty`). `"*"` is an ordinary segment here. O(total length of the
    segments).
    """
    if not isinstance(ns, (list, tuple)):
        raise InvalidArgument(
            "namespace must be a list of strings",
            details={"field": "namespace", "reason": "not_a_list"},
        )
    min_depth = 0 if allow_empty else 1
    if not min_depth <= len(ns) <= max_depth:
        raise InvalidArgument(
            f"namespace must have {min_depth}..{max_depth} segments, got {len(ns)}",
            details={"field": "namespace", "reason": "depth", "min_depth": min_depth, "max_depth": max_depth},
        )
    for index, segment in enumerate(ns):
        if not isinstance(segment, str) or not segment:
            raise InvalidArgument(
                f"namespace segment {index} must be a non-empty string",
                details={"field": "namespace", "reason": "segment", "index": index},
            )
        if not _is_utf8(segment):
            raise InvalidArgument(
                f"namespace segment {index} is not valid Unicode text",
                details={"field": "namespace", "reason": "segment", "index": index},
            )
    # Not through encode_namespace's cache, which would keep a refused segment of any length.
    encoded = len(SEP.join(quote(segment, safe="") for segment in ns).encode())
    if encoded > MAX_NAMESPACE_BYTES:
        raise InvalidArgument(
            f"namespace takes {encoded} bytes in its stored form; the limit is {MAX_NAMESPACE_BYTES}",
            details={"field": "namespace", "reason": "too_long", "max_bytes": MAX_NAMESPACE_BYTES},
        )
    return tuple(ns)


def validate_key(key: Any) -> str:
    """Check a key: a non-empty string of at most 1024 bytes in UTF-8. Raises `InvalidArgument`.
    O(len(key))."""
    if not isinstance(key, str) or not key:
        raise InvalidArgument("key must be a non-empty string", details={"field": "key"})
    if not _is_utf8(key):
        raise InvalidArgument("key is not valid Unicode text", details={"field": "key"})
    if len(key.encode("utf-8")) > MAX_KEY_BYTES:
        raise InvalidArgument(
            f"key must be at most {MAX_KEY_BYTES} bytes in UTF-8",
            details={"field": "key", "max_bytes": MAX_KEY_BYTES},
        )
    return key


def prefix_range(prefix: Sequence[str]) -> tuple[str, str, str] | None:
    """The stored-form range of a prefix: `(exact, lo, hi)`, or None for the empty prefix.

    An encoded namespace `n` is under the prefix iff `n == exact or lo <= n < hi`.
    """
    if not prefix:
        return None
    exact = encode_namespace(prefix)
    return exact, exact + SEP, exact + _AFTER_SEP


def is_under(ns_encoded: str, prefix: Sequence[str]) -> bool:
    """Whether the encoded namespace is the prefix itself or below it (same rule as `prefix_range`)."""
    bounds = prefix_range(prefix)
    if bounds is None:
        return True
    exact, lo, hi = bounds
    return ns_encoded == exact or lo <= ns_encoded < hi


def ancestors(ns: Sequence[str]) -> list[str]:
    """The encoded form of every non-empty prefix of `ns`, shortest first."""
    return [encode_namespace(ns[:depth]) for depth in range(1, len(ns) + 1)]


def match_namespace_pattern(
    ns: Sequence[str], prefix: Sequence[str] | None, suffix: Sequence[str] | None
) -> bool:
    """List-namespaces matching: `prefix` against the first segments, `suffix` against the last.

    A pattern segment `"*"` matches exactly one segment. None or empty means no constraint;
    prefix and suffix may overlap, as in LangGraph.
    """
    if prefix and not _segments_match(ns[: len(prefix)], prefix):
        return False
    if suffix and not _segments_match(ns[len(ns) - len(suffix) :], suffix):
        return False
    return True


def _segments_match(segments: Sequence[str], pattern: Sequence[str]) -> bool:
    return len(segments) == len(pattern) and all(p == "*" or p == s for p, s in zip(pattern, segments))


def _is_utf8(s: str) -> bool:
    # JSON can carry lone surrogates ("\ud800"), which quote() and the stores cannot encode.
    try:
        s.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True
