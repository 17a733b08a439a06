"""`memsvc serve --workers 2`: two processes answer on one port over one data dir.

Each new connection goes to whichever worker accepts it first, so a test that reads from many
fresh connections reads from both workers (which one answers is the kernel's choice: the
assertions hold for either). The indexes' catching up across processes is tested
deterministically in tests/unit/test_index_processes.py.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import pytest

from tests.api.helpers import client_for, delete, get, put_ok, search_ok
from tests.conftest import start_server, stop_server

pytestmark = pytest.mark.slow

CONNECTIONS = 12


@pytest.fixture(scope="module")
def workers(tmp_path_factory):
    server = start_server(tmp_path_factory.mktemp("workers") / "data", "local-workers")
    yield server
    stop_server(server)


def _from_fresh_connections(server, uid: str, read) -> list:
    """`read(client)` on CONNECTIONS connections opened at once (and so spread over the workers)."""
    clients = [client_for(server, uid) for _ in range(CONNECTIONS)]
    try:
        with ThreadPoolExecutor(CONNECTIONS) as pool:
            return list(pool.map(read, clients))
    finally:
        for c in clients:
            c.close()


def test_every_worker_reads_what_any_worker_wrote(workers):
    uid, ns = "alice", ["user", "alice", "notes"]
    with client_for(workers, uid) as c:
        put_ok(c, ns, "tip", {"text": "Python uses indentation for blocks"}, sync_index=True)
        put_ok(c, ns, "other", {"text": "penguins live on the ice"}, sync_index=True)

    def reads(c):
        return (get(c, ns, "tip").json()["value"]["text"],
                [h["key"] for h in search_ok(c, ["user", uid], query="whitespace-sensitive syntax", limit=1)],
                [h["key"] for h in search_ok(c, ["user", uid], query="indentation", mode="keyword")])

    assert _from_fresh_connections(workers, uid, reads) == [
        ("Python uses indentation for blocks", ["tip"], ["tip"])] * CONNECTIONS

    with client_for(workers, uid) as c:  # a new version replaces the old one's index entries everywhere
        put_ok(c, ns, "tip", {"text": "Rust has a borrow checker"}, sync_index=True)

    def after_update(c):
        return ([h["key"] for h in search_ok(c, ["user", uid], query="indentation", mode="keyword")],
                [h["value"]["text"] for h in search_ok(c, ["user", uid], query="ownership and borrowing", limit=1)])

    assert _from_fresh_connections(workers, uid, after_update) == [([], ["Rust has a borrow checker"])] * CONNECTIONS

    with client_for(workers, uid) as c:
        assert delete(c, ns, "tip").status_code == 204

    def after_delete(c):
        return get(c, ns, "tip").status_code, [h["key"] for h in search_ok(c, ["user", uid], query="borrow checker")]

    assert _from_fresh_connections(workers, uid, after_delete) == [(404, ["other"])] * CONNECTIONS
