"""`remember` on both backends (seed 002): create, auto-update, the check range with the judge
saying yes and no, contradiction, unchanged; the episodic window and the category guard; races;
`wait: false`; the rate limit; isolation; the timeline and EventBridge.

The embedder is the tests' hashed bag of words, so a pair's cosine is about (shared words) /
sqrt(words of each): every test asserts the cosine it relies on before relying on it. The
judge is the deterministic one locally, and on AWS the Bedrock adapter on the Converse fake
answering as the heuristics do (`tests/fakes/converse.py`).
"""

from __future__ import annotations

import threading
from datetime import timedelta

import pytest

from memsvc.core.consolidation import candidate_key
from memsvc.core.errors import (ContentTooLong, Forbidden, InvalidArgument, InvalidLayer, MissingIdentifier,
                                PolicyViolation, RateLimited)
from memsvc.core.models import Caller
from memsvc.service.remember import Accepted, RememberMemory
from memsvc.service.search import SearchQuery
from memsvc.service.tenant_config import SettingsPatch
from memsvc.service.timeline import EventsQuery
from tests.conftest import admin, alice, bob

NS = ("user", "alice", "memories")  # alice's user layer


@pytest.fixture
def app(backend):
    """Seed 002's thresholds, fixed (whatever the embedder's calibrated defaults), and a judge
    range wide enough for bag-of-words cosines."""
    backend.settings.update("acme", SettingsPatch(semantic_auto_update=0.9, semantic_check_low=0.6,
                                                  episodic_auto_update=0.92, episodic_check_low=0.6))
    return backend


def remember(app, content, caller=None, **kw):
    return app.app.services.remember.remember(caller or alice(), RememberMemory(content=content, **kw))


def key_of(app, content, ns=NS, tenant="acme"):
    """The key `remember` gives the statement: in the tenant's secret key space."""
    return candidate_key(ns, content, key_space=app.sealer.statement_keys(tenant))


def cosine(app, a, b):
    va, vb = app.embedder.embed([a, b])
    return sum(x * y for x, y in zip(va, vb))


def memories(app, caller=None, prefix=("user", "alice")):
    found = app.search.search(caller or alice(), SearchQuery(namespace_prefix=list(prefix), limit=100))
    return {m.key: m for m in found}


def events(app, caller=None):
    app.drain()
    return app.timeline.events(caller or alice(), EventsQuery(namespace_prefix=["user", "alice"])).events


