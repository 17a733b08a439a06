"""The pure parts of `memsvc eval` on a conversation dataset: validation, scoring of questions with
several evidence turns, the side-by-side table."""

from __future__ import annotations

import copy

import pytest

from memsvc.conversation_eval import (
    Question, QuestionResult, Turn, conversation_problems, is_conversation_dataset, message_content, mode_metrics,
    parse_conversations, score_question, select, side_by_side, turn_content,
)


def _doc() -> dict:
    def turns(session: str, n: int) -> list[dict]:
        return [{"id": f"{session}-t{i}", "speaker": ("Maria", "Dev")[i % 2], "text": f"line {i}"} for i in range(n)]

    return {
        "version": "1", "description": "d",
        "conversations": [
            {"id": "c1", "split": "dev", "speakers": ["Maria", "Dev"],
             "sessions": [{"id": "c1-s1", "date": "2023-05-08", "turns": turns("c1-s1", 3)},
                          {"id": "c1-s2", "date": "2023-06-10", "turns": turns("c1-s2", 3)}]},
            {"id": "c2", "split": "test", "speakers": ["Maria", "Dev"],
             "sessions": [{"id": "c2-s1", "date": "2023-01-02", "turns": turns("c2-s1", 2)}]},
        ],
        "questions": [
            {"id": "q1", "conversation": "c1", "kind": "temporal", "query": "what in May?", "evidence": ["c1-s1-t0"]},
            {"id": "q2", "conversation": "c1", "kind": "multi_session", "query": "and later?",
             "evidence": ["c1-s1-t1", "c1-s2-t1"]},
            {"id": "q3", "conversation": "c2", "kind": "speaker", "query": "what did Dev say?",
             "evidence": ["c2-s1-t1"]},
        ],
    }


def test_a_well_formed_conversation_dataset_has_no_problems_and_is_told_from_the_golden_set():
    doc = _doc()
    assert conversation_problems(doc) == []
    assert is_conversation_dataset(doc)
    assert not is_conversation_dataset({"version": "1", "cases": []})


def _broken(path: tuple, value) -> dict:
    doc = copy.deepcopy(_doc())
    target = doc
    for step in path[:-1]:
        target = target[step]
    target[path[-1]] = value
    return doc


@pytest.mark.parametrize(("path", "value", "problem"), [
    (("conversations", 0, "split"), "train", '"split" must be one of dev, test'),
    (("conversations", 0, "speakers"), ["Maria", "Maria"], "two different names"),
    (("conversations", 0, "sessions", 0, "date"), "8 May 2023", "date (YYYY-MM-DD)"),
    (("conversations", 0, "sessions", 0, "turns", 0, "speaker"), "Bob", "one of the speakers"),
    (("conversations", 1, "sessions", 0, "turns", 0, "id"), "c1-s1-t0", "is used twice"),
    (("questions", 0, "kind"), "trivia", '"kind" must be one of'),
    (("questions", 0, "evidence"), ["c2-s1-t0"], "not a turn of the question's conversation"),
    (("questions", 0, "evidence"), ["nowhere"], "not a turn of the question's conversation"),
    (("questions", 0, "evidence"), [], "1..4 distinct turn ids"),
    (("questions", 1, "evidence"), ["c1-s1-t1"], "at least two evidence turns"),
    (("questions", 2, "conversation"), "c9", "must be the id of a conversation"),
    (("questions", 2, "id"), "q1", "duplicate id"),
])
def test_conversation_dataset_problems_are_named(path, value, problem):
    problems = conversation_problems(_broken(path, value))
    assert any(problem in p for p in problems), problems


def test_a_document_without_both_lists_is_one_problem():
    assert conversation_problems({"conversations": []}) == [
        'the document must be an object with "conversations" and "questions" lists']


