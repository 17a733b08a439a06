"""Which of a memory's texts answers a query: what recall shows of a plain item or a message, and
what the rerank step sends to the reranker."""

from __future__ import annotations

from typing import Any

from memsvc.core.keywords import analyze
from memsvc.core.message_context import MESSAGE_FIELD, turn_of
from memsvc.core.paths import MAX_INDEXED_FIELDS, extract_texts
from memsvc.service.sealing import Sealer

__all__ = ["best_text", "MAX_SCANNED_CHARS_PER_TEXT", "MAX_SCANNED_CHARS"]

# How much of a memory's texts is analyzed to find the one sharing the most query terms: each
# text's beginning, and so much of them all (a 256 KB value analyzed whole cost 0.14 s).
MAX_SCANNED_CHARS_PER_TEXT = 4000
MAX_SCANNED_CHARS = 4 * MAX_SCANNED_CHARS_PER_TEXT


def best_text(sealer: Sealer, tenant: str, value: dict[str, Any], field: str | None, terms: set[str], *,
              message: bool = False) -> tuple[str, str]:
    """(text, path): a memory's indexed text that matched best: the one whose vector did (`field`,
    a keyed hash), or (found by keywords alone) the one sharing the most of the query's `terms`.
    A session message (`message`) is its own content, whichever of its texts matched: its vectors
    are of texts no value holds (`core.message_context`), and its other leaves are its role and
    its speaker's name, which say nothing of what was said.

    The work is bounded whatever the value's size: only each text's first
    `MAX_SCANNED_CHARS_PER_TEXT` are analyzed, and texts after the first `MAX_SCANNED_CHARS`
    analyzed are not candidates."""
    if message and (turn := turn_of(value)) is not None:
        return turn.content, MESSAGE_FIELD
    texts = extract_texts(value, None, limit=MAX_INDEXED_FIELDS)
    if field is not None:
        for path, text in texts:
            if sealer.field_id(tenant, path) == field:
                return text, path
    if not terms:
        return (texts[0][1], texts[0][0]) if texts else ("", "")
    best, budget = ("", ""), MAX_SCANNED_CHARS
    best_shared = -1
    for path, text in texts:
        if budget <= 0:
            break
        head = text[:min(MAX_SCANNED_CHARS_PER_TEXT, budget)]
        budget -= len(head)
        shared = len(terms & set(analyze(head)))
        if shared > best_shared:  # ties: the first
            best, best_shared = (text, path), shared
    return best
