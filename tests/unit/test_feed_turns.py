"""Tenants take turns at a change-feed consumer: each tenant's changes are a lane of the local feed,
read and acknowledged on their own, and a turn is sized by how fast the tenant's last one went, so
one tenant's backlog holds another tenant's fresh write up by about a turn, not by the backlog.
Over the local store, with a handler that charges each change a second of a fake clock."""

from __future__ import annotations

import threading
import time

import pytest

from memsvc.adapters.local.workers import BackgroundWorkers
from memsvc.core.models import Caller
from memsvc.service.feed import FIRST_TURN_WEIGHT, TURN_SECONDS, FeedConsumer
from memsvc.service.memories import PutMemory
from tests.conftest import local_data_dir
from tests.fakes.embedder import HashEmbedder


def put(app, tenant: str, key: str, text: str = "a short note") -> None:
    caller = Caller(tenant_id=tenant, user_id="u")
    app.services.memories.put(caller, PutMemory(namespace=("user", "u", "notes"), key=key, value={"text": text}))


class Handler:
    """Records each batch's tenants and keys, charges `seconds_per_change` of the fake clock per
    change, and fails the changes of the keys in `failing`."""

    def __init__(self, seconds_per_change: float = 1.0) -> None:
        self.now = 0.0
        self.seconds_per_change = seconds_per_change
        self.batches: list[list[tuple[str, str]]] = []
        self.failing: set[str] = set()

    def __call__(self, changes) -> set[int]:
        self.batches.append([(c.tenant, c.new.key) for c in changes])
        self.now += self.seconds_per_change * len(changes)
        return {c.seq for c in changes if c.new.key in self.failing}


@pytest.fixture
def handler():
    return Handler()


@pytest.fixture
def consumer(local_app, handler):
    return FeedConsumer(local_app.store, "indexer", handler, batch_size=256, timer=lambda: handler.now)


def test_a_tenants_fresh_write_waits_for_one_turn_of_anothers_backlog_not_for_all_of_it(local_app, handler, consumer):
    for n in range(300):
        put(local_app, "acme", f"k{n}")
    put(local_app, "zeta", "fresh")

    consumer.run_batch()
    first = handler.batches[0]
    assert {t for t, _ in first} == {"acme"} and 1 < len(first) < 300  # a first turn: FIRST_TURN_WEIGHT
    consumer.run_batch()
    assert handler.batches[1] == [("zeta", "fresh")]  # zeta's turn comes next, whatever acme has left
    assert local_app.store.read("indexer", 10, tenant="zeta") == []  # and its lane is acknowledged
    assert len(local_app.store.read("indexer", 1000, tenant="acme")) == 300 - len(first)


def test_a_turn_lasts_about_turn_seconds_by_the_tenants_last_turn_and_grows_at_most_twofold(local_app, consumer,
                                                                                            handler):
    for n in range(300):
        put(local_app, "acme", f"k{n}")
    consumer.run_batch()  # one second a change: the next turn holds as many changes as fit in TURN_SECONDS
    consumer.run_batch()
    assert len(handler.batches[1]) == max(1, int(TURN_SECONDS))
    handler.seconds_per_change = 0.0  # fast now: each turn doubles, never more
    sizes = []
    for _ in range(4):
        consumer.run_batch()
        sizes.append(len(handler.batches[-1]))
    assert all(b <= 2 * a + 1 for a, b in zip([len(handler.batches[1]), *sizes], sizes)) and sizes[-1] > sizes[0]


