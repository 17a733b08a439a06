"""The search filter language of API.md: a flat object of dot-path conditions, ANDed.

`{"meta.lang": "en", "year": {"gte": 2024, "lt": 2026}, "tag": {"$in": ["a", "b"]}}`

Beyond API.md's operators (docs/api.md, "Filter operators for agents"):

- `contains: x`: the value at the path is a list holding an element equal to `x`, or is itself
  equal to `x` (a scalar counts as a one-element list, as MongoDB and S3 Vectors' `$eq` treat
  it). Only the top level of the list: `[["a"]]` contains `["a"]`, not `"a"`.
- `any: [x, ...]`: the same, for at least one of the listed values (`contains` of any of them).
- `exists: true|false`: whether the path is present; `null` is present (MongoDB's rule).
- `not: {operators}`: the operators on that path, ANDed, do not all hold; `not` cannot hold
  another `not`. A missing path fails `contains`, `any` and `eq`, so `not` of those holds there.

Comparisons never fall back to text order: numbers compare as numbers, strings that are both
ISO 8601 timestamps compare as instants, and anything else makes a range condition false.

JSON has no infinities or NaN, so an operand (or an element of an `in`/`nin` list) may spell
them as `{"$numberDouble": "Infinity" | "-Infinity" | "NaN"}` (MongoDB's Extended JSON form):
`{"price": {"lt": {"$numberDouble": "Infinity"}}}` holds for every number, and NaN equals
nothing and is neither greater nor less than anything, as in IEEE 754.
"""

from __future__ import annotations

import json
import math
import operator
import re
from collections.abc import Callable, Collection, Iterator
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from decimal import Decimal
from fractions import Fraction
from functools import cached_property, lru_cache
from typing import Any

from memsvc.core.errors import InvalidArgument

__all__ = [
    "MAX_CONDITIONS",
    "MAX_LISTED_VALUES",
    "OPERATORS",
    "Condition",
    "Filter",
    "parse_filter",
    "condition_matches",
    "equality_key",
    "get_path",
    "lookup_in",
]

MAX_CONDITIONS = 50
# Values a filter's lists hold in all: each is checked on every candidate's field tokens (a keyed
# hash each) or values; 130,000 (a 1 MiB body) took 2.3 s of a request thread.
MAX_LISTED_VALUES = 10_000
OPERATORS = frozenset({"eq", "ne", "in", "nin", "gt", "gte", "lt", "lte", "contains", "any", "exists", "not"})
_LIST_OPERATORS = ("in", "nin", "any")
_RANGE = {"gt": operator.gt, "gte": operator.ge, "lt": operator.lt, "lte": operator.le}
NON_FINITE_TAG = "$numberDouble"
_NON_FINITE = {"Infinity": math.inf, "-Infinity": -math.inf, "NaN": math.nan}

# ISO 8601 extended format / RFC 3339: a date, optionally a time (seconds and fraction optional),
# optionally an offset. Stricter than datetime.fromisoformat, which also takes "20240501".
_TIMESTAMP = re.compile(
    r"(\d{4})-(\d{2})-(\d{2})"
    r"(?:[Tt ](\d{2}):(\d{2})(?::(\d{2})(?:[.,](\d{1,9}))?)?"
    r"(?:[Zz]|([+-])(\d{2}):?(\d{2}))?)?",
    re.ASCII,
)


@dataclass(frozen=True)
class Condition:
    path: str
    op: str
    operand: Any

    @cached_property
    def operand_keys(self) -> frozenset[str]:
        """The equality keys of a list operand (`in`, `nin`, `any`; `contains`' one value), computed
        once however many values the condition is checked against."""
        listed = (self.operand,) if self.op.removeprefix("$") == "contains" else self.operand
        return frozenset(k for x in listed if (k := equality_key(x)) is not None)

    @cached_property
    def negated(self) -> tuple[Condition, ...]:
        """A `not`'s inner operators as conditions on the same path, made once, so that their own
        `operand_keys` are too."""
        return tuple(Condition(self.path, op, operand) for op, operand in self.operand)


