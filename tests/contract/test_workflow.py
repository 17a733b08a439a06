"""Seed 003's agent workflow state on both backends: task contexts, plans, working memory."""

from __future__ import annotations

import json

import pytest

from memsvc.core.errors import Conflict, ContentTooLong, Forbidden, InvalidArgument, NotFound, PreconditionFailed
from memsvc.core.models import Caller
from memsvc.service.plans import CreatePlan, ListPlans, UpdatePlan
from memsvc.service.task_contexts import ChangeSubTasks, CreateTaskContext, UpdateTaskContext
from memsvc.service.working_memory import ListWorking, PutWorking
from memsvc.service.tenant_config import MAX_VALUE_BYTES
from tests.fakes.aws_stack import TABLE

ALICE = Caller(tenant_id="acme", user_id="alice", roles=("user",))
BOB = Caller(tenant_id="acme", user_id="bob", roles=("user",))
ADMIN = Caller(tenant_id="acme", user_id="root", roles=("admin",))
SERVICE = Caller(tenant_id="acme", user_id="arn:aws:iam::1:role/worker", roles=("service",), principal_type="iam")
OTHER_TENANT = Caller(tenant_id="globex", user_id="alice", roles=("user",))


def task(task_id="task-123", **fields):
    return CreateTaskContext(task_id=task_id, event_type="research.requested", **fields)


@pytest.fixture
def tc(backend):
    return backend.app.services.task_contexts


# -- seed 003's unit tests ------------------------------------------------------------------------


def test_store_task_context_with_sub_tasks(tc):
    record = tc.create(ALICE, task(response_event="research.completed", data={"query": "AI trends"},
                                   sub_tasks=["sub-1", "sub-2"]))
    assert (record.task_id, record.version) == ("task-123", 1)
    got = tc.get(ALICE, "task-123").to_json()
    assert got["data"] == {"query": "AI trends"} and got["sub_tasks"] == ["sub-1", "sub-2"]
    assert got["response_topic"] == "action-results" and got["state"] == {} and got["version"] == 1


def test_find_by_subtask(tc):
    tc.create(ALICE, task(sub_tasks=["sub-1"]))
    assert tc.by_subtask(ALICE, "sub-1").record.task_id == "task-123"
    with pytest.raises(NotFound):
        tc.by_subtask(ALICE, "sub-2")


def test_list_active_plans(plans):
    plans.create(ALICE, CreatePlan(plan_id="plan-1", goal_event="research.goal", status="running"))
    plans.create(ALICE, CreatePlan(plan_id="plan-2", goal_event="research.goal", status="completed"))
    page = plans.list(ALICE, ListPlans(status="active"))
    assert [p.record.plan_id for p in page.plans] == ["plan-1"]


# -- task contexts ------------------------------------------------------------------------------


def test_creating_an_existing_task_context_is_a_conflict_and_changes_nothing(tc):
    tc.create(ALICE, task(data={"v": 1}))
    with pytest.raises(Conflict):
        tc.create(BOB, task(data={"v": 2}))
    assert tc.get(ALICE, "task-123").data == {"v": 1}


def test_a_task_context_is_its_creators_and_the_services_only(tc):
    tc.create(ALICE, task(sub_tasks=["s1"]))
    for caller in (ADMIN, SERVICE):
        assert tc.get(caller, "task-123").record.creator == "alice"
        assert tc.by_subtask(caller, "s1").record.task_id == "task-123"
    # Another user of the tenant: task ids are the tenant's names (its POST would be a 409), so it
    # is told the id is not its own (API.md: an identity without access is 403), and nothing changes.
    with pytest.raises(Forbidden) as seen:
        tc.get(BOB, "task-123")
    assert seen.value.details == {"task_id": "task-123"}
    with pytest.raises(Forbidden) as through_sub_task:
        tc.by_subtask(BOB, "s1")
    assert through_sub_task.value.details == {"subtask_id": "s1"}  # never the parent's task id
    with pytest.raises(Forbidden):
        tc.update(BOB, "task-123", UpdateTaskContext(state={"x": 1}), expected_version=None)
    with pytest.raises(Forbidden):
        tc.change_sub_tasks(BOB, "task-123", ChangeSubTasks(remove=["s1"]))
    with pytest.raises(Forbidden):
        tc.delete(BOB, "task-123")
    # Another tenant's: its names are its own, so there is nothing here (and its POST is a 201).
    with pytest.raises(NotFound) as seen:
        tc.get(OTHER_TENANT, "task-123")
    assert seen.value.message == "no task context with this task_id"
    with pytest.raises(NotFound):
        tc.by_subtask(OTHER_TENANT, "s1")
    with pytest.raises(NotFound):
        tc.update(OTHER_TENANT, "task-123", UpdateTaskContext(state={"x": 1}), expected_version=None)
    with pytest.raises(NotFound):
        tc.change_sub_tasks(OTHER_TENANT, "task-123", ChangeSubTasks(remove=["s1"]))
    tc.delete(OTHER_TENANT, "task-123")  # idempotent: nothing of this tenant's is there
    got = tc.get(ALICE, "task-123")
    assert (got.record.sub_tasks, got.record.version, got.state) == (("s1",), 1, {})


