"""The pure parts of `memsvc eval`: case scores, aggregation, thresholds, dataset checks, tokens."""

from __future__ import annotations

import base64
import json
import sys
import types
from dataclasses import replace

import pytest

from memsvc.evaluation import (
    Case, CaseResult, EvalError, RecallResult, Thresholds, dataset_problems, haystack, log_to_mlflow, percentile,
    score_case, select_cases, summarize, threshold_failures, token_counter, token_subject,
)


def test_recall_precision_and_rank_of_a_case_with_answers():
    score = score_case(["a", "b"], ["x", "a", "y", "z", "w"])
    assert score.recall == 0.5
    assert score.precision == pytest.approx(1 / 5)
    assert score.reciprocal_rank == 0.5
    assert not score.returned_nothing


def test_every_expected_memory_found_at_the_top():
    score = score_case(["a", "b"], ["b", "a"])
    assert (score.recall, score.precision, score.reciprocal_rank) == (1.0, 1.0, 1.0)


def test_nothing_returned_when_something_was_expected_scores_zero():
    score = score_case(["a"], [])
    assert (score.recall, score.precision, score.reciprocal_rank, score.returned_nothing) == (0.0, 0.0, 0.0, True)


def test_a_no_answer_case_scores_one_only_when_nothing_comes_back():
    empty = score_case([], [])
    assert (empty.recall, empty.precision, empty.reciprocal_rank, empty.returned_nothing) == (None, 1.0, None, True)
    noisy = score_case([], ["x", "y"])
    assert (noisy.precision, noisy.returned_nothing) == (0.0, False)


def test_an_item_from_another_namespace_is_never_relevant():
    score = score_case(["a"], [None, "a"])
    assert score.precision == 0.5 and score.reciprocal_rank == 0.5


def test_percentile_is_nearest_rank():
    values = [float(v) for v in range(1, 101)]
    assert percentile(values, 50) == 50.0
    assert percentile(values, 95) == 95.0
    assert percentile([7.0], 95) == 7.0
    assert percentile([3.0, 1.0, 2.0], 100) == 3.0


def _case(kind: str, split: str = "dev", expected: tuple[str, ...] = ("a",)) -> Case:
    return Case(id=f"{kind}-{split}", category="fact", kind=kind, split=split,
                memories=(("a", "fact"), ("b", "fact"), ("c", "fact")), query="q", expected=expected)


def _result(case: Case, returned: list[str | None], latency_ms: float = 10.0, leaks: tuple[str, ...] = (),
            within_budget: bool = True) -> CaseResult:
    return CaseResult(case, score_case(case.expected, returned), latency_ms, 12, within_budget, leaks, ())


def test_summary_averages_recall_and_mrr_over_answerable_cases_and_precision_over_all():
    results = [
        _result(_case("keyword"), ["a", "b"], 10.0),  # recall 1, precision 0.5, rr 1
        _result(_case("paraphrase"), ["b", "c"], 30.0),  # recall 0, precision 0, rr 0
        _result(_case("no_answer", expected=()), [], 20.0),  # precision 1, no-answer ok
        _result(_case("no_answer", "test", expected=()), ["c"], 40.0),  # precision 0
    ]
    m = summarize(results)
    assert (m["cases"], m["cases_with_answers"], m["no_answer_cases"]) == (4, 2, 2)
    assert m["recall_at_k"] == 0.5
    assert m["precision_at_k"] == pytest.approx((0.5 + 0 + 1 + 0) / 4)
    assert m["mrr"] == 0.5
    assert m["no_answer_accuracy"] == 0.5
    assert m["latency_ms"] == {"p50": 20.0, "p95": 40.0, "mean": 25.0}
    assert m["token_budget_compliance"] == 1.0 and m["cross_user_safety"] == 1.0


def test_summary_counts_leaks_and_budget_overruns():
    results = [_result(_case("keyword"), ["a"], leaks=("the other user's items came back",)),
               _result(_case("mixed"), ["a"], within_budget=False)]
    m = summarize(results)
    assert m["cross_user_safety"] == 0.5
    assert m["token_budget_compliance"] == 0.5


def test_thresholds_pass_and_fail():
    good = {"recall_at_k": 0.9, "precision_at_k": 0.2, "cross_user_safety": 1.0, "token_budget_compliance": 1.0,
            "recall_route": {"recall_at_k": 0.92, "precision_at_k": 0.75}}
    assert threshold_failures(good, Thresholds()) == []
    assert threshold_failures(good, Thresholds(min_recall=1.01)) == ["recall@k 0.900 < 1.01"]
    assert threshold_failures(good, Thresholds(min_precision=0.8)) == ["recall's precision@k 0.750 < 0.8"]
    assert threshold_failures(good, Thresholds(min_cut_recall=0.95)) == ["recall's recall@k 0.920 < 0.95"]