@dataclass(frozen=True)
class Filter:
    conditions: tuple[Condition, ...] = ()

    def __post_init__(self) -> None:
        object.__setattr__(self, "conditions", tuple(self.conditions))

    @property
    def is_empty(self) -> bool:
        """True when the filter has no conditions (it matches everything)."""
        return not self.conditions

    def matches(self, lookup: Callable[[str], tuple[bool, Any]]) -> bool:
        """Whether every condition holds; `lookup(path)` returns `(found, value)`."""
        for c in self.conditions:
            found, value = lookup(c.path)
            if not _holds(c, found, value):
                return False
        return True

    def split(self, keys: Collection[str]) -> tuple[Filter, Filter]:
        """`(conditions whose path is in keys, the rest)`, e.g. to push some down to a store."""
        inside = tuple(c for c in self.conditions if c.path in keys)
        rest = tuple(c for c in self.conditions if c.path not in keys)
        return Filter(inside), Filter(rest)

    def merge(self, other: Filter) -> Filter:
        """Both filters ANDed; a condition present in both is kept once. O(size of the operands)."""
        seen: set[tuple[str, str, str]] = set()
        merged = []
        for c in self.conditions + other.conditions:
            # json.dumps keeps True, 1 and 1.0 apart, which == on the operands would not.
            identity = (c.path, c.op, json.dumps(c.operand, sort_keys=True, default=repr))
            if identity not in seen:
                seen.add(identity)
                merged.append(c)
        return Filter(tuple(merged))

    def to_json(self) -> dict[str, Any]:
        """The filter in the API's JSON form; `parse_filter(f.to_json()) == f` for parsed filters.

        Conditions are grouped by path. Raises ValueError when a path carries the same operator
        more than twice (possible only after `merge`): the flat form has just `op` and `$op`.
        """
        grouped: dict[str, dict[str, Any]] = {}
        for c in self.conditions:
            ops = grouped.setdefault(c.path, {})
            name = c.op if c.op not in ops else "$" + c.op
            if name in ops:
                raise ValueError(f"filter on {c.path!r} has more than two {c.op!r} conditions")
            ops[name] = _encode_operand(c.op, c.operand)
        return {
            path: ops["eq"] if ops.keys() == {"eq"} and not isinstance(ops["eq"], dict) else ops
            for path, ops in grouped.items()
        }


def parse_filter(obj: Any) -> Filter:
    """Parse the API's filter object. Raises `InvalidArgument` (details field `filter`).

    O(size of `obj`): each path is split once, each operand is looked at to its top level (its
    nesting is the caller's to bound: `memories.check_nesting`)."""
    if not isinstance(obj, dict):
        raise _invalid("filter must be a JSON object")
    conditions: list[Condition] = []
    count = listed = 0
    for path, spec in obj.items():
        if not isinstance(path, str) or not path or "" in path.split("."):
            raise _invalid(f"filter key {path!r} must be a non-empty dot path", key=path)
        if path.startswith("$"):  # an operator where a field goes ($or, $and): never a field name to match
            raise _invalid(f"filter key {path[:64]!r} is an operator, not a field: a filter's conditions all "
                           "hold (and), and `not` goes inside a field's", key=path[:64])
        parsed = _parse_spec(path, spec)
        conditions.extend(Condition(path, op, operand) for op, operand in parsed)
        # A `not` counts as the operators it holds.
        count += sum(len(operand) if op == "not" else 1 for op, operand in parsed)
        if count > MAX_CONDITIONS:
            raise _invalid(f"filter has more than {MAX_CONDITIONS} conditions", max_conditions=MAX_CONDITIONS)
        listed += sum(len(operand) for op, operand in _with_negated(parsed) if op in _LIST_OPERATORS)
        if listed > MAX_LISTED_VALUES:
            raise _invalid(f"filter lists more than {MAX_LISTED_VALUES} values in all (in, nin, any)",
                           max_listed_values=MAX_LISTED_VALUES)
    return Filter(tuple(conditions))


