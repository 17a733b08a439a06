"""`POST /v1/memories/recall` with `explain` on both backends: each memory's relevance is the
weighted sum of the parts it reports, and `metadata.cut` names what was left out and why."""

from __future__ import annotations

import dataclasses

import pytest

from memsvc.api.schemas import RecallOut
from memsvc.service.recall import MAX_CUT
from memsvc.service.tenant_config import SettingsPatch
from memsvc.tokens import count_tokens
from tests.conftest import admin, alice, bob
from tests.contract.test_recall import ALICE_P1, LONG, LONG_PLUS, PROJECT, USER, recall, remember, without_the_cut

TEA = "alice drinks green tea every morning"


def reasons(result) -> dict[str, str]:
    return {c.memory.key: c.reason for c in result.cut}


def test_relevance_is_the_weighted_sum_of_the_parts_it_reports(backend):
    remember(backend, USER, "tea", TEA, caller=alice(), importance=0.9, pinned=True)
    backend.drain()
    backend.clock.advance(30 * 86_400)
    backend.admin.put_settings(admin(), SettingsPatch(
        recall_weights={"match": 0.4, "importance": 0.3, "recency": 0.2, "pinned": 0.1}, decay_rate_per_day=0.02))
    found = recall(backend, alice(), query="alice drinks green tea", explain=True).memories[0]
    e = found.explain
    assert e.weights == {"match": 0.4, "importance": 0.3, "recency": 0.2, "pinned": 0.1}
    assert (e.importance, e.pinned) == (0.9, 1)
    assert e.recency == pytest.approx(0.98 ** 30)
    assert e.match == pytest.approx(found.match, abs=1e-6) and e.match == max(0.0, e.fused)
    weighted = sum(e.weights[part] * value for part, value in
                   (("match", e.match), ("importance", e.importance), ("recency", e.recency), ("pinned", e.pinned)))
    assert e.relevance == found.relevance == pytest.approx(weighted, abs=1e-6)
    assert e.semantic is not None and e.keyword is not None  # hybrid: both retrievers found it


def test_a_keyword_only_recall_has_no_semantic_part(backend):
    remember(backend, USER, "tea", TEA, caller=alice())
    backend.drain()
    e = recall(backend, alice(), query="green tea", mode="keyword", min_score=0, explain=True).memories[0].explain
    assert e.semantic is None and e.keyword > 0


def test_an_item_under_min_score_and_one_over_limit_are_cut_with_their_reason(backend):
    remember(backend, USER, "strong", TEA, caller=alice())
    remember(backend, USER, "also", "alice drinks green tea every morning with honey", caller=alice())
    remember(backend, USER, "weak", "green paint dries slowly in winter and summer alike", caller=alice())
    backend.drain()
    without_the_cut(backend)
    everything = recall(backend, alice(), query="green tea in the morning", min_score=0)
    by_key = {r.memory.key: r.relevance for r in everything.memories}
    assert by_key["weak"] < by_key["also"]
    found = recall(backend, alice(), query="green tea in the morning", limit=1,
                   min_score=(by_key["weak"] + by_key["also"]) / 2, explain=True)
    assert [r.memory.key for r in found.memories] == ["strong"]
    assert reasons(found) == {"also": "over_limit", "weak": "below_min_score"}
    weak = next(c for c in found.cut if c.memory.key == "weak")
    assert weak.relevance == pytest.approx(by_key["weak"], abs=1e-6) and weak.layer == "user"


def test_what_the_token_budget_leaves_out_is_cut_for_it(backend):
    remember(backend, USER, "first", TEA, caller=alice())
    remember(backend, USER, "second", "alice drinks green tea every morning with honey", caller=alice())
    backend.drain()
    without_the_cut(backend)
    full = recall(backend, alice(), query="alice drinks green tea every morning", min_score=0)
    first = full.memories[0]
    found = recall(backend, alice(), query="alice drinks green tea every morning", min_score=0,
                   token_budget=count_tokens(first.content), explain=True)
    assert [r.memory.key for r in found.memories] == [first.memory.key]
    second = next(r.memory.key for r in full.memories[1:])
    assert reasons(found) == {second: "token_budget"}


