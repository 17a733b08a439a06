"""Learning from conversations on both backends (issue 24): `POST /v1/memories/extract` and
sessions' `extract` setting. The extractor is a scripted one (each user message that is not a
question is one candidate, as said), so what is under test is the service around it:
consolidation, provenance, replays, the queue, the timeline, sessions, isolation. The real
extractors have their own tests (`tests/unit/test_pattern_memory_extractor.py`,
`tests/unit/test_llm_adapters.py`) and the local one runs end to end in `tests/api`.
"""

from __future__ import annotations

from datetime import timedelta

import pytest

from memsvc.core.errors import ContentTooLong, Forbidden, InvalidArgument, NotFound, ProviderError, StoreUnavailable
from memsvc.core.extraction import Candidate
from memsvc.core.models import Caller
from memsvc.service.extraction import ExtractionQueued, ExtractMemories
from memsvc.service.search import SearchQuery
from memsvc.service.sessions import AppendMessage, CreateSession, UpdateSession
from memsvc.service.tenant_config import SettingsPatch
from memsvc.service.timeline import EventsQuery
from tests.conftest import admin, alice, bob

NS = ("user", "alice", "memories")
PYTHON = "The user prefers Python for scripting tasks at work"


class Scripted:
    """`MemoryExtractor`: every user message that is not a question, as said; `fail` raises instead."""

    model_id = "scripted"

    def __init__(self) -> None:
        self.fail: Exception | None = None
        self.calls: list[list[int]] = []

    def extract(self, tenant, messages):
        self.calls.append([m.seq for m in messages])
        if self.fail is not None:
            raise self.fail
        return [Candidate(content=m.content, type="preference" if "prefer" in m.content else "fact",
                          importance=0.9 if "!" in m.content else 0.6, category=None, source_seqs=(m.seq,))
                for m in messages if m.role == "user" and not m.content.endswith("?")]


@pytest.fixture
def app(backend, monkeypatch):
    backend.settings.update("acme", SettingsPatch(semantic_auto_update=0.9, semantic_check_low=0.6))
    scripted = Scripted()
    monkeypatch.setattr(backend.app.services.extraction, "_extractor", scripted)
    backend.scripted = scripted
    return backend


def extract(app, *contents, caller=None, **kw):
    messages = [{"role": role, "content": text} for role, text in
                (c if isinstance(c, tuple) else ("user", c) for c in contents)]
    return app.app.services.extraction.extract(caller or alice(), ExtractMemories(messages=messages, **kw))


def memories(app, caller=None, prefix=("user", "alice")):
    found = app.search.search(caller or alice(), SearchQuery(namespace_prefix=list(prefix), limit=100))
    return {m.value["content"]: m for m in found if "content" in m.value and m.namespace[-1] != "messages"}


def events(app, caller=None, kinds=()):
    app.drain()
    return app.timeline.events(caller or alice(), EventsQuery(namespace_prefix=["user", "alice"],
                                                              kinds=list(kinds))).events


def run_jobs(app):
    if app.local is not None:
        return app.local.workers.run_remember_jobs()
    return app.aws.run_remember_jobs()["records"]


