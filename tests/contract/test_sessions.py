"""Sessions, their messages, semantic upsert and promotion at close, on both backends
(API-AGENT.md "Agent workflow state"; seed 004's conversations, seed 001's promotion)."""

from __future__ import annotations

import json
import sqlite3
from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta

import pytest

from memsvc.core.errors import (Conflict, ContentTooLong, Forbidden, InvalidArgument, NotFound, PolicyViolation, PreconditionFailed,
                                 StoreUnavailable)
from memsvc.core.models import Caller
from memsvc.core.sessions import message_key
from memsvc.service.access import Access
from memsvc.service.admin import PolicyBundle
from memsvc.service.memories import PutMemory
from memsvc.service.search import SearchQuery
from memsvc.service.semantic import SemanticRef, UpsertSemantic
from memsvc.service.sessions import (AppendMessage, CreateSession, ListMessages, ListSessions, MAX_MESSAGE_BYTES,
                                     UpdateSession)
from memsvc.service.tenant_config import SettingsPatch
from tests.conftest import alice, bob

SESSION = ("user", "alice", "sessions", "s1")
MESSAGES = (*SESSION, "messages")


def services(backend):
    return backend.app.services


def create(backend, session_id="s1", caller=None, **kw):
    return services(backend).sessions.create(caller or alice(), CreateSession(session_id=session_id, **kw))


def say(backend, content, session_id="s1", caller=None, role="user"):
    return services(backend).sessions.append(caller or alice(), session_id, AppendMessage(role=role, content=content))


def messages(backend, session_id="s1", caller=None, **kw):
    return services(backend).sessions.messages(caller or alice(), session_id, ListMessages(**kw)).messages


def session_memory(backend, key, content, importance, caller=None, session_id="s1", **extra):
    """A typed memory in the session layer, as remember or a plain PUT would write it."""
    value = {"content": content, "type": "fact", "importance": importance, **extra}
    services(backend).memories.put(caller or alice(), PutMemory(namespace=["user", "alice", "sessions", session_id],
                                                                key=key, value=value))


def raw_dump(backend) -> str:
    """Everything the item table / database file holds at rest, as text."""
    if backend.local is not None:
        return "".join(f.read_bytes().decode("latin-1") for f in sorted(backend.data_dir.glob("memsvc.db*")))
    client = backend.aws.clients.dynamodb
    pages = client.get_paginator("scan").paginate(TableName="memsvc-test")
    return json.dumps([item for page in pages for item in page["Items"]], default=str)


