"""The time a question names (issue 25): "in July", "in May 2023", "in 2025", "last summer",
"yesterday", "last week", "3 days ago", "before March 2024", "since 2020", "between March and
May". Pure.

`named_time(query, now)` answers the first such expression of a query as a `NamedTime`, or None:
- an interval `[start, end)` (either end open: "before 2024", "since March 2023"), from a year,
  a month or a day with its year, a season with its year, or a phrase relative to `now` (UTC):
  "yesterday", "today", "last/this week|month|year", "last summer", "last July", "last Monday",
  "N days|weeks|months|years ago" (that calendar day, week, month or year), "the past N
  days|weeks|months" (up to now, today included);
- or a recurring time: a month or season named without a year ("in July", "in the summer",
  "between March and May") is those months of *any* year. Memories span years and a question
  rarely says which: the July of a conversation in 2023 is the July meant in 2026. (A
  preference for the latest is left to the ranking's ties, which go to the newer memory.) A
  day without a year ("on May 8") is that day of any year.
- "before X" ends where X starts, "after X" starts where X ends, "since X" starts where X
  starts, "until X" ends where X ends. After these a recurring month is the latest one not
  after `now` ("before July": before this year's July, or last year's).

Weeks start on Monday; seasons are the meteorological ones of the northern hemisphere (spring:
March to May, summer: June to August, autumn or fall: September to November, winter: December
to February); a winter with a year is the one whose January is in that year ("winter 2023":
December 2022 to February 2023).

Only words in a time's place count: a month or a season needs a preposition or "last/this/next"
in front ("in May", "last summer"), or a day or a year beside it ("May 2023", "8 May"), so "May I
...", "March forward", "a summer dress" and "after it" name no time; a bare year needs a
preposition ("in 2025", not "2025 goals"). A schedule ("every Monday", "each week") is no time.
An expression that names nothing resolvable ("before the move"), or a time the calendar cannot
hold (years 1 to 9999 with its end: "on 9999-12-31"), is passed over for the next.

Linear in the query: one pass of a tokenizing regex without nested repetition, then a scan of
the first `MAX_TOKENS` tokens, each looked at a bounded number of times.
"""

from __future__ import annotations

import functools
import itertools
import re
from calendar import monthrange
from dataclasses import dataclass
from datetime import date, datetime, timedelta, timezone

from memsvc.core.calendar_days import MONTHS, add_months, midnight

__all__ = ["NamedTime", "named_time", "read_time", "MAX_TOKENS"]

MAX_TOKENS = 256  # a question's first words; a longer query is a document, and its times are its own

_TIMES_OF_DAY_PLURAL = frozenset({"mornings", "afternoons", "evenings", "nights"})
_WEEKDAYS = {name: n for n, name in enumerate(
    ["monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday"])}
_SEASONS = {"spring": 3, "summer": 6, "autumn": 9, "fall": 9, "winter": 12}  # the first month of each
_NUMBERS = {"a": 1, "an": 1, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7,
            "eight": 8, "nine": 9, "ten": 10, "eleven": 11, "twelve": 12}
_UNITS = {"day": "day", "days": "day", "week": "week", "weeks": "week", "month": "month", "months": "month",
          "year": "year", "years": "year"}
_IN = {"in", "during", "throughout", "within", "on", "over", "around", "at"}  # the time itself
_BOUNDS = {"before", "after", "since", "until", "till", "prior"}  # one side of the time
_SCHEDULE = {"every", "each", "per"}


