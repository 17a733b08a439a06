"""`memsvc convert` (issue 26): LangGraph's stores and mem0's memories as an export file that
`memsvc import` takes, each item a memory with its times, expiry and layer."""

from __future__ import annotations

import json
import sqlite3

import pytest

from memsvc.core.export_format import LineChecker
from memsvc.foreign_import import ConversionError, convert


def read(path) -> tuple[dict, list[dict]]:
    checker = LineChecker()
    records = list(checker.feed(path.read_bytes()))
    checker.finish()
    return checker.header.to_json(), records


def test_a_langgraph_sqlite_store_becomes_memories_with_their_times_and_ttl(tmp_path):
    db = tmp_path / "store.db"
    with sqlite3.connect(db) as conn:  # LangGraph SqliteStore's table, as its migrations leave it
        conn.execute("CREATE TABLE store (prefix text NOT NULL, key text NOT NULL, value text NOT NULL, "
                     "created_at TIMESTAMP DEFAULT CURRENT_TIMESTAMP, updated_at TIMESTAMP DEFAULT CURRENT_TIMESTAMP, "
                     "expires_at TIMESTAMP, ttl_minutes REAL, PRIMARY KEY (prefix, key))")
        conn.execute("INSERT INTO store VALUES ('memories.user-1', 'a', '{\"text\": \"likes tea\"}', "
                     "'2025-01-02 03:04:05', '2025-01-03 03:04:05', '2030-01-01 00:00:00', 30)")
        conn.execute("INSERT INTO store (prefix, key, value) VALUES ('notes', 'b', '\"just text\"')")
    counts = convert("langgraph-sqlite", db, tmp_path / "out.jsonl", tenant="acme", default_user=None)
    header, records = read(tmp_path / "out.jsonl")
    assert counts == {"memory": 2} and header["tenant"] == "acme"
    a, b = records
    assert (a["namespace"], a["key"], a["value"]) == (["memories", "user-1"], "a", {"text": "likes tea"})
    assert (a["created_at"], a["updated_at"]) == ("2025-01-02T03:04:05.000000Z", "2025-01-03T03:04:05.000000Z")
    assert (a["expires_at"], a["ttl_seconds"], a["version"]) == ("2030-01-01T00:00:00.000000Z", 1800, 1)
    assert (b["namespace"], b["value"], b["ttl_seconds"]) == (["notes"], {"value": "just text"}, None)


def test_a_postgres_store_as_csv_or_json_lines(tmp_path):
    (tmp_path / "store.csv").write_text(
        "prefix,key,value,created_at,updated_at,expires_at,ttl_minutes\n"
        'memories.u1,k,"{""text"": ""hi""}",2025-01-02 03:04:05.5+00,2025-01-02 03:04:05.5+00,,\n')
    convert("langgraph-postgres", tmp_path / "store.csv", tmp_path / "a.jsonl", tenant="t", default_user=None)
    (tmp_path / "store.jsonl").write_text(json.dumps(
        {"prefix": "memories.u1", "key": "k", "value": {"text": "hi"}, "created_at": "2025-01-02T03:04:05.5+00:00",
         "updated_at": "2025-01-02T03:04:05.5+00:00", "expires_at": None, "ttl_minutes": None}) + "\n")
    convert("langgraph-postgres", tmp_path / "store.jsonl", tmp_path / "b.jsonl", tenant="t", default_user=None)
    [a], [b] = read(tmp_path / "a.jsonl")[1], read(tmp_path / "b.jsonl")[1]
    fields = ("namespace", "key", "value", "created_at")
    assert {k: a[k] for k in fields} == {k: b[k] for k in fields} == {
        "namespace": ["memories", "u1"], "key": "k", "value": {"text": "hi"},
        "created_at": "2025-01-02T03:04:05.500000Z"}


def test_in_memory_store_items_and_mem0_memories(tmp_path):
    from langgraph.store.memory import InMemoryStore

    store = InMemoryStore()
    store.put(("memories", "u1"), "k", {"text": "likes tea"})
    items = [item.dict() for item in store.search(("memories",))]
    (tmp_path / "items.json").write_text(json.dumps(items, default=str))
    convert("langgraph-memory", tmp_path / "items.json", tmp_path / "a.jsonl", tenant="t", default_user=None)
    [a] = read(tmp_path / "a.jsonl")[1]
    assert (a["namespace"], a["key"], a["value"]) == (["memories", "u1"], "k", {"text": "likes tea"})

    mem0 = {"results": [
        {"id": "m1", "memory": "Likes tea", "hash": "h1", "metadata": {"src": "chat"}, "user_id": "alice",
         "created_at": "2024-07-20T01:03:15.934532-07:00", "updated_at": None},
        {"id": "m2", "memory": "Prefers email", "agent_id": "helper", "user_id": "alice"},
        {"id": "m3", "memory": "Asked about Rome", "run_id": "s1"}]}
    (tmp_path / "mem0.json").write_text(json.dumps(mem0))
    convert("mem0", tmp_path / "mem0.json", tmp_path / "b.jsonl", tenant="t", default_user="bob")
    user, agent, session = read(tmp_path / "b.jsonl")[1]
    assert (user["namespace"], user["key"], user["created_at"]) == (
        ["user", "alice", "memories"], "mem0-m1", "2024-07-20T08:03:15.934532Z")
    assert user["value"] == {"content": "Likes tea", "type": "fact", "source": "mem0", "tags": [],
                             "metadata": {"src": "chat"}, "mem0_hash": "h1"}
    assert agent["namespace"] == ["user", "alice", "agents", "helper"]
    assert session["namespace"] == ["user", "bob", "sessions", "s1"]


def test_what_is_not_the_named_kind_says_where(tmp_path):
    (tmp_path / "x.json").write_text('[{"memory": "no id"}]')
    with pytest.raises(ConversionError, match="memory 1 is not a mem0 memory"):
        convert("mem0", tmp_path / "x.json", tmp_path / "o.jsonl", tenant="t", default_user="u")
    (tmp_path / "y.db").write_text("not sqlite")
    with pytest.raises(ConversionError, match="is not a SQLite database"):
        convert("langgraph-sqlite", tmp_path / "y.db", tmp_path / "o.jsonl", tenant="t", default_user=None)
    assert not (tmp_path / "o.jsonl").exists() and not (tmp_path / "o.jsonl.partial").exists()


def test_a_ttl_of_less_than_a_second_keeps_one_second_not_none():
    """LangGraph's minutes round up to whole seconds, as its store API does (0 would mean no expiry)."""
    from memsvc.foreign_import import _langgraph_rows

    row = {"prefix": "user.a", "key": "k", "value": "{}", "ttl_minutes": 0.001}
    assert next(_langgraph_rows(iter([row])))["ttl_seconds"] == 1
