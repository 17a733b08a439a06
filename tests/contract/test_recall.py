"""`POST /v1/memories/recall` on both backends: seed 001's layer scenarios, seed 004's US1 and US3
acceptance scenarios (recall called directly, as the `query_memory` tool would), the token
budget, filters, access counting, isolation and bad input."""

from __future__ import annotations

import logging

import pytest

from memsvc.core.errors import EmbeddingFailed, Forbidden, InvalidArgument, InvalidLayer, MissingIdentifier
from memsvc.core.models import Caller
from memsvc.service.memories import PutMemory
from memsvc.service.recall import RecallQuery
from memsvc.service.tenant_config import SettingsPatch
from memsvc.tokens import count_tokens
from tests.conftest import admin, alice, bob

USER = ["user", "alice", "memories"]
AGENT = ["user", "alice", "agents", "helper"]
SESSION = ["user", "alice", "sessions", "s1"]
PROJECT = ["project", "p1"]
COMPANY = ["company"]
ALICE_P1 = {"user_id": "alice", "project_id": "p1"}
# Twenty words, and the same with one more: cosine 20/sqrt(20*21) = 0.976 under the bag-of-words fake.
LONG = ("the quarterly billing export runs every monday at nine and finance reviews the totals "
        "before noon with the regional leads")
LONG_PLUS = LONG + " present"


def remember(backend, namespace, key, content, caller=None, **fields):
    """A typed memory as `remember` writes it: only `content` is indexed."""
    value = {"content": content, "type": "fact", **fields}
    return backend.memories.put(caller or admin(), PutMemory(namespace=namespace, key=key, value=value,
                                                             index_fields=["content"]))


def recall(backend, caller=None, **kw):
    return backend.app.services.recall.recall(caller or admin(), RecallQuery(**kw))


def keys(result):
    return [(r.layer, r.memory.key) for r in result.memories]


def flush(backend):
    return backend.app.accesses.flush()


def without_the_cut(backend):
    """Recall's adaptive cut off (tenant settings), for the tests of what it orders and collapses."""
    backend.admin.put_settings(admin(), SettingsPatch(recall_cut_gap=1.0, recall_cut_margin=1.0))


