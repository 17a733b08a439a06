"""JSON text as memsvc takes it, from a request body or an import file: what `json.loads` reads,
less what memsvc refuses rather than change or fail on later.

Refused: `NaN`, `Infinity` and `-Infinity` (not JSON numbers); a number out of a double's range
(`1e999`, or `1e-400`, which a double would read as 0); an integer of more than 4,300 digits
(Python's limit for `int(str)`); a lone UTF-16 surrogate (`"\\ud800"`, which JSON can escape but
no UTF-8 text holds) in any string or key; an object that repeats a key (`json.loads` keeps the
last, so `{"n": {"gt": 0}, "n": {"lt": 3}}` would drop a filter's condition unseen). Linear in the text.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterator
from typing import Any

__all__ = ["loads", "Refused", "MAX_INT_DIGITS"]

MAX_INT_DIGITS = 4300  # Python's limit for int(str) (sys.int_info.default_max_str_digits)
_MANTISSA = re.compile(r"[^eE]*")  # of a JSON number: what comes before its exponent
_NONZERO_DIGIT = re.compile(r"[1-9]")
_SURROGATE = re.compile("[\ud800-\udfff]")
# What a text holding a lone surrogate must contain: the escape of one, or (in a Lambda event's
# text, which was never UTF-8) the character itself. Without either, the walk is skipped.
_MAY_HOLD_SURROGATE = re.compile("\\\\u[dD][89a-fA-F]|[\ud800-\udfff]")


class Refused(Exception):
    """A value the text holds and memsvc refuses: `path` is where (`value.a.0`; `body` for the
    whole), `why` in our words."""

    def __init__(self, path: str, why: str) -> None:
        super().__init__(f"{path}: {why}")
        self.path = path
        self.why = why


class _RefusedToken(str):
    """Stands in for a token json.loads takes but memsvc refuses, until its place is known."""


def loads(text: str) -> Any:
    """The parsed text. Raises `Refused`, or json.JSONDecodeError (not JSON) or RecursionError
    (nested too deeply), whose texts are the json module's: the caller says what went wrong."""
    refused: list[_RefusedToken] = []

    def refuse(why: str) -> _RefusedToken:
        refused.append(_RefusedToken(why))
        return refused[-1]

    def parse_int(digits: str) -> int | _RefusedToken:
        if len(digits.lstrip("-")) > MAX_INT_DIGITS:
            return refuse(f"an integer of {len(digits)} digits is longer than {MAX_INT_DIGITS}")
        return int(digits)

    def parse_float(number_text: str) -> float | _RefusedToken:
        number = float(number_text)
        if not math.isfinite(number) or (number == 0 and _NONZERO_DIGIT.search(_MANTISSA.match(number_text)[0])):
            # Too big, or so small it would be read as 0: refused rather than changed.
            return refuse(f"{number_text[:32]} is out of a double's range")
        return number

    def object_of(pairs: list[tuple[str, Any]]) -> dict[str, Any] | _RefusedToken:
        obj = dict(pairs)
        if len(obj) == len(pairs):
            return obj
        seen: set[str] = set()
        repeated = next(k for k, _ in pairs if k in seen or seen.add(k))  # type: ignore[func-returns-value]
        return refuse(f"repeats the key {json.dumps(repeated[:64])}: which one is meant is not guessed")

    parsed = json.loads(text, parse_int=parse_int, parse_float=parse_float, object_pairs_hook=object_of,
                        parse_constant=lambda token: refuse(f"{token} is not a JSON number"))
    # Checked first: a refused token's path may run through a key that is not text, and a path
    # naming it could not be sent back.
    if _MAY_HOLD_SURROGATE.search(text):
        for node, place in _nodes(parsed):
            # A key holding one is named by its object's path.
            if ((isinstance(node, str) and _SURROGATE.search(node))
                    or (isinstance(node, dict) and any(_SURROGATE.search(k) for k in node))):
                raise Refused(_path(place), "holds a lone UTF-16 surrogate (\\ud800-\\udfff), which is not text")
    if refused:
        for node, place in _nodes(parsed):
            if isinstance(node, _RefusedToken):
                raise Refused(_path(place), str(node))
        raise AssertionError("a refused token was parsed but is not in the result")
    return parsed


# Where a value is: its parent's place and its key or index, None for the root. The text of a
# path is made only for the value refused: made for every value, the paths below a long key would
# repeat it once per value (quadratic in the body).
_Place = tuple["_Place", str | int] | None


def _nodes(root: Any) -> Iterator[tuple[Any, _Place]]:
    """Every value of a parsed text with its place, in document order."""
    stack: list[tuple[Any, _Place]] = [(root, None)]
    while stack:
        node, place = stack.pop()
        yield node, place
        if isinstance(node, dict):
            stack.extend((v, (place, k)) for k, v in reversed(node.items()))
        elif isinstance(node, list):
            stack.extend((v, (place, i)) for i, v in reversed(list(enumerate(node))))


def _path(place: _Place) -> str:
    """A place as a path: `value.a.0`; `body` for the root."""
    names: list[str] = []
    while place is not None:
        place, name = place
        names.append(str(name))
    return ".".join(reversed(names)) or "body"
