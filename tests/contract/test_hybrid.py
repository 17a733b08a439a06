"""Keyword and hybrid search over each backend's keyword index (blind terms, BM25)."""

from __future__ import annotations

import pytest

from memsvc.core.errors import InvalidArgument
from memsvc.core.models import Caller
from memsvc.service.memories import PutMemory
from memsvc.service.search import SearchQuery
from memsvc.service.tenant_config import SettingsPatch
from tests.conftest import admin, alice, bob

NS = ["user", "alice", "notes"]


def put(backend, key, text, caller=None, namespace=None, **kw):
    return backend.memories.put(caller or alice(), PutMemory(namespace=namespace or NS, key=key, value={"text": text},
                                                             **kw))


def search(backend, caller=None, **kw):
    kw.setdefault("namespace_prefix", ["user", "alice"])
    return backend.search.search(caller or alice(), SearchQuery(**kw))


def keys(found):
    return [m.key for m in found]


@pytest.fixture
def notes(backend):
    put(backend, "inc", "Incident INC-20931: the billing export failed on 2026-03-14")
    put(backend, "py", "Python uses indentation for blocks")
    put(backend, "tea", "Alice drinks green tea every morning")
    backend.drain()
    return backend


class TestModes:
    def test_keyword_mode_finds_an_exact_code_and_reports_bm25(self, notes):
        found = search(notes, query="what happened with INC-20931?", mode="keyword")
        assert keys(found) == ["inc"]
        assert found[0].scores["semantic"] is None and found[0].scores["keyword"] > 0
        assert 0 < found[0].score <= 1  # the keyword match: BM25 over the query's full-match weight

    def test_keyword_mode_stems_and_ignores_case(self, notes):
        assert keys(search(notes, query="DRINKING teas", mode="keyword")) == ["tea"]

    def test_keyword_mode_returns_nothing_without_a_shared_term(self, notes):
        assert search(notes, query="quantum chromodynamics", mode="keyword") == []

    def test_a_query_s_function_words_match_nothing(self, notes):
        put(notes, "chat", "What did they do about it? Nobody knows what they did.")
        notes.drain()
        assert keys(search(notes, query="What did Alice drink?", mode="keyword")) == ["tea"]

    def test_a_memory_s_length_does_not_lower_its_keyword_score(self, backend):
        put(backend, "short", "walrus")
        put(backend, "long", "a walrus " + " ".join(f"filler{n}" for n in range(40)))
        backend.drain()
        found = search(backend, query="walrus", mode="keyword")
        assert sorted(keys(found)) == ["long", "short"]
        assert found[0].score == pytest.approx(found[1].score) == pytest.approx(1.0)

    def test_hybrid_is_the_default_and_carries_both_signals(self, notes):
        found = search(notes, query="INC-20931 billing export")
        assert found[0].key == "inc"
        assert found[0].scores["semantic"] is not None and found[0].scores["keyword"] is not None
        assert 0 <= found[0].score <= 1
        assert found[0].score >= max(m.score for m in found)

    def test_semantic_mode_scores_are_cosines_without_keyword(self, notes):
        found = search(notes, query="green tea", mode="semantic")
        assert all(m.scores["keyword"] is None and m.score == m.scores["semantic"] for m in found)

    def test_min_score_drops_weak_matches(self, notes):
        everything = search(notes, query="INC-20931 billing export", limit=10)
        assert len(everything) == 3
        strong = search(notes, query="INC-20931 billing export", min_score=everything[0].score)
        assert keys(strong) == ["inc"]

    @pytest.mark.parametrize("field,value", [("mode", "keyword"), ("min_score", 0.5)])
    def test_mode_and_min_score_need_a_query(self, notes, field, value):
        with pytest.raises(InvalidArgument) as err:
            search(notes, **{field: value})
        assert err.value.details["field"] == field

    @pytest.mark.parametrize("bad", [{"mode": "fuzzy"}, {"min_score": 2.0}, {"min_score": "0.3"}, {"min_score": True}])
    def test_bad_mode_or_min_score_is_refused(self, bad):
        with pytest.raises(InvalidArgument):
            SearchQuery(namespace_prefix=[], query="x", **bad)

    def test_offset_pages_through_hybrid_results(self, backend):
        for n in range(6):
            put(backend, f"k{n}", f"ledger entry number {n} for ledger audit")
        backend.drain()
        whole = keys(search(backend, query="ledger audit", limit=6))
        pages = keys(search(backend, query="ledger audit", limit=3)) + keys(search(backend, query="ledger audit",
                                                                                   limit=3, offset=3))
        assert sorted(whole) == [f"k{n}" for n in range(6)] and pages == whole

    @pytest.mark.parametrize("mode", ["hybrid", "semantic", "keyword"])
    def test_a_ranked_page_decrypts_only_what_it_returns(self, backend, mode):
        for n in range(30):
            backend.memories.put(alice(), PutMemory(namespace=NS, key=f"k{n}", index_fields=["text"],
                                                    value={"text": f"ledger entry number {n} for ledger audit", "n": n}))
        backend.drain()
        whole = search(backend, query="ledger audit", mode=mode, limit=30)
        opened = []
        real = backend.sealer.open_value
        backend.sealer.open_value = lambda item: opened.append(item.key) or real(item)
        try:
            page = search(backend, query="ledger audit", mode=mode, limit=5, offset=2)
            assert keys(page) == keys(whole)[2:7]
            assert sorted(opened) == sorted(keys(whole)[:7])  # a page of 5 after 2: the best 7, no other candidate
            opened.clear()
            # A range on the value is checked in rank order, until the page is full.
            late = search(backend, query="ledger audit", mode=mode, limit=3, filter={"n": {"gte": 15}})
            passing = [k for k in keys(whole) if int(k[1:]) >= 15][:3]
            assert keys(late) == passing
            assert sorted(opened) == sorted(keys(whole)[:keys(whole).index(passing[-1]) + 1])
        finally:
            backend.sealer.open_value = real