class TestSessionRecords:
    def test_create_get_list_newest_interaction_first(self, backend, clock):
        create(backend, "a", agent_id="planner", title="first", metadata={"project_id": "p1"})
        clock.advance(1)
        create(backend, "b")
        clock.advance(1)
        create(backend, "c", agent_id="planner")
        clock.advance(1)
        say(backend, "hello", session_id="a")  # "a" is now the latest interaction
        got = services(backend).sessions.get(alice(), "a")
        assert (got.title, got.metadata, got.agent_id, got.version, got.message_count) == \
            ("first", {"project_id": "p1"}, "planner", 1, 1)
        page, cursor = services(backend).sessions.list(alice(), ListSessions(limit=2))
        assert [s.session_id for s in page] == ["a", "c"] and cursor
        rest, end = services(backend).sessions.list(alice(), ListSessions(limit=2, cursor=cursor))
        assert [s.session_id for s in rest] == ["b"] and end is None
        planner, _ = services(backend).sessions.list(alice(), ListSessions(agent_id="planner"))
        assert [s.session_id for s in planner] == ["a", "c"]

    def test_create_twice_is_409(self, backend):
        create(backend)
        with pytest.raises(Conflict):
            create(backend)

    def test_another_users_or_tenants_session_is_not_found(self, backend):
        create(backend)
        other_tenant = Caller(tenant_id="other", user_id="alice")
        for caller in (bob(), other_tenant):
            for call in (lambda c: services(backend).sessions.get(c, "s1"),
                         lambda c: say(backend, "hi", caller=c),
                         lambda c: messages(backend, caller=c),
                         lambda c: services(backend).close_session.close(c, "s1"),
                         lambda c: services(backend).sessions.update(c, "s1", UpdateSession(title="x"), if_match=None)):
                with pytest.raises(NotFound):
                    call(caller)
            services(backend).sessions.delete(caller, "s1")  # idempotent, and touches nothing of alice's
            assert services(backend).sessions.list(caller, ListSessions())[0] == []
        assert services(backend).sessions.get(alice(), "s1").session_id == "s1"
        # bob may use the same id: sessions are per user
        create(backend, caller=bob())
        assert services(backend).sessions.get(bob(), "s1").version == 1

    @pytest.mark.parametrize("session_id", ["a/b", "a%2Fb", "ünï cödé ☕", "x#y"])
    def test_ids_are_opaque(self, backend, session_id):
        create(backend, session_id)
        say(backend, "hello", session_id=session_id)
        assert [m.content for m in messages(backend, session_id)] == ["hello"]
        assert services(backend).sessions.get(alice(), session_id).session_id == session_id
        with pytest.raises(NotFound):
            services(backend).sessions.get(alice(), session_id + "x")

    @pytest.mark.parametrize("session_id", ["é" * 150, "日" * 100])
    def test_an_id_whose_namespaces_would_be_too_long_is_refused_by_its_own_name(self, backend, session_id):
        with pytest.raises(InvalidArgument) as refused:
            create(backend, session_id)
        assert refused.value.details["field"] == "session_id" and "session_id" in str(refused.value)
        assert services(backend).sessions.list(alice(), ListSessions())[0] == []
        create(backend, session_id[:80])  # within the limit: the same characters, fewer of them
        assert services(backend).sessions.get(alice(), session_id[:80]).version == 1

    def test_concurrent_puts_without_if_match_all_land(self, backend):
        create(backend)

        def put(n: int) -> None:
            services(backend).sessions.update(alice(), "s1", UpdateSession(metadata={"n": n}), if_match=None)

        all_in_parallel(put, 6)
        assert services(backend).sessions.get(alice(), "s1").version == 7

    def test_put_if_match_and_last_interaction(self, backend, clock):
        create(backend, metadata={"a": 1})
        clock.advance(5)
        updated = services(backend).sessions.update(alice(), "s1", UpdateSession(title="t"), if_match=1)
        assert (updated.version, updated.title, updated.metadata) == (2, "t", {"a": 1})
        assert updated.last_interaction == clock.now()
        with pytest.raises(PreconditionFailed):
            services(backend).sessions.update(alice(), "s1", UpdateSession(metadata={"b": 2}), if_match=1)
        assert services(backend).sessions.get(alice(), "s1").metadata == {"a": 1}
        # appends move last_interaction, not the version: a chatty session never fails If-Match
        say(backend, "hi")
        assert services(backend).sessions.update(alice(), "s1", UpdateSession(metadata={"b": 2}),
                                                 if_match=2).version == 3

    def test_metadata_title_and_messages_are_sealed_at_rest(self, backend):
        create(backend, title="Plotting zanzibar", metadata={"secret": "quokka-metadata"})
        say(backend, "the walrus-message content")
        dump = raw_dump(backend)
        for plaintext in ("zanzibar", "quokka-metadata", "walrus-message"):
            assert plaintext not in dump

    def test_metadata_too_large_is_413_and_bad_input_changes_nothing(self, backend):
        with pytest.raises(ContentTooLong) as too_big:
            create(backend, metadata={"x": "y" * 70_000})
        assert too_big.value.details["max_bytes"] == 64 * 1024
        with pytest.raises(InvalidArgument):
            create(backend, "bad\nid")
        with pytest.raises(InvalidArgument):
            CreateSession(session_id="")
        with pytest.raises(InvalidArgument):
            AppendMessage(role="robot", content="x")
        assert services(backend).sessions.list(alice(), ListSessions())[0] == []


