"""Workflow events locally (the events file), If-Match parsing, and a notice that cannot be
published never failing the write it follows."""

from __future__ import annotations

import json

import pytest

from memsvc.bootstrap import build_local
from memsvc.core.errors import InvalidArgument
from memsvc.core.models import Caller
from memsvc.service.plans import CreatePlan, UpdatePlan
from memsvc.service.task_contexts import CreateTaskContext
from memsvc.service.workflow_rules import if_match, notify
from tests.fakes.embedder import HashEmbedder

ALICE = Caller(tenant_id="acme", user_id="alice")


def test_plan_status_and_task_deletion_go_to_the_events_file_without_values(tmp_path, clock):
    events_file = tmp_path / "events.jsonl"
    app = build_local(tmp_path / "data", embedder=HashEmbedder(), clock=clock, start_workers=False,
                      events_file=events_file)
    try:
        s = app.services
        s.plans.create(ALICE, CreatePlan(plan_id="p", goal_event="g", goal_data={"g": "goal-canary"}))
        s.plans.update(ALICE, "p", UpdatePlan(status="failed"), expected_version=None)
        s.task_contexts.create(ALICE, CreateTaskContext(task_id="t", event_type="e", data={"d": "data-canary"}))
        s.task_contexts.delete(ALICE, "t")
    finally:
        app.close()
    lines = [json.loads(line) for line in events_file.read_text().splitlines()]
    assert [(e["source"], e["detail-type"]) for e in lines] == [
        ("memsvc", "memsvc.plan.status"), ("memsvc", "memsvc.plan.status"), ("memsvc", "memsvc.task-context.deleted")]
    assert lines[1]["detail"]["status"] == "failed" and lines[1]["detail"]["previous_status"] == "running"
    assert lines[2]["detail"] == {"tenant": "acme", "task_id": "t", "plan_id": None,
                                  "deleted_at": lines[2]["detail"]["deleted_at"]}
    assert "canary" not in events_file.read_text()


def test_a_notice_that_fails_is_logged_not_raised(caplog):
    class Broken:
        def notify(self, detail_type, detail):
            raise OSError("disk full")

    notify(Broken(), "memsvc.plan.status", {"plan_id": "p"})
    assert "workflow event not published" in caplog.text


@pytest.mark.parametrize("header, version", [(None, None), ("3", 3), ('"3"', 3), ('W/"12"', 12), (" 4 ", 4),
                                             ("*", None)])
def test_if_match_names_a_version(header, version):
    assert if_match(header) == version


@pytest.mark.parametrize("header", ["", "abc", "-1", "1.0", "٣", "9" * 19, '"2', '2"', '""', '"1", "2"', "W/3"])
def test_if_match_refuses_anything_else(header):
    with pytest.raises(InvalidArgument):
        if_match(header)