class TestIndexLifecycle:
    def keyword_ids(self, backend, tenant="acme"):
        return backend.app.keywords.memory_ids(tenant)

    def test_update_retires_the_old_version_and_delete_removes_it(self, backend):
        first = put(backend, "k", "the walrus project")
        backend.drain()
        assert self.keyword_ids(backend) == {first.id}
        second = put(backend, "k", "the narwhal project")
        backend.drain()
        assert self.keyword_ids(backend) == {second.id}
        assert search(backend, query="walrus", mode="keyword") == []
        assert keys(search(backend, query="narwhal", mode="keyword")) == ["k"]
        backend.memories.delete(alice(), NS, "k")
        backend.drain()
        assert self.keyword_ids(backend) == set()
        assert search(backend, query="narwhal", mode="keyword") == []

    def test_expiry_removes_the_keyword_document(self, backend, clock):
        put(backend, "k", "ephemeral walrus", ttl_seconds=60)
        backend.drain()
        assert len(self.keyword_ids(backend)) == 1
        clock.advance(61)
        assert search(backend, query="walrus", mode="keyword") == []  # hidden from the moment it expires
        backend.sweep()
        backend.drain()
        assert self.keyword_ids(backend) == set()

    def test_replayed_changes_index_once(self, backend):
        put(backend, "k", "walrus")
        changes = backend.changes()
        backend.indexer.apply(changes)
        backend.indexer.apply(changes)
        found = search(backend, query="walrus", mode="keyword")
        assert keys(found) == ["k"] and len(self.keyword_ids(backend)) == 1

    def test_index_holds_no_plaintext(self, backend):
        put(backend, "k", "xylophonist zanzibar quixotic")
        backend.drain()
        assert keys(search(backend, query="zanzibar", mode="keyword")) == ["k"]
        dump = backend.keyword_dump()
        for word in ("xylophonist", "zanzibar", "quixot"):
            assert word not in dump


class TestWalls:
    def test_other_users_and_tenants_are_never_keyword_hits(self, backend):
        put(backend, "mine", "walrus tusks")
        put(backend, "theirs", "walrus tusks", caller=bob(), namespace=["user", "bob", "notes"])
        other_tenant = Caller(tenant_id="globex", user_id="alice")
        put(backend, "far", "walrus tusks", caller=other_tenant)
        backend.drain()
        for prefix in ([], ["user"], ["user", "alice"]):
            assert keys(search(backend, namespace_prefix=prefix, query="walrus", mode="keyword")) == ["mine"]
        assert keys(search(backend, caller=admin("globex"), namespace_prefix=[], query="walrus",
                           mode="keyword")) == ["far"]

    def test_scores_reveal_nothing_about_other_users_memories(self, backend):
        put(backend, "mine", "walrus tusks ivory")
        put(backend, "other", "nothing in common")
        backend.drain()
        before = search(backend, query="walrus", mode="keyword")[0].scores["keyword"]
        for n in range(5):
            put(backend, f"b{n}", "walrus walrus", caller=bob(), namespace=["user", "bob", "notes"])
        backend.drain()
        after = search(backend, query="walrus", mode="keyword")[0].scores["keyword"]
        assert after == pytest.approx(before, abs=1e-9)


class TestSetting:
    def test_turning_keyword_indexing_off_purges_and_stops_it(self, backend):
        put(backend, "k", "walrus")
        backend.drain()
        settings = backend.admin.put_settings(admin(), SettingsPatch(keyword_index=False))
        assert settings.keyword_index is False
        assert backend.app.keywords.memory_ids("acme") == set()
        with pytest.raises(InvalidArgument) as err:
            search(backend, query="walrus", mode="keyword")
        assert err.value.details["field"] == "mode"
        put(backend, "k2", "walrus again")
        backend.drain()
        assert backend.app.keywords.memory_ids("acme") == set()
        assert {m.key for m in search(backend, query="walrus")} == {"k", "k2"}  # hybrid falls back to meaning
        backend.admin.put_settings(admin(), SettingsPatch(keyword_index=True))
        put(backend, "k3", "walrus third")
        backend.drain()
        assert keys(search(backend, query="third", mode="keyword")) == ["k3"]

    def test_only_admins_change_it(self, backend):
        from memsvc.core.errors import Forbidden

        with pytest.raises(Forbidden):
            backend.admin.put_settings(alice(), SettingsPatch(keyword_index=False))
        assert backend.admin.get_settings(admin()).keyword_index is True
