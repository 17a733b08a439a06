"""Field tokens' canonical form: two values share an equality key exactly when `eq` calls them
equal, and a value's fields are named as filter paths read them."""

from __future__ import annotations

import itertools
import math
import random
from decimal import Decimal

from memsvc.core.crypto import field_tokens
from memsvc.core.field_tokens import MAX_FIELD_PATH_CHARS, MAX_FIELD_TOKENS, decidable_path, value_fields
from memsvc.core.filters import condition_matches, equality_key, get_path

SCALARS = [0, 1, 1.0, -1, 1.5, Decimal("1"), Decimal("1.5"), 2**53, 2**53 + 1, float(2**53), 10**30, 1e30,
           0.1, True, False, None, "", "1", "true", "null", "a", "A", "ä", "2024-05-01", "2024-05-01T00:00:00Z",
           "2024-05-01T02:00:00+02:00", "2024-05-01T00:00:00.0000001Z", "2024-05-01T00:00:00.0000002Z",
           "2024-05-01 00:00", "20240501", "2024-13-01", "0001-01-01T00:00:00+01:00", math.inf, -math.inf]
COMPOSITES = [[], [1], [1.0], ["1"], [1, 2], [2, 1], [[1]], {}, {"a": 1}, {"a": 1.0}, {"a": "1"}, {"a": 1, "b": 2},
              {"b": 2, "a": 1}, {"a": [1, {"b": None}]}, {"a": [1.0, {"b": None}]}, {"a": [1, {"b": False}]},
              ["2024-05-01", "x"], ["2024-05-01T00:00:00Z", "x"]]


def _eq(a, b) -> bool:
    return condition_matches(True, a, "eq", b)


def test_equality_keys_agree_with_eq():
    for a, b in itertools.product(SCALARS + COMPOSITES, repeat=2):
        ka, kb = equality_key(a), equality_key(b)
        assert (ka is not None and ka == kb) == _eq(a, b), (a, b)


def test_named_cases():
    assert equality_key(1) == equality_key(1.0) == equality_key(Decimal("1.000"))
    assert len({equality_key(x) for x in (1, "1", True, None)}) == 4
    assert equality_key(2**53 + 1) != equality_key(float(2**53))  # exact, as == is
    assert equality_key("2024-05-01") == equality_key("2024-05-01T02:00:00+02:00")
    assert equality_key(math.nan) is None and equality_key([1, math.nan]) is None  # NaN equals nothing
    assert equality_key({"a": 1, "b": 2}) == equality_key({"b": 2.0, "a": 1})


def test_random_values_agree_with_eq():
    rng = random.Random(7)

    def value(depth=0):
        pick = rng.random()
        if depth < 2 and pick < 0.15:
            return [value(depth + 1) for _ in range(rng.randint(0, 3))]
        if depth < 2 and pick < 0.3:
            return {rng.choice("ab"): value(depth + 1) for _ in range(rng.randint(0, 2))}
        return rng.choice(SCALARS)

    for _ in range(5000):
        a, b = value(), value()
        assert (equality_key(a) is not None and equality_key(a) == equality_key(b)) == _eq(a, b), (a, b)


def test_value_fields_name_every_scalar_a_filter_path_reaches():
    value = {"lang": "en", "tags": ["a", "b"], "meta": {"n": 1, "deep": {"x": None}}, "a.b": 1, "": 2,
             "nan": [math.nan], "empty": [], "nested": [[1]]}
    fields = dict(value_fields(value))
    # Lists and objects as a whole get none: a condition with a list or object operand decrypts.
    assert set(fields) == {"lang", "tags.0", "tags.1", "meta.n", "meta.deep.x", "nested.0.0"}
    for path, key in fields.items():  # each is what get_path finds there
        found, node = get_path(value, path)
        assert found and equality_key(node) == key
    assert value_fields({"list": list(range(MAX_FIELD_TOKENS + 1))}) is None
    assert value_fields({"list": list(range(MAX_FIELD_TOKENS))}) is not None


def test_long_paths_get_no_tokens_and_are_not_decided_by_them():
    edge = "a" * (MAX_FIELD_PATH_CHARS - 2)
    value = {edge: {"b": 1, "bc": 2}, "x" * (MAX_FIELD_PATH_CHARS + 1): 3}
    assert dict(value_fields(value)) == {f"{edge}.b": equality_key(1)}
    assert decidable_path(f"{edge}.b") and not decidable_path(f"{edge}.bc")


def test_leading_zero_segments_are_not_decided_by_tokens():
    assert decidable_path("tags.0") and decidable_path("meta.lang") and decidable_path("a.10")
    assert not decidable_path("tags.01") and not decidable_path("00")


def test_tokens_differ_by_key_path_and_type_and_match_equal_values():
    k1, k2 = b"\x01" * 32, b"\x02" * 32
    pairs = [("n", equality_key(1)), ("n", equality_key(1.0)), ("n", equality_key("1")), ("m", equality_key(1))]
    t = field_tokens(k1, pairs)
    assert t[0] == t[1] and len({t[0], t[2], t[3]}) == 3
    assert set(field_tokens(k2, pairs)).isdisjoint(t)  # another tenant's key: other tokens
    assert all(len(x) == 32 for x in t)
