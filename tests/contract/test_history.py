"""`GET /v1/memories/history` on both backends: every version of one memory, newest first, from
the timeline's per-key index and the item row; paging, TTL expiry, retention, isolation."""

from __future__ import annotations

import pytest

from memsvc.core.errors import InvalidArgument, NotFound
from memsvc.core.models import Caller
from memsvc.service.feedback import GiveFeedback
from memsvc.service.history import HistoryQuery
from memsvc.service.memories import PutMemory
from memsvc.service.remember import RememberMemory
from memsvc.service.tenant_config import SettingsPatch
from tests.conftest import admin, alice, bob

NS = ["user", "alice", "notes"]


def put(backend, key="k", value=None, caller=None, namespace=NS, **kw):
    return backend.memories.put(caller or alice(), PutMemory(
        namespace=namespace, key=key, value=value if value is not None else {"text": key}, **kw))


def history(backend, caller=None, namespace=NS, key="k", **kw):
    return backend.app.services.history.history(caller or alice(), HistoryQuery(ns=namespace, key=key, **kw))


def walk(backend, limit=3, **kw):
    """Every version, page by page; returns (versions, the last page)."""
    seen, cursor = [], None
    for _ in range(100):
        page = history(backend, limit=limit, cursor=cursor, **kw)
        assert len(page.versions) <= limit
        seen.extend(page.versions)
        if page.next_cursor is None:
            return seen, page
        cursor = page.next_cursor
    raise AssertionError("the walk did not end")


def test_write_update_delete_rewrite(backend, clock):
    first = put(backend, value={"text": "one"}, attributes={"colour": "blue"})
    clock.advance(1)
    second = put(backend, value={"text": "two"})
    clock.advance(1)
    backend.memories.delete(alice(), NS, "k")
    clock.advance(1)
    third = put(backend, value={"text": "three"})
    backend.drain()

    page = history(backend)
    assert [(v.kind, v.version) for v in page.versions] == [("add", 4), ("delete", 3), ("update", 2), ("add", 1)]
    add2, delete, update, add = page.versions
    assert (add.value, add.attributes) == ({"text": "one"}, {"colour": "blue"})
    assert update.value == {"text": "two"} and add2.value == {"text": "three"}
    assert delete.value is None and delete.memory_id == second.id
    assert [add.event_id, update.event_id, add2.event_id] == [first.id, second.id, third.id]
    assert add.occurred_at == first.updated_at
    assert add2.replaced_by is None
    assert delete.replaced_by == (third.id, 4, "add")
    assert update.replaced_by == (delete.event_id, 3, "delete")
    assert add.replaced_by == (second.id, 2, "update")
    assert all(v.recorded for v in page.versions)
    assert page.next_cursor is None and page.past_retention_before is None and page.retention_days == 90


def test_the_current_row_before_the_timeline_records_it(backend, clock):
    put(backend, value={"text": "one"})
    backend.drain()
    clock.advance(1)
    second = put(backend, value={"text": "two"})  # not drained: the timeline has not seen it
    page = history(backend)
    assert [(v.kind, v.version, v.recorded) for v in page.versions] == [("update", 2, False), ("add", 1, True)]
    assert page.versions[0].value == {"text": "two"} and page.versions[0].event_id == second.id
    assert page.versions[1].replaced_by == (second.id, 2, "update")
    backend.drain()
    assert [(v.version, v.recorded) for v in history(backend).versions] == [(2, True), (1, True)]


def test_remember_supersede_and_feedback(backend, clock):
    services = backend.app.services
    ns = ["user", "alice", "memories"]
    memory = services.remember.remember(alice(), RememberMemory(
        content="Alice lives in Lisbon", namespace=ns)).memory
    clock.advance(1)
    useful = services.feedback.give(alice(), GiveFeedback(id=memory.id, signal="useful")).memory
    clock.advance(1)
    wrong = services.feedback.give(alice(), GiveFeedback(id=useful.id, signal="wrong")).memory
    backend.drain()

    page = history(backend, namespace=ns, key=memory.key)
    assert [(v.version, v.action) for v in page.versions] == [
        (3, "feedback_wrong"), (2, "feedback_useful"), (1, "created")]
    assert page.versions[0].value["content"] == "Alice lives in Lisbon"
    assert "superseded" in page.versions[0].value["tags"]
    assert page.versions[2].replaced_by == (useful.id, 2, "update")
    assert page.versions[0].event_id == wrong.id


