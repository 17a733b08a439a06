"""Search's rerank step (`memsvc.service.rerank`) on both backends, with an honest fake of the
`Reranker` port: what it is sent, the order it gives, its failures, and who it applies to."""

from __future__ import annotations

import logging
import threading
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime, timezone
from types import SimpleNamespace

import pytest

from memsvc.core.keywords import analyze
from memsvc.core.models import Caller, Memory
from memsvc.service.memories import PutMemory
from memsvc.service import best_text as best_text_module
from memsvc.service.best_text import MAX_SCANNED_CHARS, MAX_SCANNED_CHARS_PER_TEXT, best_text
from memsvc.service.rerank import MAX_RERANK_TEXT_CHARS, RERANK_FAILED_METRIC, Rerank
from memsvc.service.search import Ranked, SearchQuery
from memsvc.service.sessions import AppendMessage, CreateSession
from memsvc.service.tenant_config import RerankSetting, SettingsPatch
from memsvc.settings import AwsSettings
from tests.conftest import local_data_dir
from tests.fakes.aws_stack import BUCKET, INDEX, KEYWORD_TABLE, REGION, TABLE, aws_stack
from tests.fakes.embedder import HashEmbedder

QUERY = "harbour ferry timetable"
NOTES = {
    "timetable": {"title": "ferry", "text": "harbour ferry timetable: the harbour ferry leaves at noon"},
    "tickets": {"text": "ferry tickets for the harbour are sold on board"},
    "zebra": {"text": "a zebra crossing near the harbour"},
    "storm": {"text": "storms delay the ferry"},
    "long": {"text": "harbour " * 1000},
}


