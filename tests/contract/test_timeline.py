"""The event timeline on both backends: what each change records, how a cursor walks it, who sees
what, replays, retention. Events reach the log through the real consumer of each backend's
change feed (`Backend.drain()`: the local feed worker, or the timeline Lambda on moto's stream)."""

from __future__ import annotations

import base64
import threading
from datetime import timedelta

import pytest

from memsvc.core.errors import Forbidden, InvalidArgument
from memsvc.core.models import Caller, to_rfc3339
from memsvc.service.memories import PutMemory
from memsvc.service.tenant_config import SettingsPatch
from memsvc.service.timeline import EventsQuery
from memsvc.service.timeline import Timeline
from tests.conftest import admin, alice, bob

NS = ["user", "alice", "notes"]


def put(backend, key="k", value=None, caller=None, namespace=NS, **kw):
    return backend.memories.put(caller or alice(), PutMemory(namespace=namespace, key=key,
                                                            value=value if value is not None else {"text": key}, **kw))


def events(backend, caller=None, **kw):
    kw.setdefault("namespace_prefix", ["user", "alice"])
    return backend.timeline.events(caller or alice(), EventsQuery(**kw))


def walk(backend, caller=None, limit=7, **kw):
    """Follow after_cursor until it is null; returns every event seen, in order."""
    seen, cursor = [], None
    for _ in range(1000):
        page = events(backend, caller, limit=limit, after_cursor=cursor, **kw)
        assert len(page.events) <= limit
        seen.extend(page.events)
        cursor = page.after_cursor
        if cursor is None:
            return seen
    raise AssertionError("the walk did not end")


def order(views):
    return [(v.event.occurred_at, v.event.id) for v in views]


class TestWhatIsRecorded:
    def test_add_update_delete_expire(self, backend, clock):
        first = put(backend, value={"text": "one"}, attributes={"colour": "blue"})
        clock.advance(1)
        second = put(backend, value={"text": "two"})
        clock.advance(1)
        backend.memories.delete(alice(), NS, "k")
        clock.advance(1)
        again = put(backend, value={"text": "three"}, ttl_seconds=60)
        clock.advance(61)
        backend.sweep()
        backend.drain()

        got = walk(backend)
        assert [v.event.kind for v in got] == ["add", "update", "delete", "add", "expired"]
        add, update, delete, add2, expired = got
        assert (add.value, add.attributes) == ({"text": "one"}, {"colour": "blue"})
        assert (update.value, update.attributes) == ({"text": "two"}, None)
        assert delete.value is None and delete.attributes is None
        assert expired.value is None and expired.attributes is None
        assert [add.event.id, update.event.id, add2.event.id] == [first.id, second.id, again.id]
        assert add.event.occurred_at == first.updated_at and update.event.occurred_at == second.updated_at
        assert delete.event.memory_id == second.id  # the memory it removed; the event id is its own
        assert delete.event.id not in (first.id, second.id)
        assert expired.event.memory_id == again.id and expired.event.expires_at == again.expires_at
        assert [v.event.version for v in got] == [1, 2, 3, 4, 5]
        assert order(got) == sorted(order(got))
        assert len({v.event.occurred_at for v in got}) == len(got)

    def test_nothing_until_the_consumer_has_run(self, backend):
        put(backend)
        assert events(backend).events == []
        backend.drain()
        assert len(events(backend).events) == 1

    def test_replayed_changes_record_no_second_event(self, backend):
        for n in range(5):
            put(backend, key=f"k{n}")
        backend.memories.delete(alice(), NS, "k0")
        changes = backend.changes()
        assert len(changes) == 6
        timeline = Timeline(backend.event_log)
        assert timeline.apply(changes) == set()
        first = walk(backend)
        assert timeline.apply(changes) == set()  # at least once in ...
        assert timeline.apply(list(reversed(changes))) == set()
        backend.drain()  # ... and the real consumer delivers them once more
        again = walk(backend)
        assert [v.event.id for v in again] == [v.event.id for v in first]  # exactly once out
        assert order(again) == order(first)
        assert len(again) == 6

    def test_a_change_recorded_late_is_stamped_after_what_is_already_there(self, backend, clock):
        early = put(backend, key="early")
        clock.advance(5)
        changes = backend.changes()
        late_write = put(backend, key="late")  # recorded first, though written second
        later = [c for c in backend.changes() if c.new.id == late_write.id]
        Timeline(backend.event_log).apply(later)
        Timeline(backend.event_log).apply([c for c in changes if c.new.id == early.id])
        got = walk(backend)
        assert [v.event.key for v in got] == ["late", "early"]
        assert got[1].event.occurred_at > got[0].event.occurred_at  # moved forward, never behind
        assert got[0].event.occurred_at == late_write.updated_at


    def test_a_write_over_an_expired_memory_records_its_expiry_first(self, backend, clock):
        gone = put(backend, value={"text": "short-lived"}, ttl_seconds=60)
        clock.advance(120)  # expired, and neither the sweeper nor TTL has run
        again = put(backend, value={"text": "back"})
        changes = backend.changes()
        backend.drain()
        backend.sweep()
        backend.drain()
        got = walk(backend)
        assert [v.event.kind for v in got] == ["add", "expired", "add"]
        expired = got[1].event
        assert (expired.memory_id, expired.version, expired.expires_at) == (gone.id, 1, gone.expires_at)
        assert expired.occurred_at == gone.expires_at < got[2].event.occurred_at
        assert got[2].event.id == again.id and got[2].value == {"text": "back"}
        assert len(changes) == 2
        Timeline(backend.event_log).apply(changes)  # replayed: nothing new
        assert len(walk(backend)) == 3

    def test_deleting_an_expired_memory_leaves_its_expiry_to_be_recorded(self, backend, clock):
        put(backend, ttl_seconds=60)
        clock.advance(120)
        backend.memories.delete(alice(), NS, "k")  # 204, as for any absent key: nothing to delete
        backend.drain()
        assert [v.event.kind for v in walk(backend)] == ["add"]
        backend.sweep()
        backend.drain()
        assert [v.event.kind for v in walk(backend)] == ["add", "expired"]


