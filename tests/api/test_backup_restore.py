"""`memsvc backup` of a data dir while `memsvc serve` writes to it, `memsvc restore` into a fresh
data dir, and a server on the restored dir that answers as the first one did. Each write of the
writer touches two files (the item in memsvc.db, then its vectors in vectors.db, then its mark
back in memsvc.db: `sync_index`): the backup's pair of files agrees, as one instant would."""

from __future__ import annotations

import sqlite3
import stat
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from tests.api.helpers import client_for, get, put_ok, search_ok, sync_index, unique_tenant
from tests.conftest import start_server, stop_server

pytestmark = pytest.mark.slow

HOME = ["user", "dora"]
FACTS = [("paris", "The capital of France is Paris"), ("bread", "Sourdough bread needs a starter culture"),
         ("vim", "Dora edits code in vim with a dark theme")]


def _memsvc(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "memsvc.cli", *args], capture_output=True, text=True, timeout=120)


def _keys_under(me, prefix: list[str]) -> list[str]:
    keys: list[str] = []
    while page := search_ok(me, prefix, limit=100, offset=len(keys)):
        keys += [i["key"] for i in page]
    return keys


def _answers(me, admin) -> dict:
    """What get, search, recall, history and the workflow routes answer about the written data."""
    recall = me.post("/v1/memories/recall", json={"query": "Which editor does Dora use?", "min_score": 0})
    assert recall.status_code == 200, recall.text
    history = me.get("/v1/memories/history", params=[("ns", s) for s in HOME + ["facts"]] + [("key", "vim")])
    assert history.status_code == 200, history.text
    plan = me.get("/v1/memory/plans/trip")
    assert plan.status_code == 200, plan.text
    return {
        "get": {key: get(me, HOME + ["facts"], key).json() for key, _ in FACTS},
        "search": [(i["key"], round(i["score"], 4)) for i in search_ok(me, HOME + ["facts"], query="baking bread")],
        "recall": [(m["key"], round(m["relevance"], 4)) for m in recall.json()["memories"]],
        "history": [(v["version"], v["value"]) for v in history.json()["versions"]],
        "plan": plan.json(),
        "settings": admin.get("/admin/v1/memories/settings").json(),
    }


def test_a_backup_taken_while_the_server_writes_restores_to_a_server_that_answers_the_same(tmp_path):
    tenant = unique_tenant("backup")
    server = start_server(tmp_path / "data", "local")
    stop_writing = threading.Event()
    written: list[int] = []
    try:
        with client_for(server, "dora", tenant=tenant) as me, \
                client_for(server, "root", tenant=tenant, roles=["admin"]) as admin:
            for key, text in FACTS:
                put_ok(me, HOME + ["facts"], key, {"text": text})
            put_ok(me, HOME + ["facts"], "vim", {"text": "Dora edits code in vim with a dark theme, always"})
            assert me.post("/v1/memory/plans", json={"plan_id": "trip", "goal_event": "trip.planned", "state": {"step": 1}}).status_code == 201
            assert admin.put("/admin/v1/memories/settings", json={"neighbors_k": 7}).status_code == 200
            sync_index(admin)
            before = _answers(me, admin)
            deadline = time.monotonic() + 30
            while len(before["history"]) < 2:  # the timeline records version 1 on its own thread
                assert time.monotonic() < deadline, before["history"]
                before = _answers(me, admin)

            def write() -> None:
                with client_for(server, "dora", tenant=tenant) as writer:
                    n = 0
                    while not stop_writing.is_set():
                        # sync_index: the item (memsvc.db), its vectors (vectors.db) and its mark
                        # (memsvc.db) are written on the request, each write touching both files
                        put_ok(writer, HOME + ["stream"], f"n{n:05d}", {"text": f"note {n}"}, sync_index=True)
                        written.append(n)
                        n += 1

            writer = threading.Thread(target=write)
            writer.start()
            try:
                while len(written) < 20:
                    stop_writing.wait(0.05)
                made = _memsvc("backup", "--data-dir", str(server.data_dir), "--to", str(tmp_path / "backup"))
                refused = _memsvc("restore", "--from", str(tmp_path / "backup"), "--data-dir", str(server.data_dir),
                                  "--force")
            finally:
                stop_writing.set()
                writer.join()
    finally:
        stop_server(server)
    assert made.returncode == 0, made.stderr
    assert refused.returncode == 1 and refused.stderr.strip().endswith("is in use by a server: stop it first")
    backed_up = tmp_path / "backup"
    _assert_items_and_vectors_agree(backed_up, tenant)
    assert stat.S_IMODE((backed_up / "keys" / "kek.key").stat().st_mode) == 0o600
    assert stat.S_IMODE((backed_up / "keys" / "jwt-private.pem").stat().st_mode) == 0o600

    restored = _memsvc("restore", "--from", str(backed_up), "--data-dir", str(tmp_path / "restored"))
    assert restored.returncode == 0, restored.stderr
    assert stat.S_IMODE((tmp_path / "restored" / "keys" / "kek.key").stat().st_mode) == 0o600
    server = start_server(tmp_path / "restored", "local")
    try:
        with client_for(server, "dora", tenant=tenant) as me, \
                client_for(server, "root", tenant=tenant, roles=["admin"]) as admin:
            assert _answers(me, admin) == before
            # the writes the backup caught are a prefix of what the writer wrote: nothing after a
            # missing one, and everything the restored server holds is indexed once it catches up
            sync_index(admin)
            kept = sorted(_keys_under(me, HOME + ["stream"]))
            assert kept == [f"n{n:05d}" for n in range(len(kept))] and 0 < len(kept) <= len(written)
            assert [i["key"] for i in search_ok(me, HOME + ["stream"], query=f"note {len(kept) - 1}", limit=1,
                                                mode="keyword")] == [kept[-1]]
    finally:
        stop_server(server)


def _assert_items_and_vectors_agree(backup: Path, tenant: str) -> None:
    """The indexer writes an item's vectors (vectors.db) after the item (memsvc.db), and marks the
    item indexed (memsvc.db) after its vectors. Copies of the two files taken at different moments
    break one of these: memsvc.db copied later holds items marked indexed whose vectors the copy
    of vectors.db lacks; vectors.db copied later holds vectors of items memsvc.db's copy lacks."""
    with sqlite3.connect(backup / "memsvc.db") as items_db, sqlite3.connect(backup / "vectors.db") as vectors_db:
        items = {memory_id: indexed for memory_id, indexed in items_db.execute(
            "SELECT id, indexed_fields IS NOT NULL FROM items WHERE tenant = ? AND key GLOB 'n[0-9]*'", (tenant,))}
        vectors = {memory_id for (memory_id,) in vectors_db.execute(
            "SELECT DISTINCT memory_id FROM vectors WHERE tenant = ? AND key GLOB 'n[0-9]*'", (tenant,))}
    assert items and vectors, "the backup holds none of the writer's items, or none of their vectors"
    assert vectors <= set(items), "vectors of items the backup's memsvc.db does not hold"
    assert {memory_id for memory_id, indexed in items.items() if indexed} <= vectors, \
        "items marked indexed whose vectors the backup's vectors.db does not hold"


def test_a_backup_refuses_a_directory_that_is_not_a_data_dir(tmp_path: Path):
    done = _memsvc("backup", "--data-dir", str(tmp_path), "--to", str(tmp_path / "backup"))
    assert done.returncode == 1
    assert done.stderr.strip() == f"memsvc: {tmp_path} is not a memsvc data dir (it has no memsvc.db)"
    assert "Traceback" not in done.stderr