def test_one_change_larger_than_a_turn_is_a_turn_of_its_own(local_app, consumer, handler):
    put(local_app, "acme", "huge", "word " * (FIRST_TURN_WEIGHT // 4))
    put(local_app, "acme", "small")
    consumer.run_batch()
    assert handler.batches == [[("acme", "huge")]]
    consumer.run_batch()
    assert handler.batches[1] == [("acme", "small")]


def test_a_failing_tenant_holds_its_own_lane_and_the_others_go_on(local_app, consumer, handler):
    put(local_app, "acme", "bad")
    put(local_app, "acme", "after-bad")
    put(local_app, "zeta", "fine")
    handler.failing = {"bad"}

    assert consumer.run_batch().failed == 1
    assert [k for _, k in handler.batches[0]] == ["bad", "after-bad"]
    assert consumer.run_batch().processed == {"zeta": 1}  # the next turn is zeta's, failure or not
    assert [c.new.key for c in local_app.store.read("indexer", 10, tenant="acme")] == ["bad", "after-bad"]
    handler.failing = set()
    consumer.drain()
    assert local_app.store.read("indexer", 10) == []


def test_lanes_are_kept_across_a_restart_and_pruned_each_on_its_own(local_app, consumer, handler):
    for n in range(3):
        put(local_app, "acme", f"a{n}")
    put(local_app, "zeta", "z0")
    handler.failing = {"a1"}
    consumer.run_batch()  # acme: a0 acknowledged, a1 failed, a2 behind it
    consumer.run_batch()  # zeta: z0 acknowledged
    local_app.store.prune_changes()  # (the timeline consumer has read nothing yet: nothing goes)
    again = FeedConsumer(local_app.store, "indexer", handler, timer=lambda: handler.now)
    assert [c.new.key for c in local_app.store.read("indexer", 10)] == ["a1", "a2"]

    handler.failing = set()
    assert again.drain().processed == {"acme": 2}
    FeedConsumer(local_app.store, "timeline", lambda changes: set()).drain()
    assert local_app.store.prune_changes() == 4
    assert local_app.store.read("timeline", 10) == [] and local_app.store.read("indexer", 10) == []


def test_a_data_dirs_offset_from_before_lanes_is_the_floor_under_every_lane(local_app, consumer, handler):
    for n in range(3):
        put(local_app, "acme", f"a{n}")
    put(local_app, "zeta", "z0")
    seqs = [c.seq for c in local_app.store.read("indexer", 10)]
    with local_app.store._tx() as conn:  # what an older version's ack left: one offset for the feed
        conn.execute("UPDATE consumers SET offset = ? WHERE name = 'indexer'", (seqs[1],))
    assert [c.new.key for c in local_app.store.read("indexer", 10)] == ["a2", "z0"]
    consumer.drain()
    assert sorted(k for batch in handler.batches for _, k in batch) == ["a2", "z0"]


def test_a_turn_under_way_on_one_thread_is_never_taken_by_another(local_app):
    """Several threads share a consumer: while acme's turn is under way, another thread's turn is
    zeta's, and with only acme pending it gets none (acme's lane is never read twice at once)."""
    started, release = threading.Event(), threading.Event()
    batches: list[list[str]] = []

    def handler(changes):
        batches.append([c.new.key for c in changes])
        if changes[0].tenant == "acme":
            started.set()
            assert release.wait(30)
        return set()

    consumer = FeedConsumer(local_app.store, "indexer", handler)
    put(local_app, "acme", "slow")
    put(local_app, "acme", "behind")
    put(local_app, "zeta", "fresh")
    first = threading.Thread(target=consumer.run_batch)
    first.start()
    assert started.wait(30)
    assert consumer.run_batch().processed == {"zeta": 1}
    assert consumer.run_batch().total == 0  # acme's turn is under way: not taken again
    release.set()
    first.join(30)
    consumer.drain()
    assert batches[1] == ["fresh"] and sorted(k for batch in batches for k in batch) == ["behind", "fresh", "slow"]
    assert local_app.store.read("indexer", 10) == []


def test_threads_beyond_the_first_leave_a_failing_tenant_to_it(local_app, consumer, handler):
    put(local_app, "acme", "bad")
    put(local_app, "zeta", "fine")
    handler.failing = {"bad"}
    assert consumer.run_batch().failed == 1
    assert consumer.run_batch(retries=False).processed == {"zeta": 1}
    assert consumer.run_batch(retries=False).total == 0  # acme's retry is the first thread's
    handler.failing = set()
    assert consumer.run_batch().processed == {"acme": 1}


class _HeldEmbedder(HashEmbedder):
    """Embeds a text holding "glacier" only once `release` is set."""

    def __init__(self) -> None:
        super().__init__()
        self.holding, self.release = threading.Event(), threading.Event()

    def embed(self, texts):
        if any("glacier" in t for t in texts):
            self.holding.set()
            assert self.release.wait(60)
        return super().embed(texts)


def test_a_tenants_memory_that_takes_long_to_embed_holds_up_no_other_tenants_indexing(tmp_path, clock):
    """`memsvc serve`'s indexer threads: acme's memory is held in the embedder (as a memory of
    many long fields takes tens of seconds) while zeta's note is written, indexed and found."""
    from memsvc.bootstrap import build_local

    embedder = _HeldEmbedder()
    app = build_local(local_data_dir(tmp_path), embedder=embedder, clock=clock)
    try:
        put(app, "acme", "long", "a glacier of text")
        assert embedder.holding.wait(30)
        put(app, "zeta", "fresh", "a short note")
        for _ in range(600):  # bounds a failure only: zeta's note is indexed in about 0.1 s
            if app.vectors.memory_ids("zeta"):
                break
            time.sleep(0.05)
        assert app.vectors.memory_ids("zeta") and not app.vectors.memory_ids("acme")
    finally:
        embedder.release.set()
        app.close()


class _ListedBefore:
    """The local feed, whose `lanes` runs `hook` (once, on the test's thread) after listing them:
    what another thread does between a turn's listing and its read."""

    def __init__(self, store) -> None:
        self._store, self.hook, self._main = store, None, threading.current_thread()

    def __getattr__(self, name):
        return getattr(self._store, name)

    def lanes(self, consumer):
        listed = self._store.lanes(consumer)
        if self.hook is not None and threading.current_thread() is self._main:
            hook, self.hook = self.hook, None
            hook()
        return listed


def _workers(consumer) -> BackgroundWorkers:
    return BackgroundWorkers([consumer], None, None, None)


def test_a_lane_emptied_after_the_listing_passes_the_turn_on_and_run_cycle_drains_the_rest(local_app):
    """b's turn on another thread ends between run_cycle's listing of the lanes and its turn: b's
    lane is empty by then, and the turn goes to c instead of ending the cycle with c pending."""
    started, release = threading.Event(), threading.Event()

    def handler(changes):
        if changes[0].tenant == "b":
            started.set()
            assert release.wait(30)
        return set()

    feed = _ListedBefore(local_app.store)
    consumer = FeedConsumer(feed, "indexer", handler)
    put(local_app, "b", "slow")
    other = threading.Thread(target=consumer.run_batch)
    other.start()
    assert started.wait(30)
    put(local_app, "a", "x")
    assert consumer.run_batch().processed == {"a": 1}  # the round robin now stands after a: b is next
    put(local_app, "c", "pending")

    def b_ends():
        release.set()
        other.join(30)

    feed.hook = b_ends
    assert _workers(consumer).run_cycle("indexer").processed == {"c": 1}
    assert local_app.store.read("indexer", 10) == []


def test_run_cycle_tries_a_failing_change_once_while_a_feed_thread_works(local_app):
    """Waiting for another thread's turns never turns into retrying a failing change back to back
    (which parked it within one call)."""
    attempts, busy, stop = [], threading.Event(), threading.Event()

    def handler(changes):
        if changes[0].tenant == "acme":
            attempts.append(threading.current_thread())
            return {changes[0].seq}
        busy.set()
        stop.wait(0.02)  # turns that last while run_cycle runs (nothing asserts on time)
        return set()

    consumer = FeedConsumer(local_app.store, "indexer", handler, batch_size=1)
    put(local_app, "acme", "flaky")
    for n in range(40):
        put(local_app, "zeta", f"k{n}")

    def feed_thread():
        while not stop.is_set() and consumer.pending():
            consumer.drain(retries=False)

    thread = threading.Thread(target=feed_thread)
    thread.start()
    assert busy.wait(30)
    try:
        result = _workers(consumer).run_cycle("indexer")
    finally:
        stop.set()
        thread.join(30)
    assert attempts.count(threading.current_thread()) == 1 and result.failed == 1 and result.parked == 0