@dataclass(frozen=True)
class NamedTime:
    """What a question names: an interval `[start, end)` (UTC, either end open), or, when
    `months` is set, those months (`day`: that day of them) of any year."""

    start: datetime | None = None
    end: datetime | None = None
    months: frozenset[int] = frozenset()
    day: int | None = None

    @property
    def recurring(self) -> bool:
        return bool(self.months)

    def overlaps(self, start: datetime, end: datetime | None) -> bool:
        """Whether a time `[start, end)` (`end` None: the instant `start`) meets this one. Never
        raises: no arithmetic steps past the instant given (a stored `valid_from` may be the last
        representable one), and a time that cannot be put in UTC meets nothing."""
        if end is not None and end <= start:
            end = None
        if not self.recurring:
            # An instant is `[start, start + 1 µs)`: it meets an interval that has started by it.
            if self.start is not None and not (start >= self.start if end is None else end > self.start):
                return False
            return self.end is None or start < self.end
        if end is not None and end - start >= timedelta(days=366):
            return True
        try:
            first = start.astimezone(timezone.utc).date()
            last = first if end is None else (end - timedelta(microseconds=1)).astimezone(timezone.utc).date()
        except OverflowError:  # an offset that moves it past year 9999 or before year 1
            return False
        if self.day is not None:
            for year in range(first.year, last.year + 1):
                try:
                    day = date(year, next(iter(self.months)), self.day)
                except ValueError:
                    continue
                if first <= day <= last:
                    return True
            return False
        # Month by month, counted as year * 12 + month (no date past the last: December 9999 ends
        # the calendar); at most 13 months, the interval is under a year.
        months = range(first.year * 12 + first.month - 1, last.year * 12 + last.month)
        return any(index % 12 + 1 in self.months for index in months)


def named_time(query: str, now: datetime) -> NamedTime | None:
    """The time the first time expression of `query` names (see the module's doc), or None."""
    found = read_time(query, now)
    return found[0] if found is not None else None


def read_time(query: str, now: datetime) -> tuple[NamedTime, int, int] | None:
    """`named_time`, and where its expression is in `query`: `query[start:end]` ("in July")."""
    matches = list(itertools.islice(_tokens().finditer(query), MAX_TOKENS))
    tokens = [m.group().lower() for m in matches]
    today = now.astimezone(timezone.utc).date()
    for n in range(len(tokens)):
        try:
            found = _at(tokens, n, today)
        except (OverflowError, ValueError):
            # A time the calendar cannot hold ("on 9999-12-31": its end is in year 10000, "3 years
            # ago" in year 2) is not read as one: the scan goes on to the next expression.
            continue
        if found is not None:
            return found[0], matches[n].start(), matches[found[1] - 1].end()
    return None


@functools.cache
def _tokens() -> re.Pattern[str]:
    """Compiled on first use, not at import (the API's cold start imports this module)."""
    return re.compile(r"\d{4}-\d{2}-\d{2}|\d{1,4}(?:st|nd|rd|th)?|[A-Za-z]+")


# -- the scan: each returns a NamedTime or None, and reads a bounded number of tokens ---------


def _at(t: list[str], n: int, today: date) -> tuple[NamedTime, int] | None:
    """The time an expression starting at token `n` names, and the token after it."""
    word = t[n]
    previous = t[n - 1] if n else ""
    if previous in _SCHEDULE:
        return None
    if word in _IN:
        if word in ("over", "within") and _get(t, n + 1) not in ("the", "last", "this", "next", "past"):
            return None  # "over 2000 steps"
        return _time(t, n + 1, today)
    if word in _BOUNDS:
        start = n + 2 if word == "prior" and _get(t, n + 1) == "to" else n + 1
        if word == "prior" and start == n + 1:
            return None
        found = _time(t, start, today)
        bounded = _bounded("before" if word == "prior" else word, found[0], today) if found else None
        return (bounded, found[1]) if bounded is not None and found is not None else None
    if word in ("between", "from"):
        return _range(t, n, today)
    if word in ("last", "this", "next", "past", "yesterday", "today", "tonight") or word in _WEEKDAYS \
            or word in _NUMBERS or word[:1].isdigit() or word in MONTHS or word in _SEASONS:
        return _time(t, n, today, bare=True)
    return None


