"""`known_at` (issue 25, transaction time) on both backends: search and recall answer with the
versions memsvc held then, from the timeline (keys since updated or deleted included, nothing
written after), filtered and authorized as a normal search; with `as_of`, valid time is checked on
the version then; a bad or unanswerable `known_at` is a 400 that changes nothing; another user's
or tenant's versions never appear."""

from __future__ import annotations

from datetime import timedelta

import pytest

from memsvc.core.errors import Forbidden, InvalidArgument
from memsvc.core.models import Caller, to_rfc3339
from memsvc.service import known_at as known_at_module
from memsvc.service.memories import PutMemory
from memsvc.service.recall import RecallQuery
from memsvc.service.remember import RememberMemory
from memsvc.service.search import SearchQuery
from memsvc.service.tenant_config import SettingsPatch
from tests.conftest import admin, alice, bob

NS = ["user", "alice", "notes"]
MEMORIES = ["user", "alice", "memories"]
BERLIN, MUNICH, LISBON = "I live in Berlin", "I live in Munich", "I live in Lisbon"
QUERY = "where do I live"


@pytest.fixture
def app(backend):
    """As test_valid_time.py: remember's thresholds for bag-of-words cosines, recall's adaptive cut off."""
    backend.settings.update("acme", SettingsPatch(semantic_auto_update=0.9, semantic_check_low=0.6,
                                                  episodic_auto_update=0.92, episodic_check_low=0.6,
                                                  recall_cut_gap=1.0, recall_cut_margin=1.0))
    return backend


def at(app, seconds: float = 0) -> str:
    """The clock's now, moved by `seconds`, as RFC 3339."""
    return to_rfc3339(app.clock.now() + timedelta(seconds=seconds))


def put(app, key, text, caller=None, namespace=NS, **value):
    return app.memories.put(caller or alice(), PutMemory(namespace=namespace, key=key, value={"text": text, **value}))


def search(app, caller=None, **kw):
    kw.setdefault("namespace_prefix", ["user", "alice"])
    return app.search.answer(caller or alice(), SearchQuery.parse(kw))


def texts(app, caller=None, **kw) -> list[str]:
    return sorted(m.value.get("content") or m.value.get("text") for m in search(app, caller, **kw).memories)


def recalled(app, caller=None, **kw) -> list[str]:
    kw.setdefault("query", QUERY)
    found = app.app.services.recall.recall(caller or alice(), RecallQuery.parse(kw))
    return sorted(r.content for r in found.memories)


@pytest.fixture
def updates(app):
    """Key k: "note one", then "note two" 100 s later, then "note three" 100 s after that; the
    times just after each write (t1, t2, t3), and before the first (t0)."""
    t0 = at(app, -1)
    put(app, "k", "note one")
    t1 = at(app)
    app.clock.advance(100)
    put(app, "k", "note two")
    t2 = at(app)
    app.clock.advance(100)
    put(app, "k", "note three")
    t3 = at(app)
    app.clock.advance(100)
    app.drain()
    return t0, t1, t2, t3