def _with_negated(parsed: list[tuple[str, Any]]) -> Iterator[tuple[str, Any]]:
    """The pairs, and those inside each `not`."""
    for op, operand in parsed:
        yield from operand if op == "not" else ((op, operand),)


def condition_matches(value_found: bool, value: Any, op: str, operand: Any) -> bool:
    """Evaluate one condition on a field value (`value_found` False when the field is missing).
    O(size of `value` + size of `operand`)."""
    op = op.removeprefix("$")
    if op == "eq":
        return value_found and _equal(value, operand)
    if op == "ne":
        return not value_found or not _equal(value, operand)
    if op == "in":
        return value_found and any(_equal(value, x) for x in operand)
    if op == "nin":
        return not value_found or not any(_equal(value, x) for x in operand)
    if op in _RANGE:
        pair = _comparable(value, operand) if value_found else None
        return pair is not None and _RANGE[op](*pair)
    if op in ("contains", "any"):
        return value_found and _holds_any(value, (operand,) if op == "contains" else operand)
    if op == "exists":
        return value_found == operand
    if op == "not":
        return not all(condition_matches(value_found, value, inner, x) for inner, x in operand)
    raise ValueError(f"unknown filter operator {op!r}")


def _holds(c: Condition, found: bool, value: Any) -> bool:
    """`condition_matches` for a parsed condition: a list operand's equality keys are its own
    (`operand_keys`), so each value checked costs O(its size), not O(its size + the operand's)."""
    op = c.op.removeprefix("$")
    if op == "not":
        return not all(_holds(inner, found, value) for inner in c.negated)
    if op in ("in", "nin"):
        inside = found and equality_key(value) in c.operand_keys
        return inside if op == "in" else not inside
    if op in ("contains", "any"):
        elements = value if isinstance(value, (list, tuple)) else (value,)
        return found and any(equality_key(x) in c.operand_keys for x in elements)
    return condition_matches(found, value, c.op, c.operand)


def _holds_any(value: Any, wanted: Collection[Any]) -> bool:
    """Whether the list `value` (or the scalar or object `value`, as a list of one) holds an
    element equal to one of `wanted`. O(size of `value` + size of `wanted`): equal values share
    their equality key."""
    keys = {k for x in wanted if (k := equality_key(x)) is not None}
    elements = value if isinstance(value, (list, tuple)) else (value,)
    return bool(keys) and any(equality_key(x) in keys for x in elements)


def get_path(obj: Any, path: str) -> tuple[bool, Any]:
    """Resolve a dot path (`"meta.lang"`, `"items.0.name"`) to `(found, value)`. O(len(path))."""
    for part in path.split("."):
        if isinstance(obj, dict) and part in obj:
            obj = obj[part]
        elif isinstance(obj, list) and (index := _list_index(part)) is not None and index < len(obj):
            obj = obj[index]
        else:
            return False, None
    return True, obj


def _list_index(part: str) -> int | None:
    """A path segment's list index (`"0"`, `"01"`), None when it is not one. No list has 10^18
    elements, so a longer number is none (int() refuses more than 4,300 digits: a 500)."""
    digits = part.lstrip("0") or "0"
    return int(digits) if part.isascii() and part.isdigit() and len(digits) <= 18 else None


def lookup_in(obj: Any) -> Callable[[str], tuple[bool, Any]]:
    """What `Filter.matches` takes: dot paths resolved in `obj` (a value, or policy attributes)."""
    return lambda path: get_path(obj if obj is not None else {}, path)


def _parse_spec(path: str, spec: Any) -> list[tuple[str, Any]]:
    if (number := _non_finite(spec)) is not None:
        return [("eq", number)]
    if not isinstance(spec, dict) or not any(_looks_like_operator(k) for k in spec):
        return [("eq", spec)]
    return _parse_operators(path, spec, negated=False)


