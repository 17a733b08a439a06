"""examples/agent_memory.py runs against the live server: facts written in one thread are recalled,
by meaning, in another."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "agent_memory.py"


def _load_example():
    spec = importlib.util.spec_from_file_location("agent_memory_example", EXAMPLE)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up while the file runs
    spec.loader.exec_module(module)
    return module


def test_example_recalls_across_threads(store, uid, ns):
    example = _load_example()
    transcript = example.main(store=store, user_id=uid, quiet=True)
    replies = {text: reply for _, text, reply in transcript}
    assert replies["How do I like my coffee?"] == "From memory: I take my coffee black, no sugar."
    assert replies["Which city does Ana live in?"] == "From memory: my sister Ana lives in Lisbon."
    assert replies["Is there any food I should avoid?"] == "From memory: I am allergic to peanuts."
    assert len(store.search(ns + ("memories",))) == 3

    example.main(store=store, user_id=uid, quiet=True)  # running again updates, never duplicates
    assert len(store.search(ns + ("memories",))) == 3


def test_example_runs_from_the_environment(live_server, uid, monkeypatch, capsys):
    monkeypatch.setenv("MEMORY_SERVICE_URL", live_server.url)
    monkeypatch.setenv("MEMORY_SERVICE_TOKEN", live_server.token(uid))
    _load_example().main(user_id=uid)
    out = capsys.readouterr().out
    assert f"[thread-2] {uid}: How do I like my coffee?" in out
    assert "[thread-2] agent: From memory: I take my coffee black, no sugar." in out