def _time(t: list[str], n: int, today: date, *, bare: bool = False) -> tuple[NamedTime, int] | None:
    """The time at token `n` and the token after it. `bare`: with no preposition in front, only
    what cannot be anything else (a relative phrase, a weekday, a month beside a day or a year)."""
    word = _get(t, n)
    if word == "the" and not bare:
        n, word = n + 1, _get(t, n + 1)
        if word in ("past", "last") and _get(t, n + 1) not in MONTHS and _get(t, n + 1) not in _SEASONS:
            return _past(t, n + 1, today)
    if word == "early" or word == "late" or word == "mid" or word == "earlier" or word == "later":
        if bare:
            return None
        n, word = n + 1, _get(t, n + 1)
        if word == "this":  # "earlier this year"
            return _relative(t, n, today)
    if word in ("yesterday", "today", "tonight"):
        day = today - timedelta(days=1) if word == "yesterday" else today
        return _days(day, 1), n + 1
    if word == "last" and _number(_get(t, n + 1)) is not None and _get(t, n + 2) in _UNITS:
        return _past(t, n + 1, today)  # "last 3 days"
    if word in ("last", "this", "next"):
        return _relative(t, n, today)
    if word == "past" and bare:
        return _past(t, n + 1, today)
    if len(word) == 10 and word[4] == "-":  # the tokenizer's yyyy-mm-dd
        try:
            return _days(date.fromisoformat(word), 1), n + 1
        except ValueError:
            return None
    if word in _WEEKDAYS:
        if _get(t, n + 1) in _TIMES_OF_DAY_PLURAL:  # "on friday evenings": a habit, not a day
            return None
        return _days(_latest_weekday(today, _WEEKDAYS[word]), 1), n + 1
    number = _number(word)
    if number is not None and _get(t, n + 1) in _UNITS and _get(t, n + 2) == "ago":
        return _ago(number, _UNITS[_get(t, n + 1)], today), n + 3
    if word[:1].isdigit():
        return _day_first(t, n, today, bare)
    if word in MONTHS:
        return _month_first(t, n, today, bare)
    if word in _SEASONS:
        return _season(t, n, bare)
    return None


def _relative(t: list[str], n: int, today: date) -> tuple[NamedTime, int] | None:
    """"last|this|next" + week, month, year, weekend, a season, a month or a weekday."""
    step = {"last": -1, "this": 0, "next": 1}[t[n]]
    word = _get(t, n + 1)
    if word == "week" or word == "weekend":
        monday = today - timedelta(days=today.weekday()) + timedelta(weeks=step)
        if word == "weekend":
            return _days(monday + timedelta(days=5), 2), n + 2
        return _days(monday, 7), n + 2
    if word == "month":
        first = add_months(date(today.year, today.month, 1), step)
        return _span(first, add_months(first, 1)), n + 2
    if word == "year":
        return _span(date(today.year + step, 1, 1), date(today.year + step + 1, 1, 1)), n + 2
    if word in _SEASONS:
        first_month = _SEASONS[word]
        return _occurrence(today, first_month, 3, step), n + 2
    if word in MONTHS:
        return _occurrence(today, MONTHS[word], 1, step), n + 2
    if word in _WEEKDAYS:
        target = _WEEKDAYS[word]
        if step < 0:
            day = _latest_weekday(today, target)
        else:
            monday = today - timedelta(days=today.weekday()) + timedelta(weeks=step)
            day = monday + timedelta(days=target)
        return _days(day, 1), n + 2
    return None


def _past(t: list[str], n: int, today: date) -> tuple[NamedTime, int] | None:
    """"(the) past|last [N] days|weeks|months|years": up to now, today included."""
    number = _number(_get(t, n))
    if number is not None and _get(t, n + 1) in _UNITS:
        unit, after = _UNITS[_get(t, n + 1)], n + 2
    elif _get(t, n) in _UNITS:
        number, unit, after = 1, _UNITS[_get(t, n)], n + 1
    else:
        return None
    end = today + timedelta(days=1)
    if unit in ("day", "week"):
        start = end - timedelta(days=number * (7 if unit == "week" else 1))
    else:
        start = add_months(date(today.year, today.month, 1), -number * (12 if unit == "year" else 1))
        start = start.replace(day=min(today.day, monthrange(start.year, start.month)[1]))
    return _span(start, end), after