class TestVersions:
    def test_before_between_and_after_the_versions(self, app, updates):
        t0, t1, t2, t3 = updates
        for known_at, expected in [(t0, []), (t1, ["note one"]), (t2, ["note two"]), (t3, ["note three"])]:
            assert texts(app, known_at=known_at) == expected  # by filter
            assert texts(app, known_at=known_at, query="note") == expected  # ranked
        assert texts(app) == ["note three"]  # without known_at nothing changes

    def test_marked_historical(self, app, updates):
        _, t1, _, t3 = updates
        old = search(app, known_at=t1, query="note")
        assert [(m.value["text"], m.current, m.version) for m in old.memories] == [("note one", False, 1)]
        assert old.memories[0].scores["semantic"] is not None  # its texts embedded now, as the index's were
        assert old.memories[0].scores["keyword"] > 0
        keyword = search(app, known_at=t1, query="note", mode="keyword").memories[0]
        assert keyword.score == 1.0 and keyword.scores["semantic"] is None  # the one query term matched
        assert old.known_at is not None and old.past_retention == 0
        now = search(app, known_at=t3, query="note")
        assert [(m.value["text"], m.current) for m in now.memories] == [("note three", True)]
        plain = search(app, query="note")
        assert plain.known_at is None and [m.current for m in plain.memories] == [None]

    def test_a_deleted_key_is_there_before_its_delete(self, app):
        put(app, "gone", "note deleted")
        before = at(app)
        app.clock.advance(10)
        app.memories.delete(alice(), NS, "gone")
        after = at(app)
        app.clock.advance(10)
        app.drain()
        assert texts(app, known_at=before) == ["note deleted"]
        assert texts(app, known_at=before, query="deleted") == ["note deleted"]
        assert texts(app, known_at=after) == [] == texts(app)

    def test_a_key_written_after_known_at_is_absent(self, app):
        put(app, "early", "note early")
        known_at = at(app)
        app.clock.advance(10)
        put(app, "late", "note late")
        app.clock.advance(10)
        app.drain()
        assert texts(app, known_at=known_at) == ["note early"]
        assert texts(app, known_at=known_at, query="note late") == ["note early"]
        assert texts(app) == ["note early", "note late"]

    def test_the_filter_is_checked_on_the_version_then(self, app):
        put(app, "c", "note car", colour="blue")
        known_at = at(app)
        app.clock.advance(10)
        put(app, "c", "note car", colour="red")
        app.clock.advance(10)
        app.drain()
        assert texts(app, known_at=known_at, filter={"colour": "blue"}) == ["note car"]
        assert texts(app, known_at=known_at, filter={"colour": "red"}) == []
        assert texts(app, known_at=known_at, query="car", filter={"colour": "red"}) == []
        assert texts(app, filter={"colour": "red"}) == ["note car"]

    def test_a_change_the_timeline_has_not_recorded_yet(self, app):
        put(app, "k", "note one")
        app.drain()
        known_at = at(app)
        app.clock.advance(10)
        put(app, "k", "note two")  # not drained: only the item row knows it yet
        app.clock.advance(10)
        assert texts(app, known_at=known_at) == ["note one"]

    def test_paging_merges_both_parts(self, app):
        for n in range(4):
            put(app, f"k{n}", f"note {n}")
            app.clock.advance(1)
        known_at = at(app)
        app.clock.advance(10)
        put(app, "k1", "note changed")
        app.memories.delete(alice(), NS, "k2")
        app.clock.advance(10)
        app.drain()
        pages = [texts(app, known_at=known_at, limit=2, offset=offset) for offset in (0, 2, 4)]
        assert sorted(sum(pages, [])) == ["note 0", "note 1", "note 2", "note 3"]
        assert pages[2] == []


@pytest.fixture
def chain(app):
    """Berlin from 2020, Munich from May 2023, Lisbon from March 2025, remembered a day apart
    (the clock): each supersedes the one before. Returns the times just after each remember."""
    times = []
    for content, valid_from in [(BERLIN, "2020-01-01T00:00:00Z"), (MUNICH, "2023-05-01T00:00:00Z"),
                                (LISBON, "2025-03-01T00:00:00Z")]:
        app.app.services.remember.remember(alice(), RememberMemory(content=content, namespace=MEMORIES,
                                                                   valid_from=valid_from))
        # A second later: a remember's writes share the clock's instant, and the timeline stamps
        # them a microsecond apart (stamps only grow), so the instant itself may fall between them.
        times.append(at(app, 1))
        app.clock.advance(86_400)
    app.drain()
    return times


class TestRecall:
    def test_what_was_current_then(self, app, chain):
        berlin, munich, lisbon = chain
        assert recalled(app, known_at=berlin) == [BERLIN]
        assert recalled(app, known_at=munich) == [MUNICH]
        assert recalled(app, known_at=lisbon) == [LISBON] == recalled(app)
        assert recalled(app, known_at=munich, include_superseded=True) == [BERLIN, MUNICH]
        assert texts(app, known_at=berlin, query=QUERY) == [BERLIN]

    def test_with_as_of_valid_time_is_checked_on_the_version_then(self, app, chain):
        berlin, munich, lisbon = chain
        # Known on the first day: Berlin, open-ended, so it held in 2024 as far as memsvc knew.
        assert recalled(app, known_at=berlin, as_of="2024-01-01T00:00:00Z") == [BERLIN]
        # Known later: Berlin closed at Munich's start; in 2024 Munich held.
        assert recalled(app, known_at=lisbon, as_of="2024-01-01T00:00:00Z") == [MUNICH]
        assert recalled(app, known_at=munich, as_of="2021-01-01T00:00:00Z") == [BERLIN]
        assert recalled(app, known_at=berlin, as_of="2019-01-01T00:00:00Z") == []
        assert texts(app, known_at=munich, as_of="2021-01-01T00:00:00Z") == [BERLIN]

    def test_versions_then_are_not_counted_as_uses(self, app, chain):
        berlin, _, _ = chain
        result = app.app.services.recall.recall(alice(), RecallQuery.parse({"query": QUERY, "known_at": berlin}))
        assert [(r.content, r.memory.current) for r in result.memories] == [(BERLIN, False)]
        assert result.known_at is not None


