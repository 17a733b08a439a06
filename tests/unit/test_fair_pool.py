"""`memsvc serve`'s request pool: a call that only waits gives its slot back (`slots.released`),
and one tenant holds at most a quarter of the threads. Every wait here is on an event the test
sets, never on time (the 60 s bounds only turn a hang into a failure)."""

from __future__ import annotations

import threading

import pytest

from memsvc.adapters.local.fair_pool import THREADS_PER_SLOT, FairPool
from memsvc.core import slots

BOUND = 60


@pytest.fixture
def pool():
    pool = FairPool(1, name="test-pool")
    yield pool
    pool.shutdown()


def waits_without_its_slot(entered: threading.Semaphore, go_on: threading.Event, answer: str = "done"):
    def call() -> str:
        with slots.released():
            entered.release()
            assert go_on.wait(BOUND)
        return answer
    return call


def until(predicate) -> None:
    done = threading.Event()
    for _ in range(BOUND * 100):
        if predicate():
            return
        done.wait(0.01)
    raise AssertionError("never happened")


def test_a_call_that_waits_gives_its_slot_to_another_tenants_call(pool):
    entered, go_on = threading.Semaphore(0), threading.Event()
    waiting = pool.submit("busy", waits_without_its_slot(entered, go_on))
    assert entered.acquire(timeout=BOUND)
    assert pool.submit("quiet", lambda: "quiet answered").result(BOUND) == "quiet answered"  # the one slot
    assert not waiting.done()
    go_on.set()
    assert waiting.result(BOUND) == "done"


def test_a_call_back_from_its_wait_takes_a_slot_again_before_it_goes_on(pool):
    entered, go_on, holding, let_go = threading.Semaphore(0), threading.Event(), threading.Event(), threading.Event()
    waiting = pool.submit("a", waits_without_its_slot(entered, go_on))
    assert entered.acquire(timeout=BOUND)

    def hold_the_slot() -> str:
        holding.set()
        assert let_go.wait(BOUND)
        return "held"
    # The slot's holder is of the same tenant: another tenant's would lend it the one extra slot
    # (test_while_one_tenant_holds_every_slot_another_tenants_call_runs_beside_them).
    holder = pool.submit("a", hold_the_slot)
    assert holding.wait(BOUND)
    go_on.set()
    until(lambda: "a" in pool._reclaiming)  # done waiting, and waiting for the slot
    assert not waiting.done()
    let_go.set()
    assert (holder.result(BOUND), waiting.result(BOUND)) == ("held", "done")


def test_one_tenant_holds_at_most_a_quarter_of_the_threads(pool):
    quarter = THREADS_PER_SLOT // 4
    entered, go_on = threading.Semaphore(0), threading.Event()
    calls = [pool.submit("busy", waits_without_its_slot(entered, go_on, f"busy-{n}")) for n in range(quarter + 1)]
    for _ in range(quarter):
        assert entered.acquire(timeout=BOUND)
    assert pool.queued() == 1  # the last is not started: its tenant holds its quarter
    assert pool.submit("quiet", lambda: "quiet answered").result(BOUND) == "quiet answered"
    go_on.set()
    assert [c.result(BOUND) for c in calls] == [f"busy-{n}" for n in range(quarter + 1)]


def test_outside_a_pool_released_does_nothing():
    with slots.released():
        with slots.released():
            pass


def test_while_one_tenant_holds_every_slot_another_tenants_call_runs_beside_them():
    pool = FairPool(2, name="test-pool")
    try:
        started, let_go = threading.Semaphore(0), threading.Event()

        def long_call() -> str:
            started.release()
            assert let_go.wait(BOUND)
            return "long"

        longs = [pool.submit("busy", long_call) for _ in range(3)]
        assert started.acquire(timeout=BOUND) and started.acquire(timeout=BOUND)  # both slots
        assert pool.submit("quiet", lambda: "quiet answered").result(BOUND) == "quiet answered"
        until(lambda: "quiet" not in pool._running)  # its slot is given back just after its answer
        assert not any(f.done() for f in longs)
        assert not started.acquire(timeout=0)  # the busy tenant's third call got no extra slot
        other = [pool.submit("quiet", long_call), pool.submit("third", lambda: "third answered")]
        assert started.acquire(timeout=BOUND)  # quiet's long call took the one extra slot ...
        assert not other[1].done()  # ... so the slots are held by two tenants: no more extra
        let_go.set()
        assert [f.result(BOUND) for f in longs + other] == ["long"] * 4 + ["third answered"]
    finally:
        pool.shutdown()


def test_a_tenants_users_take_turns_so_one_users_burst_never_queues_another(pool):
    """One slot, one tenant: while alice's first call holds it, she queues five more, then bob one,
    then carol one. Bob's and carol's start after one more of hers, not after all five."""
    holding, let_go, started = threading.Event(), threading.Event(), []

    def hold() -> None:
        holding.set()
        assert let_go.wait(BOUND)

    first = pool.submit("acme", hold, party="alice")
    assert holding.wait(BOUND)
    calls = [pool.submit("acme", started.append, f"alice-{n}", party="alice") for n in range(5)]
    calls.append(pool.submit("acme", started.append, "bob", party="bob"))
    calls.append(pool.submit("acme", started.append, "carol", party="carol"))
    let_go.set()
    for call in [first, *calls]:
        call.result(BOUND)
    assert started == ["alice-0", "bob", "carol", "alice-1", "alice-2", "alice-3", "alice-4"]
