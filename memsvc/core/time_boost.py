"""How a time the query names moves search's and recall's ranking (issue 25). Pure.

A question that names a time ("What trip did Fatima talk about in July?", "what did I decide
last week", `core.query_time`) prefers memories tied to that time. A memory's time is its valid
time, read as `as_of` reads it (`core.validity.interval`): `[valid_from, valid_to)` from its
value, for a typed memory and a plain item alike, `valid_from` defaulting to `created_at`; a
superseded typed memory without `valid_to` ends at its `updated_at`. For ranking, an open (or
empty) interval counts as its start only (`NamedTime.overlaps`): a fact still holding held in
every month since it began, and a question about July asks what began, happened or held *then*,
which the start alone ties to July ("I live in Munich" stated in 2023 is not about July 2025; a
turn of a conversation dated 8 July 2023 is).

The boost: a memory whose time meets the named one scores `score ** (1 - TIME_BOOST)` instead of
its `score`, on 0..1 (a negative semantic cosine stays as it is). It keeps 0 at 0 and 1 at 1, so a
memory no retriever matched stays unmatched, and it grows with the score, so what bounds a memory
not handed over yet bounds it boosted (`ceiling`, search's early stop) and the order among the
memories of the named time is their order by relevance. Scores are unchanged for a query that
names no time, and for memories outside the named time. A boost, not a filter: a memory about the
time written without a valid time (`created_at` later) can still win on meaning. The query's
vector is embedded from its words without the time's (`TimeBoost.embed_text`); the keyword
retriever keeps them. Where no memory of the ranking's first `FIRST_PAGE` is of the named
time the boost lifts nothing, and search ranks again by the whole query's vector.

The boost reaches the retrievers' best `BOOST_DEPTH` whatever page is asked (search's
`_by_relevance`), so the pages of one query partition one ranking.

`TIME_BOOST` was chosen on the dev half of `eval/conversations.json` (benchmarks/README.md,
"Temporal questions (issue 25)").
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from memsvc.core.models import Memory
from memsvc.core.query_time import NamedTime, read_time
from memsvc.core.validity import interval, typed_in

__all__ = ["TIME_BOOST", "BOOST_DEPTH", "FIRST_PAGE", "TEMPORAL_DESCRIPTION", "TimeBoost", "time_boost", "boosted"]

TIME_BOOST = 0.5
# The boost's reach: a search's retrievers each hand over their best BOOST_DEPTH for it, whatever
# the page asked, and those are ranked by the boosted score ahead of what a wider round for a deeper
# page adds (unboosted). Independent of offset and limit, so the pages of one query partition one
# ranking; a memory of the named time below every retriever's best 200 is not lifted. Bounded: a
# boosted search opens at most these candidates more than the page needs (recall, which has no
# pages, reaches 4 x its first page per layer). 200 is what a page of 10 reached before (its first
# page of 50, widened once).
BOOST_DEPTH = 200
# A ranking by the query embedded without its time's words is kept when one of its first
# FIRST_PAGE memories is of the named time; else it is ranked again by the whole query's vector.
FIRST_PAGE = 10
# Why the query's vector leaves out its time's words (`TimeBoost.embed_text`): they are matched by
# valid time, not by meaning: "What trip did Fatima talk about in July?" is embedded as "What trip
# did Fatima talk about?". Left in, they make every memory that
# mentions July (every turn of a July session, dated in its words) close in meaning, and the topic
# ("trip") decides less. The keyword retriever keeps them: memories that name the time in their
# words are then among the candidates the boost can lift (without the time's words there too,
# keyword-mode R@5 on the dev half's temporal questions fell from 0.300 to 0.150). Where the boost
# lifts nothing (memories dated only in their words, all stated later: the golden set's temporal
# cases), the whole query's vector ranks (`FIRST_PAGE`); benchmarks/README.md, "Temporal questions".


def boosted(score: float, strength: float) -> float:
    """`score` of a memory of the named time: raised toward 1, 0 and 1 kept, order kept."""
    if score <= 0.0 or score >= 1.0:
        return score
    return score ** (1.0 - strength)


@dataclass(frozen=True)
class TimeBoost:
    """A query's named time and the boost it gives."""

    named: NamedTime
    strength: float = TIME_BOOST
    embed_text: str = ""  # the query without its time expression: what its vector is embedded from

    def matches(self, value: Mapping[str, Any], *, typed: bool, created_at: datetime, updated_at: datetime) -> bool:
        return self.named.overlaps(*interval(value, typed=typed, created_at=created_at, updated_at=updated_at))

    def holds_for(self, memory: Memory) -> bool:
        """Whether an opened memory's time meets the named one."""
        return self.matches(memory.value, typed=typed_in(memory.namespace, memory.value),
                            created_at=memory.created_at, updated_at=memory.updated_at)

    def score(self, score: float, matches: bool) -> float:
        return boosted(score, self.strength) if matches else score

    def ceiling(self, score: float) -> float:
        """The most a memory scoring at most `score` unboosted can score."""
        return boosted(score, self.strength)


def time_boost(query: str | None, now: datetime, *, enabled: bool = True) -> TimeBoost | None:
    """The boost of a query, or None when it names no time (or the caller opted out, or
    `TIME_BOOST` is 0)."""
    if not enabled or not query or TIME_BOOST <= 0.0:
        return None
    found = read_time(query, now)
    if found is None:
        return None
    named, start, end = found
    rest = " ".join((query[:start] + " " + query[end:]).split())
    return TimeBoost(named, TIME_BOOST, rest if any(c.isalnum() for c in rest) else query)


TEMPORAL_DESCRIPTION = ("when the query names a time (\"in July\", \"last summer\", \"in 2025\", \"last week\"), rank "
                        "the memories whose valid time meets it higher (issue 25); false: rank as if it named none")
