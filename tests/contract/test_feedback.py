"""`POST /v1/memories/feedback` on both backends (issue 24): `useful` raises importance, `wrong`
and `outdated` supersede (recall stops returning the memory), every feedback is a new version on
the timeline with its signal and never its note; ids are current versions, applied at most once;
another user's or tenant's memory is a 404 and stays as it was."""

from __future__ import annotations

import json
import logging
import threading

import pytest

from memsvc.core.errors import InvalidArgument, NotFound, Taken
from memsvc.core.models import Caller
from memsvc.core.timeline import event_detail
from memsvc.service.feedback import GiveFeedback
from memsvc.service.memories import PutMemory
from memsvc.service.recall import RecallQuery
from memsvc.service.remember import RememberMemory
from memsvc.service.search import SearchQuery
from memsvc.service.timeline import EventsQuery
from tests.conftest import admin, alice, bob

NS = ("user", "alice", "memories")
CONTENT = "The user prefers green tea in the morning"
NOTE = "zebra-quartz-note-7731 the user told me this was wrong"


def remember(backend, content=CONTENT, caller=None, **kw):
    return backend.app.services.remember.remember(caller or alice(), RememberMemory(content=content, **kw)).memory


def feedback(backend, memory_id, signal, caller=None, **kw):
    return backend.app.services.feedback.give(caller or alice(), GiveFeedback(id=memory_id, signal=signal, **kw))


def recall(backend, caller=None, **kw):
    return backend.app.services.recall.recall(caller or alice(), RecallQuery(query=CONTENT, **kw))


def current(backend):
    """alice's one memory, as stored now."""
    (memory,) = backend.search.search(alice(), SearchQuery(namespace_prefix=list(NS), limit=10))
    return backend.memories.get(alice(), NS, memory.key)


class TestSignals:
    def test_useful_raises_importance_by_a_tenth(self, backend):
        memory = remember(backend, importance=0.5, tags=["drinks"])
        given = feedback(backend, memory.id, "useful")
        new = given.memory
        assert (given.signal, given.previous_id) == ("useful", memory.id)
        assert (new.namespace, new.key, new.version, new.created_at) == (NS, memory.key, 2, memory.created_at)
        assert new.id != memory.id
        assert new.value == {**memory.value, "importance": 0.6}  # nothing else changes
        assert backend.memories.get(alice(), NS, memory.key).value["importance"] == 0.6
        (hit,) = recall(backend).memories
        assert (hit.memory.id, hit.memory.value["importance"]) == (new.id, 0.6)

    def test_useful_twice_raises_twice_and_is_capped_at_one(self, backend):
        memory = remember(backend, importance=0.75)
        second = feedback(backend, feedback(backend, memory.id, "useful").memory.id, "useful").memory
        assert second.value["importance"] == 0.95 and second.version == 3
        third = feedback(backend, second.id, "useful").memory
        assert third.value["importance"] == 1.0 and third.version == 4
        fourth = feedback(backend, third.id, "useful").memory  # at the cap: still recorded, a new version
        assert fourth.value["importance"] == 1.0 and fourth.version == 5

    @pytest.mark.parametrize("signal", ["wrong", "outdated"])
    def test_wrong_and_outdated_supersede(self, backend, signal):
        memory = remember(backend, tags=["drinks"])
        assert [h.memory.id for h in recall(backend).memories] == [memory.id]
        new = feedback(backend, memory.id, signal).memory
        assert new.value["tags"] == ["drinks", "superseded"] and new.value.get("superseded_by") is None
        assert new.value["importance"] == memory.value["importance"]
        assert recall(backend).memories == []
        shown = recall(backend, include_superseded=True).memories
        assert [h.memory.id for h in shown] == [new.id]
        # Marked again (with the current id): still superseded once, a new version on the timeline.
        again = feedback(backend, new.id, "outdated").memory
        assert again.value["tags"] == ["drinks", "superseded"] and again.version == 3

    def test_a_superseded_memory_is_no_longer_a_neighbour(self, backend):
        memory = remember(backend)
        feedback(backend, memory.id, "wrong")
        again = backend.app.services.remember.remember(alice(), RememberMemory(content=CONTENT))
        assert again.action == "created" and again.memory.key != memory.key  # the next slot, not the wrong one

    def test_a_plain_item_is_refused_and_unchanged(self, backend):
        item = backend.memories.put(alice(), PutMemory(namespace=list(NS), key="plain", value={"text": "hello"}))
        with pytest.raises(Taken) as refused:
            feedback(backend, item.id, "useful")
        assert refused.value.status == 409 and refused.value.retryable is False
        got = backend.memories.get(alice(), NS, "plain")
        assert (got.id, got.version, got.value) == (item.id, 1, {"text": "hello"})

    def test_a_typed_memory_written_by_put_keeps_its_attributes_and_other_fields(self, backend):
        value = {"content": CONTENT, "type": "preference", "mine": {"a": 1}}
        item = backend.memories.put(alice(), PutMemory(namespace=list(NS), key="k", value=value,
                                                       attributes={"source": "intake"}, index_fields=["content"]))
        new = feedback(backend, item.id, "useful").memory
        assert new.value == {**value, "importance": 0.6} and new.attributes == {"source": "intake"}