class TestLayers:
    """Seed 001: precedence merge, 0.95 dedup, threshold, missing identifier."""

    def test_precedence_order_puts_the_specific_layer_first(self, backend):
        remember(backend, COMPANY, "indent", "use spaces for indentation in python code")
        remember(backend, PROJECT, "indent", "use tabs for indentation")
        backend.drain()
        without_the_cut(backend)
        found = recall(backend, query="indentation in python code: tabs or spaces", identifiers=ALICE_P1,
                       order="precedence")
        assert keys(found) == [("project", "indent"), ("company", "indent")]
        # by relevance the company memory, sharing more words with the query, comes first
        assert keys(recall(backend, query="indentation in python code: tabs or spaces",
                           identifiers=ALICE_P1)) == [("company", "indent"), ("project", "indent")]
        assert found.searched_layers == ["user", "project", "company"]

    def test_within_a_layer_ties_go_to_the_higher_score(self, backend):
        remember(backend, PROJECT, "weak", "deploys happen on thursdays")
        remember(backend, PROJECT, "strong", "deploys happen on thursdays after the release review")
        backend.drain()
        without_the_cut(backend)
        found = recall(backend, query="release review deploys thursdays", identifiers=ALICE_P1, order="precedence")
        assert [k for _, k in keys(found)] == ["strong", "weak"]
        assert found.memories[0].relevance > found.memories[1].relevance

    def test_near_duplicates_collapse_to_the_most_specific_layer(self, backend):
        remember(backend, COMPANY, "billing", LONG)
        remember(backend, PROJECT, "billing", LONG_PLUS)
        remember(backend, USER, "billing", LONG, caller=alice())
        remember(backend, PROJECT, "other", "finance reviews the billing totals on friday")
        backend.drain()
        without_the_cut(backend)
        found = recall(backend, query="when does the billing export run", identifiers=ALICE_P1)
        assert ("user", "billing") in keys(found) and ("project", "other") in keys(found)
        assert not {("company", "billing"), ("project", "billing")} & set(keys(found))
        assert found.total_count == 2

    def test_what_is_not_a_near_duplicate_stays(self, backend):
        remember(backend, COMPANY, "indent", "indent python code with four spaces")
        remember(backend, PROJECT, "indent", "indent python code with hard tabs")  # cosine 0.83: another rule
        backend.drain()
        assert len(recall(backend, query="indent python code", identifiers=ALICE_P1).memories) == 2

    def test_min_score_drops_what_is_less_relevant(self, backend):
        remember(backend, USER, "strong", "alice drinks green tea every morning", caller=alice())
        remember(backend, USER, "weak", "green paint dries slowly in winter and summer alike", caller=alice())
        backend.drain()
        without_the_cut(backend)
        everything = recall(backend, alice(), query="green tea in the morning", min_score=0)
        assert [k for _, k in keys(everything)] == ["strong", "weak"]
        cut = everything.memories[0].relevance
        assert [k for _, k in keys(recall(backend, alice(), query="green tea in the morning",
                                          min_score=cut))] == ["strong"]
        assert all(r.relevance >= 0.3 for r in recall(backend, alice(), query="green tea in the morning").memories)

    def test_relevance_is_the_composite_with_decay(self, backend):
        remember(backend, USER, "tea", "alice drinks green tea", caller=alice(), importance=0.9, pinned=True)
        backend.drain()
        backend.clock.advance(30 * 86_400)
        found = recall(backend, alice(), query="alice drinks green tea").memories[0]
        assert found.match == pytest.approx(1.0, abs=1e-3)
        expected = 0.55 * found.match + 0.20 * 0.9 + 0.15 * 0.99 ** 30 + 0.10
        assert found.relevance == pytest.approx(expected, abs=1e-5)
        assert (found.importance, found.pinned) == (0.9, True)

    def test_weights_and_decay_are_tenant_settings(self, backend):
        remember(backend, USER, "tea", "alice drinks green tea", caller=alice(), importance=0.9)
        backend.drain()
        backend.clock.advance(10 * 86_400)
        backend.admin.put_settings(admin(), SettingsPatch(
            recall_weights={"match": 0.5, "importance": 0.0, "recency": 0.5, "pinned": 0.0}, decay_rate_per_day=0.5))
        found = recall(backend, alice(), query="alice drinks green tea", min_score=0).memories[0]
        assert found.relevance == pytest.approx(0.5 * found.match + 0.5 * 0.5 ** 10, abs=1e-5)

    @pytest.mark.parametrize("weights", [{"match": 0.9}, {"match": 1.2, "importance": 0, "recency": 0, "pinned": 0},
                                         {"match": "0.55"}])
    def test_weights_must_sum_to_one(self, backend, weights):
        with pytest.raises(InvalidArgument):
            backend.admin.put_settings(admin(), SettingsPatch(recall_weights=weights))
        assert backend.admin.get_settings(admin()).recall_weights.match == 0.55

    def test_a_layer_without_its_identifiers_is_missing_identifier(self, backend):
        with pytest.raises(MissingIdentifier) as err:
            recall(backend, query="anything", layers=["session"])
        assert err.value.details == {"layer": "session", "missing": ["session_id"]}
        with pytest.raises(InvalidLayer):
            recall(backend, query="anything", layers=["galaxy"])

    def test_the_default_layers_are_those_the_identifiers_give(self, backend):
        found = recall(backend, query="anything", identifiers={"agent_id": "helper", "session_id": "s1"})
        assert found.searched_layers == ["agent", "user", "session", "company"]