class _CannotRecordKey:
    """The backend's event log, unable to record any batch that holds an event of `key` (as an
    event the log refuses would be)."""

    def __init__(self, log, key):
        self._log, self._key, self.calls = log, key, 0

    def record(self, events):
        self.calls += 1
        if any(e.key == self._key for e in events):
            raise RuntimeError("this event cannot be recorded")
        return self._log.record(events)


class TestAChangeThatCannotBeRecorded:
    """One change whose event the log refuses holds up its own tenant's later changes, never
    another tenant's (the batch is recorded change by change once it failed whole)."""

    def test_holds_up_only_its_own_tenant(self, backend):
        globex = Caller(tenant_id="globex", user_id="alice", roles=("user",))
        for n, key in enumerate(["k0", "bad", "k2"]):
            put(backend, key=key)
            put(backend, key=f"g{n}", caller=globex)
        changes = backend.changes()
        seq = {(c.tenant, c.new.key): c.seq for c in changes}
        log = _CannotRecordKey(backend.event_log, "bad")

        failed = Timeline(log).apply(changes)

        assert failed == {seq[("acme", "bad")], seq[("acme", "k2")]}  # k2 waits behind it, in order
        assert [v.event.key for v in walk(backend)] == ["k0"]
        assert [v.event.key for v in walk(backend, globex, namespace_prefix=["user", "alice"])] == ["g0", "g1", "g2"]
        assert log.calls == 1 + 5  # the batch, then each change but acme's k2

    def test_the_rest_follows_once_it_is_recorded(self, backend):
        for key in ["k0", "bad", "k2"]:
            put(backend, key=key)
        changes = backend.changes()
        Timeline(_CannotRecordKey(backend.event_log, "bad")).apply(changes)
        assert Timeline(backend.event_log).apply(changes) == set()  # the retry, the log mended
        got = walk(backend)
        assert [v.event.key for v in got] == ["k0", "bad", "k2"]
        assert order(got) == sorted(order(got))


