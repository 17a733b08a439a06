"""`memsvc reindex` (issue 23): a data dir's items embedded again by another model, the item store
as the source; the old model's vector index is gone, nothing else changes."""

from __future__ import annotations

import pytest

from memsvc.adapters.local.vector_index import LocalVectorIndex
from memsvc.bootstrap import build_local
from memsvc.adapters.local.data_dir_lock import DataDirBusy, data_dir_lock
from memsvc.local_reindex import reindex
from memsvc.service.memories import PutMemory
from memsvc.service.search import SearchQuery
from tests.conftest import alice, bob, local_data_dir
from tests.fakes.embedder import HashEmbedder


class OtherModel(HashEmbedder):
    model_id = "test/hash-bow-64-other"


NS = ["user", "alice", "notes"]


@pytest.fixture
def data_dir(tmp_path):
    data_dir = local_data_dir(tmp_path)
    app = build_local(data_dir, embedder=HashEmbedder(), start_workers=False)
    for n in range(300):  # more than one batch
        app.services.memories.put(alice(), PutMemory(namespace=NS, key=f"k{n}", value={"content": f"note {n} about hiking"},
                                                     sync_index=True))
    app.services.memories.put(bob(), PutMemory(namespace=["user", "bob", "notes"], key="b", value={"content": "hiking"},
                                               sync_index=True))
    app.close()
    return data_dir


def test_another_model_cannot_open_the_old_vectors(data_dir):
    with pytest.raises(RuntimeError, match="holds vectors of"):
        build_local(data_dir, embedder=OtherModel(), start_workers=False)


def test_reindex_embeds_every_item_with_the_new_model(data_dir):
    report = reindex(data_dir, "auto", embedder=OtherModel())
    assert (report.model_id, report.indexed, report.quarantined, report.left) == ("test/hash-bow-64-other", 301, 0, 0)
    assert LocalVectorIndex.stored_model(data_dir / "vectors.db") == "test/hash-bow-64-other"
    app = build_local(data_dir, embedder=OtherModel(), start_workers=False)
    try:
        assert len(app.vectors.memory_ids(alice().tenant_id)) == 301  # both users' items: one tenant
        found = app.services.search.search(alice(), SearchQuery(namespace_prefix=["user", "alice"], query="note 7 hiking",
                                                                mode="semantic", limit=5))
        assert "k7" in {m.key for m in found}
        assert app.services.memories.get(alice(), NS, "k7").value == {"content": "note 7 about hiking"}
        theirs = app.services.search.search(bob(), SearchQuery(namespace_prefix=["user", "bob"], query="hiking",
                                                               mode="semantic"))
        assert [m.key for m in theirs] == ["b"]  # each tenant's and user's items stay their own
    finally:
        app.close()


def test_running_it_twice_changes_nothing_more(data_dir):
    reindex(data_dir, "auto", embedder=OtherModel())
    again = reindex(data_dir, "auto", embedder=OtherModel())
    assert (again.indexed, again.left) == (301, 0)


def test_auto_keeps_the_model_the_vectors_were_made_with(data_dir, monkeypatch):
    chosen = []
    monkeypatch.setattr("memsvc.bootstrap.local_embedder", lambda d, model: chosen.append(
        LocalVectorIndex.stored_model(d / "vectors.db")) or OtherModel())
    reindex(data_dir, "auto")
    assert chosen == ["test/hash-bow-64"]  # read before the old vectors were deleted


def test_it_never_runs_beside_a_server_of_the_data_dir(data_dir):
    with data_dir_lock(data_dir, exclusive=False):  # what `memsvc serve` holds
        with pytest.raises(DataDirBusy):
            reindex(data_dir, "auto", embedder=OtherModel())
    assert LocalVectorIndex.stored_model(data_dir / "vectors.db") == "test/hash-bow-64"  # untouched
    with data_dir_lock(data_dir, exclusive=True), pytest.raises(DataDirBusy):  # and no server beside a reindex
        with data_dir_lock(data_dir, exclusive=False):
            pass
