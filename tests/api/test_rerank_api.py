"""Search's rerank step over HTTP: `memsvc serve` started with `MEMSVC_RERANK_URL` naming a fake
TEI endpoint on 127.0.0.1 (`tests.fakes.rerank_server`), two tenants holding the same memories,
one of them with `rerank` on. Nothing leaves 127.0.0.1."""

from __future__ import annotations

import re

import httpx
import pytest

from memsvc.core.errors import InvalidArgument
from memsvc.service.tenant_config import RerankSetting, SettingsPatch
from tests.api.helpers import assert_error, client_for, keys_of, put_ok, search_ok, sync_index, unique_tenant
from tests.conftest import admin as admin_of
from tests.conftest import start_server, stop_server
from tests.fakes.rerank_server import FakeRerankServer, shared_words

QUERY = "when does the harbour ferry leave"
NOTES = {  # the zebra note shares the fewest words with the query, and the fake reranker loves it
    "timetable": "The harbour ferry leaves at noon; the ferry timetable is posted at the harbour.",
    "tickets": "Ferry tickets for the harbour crossing are sold on board.",
    "zebra": "A zebra crossing is painted near the harbour.",
    "weather": "Storms can delay when the ferry leaves.",
}


def zebra_first(query: str, text: str) -> float:
    return 1.0 if "zebra" in text else shared_words(query, text) / 2


@pytest.fixture(scope="module")
def fake_reranker():
    with FakeRerankServer("tei", score=zebra_first) as fake:
        yield fake


@pytest.fixture(scope="module")
def server(fake_reranker, tmp_path_factory):
    with pytest.MonkeyPatch.context() as env:
        env.setenv("MEMSVC_RERANK_URL", fake_reranker.url)
        started = start_server(tmp_path_factory.mktemp("rerank") / "data", "local")
    yield started
    stop_server(started)


@pytest.fixture(autouse=True)
def healthy_reranker(fake_reranker):
    fake_reranker.fail_with, fake_reranker.garbage = None, False


class Tenant:
    def __init__(self, server, rerank: dict | None) -> None:
        self.name = unique_tenant("rr")
        self.admin = client_for(server, "root", tenant=self.name, roles=["admin"])
        self.user = client_for(server, "alice", tenant=self.name)
        for key, text in NOTES.items():
            put_ok(self.user, ["user", "alice"], key, {"text": text})
        sync_index(self.admin)
        if rerank is not None:
            r = self.admin.put("/admin/v1/memories/settings", json={"rerank": rerank})
            assert r.status_code == 200, r.text

    def search(self, **body) -> list[dict]:
        return search_ok(self.user, ["user", "alice"], query=QUERY, **body)


@pytest.fixture(scope="module")
def reranking(server):
    return Tenant(server, {"enabled": True, "top_n": 10})


@pytest.fixture(scope="module")
def plain(server):
    return Tenant(server, None)


def reranks(fake: FakeRerankServer) -> int:
    """Rerank calls answered (the server's first call also tries Cohere's shape, which TEI refuses)."""
    return sum("texts" in r for r in fake.requests)


def rerank_failures(server, tenant: str) -> float:
    text = httpx.get(server.url + "/metrics").text
    found = re.search(r'^memory_search_rerank_failed_total\{tenant="%s"\} (\S+)$' % tenant, text, re.M)
    return float(found.group(1)) if found else 0.0


def test_rerank_is_off_by_default(plain):
    r = plain.admin.get("/admin/v1/memories/settings")
    assert r.json()["rerank"] == {"enabled": False, "model_id": None, "top_n": 30}


