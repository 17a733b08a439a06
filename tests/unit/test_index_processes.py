"""Two index instances on one file stand for two `memsvc serve` worker processes: each answers
with what the other wrote and deleted, and one that fell too far behind loads everything again."""

from __future__ import annotations

import numpy as np
import pytest

from memsvc.adapters.local import index_changes
from memsvc.adapters.local.keyword_index import LocalKeywordIndex
from memsvc.adapters.local.vector_index import LocalVectorIndex
from memsvc.core.filters import Filter
from memsvc.core.models import KeywordDoc, VectorRef, VectorWrite

V = np.eye(4)[0]


def vectors(tmp_path) -> LocalVectorIndex:
    return LocalVectorIndex(tmp_path / "vectors.db", dimension=4, model_id="test")


def vwrite(i: int, tenant: str = "t") -> VectorWrite:
    return VectorWrite(tenant, ("user", "a"), f"k{i}", f"m{i}", 1, {}, (("text", V + 0.01 * i), ("title", V)))


def keys(index: LocalVectorIndex, tenant: str = "t") -> list[str]:
    return sorted({h.key for h in index.query(tenant, (), Filter(), V, 100)})


def kdoc(i: int) -> KeywordDoc:
    return KeywordDoc("t", ("user", "a"), f"k{i}", f"m{i}", 1, {}, {"apple": 1, f"w{i}": 1}, 2)


def kkeys(index: LocalKeywordIndex) -> list[str]:
    return sorted(h.key for h in index.query("t", (), Filter(), ["apple"], 100).hits)


def test_vector_writes_and_deletes_of_one_process_reach_the_other(tmp_path):
    a, b = vectors(tmp_path), vectors(tmp_path)
    a.put_many([vwrite(1), vwrite(2)])
    b.put_many([vwrite(3)])
    assert keys(a) == keys(b) == ["k1", "k2", "k3"]
    b.delete_many([VectorRef("t", "m1", "text"), VectorRef("t", "m1", "title")])
    a.delete_many([VectorRef("t", "m3", "title")])  # one field of two: the other still answers
    assert keys(a) == keys(b) == ["k2", "k3"]
    assert a.memory_ids("t") == b.memory_ids("t") == {"m2", "m3"}
    assert b.vectors_of("t", [("m3", "title"), ("m3", "text")]).keys() == {("m3", "text")}
    # a new version of m2's field replaces its row in both
    a.put_many([VectorWrite("t", ("user", "a"), "k2", "m2", 1, {}, (("text", np.eye(4)[1]),))])
    assert b.vectors_of("t", [("m2", "text")])[("m2", "text")] == [0.0, 1.0, 0.0, 0.0]
    assert len(b.query("t", (), Filter(), np.eye(4)[1], 100)) == 3  # m2 text and title, m3 text


def test_a_vector_index_too_far_behind_loads_everything_again(tmp_path, monkeypatch):
    monkeypatch.setattr(index_changes, "KEEP", 3)
    a, b = vectors(tmp_path), vectors(tmp_path)
    a.put_many([vwrite(1)])
    assert keys(b) == ["k1"]
    a.put_many([vwrite(i) for i in range(2, 6)])  # 8 changes, 3 kept
    a.delete_many([VectorRef("t", "m1", "text"), VectorRef("t", "m1", "title")])
    assert keys(b) == ["k2", "k3", "k4", "k5"]


def test_keyword_writes_and_deletes_of_one_process_reach_the_other(tmp_path):
    a, b = LocalKeywordIndex(tmp_path / "keywords.db"), LocalKeywordIndex(tmp_path / "keywords.db")
    a.put_many([kdoc(1), kdoc(2)])
    b.put_many([kdoc(3)])
    assert kkeys(a) == kkeys(b) == ["k1", "k2", "k3"]
    b.delete_many("t", ["m2"])
    assert kkeys(a) == kkeys(b) == ["k1", "k3"]
    assert a.delete_tenant("t") == 2
    assert kkeys(b) == [] and b.memory_ids("t") == set()


def test_a_keyword_index_too_far_behind_loads_everything_again(tmp_path, monkeypatch):
    monkeypatch.setattr(index_changes, "KEEP", 2)
    a, b = LocalKeywordIndex(tmp_path / "keywords.db"), LocalKeywordIndex(tmp_path / "keywords.db")
    a.put_many([kdoc(1)])
    assert kkeys(b) == ["k1"]
    a.put_many([kdoc(2), kdoc(3), kdoc(4)])
    a.delete_many("t", ["m1"])
    assert kkeys(b) == ["k2", "k3", "k4"]


@pytest.mark.parametrize("kind", ["vectors", "keywords"])
def test_the_change_log_keeps_only_the_newest_changes(tmp_path, monkeypatch, kind):
    monkeypatch.setattr(index_changes, "KEEP", 5)
    path = tmp_path / f"{kind}.db"
    index = vectors(tmp_path) if kind == "vectors" else LocalKeywordIndex(path)

    def write(items):
        if kind == "vectors":
            index.put_many([vwrite(i) for i in items])  # two fields: two changes an item
        else:
            index.put_many([kdoc(i) for i in items])

    far_behind = index_changes.IndexChanges(path)  # it looks first now, and next after 20 items
    write(range(20))
    assert far_behind.latest() == (40 if kind == "vectors" else 20)
    write([20, 21])
    near = index_changes.IndexChanges(path)
    write([22, 23])
    assert near.behind() and near.take() == {"t": {"m22", "m23"}} and not near.behind()
    assert far_behind.take() is None and not far_behind.behind()


def test_field_tokens_of_one_process_reach_the_other_and_a_keyword_write_sends_nobody_catching_up(tmp_path):
    from memsvc.core.models import FieldDoc

    a, b = LocalKeywordIndex(tmp_path / "keywords.db"), LocalKeywordIndex(tmp_path / "keywords.db")
    ns = ("user", "a")
    a.put_many([], [FieldDoc("t", ns, "m1", frozenset({"tok-red"})), FieldDoc("t", ns, "m2", frozenset({"tok-blue"}))])
    seen = b.field_holders("t", ns, ["tok-red"])
    assert seen.indexed(ns, "m1") and "tok-red" in seen.tokens_held(ns, "m1")
    assert "tok-red" not in seen.tokens_held(ns, "m2")
    a.delete_many("t", ["m1"])
    assert not b.field_holders("t", ns, ["tok-red"]).indexed(ns, "m1")
    a.put_many([kdoc(3)])  # the keyword documents keep a log of their own
    assert not b._fields._changes.behind()
