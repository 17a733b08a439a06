"""Seed 004's failure table: when the embedding model fails or times out, hybrid search and recall
answer from the keyword index alone, say so (`degraded`), count it and log it; `mode: semantic`
fails (503); `mode: keyword` never embeds. On both backends, with each one's own embedder failing:
locally the in-process model (the hash fake standing in for MiniLM) raising, or hanging; on AWS
the real `TitanEmbedder` on the Titan fake, answering an error, timing out or throttling."""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass

import pytest

from memsvc.core.errors import EmbeddingFailed, RateLimited
from memsvc.service.memories import PutMemory
from memsvc.service.recall import RecallQuery
from memsvc.service.search import DEGRADED_METRIC, SearchQuery
from memsvc.service.tenant_config import SettingsPatch
from tests.conftest import admin, alice, bob, local_data_dir
from tests.contract.conftest import Backend
from tests.fakes.aws_stack import aws_stack
from tests.fakes.embedder import HashEmbedder

NS = ["user", "alice", "notes"]
ALWAYS = 10**6  # failures injected: every request until `recover`


@dataclass
class Rig:
    backend: Backend
    fail: Callable[[], None]  # the embedder fails every request from now on
    recover: Callable[[], None]
    requests: Callable[[], int]  # embedding requests the model has had so far
    semantic_error: type[Exception]  # what a semantic query fails with

    @property
    def services(self):
        return self.backend.app.services


@pytest.fixture(params=["local", "aws-error", "aws-timeout", "aws-throttle"])
def rig(request, tmp_path, clock):
    if request.param == "local":
        from memsvc.bootstrap import build_local

        embedder = HashEmbedder()
        app = build_local(local_data_dir(tmp_path), embedder=embedder, clock=clock, start_workers=False)

        def fail_local():
            embedder.fail_next = ALWAYS

        def recover_local():
            embedder.fail_next = 0

        yield Rig(Backend("local", app, app.store, app.vectors, embedder, clock, data_dir=app.data_dir, local=app),
                  fail_local, recover_local, lambda: len(embedder.calls), EmbeddingFailed)
        app.close()
        return
    failure = request.param.removeprefix("aws-")
    with aws_stack(dimension=256, embedder=None, clock=clock) as stack:  # the real TitanEmbedder
        stack.app.embedder.sleep = lambda seconds: None  # its backoff between retries, without waiting
        knob = {"error": "fail_next", "timeout": "timeout_next", "throttle": "throttle_next"}[failure]
        yield Rig(Backend("aws", stack.app, stack.app.store, stack.app.vectors, stack.app.embedder, clock, aws=stack),
                  lambda: setattr(stack.titan, knob, ALWAYS), lambda: setattr(stack.titan, knob, 0),
                  lambda: len(stack.titan.calls), RateLimited if failure == "throttle" else EmbeddingFailed)


def put(rig, key, text, caller=None, namespace=None):
    rig.services.memories.put(caller or alice(), PutMemory(namespace=namespace or NS, key=key, value={"text": text}))


def search(rig, caller=None, request_id="", **kw):
    kw.setdefault("namespace_prefix", ["user", "alice"])
    return rig.services.search.answer(caller or alice(), SearchQuery(**kw), request_id=request_id)


def recall(rig, caller=None, request_id="", **kw):
    return rig.services.recall.recall(caller or alice(), RecallQuery(**kw), request_id=request_id)


@pytest.fixture
def notes(rig):
    put(rig, "inc", "Incident INC-20931: the billing export failed on 2026-03-14")
    put(rig, "py", "Python uses indentation for blocks")
    put(rig, "tea", "Alice drinks green tea every morning")
    put(rig, "bobs", "Bob's billing export notes", caller=bob(), namespace=["user", "bob", "notes"])
    rig.backend.drain()
    return rig