class TestMessages:
    def test_seq_order_and_items(self, backend, clock):
        create(backend)
        before = services(backend).sessions.get(alice(), "s1").last_interaction
        clock.advance(3)
        first = say(backend, "my cat is called Pixel")
        second = say(backend, "noted", role="assistant")
        assert (first.seq, second.seq) == (1, 2)
        assert services(backend).sessions.get(alice(), "s1").last_interaction == before + timedelta(seconds=3)
        got = messages(backend)
        assert [(m.seq, m.role, m.content) for m in got] == [(1, "user", "my cat is called Pixel"),
                                                              (2, "assistant", "noted")]
        assert [m.seq for m in messages(backend, after_seq=1)] == [2]
        assert [m.seq for m in messages(backend, limit=1)] == [1]
        # each message is an item: key = zero-padded seq, found by key and by search once indexed
        item = services(backend).memories.get(alice(), MESSAGES, message_key(1))
        assert item.value["content"] == "my cat is called Pixel" and item.id == first.message_id
        backend.drain()
        found = services(backend).search.search(alice(), SearchQuery(namespace_prefix=list(SESSION),
                                                                     query="cat called Pixel", mode="keyword"))
        # the reply after it is indexed with it as its turn before (issue 23), below it
        assert [m.key for m in found] == [message_key(1), message_key(2)]

    def test_message_too_large_is_413(self, backend):
        create(backend)
        with pytest.raises(ContentTooLong) as too_big:
            say(backend, "x" * (MAX_MESSAGE_BYTES + 1))
        assert too_big.value.details["max_bytes"] == MAX_MESSAGE_BYTES
        assert messages(backend) == []

    def test_concurrent_appends_have_no_gaps(self, backend):
        create(backend)
        def worker(n: int) -> None:
            for i in range(5):
                say(backend, f"worker {n} message {i}")

        all_in_parallel(worker, 6)
        got = messages(backend)
        assert [m.seq for m in got] == list(range(1, 31))
        assert len({m.content for m in got}) == 30
        assert services(backend).sessions.get(alice(), "s1").message_count == 30

    def test_a_failed_store_is_503_and_writes_nothing(self, backend, monkeypatch):
        create(backend)
        say(backend, "kept")
        pending_before = len(backend.changes())
        if backend.local is not None:
            def broken(*args, **kwargs):
                raise sqlite3.OperationalError("disk I/O error")
            monkeypatch.setattr(backend.store, "write_in", broken)
            with pytest.raises(StoreUnavailable):
                say(backend, "lost")
            monkeypatch.undo()
        else:
            failure = backend.aws.fail("dynamodb", "TransactWriteItems", code="InternalServerError")
            with pytest.raises(StoreUnavailable):
                say(backend, "lost")
            failure.remove()
        assert services(backend).sessions.get(alice(), "s1").message_count == 1
        assert [m.content for m in messages(backend)] == ["kept"]
        assert len(backend.changes()) == pending_before
        assert say(backend, "next").seq == 2

    def test_closed_session_takes_no_messages(self, backend):
        create(backend)
        services(backend).close_session.close(alice(), "s1")
        with pytest.raises(Conflict):
            say(backend, "too late")

    def test_the_store_refuses_an_append_to_a_closed_or_deleted_session(self, backend, monkeypatch):
        """An append that read the session while it was open, and commits after a close or a
        delete: the store's own condition refuses it, so no message outlives its session."""
        create(backend)
        say(backend, "before")
        store = services(backend).sessions._store
        stale = store.get("acme", "alice", "s1")
        services(backend).close_session.close(alice(), "s1")
        reads = iter([stale])
        real_get = store.get
        monkeypatch.setattr(store, "get", lambda *a: next(reads, None) or real_get(*a))  # DynamoDB reads first

        def message(seq, old):
            return services(backend).memories.build_version(
                "acme", MESSAGES, message_key(seq), {"role": "user", "content": "too late", "seq": seq}, old=old,
                attributes=None, policy_attributes={}, index_fields=["content"], ttl_seconds=None)

        with pytest.raises(Conflict) as closed:
            store.append("acme", "alice", "s1", backend.clock.now(), message)
        assert closed.value.retryable is False
        monkeypatch.undo()
        assert [m.content for m in messages(backend)] == ["before"]
        services(backend).sessions.delete(alice(), "s1")
        assert store.append("acme", "alice", "s1", backend.clock.now(), message) is None

    def test_pages_end_at_the_limit_or_the_byte_bound_and_say_where_to_go_on(self, backend, monkeypatch):
        create(backend)
        for n in range(5):
            say(backend, f"message {n}" + "x" * 100)

        def page(**kw):
            return services(backend).sessions.messages(alice(), "s1", ListMessages(**kw))

        first = page(limit=2)
        assert ([m.seq for m in first.messages], first.next_after_seq) == ([1, 2], 2)
        last = page(after_seq=4, limit=2)
        assert ([m.seq for m in last.messages], last.next_after_seq) == ([5], None)
        exact = page(after_seq=3, limit=2)
        assert [m.seq for m in exact.messages] == [4, 5] and exact.next_after_seq is None
        monkeypatch.setattr("memsvc.core.pages.PAGE_BYTES", 250)  # two messages' worth
        cut = page(limit=100)
        assert ([m.seq for m in cut.messages], cut.next_after_seq) == ([1, 2], 2)
        monkeypatch.setattr("memsvc.core.pages.PAGE_BYTES", 1)
        assert [m.seq for m in page(after_seq=1).messages] == [2]  # always at least one

    def test_an_item_put_among_the_messages_is_not_a_message(self, backend):
        create(backend)
        say(backend, "hello")
        services(backend).memories.put(alice(), PutMemory(namespace=list(MESSAGES), key="zzz", value={"x": 1}))
        assert [(m.seq, m.content) for m in messages(backend)] == [(1, "hello")]

    def test_delete_honours_the_tenants_delete_policy(self, backend):
        create(backend)
        say(backend, "hello")
        admin = Caller(tenant_id="acme", user_id="root", roles=("admin",))
        bundle = dict(services(backend).admin.get_policies(admin).bundle.policies)
        bundle["authz.rego"] = bundle["authz.rego"].replace(
            'user_operations := {"read", "write", "delete", "search", "list", "events"}',
            'user_operations := {"read", "write", "search", "list", "events"}')
        services(backend).admin.put_policies(admin, PolicyBundle(policies=bundle))
        with pytest.raises(Forbidden):
            services(backend).sessions.delete(alice(), "s1")
        assert [m.content for m in messages(backend)] == ["hello"]
        assert services(backend).sessions.get(alice(), "s1").message_count == 1

    def test_delete_removes_messages_and_layer(self, backend):
        create(backend)
        say(backend, "hello")
        session_memory(backend, "m1", "a fact", 0.5)
        services(backend).sessions.delete(alice(), "s1")
        with pytest.raises(NotFound):
            services(backend).sessions.get(alice(), "s1")
        left = services(backend).search.search(alice(), SearchQuery(namespace_prefix=list(SESSION)))
        assert left == []
        # the same id can start over, from seq 1, over the old messages' tombstones
        create(backend)
        assert say(backend, "again").seq == 1
        assert [m.content for m in messages(backend)] == ["again"]