class TestRefused:
    def refused(self, app, field, route="search", **kw):
        before = texts(app)
        with pytest.raises(InvalidArgument) as raised:
            if route == "recall":
                recalled(app, namespace_prefix=["user", "alice"], **kw)
            else:
                search(app, **kw)
        assert raised.value.details.get("field") == field
        assert texts(app) == before
        return raised.value

    def test_a_future_known_at(self, app, updates):
        self.refused(app, "known_at", known_at=at(app, 1))
        self.refused(app, "known_at", route="recall", known_at=at(app, 1))

    def test_known_at_past_retention(self, app, updates):
        error = self.refused(app, "known_at", known_at=at(app, -91 * 86_400))
        assert error.details["retention_days"] == 90

    def test_too_many_changes_since(self, app, updates, monkeypatch):
        _, t1, _, _ = updates
        monkeypatch.setattr(known_at_module, "MAX_KNOWN_AT_EVENTS", 1)
        error = self.refused(app, "known_at", known_at=t1)
        assert error.details["max_events"] == 1
        self.refused(app, "known_at", query="note", known_at=t1)
        self.refused(app, "known_at", route="recall", query="note", known_at=t1)
        assert texts(app, known_at=at(app)) == ["note three"]  # nothing changed since now

    def test_refresh_ttl_and_graph_hops(self, app, updates):
        _, t1, _, _ = updates
        item = app.memories.get(alice(), NS, "k")
        self.refused(app, "refresh_ttl", known_at=t1, refresh_ttl=True)
        assert app.memories.get(alice(), NS, "k").expires_at == item.expires_at
        self.refused(app, "graph_hops", route="recall", known_at=t1, graph_hops=1)

    @pytest.mark.parametrize("known_at", ["2026-01-01", "2026-01-01T00:00:00", "now", 0])
    def test_a_bad_known_at(self, app, known_at):
        with pytest.raises(InvalidArgument):
            RecallQuery.parse({"query": QUERY, "known_at": known_at})
        with pytest.raises(InvalidArgument):
            SearchQuery.parse({"namespace_prefix": [], "known_at": known_at})


class TestIsolation:
    def test_another_users_or_tenants_versions_never_appear(self, app):
        other = Caller(tenant_id="globex", user_id="alice", roles=("user",))
        for caller, ns in [(bob(), ["user", "bob", "notes"]), (other, NS), (alice(), NS)]:
            put(app, "k", f"note by {caller.tenant_id} {caller.user_id}", caller=caller, namespace=ns)
        known_at = at(app, 1)  # the writes share the clock's instant; their stamps are a microsecond apart
        app.clock.advance(10)
        for caller, ns in [(bob(), ["user", "bob", "notes"]), (other, NS), (alice(), NS)]:
            put(app, "k", "note changed", caller=caller, namespace=ns)
            app.memories.delete(caller, ns, "k")
        app.clock.advance(10)
        app.drain()
        assert texts(app, namespace_prefix=[], known_at=known_at) == ["note by acme alice"]
        assert texts(app, namespace_prefix=[], known_at=known_at, query="note") == ["note by acme alice"]
        assert recalled(app, query="note", namespace_prefix=[], known_at=known_at) == ["note by acme alice"]
        with pytest.raises(Forbidden):
            search(app, namespace_prefix=["user", "bob"], known_at=known_at)
        assert texts(app, bob(), namespace_prefix=[], known_at=known_at) == ["note by acme bob"]
        assert texts(app, admin("globex"), namespace_prefix=[], known_at=known_at) == ["note by globex alice"]


class TestRetention:
    def test_a_version_past_retention_is_counted_not_dropped_silently(self, app):
        app.settings.update("acme", SettingsPatch(tombstone_retention_days=10))
        put(app, "k", "note old")
        app.drain()
        app.clock.advance(15 * 86_400)
        app.sweep()  # the add's event is past retention: gone from the timeline
        known_at = at(app)
        app.clock.advance(10)
        put(app, "k", "note new")
        app.clock.advance(10)
        app.drain()
        answer = search(app, known_at=known_at)
        assert answer.memories == [] and answer.past_retention == 1
        assert search(app, known_at=known_at, query="note").past_retention == 1
        assert texts(app) == ["note new"]


def put_ttl(app, key, text, ttl):
    return app.memories.put(alice(), PutMemory(namespace=NS, key=key, value={"text": text}, ttl_seconds=ttl))


