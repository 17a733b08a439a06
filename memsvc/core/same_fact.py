"""Seed 002's same-fact heuristics, pure: do two short statements say the same thing, contradict
each other, or say different things?

A statement is split into its *values* (numbers, dates, month and day names, proper names: a
capitalised word that does not start a sentence, so "I live in Berlin" has the value `berlin`)
and its *words* (the other content words, stemmed, stop words dropped, as the keyword index
analyses text). Then, as seed 002 says:
- a category on both sides that differs: not the same fact;
- the same subject (the words overlap) with conflicting values ("budget is 500" / "budget is
  800", "I live in Berlin" / "I live in Munich"), one side negated ("I like X" / "I don't like
  X"), or one slot swapped ("I prefer dark mode" / "I prefer light mode"): a contradiction;
- an entity overlap of at least 70% with no conflict: the same fact;
- anything else: different facts.
Statements are compared by the share of the smaller one's terms found in the other (so a
refinement, "I live in Berlin" / "I live in Berlin, Germany", is the same fact).
"""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass
from typing import Literal

from memsvc.core.keywords import analyze
from memsvc.core.unicode_text import normalize

__all__ = ["Statement", "Verdict", "statement", "judge_statements", "SAME_FACT_OVERLAP", "normalize_content"]

SAME_FACT_OVERLAP = 0.7  # seed 002: "normalized entity overlap >= 70%"

_NUMBER = re.compile(r"\d+(?:[.,:/-]\d+)*")
_WORD = re.compile(r"[^\W\d_][\w'’-]*", re.UNICODE)
_SENTENCE_END = re.compile(r"[.!?]\s+|\n")
_CALENDAR = frozenset(
    "january february march april may june july august september october november december "
    "jan feb mar apr jun jul aug sep sept oct nov dec "
    "monday tuesday wednesday thursday friday saturday sunday today tomorrow yesterday".split()
)
# "may" and "march" are also verbs; they count as months only capitalised inside a sentence.
_AMBIGUOUS_CALENDAR = frozenset({"may", "march"})
# Negated verbs only: "no sugar" qualifies a thing, "do not like" denies the statement.
_NEGATIONS = frozenset({"not", "never", "cannot"})
_PRONOUNS = frozenset({"i", "i'm", "i've", "i'd", "i'll"})
# Words that carry no subject (beyond the keyword index's stop words); "user" because agents
# write "The user prefers ..." and "User prefers ..." for the same thing.
_FUNCTION_WORDS = frozenset(analyze(
    "i me my mine we us our you your he him his she her its they them their do does did am "
    "were been has had have user users s each every all some any"))

# Ways of saying "prefers": one word here, so that "I prefer dark roast" and "My favourite coffee
# is a dark roast" are the same statement, not one word swapped for another (a contradiction).
_PREFERENCE = "prefer"
_PREFERENCE_WORDS = frozenset(analyze("prefer favourite favorite like love enjoy fond"))


@dataclass(frozen=True)
class Statement:
    words: frozenset[str]  # stemmed content words, values excluded
    values: frozenset[str]  # numbers, dates, names, lower-cased
    negated: bool


@dataclass(frozen=True)
class Verdict:
    """What a same-fact judge says about a candidate and an existing memory."""

    relation: Literal["same", "contradiction", "different"]

    @property
    def same_fact(self) -> bool:
        return self.relation == "same"


def normalize_content(text: str) -> str:
    """The form two contents are compared in for "identical": NFC, whitespace collapsed, trimmed.
    O(len(text))."""
    return " ".join(normalize("NFC", text).split())


def statement(text: str) -> Statement:
    """The values, words and negation of `text`. O(len(text))."""
    text = normalize("NFKC", text)
    values: set[str] = {n.replace(",", "") for n in _NUMBER.findall(text)}
    negated = False
    for sentence in _SENTENCE_END.split(text):
        for n, match in enumerate(_WORD.finditer(sentence)):
            word = match.group()
            low = word.casefold().replace("’", "'")
            if low in _NEGATIONS or low.endswith("n't"):
                negated = True
            capitalised = word[:1].isupper() and low not in _PRONOUNS
            named = capitalised and n > 0  # a capital that does not just start the sentence
            if (low in _CALENDAR and (low not in _AMBIGUOUS_CALENDAR or named)) or named:
                values.add(low)
    value_terms = {t for v in values for t in analyze(v)}
    words = frozenset(_PREFERENCE if t in _PREFERENCE_WORDS else t for t in analyze(text)
                      if t not in value_terms and t not in _FUNCTION_WORDS and not _NUMBER.fullmatch(t))
    return Statement(words=words, values=frozenset(values), negated=negated)


def _overlap(a: frozenset[str], b: frozenset[str]) -> float:
    """The share of the smaller set found in the other (1.0 for two empty sets)."""
    if not a or not b:
        return 1.0 if not a and not b else 0.0
    return len(a & b) / min(len(a), len(b))


def _values_conflict(a: Statement, b: Statement) -> bool:
    """Both name values, and neither's values are all in the other's."""
    return bool(a.values and b.values and not (a.values <= b.values or b.values <= a.values))


def _slot_swapped(a: Statement, b: Statement) -> bool:
    """The same sentence frame with one word exchanged: at least two words shared, exactly one
    different word on each side ("I prefer dark mode" / "I prefer light mode")."""
    only_a, only_b = a.words - b.words, b.words - a.words
    if len(a.words & b.words) < 2 or len(only_a) != 1 or len(only_b) != 1:
        return False
    # Two spellings of one word ("favourite" / "favorite") are no swap.
    return difflib.SequenceMatcher(None, next(iter(only_a)), next(iter(only_b))).ratio() < 0.8


def judge_statements(existing: str, candidate: str, *, existing_category: str | None = None,
                     candidate_category: str | None = None) -> Verdict:
    if existing_category and candidate_category and existing_category.casefold() != candidate_category.casefold():
        return Verdict("different")  # seed 002's category guard
    a, b = statement(existing), statement(candidate)
    same_subject = _overlap(a.words, b.words) >= SAME_FACT_OVERLAP
    if same_subject and (_values_conflict(a, b) or a.negated != b.negated):
        return Verdict("contradiction")
    if not a.values and not b.values and _slot_swapped(a, b):
        return Verdict("contradiction")
    if _overlap(a.words | a.values, b.words | b.values) >= SAME_FACT_OVERLAP and not _values_conflict(a, b):
        return Verdict("same")
    return Verdict("different")
