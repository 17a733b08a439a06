"""Unicode normalization in time linear in the text's length.

CPython's `unicodedata.normalize` puts each run of combining marks (non-starters) in canonical
order with an insertion sort, quadratic in the run's length: 20,000 marks in reverse order take
6 s. UAX #15's Stream-Safe Text Format bounds the runs: a COMBINING GRAPHEME JOINER (U+034F, a
starter that changes no rendering) goes after every 30 non-starters, which no real text reaches.
"""

from __future__ import annotations

import unicodedata
from functools import lru_cache
from typing import Literal

__all__ = ["normalize", "MAX_NON_STARTERS"]

MAX_NON_STARTERS = 30  # UAX #15
_CGJ = "\u034f"


def normalize(form: Literal["NFC", "NFKC"], text: str) -> str:
    """`unicodedata.normalize(form, text)` of the text made stream-safe (UAX #15), which changes
    only a run of more than `MAX_NON_STARTERS` combining marks. O(len(text))."""
    if unicodedata.is_normalized(form, text):  # the usual case, and a quick check
        return text
    return unicodedata.normalize(form, _stream_safe(text))


def _stream_safe(text: str) -> str:
    """`text` with U+034F inserted where UAX #15's stream-safe text process puts it. O(len(text))."""
    pieces: list[str] = []
    start = run = 0
    for i, c in enumerate(text):
        if c < "\xa0":  # ASCII and C1 controls: starters that decompose to nothing else
            run = 0
            continue
        leading, trailing, whole = _non_starters(c)
        if run + leading > MAX_NON_STARTERS:
            pieces += (text[start:i], _CGJ)
            start, run = i, 0
        run = run + leading if whole else trailing
    return "".join(pieces) + text[start:] if pieces else text


@lru_cache(maxsize=4096)
def _non_starters(c: str) -> tuple[int, int, bool]:
    """The non-starters at the start and at the end of `c`'s compatibility decomposition, and
    whether it is all non-starters (e.g. U+0344; U+FF9E is a starter that decomposes to one)."""
    decomposed = unicodedata.normalize("NFKD", c)
    starters = [i for i, d in enumerate(decomposed) if unicodedata.combining(d) == 0]
    if not starters:
        return len(decomposed), len(decomposed), True
    return starters[0], len(decomposed) - 1 - starters[-1], False
