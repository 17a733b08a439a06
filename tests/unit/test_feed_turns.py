"""Tenants take turns at a change-feed consumer: each tenant's changes are a lane of the local feed,
read and acknowledged on their own, and a turn is sized by how fast the tenant's last one went, so
one tenant's backlog holds another tenant's fresh write up by about a turn, not by the backlog.
Over the local store, with a handler that charges each change a second of a fake clock."""

from __future__ import annotations

import pytest

from memsvc.core.models import Caller
from memsvc.service.feed import FIRST_TURN_WEIGHT, TURN_SECONDS, FeedConsumer
from memsvc.service.memories import PutMemory


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
