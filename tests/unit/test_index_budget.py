"""The budget on one memory's indexing (issue 22): its bounds, and the indexer quarantining what
goes over them while the rest is indexed. Time is a fake timer the fakes advance: no test here
waits or measures."""

from __future__ import annotations

import json
import sqlite3
import unicodedata

import pytest

from memsvc.core.errors import EmbeddingFailed
from memsvc.core.graph import Extraction
from memsvc.core.index_budget import NFKC_GROWTH, VALUE_BYTES, ItemBudget, OverBudget, Stopwatch
from memsvc.core.keywords import term_counts
from memsvc.service.graph_indexer import GraphIndexer
from memsvc.core.models import attempt_mark
from memsvc.service import indexer as indexer_module
from memsvc.service.indexer import DIED_ALONE, Indexer
from memsvc.service.memories import PutMemory
from memsvc.service.tenant_config import MAX_VALUE_BYTES
from tests.conftest import alice
from tests.fakes.embedder import HashEmbedder

NS = ("user", "alice", "notes")


class FakeTimer:
    """Seconds that pass only when a fake says so."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


class SlowEmbedder(HashEmbedder):
    """Takes `slow[word]` seconds (on the fake timer) for a call holding a text with that word."""

    def __init__(self, timer: FakeTimer) -> None:
        super().__init__()
        self.timer = timer
        self.slow: dict[str, float] = {}

    def embed(self, texts):
        self.timer.now += sum(s for word, s in self.slow.items() if any(word in t for t in texts))
        return super().embed(texts)


class MarkerExtractor:
    """The graph step's extractor: raises `error` for a text holding `raises`, takes `slow` seconds for one
    holding `slow_word`, and otherwise names the text's first word as an entity."""

    def __init__(self, timer: FakeTimer) -> None:
        self.timer = timer
        self.raises, self.error = "\x00", RecursionError
        self.slow_word, self.slow = "\x00", 0.0

    def extract(self, text: str) -> Extraction:
        if self.raises in text:
            raise self.error("the extractor failed (injected)")
        if self.slow_word in text:
            self.timer.now += self.slow
        return Extraction(entities=((text.split()[0], "CONCEPT"),))


@pytest.fixture
def timer():
    return FakeTimer()


@pytest.fixture
def embedder(timer):
    return SlowEmbedder(timer)


def indexer(app, embedder, timer, clock, budget=ItemBudget(), graph=None) -> Indexer:
    return Indexer(app.store, app.vectors, embedder, app.sealer, app.keywords, app.settings, graph=graph,
                   budget=budget, clock=clock, timer=timer)


def put(app, key, value):
    return app.services.memories.put(alice(), PutMemory(namespace=NS, key=key, value=value))


def changes(app):
    return app.store.read("indexer", 10_000)


def quarantined(app, clock) -> dict[str, str]:
    return {i.key: i.index_error for i in app.store.quarantined("acme", clock.now(), 100)[1]}


# -- the bounds ----------------------------------------------------------------------------------


def test_the_budget_is_the_apis_own_limits():
    assert VALUE_BYTES == MAX_VALUE_BYTES