def _parse_operators(path: str, spec: dict[Any, Any], *, negated: bool) -> list[tuple[str, Any]]:
    """The (operator, operand) pairs of an operator object; `negated` inside a `not`."""
    parsed = []
    for name, operand in spec.items():
        op = name.removeprefix("$") if isinstance(name, str) else name
        if op not in OPERATORS:
            if isinstance(name, str) and name.startswith("$"):
                raise _invalid(f"filter on {path!r}: unknown operator {name!r}", key=path, op=name)
            raise _invalid(
                f"filter on {path!r}: {name!r} is not an operator; an operator object holds only operators",
                key=path,
                op=name,
            )
        if op in _LIST_OPERATORS:
            if not isinstance(operand, (list, tuple)):
                raise _invalid(f"filter on {path!r}: {name!r} takes a list", key=path, op=name)
            operand = tuple(_decode(x) for x in operand)
        elif op == "exists" and not isinstance(operand, bool):
            raise _invalid(f"filter on {path!r}: {name!r} takes true or false", key=path, op=name)
        elif op == "not":
            if negated:
                raise _invalid(f"filter on {path!r}: {name!r} cannot hold another not", key=path, op=name)
            if not isinstance(operand, dict) or not any(_looks_like_operator(k) for k in operand):
                raise _invalid(f"filter on {path!r}: {name!r} takes an object of operators, such as "
                               f"{{\"contains\": \"x\"}}", key=path, op=name)
            operand = tuple(_parse_operators(path, operand, negated=True))
        elif op in _RANGE and not (_is_range_operand(operand) or _non_finite(operand) is not None):
            raise _invalid(
                f"filter on {path!r}: {name!r} takes a number or an ISO 8601 timestamp",
                key=path,
                op=name,
            )
        parsed.append((op, _decode(operand)))
    return parsed


def _non_finite(x: Any) -> float | None:
    if isinstance(x, dict) and len(x) == 1 and isinstance(x.get(NON_FINITE_TAG), str):
        return _NON_FINITE.get(x[NON_FINITE_TAG])
    return None


def _decode(operand: Any) -> Any:
    number = _non_finite(operand)
    return operand if number is None else number


def _encode_operand(op: str, operand: Any) -> Any:
    """A parsed operand in the API's JSON form."""
    if op in _LIST_OPERATORS:
        return [_encode(x) for x in operand]
    if op == "not":
        inner: dict[str, Any] = {}
        for name, x in operand:
            inner[name if name not in inner else "$" + name] = _encode_operand(name, x)
        return inner
    return _encode(operand)


def _encode(operand: Any) -> Any:
    if isinstance(operand, float) and not math.isfinite(operand):
        return {NON_FINITE_TAG: "NaN" if math.isnan(operand) else ("Infinity" if operand > 0 else "-Infinity")}
    return operand


def _looks_like_operator(key: Any) -> bool:
    return isinstance(key, str) and (key.startswith("$") or key in OPERATORS)


def _is_range_operand(x: Any) -> bool:
    if _is_number(x):
        return isinstance(x, int) or math.isfinite(x)  # infinities and NaN come tagged (see above)
    return isinstance(x, str) and _instant(x) is not None


def _is_number(x: Any) -> bool:
    # Decimal because DynamoDB hands numbers back as Decimal; bool is an int but never a number here.
    return isinstance(x, (int, float, Decimal)) and not isinstance(x, bool)


_MAX_TIMESTAMP_CHARS = 35  # "2024-05-01T00:00:00.123456789+02:00"


def _instant(s: str) -> datetime | None:
    """The instant an ISO 8601 timestamp names, else None. O(1): a longer string is no timestamp,
    and is never cached (4,096 values of 256 KB would stay in memory)."""
    return None if len(s) > _MAX_TIMESTAMP_CHARS else _cached_instant(s)


@lru_cache(maxsize=4096)
def _cached_instant(s: str) -> datetime | None:
    m = _TIMESTAMP.fullmatch(s)
    if m is None:
        return None
    year, month, day, hour, minute, second, fraction, sign, off_hours, off_minutes = m.groups()
    try:
        tz = timezone.utc  # naive means UTC
        if sign:
            if int(off_minutes) > 59:
                return None
            offset = timedelta(hours=int(off_hours), minutes=int(off_minutes))
            tz = timezone(-offset if sign == "-" else offset)
        microsecond = int((fraction or "0")[:6].ljust(6, "0"))
        clock = (int(hour or 0), int(minute or 0), int(second or 0), microsecond)
        return datetime(int(year), int(month), int(day), *clock, tzinfo=tz)
    except ValueError:
        return None