class ScriptedReranker:
    """Scores a text 1 when it holds "zebra", else by its rank in the call (earlier is better),
    or fails with `failure`; records every call."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, list[str], str | None]] = []
        self.failure: Exception | None = None

    def rerank(self, query: str, texts: Sequence[str], *, model_id: str | None) -> list[float]:
        self.calls.append((query, list(texts), model_id))
        if self.failure is not None:
            raise self.failure
        return [1.0 if "zebra" in t else 0.5 - i / 100 for i, t in enumerate(texts)]


@pytest.fixture(params=["local", "aws"])
def app_with_reranker(request, tmp_path, clock):
    """(app, reranker, deliver): an app of the backend whose reranker is the fake."""
    embedder, reranker = HashEmbedder(), ScriptedReranker()
    if request.param == "local":
        from memsvc.bootstrap import build_local

        app = build_local(local_data_dir(tmp_path), embedder=embedder, clock=clock, start_workers=False,
                          reranker=reranker)
        yield app, reranker, lambda: app.workers.run_cycle("indexer")
        app.close()
    else:
        from memsvc.bootstrap import build_aws

        with aws_stack(dimension=embedder.dimension, embedder=embedder, clock=clock) as stack:
            key_id = stack.clients.kms.list_keys()["Keys"][0]["KeyId"]
            settings = AwsSettings(region=REGION, table_name=TABLE, keyword_table_name=KEYWORD_TABLE,
                                   vector_bucket=BUCKET, vector_index=INDEX, kms_key_id=key_id,
                                   embedding_dimension=embedder.dimension)
            app = build_aws(settings, clients=stack.clients, embedder=embedder, clock=clock, reranker=reranker)
            yield app, reranker, lambda: stack.drain(consumers=("indexer",))


def user(tenant: str) -> Caller:
    return Caller(tenant_id=tenant, user_id="alice", roles=("user",))


def fill(app, deliver, *tenants: str) -> None:
    for tenant in tenants:
        for key, value in NOTES.items():
            app.services.memories.put(user(tenant), PutMemory(namespace=["user", "alice"], key=key, value=value))
    deliver()


def turn_on(app, tenant: str, **setting) -> None:
    app.services.admin.put_settings(Caller(tenant_id=tenant, user_id="root", roles=("admin",)),
                                    SettingsPatch(rerank=RerankSetting(enabled=True, **setting)))


def search(app, tenant: str, **body):
    return app.services.search.search(user(tenant), SearchQuery(namespace_prefix=["user", "alice"], query=QUERY,
                                                                **body))


def test_off_by_default_nothing_is_sent(app_with_reranker):
    app, reranker, deliver = app_with_reranker
    fill(app, deliver, "acme")
    assert search(app, "acme") and reranker.calls == []


def test_the_window_is_reordered_and_the_rest_follows_in_fused_order(app_with_reranker):
    app, reranker, deliver = app_with_reranker
    fill(app, deliver, "acme")
    fused = search(app, "acme")
    turn_on(app, "acme", top_n=3, model_id="my-model")
    found = search(app, "acme")
    (query, texts, model_id), = reranker.calls
    assert (query, model_id, len(texts)) == (QUERY, "my-model", 3)
    window = [m.key for m in fused[:3]]
    expected = sorted(window, key=lambda k: -(1.0 if "zebra" in NOTES[k]["text"] else 0.5 - window.index(k) / 100))
    assert [m.key for m in found] == expected + [m.key for m in fused[3:]]
    assert [m.score for m in found[3:]] == [m.score for m in fused[3:]]  # score stays the fused score
    assert all(m.scores["rerank"] is not None for m in found[:3])
    assert all("rerank" not in m.scores for m in found[3:])


def test_each_memory_is_sent_as_its_best_text_cut(app_with_reranker):
    app, reranker, deliver = app_with_reranker
    fill(app, deliver, "acme")
    turn_on(app, "acme")
    search(app, "acme")
    (_, texts, _), = reranker.calls
    every_text = {t for v in NOTES.values() for t in v.values()}
    assert all(t in every_text or t == NOTES["long"]["text"][:MAX_RERANK_TEXT_CHARS] for t in texts)
    assert NOTES["long"]["text"][:MAX_RERANK_TEXT_CHARS] in texts
    assert "ferry" not in texts  # the timetable's title matches less than its text


@pytest.mark.parametrize("mode", ["keyword", "hybrid"])
def test_a_session_message_is_sent_as_its_own_content(app_with_reranker, mode):
    """Not its speaker's name (here the leaf sharing the most query terms), nor its role, nor the
    context it is indexed with (the text its vector is of)."""
    app, reranker, deliver = app_with_reranker
    sessions = app.services.sessions
    sessions.create(user("acme"), CreateSession(session_id="s"))
    said = ["When does the ferry go?", "It leaves at noon, from pier two."]
    for content in said:
        sessions.append(user("acme"), "s", AppendMessage(role="user", name="Harbour Ferry Timetable Desk",
                                                        content=content))
    deliver()
    turn_on(app, "acme")
    # The second's context quotes the first: its vector with context matches this query best.
    query = "harbour ferry timetable: when does the ferry go?"
    found = app.services.search.search(user("acme"), SearchQuery(namespace_prefix=["user", "alice"], query=query,
                                                                 mode=mode))
    assert {m.key for m in found} == {"000000000001", "000000000002"}
    (_, texts, _), = reranker.calls
    assert sorted(texts) == sorted(said)


def test_a_failing_reranker_leaves_the_fused_order_and_logs_no_text(app_with_reranker, caplog):
    app, reranker, deliver = app_with_reranker
    fill(app, deliver, "acme")
    fused = [m.key for m in search(app, "acme")]
    turn_on(app, "acme")
    reranker.failure = TimeoutError(f"timed out reading {QUERY}")
    with caplog.at_level(logging.WARNING, logger="memsvc.service.rerank"):
        found = search(app, "acme")
    assert [m.key for m in found] == fused and all("rerank" not in m.scores for m in found)
    logged = [r for r in caplog.records if r.name == "memsvc.service.rerank"]
    assert [r.getMessage() for r in logged] == ["rerank failed (TimeoutError); the fused order stands"]
    assert not any("harbour" in r.getMessage() or "harbour" in str(r.__dict__) for r in logged)


def test_one_tenants_setting_reranks_only_its_searches(app_with_reranker):
    app, reranker, deliver = app_with_reranker
    fill(app, deliver, "acme", "globex")
    turn_on(app, "acme")
    search(app, "globex")
    search(app, "globex", mode="keyword")
    assert reranker.calls == []
    search(app, "acme")
    assert len(reranker.calls) == 1


def test_semantic_mode_is_not_reranked(app_with_reranker):
    app, reranker, deliver = app_with_reranker
    fill(app, deliver, "acme")
    turn_on(app, "acme")
    search(app, "acme", mode="semantic")
    assert reranker.calls == []
    search(app, "acme", mode="keyword")
    assert len(reranker.calls) == 1


# -- the step's bounds, on the step itself ------------------------------------------------------

class CountingMetrics:
    def __init__(self) -> None:
        self.counted: list[tuple[str, str]] = []

    def count(self, name: str, tenant: str, n: int = 1) -> None:
        self.counted.append((name, tenant))


class OnSettings:
    def get(self, tenant: str):
        return SimpleNamespace(rerank=RerankSetting(enabled=True, top_n=3))


class BlockingReranker(ScriptedReranker):
    """Holds every call until `release` is set; `entered` counts the calls waiting."""

    def __init__(self) -> None:
        super().__init__()
        self.entered = threading.Semaphore(0)
        self.release = threading.Event()

    def rerank(self, query: str, texts: Sequence[str], *, model_id: str | None) -> list[float]:
        self.entered.release()
        assert self.release.wait(10)
        return super().rerank(query, texts, model_id=model_id)


def ranked_memories(*values: dict) -> list[Ranked]:
    at = datetime(2026, 1, 1, tzinfo=timezone.utc)
    return [Ranked(memory=Memory(id=f"m{i}", namespace=("user", "alice"), key=f"k{i}", value=value, attributes=None,
                                 created_at=at, updated_at=at, expires_at=None, version=1, score=1.0 - i / 10),
                   field=None) for i, value in enumerate(values)]


def test_a_search_finding_every_rerank_slot_taken_keeps_the_fused_order_and_counts_it():
    reranker, metrics = BlockingReranker(), CountingMetrics()
    step = Rerank(reranker=reranker, settings=OnSettings(), sealer=None, metrics=metrics,  # type: ignore[arg-type]
                  max_in_flight=2)
    fused = ranked_memories({"text": "zebra"}, {"text": "harbour"}, {"text": "ferry"})
    with ThreadPoolExecutor(2) as pool:
        held = [pool.submit(step.reorder, "acme", QUERY, "hybrid", fused) for _ in range(2)]
        for _ in held:
            assert reranker.entered.acquire(timeout=30)
        assert step.reorder("acme", QUERY, "hybrid", fused) == fused  # no slot: not sent, not waited for
        assert not reranker.entered.acquire(blocking=False)
        assert len(reranker.calls) == 0 and metrics.counted == [(RERANK_FAILED_METRIC, "acme")]
        reranker.release.set()
        assert all(f.result(timeout=30)[0].memory.key == "k0" for f in held)  # zebra first: reranked
    assert step.reorder("acme", QUERY, "hybrid", fused)[0].memory.scores["rerank"] is not None  # slots freed
    assert len(reranker.calls) == 3


def test_choosing_a_memorys_text_analyzes_a_bounded_amount_of_it(monkeypatch):
    analyzed: list[int] = []

    def counting_analyze(text: str) -> list[str]:
        analyzed.append(len(text))
        return analyze(text)

    monkeypatch.setattr(best_text_module, "analyze", counting_analyze)
    huge = {f"f{i}": "harbour ferry " * 3_000 for i in range(8)}  # 8 texts of 42 KB
    chosen, path = best_text(None, "acme", huge, None, set(analyze(QUERY)))  # type: ignore[arg-type]
    assert (chosen, path) == (huge["f0"], "f0")  # sent cut to MAX_RERANK_TEXT_CHARS by the step
    assert sum(analyzed) <= MAX_SCANNED_CHARS and max(analyzed) <= MAX_SCANNED_CHARS_PER_TEXT
    analyzed.clear()
    assert best_text(None, "acme", huge, None, set()) == (huge["f0"], "f0") and analyzed == []  # type: ignore[arg-type]
