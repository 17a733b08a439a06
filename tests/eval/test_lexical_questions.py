"""eval/build_lexical_questions.py, which `benchmarks.retrieval_lab` builds its lexical sets with:
the same questions on every run, in the conversation dataset's format, over the same evidence,
each naming its speaker and reusing words of its evidence."""

from __future__ import annotations

import json
import runpy
from pathlib import Path

import pytest

from memsvc.conversation_eval import conversation_problems

EVAL = Path(__file__).resolve().parents[2] / "eval"


@pytest.fixture(scope="module")
def doc() -> dict:
    return json.loads((EVAL / "conversations.json").read_text())


@pytest.fixture(scope="module")
def build():
    return runpy.run_path(str(EVAL / "build_lexical_questions.py"))["build"]


@pytest.mark.parametrize("mode", ["rare", "common"])
def test_each_question_is_asked_again_in_its_evidences_words(doc, build, mode):
    lexical = build(doc, mode)
    assert build(doc, mode) == lexical
    assert conversation_problems(lexical) == []
    assert lexical["conversations"] == doc["conversations"]
    turns = {t["id"]: t for c in doc["conversations"] for s in c["sessions"] for t in s["turns"]}
    for before, after in zip(doc["questions"], lexical["questions"], strict=True):
        assert {**after, "query": before["query"]} == before
        evidence = [turns[e] for e in after["evidence"]]
        assert evidence[0]["speaker"] in after["query"]
        said = " ".join(t["text"] for t in evidence).lower()
        frame = {"when", "what", "why", "how", "did", "the", "and", "mention", "say", "about", "bring", "up",
                 "feel", "happened", "with", "talk", "tell", evidence[0]["speaker"].lower()}
        reused = [w for w in after["query"].rstrip("?").replace("'s", "").lower().split() if w not in frame]
        assert reused and all(w in said for w in reused), after["query"]
