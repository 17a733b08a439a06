"""`core.query_time`: the time a question names (issue 25), and `core.time_boost`'s use of it."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest

from memsvc.core import query_time
from memsvc.core.query_time import MAX_TOKENS, NamedTime, named_time
from memsvc.core.time_boost import boosted, time_boost
from memsvc.core.validity import interval

NOW = datetime(2026, 11, 27, 15, 30, tzinfo=timezone.utc)  # a Friday


def day(y: int, m: int, d: int) -> datetime:
    return datetime(y, m, d, tzinfo=timezone.utc)


def span(a: datetime | None, b: datetime | None) -> NamedTime:
    return NamedTime(start=a, end=b)


def months(*ms: int, on: int | None = None) -> NamedTime:
    return NamedTime(months=frozenset(ms), day=on)


@pytest.mark.parametrize(("query", "expected"), [
    # a month or a season without a year: those months of any year
    ("What trip did Fatima talk about in July?", months(7)),
    ("What changed in Amara's career in December?", months(12)),
    ("what did I do in may", months(5)),
    ("What happened in May I wonder", months(5)),
    ("anything during March?", months(3)),
    ("notes from around Jan", months(1)),
    ("in early May", months(5)),
    ("what did we do in the summer", months(6, 7, 8)),
    ("what did I do in the fall", months(9, 10, 11)),
    ("over the winter", months(12, 1, 2)),
    ("between March and May", months(3, 4, 5)),
    ("from December to February", months(12, 1, 2)),
    ("on May 8", months(5, on=8)),
    ("on the 29th of February", months(2, on=29)),
    ("on 29 February", months(2, on=29)),
    # a month, a day, a season or a year with its year
    ("in May 2023", span(day(2023, 5, 1), day(2023, 6, 1))),
    ("What did I buy in July of 2023?", span(day(2023, 7, 1), day(2023, 8, 1))),
    ("around July 2023", span(day(2023, 7, 1), day(2023, 8, 1))),
    ("May 2023 trips", span(day(2023, 5, 1), day(2023, 6, 1))),
    ("in 2025", span(day(2025, 1, 1), day(2026, 1, 1))),
    ("during 2019 and after", span(day(2019, 1, 1), day(2020, 1, 1))),
    ("in late 2023", span(day(2023, 1, 1), day(2024, 1, 1))),
    ("on 8 May 2023", span(day(2023, 5, 8), day(2023, 5, 9))),
    ("on the 8th of May 2023", span(day(2023, 5, 8), day(2023, 5, 9))),
    ("May 8th, 2023", span(day(2023, 5, 8), day(2023, 5, 9))),
    ("on 2023-05-08", span(day(2023, 5, 8), day(2023, 5, 9))),
    ("summer of 2023", span(day(2023, 6, 1), day(2023, 9, 1))),
    ("in the summer of 2023", span(day(2023, 6, 1), day(2023, 9, 1))),
    ("winter 2023", span(day(2022, 12, 1), day(2023, 3, 1))),  # its January's year
    ("from 2019 to 2021", span(day(2019, 1, 1), day(2022, 1, 1))),
    ("between May 2020 and June 2021", span(day(2020, 5, 1), day(2021, 7, 1))),
    ("from March to May 2023", span(day(2023, 3, 1), day(2023, 6, 1))),
    # relative to now
    ("What did I decide yesterday?", span(day(2026, 11, 26), day(2026, 11, 27))),
    ("what's on today", span(day(2026, 11, 27), day(2026, 11, 28))),
    ("what did I say last week", span(day(2026, 11, 16), day(2026, 11, 23))),
    ("earlier this week", span(day(2026, 11, 23), day(2026, 11, 30))),
    ("last weekend", span(day(2026, 11, 21), day(2026, 11, 23))),
    ("last month", span(day(2026, 10, 1), day(2026, 11, 1))),
    ("earlier this year", span(day(2026, 1, 1), day(2027, 1, 1))),
    ("last year", span(day(2025, 1, 1), day(2026, 1, 1))),
    ("next month", span(day(2026, 12, 1), day(2027, 1, 1))),
    ("Where did we go last summer?", span(day(2026, 6, 1), day(2026, 9, 1))),
    ("this summer", span(day(2026, 6, 1), day(2026, 9, 1))),
    ("last winter", span(day(2025, 12, 1), day(2026, 3, 1))),
    ("this winter", span(day(2026, 12, 1), day(2027, 3, 1))),  # asked in November: the coming one
    ("last July", span(day(2026, 7, 1), day(2026, 8, 1))),
    ("last November", span(day(2025, 11, 1), day(2025, 12, 1))),  # this one has not ended
    ("next March", span(day(2027, 3, 1), day(2027, 4, 1))),
    ("last Monday", span(day(2026, 11, 23), day(2026, 11, 24))),
    ("on Friday", span(day(2026, 11, 20), day(2026, 11, 21))),  # asked on a Friday: a week ago
    ("What did Tom say Wednesday?", span(day(2026, 11, 25), day(2026, 11, 26))),
    ("3 days ago", span(day(2026, 11, 24), day(2026, 11, 25))),
    ("two weeks ago", span(day(2026, 11, 9), day(2026, 11, 16))),
    ("a month ago", span(day(2026, 10, 1), day(2026, 11, 1))),
    ("a year ago", span(day(2025, 1, 1), day(2026, 1, 1))),
    ("in the past 3 days", span(day(2026, 11, 25), day(2026, 11, 28))),
    ("over the past week", span(day(2026, 11, 21), day(2026, 11, 28))),
    ("within the last 2 months", span(day(2026, 9, 27), day(2026, 11, 28))),
    ("the last 2 weeks", span(day(2026, 11, 14), day(2026, 11, 28))),
    # one side of a time
    ("before May 2024", span(None, day(2024, 5, 1))),
    ("prior to 2020", span(None, day(2020, 1, 1))),
    ("after 2020", span(day(2021, 1, 1), None)),
    ("since March", span(day(2026, 3, 1), None)),  # the latest March not after now
    ("since last month", span(day(2026, 10, 1), None)),
    ("before December", span(None, day(2025, 12, 1))),
    ("until June 2023", span(None, day(2023, 7, 1))),
    ("after the summer", span(day(2026, 9, 1), None)),
    # the first expression that names a time wins
    ("what did I do before the move in 2023", span(day(2023, 1, 1), day(2024, 1, 1))),
    ("in Berlin in May", months(5)),
])
def test_the_time_a_question_names(query, expected):
    assert named_time(query, NOW) == expected


@pytest.mark.parametrize("query", [
    "May I ask what my editor is?",  # a modal, not a month
    "March forward with the plan",
    "What summer dress did I buy?",  # a season word, not a time
    "a summer dress",
    "Where did Fatima go camping, and what plan did Fatima make after it?",
    "What does Kwame do with clay each week?",  # a schedule
    "every Monday",
    "live jazz concerts on friday evenings",
    "what do I do on Mondays",
    "my 2025 goals",  # a bare number: a year only after a preposition
    "over 2000 steps a day",
    "in 5 days",  # the future's duration
    "in 1500 words",
    "before the move",  # no date to resolve
    "with Jan and Dec",
    "in jan's house",
    "last time we talked",
    "what did I say",
    "the 31st of June",  # no such day
    "on June 31",
    "from 2022 to 2020",  # empty
    "",
])
def test_what_names_no_time(query):
    assert named_time(query, NOW) is None


def test_linear_and_bounded_on_adversarial_queries(monkeypatch):
    """Steps counted, never time: the scan reads at most MAX_TOKENS tokens, and each token starts
    a bounded number of attempts at a time (a range tries two)."""
    calls = []
    inner = query_time._time
    monkeypatch.setattr(query_time, "_time", lambda *a, **kw: calls.append(1) or inner(*a, **kw))
    for query in ["in " * 5000, "between March and " * 3000, "last " * 8000, "1 " * 8000,
                  "from 2020 to " * 2000 + "x", "in the " * 8000 + "summer", "a" * 200_000, "May " * 8000,
                  "between " * 8000, "prior to " * 8000]:
        calls.clear()
        named_time(query, NOW)
        assert len(calls) <= 2 * MAX_TOKENS
    # Only the first words are read: a time named past them is the document's, not the question's.
    assert named_time("x " * 300 + "in July", NOW) is None
    assert named_time("x " * 10 + "in July", NOW) == months(7)


def test_overlap_with_a_named_time():
    july = months(7)
    assert july.overlaps(day(2023, 7, 8), day(2023, 7, 9))
    assert july.overlaps(day(2019, 7, 31), None)  # an instant
    assert not july.overlaps(day(2023, 8, 1), day(2023, 8, 2))  # half open
    assert july.overlaps(day(2023, 6, 20), day(2023, 7, 2))
    assert not july.overlaps(day(2023, 8, 1), day(2024, 6, 30))
    assert july.overlaps(day(2020, 1, 1), day(2022, 1, 1))  # a year or more holds every month
    winter = months(12, 1, 2)
    assert winter.overlaps(day(2023, 12, 31), None) and winter.overlaps(day(2024, 2, 1), None)
    assert not winter.overlaps(day(2024, 3, 1), None)
    may8 = months(5, on=8)
    assert may8.overlaps(day(2021, 5, 8, ), None) and not may8.overlaps(day(2021, 5, 9), None)
    assert may8.overlaps(day(2021, 5, 1), day(2021, 5, 10)) and not may8.overlaps(day(2021, 5, 9), day(2022, 5, 8))
    before = span(None, day(2024, 5, 1))
    assert before.overlaps(day(2024, 4, 30), None) and not before.overlaps(day(2024, 5, 1), None)
    since = span(day(2026, 3, 1), None)
    assert since.overlaps(day(2020, 1, 1), day(2026, 3, 2)) and not since.overlaps(day(2020, 1, 1), day(2026, 3, 1))


LAST = datetime.max.replace(tzinfo=timezone.utc)  # 9999-12-31T23:59:59.999999Z, a valid_from anyone may store


def test_a_time_the_calendar_cannot_hold_is_not_read_and_never_raises():
    """A day whose end is in year 10000, or a relative time past year 1 or 9999, names no time
    (the scan goes on to the next expression); no query and no `now` makes the reading raise."""
    assert named_time("what happened on 9999-12-31", NOW) is None
    assert named_time("since 9999-12-31", NOW) is None
    assert named_time("on 9999-12-31 or in July", NOW) == months(7)
    assert named_time("on 9999-12-30", NOW) == span(day(9999, 12, 30), day(9999, 12, 31))
    assert named_time("next year", datetime(9999, 6, 1, tzinfo=timezone.utc)) is None
    assert named_time("this month", datetime(9999, 12, 30, tzinfo=timezone.utc)) is None  # it ends in 10000
    assert named_time("3 years ago", datetime(2, 1, 1, tzinfo=timezone.utc)) is None
    words = ("in on before after since until prior to between and from the last this next past yesterday today "
             "week month year years days ago summer winter dec feb monday of 29 31st 2099 1900 a 9999-12-31 "
             "0001-01-01").split()
    nows = [NOW, datetime(9999, 12, 30, tzinfo=timezone.utc), datetime(1, 1, 2, tzinfo=timezone.utc)]
    for now in nows:
        for a in words:
            for b in words:
                for c in ("", " dec", " 9999-12-31", " year"):
                    named_time(f"{a} {b}{c}", now)


def test_an_instant_at_the_end_of_the_calendar_meets_a_time_without_raising():
    """`overlaps` never steps past the instant it is given: a stored valid_from of 9999-12-31T23:59:59.999999Z
    is the instant it names, met by what contains it and by nothing else."""
    assert months(12).overlaps(LAST, None) and months(12, on=31).overlaps(LAST, None)
    assert not months(7).overlaps(LAST, None) and not months(12, on=30).overlaps(LAST, None)
    assert months(12).overlaps(day(9999, 11, 30), LAST) and months(6, 7, 8).overlaps(day(9999, 1, 1), LAST)
    assert span(day(9999, 12, 31), None).overlaps(LAST, None) and span(None, None).overlaps(LAST, None)
    assert not span(day(2025, 1, 1), day(2026, 1, 1)).overlaps(LAST, None)
    assert not span(None, day(9999, 12, 31)).overlaps(LAST, None)
    assert span(None, day(9999, 12, 31)).overlaps(day(9999, 12, 30), LAST)
    boost = time_boost("road trip in December", NOW)
    assert boost is not None and boost.matches({"valid_from": "9999-12-31T23:59:59.999999Z"}, typed=False,
                                               created_at=CREATED, updated_at=UPDATED)
    assert time_boost("road trip in July", NOW).matches(  # type: ignore[union-attr]
        {"valid_from": "9999-12-31T23:59:59.999999Z"}, typed=False, created_at=CREATED, updated_at=UPDATED) is False


CREATED, UPDATED = day(2025, 1, 1), day(2025, 6, 1)


def test_an_items_time_is_its_valid_interval_and_an_open_one_counts_from_its_start():
    assert interval({}, typed=False, created_at=CREATED, updated_at=UPDATED) == (CREATED, None)
    stated = {"valid_from": "2023-07-08T00:00:00Z", "valid_to": "2023-07-09T00:00:00Z"}
    assert interval(stated, typed=False, created_at=CREATED, updated_at=UPDATED) == (day(2023, 7, 8), day(2023, 7, 9))
    assert interval({"valid_from": "2023-07-08T00:00:00Z"}, typed=True, created_at=CREATED,
                     updated_at=UPDATED) == (day(2023, 7, 8), None)
    superseded = {"content": "c", "tags": ["superseded"]}
    assert interval(superseded, typed=True, created_at=CREATED, updated_at=UPDATED) == (CREATED, UPDATED)
    assert interval(superseded, typed=False, created_at=CREATED, updated_at=UPDATED) == (CREATED, None)
    assert interval({"valid_from": "not a time"}, typed=False, created_at=CREATED, updated_at=UPDATED) == (
        CREATED, None)


def test_the_boost_keeps_scores_on_0_to_1_and_their_order():
    assert boosted(0.0, 0.5) == 0.0 and boosted(1.0, 0.5) == 1.0 and boosted(-0.2, 0.5) == -0.2
    scores = [i / 100 for i in range(1, 100)]
    lifted = [boosted(s, 0.5) for s in scores]
    assert all(0 < a < b < 1 for a, b in zip(lifted, lifted[1:]))
    assert all(b > s for s, b in zip(scores, lifted))
    assert boosted(0.25, 0.5) == pytest.approx(0.5)


def test_a_query_without_a_time_or_opted_out_has_no_boost():
    assert time_boost("What trip did Fatima talk about?", NOW) is None
    assert time_boost("What trip did Fatima talk about in July?", NOW, enabled=False) is None
    assert time_boost(None, NOW) is None
    boost = time_boost("What trip did Fatima talk about in July?", NOW)
    assert boost is not None and boost.named == months(7)
    in_july = {"content": "x", "valid_from": "2023-07-08T00:00:00Z", "valid_to": "2023-07-09T00:00:00Z"}
    assert boost.matches(in_july, typed=True, created_at=CREATED, updated_at=UPDATED)
    assert not boost.matches({"content": "x"}, typed=True, created_at=CREATED, updated_at=UPDATED)
    assert boost.matches({"content": "x"}, typed=True, created_at=CREATED + timedelta(days=200), updated_at=UPDATED)
