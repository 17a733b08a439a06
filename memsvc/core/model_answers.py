"""The JSON in a language model's answer. Pure.

Models asked for "one JSON object and nothing else" still wrap it: in ```json fences, after a
sentence ("Here is the JSON:"), before a note, after a reasoning model's <think>...</think>.
`first_json` takes the first complete JSON object or array in the text, in one pass: a candidate
runs from an opening bracket to the bracket that closes it (brackets inside JSON strings do not
count), and one that does not parse is skipped whole. An answer cut off before its value closes
holds no JSON: the objects nested inside a cut-off answer are never taken for the answer.
"""

from __future__ import annotations

import json
import re
from typing import Any

__all__ = ["first_json"]

_OPENER = re.compile(r"[{\[]")
# A JSON string (possibly unterminated: cut off) or one bracket. Single-character alternatives,
# so the engine never backtracks: linear in the text.
_TOKEN = re.compile(r'"(?:[^"\\]|\\.)*"?|[{}\[\]]', re.DOTALL)
_FENCE = "```"
_END_OF_THINKING = "</think>"


def first_json(text: str) -> dict[str, Any] | list[Any] | None:
    """The first complete JSON object or array in `text`: from the first ``` fence on when there
    is one (prose before a fence may hold brackets of its own, "see [1]"), else from the start.
    None when there is none. O(len(text))."""
    thinking = text.rfind(_END_OF_THINKING)
    if thinking >= 0:  # a reasoning model's thoughts may hold drafts; its answer follows them
        text = text[thinking + len(_END_OF_THINKING):]
    fence = text.find(_FENCE)
    if fence > 0:
        found = _first_value(text, fence)
        if found is not None:
            return found
    return _first_value(text, 0)


def _first_value(text: str, start: int) -> dict[str, Any] | list[Any] | None:
    position = start
    while (opener := _OPENER.search(text, position)) is not None:
        begin, end, depth = opener.start(), -1, 0
        for token in _TOKEN.finditer(text, begin):
            mark = token.group()[0]
            if mark in "{[":
                depth += 1
            elif mark in "}]":
                depth -= 1
                if depth == 0:
                    end = token.end()
                    break
        if end < 0:
            return None  # cut off: nothing after this opener closes it
        try:
            value = json.loads(text[begin:end])
        except (ValueError, RecursionError):  # not JSON ("[sic]"), or nested too deep to read
            position = end
            continue
        return value  # type: ignore[no-any-return]
    return None