class TestAcceptance:
    """Seed 004, US1 (memory-grounded response) and US3 (the memory query tool), recall called directly."""

    def test_us1_a_stored_preference_is_retrieved(self, backend):
        remember(backend, USER, "pm", "User prefers uv over pip for Python dependency management", caller=alice(),
                 type="preference", source="chat")
        remember(backend, USER, "tea", "Alice drinks green tea every morning", caller=alice())
        backend.drain()
        found = recall(backend, alice(), query="Which tool should manage my Python dependency management?")
        assert [r.memory.key for r in found.memories] == ["pm"]
        assert found.memories[0].content == "User prefers uv over pip for Python dependency management"

    def test_us1_several_matches_come_most_relevant_first_within_the_budget(self, backend):
        for n, words in enumerate(["python packaging uses uv", "python packaging avoids pip",
                                   "python packaging pins versions in constraints", "python style uses black"]):
            remember(backend, USER, f"m{n}", f"{words}: " + " ".join(f"note{n}x{i}" for i in range(8)),
                     caller=alice())
        backend.drain()
        without_the_cut(backend)
        found = recall(backend, alice(), query="python packaging", token_budget=100)
        relevances = [r.relevance for r in found.memories]
        assert relevances == sorted(relevances, reverse=True) and len(found.memories) >= 2
        # the one about style, not packaging, shares only "python" (in every memory, so it tells
        # them apart least): it ranks last, and the budget is spent before it
        assert "m3" not in [r.memory.key for r in found.memories]
        assert found.token_count <= 100 and found.truncated
        assert found.total_count == 4 and found.memories[-1].truncated

    def test_us1_nothing_relevant_means_nothing_injected(self, backend):
        remember(backend, USER, "tea", "Alice drinks green tea every morning", caller=alice(), importance=1.0,
                 pinned=True)
        backend.drain()
        found = recall(backend, alice(), query="quantum chromodynamics lecture notes")
        assert found.memories == [] and found.total_count == 0 and not found.truncated and found.token_count == 0
        assert flush(backend) == 0

    def test_us3_items_carry_content_type_relevance_source_and_created(self, backend):
        remember(backend, USER, "db", "we decided on postgres for the orders service", caller=alice(),
                 type="decision", source="meeting-2026-01-05", tags=["db"], category="architecture")
        backend.drain()
        item = recall(backend, alice(), query="which database for the orders service").memories[0]
        assert (item.content, item.type, item.source) == ("we decided on postgres for the orders service",
                                                          "decision", "meeting-2026-01-05")
        assert 0 < item.relevance <= 1 and item.memory.created_at == backend.clock.now()
        assert (item.tags, item.category, item.layer) == (("db",), "architecture", "user")

    def test_us3_injected_content_respects_the_default_budget(self, backend):
        for n in range(12):
            remember(backend, USER, f"log{n}", f"incident {n} service latency timeline: "
                     + " ".join(f"e{n}w{i}" for i in range(100)), caller=alice())
        backend.drain()
        found = recall(backend, alice(), query="service latency incident timeline", limit=50)
        assert found.token_budget == 1000 and found.token_count <= 1000
        assert found.token_count == sum(count_tokens(r.content) for r in found.memories)
        assert found.truncated and found.memories[-1].truncated

    def test_us3_a_failing_embedder_fails_a_semantic_call_and_counts_nothing(self, backend):
        # (hybrid, the default, answers from keywords instead: tests/contract/test_embedder_failure.py)
        remember(backend, USER, "tea", "Alice drinks green tea", caller=alice())
        backend.drain()
        backend.embedder.fail_next = 1
        with pytest.raises(EmbeddingFailed):
            recall(backend, alice(), query="green tea", mode="semantic")
        assert flush(backend) == 0


