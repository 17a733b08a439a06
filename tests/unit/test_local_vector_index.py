"""The local vector index: exact cosine, prefix-bounded, durable, and exact even when the
pushed-down filter rejects most of the best candidates."""

from __future__ import annotations

import numpy as np

from benchmarks.vector_migration import FIRST_LAYOUT
from memsvc.adapters.local.vector_index import LocalVectorIndex
from memsvc.core.filters import Filter, parse_filter
from memsvc.core.models import VectorRef, VectorWrite


def index(tmp_path, dim=8):
    return LocalVectorIndex(tmp_path / "v.db", dimension=dim, model_id="test")


def test_rare_pushdown_match_is_still_found_in_exact_order(tmp_path):
    idx = index(tmp_path)
    rng = np.random.default_rng(7)
    q = rng.standard_normal(8)
    for i in range(2000):
        rare = i % 400 == 0  # 5 of 2000 carry the attribute
        idx.put_many([VectorWrite("t", ("user", "a"), f"k{i}", f"m{i}", 1, {"rare": rare},
                                  (("text", rng.standard_normal(8)),))])
    hits = idx.query("t", ("user", "a"), parse_filter({"rare": True}), q, 5)
    assert sorted(h.key for h in hits) == sorted(f"k{i}" for i in range(0, 2000, 400))
    assert [h.score for h in hits] == sorted((h.score for h in hits), reverse=True)


def test_prefix_and_tenant_bound_and_durable(tmp_path):
    idx = index(tmp_path)
    v = np.eye(8)[0]
    idx.put_many([VectorWrite("t", ("user", "alice"), "a", "m1", 1, {}, (("x", v),))])
    idx.put_many([VectorWrite("t", ("user", "alicea"), "b", "m2", 1, {}, (("x", v),))])
    idx.put_many([VectorWrite("u", ("user", "alice"), "c", "m3", 1, {}, (("x", v),))])
    assert [h.key for h in idx.query("t", ("user", "alice"), Filter(), v, 10)] == ["a"]
    idx.delete_many([VectorRef("t", "m2", "x")])
    idx.close()
    reopened = index(tmp_path)
    assert [h.memory_id for h in reopened.query("t", (), Filter(), v, 10)] == ["m1"]
    assert [h.key for h in reopened.query("u", (), Filter(), v, 10)] == ["c"]


def test_vectors_of_returns_stored_unit_vectors_of_that_tenant_only(tmp_path):
    vectors = index(tmp_path, 2)
    vectors.put_many([VectorWrite("t1", ("a",), "k", "m1", 1, {}, (("f", [3.0, 4.0]),))])
    assert vectors.vectors_of("t1", [("m1", "f"), ("m1", "g"), ("m2", "f")]) == {("m1", "f"): [0.6000000238418579,
                                                                                      0.800000011920929]}
    assert vectors.vectors_of("t2", [("m1", "f")]) == {}


def test_narrow_and_wide_scopes_rank_exactly_alike(tmp_path):
    """A namespace among many is scored on its own rows, the whole tenant on the full matrix:
    both give the brute-force ranking of the rows in scope, deleted rows left out."""
    idx = index(tmp_path)
    rng = np.random.default_rng(11)
    vecs = rng.standard_normal((400, 8))
    idx.put_many([VectorWrite("t", ("user", f"ns{i % 20}"), f"k{i}", f"m{i}", 1, {}, (("text", vecs[i]),))
                  for i in range(400)])
    idx.delete_many([VectorRef("t", "m3", "text")])
    q = rng.standard_normal(8)
    unit = vecs / np.linalg.norm(vecs, axis=1, keepdims=True)
    cosine = unit @ (q / np.linalg.norm(q))
    for prefix, members in ((("user", "ns3"), range(3, 400, 20)), ((), range(400))):
        expected = sorted((i for i in members if i != 3), key=lambda i: -cosine[i])[:7]
        hits = idx.query("t", prefix, Filter(), q, 7)
        assert [h.key for h in hits] == [f"k{i}" for i in expected]
        assert np.allclose([h.score for h in hits], cosine[expected], atol=1e-5)


def test_queries_run_side_by_side_and_see_whole_writes(tmp_path, monkeypatch):
    """Two queries are inside the index at once (each waits for the other there: a mutex would
    break the barrier), and a write running meanwhile is seen whole or not at all."""
    import threading

    idx = index(tmp_path)
    v = np.eye(8)[0]
    idx.put_many([VectorWrite("t", ("user", "a"), "k0", "m0", 1, {}, (("x", v),))])
    both_inside = threading.Barrier(2, timeout=30)
    real_hits = LocalVectorIndex._hits

    def meeting_hits(*args):
        both_inside.wait()
        return real_hits(*args)

    monkeypatch.setattr(LocalVectorIndex, "_hits", staticmethod(meeting_hits))
    answers: list[list[str]] = []
    queries = [threading.Thread(target=lambda: answers.append([h.key for h in idx.query("t", (), Filter(), v, 10)]))
               for _ in range(2)]
    for t in queries:
        t.start()
    for t in queries:
        t.join(30)
    assert not both_inside.broken
    assert answers == [["k0"], ["k0"]]
    monkeypatch.setattr(LocalVectorIndex, "_hits", staticmethod(real_hits))

    def write(i: int) -> None:  # 300 rows: the matrix grows (256 rows at first) while queries read
        idx.put_many([VectorWrite("t", ("user", "a"), f"k{i}", f"m{i}", 1, {}, (("x", v),))])

    seen: list[int] = []
    writer = threading.Thread(target=lambda: [write(i) for i in range(1, 300)])
    writer.start()
    while writer.is_alive():
        seen.append(len(idx.query("t", (), Filter(), v, 1000)))
    writer.join()
    assert seen == sorted(seen) and len(idx.query("t", (), Filter(), v, 1000)) == 300


