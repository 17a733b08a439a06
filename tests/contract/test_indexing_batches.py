"""How the indexer batches its work (issue 29), on both backends: a feed batch's texts, of several
tenants, are embedded together and each vector goes to its own memory; the batch is written with
one write per store (two when it is embedded in several chunks: its first at once); and an update embeds only the fields whose text changed, the previous
version's vectors of the others taken over, so the version is found by meaning through every
field exactly as if each had been embedded again, and no other key's or tenant's vectors are ever
taken."""

from __future__ import annotations

from memsvc.core.models import Caller
from memsvc.service.memories import PutMemory
from memsvc.service.search import SearchQuery
from tests.conftest import alice, bob

NS = ("user", "alice", "notes")
FIELDS = ["title", "body"]


def put(backend, value, caller=None, ns=NS, key="trip"):
    backend.memories.put(caller or alice(), PutMemory(namespace=ns, key=key, value=value, index_fields=FIELDS))
    backend.drain()


def embedded(backend) -> list[str]:
    return [text for call in backend.embedder.calls for text in call]


def found(backend, query, caller=None, prefix=NS):
    result = backend.search.search(caller or alice(), SearchQuery(namespace_prefix=list(prefix), query=query,
                                                                  mode="semantic"))
    return [(r.key, r.value) for r in result]


def test_an_update_embeds_only_the_changed_field_and_is_found_through_both(backend):
    put(backend, {"title": "Lisbon trip", "body": "We booked a flat near the river.", "rating": 3})
    backend.embedder.calls.clear()
    put(backend, {"title": "Lisbon trip", "body": "We moved to a hotel by the castle.", "rating": 5})
    assert embedded(backend) == ["We moved to a hotel by the castle."]
    assert found(backend, "Lisbon trip")[0] == ("trip", {"title": "Lisbon trip",
                                                          "body": "We moved to a hotel by the castle.", "rating": 5})
    assert found(backend, "hotel by the castle")[0][0] == "trip"
    # Exactly the vector the model gives: the taken-over one ranks as a fresh one would.
    title_hits = backend.search.search(alice(), SearchQuery(namespace_prefix=list(NS), query="Lisbon trip",
                                                            mode="semantic"))
    assert abs(title_hits[0].score - 1.0) < 1e-5


def test_an_update_of_a_non_indexed_field_embeds_nothing(backend):
    put(backend, {"title": "Dentist", "body": "Appointment on Friday at nine.", "done": False})
    backend.embedder.calls.clear()
    put(backend, {"title": "Dentist", "body": "Appointment on Friday at nine.", "done": True})
    assert embedded(backend) == []
    assert found(backend, "Appointment on Friday at nine.")[0] == (
        "trip", {"title": "Dentist", "body": "Appointment on Friday at nine.", "done": True})


def test_a_changed_text_is_embedded_again_and_the_old_text_no_longer_finds_it(backend):
    put(backend, {"title": "Garden", "body": "Plant tomatoes in spring."})
    backend.embedder.calls.clear()
    put(backend, {"title": "Kitchen", "body": "Paint the cupboards green."})
    assert sorted(embedded(backend)) == ["Kitchen", "Paint the cupboards green."]
    hits = backend.search.search(alice(), SearchQuery(namespace_prefix=list(NS), query="Plant tomatoes in spring.",
                                                      mode="semantic"))
    assert all(h.score < 0.99 for h in hits)


def test_vectors_are_taken_over_only_from_the_same_key_of_the_same_user(backend):
    """Another user's identical text, and another key's, are embedded for their own version."""
    value = {"title": "Shared words", "body": "Exactly the same sentence."}
    put(backend, value)
    backend.embedder.calls.clear()
    put(backend, value, caller=bob(), ns=("user", "bob", "notes"))
    put(backend, value, key="other")
    assert sorted(embedded(backend)) == sorted(["Shared words", "Exactly the same sentence."] * 2)
    bobs = found(backend, "Exactly the same sentence.", caller=bob(), prefix=("user", "bob"))
    assert [k for k, _ in bobs] == ["trip"]
    assert sorted(k for k, _ in found(backend, "Exactly the same sentence.")) == ["other", "trip"]


def test_a_batch_of_several_tenants_is_embedded_together_and_each_vector_is_its_own_memorys(backend):
    callers = [alice(), bob(), Caller("other-tenant", "carol")]
    texts = {}
    for n in range(30):
        caller = callers[n % 3]
        ns = ("user", caller.user_id, "notes")
        text = texts[(caller.tenant_id, ns, f"k{n}")] = f"note {n} about topic {n * 7 % 11} for {caller.user_id}"
        backend.memories.put(caller, PutMemory(namespace=ns, key=f"k{n}", value={"text": text}, index_fields=["text"]))
    writes: list[int] = []
    put_many = backend.vectors.put_many
    backend.vectors.put_many = lambda batch: (writes.append(len(batch)), put_many(batch))[1]
    backend.embedder.calls.clear()
    backend.drain()
    assert sorted(t for call in backend.embedder.calls for t in call) == sorted(texts.values())
    assert sum(writes) == 30
    two_tenants = [call for call in backend.embedder.calls
                   if any("carol" in t for t in call) and any("alice" in t for t in call)]
    if backend.local is None:  # a stream batch holds every tenant's records: one call for two tenants' texts
        assert two_tenants
        # One write, or two when it is embedded in several chunks: the first chunk's at once, then the rest
        assert len(writes) <= 2
    else:  # locally tenants take turns (`memsvc.service.feed`): a batch is one tenant's
        assert not two_tenants and len(writes) <= 2 * 2
    for (tenant, ns, key), text in texts.items():
        item = backend.store.get(tenant, ns, key)
        (stored,) = backend.vectors.vectors_of(tenant, [(item.id, name) for name in item.indexed_fields]).values()
        expected = backend.embedder._one(text)
        assert max(abs(a - b) for a, b in zip(stored, expected)) < 1e-5, (tenant, key)