def test_a_parent_deleted_between_the_sub_tasks_lookup_and_its_read_is_not_named(tc, monkeypatch):
    tc.create(ALICE, task(sub_tasks=["s1"]))
    store = tc._store
    looked_up = store.task_of_subtask

    def then_deleted(tenant, subtask_id):
        found = looked_up(tenant, subtask_id)
        tc.delete(ALICE, "task-123")  # the creator deletes it just after the sub-task was found
        return found

    monkeypatch.setattr(store, "task_of_subtask", then_deleted)
    with pytest.raises(NotFound) as gone:
        tc.by_subtask(BOB, "s1")
    assert gone.value.details == {"subtask_id": "s1"}  # as for a sub-task nobody holds: never the parent's id


def test_partial_update_keeps_what_was_not_given_and_counts_versions(tc):
    tc.create(ALICE, task(plan_id="p1", data={"a": 1}, state={"progress": 0}))
    got = tc.update(ALICE, "task-123", UpdateTaskContext(state={"progress": 0.5}), expected_version=None).to_json()
    assert got["data"] == {"a": 1} and got["state"] == {"progress": 0.5} and got["plan_id"] == "p1"
    assert got["version"] == 2
    got = tc.update(ALICE, "task-123", UpdateTaskContext(plan_id=None), expected_version=2).to_json()
    assert got["plan_id"] is None and got["version"] == 3
    with pytest.raises(PreconditionFailed):
        tc.update(ALICE, "task-123", UpdateTaskContext(state={"stale": True}), expected_version=2)
    assert tc.get(ALICE, "task-123").state == {"progress": 0.5}


def test_replacing_sub_tasks_moves_the_sub_task_index(tc):
    tc.create(ALICE, task(sub_tasks=["s1", "s2"]))
    tc.update(ALICE, "task-123", UpdateTaskContext(sub_tasks=["s2", "s3"]), expected_version=None)
    with pytest.raises(NotFound):
        tc.by_subtask(ALICE, "s1")
    assert tc.by_subtask(ALICE, "s3").record.sub_tasks == ("s2", "s3")


def test_sub_task_add_and_remove_answers_what_remains(tc):
    tc.create(ALICE, task(sub_tasks=["s1"]))
    changed = tc.change_sub_tasks(ALICE, "task-123", ChangeSubTasks(add=["s2", "s3"]))
    assert (changed.sub_tasks, changed.version) == (("s1", "s2", "s3"), 2)
    changed = tc.change_sub_tasks(ALICE, "task-123", ChangeSubTasks(remove=["s1", "s2", "never"]))
    assert (changed.sub_tasks, changed.removed) == (("s3",), ("s1", "s2"))
    changed = tc.change_sub_tasks(ALICE, "task-123", ChangeSubTasks(remove=["s3"]))
    assert (changed.sub_tasks, changed.removed, changed.version) == ((), ("s3",), 4)
    again = tc.change_sub_tasks(ALICE, "task-123", ChangeSubTasks(remove=["s3"]))  # a redelivered result
    assert (again.sub_tasks, again.removed, again.version) == ((), (), 4)
    with pytest.raises(NotFound):
        tc.by_subtask(ALICE, "s3")