def _ago(number: int, unit: str, today: date) -> NamedTime:
    """"N days|weeks|months|years ago": that calendar day, week, month or year."""
    if unit == "day":
        return _days(today - timedelta(days=number), 1)
    if unit == "week":
        monday = today - timedelta(days=today.weekday()) - timedelta(weeks=number)
        return _days(monday, 7)
    if unit == "month":
        first = add_months(date(today.year, today.month, 1), -number)
        return _span(first, add_months(first, 1))
    return _span(date(today.year - number, 1, 1), date(today.year - number + 1, 1, 1))


def _day_first(t: list[str], n: int, today: date, bare: bool) -> tuple[NamedTime, int] | None:
    """A year ("2025"), or a day and a month ("8 May", "8th of May 2023")."""
    word = t[n]
    digits = word.rstrip("stndrh")
    if len(digits) == 4 and digits == word and 1900 <= int(digits) <= 2099:
        if bare:
            return None
        year = int(digits)
        return _span(date(year, 1, 1), date(year + 1, 1, 1)), n + 1
    if len(digits) > 2:
        return None
    after = n + 1
    if _get(t, after) == "of":
        after += 1
    if _get(t, after) not in MONTHS:
        return None
    month = MONTHS[t[after]]
    year = _year(_get(t, after + 1))
    return _day(month, int(digits), year, after + (2 if year else 1))


def _month_first(t: list[str], n: int, today: date, bare: bool) -> tuple[NamedTime, int] | None:
    """"May", "May 2023", "May of 2023", "May 8", "May 8th, 2023"."""
    month = MONTHS[t[n]]
    following = _get(t, n + 1)
    if following == "of" and _year(_get(t, n + 2)):
        following, n = _get(t, n + 2), n + 1
    year = _year(following)
    if year:
        first = date(year, month, 1)
        return _span(first, add_months(first, 1)), n + 2
    digits = following.rstrip("stndrh")
    if following[:1].isdigit() and len(digits) <= 2 and digits.isdigit():
        year = _year(_get(t, n + 2))
        return _day(month, int(digits), year, n + (3 if year else 2))
    if bare or (len(t[n]) == 3 and t[n] != "may" and following and following not in _AFTER_MONTH):
        return None  # "mar", "jan" alone are more often a word or a name than a month
    return NamedTime(months=frozenset([month])), n + 1


_AFTER_MONTH = {"and", "or", "to", "until", "till", "through", "when", "while", "what", "did", "was"}


def _day(month: int, day_of_month: int, year: int | None, after: int) -> tuple[NamedTime, int] | None:
    if not 1 <= day_of_month <= 31:
        return None
    if year is None:
        if day_of_month > monthrange(2024, month)[1]:  # 2024: a leap year, so 29 February is a day
            return None
        return NamedTime(months=frozenset([month]), day=day_of_month), after
    try:
        return _days(date(year, month, day_of_month), 1), after
    except ValueError:
        return None


def _season(t: list[str], n: int, bare: bool) -> tuple[NamedTime, int] | None:
    """"summer", "summer 2023", "summer of 2023" (`bare`: only with its year)."""
    first_month = _SEASONS[t[n]]
    after = n + 1
    if _get(t, after) == "of" and _year(_get(t, after + 1)):
        after += 1
    year = _year(_get(t, after))
    if year is None:
        if bare:
            return None  # "a summer dress"
        return NamedTime(months=frozenset((first_month + k - 1) % 12 + 1 for k in range(3))), n + 1
    start_year = year - 1 if first_month == 12 else year  # winter 2023: its January is in 2023
    first = date(start_year, first_month, 1)
    return _span(first, add_months(first, 3)), after + 1