def test_the_reranker_orders_the_fused_candidates_and_score_stays_fused(reranking, plain, fake_reranker):
    fused = plain.search()
    before = reranks(fake_reranker)
    reranked = reranking.search()
    assert reranks(fake_reranker) == before + 1
    sent = fake_reranker.requests[-1]
    assert sent["query"] == QUERY and sorted(sent["texts"]) == sorted(NOTES.values())
    assert keys_of(fused)[0] != "zebra"
    # Same memories, so the same fused ranking; the reranker's order, its ties left in fused order.
    expected = sorted(keys_of(fused), key=lambda k: -zebra_first(QUERY, NOTES[k]))
    assert keys_of(reranked) == expected
    fused_scores = {i["key"]: i["score"] for i in fused}
    for item in reranked:
        assert item["score"] == pytest.approx(fused_scores[item["key"]], abs=1e-6)
        assert item["scores"]["rerank"] == pytest.approx(zebra_first(QUERY, NOTES[item["key"]]), abs=1e-6)
    assert all(i["scores"]["rerank"] is None for i in fused)


def test_pages_of_a_reranked_query_agree(reranking):
    whole = keys_of(reranking.search(limit=4))
    assert keys_of(reranking.search(limit=2)) + keys_of(reranking.search(limit=2, offset=2)) == whole


def test_a_tenants_setting_reranks_only_its_own_searches(plain, fake_reranker):
    before = len(fake_reranker.requests)
    plain.search()
    plain.search(mode="keyword")
    assert len(fake_reranker.requests) == before


def test_semantic_mode_keeps_the_cosine_order(reranking, fake_reranker):
    before = len(fake_reranker.requests)
    found = reranking.search(mode="semantic")
    assert len(fake_reranker.requests) == before
    assert [i["score"] for i in found] == sorted((i["score"] for i in found), reverse=True)


@pytest.mark.parametrize("failure", ["status", "garbage"])
def test_a_failing_reranker_leaves_the_fused_order_and_is_counted(server, reranking, plain, fake_reranker, failure):
    if failure == "status":
        fake_reranker.fail_with = 500
    else:
        fake_reranker.garbage = True
    failures = rerank_failures(server, reranking.name)
    found = reranking.search()
    assert keys_of(found) == keys_of(plain.search())
    assert all(i["scores"]["rerank"] is None for i in found)
    assert rerank_failures(server, reranking.name) == failures + 1
    assert rerank_failures(server, plain.name) == 0


def test_a_page_past_the_reranked_window_makes_no_call(reranking, fake_reranker):
    before = reranks(fake_reranker)
    r = reranking.user.post("/v1/memories/search", json={"namespace_prefix": ["user", "alice"], "query": QUERY,
                                                         "offset": 10, "limit": 5})  # top_n is 10
    assert r.status_code == 200, r.text
    assert reranks(fake_reranker) == before


def test_recall_does_not_rerank(reranking, fake_reranker):
    # Recall ranks by its own relevance; a reranker call per layer would only hold its threads.
    before = reranks(fake_reranker)
    r = reranking.user.post("/v1/memories/recall", json={"query": QUERY, "namespace_prefix": ["user", "alice"]})
    assert r.status_code == 200, r.text
    assert r.json()["memories"]
    assert reranks(fake_reranker) == before


@pytest.mark.parametrize("rerank", [
    {"enabled": "yes"}, {"enabled": True, "top_n": 1}, {"enabled": True, "top_n": 101},
    {"enabled": True, "model_id": ""}, {"enabled": True, "model_id": "a model"}, {"enabled": True, "url": "x"}, None,
])
def test_a_bad_rerank_setting_is_a_400(reranking, rerank):
    assert_error(reranking.admin.put("/admin/v1/memories/settings", json={"rerank": rerank}), 400)


def test_enabling_rerank_without_an_endpoint_is_refused(local_app):
    with pytest.raises(InvalidArgument) as refused:
        local_app.services.admin.put_settings(admin_of(), SettingsPatch(rerank=RerankSetting(enabled=True)))
    assert refused.value.details == {"field": "rerank"} and "MEMSVC_RERANK_URL" in refused.value.message
    # Turning it off is always allowed.
    local_app.services.admin.put_settings(admin_of(), SettingsPatch(rerank=RerankSetting(enabled=False)))