def test_someone_elses_sub_task_cannot_be_taken(tc):
    tc.create(ALICE, task(sub_tasks=["shared"]))
    with pytest.raises(Conflict) as taken:
        tc.create(BOB, task("bobs", sub_tasks=["shared"]))
    assert taken.value.retryable is False  # no retry frees it: a client must not loop on it
    tc.create(BOB, task("bobs"))
    with pytest.raises(Conflict):
        tc.change_sub_tasks(BOB, "bobs", ChangeSubTasks(add=["mine", "shared"]))
    assert tc.by_subtask(ALICE, "shared").record.task_id == "task-123"
    assert tc.get(BOB, "bobs").record.sub_tasks == ()
    with pytest.raises(NotFound):
        tc.by_subtask(BOB, "mine")  # nothing of the refused change was written
    with pytest.raises(Forbidden):
        tc.by_subtask(BOB, "shared")  # and Bob still cannot see Alice's task through it


def test_adding_and_removing_one_sub_task_at_once_is_refused(tc):
    tc.create(ALICE, task(sub_tasks=["s1"]))
    with pytest.raises(InvalidArgument):
        tc.change_sub_tasks(ALICE, "task-123", ChangeSubTasks(add=["s1"], remove=["s1"]))


def test_deleting_a_task_context_frees_its_sub_tasks_and_is_idempotent(tc):
    tc.create(ALICE, task(sub_tasks=["s1"]))
    tc.delete(ALICE, "task-123")
    tc.delete(ALICE, "task-123")
    with pytest.raises(NotFound):
        tc.get(ALICE, "task-123")
    with pytest.raises(NotFound):
        tc.by_subtask(ALICE, "s1")
    tc.create(BOB, task("bobs", sub_tasks=["s1"]))  # the sub-task id is free again
    assert tc.by_subtask(BOB, "s1").record.task_id == "bobs"


@pytest.mark.parametrize("task_id", ["a/b", "a%2Fb", "задача-ü-🙂", "#T#x", "by-subtask"])
def test_ids_are_taken_as_they_are(tc, task_id):
    tc.create(ALICE, task(task_id, sub_tasks=[task_id + "/sub"]))
    assert tc.get(ALICE, task_id).record.task_id == task_id
    assert tc.by_subtask(ALICE, task_id + "/sub").record.task_id == task_id
    with pytest.raises(NotFound):
        tc.get(ALICE, task_id + "/")


def test_task_context_sizes_are_limited(tc):
    with pytest.raises(ContentTooLong) as seen:
        tc.create(ALICE, task(data={"blob": "x" * MAX_VALUE_BYTES}))
    assert seen.value.details["max_bytes"] == MAX_VALUE_BYTES
    with pytest.raises(NotFound):
        tc.get(ALICE, "task-123")


def test_a_tenants_task_contexts_are_listed_by_creator_in_pages_and_deletion_unlists(tc):
    store = tc._store
    for caller, task_id in ((BOB, "b1"), (ALICE, "a/2"), (ALICE, "a1"), (OTHER_TENANT, "elsewhere"),
                            (ALICE, "#T#x")):
        tc.create(caller, task(task_id, sub_tasks=[task_id + "-sub"]))
    tc.update(ALICE, "a1", UpdateTaskContext(state={"n": 2}), expected_version=None)
    seen, after = [], None
    while True:
        page = store.list_tasks("acme", creator=None, after=after, limit=2)
        seen += [(t.creator, t.task_id, t.version) for t in page]
        if len(page) < 2:
            break
        after = (page[-1].creator, page[-1].task_id)
    assert sorted(seen) == [("alice", "#T#x", 1), ("alice", "a/2", 1), ("alice", "a1", 2), ("bob", "b1", 1)]
    assert [c for c, _, _ in seen] == ["alice", "alice", "alice", "bob"]  # a creator's together
    assert {t.task_id for t in store.list_tasks("acme", creator="alice", after=None, limit=10)} == {
        "#T#x", "a/2", "a1"}
    assert [t.task_id for t in store.list_tasks("acme", creator="bob", after=None, limit=10)] == ["b1"]
    tc.delete(ALICE, "a1")
    assert {t.task_id for t in store.list_tasks("acme", creator=None, after=None, limit=10)} == {"#T#x", "a/2", "b1"}
    assert [t.task_id for t in store.list_tasks("globex", creator=None, after=None, limit=10)] == ["elsewhere"]


