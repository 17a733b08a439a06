"""The turn after a changed one (its follower) is indexed again in place, and keyword search finds
it by its own words at every moment of that, on both backends: its keyword document is replaced
(`KeywordIndex.replace_many`), never deleted and then put again. A probing wrapper of the real
keyword index runs the search before and after each of the indexer's writes to it."""

from __future__ import annotations

from typing import Any

from memsvc.core.filters import Filter
from memsvc.core.keywords import term_counts
from memsvc.service.memories import PutMemory
from tests.conftest import alice
from tests.contract.test_message_context import MESSAGES, TRIP, conversation, on, search

TENANT = "acme"


class Probing:
    """The indexer's keyword index, searched for one version by its words around every write."""

    def __init__(self, index: Any, sealer: Any) -> None:
        self._index = index
        self._sealer = sealer
        self.target: tuple[str, list[str]] | None = None  # (memory id, its words' term ids)
        self.seen: list[tuple[str, bool]] = []

    def watch(self, memory_id: str, words: str) -> None:
        self.target = memory_id, self._sealer.term_ids(TENANT, term_counts([words]))

    def _probe(self, when: str) -> None:
        if self.target is not None:
            memory_id, terms = self.target
            result = self._index.query(TENANT, (), Filter(()), terms, 50)
            self.seen.append((when, memory_id in {h.memory_id for h in result.hits}))

    def _around(self, name: str, *args: Any) -> None:
        self._probe(f"before {name}")
        getattr(self._index, name)(*args)
        self._probe(f"after {name}")

    def put_many(self, *args: Any) -> None:
        self._around("put_many", *args)

    def replace_many(self, *args: Any) -> None:
        self._around("replace_many", *args)

    def delete_many(self, *args: Any) -> None:
        self._around("delete_many", *args)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._index, name)


def probing(backend) -> Probing:
    probe = Probing(backend.indexer._keywords, backend.sealer)
    backend.indexer._keywords = probe
    return probe


def test_the_turn_after_a_deleted_one_is_found_by_its_own_words_throughout(backend, clock):
    on(clock, 2023, 5, 8)
    keys = conversation(backend, "s", TRIP)
    backend.drain()
    probe = probing(backend)
    probe.watch(backend.store.get(TENANT, tuple(MESSAGES), keys[2]).id, "send pictures")

    backend.memories.delete(alice(), MESSAGES, keys[1])
    backend.drain()
    assert ("after replace_many", True) in probe.seen  # the follower was indexed again
    assert all(found for _, found in probe.seen), probe.seen
    assert search(backend, "flamingos", mode="keyword") == []  # the deleted turn's words left it


def test_the_turn_after_a_rewritten_one_is_found_by_its_own_words_throughout(backend, clock):
    on(clock, 2023, 5, 8)
    keys = conversation(backend, "s", TRIP)
    backend.drain()
    probe = probing(backend)
    probe.watch(backend.store.get(TENANT, tuple(MESSAGES), keys[2]).id, "send pictures")

    backend.memories.put(alice(), PutMemory(namespace=MESSAGES, key=keys[1], index_fields=["content"],
                                            value={"role": "user", "name": "Maria", "content": "We saw herons."}))
    backend.drain()
    assert ("after replace_many", True) in probe.seen
    assert all(found for _, found in probe.seen), probe.seen
    assert {i.key for i in search(backend, "herons", mode="keyword")} == {keys[1], keys[2]}
    assert search(backend, "flamingos", mode="keyword") == []
