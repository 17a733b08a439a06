"""`VectorIndex.mean_direction` and `cosines` (hybrid's distinct cosine, issue 23) on both
backends: each stored vector's cosine with the mean direction of a page of others, as
`core.ranking` reads it from the stored vectors; absent memories left out; another tenant's
vectors never read."""

from __future__ import annotations

import pytest

from memsvc.core.filters import parse_filter
from memsvc.core.ranking import commonness, mean_direction
from memsvc.service.memories import PutMemory
from tests.conftest import alice

TEXTS = ["hiking in the alps", "hiking boots and maps", "a recipe for bread", "bread and butter", "alps in winter"]


@pytest.fixture
def refs(backend):
    for n, text in enumerate(TEXTS):
        backend.memories.put(alice(), PutMemory(namespace=["user", "alice", "notes"], key=f"k{n}",
                                                value={"text": text}, sync_index=True))
    query = backend.embedder.embed(["hiking alps bread"])[0]
    hits = backend.vectors.query(alice().tenant_id, ("user", "alice"), parse_filter({}), query, 10)
    return [(hit.memory_id, hit.field) for hit in hits]


def test_is_the_cosine_with_the_pages_mean_direction(backend, refs):
    tenant = alice().tenant_id
    page, asked = refs[:3], refs
    stored = backend.vectors.vectors_of(tenant, refs)
    expected = commonness(mean_direction([stored[ref] for ref in page]), [stored[ref] for ref in asked])
    direction = backend.vectors.mean_direction(tenant, page)
    assert direction == pytest.approx(mean_direction([stored[ref] for ref in page]), abs=1e-6)
    query = stored[refs[-1]]
    found = backend.vectors.cosines(tenant, [direction, query], asked)
    assert list(found) == asked
    assert [found[ref][0] for ref in asked] == pytest.approx(expected, abs=1e-5)
    assert [found[ref][1] for ref in asked] == pytest.approx(commonness(query, [stored[ref] for ref in asked]),
                                                             abs=1e-5)
    assert found[refs[-1]][1] == pytest.approx(1.0, abs=1e-5)  # a vector with itself
    assert found[page[0]][0] > min(c for c, _ in found.values())  # the page's own lean toward its mean more


def test_absent_memories_are_left_out_and_other_tenants_see_nothing(backend, refs):
    tenant = alice().tenant_id
    gone = ("no-such-memory", refs[0][1])
    stored = backend.vectors.vectors_of(tenant, refs[:2])
    direction = backend.vectors.mean_direction(tenant, [*refs[:2], gone])
    assert direction == pytest.approx(mean_direction([stored[ref] for ref in refs[:2]]), abs=1e-6)
    found = backend.vectors.cosines(tenant, [direction], [refs[0], gone])
    assert list(found) == [refs[0]]
    assert backend.vectors.mean_direction("another-tenant", refs) is None
    assert backend.vectors.cosines("another-tenant", [direction], refs) == {}
