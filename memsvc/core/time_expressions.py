"""When a stated fact holds, from the words that say so (issue 25): "since March", "until Friday",
"from May to July", "between 2019 and 2021", "as of last month". Pure.

`validity(text, said_at)` reads the first such expression in a statement, relative to when it was
said (UTC), and answers the interval it names: `valid_from` inclusive, `valid_to` exclusive, either
open (None). Days are whole UTC days; a month or a year starts on its first day. A bare month or
weekday is the latest one not after `said_at` after "since"; after "until", the first one not
before it, or the latest one not after it in a statement told in the past tense ("I worked there
until March"). A range's start is this year's (the last one, in the past tense) and its end the
first of its name not before the start ("from December to February" spans the new year).
Schedules are no interval: "every Monday", "Monday through Friday", "weekdays". Nothing
recognised: (None, None).

Only the words that bound a state are read. "In 2025" or "last year" date an event as often as
a state ("I was born in 1990", "I moved to Berlin last year": the fact still holds), and reading
them as an interval would end facts that are still true; so they are left alone. Linear in the
text: one pass of a regex with bounded, non-nested repetition.
"""

from __future__ import annotations

import functools
import re
from datetime import date, datetime, timedelta, timezone

from memsvc.core.calendar_days import MONTHS, add_months, midnight

__all__ = ["validity"]

_WEEKDAYS = {name: n for n, names in enumerate(
    ["monday mon", "tuesday tue tues", "wednesday wed", "thursday thu thurs", "friday fri", "saturday sat",
     "sunday sun"]) for name in names.split()}
_MONTH = "|".join(sorted(MONTHS, key=len, reverse=True))
_WEEKDAY = "|".join(sorted(_WEEKDAYS, key=len, reverse=True))
# One point in time: "March 3rd", "3 March", "March 2024", "March", "2024", "Friday", "last year",
# "last month", "yesterday", "today", "tomorrow", "2024-03-01".
_POINT = (rf"(?:\d{{4}}-\d{{2}}-\d{{2}}|(?:{_MONTH})\.? \d{{1,2}}(?:st|nd|rd|th)?(?:,? \d{{4}})?|"
          rf"\d{{1,2}}(?:st|nd|rd|th)? (?:of )?(?:{_MONTH})(?:,? \d{{4}})?|(?:{_MONTH})(?: \d{{4}})?|"
          rf"(?:19|20)\d{{2}}|(?:next |last |this )?(?:{_WEEKDAY})|(?:last|this|next) (?:year|month|week)|"
          rf"yesterday|today|tomorrow)")
_EXPRESSION = (
    rf"\b(?:(?P<between>from|between) (?P<a>{_POINT}) (?:to|until|till|and) (?P<b>{_POINT})|"
    rf"(?P<since>since|starting|as of) (?P<s>{_POINT})|(?P<until>until|till|through) (?P<u>{_POINT}))\b")


def validity(text: str, said_at: datetime) -> tuple[datetime | None, datetime | None]:
    """The interval the first time expression of `text` names (see the module's doc)."""
    expression, recurring, past = _patterns()
    m = expression.search(text)
    if m is None or recurring.search(text):
        return None, None  # "every Monday", "Monday through Friday": a schedule, not an interval
    today = said_at.astimezone(timezone.utc).date()
    # Told in the past tense ("I worked there until March"), a bare month or weekday is the last
    # one, not the next.
    ahead = "past" if past.search(text) else "future"
    if m.group("between"):
        if _weekday(m.group("a")) or _weekday(m.group("b")):
            return None, None
        start = _span(m.group("a"), today, "past" if ahead == "past" else "nearest")
        # The end is the first of its name not before the start: "December to February" spans a new year.
        end = _span(m.group("b"), start[0], "future") if start else None
        if start is None or end is None or end[1] <= start[0]:
            return None, None
        return midnight(start[0]), midnight(end[1])
    if m.group("since"):
        span = _span(m.group("s"), today, "past")
        return (midnight(span[0]), None) if span else (None, None)
    if _weekday(m.group("u")) and ahead == "past":
        return None, None
    span = _span(m.group("u"), today, ahead)
    return (None, midnight(span[1])) if span else (None, None)