def test_a_valid_value_never_goes_over_the_size_bounds():
    """NFKC makes 18 characters of U+FDFA: the most terms a value at the size limit gives."""
    text = "\ufdfa." * (MAX_VALUE_BYTES // 8)  # 3 bytes of UTF-8 and a dot each, quoted in JSON
    assert len(json.dumps({"text": text}, ensure_ascii=False).encode()) <= MAX_VALUE_BYTES
    budget = ItemBudget()
    budget.check_texts([("text", text)])
    budget.check_terms(sum(term_counts([text]).values()))
    assert max(len(unicodedata.normalize("NFKC", chr(c)).casefold()) for c in range(0x110000)
               if not 0xD800 <= c < 0xE000) == NFKC_GROWTH


def test_each_bound_holds_at_its_limit_and_refuses_past_it_without_quoting_the_memory():
    budget = ItemBudget(max_text_chars=10, max_terms=3)
    budget.check_texts([("path", "secret"), ("b", "word")])  # 10 characters of text (paths do not count)
    budget.check_terms(3)
    for check, over, message in (
            (budget.check_texts, [("a", "secret word")], "its texts take 11 characters, over the budget of 10"),
            (budget.check_terms, 4, "its keyword document has 4 terms, over the budget of 3")):
        with pytest.raises(OverBudget) as refused:
            check(over)
        assert str(refused.value) == message  # the bound and the count, never the memory


def test_a_stopwatch_allows_its_budget_and_names_the_stage_past_it(timer):
    watch = Stopwatch(timer, 30)
    timer.now += 30
    watch.check("embedding")  # at the budget: still within it
    timer.now += 0.5
    with pytest.raises(OverBudget, match=r"^embedding took it to 30.5 s, over the budget of 30 s$"):
        watch.check("embedding")


# -- the indexer within it --------------------------------------------------------------------


def test_an_item_over_the_time_budget_alone_is_quarantined_and_its_batch_goes_on(
        local_app, embedder, timer, clock, monkeypatch):
    for key in ("k0", "slow", "k2"):
        put(local_app, key, {"text": f"{key} text"})
    real = indexer_module.term_counts

    def slow_analysis(texts):  # a stage of our own code that takes 31 s on one item's content
        texts = list(texts)
        timer.now += 31 if any("slow" in t for t in texts) else 0
        return real(texts)

    monkeypatch.setattr(indexer_module, "term_counts", slow_analysis)
    idx = indexer(local_app, embedder, timer, clock)

    assert idx.apply(changes(local_app)) == set()

    assert quarantined(local_app, clock) == {
        "slow": "over its indexing budget: keyword analysis took it to 31.0 s, over the budget of 30 s"}
    assert local_app.vectors.memory_ids("acme") == {local_app.store.get("acme", NS, k).id for k in ("k0", "k2")}
    assert local_app.store.pending_index("acme", clock.now()) == 0
    assert idx.stats("acme")["quarantined_items"] == 1


def test_a_model_slower_than_the_budget_blames_no_item(local_app, embedder, timer, clock):
    """Its input is bounded: a model whose call for one item takes longer than the whole budget is
    slow, and that item is retried later (the feed backs off), not quarantined."""
    for key in ("k0", "slow", "k2"):
        put(local_app, key, {"text": f"{key} text"})
    embedder.slow = {"slow": 31}
    idx = indexer(local_app, embedder, timer, clock)
    batch = changes(local_app)

    # the batch's one embedding call went over: each item was run alone, and only one call went over
    assert idx.apply(batch) == {c.seq for c in batch if c.new.key == "slow"}
    assert quarantined(local_app, clock) == {}
    assert local_app.store.pending_index("acme", clock.now()) == 1
    embedder.slow = {}
    assert idx.apply(batch) == set() and local_app.store.pending_index("acme", clock.now()) == 0


@pytest.mark.parametrize("budget, value, reason", [
    (ItemBudget(max_text_chars=20), {"text": "twenty-one characters"},
     "over its indexing budget: its texts take 21 characters, over the budget of 20"),
    (ItemBudget(max_terms=3), {"text": "four terms right here"},
     "over its indexing budget: its keyword document has 4 terms, over the budget of 3"),
], ids=["texts", "terms"])
def test_an_item_over_a_size_bound_is_quarantined_and_the_others_are_indexed(
        local_app, embedder, timer, clock, budget, value, reason):
    put(local_app, "big", value)
    put(local_app, "ok", {"text": "ok"})
    idx = indexer(local_app, embedder, timer, clock, budget)

    assert idx.apply(changes(local_app)) == set()

    assert quarantined(local_app, clock) == {"big": reason}
    assert local_app.vectors.memory_ids("acme") == {local_app.store.get("acme", NS, "ok").id}
    assert all("twenty-one" not in " ".join(call) for call in embedder.calls[1:])  # never embedded alone


def test_no_work_starts_without_a_whole_budget_left_and_nothing_is_blamed(local_app, embedder, timer, clock):
    put(local_app, "k", {"text": "some text"})
    idx = indexer(local_app, embedder, timer, clock)
    batch = changes(local_app)

    assert idx.apply(batch, seconds_left=34) == {batch[0].seq}  # 30 s of budget + 5 s of margin do not fit

    assert embedder.calls == [] and quarantined(local_app, clock) == {}
    assert local_app.store.get("acme", NS, "k").index_attempt is None  # no attempt was begun
    assert idx.apply(batch, seconds_left=36) == set()


def test_the_graph_step_is_within_the_budget_and_a_poison_there_is_quarantined(local_app, embedder, timer, clock):
    extractor = MarkerExtractor(timer)
    extractor.raises = "recurse"
    extractor.slow_word, extractor.slow = "sluggish", 31
    graph = GraphIndexer(graph=local_app.graph, extractor=extractor, sealer=local_app.sealer, items=local_app.store)
    for key, text in (("a", "alpha beta"), ("r", "recurse forever"), ("s", "sluggish extraction"), ("b", "bravo")):
        put(local_app, key, {"text": text})
    idx = indexer(local_app, embedder, timer, clock, graph=graph)

    assert idx.apply(changes(local_app)) == {c.seq for c in changes(local_app) if c.new.key == "s"}

    # a poison for the extractor is quarantined; a slow extraction is the model's, retried later
    assert quarantined(local_app, clock) == {"r": "indexing it raised RecursionError"}
    derived = {m.key for m in local_app.graph.derived_memories("acme")}
    assert {"a", "b"} <= derived and "r" not in derived
    # s keeps the vectors written before its graph step: found by meaning while its retry waits
    assert local_app.vectors.memory_ids("acme") == {local_app.store.get("acme", NS, k).id for k in ("a", "b", "s")}


def test_sync_index_of_an_item_over_its_budget_keeps_the_write_and_says_why(local_app, embedder, timer, clock):
    put(local_app, "big", {"text": "twenty-one characters"})
    idx = indexer(local_app, embedder, timer, clock, ItemBudget(max_text_chars=20))

    with pytest.raises(EmbeddingFailed) as refused:
        idx.index_items([local_app.store.get("acme", NS, "big")])

    assert refused.value.details == {"reason": "its texts take 21 characters, over the budget of 20"}
    assert refused.value.code == "EMBEDDING_FAILED" and refused.value.retryable is False  # sending it again won't help
    assert embedder.calls == [] and local_app.store.get("acme", NS, "big").indexed_fields is None
    assert quarantined(local_app, clock) == {}  # the feed's indexer sets it aside, not a request


# -- what is not the item's doing ----------------------------------------------------------------


class FailingVectors:
    """The vector index of `inner`, failing every write with `error` (a store locked, closed, a
    disk full) while `error` is set."""

    def __init__(self, inner, error: Exception) -> None:
        self.inner, self.error = inner, error

    def put_many(self, writes):
        if self.error is not None:
            raise self.error
        return self.inner.put_many(writes)

    def __getattr__(self, name):
        return getattr(self.inner, name)


@pytest.mark.parametrize("error", [sqlite3.OperationalError("database is locked"),
                                   sqlite3.ProgrammingError("Cannot operate on a closed database."),
                                   OSError(28, "No space left on device")], ids=["locked", "closed", "disk-full"])
def test_a_failing_store_blames_no_item_and_its_changes_are_retried(local_app, embedder, timer, clock, error):
    for key in ("a", "b"):
        put(local_app, key, {"text": f"{key} text"})
    vectors = FailingVectors(local_app.vectors, error)
    idx = Indexer(local_app.store, vectors, embedder, local_app.sealer, local_app.keywords, local_app.settings,
                  clock=clock, timer=timer)
    batch = changes(local_app)

    assert idx.apply(batch) == {c.seq for c in batch}  # retried later, each one
    assert quarantined(local_app, clock) == {}
    vectors.error = None
    assert idx.apply(batch) == set()  # once the store is back, nothing was lost
    assert local_app.store.pending_index("acme", clock.now()) == 0


def test_a_mark_this_process_failed_to_clear_is_no_death(local_app, embedder, timer, clock):
    """A run alone that ended in a retry, whose mark the store then failed to clear, is run alone
    again by the same process: only another run's `alone` mark is a death."""
    put(local_app, "a", {"text": "a text"})
    idx = indexer(local_app, embedder, timer, clock)
    item = local_app.store.get("acme", NS, "a")
    local_app.store.begin_attempts([item], attempt_mark("alone", idx.run_id))

    assert idx.apply(changes(local_app)) == set()
    assert quarantined(local_app, clock) == {} and local_app.store.pending_index("acme", clock.now()) == 0

    put(local_app, "b", {"text": "b text"})
    local_app.store.begin_attempts([local_app.store.get("acme", NS, "b")], attempt_mark("alone", "a-dead-run"))
    assert indexer(local_app, embedder, timer, clock).apply(changes(local_app)) == set()
    assert quarantined(local_app, clock) == {"b": DIED_ALONE}


def test_a_model_slow_for_a_big_chunk_runs_its_items_alone_and_indexes_them(local_app, timer, clock):
    """A second per text: 40 texts in one call go over 30 s, one text never does."""

    class PerText(HashEmbedder):
        def embed(self, texts):
            timer.now += len(texts)
            return super().embed(texts)

    for n in range(40):
        put(local_app, f"k{n}", {"text": f"text {n}"})
    idx = indexer(local_app, PerText(), timer, clock)

    assert idx.apply(changes(local_app)) == set()
    assert quarantined(local_app, clock) == {} and local_app.store.pending_index("acme", clock.now()) == 0


def test_an_item_whose_work_raises_alone_is_quarantined_whatever_it_raises(local_app, embedder, timer, clock):
    extractor = MarkerExtractor(timer)
    extractor.raises = "attr"
    extractor.error = AttributeError
    graph = GraphIndexer(graph=local_app.graph, extractor=extractor, sealer=local_app.sealer, items=local_app.store)
    for key, text in (("a", "alpha"), ("x", "attr error")):
        put(local_app, key, {"text": text})

    assert indexer(local_app, embedder, timer, clock, graph=graph).apply(changes(local_app)) == set()
    assert quarantined(local_app, clock) == {"x": "indexing it raised AttributeError"}


def test_stores_that_do_not_answer_blame_no_item(local_app, embedder, timer, clock):
    put(local_app, "a", {"text": "a text"})

    class Down(FailingVectors):
        def ping(self):
            raise self.error

    vectors = Down(local_app.vectors, RuntimeError("the index is gone"))
    idx = Indexer(local_app.store, vectors, embedder, local_app.sealer, local_app.keywords, local_app.settings,
                  clock=clock, timer=timer)
    batch = changes(local_app)
    assert idx.apply(batch) == {c.seq for c in batch} and quarantined(local_app, clock) == {}


def test_a_stopping_indexer_starts_no_work_and_leaves_no_mark(local_app, embedder, timer, clock):
    put(local_app, "a", {"text": "a text"})
    idx = indexer(local_app, embedder, timer, clock)
    idx.stop()
    batch = changes(local_app)

    assert idx.apply(batch) == {c.seq for c in batch}
    assert embedder.calls == [] and local_app.store.get("acme", NS, "a").index_attempt is None
