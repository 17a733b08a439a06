"""How much one page of a list may carry. Pure.

A page answered through API Gateway and Lambda must fit Lambda's 6 MB response payload, and the
body travels as a JSON string inside Lambda's own JSON answer, where escaping can triple it (the
python3.11 runtime serializes with `ensure_ascii`, so a two-byte character becomes a six-byte
`\\uXXXX`, and a quote already escaped once is escaped again). So a page stops once its entries take
`PAGE_BYTES` as compact UTF-8 JSON, whatever its `limit`, and answers a cursor to the rest. Its
first entry always comes, whatever its size: every stored value is at most 256 KB, so even a page
of one stays far inside the payload limit.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from typing import Any, TypeVar

__all__ = ["PAGE_BYTES", "json_size", "take_page"]

PAGE_BYTES = 1536 * 1024

T = TypeVar("T")


def json_size(obj: Any) -> int:
    """Bytes `obj` takes as compact UTF-8 JSON (as the router sends it)."""
    return len(json.dumps(obj, separators=(",", ":"), ensure_ascii=False).encode())


def take_page(entries: Iterable[T], size: Callable[[T], int], *, limit: int,
              budget: int | None = None) -> tuple[list[T], bool]:
    """At most `limit` of `entries`, in order, whose sizes add up to at most `budget` (by default
    `PAGE_BYTES`; the first one always), and whether any entry was left. Reads one entry past the
    page, no more."""
    budget = PAGE_BYTES if budget is None else budget
    page: list[T] = []
    total = 0
    for entry in entries:
        if len(page) == limit:
            return page, True
        n = size(entry)
        if page and total + n > budget:
            return page, True
        page.append(entry)
        total += n
    return page, False
