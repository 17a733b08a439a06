"""When the vector index fails a search (S3 Vectors refusing or unreachable; locally, the index
raising), hybrid search and recall answer from the keyword index alone and say so (`degraded`),
as when the embedder fails (tests/contract/test_embedder_failure.py); `mode: semantic` fails
with the index's retryable error. On AWS the S3 Vectors fake answers `AccessDeniedException` to
every read (`S3VectorsFake.fail_reads`), which the adapter maps to `ProviderError`; locally the
index's `query` raises `ProviderError`, the error a vector index adapter raises."""

from __future__ import annotations

import logging

import pytest

from memsvc.core.errors import ProviderError
from memsvc.core.models import Caller
from memsvc.service.memories import PutMemory
from memsvc.service.recall import RecallQuery
from memsvc.service.search import SearchQuery
from tests.conftest import alice, bob

NS = ["user", "alice", "notes"]
STRANGER = Caller(tenant_id="globex", user_id="alice", roles=("user",))  # alice's namesake in another tenant


@pytest.fixture
def failing(backend, monkeypatch):
    """The backend with three of alice's memories, one of bob's and one of another tenant's alice,
    under alice's very namespace; call the result to make the vector index fail every search
    from then on."""
    for key, text in (("inc", "Incident INC-20931: the billing export failed"),
                      ("py", "Python uses indentation for blocks"), ("tea", "Alice drinks green tea every morning")):
        backend.memories.put(alice(), PutMemory(namespace=NS, key=key, value={"text": text}))
    backend.memories.put(bob(), PutMemory(namespace=["user", "bob", "notes"], key="bobs",
                                          value={"text": "Bob's billing export notes"}))
    backend.memories.put(STRANGER, PutMemory(namespace=NS, key="theirs", value={"text": "billing export notes"}))
    backend.drain()

    def fail() -> None:
        if backend.aws is not None:
            backend.aws.s3vectors.fail_reads = "AccessDeniedException"
        else:
            def refuse(*_, **__):
                raise ProviderError("the vector index failed")

            monkeypatch.setattr(backend.vectors, "query", refuse)

    return fail


def search(backend, caller=None, **kw):
    kw.setdefault("namespace_prefix", ["user", "alice"])
    return backend.search.answer(caller or alice(), SearchQuery(**kw), request_id="req")


def test_hybrid_search_answers_from_keywords_and_says_so(backend, failing, caplog):
    keyword = search(backend, query="billing export incident", mode="keyword")
    assert not search(backend, query="billing export incident").degraded
    failing()
    with caplog.at_level(logging.WARNING, logger="memsvc.service.search"):
        found = search(backend, query="billing export incident")
    assert found.degraded
    assert [m.key for m in found.memories] == [m.key for m in keyword.memories] == ["inc"]
    assert all(m.scores["semantic"] is None for m in found.memories)
    (warning,) = [r for r in caplog.records if r.name == "memsvc.service.search"]
    assert warning.code == "PROVIDER_ERROR" and "billing" not in warning.getMessage()
    assert "not authorized" not in warning.getMessage()


def test_semantic_search_fails_with_the_index_s_retryable_error(backend, failing):
    failing()
    with pytest.raises(ProviderError) as failed:
        search(backend, query="billing export incident", mode="semantic")
    assert failed.value.retryable and "not authorized" not in failed.value.message


def test_recall_answers_from_keywords_and_says_so(backend, failing):
    for key, content in (("tea", "Alice drinks green tea every morning"), ("deploy", "deploys run on friday")):
        backend.memories.put(alice(), PutMemory(namespace=["user", "alice", "memories"], key=key,
                                                value={"content": content, "type": "fact"}, index_fields=["content"]))
    backend.drain()
    failing()
    found = backend.app.services.recall.recall(alice(), RecallQuery(query="green tea"), request_id="req")
    assert found.degraded and [r.memory.key for r in found.memories] == ["tea"]


def test_a_degraded_answer_never_holds_another_users_or_tenants_memory(backend, failing):
    failing()
    found = search(backend, namespace_prefix=[], query="billing export notes")
    assert found.degraded and [m.key for m in found.memories] == ["inc"]  # not bob's nor the stranger's
    theirs = search(backend, bob(), namespace_prefix=[], query="billing export notes")
    assert theirs.degraded and [m.key for m in theirs.memories] == ["bobs"]
    stranger = search(backend, STRANGER, query="billing export notes")
    assert stranger.degraded and [m.key for m in stranger.memories] == ["theirs"]


def test_a_search_as_it_was_known_then_degrades_too(backend, failing):
    """`known_at` ranks the versions changed since with the query's vector, which is lost."""
    then = backend.clock.now()
    backend.clock.advance(60)
    backend.memories.put(alice(), PutMemory(namespace=NS, key="inc", value={"text": "INC-20931 is closed"}))
    backend.drain()
    failing()
    found = search(backend, query="billing export incident", known_at=then)
    assert found.degraded and [m.key for m in found.memories] == ["inc"]
    assert found.memories[0].value == {"text": "Incident INC-20931: the billing export failed"}