@functools.cache
def _patterns() -> tuple[re.Pattern[str], re.Pattern[str], re.Pattern[str]]:
    """Compiled on first use, not at import: the API's cold start imports this module, and most
    of its requests never extract."""
    return tuple(re.compile(p, re.IGNORECASE) for p in (_EXPRESSION, _RECURRING, _PAST))  # type: ignore[return-value]


def _weekday(point: str) -> bool:
    return point.lower().split()[-1] in _WEEKDAYS


def _span(point: str, today: date, direction: str) -> tuple[date, date] | None:
    """The days [first, after last) `point` names, relative to `today`."""
    p = point.lower().strip().rstrip(".")
    if re.fullmatch(r"\d{4}-\d{2}-\d{2}", p):
        try:
            day = date.fromisoformat(p)
        except ValueError:
            return None
        return day, day + timedelta(days=1)
    if re.fullmatch(r"(?:19|20)\d{2}", p):
        year = int(p)
        return date(year, 1, 1), date(year + 1, 1, 1)
    relative = {"yesterday": -1, "today": 0, "tomorrow": 1}
    if p in relative:
        day = today + timedelta(days=relative[p])
        return day, day + timedelta(days=1)
    m = re.fullmatch(r"(last|this|next) (year|month|week)", p)
    if m:
        step = {"last": -1, "this": 0, "next": 1}[m.group(1)]
        if m.group(2) == "year":
            return date(today.year + step, 1, 1), date(today.year + step + 1, 1, 1)
        if m.group(2) == "month":
            first = add_months(date(today.year, today.month, 1), step)
            return first, add_months(first, 1)
        monday = today - timedelta(days=today.weekday()) + timedelta(weeks=step)
        return monday, monday + timedelta(days=7)
    m = re.fullmatch(rf"(?:(next|last|this) )?({_WEEKDAY})", p)
    if m:
        target = _WEEKDAYS[m.group(2)]
        ahead = (target - today.weekday()) % 7
        if m.group(1) == "next" or (m.group(1) is None and direction == "future"):
            day = today + timedelta(days=ahead or 7)
        elif m.group(1) == "this":
            day = today + timedelta(days=ahead)
        else:  # last, or a bare weekday looking back
            day = today - timedelta(days=(today.weekday() - target) % 7 or 7)
        return day, day + timedelta(days=1)
    return _month_or_day(p, today, direction)


def _month_or_day(p: str, today: date, direction: str) -> tuple[date, date] | None:
    m = (re.fullmatch(rf"({_MONTH}) (\d{{1,2}})(?:st|nd|rd|th)?(?:,? (\d{{4}}))?", p)
         or re.fullmatch(rf"(\d{{1,2}})(?:st|nd|rd|th)? (?:of )?({_MONTH})(?:,? (\d{{4}}))?", p))
    if m:
        month_word, day_text = (m.group(1), m.group(2)) if not m.group(1).isdigit() else (m.group(2), m.group(1))
        month, day_of_month = MONTHS[month_word], int(day_text)
        year = int(m.group(3)) if m.group(3) else _year_of(month, today, direction, day_of_month)
        try:
            day = date(year, month, day_of_month)
        except ValueError:
            return None
        return day, day + timedelta(days=1)
    m = re.fullmatch(rf"({_MONTH})(?: (\d{{4}}))?", p)
    if m:
        month = MONTHS[m.group(1)]
        year = int(m.group(2)) if m.group(2) else _year_of(month, today, direction, 1)
        first = date(year, month, 1)
        return first, add_months(first, 1)
    return None


_RECURRING = (r"\b(?:every|each|weekly|daily|weekdays|weekends|(?:" + _WEEKDAY + r")s)\b|"
              r"\b(?:" + _WEEKDAY + r") (?:through|to|till|until|-) (?:" + _WEEKDAY + r")\b")
_PAST = r"\b(?:was|were|had|did|used to|worked|lived|stayed|studied|owned|ran|led|taught|kept)\b"


def _year_of(month: int, today: date, direction: str, day: int) -> int:
    """The year of a month (and day) named without one: the latest not after today looking back,
    the first not before it looking ahead, this year's for the nearest."""
    if direction == "nearest":
        return today.year
    if direction == "past":
        this_year = (month, day) <= (today.month, today.day)
    else:
        this_year = (month, day) >= (today.month, today.day)
    if this_year:
        return today.year
    return today.year - 1 if direction == "past" else today.year + 1


