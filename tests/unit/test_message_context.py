"""`core.message_context`: which items are session messages, and the texts a message is indexed as."""

from __future__ import annotations

from datetime import datetime, timezone

import pytest

from memsvc.core.message_context import (MESSAGE_FIELD, PREVIOUS_TURN_CHARS, TURN_FIELD, Turn, is_session_message,
                                         spoken_on, turn_of, turn_texts)

AT = datetime(2024, 2, 29, 23, 59, tzinfo=timezone.utc)


@pytest.mark.parametrize("namespace, key, expected", [
    (("user", "u", "sessions", "s", "messages"), "000000000001", True),
    (("user", "u", "sessions", "s", "messages"), "summary", False),
    (("user", "u", "sessions", "s", "messages"), "1", False),
    (("user", "u", "sessions", "s", "messages"), "٠٠٠٠٠٠٠٠٠٠٠١", False),  # Arabic-Indic digits: no seq
    (("user", "u", "sessions", "s"), "000000000001", False),
    (("user", "u", "notes", "s", "messages"), "000000000001", False),
    (("user", "u", "sessions", "s", "messages", "x"), "000000000001", False),
])
def test_a_session_message_is_where_and_under_what_key_an_append_puts_it(namespace, key, expected):
    assert is_session_message(namespace, key) is expected


@pytest.mark.parametrize("value, expected", [
    ({"role": "user", "content": "hi", "name": "Maria"}, Turn("Maria", "hi")),
    ({"role": "assistant", "content": "hi"}, Turn("assistant", "hi")),
    ({"role": "user", "content": "hi", "name": "  "}, Turn("user", "hi")),
    ({"role": "user", "content": "hi", "name": 5}, Turn("user", "hi")),
    ({"content": "hi"}, None),
    ({"role": "user", "content": ["hi"]}, None),
    ("hi", None),
])
def test_the_turn_a_value_holds(value, expected):
    assert turn_of(value) == expected


def test_a_date_in_words_and_iso():
    assert spoken_on(AT) == "29 February 2024 (2024-02-29)"
    assert spoken_on(datetime(2023, 5, 8, tzinfo=timezone.utc)) == "8 May 2023 (2023-05-08)"


def test_the_texts_of_a_first_turn_and_of_a_reply():
    assert turn_texts(Turn("Dev", "Did you adopt?"), AT, None) == [
        (MESSAGE_FIELD, '(29 February 2024) Dev said, "Did you adopt?"'),
        (TURN_FIELD, 'On 29 February 2024 (2024-02-29), Dev said, "Did you adopt?"')]
    assert turn_texts(Turn("Maria", "Yes!"), AT, Turn("Dev", "Did\n  you   adopt?")) == [
        (MESSAGE_FIELD, '(29 February 2024) Maria said, "Yes!"'),
        (TURN_FIELD, 'On 29 February 2024 (2024-02-29), in reply to "Did you adopt?", Maria said, "Yes!"')]


@pytest.mark.parametrize("previous, quoted", [
    ("x" * PREVIOUS_TURN_CHARS, "x" * PREVIOUS_TURN_CHARS),  # at the bound: whole
    ("x" * 1000, "x" * PREVIOUS_TURN_CHARS + "…"),  # one long word: cut inside it
    ("abcd " * 100, ("abcd " * 60).strip() + "…"),  # cut at the last word that fits
])
def test_the_turn_before_is_cut_to_its_bound(previous, quoted):
    [_, (_, text)] = turn_texts(Turn("Maria", "ok"), AT, Turn("Dev", previous))
    assert text == f'On 29 February 2024 (2024-02-29), in reply to "{quoted}", Maria said, "ok"'