class TestSemanticUpsert:
    def test_dedup_on_content_hash(self, backend):
        semantic = services(backend).semantic
        first = semantic.upsert(alice(), UpsertSemantic(content="Alice likes green tea"))
        assert first.action == "created"
        pending = len(backend.changes())
        again = semantic.upsert(alice(), UpsertSemantic(content="  alice LIKES green   tea "))
        assert (again.action, again.id, again.content_hash) == ("unchanged", first.id, first.content_hash)
        assert len(backend.changes()) == pending  # no new version, no event
        got = semantic.get(alice(), SemanticRef(content_hash=first.content_hash))
        assert (got.content, got.version, got.namespace) == ("Alice likes green tea", 1, ("user", "alice", "semantic"))

    def test_external_id_upserts(self, backend):
        semantic = services(backend).semantic
        created = semantic.upsert(alice(), UpsertSemantic(content="lives in Paris", external_id="home"))
        updated = semantic.upsert(alice(), UpsertSemantic(content="lives in Berlin", external_id="home"))
        same = semantic.upsert(alice(), UpsertSemantic(content="lives in Berlin", external_id="home"))
        assert [created.action, updated.action, same.action] == ["created", "updated", "unchanged"]
        got = semantic.get(alice(), SemanticRef(external_id="home"))
        assert (got.content, got.version) == ("lives in Berlin", 2)
        assert semantic.get(alice(), SemanticRef(content_hash=updated.content_hash)).id == got.id
        semantic.delete(alice(), SemanticRef(external_id="home"))
        semantic.delete(alice(), SemanticRef(external_id="home"))  # idempotent
        with pytest.raises(NotFound):
            semantic.get(alice(), SemanticRef(external_id="home"))

    def test_per_user(self, backend):
        services(backend).semantic.upsert(alice(), UpsertSemantic(content="x", external_id="e"))
        with pytest.raises(NotFound):
            services(backend).semantic.get(bob(), SemanticRef(external_id="e"))
        services(backend).semantic.delete(bob(), SemanticRef(external_id="e"))
        assert services(backend).semantic.get(alice(), SemanticRef(external_id="e")).content == "x"

    def test_exactly_one_reference(self):
        with pytest.raises(InvalidArgument):
            SemanticRef()
        with pytest.raises(InvalidArgument):
            SemanticRef(external_id="a", content_hash="0" * 64)