class TestBudgetAndFilters:
    def test_the_last_memory_is_cut_to_fit(self, backend):
        remember(backend, USER, "long", "tea notes: " + "green tea is brewed at eighty degrees. " * 20,
                 caller=alice())
        backend.drain()
        found = recall(backend, alice(), query="green tea brewed", token_budget=12)
        [item] = found.memories
        assert item.truncated and found.truncated
        assert count_tokens(item.content) == found.token_count <= 12
        assert item.content.startswith("tea notes: green tea")

    def test_types_filter_keeps_only_those_types(self, backend):
        remember(backend, USER, "d", "rollout decision: ship the api on friday", caller=alice(), type="decision")
        remember(backend, USER, "p", "rollout preference: ship the api early", caller=alice(), type="preference")
        backend.memories.put(alice(), PutMemory(namespace=USER, key="plain", value={"text": "rollout of the api"}))
        backend.drain()
        without_the_cut(backend)
        assert {r.memory.key for r in recall(backend, alice(), query="rollout of the api").memories} == {"d", "p", "plain"}
        found = recall(backend, alice(), query="rollout of the api", types=["decision"])
        assert [(r.memory.key, r.type) for r in found.memories] == [("d", "decision")]
        assert {r.memory.key for r in recall(backend, alice(), query="rollout of the api",
                                             types=["fact", "preference"]).memories} == {"p"}

    def test_plain_items_and_session_messages_are_recalled(self, backend):
        backend.memories.put(alice(), PutMemory(namespace=USER, key="plain", value={
            "title": "groceries", "body": "buy oat milk and rye bread", "n": 3}))
        backend.memories.put(alice(), PutMemory(namespace=SESSION + ["messages"], key="0000000001", value={
            "role": "user", "content": "remind me to buy oat milk"}))
        backend.drain()
        found = {r.memory.key: r for r in recall(backend, alice(), query="buy oat milk",
                                                 identifiers={"session_id": "s1"}).memories}
        assert (found["plain"].content, found["plain"].type, found["plain"].importance) == (
            "buy oat milk and rye bread", None, None)
        assert found["plain"].layer == "user"
        assert (found["0000000001"].type, found["0000000001"].layer) == ("message", "session")

    def test_superseded_memories_only_when_asked(self, backend):
        remember(backend, USER, "old", "alice lives in lyon", caller=alice(), superseded_by="new", tags=["superseded"])
        remember(backend, USER, "new", "alice lives in lisbon now", caller=alice())
        backend.drain()
        assert [r.memory.key for r in recall(backend, alice(), query="where does alice live").memories] == ["new"]
        found = recall(backend, alice(), query="where does alice live", include_superseded=True)
        assert {r.memory.key for r in found.memories} == {"old", "new"}

    def test_namespace_prefix_instead_of_layers(self, backend):
        backend.memories.put(alice(), PutMemory(namespace=["user", "alice", "notes"], key="n",
                                                value={"text": "the wifi password is on the fridge"}))
        backend.drain()
        found = recall(backend, alice(), query="wifi password", namespace_prefix=["user", "alice", "notes"])
        assert [(r.memory.key, r.layer) for r in found.memories] == [("n", None)]
        assert found.searched_layers == []


