"""`memsvc serve --events-file`: every timeline event as one JSON line, EventBridge's envelope,
never the value."""

from __future__ import annotations

import json

from memsvc.bootstrap import build_local
from memsvc.service.memories import PutMemory
from tests.conftest import alice, local_data_dir
from tests.fakes.embedder import HashEmbedder


def test_events_file_gets_one_line_per_event_without_values(tmp_path, clock):
    path = tmp_path / "out" / "events.jsonl"
    app = build_local(local_data_dir(tmp_path), embedder=HashEmbedder(), clock=clock, start_workers=False, events_file=path)
    try:
        ns = ["user", "alice", "n"]
        written = app.services.memories.put(alice(), PutMemory(namespace=ns, key="k", value={"text": "secret-value-xyz"},
                                                     attributes={"a": "secret-attr-xyz"}))
        app.services.memories.delete(alice(), ns, "k")
        app.workers.run_cycle("timeline")
    finally:
        app.close()
    text = path.read_text()
    assert "secret-value-xyz" not in text and "secret-attr-xyz" not in text
    lines = [json.loads(line) for line in text.splitlines()]
    assert [(e["source"], e["detail-type"]) for e in lines] == [("memsvc", "Memory Added"), ("memsvc", "Memory Deleted")]
    added = lines[0]["detail"]
    assert added == {"id": written.id, "tenant": "acme", "namespace": ns, "namespace_path": "user/alice/n/", "key": "k", "memory_id": written.id,
                     "version": 1, "kind": "add", "occurred_at": lines[0]["time"], "expires_at": None}
    assert lines[1]["detail"]["memory_id"] == written.id and lines[1]["detail"]["version"] == 2


def test_namespace_path_makes_a_string_prefix_a_subtree():
    from memsvc.core.timeline import namespace_path

    assert namespace_path(["user", "alice"]) == "user/alice/"
    assert namespace_path(["a/b", "c d", "é"]) == "a%2Fb/c%20d/%C3%A9/"
    assert namespace_path(["user", "alice", "x"]).startswith(namespace_path(["user", "alice"]))
    assert not namespace_path(["user", "alicea"]).startswith(namespace_path(["user", "alice"]))
    assert not namespace_path(["user", "alice/x"]).startswith(namespace_path(["user", "alice"]))


def test_remember_outcomes_are_published_under_their_own_detail_types(tmp_path, clock):
    from memsvc.service.remember import RememberMemory

    path = tmp_path / "events.jsonl"
    app = build_local(tmp_path / "data", embedder=HashEmbedder(), clock=clock, start_workers=False, events_file=path)
    try:
        app.services.remember.remember(alice(), RememberMemory(content="I live in Berlin"))
        app.workers.run_cycle("timeline")
    finally:
        app.close()
    (line,) = [json.loads(line) for line in path.read_text().splitlines()]
    assert line["detail-type"] == "memory.created"
    assert (line["detail"]["kind"], line["detail"]["action"]) == ("add", "created")
    assert "Berlin" not in path.read_text()