class TestPromotionAtClose:
    def test_seed_001_rules(self, backend):
        create(backend)
        session_memory(backend, "email", "Reach me at alice@example.com or +1 415 555 0100", 0.9)
        session_memory(backend, "low", "prefers window seats", 0.5)
        session_memory(backend, "edge", "release 2.4.1 shipped on 2024-05-01, order 12345678 for $19.99", 0.8)
        session_memory(backend, "sensitive", "diagnosis details", 0.95, sensitive=True)
        session_memory(backend, "private", "a private matter", 0.95, metadata={"private": True})
        say(backend, "messages are never promoted")
        closed = services(backend).close_session.close(alice(), "s1")
        assert (closed.promoted, closed.blocked, closed.deleted) == (2, 2, False)
        promoted = services(backend).search.search(alice(), SearchQuery(namespace_prefix=["user", "alice", "memories"]))
        contents = sorted(m.value["content"] for m in promoted)
        assert contents == ["Reach me at [REDACTED_EMAIL] or [REDACTED_PHONE]",
                            "release 2.4.1 shipped on 2024-05-01, order 12345678 for $19.99"]
        sources = {m.value["promoted_from"]["key"] for m in promoted}
        assert sources == {"email", "edge"}
        assert all(m.value["promoted_from"]["namespace"] == list(SESSION) for m in promoted)
        # the session's own copies are left as they were
        assert services(backend).memories.get(alice(), SESSION, "email").value["content"].startswith("Reach me at alice@")
        first = services(backend).sessions.get(alice(), "s1")
        again = services(backend).close_session.close(alice(), "s1")
        assert (again.promoted, again.blocked) == (0, 2)
        # a close that changes nothing writes nothing: an If-Match holder's version still holds
        assert services(backend).sessions.get(alice(), "s1") == first
        assert len(services(backend).search.search(
            alice(), SearchQuery(namespace_prefix=["user", "alice", "memories"]))) == 2
        copy = next(m for m in promoted if m.value["promoted_from"]["key"] == "edge")
        services(backend).memories.delete(alice(), ("user", "alice", "memories"), copy.key)
        assert services(backend).close_session.close(alice(), "s1").promoted == 0  # a deleted copy stays deleted
        assert len(services(backend).search.search(
            alice(), SearchQuery(namespace_prefix=["user", "alice", "memories"]))) == 1

    def test_project_target_and_threshold_setting(self, backend):
        backend.settings.update("acme", SettingsPatch(promotion_threshold=0.5))
        project_member = Caller(tenant_id="acme", user_id="alice", jwt_claims={"projects": ["apollo"]})
        create(backend, metadata={"project_id": "apollo"})
        session_memory(backend, "m", "the launch is on Friday", 0.6)
        assert services(backend).close_session.close(project_member, "s1").promoted == 1
        found = services(backend).search.search(project_member, SearchQuery(namespace_prefix=["project", "apollo"]))
        assert [m.value["content"] for m in found] == ["the launch is on Friday"]

    def test_tags_category_and_source_are_redacted_too(self, backend):
        create(backend)
        session_memory(backend, "m", "call the vendor", 0.9, tags=["bob@example.com", "vendor"],
                       category="+1 415 555 0100", source="mail from carol@example.org")
        assert services(backend).close_session.close(alice(), "s1").promoted == 1
        copy, = services(backend).search.search(alice(), SearchQuery(namespace_prefix=["user", "alice", "memories"]))
        assert copy.value["tags"] == ["[REDACTED_EMAIL]", "vendor"]
        assert (copy.value["category"], copy.value["source"]) == ("[REDACTED_PHONE]", "mail from [REDACTED_EMAIL]")

    def test_a_project_the_user_may_not_write_blocks_promotion_and_the_session_still_closes(self, backend):
        create(backend, metadata={"project_id": "apollo"})  # alice has no `projects` claim for apollo
        session_memory(backend, "m", "the launch is on Friday", 0.9)
        session_memory(backend, "low", "minor", 0.1)
        closed = services(backend).close_session.close(alice(), "s1")
        assert (closed.promoted, closed.blocked) == (0, 1)
        assert services(backend).sessions.get(alice(), "s1").closed_at is not None
        admin = Caller(tenant_id="acme", user_id="root", roles=("admin",))
        assert services(backend).search.search(admin, SearchQuery(namespace_prefix=["project", "apollo"])) == []
        assert services(backend).close_session.close(alice(), "s1").blocked == 1  # and a second close agrees

    def test_a_memory_governance_refuses_since_it_was_written_is_blocked(self, backend, monkeypatch):
        create(backend)
        session_memory(backend, "ok", "the launch is on Friday", 0.9)
        session_memory(backend, "later-refused", "the codename is bluebird", 0.9)
        original = Access.govern

        def newer_policy(self, caller, namespace, key, value, attributes):
            if "bluebird" in json.dumps(value):
                raise PolicyViolation("refused by a newer policy", details={"policies": ["no_codenames"]})
            return original(self, caller, namespace, key, value, attributes)

        monkeypatch.setattr(Access, "govern", newer_policy)
        closed = services(backend).close_session.close(alice(), "s1")
        assert (closed.promoted, closed.blocked) == (1, 1)
        promoted = services(backend).search.search(alice(), SearchQuery(namespace_prefix=["user", "alice", "memories"]))
        assert [m.value["content"] for m in promoted] == ["the launch is on Friday"]

    def test_promote_important_off(self, backend):
        backend.settings.update("acme", SettingsPatch(promote_important=False))
        create(backend)
        session_memory(backend, "m", "important", 0.9)
        assert services(backend).close_session.close(alice(), "s1").promoted == 0

    def test_auto_delete_after_retention(self, backend, clock):
        backend.settings.update("acme", SettingsPatch(session_auto_delete=True, session_retention_days=7))
        create(backend)
        create(backend, "keep")
        say(backend, "hello")
        session_memory(backend, "m", "a fact", 0.2)
        closed = services(backend).close_session.close(alice(), "s1")
        assert closed.delete_after is not None and not closed.deleted
        clock.advance(6 * 86400)
        assert services(backend).sessions.remove_due() == 0
        clock.advance(2 * 86400)
        if backend.local is not None:
            assert backend.local.sweeper.sweep().sessions_deleted == 1
        else:
            assert services(backend).sessions.remove_due() == 1
        with pytest.raises(NotFound):
            services(backend).sessions.get(alice(), "s1")
        assert services(backend).search.search(alice(), SearchQuery(namespace_prefix=list(SESSION))) == []
        assert services(backend).sessions.get(alice(), "keep").session_id == "keep"
        assert services(backend).sessions.remove_due() == 0

    def test_blocked_metric_and_close_event(self, backend, capsys):
        create(backend)
        session_memory(backend, "m", "the unicorn-secret", 0.9, sensitive=True)
        services(backend).close_session.close(alice(), "s1")
        if backend.local is not None:
            text = services(backend).metrics.exposition()[0].decode()
            assert 'memory_promotion_blocked_total{tenant="acme"} 1.0' in text
            return
        emf = [json.loads(line) for line in capsys.readouterr().out.splitlines() if line.startswith("{")]
        assert any(doc.get("memory.promotion.blocked") == [1.0] and doc.get("tenant") == "acme" for doc in emf)
        published = [e for e in backend.aws.published() if e["detail-type"] == "memsvc.session.closed"]
        assert len(published) == 1
        detail = published[0]["detail"]
        assert (detail["session_id"], detail["blocked"], detail["promoted"]) == ("s1", 1, 0)
        assert "unicorn" not in json.dumps(published)


def test_close_event_in_the_local_events_file(tmp_path, clock):
    from memsvc.bootstrap import build_local
    from tests.fakes.embedder import HashEmbedder

    app = build_local(tmp_path / "data", embedder=HashEmbedder(), clock=clock, start_workers=False,
                      events_file=tmp_path / "events.jsonl")
    try:
        app.services.sessions.create(alice(), CreateSession(session_id="s1", title="the aardvark title"))
        app.services.close_session.close(alice(), "s1")
        lines = [json.loads(line) for line in (tmp_path / "events.jsonl").read_text().splitlines()]
        closed = [e for e in lines if e["detail-type"] == "memsvc.session.closed"]
        assert len(closed) == 1 and closed[0]["source"] == "memsvc"
        assert closed[0]["detail"]["session_id"] == "s1"
        assert "aardvark" not in json.dumps(lines)
    finally:
        app.close()


def all_in_parallel(work, threads: int) -> None:
    """`work(n)` for n < `threads`, each on its own thread at once; the first exception is raised."""
    with ThreadPoolExecutor(threads) as pool:
        list(pool.map(work, range(threads)))
