"""Reflection, the archive and the profile on both backends (issue 24): reflection merges
near-duplicates and resolves contradictions (the newer statement wins unless the older is
pinned), recomputes importance, archives what decayed and rebuilds the profile; it is bounded,
resumable and idempotent, and every change is on the timeline with its reason. Recall skips
archived memories unless asked, and restores one it returns; `POST /v1/memories/restore`
restores by id. `GET /v1/memory/profile` reads the caller's own profile. Another user or tenant
sees nothing (404, 403 or an empty answer)."""

from __future__ import annotations

import json

import pytest

from memsvc.core.errors import Forbidden, NotFound
from memsvc.core.models import ACTION_REASONS, Caller
from memsvc.service.memories import PutMemory
from memsvc.service.profile import ProfileQuery
from memsvc.service.recall import RecallQuery
from memsvc.service.reflection import ReflectUser
from memsvc.service.remember import RememberMemory
from memsvc.service.restore import RestoreMemory
from memsvc.service.tenant_config import SettingsPatch
from memsvc.service.timeline import EventsQuery
from tests.conftest import admin, alice, bob

NS = ("user", "alice", "memories")
DAY = 86_400
A = "The user prefers Python for scripting tasks at work"
B = "The user prefers Python for scripting tasks at work daily"  # a near-duplicate of A (cosine >= 0.9)


@pytest.fixture(autouse=True)
def thresholds(backend):
    """Seed 002's thresholds with a judge range wide enough for bag-of-words cosines (as test_remember)."""
    backend.settings.update("acme", SettingsPatch(semantic_auto_update=0.9, semantic_check_low=0.6,
                                                  episodic_auto_update=0.92, episodic_check_low=0.6))


def remember(backend, content, caller=None, **kw):
    kw.setdefault("consolidate", False)  # so that reflection has duplicates to find
    memory = backend.app.services.remember.remember(caller or alice(), RememberMemory(content=content, **kw)).memory
    backend.clock.advance(1)  # creation order is what "newer" means
    return memory


def reflect(backend, user="alice", tenant="acme", **kw):
    backend.drain()  # the vectors reflection compares are the index's
    return backend.app.services.reflection.run(tenant, user, **kw)


def recall(backend, query, caller=None, **kw):
    backend.drain()  # reflection's new versions are indexed off the write path
    return backend.app.services.recall.recall(caller or alice(), RecallQuery(query=query, **kw)).memories


def get(backend, key, ns=NS):
    return backend.memories.get(alice(), list(ns), key)


def events(backend):
    backend.drain()
    return backend.timeline.events(alice(), EventsQuery(namespace_prefix=["user", "alice"])).events


def profile(backend, caller=None, **kw):
    return backend.app.services.profiles.get(caller or alice(), ProfileQuery(**kw))


class TestConsolidation:
    def test_near_duplicates_merge_into_the_older_memory_once(self, backend):
        older = remember(backend, A, tags=["lang"], importance=0.8)
        newer = remember(backend, B, tags=["work"], importance=0.4)
        run = reflect(backend)
        assert (run.examined, run.merged, run.superseded, run.done) == (2, 1, 1, True)
        kept, gone = get(backend, older.key), get(backend, newer.key)
        assert kept.value["content"] == B and kept.value["merged_from"] == [newer.key]
        assert kept.value["tags"] == ["lang", "work"] and kept.value["importance"] == 0.8
        assert gone.value["superseded_by"] == older.key and "superseded" in gone.value["tags"]
        assert [h.memory.key for h in recall(backend, A)] == [older.key]
        seen = {(e.event.action, e.event.reason) for e in events(backend) if e.event.kind == "update"}
        assert seen == {("merged", ACTION_REASONS["merged"]),
                        ("duplicate_superseded", ACTION_REASONS["duplicate_superseded"])}
        again = reflect(backend)  # nothing new: nothing written
        assert (again.examined, again.merged, again.superseded, again.importance_updated, again.archived) == \
               (2, 0, 0, 0, 0)
        assert get(backend, older.key).version == kept.version

    def test_the_newer_statement_wins_a_contradiction(self, backend):
        berlin = remember(backend, "I live in Berlin")
        backend.clock.advance(60)
        munich = remember(backend, "I live in Munich")
        run = reflect(backend)
        assert (run.superseded, run.merged) == (1, 0)
        assert get(backend, berlin.key).value["superseded_by"] == munich.key
        assert get(backend, munich.key).value["superseded_by"] is None
        (event,) = [e.event for e in events(backend) if e.event.action == "reflect_superseded"]
        assert (event.key, event.reason) == (berlin.key, ACTION_REASONS["reflect_superseded"])

    def test_unless_the_older_is_pinned(self, backend):
        berlin = remember(backend, "I live in Berlin", pinned=True)
        backend.clock.advance(60)
        munich = remember(backend, "I live in Munich")
        assert reflect(backend).superseded == 1
        assert get(backend, munich.key).value["superseded_by"] == berlin.key
        assert get(backend, berlin.key).value["superseded_by"] is None

    def test_a_concurrent_write_wins(self, backend, monkeypatch):
        older = remember(backend, A)
        newer = remember(backend, B)
        backend.drain()
        memories = backend.app.services.memories
        real = memories.write_version

        def racing(tenant, ns, key, value, **kw):  # someone writes the kept memory first
            if kw.get("action") == "merged":
                backend.memories.put(alice(), PutMemory(namespace=list(ns), key=key,
                                                        value={"content": "mine now", "type": "fact"}))
            return real(tenant, ns, key, value, **kw)

        monkeypatch.setattr(memories, "write_version", racing)
        run = reflect(backend)
        assert run.skipped == 2 and run.merged == 0 and run.superseded == 0  # the merge, then its duplicate
        assert get(backend, older.key).value["content"] == "mine now"
        # The newer statement is kept current: it was not merged anywhere, so it is not superseded.
        assert get(backend, newer.key).value.get("superseded_by") is None
        assert get(backend, newer.key).value["content"] == B


