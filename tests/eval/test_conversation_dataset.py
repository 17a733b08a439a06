"""The shipped conversation dataset (eval/conversations.json): what issue 23 asks of it (20+
conversations of 300+ turns over 10+ dated sessions, paraphrased questions of every kind, dev/test
halves), each question answerable from its evidence, and the file is what its generator builds."""

from __future__ import annotations

import calendar
import json
import runpy
from collections import Counter
from datetime import date
from pathlib import Path

import pytest

from memsvc.conversation_eval import QUESTION_KINDS, conversation_problems, parse_conversations
from tests.eval.test_golden_dataset import content_words

EVAL = Path(__file__).resolve().parents[2] / "eval"
DATASET = EVAL / "conversations.json"


@pytest.fixture(scope="module")
def doc() -> dict:
    return json.loads(DATASET.read_text())


@pytest.fixture(scope="module")
def turns(doc) -> dict[str, tuple[dict, str, dict]]:
    """Turn id -> (turn, its session's date, its conversation)."""
    return {t["id"]: (t, s["date"], c) for c in doc["conversations"] for s in c["sessions"] for t in s["turns"]}


def test_the_file_is_what_the_generator_builds(doc):
    generator = runpy.run_path(str(EVAL / "build_conversations.py"))
    assert generator["build"]() == doc


def test_it_is_well_formed_long_and_split_in_halves(doc):
    assert conversation_problems(doc) == []
    conversations, questions = parse_conversations(doc)
    assert len(conversations) >= 20 and len(questions) >= 300
    for conversation in conversations:
        assert len(conversation.sessions) >= 10 and len(conversation.turns) >= 300
        dates = [s.date for s in conversation.sessions]
        assert dates == sorted(dates) and len({d[:7] for d in dates}) == len(dates)  # one session a month
    assert Counter(c.split for c in conversations) == {"dev": len(conversations) / 2, "test": len(conversations) / 2}
    pairs = [frozenset(c.speakers) for c in conversations]
    assert len(set(pairs)) == len(pairs)
    assert {(q.kind, q.split) for q in questions} == {(k, s) for k in QUESTION_KINDS for s in ("dev", "test")}


def test_each_question_names_the_speaker_of_its_evidence(doc, turns):
    for question in doc["questions"]:
        speakers = {turns[e][0]["speaker"] for e in question["evidence"]}
        assert len(speakers) == 1, question
        assert speakers.pop() in question["query"], question


def test_a_temporal_question_names_its_sessions_month_and_a_multi_session_one_spans_two(doc, turns):
    for question in doc["questions"]:
        months = {calendar.month_name[date.fromisoformat(turns[e][1]).month] for e in question["evidence"]}
        if question["kind"] == "temporal":
            assert months.pop() in question["query"], question
        if question["kind"] == "multi_session":
            sessions = {e.rsplit("-", 1)[0] for e in question["evidence"]}
            assert len(question["evidence"]) == 2 and len(sessions) == 2, question


def test_questions_are_paraphrases_and_their_shared_words_also_sit_in_other_turns(doc, turns):
    """At most two content words (names aside) of a question are in its evidence, most share none;
    and a word it does share is also said in some other turn of the conversation."""
    shared_counts = Counter()
    for question in doc["questions"]:
        conversation = turns[question["evidence"][0]][2]
        names = set().union(*(content_words(n) for n in conversation["speakers"]))
        asked = content_words(question["query"]) - names
        evidence = set().union(*(content_words(turns[e][0]["text"]) for e in question["evidence"]))
        shared = asked & evidence
        shared_counts[len(shared)] += 1
        assert len(shared) <= 2, question
        others = set().union(*(content_words(t["text"]) for s in conversation["sessions"] for t in s["turns"]
                               if t["id"] not in question["evidence"]))
        assert not shared or shared & others, question
    assert shared_counts[0] > len(doc["questions"]) / 2