def _comparable(a: Any, b: Any) -> tuple[Any, Any] | None:
    if _is_number(a) and _is_number(b):
        # NaN is unordered; Decimal (DynamoDB's numbers) would raise rather than say so.
        return None if a != a or b != b else (a, b)
    if isinstance(a, str) and isinstance(b, str):
        ta, tb = _instant(a), _instant(b)
        if ta is not None and tb is not None:
            return ta, tb
    return None


def _equal(a: Any, b: Any) -> bool:
    if isinstance(a, bool) or isinstance(b, bool):
        return isinstance(a, bool) and isinstance(b, bool) and a == b
    if _is_number(a) and _is_number(b):
        return a == b
    if isinstance(a, str) and isinstance(b, str):
        if a == b:
            return True
        instant = _instant(a)
        return instant is not None and instant == _instant(b)
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return len(a) == len(b) and all(map(_equal, a, b))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_equal(a[k], b[k]) for k in a)
    return a is None and b is None


def equality_key(x: Any) -> str | None:
    """A text that two values share exactly when `eq` calls them equal (`_equal`), so equality can
    be decided on keyed hashes of it: 1, 1.0 and Decimal("1") share one; True, "1" and 1 differ;
    two timestamps share one when they are the same instant. None for a value equal to nothing
    (NaN, or anything holding one).

    O(size of `x`) in time and in the key's length, plus sorting each object's keys: a list's or
    an object's key holds its members' keys once each, every scalar's and name's prefixed by its
    length, so that no level quotes the one below again (JSON texts nested in JSON texts grew as
    2^depth). A number's key is its exact fraction, of at most 4,300 digits (the API's longest
    int; a float's parts have at most 324, DynamoDB's Decimals 131). Recursion goes as deep as `x`
    is nested, which the API bounds (`memories.MAX_NESTING`)."""
    if isinstance(x, (list, tuple, dict)):
        parts: list[str] = []
        return "".join(parts) if _append_composite_key(x, parts) else None
    return _scalar_key(x)


def _scalar_key(x: Any) -> str | None:
    if isinstance(x, bool):
        return "b1" if x else "b0"
    if _is_number(x):
        if x != x:
            return None
        if x in (math.inf, -math.inf):
            return "n+inf" if x > 0 else "n-inf"
        exact = Fraction(x)  # exact for ints, floats and Decimals alike, as == compares them
        return f"n{exact.numerator}/{exact.denominator}"
    if isinstance(x, str):
        instant = _instant(x)
        return "s" + x if instant is None else f"t{(instant - _EPOCH) // timedelta(microseconds=1)}"
    if x is None:
        return "z"
    return None


def _append_composite_key(x: Any, out: list[str]) -> bool:
    """Appends the self-delimiting key of `x` to `out`: `l[` members `]`, `o{` (name, member)
    pairs by name `}`, a scalar's key or a name as `<length>:<text>`. False when `x` holds a value
    equal to nothing."""
    if isinstance(x, (list, tuple)):
        out.append("l[")
        for member in x:
            if not _append_composite_key(member, out):
                return False
        out.append("]")
    elif isinstance(x, dict):
        if not all(isinstance(name, str) for name in x):
            return False
        out.append("o{")
        for name in sorted(x):
            out.append(f"{len(name)}:{name}")
            if not _append_composite_key(x[name], out):
                return False
        out.append("}")
    else:
        key = _scalar_key(x)
        if key is None:
            return False
        out.append(f"{len(key)}:{key}")
    return True


_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)


def _invalid(message: str, **details: Any) -> InvalidArgument:
    return InvalidArgument(message, details={"field": "filter", **details})