class TestImportanceAndArchive:
    def test_importance_decays_with_disuse_and_is_written_once(self, backend):
        memory = remember(backend, "The user likes hiking in the Alps", importance=0.5)
        pinned = remember(backend, "The user is allergic to peanuts", importance=0.5, pinned=True)
        backend.clock.advance(30 * DAY)
        run = reflect(backend)
        assert (run.importance_updated, run.archived) == (1, 0)
        value = get(backend, memory.key).value
        assert value["importance"] == 0.5  # the stated importance stays
        assert value["effective_importance"] == pytest.approx(0.5 * 0.99 ** 30, abs=1e-4)
        assert "effective_importance" not in get(backend, pinned.key).value  # pinned: no decay, nothing to write
        assert reflect(backend).importance_updated == 0  # nothing new
        (event,) = [e.event for e in events(backend) if e.event.action == "importance_recomputed"]
        assert event.reason == ACTION_REASONS["importance_recomputed"]

    def test_use_raises_it(self, backend):
        memory = remember(backend, "The user likes hiking in the Alps", importance=0.5)
        for _ in range(7):
            assert recall(backend, "hiking in the Alps")
        backend.app.accesses.flush()
        assert reflect(backend).importance_updated == 1
        assert get(backend, memory.key).value["effective_importance"] == pytest.approx(0.65)

    def test_decayed_memories_are_archived_skipped_by_recall_and_restored_by_it(self, backend):
        memory = remember(backend, "The user once visited Lisbon", importance=0.2)
        kept = remember(backend, "The user lives near Lisbon", importance=0.2, pinned=True)
        backend.clock.advance(200 * DAY)
        run = reflect(backend)
        assert run.archived == 1
        archived = get(backend, memory.key)  # still readable by key
        assert archived.value["archived_at"] and "archived_at" not in get(backend, kept.key).value
        assert [h.memory.key for h in recall(backend, "visited Lisbon", min_score=0)] == [kept.key]
        (hit,) = [h for h in recall(backend, "The user once visited Lisbon", min_score=0, include_archived=True)
                  if h.memory.key == memory.key]
        assert hit.memory.version == archived.version + 1 and "archived_at" not in hit.memory.value
        assert memory.key in [h.memory.key for h in recall(backend, "visited Lisbon", min_score=0)]
        actions = [e.event.action for e in events(backend) if e.event.key == memory.key]
        assert actions == ["created", "archived", "restored"]
        assert reflect(backend).archived == 0  # just used: not decayed any more

    def test_exempt_layers_are_left_alone(self, backend):
        session = remember(backend, "Draft the quarterly report", importance=0.05, layer="session",
                           identifiers={"session_id": "s1"})
        backend.clock.advance(400 * DAY)
        assert reflect(backend).examined == 0
        ns = ("user", "alice", "sessions", "s1")
        assert "archived_at" not in get(backend, session.key, ns).value
        backend.settings.update("acme", SettingsPatch(reflection_exempt_layers=[]))
        assert reflect(backend).archived == 1


class TestRestoreRoute:
    def archived(self, backend):
        memory = remember(backend, "The user once visited Lisbon", importance=0.05)
        backend.clock.advance(200 * DAY)
        assert reflect(backend).archived == 1
        return get(backend, memory.key)

    def test_restore_by_id_once(self, backend):
        archived = self.archived(backend)
        restore = backend.app.services.restore
        done = restore.restore(alice(), RestoreMemory(id=archived.id))
        assert done.restored and done.memory.version == archived.version + 1
        assert "archived_at" not in get(backend, archived.key).value
        with pytest.raises(NotFound):  # the id is no longer current
            restore.restore(alice(), RestoreMemory(id=archived.id))
        again = restore.restore(alice(), RestoreMemory(id=done.memory.id))  # not archived: as it is
        assert (again.restored, again.memory.id) == (False, done.memory.id)

    @pytest.mark.parametrize("caller", [bob(), Caller(tenant_id="globex", user_id="alice", roles=("user",)),
                                        admin("globex")],
                             ids=["another user", "same user id in another tenant", "another tenant's admin"])
    def test_another_user_or_tenant_gets_404(self, backend, caller):
        archived = self.archived(backend)
        with pytest.raises(NotFound):
            backend.app.services.restore.restore(caller, RestoreMemory(id=archived.id))
        assert get(backend, archived.key).version == archived.version


