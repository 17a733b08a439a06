"""The indexer's pipeline: a batch of changes cut into chunks, the chunks embedded on a pool several
at once, then the batch's indexes written together (chunk by chunk when that fails). Over the
local adapters, with a scripted fake embedder."""

from __future__ import annotations

import os
import sys
import threading
from concurrent.futures import ThreadPoolExecutor

import pytest

from memsvc.adapters.local.low_priority_pool import NICENESS, low_priority_pool
from memsvc.core.errors import RateLimited
from memsvc.service.feed import FeedConsumer
from memsvc.service.indexer import SPREAD_CHARS, Indexer
from memsvc.service.memories import PutMemory
from tests.conftest import alice
from tests.fakes.embedder import HashEmbedder

NS = ("user", "alice", "notes")


class ScriptedEmbedder(HashEmbedder):
    """Fails any call holding a text of `failing`, throttles any holding one of `throttled`, runs
    `during` (once) inside the call holding its text, and records which thread made each call."""

    def __init__(self) -> None:
        super().__init__()
        self.failing: set[str] = set()
        self.throttled: set[str] = set()
        self.during: dict[str, object] = {}
        self.threads: list[int] = []

    def embed(self, texts):
        self.threads.append(threading.get_ident())
        if self.failing & set(texts):
            self.calls.append(list(texts))
            raise RuntimeError("the model failed (injected)")
        if self.throttled & set(texts):
            self.calls.append(list(texts))
            raise RateLimited("throttled (injected)", retry_after_seconds=1)
        for text in texts:
            if text in self.during:
                self.during.pop(text)()
        return super().embed(texts)


@pytest.fixture
def app(local_app):
    return local_app


@pytest.fixture
def embedder():
    return ScriptedEmbedder()


@pytest.fixture
def pool():
    with ThreadPoolExecutor(max_workers=2) as executor:
        yield executor


def pipelined(app, embedder, pool, chunk_texts=2) -> Indexer:
    return Indexer(app.store, app.vectors, embedder, app.sealer, app.keywords, app.settings, embed_pool=pool,
                   chunk_texts=chunk_texts, lookahead=2)


def put(app, key, text, **kw):
    return app.services.memories.put(alice(), PutMemory(namespace=NS, key=key, value={"text": text}, **kw))


def changes(app):
    return app.store.read("indexer", 10_000)


def indexed_texts(embedder) -> list[str]:
    return [text for call in embedder.calls for text in call]


@pytest.mark.parametrize("with_pool", [True, False], ids=["pool", "inline"])
def test_every_item_is_indexed_once_at_its_latest_version(app, embedder, pool, with_pool):
    latest, texts = {}, {}
    for key, text in [*((f"k{n}", f"first text {n}") for n in range(7)),
                      *((f"k{n}", f"second text {n}") for n in range(0, 7, 2)), ("k6", "third text 6")]:
        latest[key], texts[key] = put(app, key, text), text
    app.services.memories.delete(alice(), NS, "k5")
    del latest["k5"], texts["k5"]
    indexer = pipelined(app, embedder, pool if with_pool else None)

    assert indexer.apply(changes(app)) == set()

    assert sorted(indexed_texts(embedder)) == sorted(texts.values())
    assert all(len(call) <= 2 for call in embedder.calls)  # a chunk per embedder call
    assert app.vectors.memory_ids("acme") == {m.id for m in latest.values()}
    assert app.keywords.memory_ids("acme") == {m.id for m in latest.values()}
    field = app.sealer.field_id("acme", "text")
    for key, memory in latest.items():
        row = app.store.get("acme", NS, key)
        assert (row.id, tuple(row.indexed_fields)) == (memory.id, (field,))


def test_a_backlog_is_embedded_on_the_pool_and_a_trickle_or_inline_indexing_on_the_callers_thread(
        app, embedder, pool):
    for key in "abc":
        put(app, key, f"backlog {key}")
    indexer = pipelined(app, embedder, pool)
    indexer.apply(changes(app))  # two chunks
    assert len(embedder.threads) == 2 and threading.get_ident() not in embedder.threads

    embedder.threads.clear()
    put(app, "d", "a fresh write")
    put(app, "e", "another one")
    indexer.apply(changes(app))  # one chunk: the feed's own thread, at its priority
    put(app, "f", "indexed inline")  # as a request with sync_index does: never behind the backlog's chunks
    indexer.index_items([app.store.get("acme", NS, "f")])
    assert embedder.threads == [threading.get_ident()] * 2
    assert len(app.vectors.memory_ids("acme")) == 6