def test_superseded_by_remember(backend, clock):
    backend.settings.update("acme", SettingsPatch(semantic_auto_update=0.9, semantic_check_low=0.6))
    remember = backend.app.services.remember.remember
    ns = ["user", "alice", "memories"]
    berlin = remember(alice(), RememberMemory(content="I live in Berlin", namespace=ns)).memory
    clock.advance(1)
    munich = remember(alice(), RememberMemory(content="I live in Munich", namespace=ns)).memory
    backend.drain()
    superseded, created = history(backend, namespace=ns, key=berlin.key).versions
    assert (superseded.action, superseded.version, created.action) == ("superseded", 2, "created")
    assert superseded.superseded_by == munich.key and created.superseded_by is None
    assert superseded.value["content"] == "I live in Berlin"
    assert created.replaced_by == (superseded.event_id, 2, "update")


def test_paging_is_newest_first_without_gaps(backend, clock):
    for i in range(8):
        put(backend, value={"n": i})
        clock.advance(1)
    backend.drain()
    seen, last = walk(backend, limit=3)
    assert [v.version for v in seen] == list(range(8, 0, -1))
    assert [v.value for v in seen] == [{"n": i} for i in range(7, -1, -1)]
    for newer, older in zip(seen, seen[1:]):  # replaced_by crosses page boundaries
        assert older.replaced_by == (newer.event_id, newer.version, newer.kind)
    assert last.past_retention_before is None


def test_a_cursor_for_another_key_or_forged_is_refused(backend, clock):
    for i in range(3):
        put(backend, value={"n": i})
        put(backend, key="other", value={"n": i})
    backend.drain()
    cursor = history(backend, limit=1).next_cursor
    assert cursor is not None
    with pytest.raises(InvalidArgument):
        history(backend, key="other", cursor=cursor)
    with pytest.raises(InvalidArgument):
        history(backend, cursor=cursor[:-4] + "AAAA")


def test_ttl_expiry_is_a_version(backend, clock):
    put(backend, value={"text": "short"}, ttl_seconds=60)
    clock.advance(61)
    backend.sweep()
    backend.drain()
    with pytest.raises(NotFound):  # gone for a read by key, still in its history
        backend.memories.get(alice(), NS, "k")
    page = history(backend)
    assert [v.kind for v in page.versions] == ["expired", "add"]
    expired, add = page.versions
    assert add.value == {"text": "short"} and expired.value is None
    assert expired.memory_id == add.memory_id and expired.expires_at == add.expires_at
    assert add.replaced_by == (expired.event_id, expired.version, "expired")


def test_versions_past_retention_say_so(backend, clock):
    backend.admin.put_settings(admin(), SettingsPatch(tombstone_retention_days=1))
    put(backend, value={"n": 1})
    clock.advance(1)
    put(backend, value={"n": 2})
    backend.drain()
    clock.advance(20 * 3600)
    put(backend, value={"n": 3})
    backend.drain()
    clock.advance(6 * 3600)  # versions 1 and 2 are 26 hours old, version 3 is 6
    backend.sweep()
    seen, last = walk(backend, limit=1)
    assert [v.version for v in seen] == [3]
    assert last.past_retention_before == 3 and last.retention_days == 1
    assert seen[0].value == {"n": 3}


def test_isolation_and_absence_are_the_same_404(backend, clock):
    put(backend, value={"secret": "alice's"})
    backend.drain()
    for caller, ns in ((bob(), NS), (Caller(tenant_id="other", user_id="alice", roles=("user",)), NS), (alice(), ["user", "alice", "never"])):
        with pytest.raises(NotFound) as err:
            history(backend, caller=caller, namespace=ns)
        assert err.value.message == "no history for this namespace and key"


def test_bad_input_is_refused(backend):
    with pytest.raises(Exception):
        HistoryQuery(ns=NS, key="k", limit=0)
    with pytest.raises(Exception):
        HistoryQuery(ns=NS, key="k", limit=101)
    with pytest.raises(Exception):
        HistoryQuery(ns=[], key="k")


def test_a_page_ending_on_the_unrecorded_row_never_repeats_it(backend, clock):
    put(backend, value={"n": 1})
    backend.drain()
    clock.advance(1)
    put(backend, value={"n": 2})  # not on the timeline yet
    first = history(backend, limit=1)
    assert [(v.version, v.recorded) for v in first.versions] == [(2, False)]
    backend.drain()  # now it is, above the cursor
    second = history(backend, limit=1, cursor=first.next_cursor)
    assert [(v.version, v.recorded) for v in second.versions] == [(1, True)]
    assert second.versions[0].replaced_by[1] == 2 and second.next_cursor is None