def _range(t: list[str], n: int, today: date) -> tuple[NamedTime, int] | None:
    """"between X and Y", "from X to|until|till|through Y": from X's start to Y's end. Two
    months (or seasons) without a year are the months from one to the other, of any year."""
    first = _time(t, n + 1, today)
    if first is None:
        return None
    link = _get(t, first[1])
    if (t[n] == "between" and link != "and") or (t[n] == "from" and link not in ("to", "until", "till", "through")):
        return None
    second = _time(t, first[1] + 1, today)
    if second is None:
        return None
    a, b = first[0], second[0]
    if a.recurring and b.recurring:
        if a.day is not None or b.day is not None:
            return None
        start, end = min(a.months, key=lambda m: (m - 1) % 12), max(b.months, key=lambda m: (m + 11) % 12)
        if len(a.months) == 3:  # a season: from its first month
            start = _season_start(a.months)
        if len(b.months) == 3:
            end = (_season_start(b.months) + 1) % 12 + 1
        return NamedTime(months=frozenset((start - 1 + k) % 12 + 1 for k in range((end - start) % 12 + 1))), second[1]
    if a.recurring and a.day is None and len(a.months) == 1 and b.start is not None:
        # "from March to May 2023": the first March not after the end's start
        month, year = next(iter(a.months)), b.start.year
        if month > b.start.month:
            year -= 1
        a = _span(date(year, month, 1), add_months(date(year, month, 1), 1))
    if a.recurring or b.recurring or a.start is None or b.end is None or b.end <= a.start:
        return None
    return NamedTime(start=a.start, end=b.end), second[1]


def _season_start(months: frozenset[int]) -> int:
    return next(m for m in months if (m - 2) % 12 + 1 not in months)


def _bounded(word: str, found: NamedTime, today: date) -> NamedTime | None:
    """"before|after|since|until X": one side of X (a recurring X: its latest not after today)."""
    if found.recurring:
        if found.day is not None or len(found.months) not in (1, 3):
            return None
        first_month = next(iter(found.months)) if len(found.months) == 1 else _season_start(found.months)
        found = _occurrence(today, first_month, len(found.months), 0, latest=True)
    if word == "before":
        return NamedTime(end=found.start) if found.start is not None else None
    if word == "after":
        return NamedTime(start=found.end) if found.end is not None else None
    if word == "since":
        return NamedTime(start=found.start) if found.start is not None else None
    return NamedTime(end=found.end) if found.end is not None else None  # until, till


# -- calendar arithmetic ---------------------------------------------------------------------


def _occurrence(today: date, first_month: int, months: int, step: int, *, latest: bool = False) -> NamedTime:
    """A month or a season (`months` long from `first_month`): the last one that ended before
    today (step -1), the one of this year (0; a winter: the one under way, else the coming one),
    the next one that starts after today (1); `latest`: the latest one that has started by today."""
    def start_in(year: int) -> date:
        return date(year - 1 if first_month == 12 and months == 3 else year, first_month, 1)

    year = today.year
    if step == 0 and months == 3 and first_month == 12 and today.month >= 3:
        year += 1  # this winter, asked before December: the one to come
    if latest:
        while start_in(year) > today:
            year -= 1
    elif step < 0:
        while add_months(start_in(year), months) > today:
            year -= 1
    elif step > 0:
        while start_in(year) <= today:
            year += 1
    first = start_in(year)
    return _span(first, add_months(first, months))


def _latest_weekday(today: date, target: int) -> date:
    """The latest such weekday before today (a Monday asked on a Monday: a week ago)."""
    return today - timedelta(days=(today.weekday() - target) % 7 or 7)


def _get(t: list[str], n: int) -> str:
    return t[n] if 0 <= n < len(t) else ""


def _number(word: str) -> int | None:
    if word.isdigit() and len(word) <= 3:
        return int(word)
    return _NUMBERS.get(word)


def _year(word: str) -> int | None:
    return int(word) if len(word) == 4 and word.isdigit() and 1900 <= int(word) <= 2099 else None



def _days(day: date, count: int) -> NamedTime:
    return _span(day, day + timedelta(days=count))


def _span(first: date, after_last: date) -> NamedTime:
    return NamedTime(start=midnight(first), end=midnight(after_last))

