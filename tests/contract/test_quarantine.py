"""Bounded work on both backends (issue 22): a poison memory is quarantined, and everything behind
it goes on being indexed. The poison is the fake embedder's (tests/fakes/embedder.py): a text
holding a `poison` word is refused, one holding a `deadly` word kills the process mid-call."""

from __future__ import annotations

import json

import pytest

from memsvc.core.models import Caller
from memsvc.local_server import build_event, stringify_claims
from memsvc.service.admin import IndexRetry
from memsvc.service.indexer import DIED_ALONE
from memsvc.service.memories import PutMemory
from memsvc.service.search import SearchQuery
from memsvc.service.timeline import EventsQuery
from tests.conftest import admin, alice
from tests.contract.conftest import Backend
from tests.fakes.embedder import ProcessKilled

NS = ["user", "alice", "notes"]
POISON = "poisonpill"
BYSTANDER = Caller(tenant_id="globex", user_id="gina", roles=("user",))


def put(backend, key, text, caller=None, namespace=NS, **value):
    return backend.memories.put(caller or alice(), PutMemory(namespace=namespace, key=key,
                                                            value={"text": text, **value}))


def found(backend, caller, prefix, query):
    return [m.key for m in backend.search.search(caller, SearchQuery(namespace_prefix=prefix, query=query,
                                                                    mode="semantic"))]


def settle(backend):
    """Deliver every change, and the changes that delivery made: a quarantine is a change of its
    own (the timeline's), which the table's stream delivers after the batch that made it."""
    backend.drain()
    backend.drain()


def index_failed_events(backend):
    return backend.timeline.events(alice(), EventsQuery(ns=["user", "alice"], kinds=["index_failed"])).events


def test_a_poison_memory_is_quarantined_and_retried_while_everything_behind_it_is_indexed(backend):
    backend.embedder.poison = {POISON}
    poison = put(backend, "bad", f"the {POISON} nobody can embed", lang="xx")
    put(backend, "good", "alice's own memory about otters")
    put(backend, "g", "a bystander memory about giraffes", caller=BYSTANDER, namespace=["user", "gina"])

    settle(backend)

    # everything behind it was indexed, in this tenant and in another
    assert found(backend, BYSTANDER, ["user", "gina"], "giraffes") == ["g"]
    assert found(backend, alice(), ["user", "alice"], "otters") == ["good"]
    # the poison stays readable by key and by filter, is not found by meaning
    assert backend.memories.get(alice(), NS, "bad").value == {"text": f"the {POISON} nobody can embed", "lang": "xx"}
    by_filter = backend.search.search(alice(), SearchQuery(namespace_prefix=["user", "alice"], filter={"lang": "xx"}))
    assert [m.key for m in by_filter] == ["bad"]
    assert "bad" not in found(backend, alice(), ["user", "alice"], "nobody can embed")
    # it is counted and listed, with its id and reason, for its own tenant only
    status = backend.admin.index_status(admin())
    assert (status.pending, status.quarantined) == (0, 1)
    (listed,) = status.quarantined_items
    assert (listed.id, listed.key, listed.index_error) == (poison.id, "bad", "the embedding model failed on it (ValueError)")
    assert backend.admin.index_status(admin("globex")).quarantined == 0
    # on the timeline as index_failed, with no value
    (event,) = index_failed_events(backend)
    assert (event.event.memory_id, event.event.reason, event.value) == (poison.id, listed.index_error, None)
    if backend.aws is not None:  # and on the bus, as memory.index_failed, without the text
        (published,) = [e for e in backend.aws.published() if e["detail-type"] == "memory.index_failed"]
        assert published["detail"]["memory_id"] == poison.id and published["detail"]["reason"] == listed.index_error
        assert POISON not in json.dumps(published)

    # another tenant's admin cannot retry it; once the poison is gone, its own admin can
    assert backend.admin.index_retry(admin("globex"), IndexRetry(ids=[poison.id])).failed == [(poison.id, "NOT_FOUND")]
    assert backend.admin.index_status(admin()).quarantined == 1
    backend.embedder.poison = set()
    outcome = backend.admin.index_retry(admin(), IndexRetry(ids=[poison.id]))
    assert (outcome.retried, outcome.failed) == ([poison.id], [])
    backend.drain()

    assert found(backend, alice(), ["user", "alice"], POISON)[0] == "bad"
    status = backend.admin.index_status(admin())
    assert (status.pending, status.quarantined, status.quarantined_items) == (0, 0, [])
    assert len(index_failed_events(backend)) == 1  # a retry is no event
    again = backend.admin.index_retry(admin(), IndexRetry(ids=[poison.id]))
    assert again.failed == [(poison.id, "NOT_QUARANTINED")]


def test_a_quarantined_memory_leaves_quarantine_when_rewritten_or_deleted(backend):
    backend.embedder.poison = {POISON}
    first = put(backend, "a", f"{POISON} one")
    put(backend, "b", f"{POISON} two")
    settle(backend)
    assert backend.admin.index_status(admin()).quarantined == 2

    backend.embedder.poison = set()
    rewritten = put(backend, "a", f"{POISON} one, rewritten")  # a new version: a new memory id
    backend.memories.delete(alice(), NS, "b")
    backend.drain()

    status = backend.admin.index_status(admin())
    assert (status.pending, status.quarantined) == (0, 0)
    assert found(backend, alice(), ["user", "alice"], "rewritten") == ["a"]  # b is deleted
    assert backend.admin.index_retry(admin(), IndexRetry(ids=[first.id])).failed == [(first.id, "NOT_FOUND")]
    assert rewritten.id != first.id