def test_the_users_with_a_session_or_a_plan_are_listed_in_pages(backend, plans):
    """How an export finds a user who has no memory and no message (`users_after`,
    `plan_users_after`): each user once, in pages, only the tenant's."""
    from memsvc.service.sessions import CreateSession

    sessions = backend.app.services.sessions
    for n, user in enumerate(("u3", "u1", "u/2", "u1")):
        caller = Caller(tenant_id="acme", user_id=user, roles=("user",))
        sessions.create(caller, CreateSession(session_id=f"s{n}"))
        plans.create(caller, CreatePlan(plan_id=f"p{n}", goal_event="g"))
    elsewhere = Caller(tenant_id="globex", user_id="u9", roles=("user",))
    sessions.create(elsewhere, CreateSession(session_id="s"))
    plans.create(elsewhere, CreatePlan(plan_id="p", goal_event="g"))
    for listing in (sessions._store.users_after, plans._store.plan_users_after):
        seen, after = [], None
        while page := listing("acme", after, 2):
            seen += page
            after = page[-1]
        assert sorted(seen) == ["u/2", "u1", "u3"] and len(seen) == 3, listing
        assert listing("globex", None, 10) == ["u9"]


# -- plans -------------------------------------------------------------------------------------


def test_plans_list_newest_first_in_pages(plans, clock):
    for n in range(5):
        plans.create(ALICE, CreatePlan(plan_id=f"plan-{n}", goal_event="g", status="running" if n % 2 else "completed"))
        clock.advance(1)
    plans.create(BOB, CreatePlan(plan_id="bobs", goal_event="g"))
    seen, cursor = [], None
    while True:
        page = plans.list(ALICE, ListPlans(limit=2, cursor=cursor))
        seen += [p.record.plan_id for p in page.plans]
        if page.next_cursor is None:
            break
        cursor = page.next_cursor
    assert seen == ["plan-4", "plan-3", "plan-2", "plan-1", "plan-0"]
    assert [p.record.plan_id for p in plans.list(ALICE, ListPlans(status="completed")).plans] == \
        ["plan-4", "plan-2", "plan-0"]
    first = plans.list(ALICE, ListPlans(limit=1))
    with pytest.raises(InvalidArgument):
        plans.list(BOB, ListPlans(limit=1, cursor=first.next_cursor))  # another user's cursor
    with pytest.raises(InvalidArgument):
        plans.list(ALICE, ListPlans(limit=1, status="completed", cursor=first.next_cursor))  # another filter's


def test_plan_status_moves_between_lists_with_versions(plans):
    plans.create(ALICE, CreatePlan(plan_id="p", goal_event="g", goal_data={"topic": "AI"}, state={"step": 1}))
    got = plans.update(ALICE, "p", UpdatePlan(status="completed"), expected_version=1).to_json()
    assert (got["status"], got["version"], got["goal_data"], got["state"]) == ("completed", 2, {"topic": "AI"}, {"step": 1})
    assert plans.list(ALICE, ListPlans(status="active")).plans == []
    assert [p.record.plan_id for p in plans.list(ALICE, ListPlans(status="completed")).plans] == ["p"]
    with pytest.raises(PreconditionFailed):
        plans.update(ALICE, "p", UpdatePlan(status="failed"), expected_version=1)
    with pytest.raises(Conflict):
        plans.create(ALICE, CreatePlan(plan_id="p", goal_event="g"))


def test_a_plan_is_its_users_only(plans, working):
    plans.create(ALICE, CreatePlan(plan_id="p", goal_event="g"))
    for caller in (BOB, ADMIN, OTHER_TENANT):
        with pytest.raises(NotFound):
            plans.get(caller, "p")
        with pytest.raises(NotFound):
            plans.update(caller, "p", UpdatePlan(status="cancelled"), expected_version=None)
        plans.delete(caller, "p")
        assert plans.list(caller, ListPlans()).plans == []
    assert plans.get(ALICE, "p").record.status == "running"


def listed(working, caller, plan_id, **q):
    return working.list(caller, plan_id, ListWorking(**q)).items


