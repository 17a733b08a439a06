"""The shipped golden dataset (eval/memory_golden_dataset.json): well formed, balanced across kinds and
splits, and each kind is what it says: a paraphrase shares no content word with its answer, a keyword
case shares its code or name, a distractor case's wrong memories share the query's words."""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path

import pytest

from memsvc.evaluation import KINDS, SPLITS, load_dataset

DATASET = Path(__file__).resolve().parents[2] / "eval" / "memory_golden_dataset.json"

# Function words, and words every memory shares ("user"), which carry no meaning for a match.
STOPWORDS = set("""
a an the and or but if of to in on at by for with from as is are was were be been being do does did done have has
had i me my mine we us our you your he him his she her they them their it its this that these those what which who
whom whose when where why how any some all each every no not only own same so than too very can could should would
will shall may might must about into over after before under again further then once here there up down out off
just also most user users please tell know get got want like
""".split())


def content_words(text: str) -> set[str]:
    """Lower-cased words without stopwords, cut to a five-letter stem so "prefer" meets "preferred"."""
    words = set()
    for word in re.findall(r"[a-z0-9][a-z0-9'./#-]*", text.lower()):
        word = word.strip(".'/-#").removesuffix("'s")
        if not word or word in STOPWORDS:
            continue
        if len(word) > 4 and word.endswith("s") and not word.endswith("ss"):
            word = word[:-1]
        words.add(word[:5])
    return words


@pytest.fixture(scope="module")
def cases():
    return load_dataset(DATASET)[1]  # load_dataset raises on any structural problem


def test_at_least_150_distinct_cases(cases):
    assert len(cases) >= 150
    assert len({c.query for c in cases}) == len(cases)


def test_kinds_in_the_planned_proportions(cases):
    share = {kind: n / len(cases) for kind, n in Counter(c.kind for c in cases).items()}
    assert share["paraphrase"] >= 0.28
    assert share["keyword"] >= 0.23
    assert share["mixed"] + share["temporal"] >= 0.23
    assert share["distractor"] >= 0.09
    assert share["no_answer"] >= 0.09


def test_both_splits_hold_every_kind_in_equal_parts(cases):
    per = Counter((c.kind, c.split) for c in cases)
    for kind in KINDS:
        assert per[kind, "dev"] == per[kind, "test"] > 0, kind
    assert set(c.split for c in cases) == set(SPLITS)


def test_every_category_and_several_memories_per_case(cases):
    assert {c.category for c in cases} == {"preference", "fact", "decision", "note", "mixed"}
    assert sum(len(c.memories) > 5 for c in cases) / len(cases) > 0.8  # so that top 5 must choose


def test_paraphrases_share_no_content_word_with_their_answers(cases):
    overlaps = [(c.id, content_words(c.query) & content_words(e))
                for c in cases if c.kind == "paraphrase" for e in c.expected]
    assert [o for o in overlaps if o[1]] == []


def test_keyword_queries_share_a_word_with_each_answer(cases):
    missing = [c.id for c in cases if c.kind == "keyword"
               for e in c.expected if not content_words(c.query) & content_words(e)]
    assert missing == []


def test_distractor_cases_have_at_least_two_wrong_memories_sharing_the_query_words(cases):
    weak = [c.id for c in cases if c.kind == "distractor"
            if sum(bool(content_words(c.query) & content_words(m)) for m, _ in c.memories if m not in c.expected) < 2]
    assert weak == []


def test_no_answer_cases_expect_nothing_and_the_others_expect_one_to_three(cases):
    for c in cases:
        assert (len(c.expected) == 0) == (c.kind == "no_answer"), c.id
        assert len(c.expected) <= 3, c.id