class TestExtract:
    def test_each_candidate_is_remembered_with_its_provenance(self, app):
        out = extract(app, ("assistant", "Hi! How can I help?"), "I live in Berlin", "Where is my order?",
                      PYTHON)
        assert out.extractor == "scripted"
        assert [(m.action, m.candidate.content, m.candidate.source_seqs) for m in out.memories] == [
            ("created", "I live in Berlin", (1,)), ("created", PYTHON, (3,))]
        berlin = out.memories[0].memory
        assert berlin.namespace == NS and berlin.value["type"] == "fact" and berlin.value["source"] == "extraction"
        provenance = berlin.value["provenance"]
        assert provenance["session_id"] is None and provenance["seqs"] == [1] and provenance["extractor"] == "scripted"
        assert out.memories[1].memory.value["type"] == "preference"
        # The owner reads it back as any memory, provenance included.
        assert app.memories.get(alice(), list(NS), berlin.key).value["provenance"]["seqs"] == [1]

    def test_a_repeat_is_unchanged_an_update_merges_a_contradiction_supersedes(self, app):
        first = extract(app, "I live in Berlin", PYTHON)
        again = extract(app, "I live in Berlin", PYTHON)
        assert [m.action for m in again.memories] == ["unchanged", "unchanged"]
        assert [m.memory.id for m in again.memories] == [m.memory.id for m in first.memories]
        later = extract(app, "I live in Munich", PYTHON + " daily")
        assert [m.action for m in later.memories] == ["superseded", "updated"]
        mine = memories(app)
        assert mine["I live in Berlin"].value["superseded_by"] == mine["I live in Munich"].key
        merged = mine[PYTHON + " daily"]
        assert merged.key == first.memories[1].memory.key and merged.value["provenance"]["seqs"] == [1]

    def test_the_words_that_bound_a_fact_give_its_valid_time(self, app):
        out = extract(app, "I have lived in Berlin since March", "I am in Tokyo until Friday", "I like tea")
        said = app.clock.now()  # the messages carry no time: said now
        values = {m.candidate.content: m.memory.value for m in out.memories}
        berlin = values["I have lived in Berlin since March"]
        assert berlin["valid_from"].startswith(f"{said.year if said.month >= 3 else said.year - 1}-03-01")
        assert "valid_to" not in berlin or berlin["valid_to"] is None
        assert values["I am in Tokyo until Friday"].get("valid_to")
        assert values["I like tea"].get("valid_from") is None

    def test_the_timeline_tells_candidates_merges_and_outcomes(self, app):
        extract(app, PYTHON)
        app.drain()  # (a candidate's event is recorded at once, its outcome's when the change is delivered)
        extract(app, PYTHON + " daily")
        got = [(v.event.kind, v.event.action) for v in events(app)]
        assert got == [("candidate", None), ("add", "created"), ("candidate", None), ("update", "merged")]
        candidate = events(app, kinds=["candidate"])[0].event
        assert candidate.reason == "a preference extracted by scripted" and candidate.version == 0
        merged = [v.event for v in events(app) if v.event.action == "merged"][0]
        assert merged.reason == "a statement of the same fact was merged into this memory"
        extract(app, PYTHON + " daily")  # unchanged: the same candidate again is no new event
        assert len(events(app)) == 4
        if app.aws is not None:  # and on EventBridge, without the content
            published = [(e["detail-type"], e["detail"]["kind"]) for e in app.aws.published()]
            assert ("memory.candidate", "candidate") in published and ("memory.merged", "update") in published
            assert all("Python" not in str(e["detail"]) for e in app.aws.published())

    def test_a_failing_model_loses_nothing(self, app):
        app.scripted.fail = ProviderError("the model did not answer in time", details={"reason": "timeout"})
        queued = extract(app, "I live in Berlin")
        assert isinstance(queued, ExtractionQueued) and queued.reason == "retrying"
        assert memories(app) == {}
        (error,) = events(app, kinds=["error"])
        assert error.event.reason == "extraction failed (timeout); it will be retried" and error.value is None
        assert run_jobs(app) >= 1  # still failing: it stays queued
        assert memories(app) == {}
        app.scripted.fail = None
        if app.local is not None:
            app.clock.advance(600)  # past the local queue's backoff
        run_jobs(app)
        assert list(memories(app)) == ["I live in Berlin"]

    def test_wait_false_answers_at_once_and_the_job_runs_once(self, app):
        queued = extract(app, "I live in Berlin", wait=False)
        again = extract(app, "I live in Berlin", wait=False)
        assert isinstance(queued, ExtractionQueued) and queued.reason == "accepted"
        assert again.job_id == queued.job_id and memories(app) == {}
        run_jobs(app)
        run_jobs(app)
        assert list(memories(app)) == ["I live in Berlin"]

    def test_bad_input_changes_nothing(self, app):
        with pytest.raises(ContentTooLong):
            extract(app, "x" * 20_000, "y" * 20_000)
        with pytest.raises(InvalidArgument):
            extract(app, *["I live in Berlin"] * 101)
        with pytest.raises(InvalidArgument):
            ExtractMemories(messages=[])
        with pytest.raises(InvalidArgument):
            ExtractMemories(messages=[{"role": "robot", "content": "hi"}])
        assert memories(app) == {} and app.scripted.calls == []


class TestIsolation:
    def test_nobody_extracts_into_another_users_layer(self, app):
        with pytest.raises(Forbidden):
            extract(app, "I live in Berlin", caller=bob(), identifiers={"user_id": "alice"})
        assert memories(app) == {} and app.scripted.calls == []

    def test_what_is_learnt_stays_with_its_user_and_tenant(self, app):
        extract(app, "I live in Berlin")
        extract(app, "I live in Berlin", caller=bob())
        other = Caller(tenant_id="globex", user_id="alice")
        extract(app, "I live in Lisbon", caller=other)
        assert list(memories(app)) == ["I live in Berlin"]
        assert list(memories(app, bob(), ("user", "bob"))) == ["I live in Berlin"]
        assert list(memories(app, other)) == ["I live in Lisbon"]
        app.drain()
        bobs = app.timeline.events(bob(), EventsQuery(namespace_prefix=["user", "bob"])).events
        assert {v.event.namespace for v in bobs} == {("user", "bob", "memories")}
        with pytest.raises(Forbidden):
            app.timeline.events(bob(), EventsQuery(namespace_prefix=["user", "alice"]))

    def test_an_admin_extracts_for_a_user(self, app):
        out = extract(app, "I live in Berlin", caller=admin(), identifiers={"user_id": "bob"})
        assert out.memories[0].memory.namespace == ("user", "bob", "memories")