def test_deleting_a_plan_deletes_its_working_memory_only(plans, working):
    for caller, plan_id in ((ALICE, "p"), (ALICE, "other"), (BOB, "p")):
        plans.create(caller, CreatePlan(plan_id=plan_id, goal_event="g"))
    working.put(ALICE, "p", "k", PutWorking(value=1))
    working.put(ALICE, "other", "k", PutWorking(value=2))
    working.put(BOB, "p", "k", PutWorking(value=3))
    plans.delete(ALICE, "p")
    with pytest.raises(NotFound):
        plans.get(ALICE, "p")
    assert listed(working, ALICE, "p") == []
    assert working.get(ALICE, "other", "k").value == 2
    assert working.get(BOB, "p", "k").value == 3


# -- working memory ------------------------------------------------------------------------------


def test_working_memory_put_get_list_delete(plans, working):
    plans.create(ALICE, CreatePlan(plan_id="p", goal_event="g"))
    first = working.put(ALICE, "p", "k1", PutWorking(value={"a": 1}))
    assert first.record.version == 1
    assert working.put(ALICE, "p", "k1", PutWorking(value=[1, 2])).record.version == 2
    working.put(ALICE, "p", "k2", PutWorking(value="text"))
    assert working.get(ALICE, "p", "k1").value == [1, 2]
    assert [(w.record.key, w.value) for w in listed(working, ALICE, "p")] == [("k1", [1, 2]), ("k2", "text")]
    working.delete(ALICE, "p", "k1")
    with pytest.raises(NotFound):
        working.delete(ALICE, "p", "k1")
    assert working.delete_all(ALICE, "p") == 1
    assert working.delete_all(ALICE, "p") == 0


def test_working_memory_honours_ttl(plans, working, clock):
    plans.create(ALICE, CreatePlan(plan_id="p", goal_event="g"))
    working.put(ALICE, "p", "short", PutWorking(value=1, ttl_seconds=10))
    working.put(ALICE, "p", "long", PutWorking(value=2))
    clock.advance(11)
    with pytest.raises(NotFound):
        working.get(ALICE, "p", "short")
    with pytest.raises(NotFound):
        working.delete(ALICE, "p", "short")
    assert [w.record.key for w in listed(working, ALICE, "p")] == ["long"]
    assert working.delete_all(ALICE, "p") == 1


def test_working_memory_put_with_if_match_writes_only_over_that_version(plans, working, clock):
    plans.create(ALICE, CreatePlan(plan_id="p", goal_event="g"))
    working.put(ALICE, "p", "k", PutWorking(value=1))
    assert working.put(ALICE, "p", "k", PutWorking(value=2), if_match=1).record.version == 2
    with pytest.raises(PreconditionFailed) as stale:
        working.put(ALICE, "p", "k", PutWorking(value="lost"), if_match=1)
    assert stale.value.details == {"expected_version": 1, "current_version": 2}
    assert working.get(ALICE, "p", "k").value == 2
    with pytest.raises(PreconditionFailed):  # no value yet: no version for If-Match to name
        working.put(ALICE, "p", "new", PutWorking(value=1), if_match=1)
    working.put(ALICE, "p", "short", PutWorking(value=1, ttl_seconds=10))
    clock.advance(11)
    with pytest.raises(PreconditionFailed):  # expired: no current version either
        working.put(ALICE, "p", "short", PutWorking(value=2), if_match=1)
    with pytest.raises(NotFound):
        working.put(ALICE, "no-plan", "k", PutWorking(value=1), if_match=1)
    for caller in (BOB, OTHER_TENANT):  # alice's key is none of theirs, whatever version they name
        with pytest.raises(NotFound):
            working.put(caller, "p", "k", PutWorking(value="theirs"), if_match=2)
    assert working.get(ALICE, "p", "k").value == 2


