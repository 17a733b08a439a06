"""`core.strict_json`: the place of a refused value is named, and finding it stays linear in the
text, however long the keys on the way to it."""

from __future__ import annotations

import json
import tracemalloc

import pytest

from memsvc.core import strict_json


@pytest.mark.parametrize("text,path", [
    ('{"a": [1, {"b": NaN}]}', "a.1.b"),
    ('{"a": "\\udc00"}', "a"),
    ('{"a": {"\\ud800": 1}}', "a"),
    ('"\\ud800"', "body"),
    ('[0, 1e999]', "1"),
    ('{"a": 1, "a": 2}', "body"),
    ('{"filter": {"n": {"gt": 0}, "n": {"lt": 3}}}', "filter"),
    ('[{"x": 1}, {"x": {"y": 1, "y": 1}}]', "1.x"),
])
def test_a_refused_value_is_named_by_its_path(text, path):
    with pytest.raises(strict_json.Refused) as refused:
        strict_json.loads(text)
    assert refused.value.path == path


def test_values_under_a_long_key_do_not_each_carry_a_copy_of_it():
    # Every value's path used to be made as text while looking for a surrogate (any `\ud8..` in
    # the text starts the look, here an escaped backslash): 20,000 values under a 20,000-character
    # key made 400 MB of paths from an 80 kB body.
    text = json.dumps({"k" * 20_000: [0] * 20_000, "note": "\\ud800 is a surrogate's escape"})
    tracemalloc.start()
    try:
        parsed = strict_json.loads(text)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert parsed["note"].startswith("\\ud800")
    assert peak < 40 * len(text) * 8, f"{peak} bytes at peak for a {len(text)}-character text"