class TestExpiry:
    """A TTL that passed after `known_at` (the sweeper, or DynamoDB's TTL, may not have come yet),
    and one a read refreshed (`Memories.refresh`: no event records it)."""

    def test_an_item_expired_since_but_not_swept_was_held(self, app):
        put_ttl(app, "k", "note one", ttl=100)
        app.clock.advance(50)
        app.drain()
        known_at = at(app)
        app.clock.advance(100)  # expired now; not swept
        app.drain()
        assert texts(app) == []
        assert texts(app, known_at=known_at) == ["note one"] == texts(app, known_at=known_at, query="note")
        assert [m.current for m in search(app, known_at=known_at, query="note").memories] == [False]
        assert texts(app, known_at=at(app)) == []  # expired by then
        app.sweep()
        app.drain()
        assert texts(app, known_at=known_at) == ["note one"] == texts(app, known_at=known_at, query="note")

    def test_an_item_expired_before_known_at_is_absent_swept_or_not(self, app):
        put_ttl(app, "k", "note one", ttl=100)
        app.clock.advance(150)
        known_at = at(app)
        app.clock.advance(10)
        app.drain()
        assert texts(app, known_at=known_at) == [] == texts(app, known_at=known_at, query="note")
        app.sweep()
        app.drain()
        assert texts(app, known_at=known_at) == [] == texts(app, known_at=known_at, query="note")

    def refreshed(self, app):
        """"note one" written with a TTL of 100 s, refreshed at 50 s (to 150 s); known_at at 120 s,
        past the expiry its write recorded."""
        put_ttl(app, "k", "note one", ttl=100)
        app.drain()
        app.clock.advance(50)
        app.memories.get(alice(), NS, "k", refresh_ttl=True)
        app.clock.advance(70)
        known_at = at(app)
        app.clock.advance(10)
        return known_at

    def test_a_refreshed_version_then_updated(self, app):
        known_at = self.refreshed(app)
        put(app, "k", "note two")
        assert texts(app, known_at=known_at) == ["note one"]  # the update not on the timeline yet
        app.drain()
        assert texts(app, known_at=known_at) == ["note one"] == texts(app, known_at=known_at, query="note")

    def test_a_refreshed_version_then_deleted(self, app):
        known_at = self.refreshed(app)
        app.memories.delete(alice(), NS, "k")
        app.drain()
        assert texts(app, known_at=known_at) == ["note one"] == texts(app, known_at=known_at, query="note")

    def test_a_refreshed_version_then_expired(self, app):
        known_at = self.refreshed(app)
        app.clock.advance(100)
        app.sweep()
        app.drain()
        assert texts(app, known_at=known_at) == ["note one"] == texts(app, known_at=known_at, query="note")


TRIP = "we drove the coast highway on a long road trip"
TRIP_QUERY = "which road trip did we take in July"


def put_trip(app, key, day, extra=""):
    put(app, key, TRIP + extra, valid_from=f"{day}T00:00:00Z", valid_to=f"{day}T23:59:59Z")


class TestRankingOnOneScale:
    """A version since replaced is scored as the current items beside it: meaning from its texts
    embedded now, keywords, the same fusion, and the boost of a time the query names."""

    @pytest.mark.parametrize("mode", ["hybrid", "semantic", "keyword"])
    def test_a_later_write_keeps_the_answer_at_known_at(self, app, mode):
        put_trip(app, "july", "2023-07-24")
        app.clock.advance(60)
        put_trip(app, "march", "2023-03-10")
        app.clock.advance(60)
        app.drain()
        known_at = at(app)
        before = search(app, known_at=known_at, query=TRIP_QUERY, mode=mode).memories
        app.clock.advance(60)
        put_trip(app, "july", "2023-07-24", " with friends")  # replaced after known_at
        app.clock.advance(60)
        app.drain()
        after = search(app, known_at=known_at, query=TRIP_QUERY, mode=mode).memories
        assert [m.key for m in before] == [m.key for m in after] == ["july", "march"]  # the July one: boosted
        assert [m.current for m in after] == [False, True]
        was, now = before[0], after[0]
        assert now.value == was.value
        if mode != "keyword":  # meaning: the same model, the same texts, the same cosine
            assert now.scores["semantic"] == pytest.approx(was.scores["semantic"], abs=1e-5)
        else:
            assert now.scores["semantic"] is None
        if mode == "semantic":  # the score is the cosine, boosted as before
            assert now.score == pytest.approx(was.score, abs=1e-5)
        unboosted = search(app, known_at=known_at, query=TRIP_QUERY, mode=mode, temporal=False).memories
        assert now.score > next(m.score for m in unboosted if m.key == "july")