def test_a_failing_chunk_runs_its_items_alone_and_quarantines_the_one_that_fails_alone(app, embedder, pool, clock):
    for n in range(6):
        put(app, f"k{n}", f"text {n}")
    embedder.failing = {"text 2"}  # k2's chunk (k2, k3) fails; k3 succeeds alone, k2 fails alone
    indexer = pipelined(app, embedder, pool)
    batch = changes(app)

    assert indexer.apply(batch) == set()  # nothing holds the feed up

    k2 = app.store.get("acme", NS, "k2")
    assert (k2.indexed_fields, k2.index_error) == (None, "the embedding model failed on it (RuntimeError)")
    assert app.store.pending_index("acme", clock.now()) == 0
    assert app.store.quarantined("acme", clock.now(), 10) == (1, [k2])
    assert {app.store.get("acme", NS, f"k{n}").id for n in (0, 1, 3, 4, 5)} == app.vectors.memory_ids("acme")

    embedder.failing = set()
    embedder.calls.clear()
    assert app.store.release(k2)
    assert indexer.apply(changes(app)[-2:]) == set()  # its quarantine (the timeline's) and its retry
    assert indexed_texts(embedder) == ["text 2"]  # nothing else is embedded twice
    assert app.store.get("acme", NS, "k2").id in app.vectors.memory_ids("acme")


def test_a_batch_is_written_at_once_after_its_first_chunk_and_a_write_failing_sends_only_its_chunks_items_alone(
        app, embedder, pool, clock):
    for n in range(6):
        put(app, f"k{n}", f"text {n}")
    poison = app.store.get("acme", NS, "k2").id
    writes: list[list[str]] = []
    put_many = app.keywords.put_many

    def refusing_k2(docs, fields=()):  # fails whenever it holds k2's document, as a store might on its data
        writes.append([d.key for d in docs])
        if any(d.memory_id == poison for d in docs):
            raise ValueError("refused (injected)")
        put_many(docs, fields)

    app.keywords.put_many = refusing_k2
    indexer = pipelined(app, embedder, pool)

    assert indexer.apply(changes(app)) == set()

    # the first chunk at once, the other two together, then chunk by chunk, then k2's chunk (k2, k3) item by item
    assert writes == [["k0", "k1"], ["k2", "k3", "k4", "k5"], ["k2", "k3"], ["k4", "k5"], ["k2"], ["k3"]]
    assert sorted(indexed_texts(embedder)) == sorted([f"text {n}" for n in range(6)] + ["text 2", "text 3"])
    k2 = app.store.get("acme", NS, "k2")
    assert (k2.indexed_fields, k2.index_error) == (None, "indexing it raised ValueError")
    assert app.keywords.memory_ids("acme") == {app.store.get("acme", NS, f"k{n}").id for n in (0, 1, 3, 4, 5)}
    assert app.store.pending_index("acme", clock.now()) == 0  # (k2's vectors stay: docs/api.md, "Poison items")


def test_one_memorys_graph_write_failing_is_its_own_and_the_batchs_other_rows_stand(app, clock):
    for n in range(6):
        put(app, f"k{n}", f"Alice{n} works on Project Atlas{n}.")
    graph_store = app.indexer._graph._graph
    replace = graph_store._replace

    def refusing_k2(conn, memory, nodes, edges):
        if memory.key == "k2":
            raise ValueError("refused (injected)")
        return replace(conn, memory, nodes, edges)

    graph_store._replace = refusing_k2
    app.embedder.calls.clear()

    app.workers.run_cycle("indexer")

    assert sorted(indexed_texts(app.embedder)) == sorted([f"Alice{n} works on Project Atlas{n}." for n in range(6)]
                                                         + ["Alice2 works on Project Atlas2."])  # k2 alone, again
    k2 = app.store.get("acme", NS, "k2")
    assert k2.index_error == "indexing it raised ValueError"
    assert graph_store.stats()["mentions"] == 10  # two names in each of the five others
    assert app.store.pending_index("acme", clock.now()) == 0


def test_a_model_failing_for_every_text_loses_nothing_and_blames_nobody(app, embedder, pool, clock):
    for n in range(4):
        put(app, f"k{n}", f"text {n}")
    embedder.fail_next = 10_000  # every call: the probe of a known-good text too
    indexer = pipelined(app, embedder, pool)
    batch = changes(app)

    assert indexer.apply(batch) == {c.seq for c in batch}

    assert app.store.quarantined("acme", clock.now(), 10) == (0, [])
    assert app.store.pending_index("acme", clock.now()) == 4
    assert all(app.store.get("acme", NS, f"k{n}").index_attempt is None for n in range(4))  # attempts ended
    embedder.fail_next = 0
    assert indexer.apply(batch) == set()
    assert app.store.pending_index("acme", clock.now()) == 0


