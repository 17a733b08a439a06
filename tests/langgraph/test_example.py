"""The examples run against the live server. examples/agent_memory.py: facts written in one thread
are recalled, by meaning, in another. examples/langgraph_agent.py: a create_react_agent with the
memory hooks uses, in one thread, a preference mentioned in another (needs the session routes and
`recall`)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def _load_example(name: str = "agent_memory"):
    spec = importlib.util.spec_from_file_location(f"{name}_example", EXAMPLES / f"{name}.py")
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
    assert replies["Do I have any food allergies?"] == "From memory: I am allergic to peanuts."
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


def test_the_agent_uses_in_one_thread_a_preference_mentioned_in_another(live_server, uid):
    from memsvc_client import MemsvcClient

    example = _load_example("langgraph_agent")
    with MemsvcClient(live_server.url, live_server.token(uid)) as client:
        mentioned, asked = example.main(client, uid, quiet=True)
        assert (mentioned.thread, mentioned.reply) == ("monday", "Noted.")
        assert [(m["role"], m["content"]) for m in client.get_messages("monday")["messages"]] == [
            ("user", "I prefer window seats on flights."), ("assistant", "Noted.")]
        learnt = client.recall("seat preference on flights", types=["preference"])["memories"]
        assert [m["content"] for m in learnt] == ["User prefers window seats on flights"]  # extracted at close
        assert learnt[0]["layer"] == "user"

        assert asked.thread == "friday"  # nothing of monday is in friday's thread but what memsvc learnt
        assert asked.reply == "Based on what you told me before: User prefers window seats on flights"

        again = example.main(client, uid, quiet=True)  # a run starts its sessions afresh
        assert again[1].reply == asked.reply
        assert client.get_session("monday")["message_count"] == 2
        assert len(client.recall("seat preference on flights", types=["preference"])["memories"]) == 1  # unchanged


def test_the_agent_example_runs_from_the_environment(live_server, uid, monkeypatch, capsys):
    monkeypatch.setenv("MEMORY_SERVICE_URL", live_server.url)
    monkeypatch.setenv("MEMORY_SERVICE_TOKEN", live_server.token(uid))
    _load_example("langgraph_agent").main(user_id=uid)
    out = capsys.readouterr().out
    assert "[monday] user: I prefer window seats on flights." in out
    assert "[friday] agent: Based on what you told me before: User prefers window seats on flights" in out