class TestRunsAndTrigger:
    def test_bounded_and_resumable(self, backend):
        for agent in ("a1", "a2", "a3"):
            remember(backend, f"The user wants terse answers from {agent}", layer="agent",
                     identifiers={"agent_id": agent})
        first = reflect(backend, budget=2)
        assert (first.examined, first.done) == (2, False)
        assert first.next_cursor[0] == ("user", "alice", "agents", "a2")
        second = reflect(backend, budget=2)
        assert (second.examined, second.done, second.next_cursor) == (1, True, None)
        assert reflect(backend, budget=2).examined == 2  # the next pass starts over

    def test_admin_trigger(self, backend):
        remember(backend, A)
        remember(backend, B)
        backend.drain()
        reflection = backend.app.services.reflection
        with pytest.raises(Forbidden):
            reflection.reflect(alice(), ReflectUser(user_id="alice"))
        assert reflection.reflect(admin("globex"), ReflectUser(user_id="alice")).examined == 0
        assert reflection.reflect(admin(), ReflectUser(user_id="alice")).merged == 1

    def test_the_schedule_runs_due_users_once_per_interval(self, backend):
        remember(backend, A)
        remember(backend, "Bob prefers tea", caller=bob())
        backend.drain()
        reflection = backend.app.services.reflection
        assert reflection.run_due(["acme", "globex"]) == 2
        assert reflection.run_due(["acme"]) == 0
        backend.clock.advance(25 * 3600)
        assert reflection.run_due(["acme"]) == 2
        backend.settings.update("acme", SettingsPatch(reflection_enabled=False))
        backend.clock.advance(25 * 3600)
        assert reflection.run_due(["acme"]) == 0


class TestProfile:
    def test_the_most_important_current_preferences_and_facts_deduplicated(self, backend):
        remember(backend, "The user prefers dark mode in every editor", type="preference", importance=0.9)
        remember(backend, "The user prefers dark mode in all editors", type="preference", importance=0.6)
        remember(backend, "The user is a nurse at the city hospital", importance=0.7)
        remember(backend, "Decided to ship on Friday", type="decision", importance=1.0)
        old = remember(backend, "I live in Berlin", importance=0.8)
        backend.clock.advance(60)
        remember(backend, "I live in Munich", importance=0.5)
        assert reflect(backend).done
        got = profile(backend)
        contents = [i.content for i in got.items]
        assert contents == ["The user prefers dark mode in every editor", "The user is a nurse at the city hospital",
                            "I live in Munich"]
        assert got.user_id == "alice" and got.built_at == backend.clock.now()
        assert got.token_count == sum(i.tokens for i in got.items) <= 500
        assert old.key not in [i.key for i in got.items]
        first = got.items[0]
        assert len(profile(backend, token_budget=first.tokens).items) == 1  # a smaller budget cuts it

    def test_built_at_first_read_and_stored_sealed(self, backend):
        remember(backend, "The user prefers zebra-striped notebooks", type="preference")
        got = profile(backend)
        assert [i.content for i in got.items] == ["The user prefers zebra-striped notebooks"]
        stored = backend.store.get_config("acme", "profile#alice")
        assert stored is not None and "zebra" not in json.dumps(stored)
        assert profile(backend).built_at == got.built_at  # read as stored

    def test_what_changed_since_it_was_built_is_read_as_it_is_now(self, backend):
        gone = remember(backend, "The user prefers zebra-striped notebooks", type="preference", importance=0.9)
        wrong = remember(backend, "The user is a nurse at the city hospital", importance=0.8)
        kept = remember(backend, "The user prefers green tea", type="preference", importance=0.7)
        assert len(profile(backend).items) == 3  # built, and stored
        backend.memories.delete(alice(), list(NS), gone.key)
        from memsvc.service.feedback import GiveFeedback
        backend.app.services.feedback.give(alice(), GiveFeedback(id=wrong.id, signal="wrong"))
        useful = backend.app.services.feedback.give(alice(), GiveFeedback(id=kept.id, signal="useful"))
        got = profile(backend)
        assert [(i.content, i.id) for i in got.items] == [("The user prefers green tea", useful.memory.id)]

    @pytest.mark.parametrize("caller", [bob(), Caller(tenant_id="globex", user_id="alice", roles=("user",))],
                             ids=["another user", "same user id in another tenant"])
    def test_another_user_or_tenant_sees_nothing(self, backend, caller):
        remember(backend, "The user prefers green tea", type="preference")
        assert reflect(backend).done
        assert profile(backend, caller=caller).items == []