def test_working_memory_if_match_loses_to_a_write_between_check_and_put(plans, working, backend):
    # The version is checked again in the store's write: a put that lands after the service read
    # version 1 makes the If-Match put a 412, not a silent overwrite.
    plans.create(ALICE, CreatePlan(plan_id="p", goal_event="g"))
    working.put(ALICE, "p", "k", PutWorking(value=1))
    store = working._store
    real_get = store.get_working

    def get_then_race(*args, **kwargs):
        record = real_get(*args, **kwargs)
        store.get_working = real_get
        working.put(ALICE, "p", "k", PutWorking(value="between"))
        return record

    store.get_working = get_then_race
    try:
        with pytest.raises(PreconditionFailed):
            working.put(ALICE, "p", "k", PutWorking(value="stale"), if_match=1)
    finally:
        store.get_working = real_get
    assert working.get(ALICE, "p", "k").value == "between"


def test_working_memory_is_the_users_own(plans, working):
    plans.create(ALICE, CreatePlan(plan_id="p", goal_event="g"))
    working.put(ALICE, "p", "k", PutWorking(value="alice's"))
    for caller in (BOB, ADMIN, OTHER_TENANT):
        with pytest.raises(NotFound):
            working.get(caller, "p", "k")
        with pytest.raises(NotFound):
            working.delete(caller, "p", "k")
        with pytest.raises(NotFound):  # alice's plan is no plan of theirs: nothing to write into
            working.put(caller, "p", "k", PutWorking(value="theirs"))
        assert listed(working, caller, "p") == []
        assert working.delete_all(caller, "p") == 0
    assert working.get(ALICE, "p", "k").value == "alice's"


# -- at rest, and off the item stream --------------------------------------------------------------


def _at_rest(backend) -> str:
    if backend.local is not None:
        return "".join(f.read_bytes().decode("latin-1") for f in sorted(backend.data_dir.glob("workflow.db*")))
    pages = backend.aws.clients.dynamodb.get_paginator("scan").paginate(TableName=TABLE)
    return json.dumps([item for page in pages for item in page["Items"]], default=repr)


def test_values_are_sealed_at_rest_and_never_reach_the_item_stream(backend, tc, plans, working):
    tc.create(ALICE, task("visible-task-id", data={"secret": "tc-data-canary"}, state={"s": "tc-state-canary"},
                          sub_tasks=["visible-sub"]))
    tc.update(ALICE, "visible-task-id", UpdateTaskContext(state={"s": "tc-state-canary-2"}), expected_version=None)
    plans.create(ALICE, CreatePlan(plan_id="visible-plan", goal_event="g", goal_data={"g": "goal-canary"},
                                   state={"s": "plan-state-canary"}))
    working.put(ALICE, "visible-plan", "k", PutWorking(value="working-canary", ttl_seconds=60))
    dump = _at_rest(backend)
    assert "visible-task-id" in dump and "visible-plan" in dump  # ids are plaintext, so this can see them
    for canary in ("tc-data-canary", "tc-state-canary", "goal-canary", "plan-state-canary", "working-canary"):
        assert canary not in dump
    assert backend.changes() == []  # nothing for the indexer or the timeline


def test_plan_status_and_task_deletion_go_to_the_bus_without_values(backend, tc, plans):
    if backend.aws is None:
        pytest.skip("the local events file is tested in tests/unit/test_workflow_events.py")
    plans.create(ALICE, CreatePlan(plan_id="p", goal_event="g", goal_data={"g": "goal-canary"}))
    plans.update(ALICE, "p", UpdatePlan(state={"s": 1}), expected_version=None)  # no status change: no event
    plans.update(ALICE, "p", UpdatePlan(status="completed"), expected_version=None)
    tc.create(ALICE, task(data={"d": "data-canary"}, plan_id="p"))
    tc.delete(ALICE, "task-123")
    tc.delete(ALICE, "task-123")  # nothing deleted: no event
    events = [e for e in backend.aws.published() if e["detail-type"].startswith(("memsvc.plan", "memsvc.task"))]
    assert [(e["detail-type"], e["detail"].get("status")) for e in events] == [
        ("memsvc.plan.status", "running"), ("memsvc.plan.status", "completed"),
        ("memsvc.task-context.deleted", None)]
    assert events[1]["detail"]["previous_status"] == "running" and events[1]["detail"]["user"] == "alice"
    assert events[2]["detail"]["task_id"] == "task-123" and events[2]["detail"]["plan_id"] == "p"
    assert all(e["source"] == "memsvc" for e in events)
    assert "canary" not in json.dumps(events)