def create(app, session_id="s1", caller=None, **kw):
    return app.app.services.sessions.create(caller or alice(), CreateSession(session_id=session_id, **kw))


def say(app, text, session_id="s1", role="user", caller=None):
    return app.app.services.sessions.append(caller or alice(), session_id, AppendMessage(role=role, content=text))


def close(app, session_id="s1", caller=None):
    return app.app.services.close_session.close(caller or alice(), session_id)


class TestSessions:
    def test_off_by_default(self, app):
        view = create(app)
        assert (view.extract, view.extracted_seq) == ("off", 0)
        say(app, "I live in Berlin")
        close(app)
        assert memories(app) == {} and app.scripted.calls == []

    def test_the_tenant_default_and_a_change_by_put(self, app):
        app.settings.update("acme", SettingsPatch(session_extract="on_close"))
        assert create(app).extract == "on_close"
        assert create(app, "s2", extract="off").extract == "off"
        updated = app.app.services.sessions.update(alice(), "s2", UpdateSession(extract="continuous"), if_match=None)
        assert updated.extract == "continuous"
        assert app.app.services.sessions.get(alice(), "s2").extract == "continuous"

    def test_on_close_extracts_before_promotion_and_never_twice(self, app):
        create(app, extract="on_close")
        say(app, "I live in Berlin")
        say(app, "Sure, noted.", role="assistant")
        say(app, "I am allergic to peanuts!")
        assert app.scripted.calls == []  # nothing on the append's path
        closed = close(app)
        assert app.scripted.calls == [[1, 2, 3]] and not closed.extraction_pending
        learnt = memories(app, prefix=NS)
        assert set(learnt) == {"I live in Berlin", "I am allergic to peanuts!"}
        assert learnt["I live in Berlin"].value["provenance"]["session_id"] == "s1"
        assert learnt["I live in Berlin"].value["provenance"]["seqs"] == [1]
        assert app.app.services.sessions.get(alice(), "s1").extracted_seq == 3
        assert closed.promoted == 0  # they went to the user layer itself
        close(app)
        assert app.scripted.calls == [[1, 2, 3]]

    def test_continuous_extracts_in_batches_in_the_background(self, app):
        app.settings.update("acme", SettingsPatch(extract_every_messages=2))
        create(app, extract="continuous")
        say(app, "I live in Berlin")
        say(app, "I am allergic to peanuts")
        say(app, "I prefer aisle seats")
        assert app.scripted.calls == []
        run_jobs(app)  # the batch job (the idle one waits for its time)
        assert app.scripted.calls == [[1, 2, 3]]
        assert app.app.services.sessions.get(alice(), "s1").extracted_seq == 3
        run_jobs(app)  # a replayed or second job finds nothing left
        assert app.scripted.calls == [[1, 2, 3]]
        assert set(memories(app, prefix=NS)) == {"I live in Berlin", "I am allergic to peanuts", "I prefer aisle seats"}

    def test_continuous_after_an_idle_time(self, local_only, monkeypatch):
        app = local_only
        scripted = Scripted()
        monkeypatch.setattr(app.app.services.extraction, "_extractor", scripted)
        create(app, extract="continuous")
        say(app, "I live in Berlin")
        app.local.workers.run_remember_jobs()
        assert scripted.calls == []  # not idle yet
        app.clock.advance(60)
        say(app, "I prefer aisle seats")
        app.clock.advance(61)  # the first job is due; the session spoke 61 s ago
        app.local.workers.run_remember_jobs()
        assert scripted.calls == []  # it waits again, until 120 s after the last message
        app.clock.advance(60)
        app.local.workers.run_remember_jobs()
        assert scripted.calls == [[1, 2]]

    def test_a_long_backlog_continues_job_after_job(self, app, monkeypatch):
        from memsvc.service import extraction
        monkeypatch.setattr(extraction, "MAX_EXTRACT_MESSAGES", 2)  # batches of two, one batch a job
        app.settings.update("acme", SettingsPatch(extract_every_messages=2))
        create(app, extract="continuous")
        for city in ("Berlin", "Rome", "Oslo", "Lima", "Kyiv"):
            say(app, f"I visited {city}")
        for _ in range(4):
            run_jobs(app)
        # A full batch due at once, job after job; the last message waits for the session to go idle.
        assert app.scripted.calls == [[1, 2], [3, 4]]
        close(app)
        assert app.scripted.calls == [[1, 2], [3, 4], [5]]
        assert app.app.services.sessions.get(alice(), "s1").extracted_seq == 5

    def test_two_runs_never_extract_one_batch_twice(self, app):
        create(app, extract="on_close")
        say(app, "I live in Berlin")
        record = app.app.services.sessions.record(alice(), "s1")
        store = app.app.services.extraction._session_store
        now = app.clock.now()
        # Another run holds the batch: a close extracts nothing itself and leaves it pending.
        assert store.claim_extraction("acme", "alice", "s1", from_seq=0, now=now, until=now + timedelta(minutes=5))
        assert not store.claim_extraction("acme", "alice", "s1", from_seq=0, now=now, until=now + timedelta(minutes=5))
        closed = close(app)
        assert closed.extraction_pending and app.scripted.calls == []
        assert record.extracted_seq == 0
        app.clock.advance(301)  # the other run died: its lease expires, and the queued job extracts
        run_jobs(app)
        assert app.scripted.calls == [[1]] and app.app.services.sessions.get(alice(), "s1").extracted_seq == 1

    def test_a_batch_the_model_keeps_refusing_is_skipped_and_said(self, app):
        create(app, extract="on_close")
        say(app, "I live in Berlin")
        app.scripted.fail = ProviderError("refused", details={"reason": "refused"})
        assert close(app).extraction_pending
        for _ in range(3):  # retried, then passed over on the third attempt
            if app.local is not None:
                app.clock.advance(600)
            run_jobs(app)
        assert app.app.services.sessions.get(alice(), "s1").extracted_seq == 1
        reasons = [v.event.reason for v in events(app, kinds=["error"])]
        assert "extraction skipped messages 1 to 1 (refused, after repeated attempts)" in reasons

    def test_an_append_is_stored_even_when_its_job_cannot_be_queued(self, app, monkeypatch):
        create(app, extract="continuous")
        queue = app.app.services.extraction._queue

        def down(*args, **kwargs):
            raise StoreUnavailable("the queue is down")

        monkeypatch.setattr(queue, "enqueue", down)
        appended = say(app, "I live in Berlin")
        assert appended.seq == 1
        monkeypatch.undo()
        monkeypatch.setattr(app.app.services.extraction, "_extractor", app.scripted)
        assert close(app).extraction_pending is False  # the close catches up
        assert app.scripted.calls == [[1]]

    def test_a_failing_model_at_close_keeps_the_messages(self, app):
        app.settings.update("acme", SettingsPatch(session_auto_delete=True, session_retention_days=0))
        create(app, extract="on_close")
        say(app, "I live in Berlin")
        app.scripted.fail = ProviderError("no answer", details={"reason": "unavailable"})
        closed = close(app)
        assert closed.deleted is False and closed.extraction_pending  # deleting now would lose what was not learnt
        assert app.app.services.sessions.get(alice(), "s1").extracted_seq == 0
        app.scripted.fail = None
        if app.local is not None:
            app.clock.advance(600)
        run_jobs(app)
        assert list(memories(app, prefix=NS)) == ["I live in Berlin"]
        assert app.app.services.sessions.get(alice(), "s1").extracted_seq == 1
        app.app.services.sessions.remove_due()
        with pytest.raises(NotFound):
            app.app.services.sessions.get(alice(), "s1")

    def test_sessions_waiting_for_extraction_never_hold_up_the_retention_sweep(self, app):
        app.settings.update("acme", SettingsPatch(session_auto_delete=True, session_retention_days=0))
        app.scripted.fail = ProviderError("no answer", details={"reason": "unavailable"})
        for session in ("a", "b"):
            create(app, session, extract="on_close")
            say(app, "I live in Berlin", session)
            close(app, session)  # pending: kept
        store = app.app.services.extraction._session_store
        assert len(store.due_for_deletion(app.clock.now(), 10)) == 2
        assert app.app.services.sessions.remove_due(2) == 2  # a and b: deferred, no longer due...
        assert store.due_for_deletion(app.clock.now(), 10) == []  # ...so the sessions behind them are next
        for session in ("a", "b"):
            view = app.app.services.sessions.get(alice(), session)
            assert view.delete_after == view.closed_at + timedelta(hours=24)
        app.clock.advance(24 * 3600 + 1)  # the grace is over: deleted as promised, extracted or not
        assert app.app.services.sessions.remove_due(10) == 2
        with pytest.raises(NotFound):
            app.app.services.sessions.get(alice(), "a")

    def test_a_session_is_its_users_alone(self, app):
        create(app, extract="on_close")
        with pytest.raises(NotFound):
            close(app, caller=bob())
        create(app, caller=bob(), extract="on_close")
        say(app, "I live in Rome", caller=bob())
        close(app, caller=bob())
        assert memories(app) == {}
        assert list(memories(app, bob(), ("user", "bob", "memories"))) == ["I live in Rome"]