def test_a_memory_that_kills_the_process_twice_is_quarantined_not_retried_forever(backend, clock):
    """The process dies mid-batch (the fake embedder's `deadly` word stands for an OOM kill or a
    Lambda timeout): the next delivery finds the attempt marks the dead process left on the rows
    and runs each of those items alone; the one it dies on again, alone, is quarantined at the
    delivery after, never run a third time; the others are indexed."""
    backend.embedder.deadly = {POISON}
    for key, text in (("a", "alpha otters"), ("bad", f"the {POISON} that kills"), ("c", "gamma otters")):
        put(backend, key, text)
    restarts = []  # the local apps this test starts

    def next_start():
        """Locally a new process: a new app with new workers on the same data dir (the dead
        one's in-memory state is gone). On AWS the event source mapping's retry of the batch."""
        if backend.local is None:
            backend.aws.cold_start()
            return backend
        from memsvc.bootstrap import build_local

        app = build_local(backend.data_dir, embedder=backend.embedder, clock=clock, start_workers=False)
        restarts.append(app)
        return Backend("local", app, app.store, app.vectors, backend.embedder, clock, data_dir=app.data_dir, local=app)

    try:
        with pytest.raises(ProcessKilled):
            backend.drain()  # the batch dies: a, bad and c are left marked
        with pytest.raises(ProcessKilled):
            next_start().drain()  # each alone: a is indexed, then the process dies on bad, alone
        last = next_start()
        settle(last)  # bad is quarantined without running; c is indexed alone; then nothing is left

        assert sum(POISON in " ".join(call) for call in backend.embedder.calls) == 2  # never a third time
        assert sorted(found(last, alice(), ["user", "alice"], "otters")) == ["a", "c"]
        status = last.admin.index_status(admin())
        assert (status.pending, status.quarantined, [q.index_error for q in status.quarantined_items]) == (
            0, 1, [DIED_ALONE])
        (event,) = index_failed_events(last)
        assert event.event.reason == DIED_ALONE
    finally:
        for app in restarts:
            app.close()


# -- the admin routes, through each backend's router ------------------------------------------------


def call(backend, method, path, claims, body=None):
    event = build_event(method=method, path=path, raw_query="", headers={}, source_ip="127.0.0.1",
                        body=json.dumps(body) if body is not None else None,
                        authorizer={"jwt": {"claims": stringify_claims(claims), "scopes": None}})
    response = backend.app.router.handle(event)
    return response["statusCode"], json.loads(response["body"]) if response["body"] else None


ACME_ADMIN = {"sub": "root", "tenant_id": "acme", "roles": ["admin"]}
GLOBEX_ADMIN = {"sub": "root", "tenant_id": "globex", "roles": ["admin"]}
ALICE = {"sub": "alice", "tenant_id": "acme"}
STATUS, RETRY = "/admin/v1/memories/index/status", "/admin/v1/memories/index/retry"


def test_the_status_and_retry_routes_are_each_tenants_own(backend):
    backend.embedder.poison = {POISON}
    poison = put(backend, "bad", f"{POISON} text")
    backend.drain()

    status, body = call(backend, "GET", STATUS, ACME_ADMIN)
    assert status == 200 and body["quarantined"] == 1
    (listed,) = body["quarantined_items"]
    assert {k: listed[k] for k in ("id", "namespace", "key", "version")} == {
        "id": poison.id, "namespace": NS, "key": "bad", "version": 1}
    assert listed["reason"] == "the embedding model failed on it (ValueError)" and listed["quarantined_at"]
    # another tenant's admin sees nothing of it and cannot retry it
    status, body = call(backend, "GET", STATUS, GLOBEX_ADMIN)
    assert (status, body["quarantined"], body["quarantined_items"]) == (200, 0, [])
    status, body = call(backend, "POST", RETRY, GLOBEX_ADMIN, {"ids": [poison.id]})
    assert (status, body) == (202, {"retried": [], "failed": [{"id": poison.id, "code": "NOT_FOUND"}]})
    # a user may do neither
    for method, path, payload in (("GET", STATUS, None), ("POST", RETRY, {"ids": [poison.id]})):
        status, body = call(backend, method, path, ALICE, payload)
        assert (status, body["error"]["code"]) == (403, "FORBIDDEN"), path
    assert call(backend, "GET", STATUS, ACME_ADMIN)[1]["quarantined"] == 1  # nothing was retried

    backend.embedder.poison = set()
    status, body = call(backend, "POST", RETRY, ACME_ADMIN, {"ids": [poison.id]})
    assert (status, body) == (202, {"retried": [poison.id], "failed": []})
    backend.drain()
    assert call(backend, "GET", STATUS, ACME_ADMIN)[1]["quarantined"] == 0


ID = "0b5ad3c4-1f7e-4c5e-9a53-5d1f3f1c2a10"


@pytest.mark.parametrize("body, field", [
    ({}, "ids"), ({"ids": []}, "ids"), ({"ids": ["not-a-uuid"]}, "ids"), ({"ids": [ID.upper()]}, "ids"),
    ({"ids": [ID, ID]}, "ids"), ({"ids": [f"{ID[:24]}{n:012d}" for n in range(101)]}, "ids"),
    ({"ids": [ID], "all": True}, "all"),
], ids=["missing", "empty", "not-a-uuid", "upper-case", "repeated", "too-many", "unknown-field"])
def test_a_retry_body_outside_its_schema_is_a_400(backend, body, field):
    status, answer = call(backend, "POST", RETRY, ACME_ADMIN, body)
    assert (status, answer["error"]["code"], answer["error"]["details"]["field"]) == (400, "INVALID_ARGUMENT", field)