def test_a_throttled_chunk_fails_its_changes_without_retrying_them_now(app, embedder, pool):
    for n in range(4):
        put(app, f"k{n}", f"text {n}")
    embedder.throttled = {"text 0"}
    indexer = pipelined(app, embedder, pool)
    batch = changes(app)

    assert indexer.apply(batch) == {batch[0].seq, batch[1].seq}

    assert sum("text 0" in call for call in embedder.calls) == 1  # no item-by-item retry
    assert app.store.get("acme", NS, "k0").indexed_fields is None
    assert app.store.get("acme", NS, "k1").indexed_fields is None
    assert app.store.get("acme", NS, "k3").indexed_fields is not None


def test_an_item_written_while_its_chunk_is_embedded_keeps_no_stale_entry(app, embedder, pool):
    put(app, "a", "stale text")
    put(app, "b", "other text")
    newer = {}
    embedder.during["stale text"] = lambda: newer.setdefault("a", put(app, "a", "newer text"))
    indexer = pipelined(app, embedder, pool)
    batch = changes(app)

    assert indexer.apply(batch) == set()

    stale_id = batch[0].new.id
    assert stale_id not in app.vectors.memory_ids("acme")  # lost the mark: its own entries removed
    assert stale_id not in app.keywords.memory_ids("acme")
    assert app.store.get("acme", NS, "a").indexed_fields is None
    assert indexer.apply(changes(app)) == set()  # the newer version's change follows
    assert app.store.get("acme", NS, "a").id == newer["a"].id
    assert app.vectors.memory_ids("acme") == {newer["a"].id, batch[1].new.id}


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="threads have their own nice value on Linux only")
def test_the_low_priority_pool_runs_below_the_callers_priority():
    me = os.getpriority(os.PRIO_PROCESS, threading.get_native_id())
    pool = low_priority_pool(1, name="test-low")
    try:
        theirs = pool.submit(lambda: os.getpriority(os.PRIO_PROCESS, threading.get_native_id())).result()
    finally:
        pool.shutdown()
    assert theirs == min(me + NICENESS, 19)
    assert os.getpriority(os.PRIO_PROCESS, threading.get_native_id()) == me  # the caller is untouched


def test_chunks_hold_at_most_chunk_texts_texts_of_similar_lengths(app, embedder, pool):
    for key, fields, words in (("a", 2, 9), ("b", 2, 1), ("c", 5, 4), ("d", 1, 8), ("e", 1, 2)):
        app.services.memories.put(alice(), PutMemory(namespace=NS, key=key, value={
            f"f{n}": " ".join([key] * words) for n in range(fields)}))
    indexer = pipelined(app, embedder, pool, chunk_texts=4)

    assert indexer.apply(changes(app)) == set()

    # by length (b, e, c, d, a; in the order written: a, b, d, e); c has more texts than a chunk holds
    assert sorted(sorted({text[0] for text in call}) for call in embedder.calls) == [["a", "d"], ["b", "e"], ["c"]]
    assert len(app.vectors.memory_ids("acme")) == 5


def test_a_lone_memory_with_more_texts_than_a_chunk_is_embedded_in_chunks_on_the_pool_at_once(app, embedder, pool):
    """One large memory alone would otherwise take one core while the others idle."""
    long_words = " long" * (SPREAD_CHARS // 5)
    app.services.memories.put(alice(), PutMemory(namespace=NS, key="big", value={
        f"f{n}": f"text {n}{long_words}" for n in range(5)}))
    indexer = pipelined(app, embedder, pool, chunk_texts=2)
    started = threading.Event()
    embedder.during[f"text 0{long_words}"] = lambda: started.wait(10)  # held until a second call runs beside it
    embedder.during[f"text 2{long_words}"] = started.set

    assert indexer.apply(changes(app)) == set()

    assert started.is_set() and sorted(len(call) for call in embedder.calls) == [1, 2, 2]
    assert threading.get_ident() not in embedder.threads
    item = app.store.get("acme", NS, "big")
    assert len(item.indexed_fields) == 5
    assert app.vectors.memory_ids("acme") == {item.id}


def test_a_consumer_stopping_ends_its_drain_between_batches(app):
    """A process shutting down stops feeding the indexer before it closes the stores under it."""
    for n in range(3):
        put(app, f"k{n}", f"text {n}")
    handled: list[int] = []
    consumer = FeedConsumer(app.store, "indexer", lambda batch: handled.append(len(batch)) or set(), batch_size=1)
    stop = threading.Event()

    def stopping() -> bool:
        if len(handled) == 2:
            stop.set()
        return stop.is_set()

    result = consumer.drain(stopping=stopping)
    assert handled == [1, 1] and result.total == 2
    assert consumer.drain().total == 1  # the rest is still there for the next start