class TestSearch:
    def test_hybrid_answers_from_the_keyword_index_and_says_so(self, notes):
        keyword = search(notes, query="billing export incident", mode="keyword")
        notes.fail()
        found = search(notes, query="billing export incident")
        assert found.degraded and not keyword.degraded
        assert [m.key for m in found.memories] == [m.key for m in keyword.memories] == ["inc"]
        [memory] = found.memories
        assert memory.scores == {"semantic": None, "keyword": keyword.memories[0].scores["keyword"]}
        assert 0 < memory.score <= 1

    def test_semantic_mode_fails(self, notes):
        notes.fail()
        with pytest.raises(notes.semantic_error) as failed:
            search(notes, query="billing export incident", mode="semantic")
        assert failed.value.status == (429 if notes.semantic_error is RateLimited else 503) and failed.value.retryable

    def test_keyword_mode_never_embeds(self, notes):
        notes.fail()
        before = notes.requests()
        found = search(notes, query="green tea", mode="keyword")
        assert [m.key for m in found.memories] == ["tea"] and not found.degraded
        assert notes.requests() == before

    def test_hybrid_without_a_keyword_index_cannot_degrade(self, notes):
        notes.services.admin.put_settings(admin(), SettingsPatch(keyword_index=False))
        notes.fail()
        with pytest.raises(notes.semantic_error):
            search(notes, query="billing export incident")

    def test_a_filter_only_search_never_embeds_nor_degrades(self, notes):
        notes.fail()
        found = search(notes, filter={"text": "Python uses indentation for blocks"})
        assert [m.key for m in found.memories] == ["py"] and not found.degraded

    def test_the_next_query_embeds_again_once_the_model_is_back(self, notes):
        notes.fail()
        assert search(notes, query="billing export incident").degraded
        notes.recover()
        found = search(notes, query="billing export incident")
        assert not found.degraded and found.memories[0].key == "inc"
        assert found.memories[0].scores["semantic"] is not None

    def test_a_degraded_answer_never_holds_another_users_memory(self, notes):
        notes.fail()
        found = search(notes, namespace_prefix=[], query="billing export notes")
        assert found.degraded and [m.key for m in found.memories] == ["inc"]  # not bob's, which matches better
        assert [m.key for m in search(notes, bob(), namespace_prefix=[], query="billing export notes").memories] \
            == ["bobs"]


class TestRecall:
    @pytest.fixture
    def memories(self, rig):
        for key, content in (("tea", "Alice drinks green tea every morning"),
                             ("deploy", "deploys run on friday afternoon")):
            rig.services.memories.put(alice(), PutMemory(namespace=["user", "alice", "memories"], key=key,
                                                         value={"content": content, "type": "fact"},
                                                         index_fields=["content"]))
        rig.services.memories.put(bob(), PutMemory(namespace=["user", "bob", "memories"], key="bobs-tea",
                                                   value={"content": "Bob drinks green tea", "type": "fact"},
                                                   index_fields=["content"]))
        rig.backend.drain()
        return rig

    def test_recall_finds_the_keyword_matches_and_says_it_is_degraded(self, memories):
        memories.fail()
        found = recall(memories, query="green tea")
        assert found.degraded
        assert [(r.memory.namespace[1], r.memory.key) for r in found.memories] == [("alice", "tea")]
        assert found.memories[0].match > 0

    def test_semantic_recall_fails(self, memories):
        memories.fail()
        with pytest.raises(memories.semantic_error):
            recall(memories, query="green tea", mode="semantic")

    def test_recall_recovers(self, memories):
        memories.fail()
        assert recall(memories, query="green tea").degraded
        memories.recover()
        found = recall(memories, query="green tea")
        assert not found.degraded and [r.memory.key for r in found.memories] == ["tea"]


