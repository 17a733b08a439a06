"""Working memory lives inside a plan, and no list answer outgrows a Lambda response, on both
backends: a put needs the plan (even when the plan is deleted under it), and working-memory and
plan pages stop at `core.pages.PAGE_BYTES` with a cursor to the rest."""

from __future__ import annotations

import threading

import pytest

from memsvc.core.errors import InvalidArgument, NotFound
from memsvc.core.pages import PAGE_BYTES, json_size
from memsvc.service.plans import CreatePlan, ListPlans
from memsvc.service.working_memory import ListWorking, PutWorking
from tests.contract.test_workflow import ALICE, BOB

BIG = "x" * 240_000  # under the 256 KB limit; seven of them exceed a page


def listed(working, caller, plan_id, **q):
    return working.list(caller, plan_id, ListWorking(**q))


def test_a_put_needs_the_callers_plan(plans, working):
    with pytest.raises(NotFound) as no_plan:
        working.put(ALICE, "p", "k", PutWorking(value=1))
    assert no_plan.value.details == {"plan_id": "p"}
    plans.create(BOB, CreatePlan(plan_id="p", goal_event="g"))
    with pytest.raises(NotFound):  # bob's plan of that name is not alice's
        working.put(ALICE, "p", "k", PutWorking(value=1))
    assert listed(working, ALICE, "p").items == []
    plans.create(ALICE, CreatePlan(plan_id="p", goal_event="g"))
    assert working.put(ALICE, "p", "k", PutWorking(value=1)).record.version == 1


def test_a_put_that_meets_its_plans_deletion_leaves_nothing(plans, working, monkeypatch):
    """The plan is deleted (its working memory swept) after the service decided to put and
    before the store writes: the store's own check must refuse the write."""
    plans.create(ALICE, CreatePlan(plan_id="p", goal_event="g"))
    working.put(ALICE, "p", "before", PutWorking(value=0))
    store = working._store
    real_put = store.put_working

    def plan_deleted_first(record, **kwargs):
        deleter = threading.Thread(target=plans.delete, args=(ALICE, "p"))  # another request's thread
        deleter.start()
        deleter.join()
        return real_put(record, **kwargs)

    monkeypatch.setattr(store, "put_working", plan_deleted_first)
    with pytest.raises(NotFound):
        working.put(ALICE, "p", "late", PutWorking(value=1))
    monkeypatch.undo()
    assert listed(working, ALICE, "p").items == []
    with pytest.raises(NotFound):
        working.get(ALICE, "p", "late")


def test_on_dynamodb_the_plan_check_is_in_the_writes_transaction(backend, plans, working, monkeypatch):
    """The last gap on DynamoDB: the plan goes between the put's read of the key and its
    transaction. The transaction's ConditionCheck on the plan row refuses it."""
    if backend.aws is None:
        pytest.skip("SQLite reads the plan and writes the key in one BEGIN IMMEDIATE transaction")
    plans.create(ALICE, CreatePlan(plan_id="p", goal_event="g"))
    db = working._store._db
    real_transact = db.transact_write_items
    deleted = []

    def delete_plan_first(**kwargs):
        if not deleted and any("ConditionCheck" in action for action in kwargs["TransactItems"]):
            deleted.append(True)
            deleter = threading.Thread(target=plans.delete, args=(ALICE, "p"))
            deleter.start()
            deleter.join()
        return real_transact(**kwargs)

    monkeypatch.setattr(db, "transact_write_items", delete_plan_first)
    with pytest.raises(NotFound):
        working.put(ALICE, "p", "late", PutWorking(value=1))
    monkeypatch.undo()
    assert deleted and listed(working, ALICE, "p").items == []


def test_puts_racing_a_plan_delete_never_outlive_it(plans, working):
    """Real threads, any interleaving: whatever the order, once the delete is done the plan has
    no working memory, and every put after it is a 404."""
    plans.create(ALICE, CreatePlan(plan_id="p", goal_event="g"))
    start = threading.Barrier(3, timeout=60)  # the timeout only keeps a broken run from hanging
    answers: dict[str, list[str]] = {"w1": [], "w2": []}

    def writer(name):
        start.wait()
        for n in range(15):
            try:
                working.put(ALICE, "p", f"{name}-{n}", PutWorking(value=n))
                answers[name].append("ok")
            except NotFound:
                answers[name].append("404")

    def deleter():
        start.wait()
        plans.delete(ALICE, "p")

    threads = [threading.Thread(target=writer, args=(name,)) for name in answers] + [threading.Thread(target=deleter)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert listed(working, ALICE, "p").items == []
    for seen in answers.values():  # once refused, always refused: the plan never came back
        if "404" in seen:
            assert set(seen[seen.index("404"):]) == {"404"}
    with pytest.raises(NotFound):
        working.put(ALICE, "p", "after", PutWorking(value=1))


def test_the_working_memory_list_is_paged_by_count_and_by_bytes(plans, working):
    plans.create(ALICE, CreatePlan(plan_id="p", goal_event="g"))
    for n in range(8):
        working.put(ALICE, "p", f"k{n}", PutWorking(value=BIG))
    first = listed(working, ALICE, "p")
    assert [w.record.key for w in first.items] == [f"k{n}" for n in range(6)] and first.next_cursor
    assert sum(json_size(w.to_json()) for w in first.items) <= PAGE_BYTES
    rest = listed(working, ALICE, "p", cursor=first.next_cursor)
    assert [w.record.key for w in rest.items] == ["k6", "k7"] and rest.next_cursor is None
    by_three = listed(working, ALICE, "p", limit=3)
    assert [w.record.key for w in by_three.items] == ["k0", "k1", "k2"]
    assert [w.record.key for w in listed(working, ALICE, "p", limit=3, cursor=by_three.next_cursor).items] == [
        "k3", "k4", "k5"]
    plans.create(ALICE, CreatePlan(plan_id="q", goal_event="g"))
    with pytest.raises(InvalidArgument):  # a cursor is bound to its user and plan
        listed(working, ALICE, "q", cursor=first.next_cursor)
    with pytest.raises(InvalidArgument):
        listed(working, BOB, "p", cursor=first.next_cursor)


def test_plan_pages_stop_at_the_byte_budget(plans):
    for n in range(8):
        plans.create(ALICE, CreatePlan(plan_id=f"p{n}", goal_event="g", goal_data={"blob": BIG}))
    first = plans.list(ALICE, ListPlans(limit=100))
    assert len(first.plans) == 6 and first.next_cursor
    assert sum(json_size(p.to_json()) for p in first.plans) <= PAGE_BYTES
    rest = plans.list(ALICE, ListPlans(limit=100, cursor=first.next_cursor))
    assert len(rest.plans) == 2 and rest.next_cursor is None
    assert {p.record.plan_id for p in first.plans + rest.plans} == {f"p{n}" for n in range(8)}
