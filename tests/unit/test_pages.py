"""`core.pages.take_page`: a page stops at its limit or its byte budget, whichever comes first."""

from __future__ import annotations

from memsvc.core.pages import json_size, take_page


def test_the_limit_or_the_budget_ends_a_page():
    assert take_page(iter([1, 2, 3]), lambda n: 10, limit=2, budget=100) == ([1, 2], True)
    assert take_page(iter([1, 2, 3]), lambda n: 40, limit=10, budget=100) == ([1, 2], True)
    assert take_page(iter([1, 2]), lambda n: 50, limit=10, budget=100) == ([1, 2], False)
    assert take_page(iter([]), lambda n: 1, limit=10) == ([], False)


def test_the_first_entry_always_comes_and_nothing_past_the_next_is_read():
    read = []

    def entries():
        for n in range(100):
            read.append(n)
            yield n

    assert take_page(entries(), lambda n: 500, limit=10, budget=100) == ([0], True)
    assert read == [0, 1]


def test_json_size_counts_utf8_bytes_of_compact_json():
    assert json_size({"a": "é"}) == len('{"a":"é"}'.encode())