class TestQuerying:
    def test_walking_the_cursor_yields_each_event_once_in_order(self, backend, clock):
        for n in range(23):
            put(backend, key=f"k{n:02d}")
            if n % 5 == 0:
                clock.advance(0.001)
        backend.drain()
        got = walk(backend, limit=5)
        assert [v.event.key for v in got] == [f"k{n:02d}" for n in range(23)]
        assert order(got) == sorted(order(got))
        full = events(backend, limit=200)
        assert len(full.events) == 23 and full.after_cursor is None
        assert full.resume_cursor is not None

    def test_a_full_last_page_still_ends_with_null(self, backend):
        for n in range(6):
            put(backend, key=f"k{n}")
        backend.drain()
        first = events(backend, limit=3)
        second = events(backend, limit=3, after_cursor=first.after_cursor)
        assert first.after_cursor is not None and len(second.events) == 3
        assert second.after_cursor is None

    def test_resume_cursor_tails_the_timeline(self, backend):
        put(backend, key="a")
        backend.drain()
        page = events(backend)
        assert page.after_cursor is None
        put(backend, key="b")
        backend.drain()
        later = events(backend, after_cursor=page.resume_cursor)
        assert [v.event.key for v in later.events] == ["b"]

    def test_walk_while_new_events_arrive(self, backend):
        stop = threading.Event()
        written: list[str] = []

        def writer():
            n = 0
            while not stop.is_set() and n < 60:
                put(backend, key=f"w{n:03d}")
                written.append(f"w{n:03d}")
                n += 1

        thread = threading.Thread(target=writer)
        thread.start()
        seen, cursor = [], None
        try:
            for _ in range(200):
                backend.drain()
                page = events(backend, limit=4, after_cursor=cursor)
                seen.extend(page.events)
                cursor = page.resume_cursor
                if not thread.is_alive() and page.after_cursor is None:
                    break
        finally:
            stop.set()
            thread.join()
        # However the two threads were scheduled, the rest is read from where the walk stopped.
        backend.drain()
        seen.extend(walk_from(backend, cursor))
        keys = [v.event.key for v in seen]
        assert len(keys) == len(set(keys)), "an event came twice"
        assert sorted(keys) == sorted(written), "an event was missed"
        assert order(seen) == sorted(order(seen))

    def test_kinds_after_and_before(self, backend, clock):
        put(backend, key="a")
        clock.advance(10)
        put(backend, key="a", value={"text": "again"})
        clock.advance(10)
        backend.memories.delete(alice(), NS, "a")
        backend.drain()
        all_events = walk(backend)
        add, update, delete = all_events
        assert [v.event.kind for v in walk(backend, kinds=["delete", "add"])] == ["add", "delete"]
        assert [v.event.kind for v in walk(backend, kinds=["update"])] == ["update"]
        after = to_rfc3339(add.event.occurred_at)
        before = to_rfc3339(delete.event.occurred_at)
        assert [v.event.kind for v in walk(backend, after=after)] == ["update", "delete"]
        assert [v.event.kind for v in walk(backend, before=before)] == ["add", "update"]
        assert [v.event.kind for v in walk(backend, after=after, before=before)] == ["update"]
        offset = (update.event.occurred_at + timedelta(hours=2)).isoformat().replace("+00:00", "+02:00")
        assert [v.event.kind for v in walk(backend, after=offset)] == ["delete"]  # offsets are honoured

    def test_prefix_scoping(self, backend):
        put(backend, key="n", namespace=["user", "alice", "notes"])
        put(backend, key="p", namespace=["user", "alice", "prefs"])
        put(backend, key="x", namespace=["user", "alicea", "notes"], caller=admin())
        put(backend, key="t", namespace=["team"], caller=admin())
        backend.drain()
        assert [v.event.key for v in walk(backend, namespace_prefix=["user", "alice", "prefs"])] == ["p"]
        assert [v.event.key for v in walk(backend)] == ["n", "p"]
        assert [v.event.key for v in walk(backend, caller=admin(), namespace_prefix=[])] == ["n", "p", "x", "t"]
        assert [v.event.key for v in walk(backend, caller=admin(), namespace_prefix=["user"])] == ["n", "p", "x"]
        assert [v.event.key for v in walk(backend, caller=admin(), namespace_prefix=["team"])] == ["t"]


