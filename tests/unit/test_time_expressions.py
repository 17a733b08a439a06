"""`core.time_expressions`: the interval a statement's own words give it."""

from __future__ import annotations

from datetime import datetime, timezone

import pytest

from memsvc.core.time_expressions import validity

SAID = datetime(2026, 11, 27, 15, 30, tzinfo=timezone.utc)  # a Friday


def day(y: int, m: int, d: int) -> datetime:
    return datetime(y, m, d, tzinfo=timezone.utc)


@pytest.mark.parametrize(("text", "expected"), [
    ("User lives in Berlin since March", (day(2026, 3, 1), None)),
    ("User has been vegan since December", (day(2025, 12, 1), None)),  # the latest December not after
    ("User works at Siemens since 2019", (day(2019, 1, 1), None)),
    ("User is on leave since yesterday", (day(2026, 11, 26), None)),
    ("User is in Lisbon since March 3rd", (day(2026, 3, 3), None)),
    ("User has lived here since 3 March 2021", (day(2021, 3, 3), None)),
    ("User is the team lead as of last month", (day(2026, 10, 1), None)),
    ("User is in the office until Friday", (None, day(2026, 12, 5))),  # the next Friday, all of it
    ("User is travelling until December 10th", (None, day(2026, 12, 11))),
    ("User is in Tokyo until March", (None, day(2027, 4, 1))),
    ("User worked at Google from 2019 to 2021", (day(2019, 1, 1), day(2022, 1, 1))),
    ("User lived in Rome between May 2020 and June 2021", (day(2020, 5, 1), day(2021, 7, 1))),
    ("User's passport is valid through 2030-06-30", (None, day(2030, 7, 1))),
    ("User is on leave from December 1st to December 20th", (day(2026, 12, 1), day(2026, 12, 21))),
    ("User is in Sydney from December to February", (day(2026, 12, 1), day(2027, 3, 1))),
    ("User worked at Google until March", (None, day(2026, 4, 1))),  # told in the past: the last March
    ("User lived in Rome from June to August", (day(2026, 6, 1), day(2026, 9, 1))),
])
def test_the_words_that_bound_a_state(text, expected):
    assert validity(text, SAID) == expected


@pytest.mark.parametrize("text", [
    "User was born in 1990",  # dates an event: the fact holds
    "User moved to Berlin last year",
    "User likes March best",
    "User prefers window seats",
    "User stayed from 2022 to 2020",  # an empty interval says nothing
    "User is here until the 31st of February",  # no such day
    "User works Monday through Friday",  # a schedule
    "User works from Monday to Friday",
    "User takes Spanish from January to December each year",
    "User worked there until Friday",  # which Friday, told in the past, is anyone's guess
])
def test_what_dates_an_event_or_says_nothing(text):
    assert validity(text, SAID) == (None, None)


def test_linear_on_adversarial_text():
    assert validity("since " * 20000 + "since March", SAID) == (day(2026, 3, 1), None)
    assert validity("from 2020 " * 20000, SAID) == (None, None)
    assert validity("x" * 200_000, SAID) == (None, None)