class TestSeed002:
    def test_create_then_unchanged(self, app):
        first = remember(app, "The user prefers Python for scripting", tags=["lang"], importance=0.7)
        assert first.action == "created" and first.neighbors == [] and first.decision.judge_asked is False
        assert first.memory.namespace == NS
        assert first.memory.key == key_of(app, "The user prefers Python for scripting")
        value = first.memory.value
        assert value["content"] == "The user prefers Python for scripting"
        assert (value["type"], value["kind"], value["importance"], value["tags"]) == ("fact", "semantic", 0.7, ["lang"])
        assert "access_count" not in value and "last_accessed_at" not in value  # kept on the row by recall

        again = remember(app, "  The user prefers Python  for scripting ")  # identical once whitespace is collapsed
        assert again.action == "unchanged"
        assert (again.memory.key, again.memory.version, again.memory.id) == (first.memory.key, 1, first.memory.id)
        assert len(memories(app)) == 1

    def test_auto_update_merges(self, app):
        a = "The user prefers Python for scripting tasks at work"
        b = "The user prefers Python for scripting tasks at work daily"
        assert cosine(app, a, b) >= 0.9
        first = remember(app, a, tags=["lang"], importance=0.8, category="Tech")
        second = remember(app, b, tags=["work", "lang"], importance=0.4, category="Tech", pinned=True)
        assert second.action == "updated"
        assert second.decision.judge_asked is False
        assert second.neighbors[0][0] == first.memory.key and second.neighbors[0][1] >= 0.9
        merged = second.memory
        assert (merged.key, merged.version, merged.created_at) == (first.memory.key, 2, first.memory.created_at)
        v = merged.value
        assert v["content"] == b  # the newer statement
        assert v["tags"] == ["lang", "work"] and v["importance"] == 0.8 and v["pinned"] is True
        assert v["merged_from"] == [key_of(app, b)]
        assert list(memories(app)) == [first.memory.key]

    def test_check_range_judge_says_same(self, app):
        a, b = "I work as a nurse at the city hospital", "I am a nurse at the city hospital"
        assert 0.6 <= cosine(app, a, b) < 0.9
        first = remember(app, a)
        second = remember(app, b)
        assert second.action == "updated" and second.memory.key == first.memory.key
        assert (second.decision.judge_asked, second.decision.same_fact) == (True, True)
        assert second.memory.value["content"] == b
        if app.aws is not None:  # asked through Bedrock Converse, with the tenant's model
            (request,) = app.aws.converse.requests
            assert request["inferenceConfig"]["maxTokens"] <= 64
            assert a in request["messages"][0]["content"][0]["text"]

    def test_check_range_judge_says_different(self, app):
        a, b = "I live in Berlin", "I work in Berlin"
        assert 0.6 <= cosine(app, a, b) < 0.9
        first = remember(app, a)
        second = remember(app, b)
        assert second.action == "created" and second.memory.key != first.memory.key
        assert (second.decision.judge_asked, second.decision.same_fact) == (True, False)
        assert second.neighbors == [(first.memory.key, pytest.approx(cosine(app, a, b), abs=1e-3))]
        assert len(memories(app)) == 2

    def test_contradiction_supersedes(self, app):
        a, b = "I live in Berlin", "I live in Munich"
        assert 0.6 <= cosine(app, a, b) < 0.9
        old = remember(app, a, tags=["home"])
        new = remember(app, b)
        assert new.action == "superseded"
        assert (new.decision.judge_asked, new.decision.same_fact) == (True, False)
        assert new.memory.key == key_of(app, b) and new.memory.value["content"] == b
        marked = app.memories.get(alice(), list(NS), old.memory.key)
        assert marked.value["superseded_by"] == new.memory.key
        assert marked.value["tags"] == ["home", "superseded"] and marked.value["content"] == a
        # A superseded memory is no neighbour: the old statement again is a new memory (in the
        # next key slot), which supersedes Munich in turn.
        back = remember(app, a)
        assert back.action == "superseded" and back.memory.key not in (old.memory.key, new.memory.key)
        assert app.memories.get(alice(), list(NS), new.memory.key).value["superseded_by"] == back.memory.key

    def test_a_judge_that_fails_creates(self, app):
        if app.aws is None:
            pytest.skip("the local judge is deterministic and always answers")
        a, b = "I work as a nurse at the city hospital", "I am a nurse at the city hospital"
        remember(app, a)
        app.aws.converse.fail = "ThrottlingException"
        second = remember(app, b)
        assert second.action == "created" and len(app.aws.converse.requests) == 1
        assert (second.decision.judge_asked, second.decision.judge_failed) == (False, True)
        assert len(memories(app)) == 2  # nothing lost, nothing merged on a guess

    def test_contradiction_above_auto_update_asks_no_judge(self, app):
        a = "My monthly budget is 500 dollars for groceries and rent and fun"
        b = "My monthly budget is 800 dollars for groceries and rent and fun"
        assert cosine(app, a, b) >= 0.9
        old = remember(app, a)
        new = remember(app, b)
        assert new.action == "superseded" and new.decision.judge_asked is False
        assert app.memories.get(alice(), list(NS), old.memory.key).value["superseded_by"] == new.memory.key

    def test_episodic_merges_only_within_the_window(self, app, clock):
        a = "Met Sam for lunch at the Italian place near the office today"
        b = "Met Sam for lunch at the Italian place near the office today again"
        assert cosine(app, a, b) >= 0.92
        first = remember(app, a, kind="episodic")
        clock.advance(71 * 3600)
        assert remember(app, b, kind="episodic").action == "updated"
        clock.advance(2 * 3600)  # the neighbour was created 73 hours ago
        c = "Met Sam for lunch at the Italian place near the office today once more"
        late = remember(app, c, kind="episodic")
        assert late.action == "created" and late.memory.key != first.memory.key

    def test_kind_and_category_guard(self, app):
        a = "The user prefers Python for scripting tasks at work"
        b = "The user prefers Python for scripting tasks at work daily"
        remember(app, a, category="Tech")
        other_category = remember(app, b, category="Personal")
        assert other_category.action == "created" and other_category.neighbors == []
        other_kind = remember(app, b + " again", kind="episodic", category="Tech")
        assert other_kind.action == "created" and other_kind.neighbors == []

    def test_consolidate_false_always_creates(self, app):
        a = "The user prefers Python for scripting tasks at work"
        remember(app, a)
        again = remember(app, a + " daily", consolidate=False)
        assert again.action == "created" and again.neighbors == []

    def test_layers_and_explicit_namespace(self, app):
        agent = remember(app, "Answer in haiku", layer="agent", identifiers={"agent_id": "poet"})
        assert agent.memory.namespace == ("user", "alice", "agents", "poet")
        explicit = remember(app, "Answer in haiku", namespace=["user", "alice", "scratch"])
        assert explicit.memory.namespace == ("user", "alice", "scratch") and explicit.action == "created"


