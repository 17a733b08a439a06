"""The local opt-in model (`MEMSVC_LLM_URL`, issue 24): with an OpenAI-compatible endpoint
configured, extraction, the same-fact judge and the graph's entity extractor all ask it, and a
failing endpoint loses nothing. The endpoint is `tests/fakes/chat_endpoint.py` on 127.0.0.1."""

from __future__ import annotations

import pytest

from memsvc.adapters.local.openai_llm import local_language_model
from memsvc.bootstrap import build_local
from memsvc.service.extraction import ExtractionQueued, ExtractMemories
from memsvc.service.llm_extraction import SYSTEM_PROMPT as MEMORY_PROMPT
from memsvc.service.llm_uses import EXTRACTION_SYSTEM_PROMPT, JUDGE_SYSTEM_PROMPT
from memsvc.service.remember import RememberMemory
from memsvc.service.search import SearchQuery
from memsvc.service.tenant_config import SettingsPatch
from memsvc.settings import LocalSettings
from tests.conftest import alice, local_data_dir
from tests.fakes.chat_endpoint import ChatEndpoint
from tests.fakes.embedder import HashEmbedder


@pytest.fixture
def endpoint():
    endpoint = ChatEndpoint()
    yield endpoint
    endpoint.close()


@pytest.fixture
def app(tmp_path, clock, endpoint):
    llm = local_language_model(LocalSettings(tmp_path, llm_url=endpoint.url, llm_model="llama3.2:3b",
                                             llm_timeout_seconds=10))
    app = build_local(local_data_dir(tmp_path), embedder=HashEmbedder(), clock=clock, start_workers=False, llm=llm)
    app.settings.update("acme", SettingsPatch(semantic_auto_update=0.9, semantic_check_low=0.6))
    yield app
    app.close()


def test_extraction_the_judge_and_the_graph_ask_the_endpoint(app, endpoint):
    out = app.services.extraction.extract(alice(), ExtractMemories(messages=[
        {"role": "user", "content": "I live in Berlin and I work at Siemens."}]))
    assert out.extractor == "llama3.2:3b"
    assert {m.candidate.content for m in out.memories} == {"User lives in Berlin", "User works at Siemens"}
    assert endpoint.systems == [MEMORY_PROMPT]
    # A neighbour in the check range: the judge is the endpoint too.
    app.services.remember.remember(alice(), RememberMemory(content="I live in Munich"))
    app.services.remember.remember(alice(), RememberMemory(content="I live in Munich now"))
    assert JUDGE_SYSTEM_PROMPT in endpoint.systems
    app.workers.run_cycle("indexer")  # the graph's entities come from it as well
    assert EXTRACTION_SYSTEM_PROMPT in endpoint.systems


def test_a_failing_endpoint_loses_nothing(app, endpoint):
    endpoint.replies = [(503, {"error": {"message": "overloaded"}})]
    queued = app.services.extraction.extract(alice(), ExtractMemories(messages=[
        {"role": "user", "content": "I live in Berlin."}]))
    assert isinstance(queued, ExtractionQueued) and queued.reason == "retrying"
    endpoint.replies = None
    app.workers.run_remember_jobs()
    learnt = app.services.search.search(alice(), SearchQuery(namespace_prefix=["user", "alice", "memories"]))
    assert [m.value["content"] for m in learnt] == ["User lives in Berlin"]
    assert endpoint.systems == [MEMORY_PROMPT, MEMORY_PROMPT]  # the failed call, then the retry