class TestAccessCounting:
    def test_a_recall_counts_an_access_without_a_version_or_an_event(self, backend):
        written = remember(backend, USER, "tea", "alice drinks green tea", caller=alice())
        backend.drain()
        events_before = list(backend.event_log.scan("acme", (), kinds=frozenset({"add", "update"})))
        recall(backend, alice(), query="green tea")
        recall(backend, alice(), query="green tea")
        assert backend.store.get("acme", tuple(USER), "tea").access_count == 0  # nothing on the request path
        assert flush(backend) == 1
        row = backend.store.get("acme", tuple(USER), "tea")
        assert (row.access_count, row.version, row.id) == (2, written.version, written.id)
        assert row.last_accessed_at == backend.clock.now()
        backend.drain()
        assert list(backend.event_log.scan("acme", (), kinds=frozenset({"add", "update"}))) == events_before
        value = backend.memories.get(alice(), USER, "tea").value
        assert (value["access_count"], value["last_accessed_at"]) == (2, "2026-01-01T00:00:00.000000Z")

    def test_a_new_version_keeps_the_counts(self, backend):
        remember(backend, USER, "tea", "alice drinks green tea", caller=alice())
        backend.drain()
        recall(backend, alice(), query="green tea")
        flush(backend)
        remember(backend, USER, "tea", "alice drinks green tea with honey", caller=alice())
        row = backend.store.get("acme", tuple(USER), "tea")
        assert (row.version, row.access_count) == (2, 1)

    def test_a_consolidating_remember_counts_an_access(self, backend):
        """Seed 002: a merge is "access_count + 1, last_accessed_at now", on the same counters."""
        from memsvc.service.remember import RememberMemory

        backend.settings.update("acme", SettingsPatch(semantic_auto_update=0.9, semantic_check_low=0.6))
        first = backend.app.services.remember.remember(alice(), RememberMemory(
            content="The user prefers Python for scripting tasks at work"))
        backend.clock.advance(60)
        second = backend.app.services.remember.remember(alice(), RememberMemory(
            content="The user prefers Python for scripting tasks at work daily"))
        assert second.action == "updated" and second.memory.key == first.memory.key
        flush(backend)
        row = backend.store.get("acme", tuple(USER), first.memory.key)
        assert (row.version, row.access_count, row.last_accessed_at) == (2, 1, backend.clock.now())
        recall(backend, alice(), query="python scripting at work")
        flush(backend)
        assert backend.store.get("acme", tuple(USER), first.memory.key).access_count == 2

    def test_only_returned_memories_count(self, backend):
        remember(backend, USER, "tea", "alice drinks green tea", caller=alice())
        remember(backend, USER, "car", "alice drives a blue car", caller=alice())
        backend.drain()
        recall(backend, alice(), query="green tea")
        flush(backend)
        assert backend.store.get("acme", tuple(USER), "car").access_count == 0
        assert "access_count" not in backend.memories.get(alice(), USER, "car").value  # read back as written


class TestIsolation:
    def test_another_users_layers_are_never_searched(self, backend):
        remember(backend, ["user", "bob", "memories"], "tea", "bob drinks green tea", caller=bob())
        backend.drain()
        assert recall(backend, alice(), query="green tea").memories == []
        with pytest.raises(Forbidden):
            recall(backend, alice(), query="green tea", identifiers={"user_id": "bob"})
        with pytest.raises(Forbidden):
            recall(backend, alice(), query="green tea", namespace_prefix=["user", "bob"])

    def test_another_tenants_layers_are_never_searched(self, backend):
        other = Caller(tenant_id="globex", user_id="root", roles=("admin",))
        remember(backend, COMPANY, "tea", "green tea is served at noon", caller=other)
        remember(backend, ["user", "alice", "memories"], "tea", "green tea is served at noon", caller=other)
        backend.drain()
        assert recall(backend, admin(), query="green tea served at noon", identifiers=ALICE_P1).memories == []
        assert recall(backend, alice(), query="green tea served at noon").memories == []
        assert len(recall(backend, other, query="green tea served at noon", identifiers={"user_id": "alice"}).memories) == 1

    def test_a_forbidden_default_layer_is_skipped_and_a_named_one_refused(self, backend):
        remember(backend, ["project", "p9"], "tea", "green tea for the project")
        remember(backend, USER, "tea", "alice drinks green tea", caller=alice())
        backend.drain()
        found = recall(backend, alice(), query="green tea", identifiers={"project_id": "p9"})
        assert "project" not in found.searched_layers and "user" in found.searched_layers
        assert [r.memory.key for r in found.memories] == ["tea"] and found.memories[0].layer == "user"
        with pytest.raises(Forbidden):
            recall(backend, alice(), query="green tea", identifiers={"project_id": "p9"}, layers=["project"])