def test_scope_rows_come_from_namespace_lists_and_match_a_scan_of_every_row(tmp_path):
    """Per-namespace row lists and per-prefix namespace sets give, for narrow and wide prefixes,
    nested ones and a sibling that only shares characters ("a" vs "ab"), exactly the live rows a
    scan of every row finds, after deletes and the reuse of freed rows."""
    from memsvc.core.namespaces import is_under

    idx = index(tmp_path)
    rng = np.random.default_rng(5)
    spaces = [("u", "a", "x"), ("u", "a", "y"), ("u", "ab"), ("u", "a"), ("v", "a")] + [("w", str(i)) for i in range(40)]
    writes = [VectorWrite("t", spaces[i % len(spaces)], f"k{i}", f"m{i}", 1, {}, (("text", rng.standard_normal(8)),))
              for i in range(900)]
    idx.put_many(writes)
    idx.delete_many([VectorRef("t", f"m{i}", "text") for i in range(0, 900, 7)])
    idx.put_many([VectorWrite("t", ("u", "a", "y"), f"n{i}", f"n{i}", 1, {}, (("text", rng.standard_normal(8)),))
                  for i in range(50)])  # take freed rows, in another namespace than their last owner
    t = idx._tenants["t"]
    for prefix in ((), ("u",), ("u", "a"), ("u", "a", "x"), ("u", "ab"), ("v",), ("w", "3"), ("w",), ("none",)):
        scanned = [i for i in range(t.size) if t.live[i] and is_under(t.memories[t.owner[i][0]].ns, prefix)]
        assert t.rows_under(prefix).tolist() == scanned, prefix
    narrow = idx.query("t", ("u", "a", "x"), Filter(), rng.standard_normal(8), 1000)
    assert {h.namespace for h in narrow} == {("u", "a", "x")} and len(narrow) == len(t.rows_under(("u", "a", "x")))


def test_a_file_of_the_first_layout_is_converted_in_place_and_keeps_every_vector(tmp_path):
    """The first layout (a WITHOUT ROWID table, every row spilled to an overflow page) becomes a
    rowid table on open: every row kept, with its owner, namespace and attributes; the change log's
    triggers work again, so a second process sees the first one's writes."""
    import json
    import sqlite3

    from memsvc.adapters.local.index_changes import changes_schema

    rng = np.random.default_rng(3)
    vecs = rng.standard_normal((300, 8)).astype(np.float32)
    vecs /= np.linalg.norm(vecs, axis=1, keepdims=True)
    old = sqlite3.connect(tmp_path / "v.db", isolation_level=None)
    old.executescript(FIRST_LAYOUT + changes_schema("vectors"))
    old.execute("INSERT INTO meta VALUES ('embedding', ?)", (json.dumps({"model": "test", "dimension": 8}),))
    old.executemany("INSERT INTO vectors VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                    [("t" if i % 3 else "u", f"m{i}", "text", f"user\x1ens{i % 4}", f"k{i}", 2,
                      json.dumps({"rare": i == 7}), vecs[i].tobytes()) for i in range(300)])
    old.close()

    idx = index(tmp_path)
    table = sqlite3.connect(tmp_path / "v.db").execute("SELECT sql FROM sqlite_master WHERE name = 'vectors'").fetchone()
    assert "WITHOUT ROWID" not in table[0].upper()
    assert idx.memory_ids("t") | idx.memory_ids("u") == {f"m{i}" for i in range(300)}
    assert idx.vectors_of("t", [("m1", "text")]) == {("m1", "text"): vecs[1].tolist()}
    [hit] = idx.query("t", ("user", "ns3"), parse_filter({"rare": True}), vecs[7], 10)
    assert (hit.memory_id, hit.key, hit.version, hit.namespace) == ("m7", "k7", 2, ("user", "ns3"))
    assert hit.score > 0.999
    other = index(tmp_path)  # a second process on the converted file
    idx.put_many([VectorWrite("t", ("user", "new"), "kn", "mn", 1, {}, (("text", vecs[0]),))])
    idx.delete_many([VectorRef("t", "m1", "text")])
    assert "mn" in other.memory_ids("t") and "m1" not in other.memory_ids("t")
