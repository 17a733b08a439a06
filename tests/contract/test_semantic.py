"""Semantic upsert's edges, on both backends: what a plain item in the semantic namespace is, the
keyed lookup by content hash, and two upserts of the same content at once."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor

import pytest

from memsvc.core.errors import NotFound
from memsvc.service.memories import PutMemory
from memsvc.service.semantic import SemanticRef, UpsertSemantic, content_hash
from tests.conftest import alice, bob

NS = ["user", "alice", "semantic"]


def semantic(backend):
    return backend.app.services.semantic


def test_a_plain_item_in_the_semantic_namespace_is_not_a_semantic_memory(backend):
    digest = content_hash("plain")
    backend.memories.put(alice(), PutMemory(namespace=NS, key="e:raw", value={"note": "not an upsert"}))
    backend.memories.put(alice(), PutMemory(namespace=NS, key=f"h:{digest}", value={"content": "plain"}))
    for ref in (SemanticRef(external_id="raw"), SemanticRef(content_hash=digest)):
        with pytest.raises(NotFound):
            semantic(backend).get(alice(), ref)
        semantic(backend).delete(alice(), ref)  # nothing semantic to delete: the plain items stay
    assert backend.memories.get(alice(), NS, "e:raw").value == {"note": "not an upsert"}
    assert semantic(backend).upsert(alice(), UpsertSemantic(content="now it is", external_id="raw")).action == "created"
    assert semantic(backend).get(alice(), SemanticRef(external_id="raw")).content == "now it is"


def test_the_content_hash_lookup_is_keyed_not_a_scan(backend, monkeypatch):
    items = semantic(backend)._items

    def no_scan(*args, **kwargs):
        raise AssertionError("a lookup by content hash read the namespace through")

    monkeypatch.setattr(items, "scan_live", no_scan)
    first = semantic(backend).upsert(alice(), UpsertSemantic(content="lives in Paris", external_id="home"))
    semantic(backend).upsert(alice(), UpsertSemantic(content="lives in Paris", external_id="also-home"))
    got = semantic(backend).get(alice(), SemanticRef(content_hash=first.content_hash))
    assert got.key in ("e:home", "e:also-home") and got.content == "lives in Paris"
    moved = semantic(backend).upsert(alice(), UpsertSemantic(content="lives in Berlin", external_id="home"))
    assert semantic(backend).get(alice(), SemanticRef(content_hash=moved.content_hash)).key == "e:home"
    # "home" no longer has the Paris content; "also-home" still does.
    assert semantic(backend).get(alice(), SemanticRef(content_hash=first.content_hash)).key == "e:also-home"
    semantic(backend).delete(alice(), SemanticRef(content_hash=first.content_hash))
    with pytest.raises(NotFound):
        semantic(backend).get(alice(), SemanticRef(content_hash=first.content_hash))
    with pytest.raises(NotFound):  # another user's pointer space is their own
        semantic(backend).get(bob(), SemanticRef(content_hash=moved.content_hash))
    assert semantic(backend).get(alice(), SemanticRef(external_id="home")).content == "lives in Berlin"


@pytest.mark.parametrize("external_id", [None, "fav"])
def test_two_upserts_of_the_same_content_at_once_create_it_once(backend, monkeypatch, external_id):
    if external_id is not None:
        semantic(backend).upsert(alice(), UpsertSemantic(content="likes coffee", external_id=external_id))
    items = semantic(backend)._items
    real_get = items.get
    both_read = threading.Barrier(2, timeout=60)  # the timeout only keeps a broken run from hanging
    first_reads = iter(range(2))

    def get_together(tenant, namespace, key):
        row = real_get(tenant, namespace, key)
        if next(first_reads, None) is not None:
            both_read.wait()  # both upserts have read the key before either writes
        return row

    monkeypatch.setattr(items, "get", get_together)
    with ThreadPoolExecutor(2) as pool:
        answers = list(pool.map(lambda _: semantic(backend).upsert(
            alice(), UpsertSemantic(content="likes tea", external_id=external_id)), range(2)))
    monkeypatch.undo()
    first_action = "created" if external_id is None else "updated"
    assert sorted(a.action for a in answers) == sorted([first_action, "unchanged"])
    assert answers[0].id == answers[1].id
    ref = SemanticRef(external_id=external_id) if external_id else SemanticRef(content_hash=answers[0].content_hash)
    assert semantic(backend).get(alice(), ref).version == (1 if external_id is None else 2)