def test_a_collapsed_near_duplicate_and_a_weak_match_are_cut_with_their_reason(backend):
    remember(backend, PROJECT, "billing", LONG_PLUS)
    remember(backend, USER, "billing", LONG, caller=alice())
    remember(backend, USER, "far", "penguins waddle on the export ice", caller=alice())
    backend.drain()
    without_the_cut(backend)
    backend.admin.put_settings(admin(), SettingsPatch(recall_min_match=0.5))
    found = recall(backend, query="when does the billing export run", identifiers=ALICE_P1, min_score=0,
                   explain=True)
    assert [(r.layer, r.memory.key) for r in found.memories] == [("user", "billing")]
    cut = {(c.layer, c.memory.key): c for c in found.cut}
    assert cut[("project", "billing")].reason == "duplicate"
    far = cut[("user", "far")]
    assert far.reason == "below_min_match" and far.relevance is None and 0 < far.match < 0.5


def test_the_cut_lists_at_most_its_cap_most_relevant_first(backend, monkeypatch):
    monkeypatch.setattr("memsvc.service.recall.MAX_CUT", 3)
    for n in range(6):
        remember(backend, USER, f"tea{n}", f"alice drinks green tea number {n}", caller=alice())
    backend.drain()
    without_the_cut(backend)
    found = recall(backend, alice(), query="alice drinks green tea", limit=1, min_score=0, explain=True)
    assert len(found.cut) == 3 and MAX_CUT == 50
    relevances = [c.relevance for c in found.cut]
    assert relevances == sorted(relevances, reverse=True)
    assert {c.reason for c in found.cut} == {"over_limit"}


def test_without_explain_the_answer_is_as_before(backend):
    remember(backend, USER, "tea", TEA, caller=alice())
    remember(backend, USER, "weak", "green paint dries slowly in winter and summer alike", caller=alice())
    backend.drain()
    plain = recall(backend, alice(), query="green tea in the morning")
    explained = recall(backend, alice(), query="green tea in the morning", explain=True)
    assert plain.cut is None and all(r.explain is None for r in plain.memories)
    plain_json = RecallOut.of(plain).model_dump(mode="json")
    assert "cut" not in plain_json["metadata"] and all("explain" not in m for m in plain_json["memories"])
    stripped = dataclasses.replace(explained, cut=None, memories=[dataclasses.replace(r, explain=None)
                                                                  for r in explained.memories])
    timing = {"query_embedding_ms": 0, "retrieval_ms": 0}
    assert ({**RecallOut.of(stripped).model_dump(mode="json"), "metadata": None},
            {**RecallOut.of(stripped).model_dump(mode="json")["metadata"], **timing}) == (
        {**plain_json, "metadata": None}, {**plain_json["metadata"], **timing})


def test_the_cut_names_only_memories_the_caller_may_recall(backend):
    remember(backend, USER, "tea", TEA, caller=alice())
    remember(backend, USER, "honey", "alice drinks green tea every morning with honey", caller=alice())
    remember(backend, USER, "paint", "green paint dries slowly in winter and summer alike", caller=alice())
    remember(backend, ["user", "bob", "memories"], "bobs", "bob drinks green tea every morning", caller=bob())
    remember(backend, USER, "theirs", "alice drinks green tea every morning in globex", caller=admin("globex"))
    backend.drain()
    without_the_cut(backend)
    found = recall(backend, alice(), query="alice drinks green tea every morning", limit=1, min_score=0,
                   explain=True)
    assert len(found.memories) == 1 and len(found.cut) == 2
    named = {r.memory.key for r in found.memories} | {c.memory.key for c in found.cut}
    assert named == {"tea", "honey", "paint"}  # never bob's, never another tenant's of the same namespace
    assert all(tuple(c.memory.namespace) == tuple(USER) for c in found.cut)