class TestWalls:
    def test_users_are_narrowed_to_their_own_events(self, backend):
        put(backend, key="mine")
        put(backend, key="his", namespace=["user", "bob", "notes"], caller=bob())
        backend.drain()
        assert [v.event.key for v in walk(backend, caller=bob(), namespace_prefix=[])] == ["his"]
        assert [v.event.key for v in walk(backend, caller=alice(), namespace_prefix=["user"])] == ["mine"]
        with pytest.raises(Forbidden):
            events(backend, caller=bob(), namespace_prefix=["user", "alice"])

    def test_tenants_never_see_each_other(self, backend):
        put(backend, key="acme-only")
        backend.drain()
        assert walk(backend, caller=admin("globex"), namespace_prefix=[]) == []
        assert len(walk(backend, caller=admin("acme"), namespace_prefix=[])) == 1

    def test_foreign_forged_and_altered_cursors_are_refused(self, backend):
        for n in range(3):
            put(backend, key=f"k{n}")
            put(backend, key=f"k{n}", caller=admin("globex"), namespace=NS)
        backend.drain()
        cursor = events(backend, limit=1).after_cursor
        assert cursor
        with pytest.raises(InvalidArgument):
            events(backend, caller=admin("globex"), namespace_prefix=[], after_cursor=cursor)
        raw = bytearray(base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)))
        raw[-1] ^= 1
        altered = base64.urlsafe_b64encode(bytes(raw)).decode().rstrip("=")
        for bad in (altered, "not-a-cursor", "", "%%%", "A" * 2000):
            with pytest.raises(InvalidArgument):
                events(backend, after_cursor=bad)
        assert len(events(backend, limit=5, after_cursor=cursor).events) == 2  # the real one still works

    def test_a_cursor_for_a_tenant_with_no_data_gives_it_no_key(self, backend):
        put(backend)
        backend.drain()
        cursor = events(backend, limit=1).resume_cursor
        with pytest.raises(InvalidArgument):
            events(backend, caller=admin("fresh"), namespace_prefix=[], after_cursor=cursor)
        assert backend.store.get_wrapped_key("fresh") is None  # reading a cursor changed nothing


class TestBadInput:
    @pytest.mark.parametrize("kw", [
        {"limit": 0}, {"limit": 201}, {"limit": True}, {"kinds": ["created"]}, {"kinds": "add"},
        {"after": "yesterday"}, {"before": "2026-13-01T00:00:00Z"}, {"namespace_prefix": ["user", ""]},
        {"after": "0001-01-01T00:00:00+14:00"}, {"before": "9999-12-31T23:59:59-12:00"},
    ])
    def test_is_a_400(self, backend, kw):
        with pytest.raises(InvalidArgument):
            events(backend, **kw)


class TestRetention:
    def test_events_and_tombstones_go_after_the_retention_period(self, backend, clock):
        backend.admin.put_settings(admin(), SettingsPatch(tombstone_retention_days=1))
        put(backend, key="old")
        backend.memories.delete(alice(), NS, "old")
        backend.drain()
        assert len(walk(backend)) == 2
        clock.advance(12 * 3600)
        put(backend, key="new")
        backend.drain()
        clock.advance(13 * 3600)  # "old"'s events are 25 hours old, "new"'s 13
        backend.sweep()
        assert [v.event.key for v in walk(backend)] == ["new"]
        assert backend.store.get("acme", tuple(NS), "old") is None  # the tombstone went too


def walk_from(backend, cursor):
    seen = []
    while True:
        page = events(backend, limit=4, after_cursor=cursor)
        seen.extend(page.events)
        if page.after_cursor is None:
            return seen
        cursor = page.after_cursor
