"""`memsvc eval` end to end on a slice of the golden dataset (two cases of each kind), against the
live server on both backends; and once with `--serve`. The full dataset is a benchmark
(`make eval`), not a test."""

from __future__ import annotations

import json
from pathlib import Path

import httpx
import pytest

from memsvc.cli import main as memsvc
from tests.conftest import shared_ssl_context

DATASET = Path(__file__).resolve().parents[2] / "eval" / "memory_golden_dataset.json"
PER_KIND = 2
# Semantic search scores recall@5 0.80 on this slice on both backends (e5-small locally, MiniLM in
# the AWS fake; each misses a distractor case). Raise the floor when retrieval gets better; never
# lower it to let a change through.
RECALL_FLOOR = 0.75
# Recall's cut on this slice (2 cases of each kind, the distractor and temporal ones the hardest of
# the set): R@5 0.80 at P@5 0.47 with e5-small. Floors, never `--min-precision 0` (issue 23): raise
# them when recall gets better; never lower them to let a change through. Lowered once, from 0.5,
# by a measured trade: e5-small lifted the whole set's recall (R@5 0.866 -> 0.905, P@5 0.672 ->
# 0.705) but answers more questions that have no answer (0.94 -> 0.75 right), and this slice's two
# no-answer cases are a sixth of its precision (benchmarks/README.md, issue 23, "e5-small").
CUT_RECALL_FLOOR = 0.75
CUT_PRECISION_FLOOR = 0.45
CASE_FIELDS = {"id", "kind", "category", "split", "expected", "recall", "precision", "reciprocal_rank",
               "latency_ms", "tokens", "within_budget", "leaks", "returned", "recalled"}
METRIC_FIELDS = {"cases", "cases_with_answers", "no_answer_cases", "recall_at_k", "precision_at_k", "mrr",
                 "no_answer_accuracy", "latency_ms", "token_budget_compliance", "cross_user_safety", "recall_route"}

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def slice_dataset(tmp_path_factory) -> Path:
    doc = json.loads(DATASET.read_text())
    taken: dict[str, int] = {}
    chosen = []
    for case in doc["cases"]:
        if taken.get(case["kind"], 0) < PER_KIND:
            taken[case["kind"]] = taken.get(case["kind"], 0) + 1
            chosen.append(case)
    path = tmp_path_factory.mktemp("eval") / "slice.json"
    path.write_text(json.dumps({**doc, "cases": chosen}))
    return path


def run_eval(capsys, *args) -> tuple[int, str]:
    """The exit status, and what was printed (stderr after stdout: an exit 2 says why there)."""
    code = memsvc(["eval", *map(str, args)])
    captured = capsys.readouterr()
    return code, captured.out + captured.err


def test_the_slice_holds_the_recall_floor_leaks_nothing_and_cleans_up(live_server, slice_dataset, tmp_path, capsys):
    report_path = tmp_path / "report.json"
    code, out = run_eval(capsys, "--url", live_server.url, "--data-dir", live_server.data_dir,
                         "--dataset", slice_dataset, "--tenant", "eval-slice", "--min-recall", RECALL_FLOOR,
                         "--min-cut-recall", CUT_RECALL_FLOOR, "--min-precision", CUT_PRECISION_FLOOR,
                         "--report", report_path)
    assert code == 0, out
    report = json.loads(report_path.read_text())
    assert "PASS" in out and "kind no_answer" in out

    metrics = report["metrics"]
    assert METRIC_FIELDS <= set(metrics)
    assert metrics["cases"] == 6 * PER_KIND
    assert metrics["cross_user_safety"] == 1.0
    assert metrics["token_budget_compliance"] == 1.0
    assert metrics["recall_at_k"] >= RECALL_FLOOR
    assert set(metrics["by_kind"]) == {"paraphrase", "keyword", "mixed", "temporal", "distractor", "no_answer"}
    assert set(metrics["by_split"]) == {"dev", "test"}
    assert report["config"]["token_counter"] == "cl100k_base"
    assert report["passed"] is True and report["failures"] == []

    dataset = {c["id"]: c for c in json.loads(slice_dataset.read_text())["cases"]}
    for case in report["cases"]:
        assert set(case) == CASE_FIELDS
        assert case["leaks"] == []
        assert 0 < len(case["returned"]) <= 5
        memories = dataset[case["id"]]["setup_memories"]
        for item in case["returned"]:  # a key names a memory of the dataset; no content is copied
            assert item["relevant"] == (memories[int(item["key"])]["content"]
                                        in dataset[case["id"]]["expected_retrievals"])
            assert set(item) <= {"key", "score", "scores", "relevant"}
        for item in case["recalled"]["returned"]:  # recall's answer, after its cut: keys and scores only
            assert item["relevant"] == (memories[int(item["key"])]["content"]
                                        in dataset[case["id"]]["expected_retrievals"])
            assert set(item) == {"key", "relevance", "match", "relevant"}

    # --cleanup (the default) deleted the run's memories
    token = live_server.token(report["config"]["user"], tenant="eval-slice")
    with httpx.Client(base_url=live_server.url, verify=shared_ssl_context(), timeout=30) as client:
        left = client.post("/v1/memories/search", headers={"Authorization": f"Bearer {token}"},
                           json={"namespace_prefix": ["user", report["config"]["user"]], "limit": 100})
    assert left.status_code == 200 and left.json()["items"] == []


@pytest.mark.parametrize("live_server", ["local"], indirect=True)  # the verdict is the CLI's, not the backend's
def test_a_threshold_above_one_fails_with_exit_1_and_says_why(live_server, slice_dataset, tmp_path, capsys):
    report_path = tmp_path / "report.json"
    code, out = run_eval(capsys, "--url", live_server.url, "--data-dir", live_server.data_dir,
                         "--dataset", slice_dataset, "--cases", 2, "--min-recall", 1.01, "--report", report_path)
    assert code == 1
    report = json.loads(report_path.read_text())
    assert report["passed"] is False
    assert report["failures"][0].startswith("recall@k")  # search's recall first, then recall's own
    assert "FAIL: recall@k" in out


def test_a_server_that_is_not_there_is_exit_2(slice_dataset, tmp_path, capsys):
    (tmp_path / "keys").mkdir()
    code = memsvc(["eval", "--url", "http://127.0.0.1:9", "--token", "a.eyJzdWIiOiJhIn0.s",
                   "--other-token", "b.eyJzdWIiOiJiIn0.s", "--dataset", str(slice_dataset)])
    assert code == 2
    assert "cannot reach" in capsys.readouterr().err


def test_serve_runs_against_a_throwaway_local_server(slice_dataset, tmp_path, capsys):
    report_path = tmp_path / "report.json"
    code, out = run_eval(capsys, "--serve", "--dataset", slice_dataset, "--kinds", "keyword", "no_answer",
                         "--min-cut-recall", CUT_RECALL_FLOOR, "--min-precision", CUT_PRECISION_FLOOR,
                         "--report", report_path)
    assert code == 0, out
    report = json.loads(report_path.read_text())
    assert report["config"]["served"] is True
    assert [c["kind"] for c in report["cases"]] == ["keyword"] * PER_KIND + ["no_answer"] * PER_KIND
    assert report["metrics"]["cross_user_safety"] == 1.0