def test_precision_is_judged_on_recall_after_its_cut_never_on_search():
    """Search without a score threshold returns k items: its P@k is (expected / k) whatever the ranking."""
    search_only = {"recall_at_k": 1.0, "precision_at_k": 0.2, "cross_user_safety": 1.0, "token_budget_compliance": 1.0}
    assert threshold_failures(search_only, Thresholds()) == []
    cut_too_loose = {**search_only, "recall_route": {"recall_at_k": 1.0, "precision_at_k": 0.5}}
    assert threshold_failures(cut_too_loose, Thresholds()) == ["recall's precision@k 0.500 < 0.7"]


def test_the_summary_has_recall_metrics_beside_search_when_recall_was_measured():
    both = _case("keyword", expected=("a",))
    none = _case("no_answer", expected=())
    results = [
        replace(_result(both, ["b", "c", "a"]), recalled=RecallResult(score_case(("a",), ["a"]), 4.0, ({},))),
        replace(_result(none, ["a"]), recalled=RecallResult(score_case((), []), 2.0, ())),
    ]
    m = summarize(results)
    assert m["precision_at_k"] == pytest.approx((1 / 3 + 0) / 2)
    route = m["recall_route"]
    assert (route["recall_at_k"], route["precision_at_k"], route["mrr"]) == (1.0, 1.0, 1.0)
    assert route["no_answer_accuracy"] == 1.0
    assert route["returned_mean"] == 0.5
    assert "recall_route" not in summarize([_result(both, ["a"])])


def test_any_leak_or_budget_overrun_fails_whatever_the_thresholds():
    base = {"recall_at_k": 1.0, "precision_at_k": 1.0, "cross_user_safety": 1.0, "token_budget_compliance": 1.0}
    lenient = Thresholds(min_recall=0.0, min_precision=0.0)
    assert "cross-user safety" in threshold_failures({**base, "cross_user_safety": 0.99}, lenient)[0]
    assert "token-budget" in threshold_failures({**base, "token_budget_compliance": 0.99}, lenient)[0]


def _doc(**case_changes) -> dict:
    case = {"id": "c1", "category": "fact", "kind": "keyword", "split": "dev", "query": "INC-1?",
            "setup_memories": [{"content": "INC-1: disk full", "type": "fact"},
                               {"content": "INC-2: DNS", "type": "fact"},
                               {"content": "INC-3: TLS", "type": "note"}],
            "expected_retrievals": ["INC-1: disk full"], "rubric": "INC-1 first"}
    return {"version": "1", "description": "d", "cases": [{**case, **case_changes}]}


def test_a_well_formed_dataset_has_no_problems():
    assert dataset_problems(_doc()) == []


@pytest.mark.parametrize("changes, problem", [
    ({"expected_retrievals": ["not stored"]}, "not one of the case's memories"),
    ({"kind": "no_answer"}, "no_answer"),
    ({"expected_retrievals": []}, "no_answer"),
    ({"kind": "vague"}, '"kind" must be one of'),
    ({"split": "train"}, '"split" must be one of'),
    ({"setup_memories": [{"content": "only one", "type": "fact"}]}, "3..8"),
    ({"setup_memories": [{"content": "x", "type": "fact"}] * 3, "expected_retrievals": ["x"]}, "same content"),
    ({"setup_memories": [{"content": "INC-1: disk full", "type": "opinion"}, {"content": "b", "type": "fact"},
                         {"content": "c", "type": "fact"}]}, "a memory must be"),
])
def test_dataset_problems_are_named(changes, problem):
    problems = dataset_problems(_doc(**changes))
    assert any(problem in p for p in problems), problems


def test_duplicate_ids_and_duplicate_cases_are_problems():
    doc = _doc()
    doc["cases"].append(dict(doc["cases"][0]))
    problems = dataset_problems(doc)
    assert any("duplicate id" in p for p in problems)
    assert any("same query and memories" in p for p in problems)


def test_select_cases_filters_by_split_and_kind_then_counts():
    cases = [_case("keyword", "dev"), _case("keyword", "test"), _case("mixed", "dev"), _case("mixed", "test")]
    assert [c.id for c in select_cases(cases, split="dev")] == ["keyword-dev", "mixed-dev"]
    assert [c.id for c in select_cases(cases, kinds=["mixed"])] == ["mixed-dev", "mixed-test"]
    assert [c.id for c in select_cases(cases, count=3)] == ["keyword-dev", "keyword-test", "mixed-dev"]