class TestBadInput:
    @pytest.mark.parametrize("body", [
        {"query": ""}, {"query": "   "}, {"query": "x", "limit": 0}, {"query": "x", "limit": 51},
        {"query": "x", "token_budget": 0}, {"query": "x", "token_budget": 8001}, {"query": "x", "min_score": 1.5},
        {"query": "x", "types": ["opinion"]}, {"query": "x", "types": []}, {"query": "x", "mode": "fuzzy"},
        {"query": "x", "order": "newest"}, {"query": "x", "layers": []}, {"query": "x", "include_superseded": 1},
        {"query": "x", "identifiers": {"planet": "mars"}}, {"query": "x", "identifiers": {"user_id": ""}},
        {"query": "x", "namespace_prefix": ["user"], "layers": ["user"]},
        {"query": "x", "namespace_prefix": ["user"], "identifiers": {"user_id": "alice"}},
        {"query": "x", "limit": "10"}, {"query": "x", "surprise": True},
    ])
    def test_is_a_400_that_changes_nothing(self, backend, body):
        remember(backend, USER, "x", "x marks the spot", caller=alice())
        backend.drain()
        with pytest.raises(InvalidArgument):
            backend.app.services.recall.recall(alice(), RecallQuery.parse(body))
        assert flush(backend) == 0

    def test_a_long_query_is_cut_not_refused(self, backend):
        remember(backend, USER, "tea", "alice drinks green tea", caller=alice())
        backend.drain()
        found = recall(backend, alice(), query="green tea " + "x" * 20_000)
        assert [r.memory.key for r in found.memories] == ["tea"]


def test_each_recall_is_logged_without_query_or_content(backend, caplog):
    remember(backend, USER, "secret", "the vault code is swordfish", caller=alice())
    backend.drain()
    recall_log = logging.getLogger("memsvc.service.recall")
    # Listened to directly: the AWS backend's Lambda functions give the `memsvc` loggers
    # Powertools' handler and stop them propagating (functions.observability).
    recall_log.addHandler(caplog.handler)
    try:
        with caplog.at_level(logging.INFO, logger="memsvc.service.recall"):
            backend.app.services.recall.recall(alice(), RecallQuery(query="what is the vault code"),
                                               request_id="req-42")
    finally:
        recall_log.removeHandler(caplog.handler)
    # Counted once, whether it came by propagation, by the handler or both.
    [record] = list(dict.fromkeys(r for r in caplog.records if r.name == "memsvc.service.recall"))
    assert (record.request_id, record.result_count) == ("req-42", 1)
    assert len(record.query_sha256) == 16 and record.latency_ms > 0
    text = " ".join(str(v) for v in record.__dict__.values())
    assert "vault" not in text and "swordfish" not in text  # (digits could occur in a thread id)


@pytest.mark.slow
def test_us1_in_the_seeds_own_words_with_minilm(tmp_path, clock):
    """Seed 004 US1 with the real local embedder (the fake above matches words, not meaning):
    the preference is found for the seed's question, and an unrelated question injects nothing,
    although the memory is important, pinned and fresh (`recall_min_match`)."""
    from memsvc.bootstrap import build_local

    app = build_local(tmp_path / "data", clock=clock, start_workers=False)
    try:
        app.services.memories.put(alice(), PutMemory(namespace=USER, key="pm", index_fields=["content"], value={
            "content": "User prefers uv over pip for Python dependency management", "type": "preference",
            "importance": 1.0, "pinned": True}))
        app.workers.run_cycle("indexer")
        found = app.services.recall.recall(alice(), RecallQuery(
            query="What package manager should I use for my Python project?"))
        assert [r.memory.key for r in found.memories] == ["pm"]
        nothing = app.services.recall.recall(alice(), RecallQuery(query="What is the weather like on Mars?"))
        assert nothing.memories == [] and nothing.total_count == 0
    finally:
        app.close()