class _CountingConnection:
    def __init__(self, conn, counter):
        self._conn, self._counter = conn, counter

    def execute(self, sql, params=()):
        cursor = self._conn.execute(sql, params)
        if "FROM events WHERE" not in sql or "events_by_key" in sql:  # the scan's reads only
            return cursor
        rows = cursor.fetchall()
        self._counter["rows"] += len(rows)
        return _Rows(rows)


class _Rows:
    def __init__(self, rows):
        self._rows = rows

    def fetchall(self):
        return self._rows

    def fetchone(self):
        return self._rows[0] if self._rows else None


def count_scanned_rows(app, monkeypatch) -> dict:
    """Counts the timeline rows the scans read: DynamoDB's `ScannedCount` (rows evaluated before
    the filter), SQLite's rows fetched."""
    counter = {"rows": 0}
    log = app.event_log
    if app.name == "aws":
        call = log._call

        def counting(operation, **kwargs):
            page = call(operation, **kwargs)
            if operation == "Query" and "IndexName" not in kwargs:
                counter["rows"] += page.get("ScannedCount", len(page.get("Items", [])))
            return page
        monkeypatch.setattr(log, "_call", counting)
    else:
        db = log._db
        monkeypatch.setattr(db, "conn", lambda conn=db.conn: _CountingConnection(conn(), counter))
    return counter


class TestBoundedReads:
    """The rows a known_at scan reads are capped (MAX_KNOWN_AT_ROWS), whoever's events they are;
    past the cap, and past MAX_KNOWN_AT_EVENTS keys written since, a 400: never partial."""

    @pytest.fixture
    def busy(self, app, monkeypatch):
        """alice's note before known_at; after it, 12 of bob's changes and 12 in another of alice's
        namespaces; the cap at 10 rows."""
        monkeypatch.setattr(known_at_module, "MAX_KNOWN_AT_ROWS", 10)
        put(app, "n", "note kept", namespace=MEMORIES)  # the user layer's
        app.drain()
        known_at = at(app)
        app.clock.advance(1)
        for n in range(12):
            put(app, f"b{n}", "hi", caller=bob(), namespace=["user", "bob", "chat"])
            put(app, f"c{n}", "hi", namespace=["user", "alice", "chat"])
        app.drain()
        return known_at

    def test_a_scan_past_the_cap_is_a_400(self, app, busy, monkeypatch):
        counter = count_scanned_rows(app, monkeypatch)
        with pytest.raises(InvalidArgument) as raised:  # reads alice's root: her chat's events too
            search(app, namespace_prefix=MEMORIES, known_at=busy)
        assert raised.value.details == {"field": "known_at", "max_rows": 10}
        with pytest.raises(InvalidArgument) as raised:  # the company layer: the tenant's events
            recalled(app, query="note", known_at=busy)
        assert raised.value.details == {"field": "known_at", "max_rows": 10}
        assert counter["rows"] <= 2 * 11  # each scan stopped at the cap, not at the end of the events

    def test_a_scan_under_the_cap_answers(self, app, busy, monkeypatch):
        monkeypatch.setattr(known_at_module, "MAX_KNOWN_AT_ROWS", 30)
        assert texts(app, namespace_prefix=MEMORIES, known_at=busy) == ["note kept"]
        assert recalled(app, query="note kept", namespace_prefix=["user", "alice"], known_at=busy) == ["note kept"]
        counter = count_scanned_rows(app, monkeypatch)
        assert recalled(app, query="note kept", known_at=busy) == ["note kept"]
        assert 0 < counter["rows"] <= 31 * 3  # per scope scanned: the user layer's two roots, company

    def test_too_many_keys_written_since_and_not_on_the_timeline_yet(self, app, monkeypatch):
        monkeypatch.setattr(known_at_module, "MAX_KNOWN_AT_EVENTS", 1)
        put(app, "a", "note a")
        put(app, "b", "note b")
        app.drain()
        app.clock.advance(1)  # the two adds share an instant: their stamps are a microsecond apart
        known_at = at(app)
        app.clock.advance(10)
        put(app, "a", "note a2")
        put(app, "b", "note b2")  # not drained: only the item rows know them (the indexes hold a and b)
        monkeypatch.setattr(known_at_module, "MAX_KNOWN_AT_EVENTS", 2)
        assert texts(app, known_at=known_at) == ["note a", "note b"] == texts(app, known_at=known_at, query="note")
        monkeypatch.setattr(known_at_module, "MAX_KNOWN_AT_EVENTS", 1)
        for kw in ({}, {"query": "note"}):
            with pytest.raises(InvalidArgument) as raised:
                search(app, known_at=known_at, **kw)
            assert raised.value.details == {"field": "known_at", "max_events": 1}