class TestIds:
    def test_unknown_deleted_and_malformed_ids(self, backend):
        with pytest.raises(NotFound):
            feedback(backend, "00000000-0000-4000-8000-000000000000", "useful")
        memory = remember(backend)
        backend.memories.delete(alice(), NS, memory.key)
        with pytest.raises(NotFound):
            feedback(backend, memory.id, "useful")
        for bad in ({"id": "nope", "signal": "useful"}, {"signal": "useful"}, {"id": memory.id, "signal": "great"},
                    {"id": memory.id, "signal": "useful", "extra": 1}, {"id": memory.id, "signal": "useful",
                                                                        "note": "x" * 2001}):
            with pytest.raises(InvalidArgument):
                GiveFeedback.parse(bad)

    def test_the_same_id_twice_applies_once(self, backend):
        memory = remember(backend)
        first = feedback(backend, memory.id, "useful")
        with pytest.raises(NotFound):  # a client's retry: the id names a version that is no longer current
            feedback(backend, memory.id, "useful")
        assert current(backend).value["importance"] == 0.6 and current(backend).id == first.memory.id

    def test_racing_feedback_with_one_id_applies_once(self, backend):
        memory = remember(backend)
        outcomes: list[str] = []
        barrier = threading.Barrier(4)

        def send():
            barrier.wait()
            try:
                feedback(backend, memory.id, "useful")
                outcomes.append("ok")
            except (NotFound, Taken) as exc:
                outcomes.append(exc.code)

        threads = [threading.Thread(target=send) for _ in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert outcomes.count("ok") == 1 and len(outcomes) == 4
        got = current(backend)
        assert (got.version, got.value["importance"]) == (2, 0.6)

    def test_an_uppercase_id_names_the_same_memory(self, backend):
        memory = remember(backend)
        assert feedback(backend, memory.id.upper(), "useful").previous_id == memory.id


class TestIsolation:
    @pytest.mark.parametrize("caller", [
        bob(),
        Caller(tenant_id="globex", user_id="alice", roles=("user",)),
        admin("globex"),
    ], ids=["another user", "same user id in another tenant", "another tenant's admin"])
    def test_a_memory_the_caller_may_not_touch_is_not_found_and_unchanged(self, backend, caller):
        memory = remember(backend)
        for signal in ("useful", "wrong", "outdated"):
            with pytest.raises(NotFound) as refused:
                feedback(backend, memory.id, signal, caller=caller)
            assert refused.value.message == "no current memory with this id"  # as for a missing one
        got = current(backend)
        assert (got.id, got.version, got.value) == (memory.id, 1, memory.value)

    def test_the_tenants_admin_may_give_feedback(self, backend):
        memory = remember(backend)
        assert feedback(backend, memory.id, "wrong", caller=admin()).memory.version == 2


class TestTimeline:
    def test_each_feedback_is_an_update_event_with_its_signal_and_never_the_note(self, backend, caplog):
        caplog.set_level(logging.DEBUG)
        memory = remember(backend)
        useful = feedback(backend, memory.id, "useful", note=NOTE).memory
        wrong = feedback(backend, useful.id, "wrong", note=NOTE).memory
        backend.drain()
        page = backend.timeline.events(alice(), EventsQuery(namespace_prefix=["user", "alice"]))
        seen = [(v.event.kind, v.event.action, v.event.memory_id, v.event.version) for v in page.events]
        assert seen == [("add", "created", memory.id, 1), ("update", "feedback_useful", useful.id, 2),
                        ("update", "feedback_wrong", wrong.id, 3)]
        published = [event_detail(v.event) for v in page.events]
        assert [d.get("action") for d in published] == ["created", "feedback_useful", "feedback_wrong"]
        # Not in the events (as read, opened, or as published), the memory, or any log line.
        views = json.dumps([[v.value, v.attributes] for v in page.events]) + json.dumps(published)
        assert NOTE not in views and "zebra" not in views
        assert "zebra" not in json.dumps(backend.memories.get(alice(), NS, memory.key).value)
        assert "zebra" not in caplog.text
        stored = list(backend.event_log.scan("acme", (), kinds=frozenset({"add", "update"})))
        assert len(stored) == 3 and all(b"zebra" not in (e.value_ct or b"") for e in stored)
        assert "zebra" not in repr(stored)