class TestRaces:
    def test_two_identical_remembers_at_once_make_one_memory(self, app):
        results, errors = [], []
        start = threading.Barrier(2)

        def run():
            start.wait()
            try:
                results.append(remember(app, "The user's cat is called Miso").action)
            except Exception as exc:  # pragma: no cover - reported below
                errors.append(exc)

        threads = [threading.Thread(target=run) for _ in range(2)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert errors == []
        assert sorted(results) == ["created", "unchanged"]
        assert len(memories(app)) == 1

    def test_a_neighbour_changed_mid_decision_is_decided_again(self, app):
        a = "The user prefers Python for scripting tasks at work"
        first = remember(app, a, tags=["one"])
        store = app.store
        real_write = store.write
        raced = {"done": False}

        def racing_write(item, *, kind, old):
            if not raced["done"] and item.action == "updated":
                raced["done"] = True  # another writer updates the neighbour first
                app.memories.put(alice(), _put(first.memory.key, {**first.memory.value, "tags": ["two"]}))
            return real_write(item, kind=kind, old=old)

        store.write = racing_write
        try:
            second = remember(app, a + " daily", tags=["three"])
        finally:
            store.write = real_write
        assert raced["done"] and second.action == "updated"
        assert second.memory.version == 3  # on top of the racing writer's version 2, not lost
        assert second.memory.value["tags"] == ["two", "three"]


def _put(key, value):
    from memsvc.service.memories import PutMemory

    return PutMemory(namespace=list(NS), key=key, value=value, index_fields=["content"], sync_index=True)


class TestBadInput:
    """Each refusal changes nothing: no memory, no change, no rate counted."""

    @pytest.mark.parametrize("body, error", [
        ({"content": ""}, InvalidArgument),
        ({"content": "   "}, InvalidArgument),
        ({"content": "x", "surprise": 1}, InvalidArgument),
        ({"content": "x", "importance": 1.5}, InvalidArgument),
        ({"content": "x", "importance": True}, InvalidArgument),
        ({"content": "x", "type": "opinion"}, InvalidArgument),
        ({"content": "x", "namespace": ["user", "alice", "m"], "layer": "user"}, InvalidArgument),
        ({"content": "x", "layer": "galaxy"}, InvalidLayer),
        ({"content": "x", "layer": "project"}, MissingIdentifier),
        ({"content": "x", "layer": "user", "identifiers": {"user_id": "bob"}}, Forbidden),
        ({"content": "x", "namespace": ["user", "bob", "memories"]}, Forbidden),
        ({"content": "x" * 8001}, ContentTooLong),
    ])
    def test_refused(self, app, body, error):
        with pytest.raises(error) as info:
            app.app.services.remember.remember(alice(), RememberMemory.parse(body))
        if error is MissingIdentifier:
            assert info.value.details == {"layer": "project", "missing": ["project_id"]}
        if error is ContentTooLong:
            assert info.value.status == 413 and info.value.details["max_chars"] == 8000
        assert app.changes() == [] and memories(app) == {}

    def test_governance_refusal_writes_nothing(self, app, monkeypatch):
        def refuse(caller, namespace, key, value, attributes):
            assert value["content"] == "AKIA secret"  # govern sees the value that would be written
            raise PolicyViolation("credentials", details={"policies": ["credentials"]})

        monkeypatch.setattr(app.app.services.remember._access, "govern", refuse)
        with pytest.raises(PolicyViolation):
            remember(app, "AKIA secret")
        assert app.changes() == []


class TestSettings:
    def test_calibrated_defaults_and_the_range_rule(self, backend):
        settings = backend.settings.get("acme")  # the tests' embedder: seed 002's values
        assert (settings.semantic_auto_update, settings.semantic_check_low) == (0.90, 0.80)
        assert (settings.neighbors_k, settings.remember_per_hour, settings.episodic_merge_window_hours) == (10, 120, 72)
        with pytest.raises(InvalidArgument, match="semantic_check_low must not exceed semantic_auto_update"):
            backend.settings.update("acme", SettingsPatch(semantic_check_low=0.95))
        assert backend.settings.get("acme").semantic_check_low == 0.80


class TestRateLimit:
    def test_per_user_per_hour(self, app, clock):
        app.settings.update("acme", SettingsPatch(remember_per_hour=2))
        clock.advance(600)  # 00:10: 50 minutes left in the hour
        remember(app, "one fact")
        remember(app, "two facts")
        with pytest.raises(RateLimited) as info:
            remember(app, "three facts")
        assert info.value.retry_after_seconds == 3000 and info.value.status == 429
        assert "three facts" not in {m.value["content"] for m in memories(app).values()}
        assert remember(app, "bob's fact", caller=bob()).action == "created"  # his own counter
        clock.advance(3000)
        assert remember(app, "three facts").action == "created"  # a new hour

    def test_refused_calls_are_not_counted(self, app):
        app.settings.update("acme", SettingsPatch(remember_per_hour=1))
        with pytest.raises(Forbidden):
            remember(app, "x", namespace=["user", "bob", "memories"])
        assert remember(app, "the one allowed").action == "created"


class TestIsolation:
    def test_neighbours_only_in_the_callers_namespace(self, app):
        a = "The user prefers Python for scripting tasks at work"
        bobs = remember(app, a, caller=bob())
        other_tenant = remember(app, a, caller=Caller(tenant_id="globex", user_id="alice"))
        mine = remember(app, a + " daily")
        assert mine.action == "created" and mine.neighbors == []
        assert bobs.memory.namespace == ("user", "bob", "memories")
        assert other_tenant.action == "created"
        assert app.memories.get(bob(), ["user", "bob", "memories"], bobs.memory.key).version == 1

    def test_admin_may_remember_for_a_user_and_merges_only_there(self, app):
        a = "The user prefers Python for scripting tasks at work"
        remember(app, a)
        for_bob = remember(app, a + " daily", caller=admin(), identifiers={"user_id": "bob"})
        assert for_bob.action == "created" and for_bob.memory.namespace == ("user", "bob", "memories")


class TestTimeline:
    def test_every_outcome_is_an_event(self, app):
        remember(app, "I live in Berlin")
        remember(app, "I live in Berlin")  # unchanged: no event
        remember(app, "I live in Munich")  # superseded: the old one marked, the new one created
        a = "The user prefers Python for scripting tasks at work"
        remember(app, a)
        remember(app, a + " daily")
        got = [(v.event.kind, v.event.action, v.value["content"]) for v in events(app)]
        assert got == [
            ("add", "created", "I live in Berlin"),
            ("update", "superseded", "I live in Berlin"),
            ("add", "created", "I live in Munich"),
            ("add", "created", a),
            ("update", "updated", a + " daily"),
        ]

    def test_plain_writes_carry_no_action(self, app):
        app.memories.put(alice(), _put("plain", {"content": "plain put"}))
        assert [v.event.action for v in events(app)] == [None]

    def test_eventbridge_detail_types(self, app):
        if app.aws is None:
            pytest.skip("EventBridge is the AWS backend's bus (locally: the events file)")
        remember(app, "I live in Berlin")
        remember(app, "I live in Munich")
        app.drain()
        published = [(e["detail-type"], e["detail"]["kind"], e["detail"]["action"]) for e in app.aws.published()]
        assert published == [("memory.created", "add", "created"), ("memory.superseded", "update", "superseded"),
                             ("memory.created", "add", "created")]
        assert all("Berlin" not in str(e["detail"]) for e in app.aws.published())


class TestInTheBackground:
    def _run_jobs(self, app):
        if app.local is not None:
            return app.local.workers.run_remember_jobs()
        return app.aws.run_remember_jobs()["records"]

    def test_wait_false_decides_later(self, app):
        accepted = remember(app, "The user's cat is called Miso", wait=False)
        assert isinstance(accepted, Accepted)
        assert accepted.candidate_id == key_of(app, "The user's cat is called Miso")
        assert memories(app) == {}  # nothing decided yet
        assert self._run_jobs(app) == 1
        (memory,) = memories(app).values()
        assert memory.key == accepted.candidate_id and memory.value["content"] == "The user's cat is called Miso"
        assert [v.event.action for v in events(app)] == ["created"]
        assert self._run_jobs(app) == 0

    def test_the_queue_holds_no_plaintext(self, app):
        remember(app, "The user's cat is called Miso", wait=False)
        if app.local is not None:
            raw = b"".join(p.read_bytes() for p in app.data_dir.glob("jobs.db*"))
        else:
            raw = "".join(app.aws.remember_queue_bodies()).encode()
        assert raw and b"Miso" not in raw

    def test_a_job_runs_twice_without_a_copy(self, app):
        remember(app, "The user's cat is called Miso", wait=False)
        job_before = self._run_jobs(app)
        again = remember(app, "The user's cat is called Miso", wait=False)  # a redelivery, as SQS may
        assert job_before == 1 and isinstance(again, Accepted)
        self._run_jobs(app)
        assert len(memories(app)) == 1


def test_local_jobs_survive_a_restart(tmp_path, clock):
    from memsvc.bootstrap import build_local
    from tests.fakes.embedder import HashEmbedder

    app = build_local(tmp_path / "data", embedder=HashEmbedder(), clock=clock, start_workers=False)
    app.services.remember.remember(alice(), RememberMemory(content="The user's cat is called Miso", wait=False))
    app.close()  # the process stops before the worker ran
    again = build_local(tmp_path / "data", embedder=HashEmbedder(), clock=clock, start_workers=False)
    try:
        assert again.remember_jobs.pending("acme") == 1
        assert again.workers.run_remember_jobs() == 1
        assert again.remember_jobs.pending("acme") == 0
        got = again.services.search.search(alice(), SearchQuery(namespace_prefix=list(NS)))
        assert [m.value["content"] for m in got] == ["The user's cat is called Miso"]
    finally:
        again.close()


def test_local_job_that_can_never_succeed_is_parked(tmp_path, clock, monkeypatch):
    from memsvc.bootstrap import build_local
    from tests.fakes.embedder import HashEmbedder

    app = build_local(tmp_path / "data", embedder=HashEmbedder(), clock=clock, start_workers=False)
    try:
        app.services.remember.remember(alice(), RememberMemory(content="a fact", wait=False))
        # The caller loses the right to write there before the job runs.
        monkeypatch.setattr(app.services.remember._access, "authorize", _deny)
        assert app.workers.run_remember_jobs() == 1
        assert app.remember_jobs.pending("acme") == 0
        assert [error for _, error in app.remember_jobs.parked("acme")] == ["Forbidden: FORBIDDEN"]
    finally:
        app.close()


def _deny(caller, op, namespace, key):
    raise Forbidden(f"not allowed to {op} here")