def test_each_degraded_answer_is_counted_and_logged_without_the_query(notes, caplog, capsys):
    notes.fail()
    with caplog.at_level(logging.WARNING, logger="memsvc.service.search"):
        search(notes, query="billing export zanzibar", request_id="req-search")
        recall(notes, query="billing export zanzibar", request_id="req-recall")
    warnings = [r for r in caplog.records if r.name == "memsvc.service.search"]
    assert [(r.request_id, r.tenant, r.operation) for r in warnings] == [("req-search", "acme", "search"),
                                                                         ("req-recall", "acme", "recall")]
    code = "RATE_LIMITED" if notes.semantic_error is RateLimited else "EMBEDDING_FAILED"
    assert {r.code for r in warnings} == {code}
    logged = "\n".join(r.getMessage() + json.dumps(r.__dict__, default=str) for r in caplog.records)
    assert "zanzibar" not in logged
    assert "injected" not in logged and "Bedrock" not in logged  # nor the model's own words
    if notes.backend.local is not None:
        text = notes.services.metrics.exposition()[0].decode()
        assert 'memory_search_degraded_total{tenant="acme"} 2.0' in text
        return
    emf = [json.loads(line) for line in capsys.readouterr().out.splitlines() if line.startswith("{")]
    counted = [doc[DEGRADED_METRIC] for doc in emf if DEGRADED_METRIC in doc and doc.get("tenant") == "acme"]
    assert counted == [[1.0], [1.0]]


class _HangingEmbedder(HashEmbedder):
    """A model that stops answering while `hung` is set (until it is cleared)."""

    def __init__(self) -> None:
        super().__init__()
        self.hung = threading.Event()
        self.released = threading.Event()
        self.asked = 0

    def embed(self, texts):
        self.asked += 1
        if self.hung.is_set():
            self.released.wait()
        return super().embed(texts)


@pytest.fixture
def hanging(tmp_path, clock):
    """A local app whose model can hang (`embedder.hung`), holding one indexed memory, "tea"; the
    hung calls are released when the test ends."""
    from memsvc.bootstrap import build_local

    embedder = _HangingEmbedder()
    app = build_local(local_data_dir(tmp_path), embedder=embedder, clock=clock, start_workers=False)
    try:
        app.services.memories.put(alice(), PutMemory(namespace=NS, key="tea", value={"text": "green tea at nine"}))
        app.workers.run_cycle("indexer")
        yield app.services.search, embedder
    finally:
        embedder.released.set()
        app.close()


def tea(search_, **fields):
    return search_.answer(alice(), SearchQuery(namespace_prefix=["user", "alice"], query="green tea", **fields))


def test_a_hung_local_model_times_out_and_hybrid_answers_from_keywords(hanging):
    search_, embedder = hanging
    search_.embedding_timeout_seconds = 0.05  # the model never answers within it: it is hung
    embedder.hung.set()
    found = tea(search_)
    assert found.degraded and [m.key for m in found.memories] == ["tea"]
    with pytest.raises(EmbeddingFailed) as failed:
        tea(search_, mode="semantic")
    assert failed.value.details == {"timeout_seconds": 0.05}
    embedder.hung.clear()
    embedder.released.set()
    search_.embedding_timeout_seconds = 5.0
    assert not tea(search_).degraded


def test_a_hung_model_holding_every_slot_bounds_the_wait_of_later_queries(hanging):
    from memsvc.service.search import QUERY_EMBEDDING_THREADS

    search_, embedder = hanging
    search_.embedding_timeout_seconds = 0.01
    embedder.hung.set()
    for _ in range(QUERY_EMBEDDING_THREADS):  # each leaves a call hung in the model
        assert tea(search_).degraded
    asked = embedder.asked
    found = tea(search_)
    assert found.degraded and [m.key for m in found.memories] == ["tea"]
    assert embedder.asked == asked  # no slot came free within its wait: the model was not asked again
    embedder.hung.clear()
    embedder.released.set()  # the hung calls end and give their slots back
    for thread in threading.enumerate():
        if thread.name == "query-embed":
            thread.join(60)
    search_.embedding_timeout_seconds = 5.0
    assert not tea(search_).degraded
