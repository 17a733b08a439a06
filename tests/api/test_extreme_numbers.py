"""Every number the body parser accepts is governed, stored and read back exactly (issue 22), over
HTTP on both live backends: the governance and attribute policies (regorus), the sealed value and
attributes (SQLite; DynamoDB), and the answer's serialisation."""

from __future__ import annotations

import json
import math
from typing import Any

import pytest

from tests.api.helpers import get, search_ok

pytestmark = pytest.mark.slow

# As sent, as text: the top and bottom of a double's range, subnormals, a signed zero, integers
# past 64 bits and of the longest length accepted (4,300 digits).
NUMBERS = ["1.7976931348623157e308", "-1.7976931348623157e308", "5e-324", "-5e-324", "1e-310", "-0.0",
           "2.2250738585072014e-308", "0.1", "9223372036854775807", "9223372036854775808", "18446744073709551617",
           "-9223372036854775809", "1" + "0" * 308, "9" * 4300, "-" + "9" * 4300]
DEPTH = 31  # arrays inside the value object: 32 levels, the API's limit


class _Int(str):
    """An integer's text as sent or answered."""


class _Float(str):
    """A fraction's or exponent's text as sent or answered."""


def _with_number_text(text: str) -> Any:
    return json.loads(text, parse_int=_Int, parse_float=_Float)


def _assert_same_numbers(sent: Any, got: Any, path: str = "value") -> None:
    """Integers digit for digit; other numbers as the same double, sign of zero included (their
    shortest text may differ: `1e308` is answered as `1e+308`)."""
    if isinstance(sent, _Int):
        assert type(got) is _Int and got == sent, (path, got[:40], sent[:40])
    elif isinstance(sent, _Float):
        assert type(got) is _Float, (path, got)
        assert float(got) == float(sent) and math.copysign(1, float(got)) == math.copysign(1, float(sent)), (path, got)
    elif isinstance(sent, dict):
        assert list(got) == list(sent), path
        for k in sent:
            _assert_same_numbers(sent[k], got[k], f"{path}.{k}")
    elif isinstance(sent, list):
        assert len(got) == len(sent), path
        for i, (s, g) in enumerate(zip(sent, got)):
            _assert_same_numbers(s, g, f"{path}.{i}")
    else:
        assert got == sent, path


def _put_raw(client, ns: list[str], value: str, attributes: str, **extra: Any) -> Any:
    """PUT with `value` and `attributes` as JSON text, so every number goes as written here."""
    fields = "".join(f',"{k}":{json.dumps(v)}' for k, v in extra.items())
    body = f'{{"namespace":{json.dumps(ns)},"key":"k","value":{value},"attributes":{attributes}{fields}}}'
    r = client.put("/v1/memories", content=body.encode(), headers={"content-type": "application/json"})
    assert r.status_code == 200, r.text
    _assert_same_numbers(_with_number_text(attributes), _with_number_text(r.text)["attributes"], "attributes")
    return r


def _assert_read_back(client, ns: list[str], value: str, attributes: str) -> None:
    r = get(client, ns, "k")
    assert r.status_code == 200, r.text
    answer = _with_number_text(r.text)
    _assert_same_numbers(_with_number_text(value), answer["value"])
    _assert_same_numbers(_with_number_text(attributes), answer["attributes"], "attributes")
    assert json.loads(r.text)["value"] == json.loads(value)  # and as parsed JSON


LISTED = ",".join(NUMBERS)


def test_every_valid_number_is_accepted_indexed_and_read_back_exactly(me, home):
    value = "{" + ",".join(f'"n{i}":{t}' for i, t in enumerate(NUMBERS)) + f',"all":[{LISTED}],"text":"plain words"}}'
    attributes = f'{{"max":{NUMBERS[0]},"long":{NUMBERS[-1]},"all":[{LISTED}]}}'
    _put_raw(me, home + ["numbers"], value, attributes, sync_index=True)
    _assert_read_back(me, home + ["numbers"], value, attributes)


def test_numbers_nested_as_deep_as_allowed_are_read_back_exactly(me, home):
    # Not indexed: the indexer's field tokens are the subject of the rest of issue 22, and an
    # item they cannot handle must not hold up the live server shared by the other tests.
    value = f'{{"deep":{"[" * DEPTH}{LISTED}{"]" * DEPTH}}}'
    attributes = f'{{"deep":{"[" * DEPTH}{LISTED}{"]" * DEPTH}}}'
    _put_raw(me, home + ["deep"], value, attributes, index_fields=False)
    _assert_read_back(me, home + ["deep"], value, attributes)


def test_a_filter_on_extreme_numbers_is_evaluated(me, home):
    ns = home + ["filtered"]
    body = f'{{"namespace":{json.dumps(ns)},"key":"k","value":{{"max":{NUMBERS[0]},"long":{NUMBERS[-2]}}}}}'
    r = me.put("/v1/memories", content=body.encode(), headers={"content-type": "application/json"})
    assert r.status_code == 200, r.text
    found = search_ok(me, ns, filter={"max": 1.7976931348623157e308, "long": {"gte": 10**4299}})
    assert [m["key"] for m in found] == ["k"]
    assert search_ok(me, ns, filter={"long": {"lt": -(10**4299)}, "max": {"gt": 5e-324}}) == []
