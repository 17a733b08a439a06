"""The worker helper and examples/task_worker.py against the live servers (seed 003's worker
async flow), and the workflow client methods, sync and async."""

from __future__ import annotations

import asyncio
import importlib.util
import sys
from pathlib import Path

import pytest

from memsvc_client import (AsyncMemsvcClient, AsyncTaskWorker, MemsvcClient, MemsvcError, NotFoundError,
                           PreconditionFailedError)

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "task_worker.py"


def _example():
    spec = importlib.util.spec_from_file_location("task_worker_example", EXAMPLE)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up while the file runs
    spec.loader.exec_module(module)
    return module


def test_two_workers_complete_the_task_once(live_server, uid):
    outcome = _example().main(live_server.url, live_server.token(f"worker-{uid}", roles=["service"]), quiet=True)
    assert outcome.response_event == "research.completed"
    assert sorted(outcome.results) == [f"{outcome.task_id}/search-{n}" for n in range(4)]
    assert [outcome.results[f"{outcome.task_id}/search-{n}"] for n in range(4)] == [{"hits": n + 1} for n in range(4)]
    assert sorted(s for taken in outcome.handled.values() for s in taken) == sorted(outcome.results)


def test_client_methods_sync(live_server, uid):
    with MemsvcClient(live_server.url, live_server.token(uid)) as client:
        created = client.store_task_context("t/1", "e", sub_tasks=["s/1"], data={"q": 1})
        assert created["task_id"] == "t/1"
        assert client.get_task_by_subtask("s/1")["data"] == {"q": 1}
        updated = client.update_task_context("t/1", if_match=1, state={"p": 0.5}, plan_id=None)
        assert (updated["version"], updated["state"]) == (2, {"p": 0.5})
        with pytest.raises(PreconditionFailedError):
            client.update_task_context("t/1", if_match=1, state={})
        with pytest.raises(MemsvcError) as taken:
            client.store_task_context("t/1", "e")
        assert taken.value.code == "CONFLICT"
        assert client.change_sub_tasks("t/1", remove=["s/1"])["remaining"] == 0
        client.delete_task_context("t/1")
        with pytest.raises(NotFoundError):
            client.get_task_context("t/1")

        client.create_plan("p/1", "goal", goal_data={"topic": "x"})
        client.create_plan("p/2", "goal", status="completed")
        assert [p["plan_id"] for p in client.list_plans(status="active")["plans"]] == ["p/1"]
        assert client.update_plan("p/1", if_match=1, status="completed")["status"] == "completed"
        assert client.get_plan("p/1")["goal_data"] == {"topic": "x"}
        client.set_working("p/1", "k/1", [1, 2], ttl_seconds=600)
        assert client.get_working("p/1", "k/1")["value"] == [1, 2]
        assert [i["key"] for i in client.list_working("p/1")["items"]] == ["k/1"]
        client.set_working("p/1", "k/2", "two")
        assert client.set_working("p/1", "k/2", "three", if_match=1)["version"] == 2
        with pytest.raises(PreconditionFailedError):
            client.set_working("p/1", "k/2", "lost", if_match=1)
        first = client.list_working("p/1", limit=1)
        rest = client.list_working("p/1", limit=1, cursor=first["next_cursor"])
        assert [i["key"] for i in first["items"] + rest["items"]] == ["k/1", "k/2"] and rest["next_cursor"] is None
        client.delete_working("p/1", "k/2")
        client.delete_working("p/1", "k/1")
        with pytest.raises(NotFoundError):
            client.delete_working("p/1", "k/1")
        client.set_working("p/1", "k/2", "v")
        assert client.delete_all_working("p/1") == {"deleted_count": 1, "plan_id": "p/1"}
        client.delete_plan("p/1")
        with pytest.raises(NotFoundError):
            client.get_plan("p/1")


def test_async_worker_flow(live_server, uid):
    async def flow():
        async with AsyncMemsvcClient(live_server.url, live_server.token(uid)) as client:
            worker = AsyncTaskWorker(client)
            saved = await worker.delegate("task", "research.requested", ["a", "b"], data={"q": "x"})
            assert saved["sub_tasks"] == ["a", "b"]
            assert await worker.on_result("a", 1) is None
            assert await worker.on_result("a", 1) is None  # redelivered: recorded once, completes nothing
            done = await worker.on_result("b", 2)
            assert done is not None and done.results == {"a": 1, "b": 2}
            await worker.complete("task")
            assert await worker.on_result("b", 2) is None  # after completion: nothing left to do
            with pytest.raises(NotFoundError):
                await client.get_task_context("task")

    asyncio.run(flow())


@pytest.mark.parametrize("name", ["..", ".", "a/b", "a%2Fb", "задача 🙂"])
def test_client_ids_that_look_like_path_syntax_reach_their_own_object(live_server, uid, name):
    with MemsvcClient(live_server.url, live_server.token(uid)) as client:
        client.store_task_context(name, "e", data={"id": name})
        assert client.get_task_context(name)["data"] == {"id": name}
        client.create_plan(name, "goal")
        client.set_working(name, name, {"v": name})
        assert client.get_working(name, name)["value"] == {"v": name}
        assert client.get_plan(name)["plan_id"] == name
        client.delete_task_context(name)
        with pytest.raises(NotFoundError):
            client.get_task_context(name)
