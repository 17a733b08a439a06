"""The local index's ANN graph (a tenant's wide queries above `ann_threshold` vectors): built in
the background while exact search answers, scores always exact, never a deleted or replaced
vector, a short page never returned (exact search answers it), and kept current through writes
made during its build and through another process's writes."""

from __future__ import annotations

import threading

import numpy as np

from memsvc.adapters.local import ann, vector_index
from memsvc.adapters.local.vector_index import LocalVectorIndex
from memsvc.core.filters import Filter, parse_filter
from memsvc.core.models import VectorRef, VectorWrite

DIM = 16
N = 3000


def clustered(n: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    centers = np.random.default_rng(0).standard_normal((60, DIM))
    v = centers[rng.integers(0, 60, n)] + 0.3 * rng.standard_normal((n, DIM))
    return v / np.linalg.norm(v, axis=1, keepdims=True)


def write(i: int, vec, ns=None, attrs=None, memory_id=None) -> VectorWrite:
    return VectorWrite("t", ns or ("user", f"ns{i % 10}"), f"k{i}", memory_id or f"m{i}", 1, attrs or {},
                       (("text", vec),))


def filled(tmp_path, vecs, threshold=1000) -> LocalVectorIndex:
    idx = LocalVectorIndex(tmp_path / "v.db", dimension=DIM, model_id="test", ann_threshold=threshold)
    idx.put_many([write(i, vecs[i], attrs={"rare": i % 500 == 0}) for i in range(len(vecs))])
    return idx


def with_graph(idx: LocalVectorIndex, q) -> None:
    idx.query("t", (), Filter(), q, 10)  # the first wide query queues the build
    assert idx.wait_for_graphs(120)
    assert idx._tenants["t"].graph.ready


def exact(vecs, live, q, k):
    scores = vecs @ (q / np.linalg.norm(q))
    return sorted((i for i in live), key=lambda i: -scores[i])[:k]


def test_wide_queries_use_the_graph_once_built_with_exact_scores_and_high_recall(tmp_path):
    vecs = clustered(N, 1)
    idx = filled(tmp_path, vecs)
    queries = clustered(20, 2)
    before = idx.query("t", (), Filter(), queries[0], 10)  # exact while nothing is built
    assert [h.key for h in before] == [f"k{i}" for i in exact(vecs, range(N), queries[0], 10)]
    with_graph(idx, queries[0])
    asked = []
    real = ann.TenantGraph.candidates
    idx._tenants["t"].graph.candidates = lambda q, count: asked.append(count) or real(idx._tenants["t"].graph, q, count)
    found = 0
    for q in queries:
        hits = idx.query("t", (), Filter(), q, 10)
        assert [h.score for h in hits] == sorted((h.score for h in hits), reverse=True)
        assert np.allclose([h.score for h in hits], [vecs[int(h.key[1:])] @ (q / np.linalg.norm(q)) for h in hits],
                           atol=1e-5)
        found += len({h.key for h in hits} & {f"k{i}" for i in exact(vecs, range(N), q, 10)})
    assert len(asked) == len(queries)  # every one went to the graph
    assert found / (10 * len(queries)) >= 0.95


def test_narrow_scopes_and_small_tenants_stay_exact_and_build_nothing(tmp_path):
    vecs = clustered(N, 3)
    idx = filled(tmp_path, vecs)
    q = clustered(1, 4)[0]
    hits = idx.query("t", ("user", "ns3"), Filter(), q, 10)  # a tenth of the tenant
    assert [h.key for h in hits] == [f"k{i}" for i in exact(vecs, range(3, N, 10), q, 10)]
    assert idx.wait_for_graphs(120) and idx._tenants["t"].graph is None
    small = filled(tmp_path / "small", vecs[:500])
    small.query("t", (), Filter(), q, 10)
    assert small.wait_for_graphs(120) and small._tenants["t"].graph is None


def test_a_short_graph_page_is_answered_exactly(tmp_path):
    """A pushdown filter that 6 rows of 3,000 pass leaves the graph's candidates short of the
    page: exact search answers, so all 6 come back, and a short page still means no more."""
    vecs = clustered(N, 5)
    idx = filled(tmp_path, vecs)
    q = clustered(1, 6)[0]
    with_graph(idx, q)
    hits = idx.query("t", (), parse_filter({"rare": True}), q, 10)
    assert sorted(h.key for h in hits) == sorted(f"k{i}" for i in range(0, N, 500))


def test_deleted_and_replaced_vectors_never_come_back(tmp_path):
    """At once (the changed rows scored exactly beside the graph) and after the background thread
    has moved them into the graph."""
    vecs = clustered(N, 7)
    idx = filled(tmp_path, vecs)
    q = vecs[42]
    with_graph(idx, q)
    assert idx.query("t", (), Filter(), q, 10)[0].key == "k42"
    idx.delete_many([VectorRef("t", "m42", "text")])
    assert "k42" not in {h.key for h in idx.query("t", (), Filter(), q, 10)}
    # m43's field gets another vector; the freed row of m42 is reused by a new memory
    idx.put_many([write(43, -vecs[43]), write(9999, vecs[7], ns=("user", "new"))])
    hits = idx.query("t", (), Filter(), vecs[43], 10)
    assert "k43" not in {h.key for h in hits}
    top = idx.query("t", (), Filter(), vecs[7], 2)
    assert {h.key for h in top} == {"k7", "k9999"} and min(h.score for h in top) > 0.999
    assert idx.wait_for_graphs(120)  # the changed rows, moved into the graph in the background
    t = idx._tenants["t"]
    assert not t.graph.dirty and len(t.graph) == t.live_count
    assert "k42" not in {h.key for h in idx.query("t", (), Filter(), q, 10)}
    assert {h.key for h in idx.query("t", (), Filter(), vecs[7], 2)} == {"k7", "k9999"}


def test_writes_during_the_build_reach_the_graph(tmp_path, monkeypatch):
    """The graph copies rows a chunk at a time; between chunks, rows already copied and rows not
    yet copied are deleted, replaced and added. Once ready, the graph holds exactly the live rows
    with their current vectors."""
    monkeypatch.setattr(vector_index, "_BUILD_CHUNK", 1000)
    vecs = clustered(N, 9)
    idx = filled(tmp_path, vecs)
    real_add = ann.TenantGraph.add
    chunks = []

    def add_then_write(graph, rows, vectors, threads=1):
        real_add(graph, rows, vectors, threads)
        chunks.append(len(rows))
        if len(chunks) == 1:  # rows 0..999 are in, 1000.. are not
            idx.delete_many([VectorRef("t", f"m{i}", "text") for i in (10, 2010)])
            idx.put_many([write(20, -vecs[20]), write(2020, -vecs[2020]), write(7777, vecs[5], ns=("user", "new"))])

    monkeypatch.setattr(ann.TenantGraph, "add", add_then_write)
    with_graph(idx, vecs[0])
    assert chunks[:3] == [1000, 1000, 1000]
    t = idx._tenants["t"]
    assert len(t.graph) == t.live_count == N - 1  # 3000 - 2 deleted + 1 new
    for i in (10, 2010, 20, 2020):
        assert f"k{i}" not in {h.key for h in idx.query("t", (), Filter(), vecs[i], 10)}
    assert {h.key for h in idx.query("t", (), Filter(), vecs[5], 2)} == {"k5", "k7777"}


def test_another_process_writes_reach_this_ones_graph(tmp_path):
    vecs = clustered(N, 11)
    a = filled(tmp_path, vecs)
    b = LocalVectorIndex(tmp_path / "v.db", dimension=DIM, model_id="test", ann_threshold=1000)
    with_graph(a, vecs[0])
    b.delete_many([VectorRef("t", "m100", "text")])
    b.put_many([write(8888, vecs[200], ns=("user", "new"))])
    assert "k100" not in {h.key for h in a.query("t", (), Filter(), vecs[100], 10)}
    assert {h.key for h in a.query("t", (), Filter(), vecs[200], 2)} == {"k200", "k8888"}
    assert a.wait_for_graphs(120)
    assert len(a._tenants["t"].graph) == a._tenants["t"].live_count == N and not a._tenants["t"].graph.dirty


def test_the_index_can_be_imported_before_the_embedders_runtime():
    """onnxruntime crashes at import in a process that loaded usearch's extension first; the
    index's module loads them in the safe order, whatever the process imports next."""
    import subprocess
    import sys

    done = subprocess.run([sys.executable, "-c", "import memsvc.adapters.local.vector_index; import onnxruntime"],
                          capture_output=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]


def test_work_asked_for_while_its_job_runs_gets_another_pass_and_wait_survives_close():
    builder = ann.GraphBuilder()
    started, release, runs = threading.Event(), threading.Event(), []

    def job():
        runs.append(len(runs))
        started.set()
        release.wait(10)

    builder.build("t (changes)", job)
    assert started.wait(10)
    builder.build("t (changes)", job)  # rows changed after the running job's last look
    builder.build("t (changes)", job)  # already queued: one more pass is enough
    release.set()
    assert builder.wait(10) and runs == [0, 1]

    blocker = threading.Event()
    builder.build("a", lambda: blocker.wait(10))
    builder.build("b", lambda: None)  # queued behind "a", cancelled by close
    builder.close()
    blocker.set()
    assert builder.wait(10)
