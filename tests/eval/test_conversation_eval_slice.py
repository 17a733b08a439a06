"""`memsvc eval` on a slice of the conversation dataset (two conversations, their first two
sessions) against the live server: turns written as memories (both backends), then as session
messages (local), each mode scored side by side. The full set is a benchmark
(`make eval-conversations`), not a test."""

from __future__ import annotations

import json
from pathlib import Path

import httpx
import pytest

from memsvc.cli import main as memsvc
from tests.conftest import shared_ssl_context

DATASET = Path(__file__).resolve().parents[2] / "eval" / "conversations.json"
SESSIONS = 2

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def slice_dataset(tmp_path_factory) -> Path:
    doc = json.loads(DATASET.read_text())
    conversations = [{**c, "sessions": c["sessions"][:SESSIONS]}
                     for c in (doc["conversations"][0], doc["conversations"][1])]
    kept = {t["id"] for c in conversations for s in c["sessions"] for t in s["turns"]}
    questions = [q for q in doc["questions"] if set(q["evidence"]) <= kept]
    path = tmp_path_factory.mktemp("conversations") / "slice.json"
    path.write_text(json.dumps({**doc, "conversations": conversations, "questions": questions}))
    return path


def run(capsys, live_server, slice_dataset, report: Path, *extra) -> tuple[int, str, dict]:
    code = memsvc(["eval", "--url", live_server.url, "--data-dir", str(live_server.data_dir), "--dataset",
                   str(slice_dataset), "--tenant", "conversation-slice", "--report", str(report), *extra])
    captured = capsys.readouterr()
    return code, captured.out + captured.err, json.loads(report.read_text()) if report.exists() else {}


def _check(report: dict, dataset: dict) -> None:
    turns_of = {c["id"]: {t["id"] for s in c["sessions"] for t in s["turns"]} for c in dataset["conversations"]}
    metrics = report["metrics"]
    assert list(metrics) == ["hybrid", "keyword", "semantic"]
    for mode in metrics.values():
        assert mode["questions"] == len(dataset["questions"]) > 0
        assert mode["recall_at_k"] > 0  # the turns were indexed before the first question
        assert set(mode["by_split"]) == {"dev", "test"}
    conversation_of = {q["id"]: q["conversation"] for q in dataset["questions"]}
    for asked in report["questions"]:
        assert 0 < len(asked["returned"]) <= 5
        assert {t for t in asked["returned"] if t is not None} <= turns_of[conversation_of[asked["id"]]]
    assert report["cross_user_leaks"] == [] and report["passed"] is True


def test_turns_as_memories_are_scored_in_every_mode_side_by_side(live_server, slice_dataset, tmp_path, capsys):
    code, out, report = run(capsys, live_server, slice_dataset, tmp_path / "report.json")
    assert code == 0, out
    assert "hybrid R@5" in out and "keyword R@5" in out and "semantic R@5" in out and "split test" in out
    _check(report, json.loads(slice_dataset.read_text()))
    assert report["config"]["as_messages"] is False and report["config"]["turns"] > 100
    assert _left_behind(live_server, report) == []  # --cleanup (the default) deleted every turn


@pytest.mark.parametrize("live_server", ["local"], indirect=True)  # the writing is the CLI's: one backend is enough
def test_turns_as_session_messages_are_found_by_turn(live_server, slice_dataset, tmp_path, capsys):
    code, out, report = run(capsys, live_server, slice_dataset, tmp_path / "report.json", "--as-messages",
                            "--concurrency", "8")
    assert code == 0, out
    assert "as session messages" in out
    _check(report, json.loads(slice_dataset.read_text()))
    for conversation in json.loads(slice_dataset.read_text())["conversations"]:
        user = f"{report['config']['user']}-{conversation['id']}"
        assert _left_behind(live_server, report, user) == []  # the sessions were deleted with their messages


def _left_behind(live_server, report: dict, user: str | None = None) -> list:
    user = user or report["config"]["user"]
    token = live_server.token(user, tenant="conversation-slice")
    with httpx.Client(base_url=live_server.url, verify=shared_ssl_context(), timeout=30) as client:
        answer = client.post("/v1/memories/search", headers={"Authorization": f"Bearer {token}"},
                             json={"namespace_prefix": ["user", user], "limit": 100})
    assert answer.status_code == 200
    return answer.json()["items"]