def test_a_turn_is_written_with_its_session_date_and_speaker():
    turn = Turn("t", "Maria", "I adopted a beagle.", "s", "2023-05-08")
    assert turn_content(turn) == '(8 May 2023) Maria said, "I adopted a beagle."'
    assert message_content(turn) == "(8 May 2023) I adopted a beagle."  # the speaker is the message's name


def test_a_turn_is_valid_on_its_sessions_day():
    from memsvc.conversation_eval import turn_valid_time

    turn = Turn("t", "Maria", "I adopted a beagle.", "s", "2023-12-31")
    assert turn_valid_time(turn) == {"valid_from": "2023-12-31T00:00:00Z", "valid_to": "2024-01-01T00:00:00Z"}


def test_select_takes_a_split_then_counts_conversations_then_filters_kinds():
    conversations, questions = parse_conversations(_doc())
    assert questions[2].split == "test"
    chosen, asked = select(conversations, questions, split="dev")
    assert [c.id for c in chosen] == ["c1"] and [q.id for q in asked] == ["q1", "q2"]
    chosen, asked = select(conversations, questions, kinds=["speaker"], count=1)
    assert [c.id for c in chosen] == ["c1"] and asked == []


def test_a_question_with_two_evidence_turns_scores_the_share_found_and_the_first_rank():
    half = score_question(["a", "b"], [None, "x", "b", "y"])
    assert (half.recall, half.reciprocal_rank) == (0.5, pytest.approx(1 / 3))
    both = score_question(["a", "b"], ["b", "a"])
    assert (both.recall, both.reciprocal_rank) == (1.0, 1.0)
    none = score_question(["a"], [])
    assert (none.recall, none.reciprocal_rank) == (0.0, 0.0)


def _result(question: Question, mode: str, returned: list[str | None], latency_ms: float = 5.0) -> QuestionResult:
    return QuestionResult(question, mode, score_question(question.evidence, returned), latency_ms, tuple(returned))


def test_modes_are_summarized_per_split_and_kind_and_shown_side_by_side():
    _, questions = parse_conversations(_doc())
    q1, q2, q3 = questions
    results = [
        _result(q1, "hybrid", ["c1-s1-t0"]), _result(q2, "hybrid", ["c1-s2-t1"]), _result(q3, "hybrid", []),
        _result(q1, "keyword", []), _result(q2, "keyword", []), _result(q3, "keyword", ["x", "c2-s1-t1"]),
    ]
    metrics = mode_metrics(results)
    assert list(metrics) == ["hybrid", "keyword"]
    assert metrics["hybrid"]["recall_at_k"] == pytest.approx((1 + 0.5 + 0) / 3)
    assert metrics["hybrid"]["by_split"]["dev"]["recall_at_k"] == pytest.approx(0.75)
    assert metrics["keyword"]["by_kind"]["speaker"] == {"questions": 1, "recall_at_k": 1.0, "mrr": 0.5}
    assert set(metrics["hybrid"]["by_kind"]) == {"temporal", "multi_session", "speaker"}

    table = side_by_side(metrics, 5).splitlines()
    assert table[0].split() == ["questions", "hybrid", "R@5", "keyword", "R@5", "hybrid", "MRR", "keyword", "MRR"]
    rows = {line[:20].strip(): line[20:].split() for line in table[1:-1]}
    assert rows["all"] == ["3", "0.500", "0.333", "0.667", "0.167"]
    assert rows["split test"] == ["1", "0.000", "1.000", "0.000", "0.500"]
    assert rows["kind multi_session"][:3] == ["1", "0.500", "0.000"]
    assert table[-1].startswith("search p50/p95 ms")


def test_the_conversation_harness_needs_nothing_beyond_the_standard_library():
    import ast
    import sys
    from pathlib import Path

    import memsvc.conversation_eval

    tree = ast.parse(Path(memsvc.conversation_eval.__file__).read_text())
    names = {a.name.split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
    names |= {(n.module or "").split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)}
    assert names - set(sys.stdlib_module_names) == {"memsvc"}