def test_a_haystack_takes_other_cases_memories_never_the_cases_own_the_same_every_run():
    mine = Case("mine", "fact", "keyword", "dev", (("a", "fact"), ("b", "fact"), ("c", "fact")), "q", ("a",))
    other = Case("other", "fact", "mixed", "dev", (("b", "fact"), ("d", "fact"), ("e", "note")), "q2", ("d",))
    third = Case("third", "note", "mixed", "test", (("d", "fact"), ("f", "note"), ("g", "note")), "q3", ("f",))
    pool = [mine, other, third]
    drawn = haystack(mine, pool, 3)
    assert len(drawn) == 3 and len(set(drawn)) == 3
    assert not {content for content, _ in drawn} & {"a", "b", "c"}
    assert drawn == haystack(mine, pool, 3)
    assert sorted(haystack(mine, pool, 100)) == [("d", "fact"), ("e", "note"), ("f", "note"), ("g", "note")]
    assert haystack(mine, pool, 0) == []


def test_tokens_are_cl100k_base_from_the_shipped_file():
    name, count = token_counter()
    assert name == "cl100k_base"
    assert count("hello world") == 2  # cl100k_base: [15339, 1917]
    assert count("INC-20931: checkout latency spiked to 4s") == 12


def _jwt(claims: dict) -> str:
    encode = lambda part: base64.urlsafe_b64encode(json.dumps(part).encode()).rstrip(b"=").decode()  # noqa: E731
    return f"{encode({'alg': 'RS256'})}.{encode(claims)}.signature"


def test_the_user_of_a_given_token_is_its_subject():
    assert token_subject(_jwt({"sub": "alice", "tenant_id": "acme"})) == "alice"
    with pytest.raises(EvalError):
        token_subject("not-a-jwt")
    with pytest.raises(EvalError):
        token_subject(_jwt({"tenant_id": "acme"}))


def test_mlflow_gets_params_numeric_metrics_and_the_report(monkeypatch):
    calls: list[tuple] = []

    class Run:
        def __enter__(self):
            return self

        def __exit__(self, *exc):
            return False

    fake = types.SimpleNamespace(
        set_experiment=lambda name: calls.append(("experiment", name)),
        start_run=lambda run_name: calls.append(("run", run_name)) or Run(),
        log_params=lambda params: calls.append(("params", params)),
        log_metrics=lambda metrics: calls.append(("metrics", metrics)),
        log_metric=lambda name, value: calls.append(("metric", name, value)),
        log_dict=lambda report, path: calls.append(("dict", path)),
    )
    monkeypatch.setitem(sys.modules, "mlflow", fake)
    report = {"config": {"run_id": "r1", "limit": 5, "mode": None}, "passed": False,
              "metrics": {"recall_at_k": 0.5, "latency_ms": {"p95": 12.0}, "by_kind": {"keyword": {"mrr": 1.0}},
                          "no_answer_accuracy": None}}
    log_to_mlflow(report, "memsvc-eval")
    assert calls[:3] == [("experiment", "memsvc-eval"), ("run", "r1"), ("params", {"run_id": "r1", "limit": 5})]
    assert calls[3] == ("metrics", {"recall_at_k": 0.5, "latency_ms.p95": 12.0, "by_kind.keyword.mrr": 1.0})
    assert calls[4:] == [("metric", "passed", 0.0), ("dict", "memsvc_eval_report.json")]


def test_without_mlflow_installed_the_run_says_how_to_get_it(monkeypatch):
    monkeypatch.setitem(sys.modules, "mlflow", None)  # import mlflow raises ImportError
    with pytest.raises(EvalError, match=r"memsvc\[mlflow\]"):
        log_to_mlflow({"config": {"run_id": "r"}, "metrics": {}, "passed": True}, "x")



def test_the_harness_needs_nothing_beyond_the_standard_library_but_its_optional_extras():
    """`memsvc eval` runs with `memsvc[local]` alone: http.client, not httpx; tokens counted by
    the service's own tokenizer (`memsvc.tokens`); MLflow only when its extra is installed."""
    import ast
    from pathlib import Path

    import memsvc.evaluation

    tree = ast.parse(Path(memsvc.evaluation.__file__).read_text())
    names = {a.name.split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
    names |= {(n.module or "").split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)}
    assert names - set(sys.stdlib_module_names) == {"memsvc", "mlflow"}
