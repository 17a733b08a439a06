"""The indexer and search against S3 Vectors' request model: a stream batch's vectors go in as few
requests as the index takes, a short page of hits is not the end of the matches, and vectors the
index refuses as invalid are settled at once instead of being retried into the DLQ."""

from __future__ import annotations

import math

import pytest

from memsvc.core.errors import InvalidArgument
from memsvc.core.filters import Filter
from memsvc.core.models import Caller, VectorWrite
from memsvc.service.memories import PutMemory
from memsvc.service.search import SearchQuery

ALICE = Caller(tenant_id="acme", user_id="alice", roles=("user",))
NS = ("user", "alice")




def put(stack, key: str, value: dict):
    return stack.app.services.memories.put(ALICE, PutMemory(namespace=list(NS), key=key, value=value))


def test_a_batch_of_changes_writes_its_vectors_500_to_a_request(stack):
    n, fields = 130, 4
    for i in range(n):
        put(stack, f"k{i}", {f"f{j}": f"note {i} part {j}" for j in range(fields)})
    stack.drain(batch_size=1000, consumers=("indexer",))
    assert len(stack.s3vectors.put_sizes) == math.ceil(n * fields / 500)
    assert stack.s3vectors.put_sizes == [500, 20] and stack.s3vectors.delete_sizes == []
    assert stack.app.store.pending_index("acme", stack.clock.now()) == 0

    for i in range(n):  # every update retires its previous version's vectors
        put(stack, f"k{i}", {f"f{j}": f"note {i} part {j} revised" for j in range(fields)})
    stack.drain(batch_size=1000, consumers=("indexer",))
    assert stack.s3vectors.delete_sizes == [500, 20]
    assert stack.s3vectors.put_sizes == [500, 20, 500, 20]


def test_a_short_page_of_filtered_hits_does_not_end_the_search(stack):
    """A CLASSIC index filters during its search: here the 50 nearest vectors of the whole index
    are another tenant's, so the first page for acme is empty although acme has matches."""
    for key in ("a", "b", "c"):
        put(stack, key, {"text": f"quiet room {key}"})
    stack.drain(consumers=("indexer",))
    query = stack.app.embedder.embed(["quiet room"])[0]
    stack.app.vectors.put_many([VectorWrite("other", NS, f"o{i}", f"other-{i}", 1, {}, (("text", query),))
                                for i in range(60)])
    stack.s3vectors.filter_during_search = True
    assert stack.app.vectors.short_page_is_end is False  # what GetIndex says of a CLASSIC index
    assert stack.app.vectors.exact("acme") is False  # nor is its last hit a bound on what it left out

    found = stack.app.services.search.search(ALICE, SearchQuery(namespace_prefix=list(NS), query="quiet room"))

    assert sorted(m.key for m in found) == ["a", "b", "c"]
    assert [q["topK"] for q in stack.s3vectors.queries[-2:]] == [50, 100]


def test_a_validation_exception_is_a_client_error_not_a_retry(stack):
    injected = stack.fail("s3vectors", "PutVectors", code="ValidationException", status=400)
    write = VectorWrite("acme", NS, "k", "m-1", 1, {}, (("text", [1.0] + [0.0] * 63),))
    with pytest.raises(InvalidArgument) as raised:
        stack.app.vectors.put_many([write])
    assert not raised.value.retryable and raised.value.status == 400
    assert raised.value.details["aws_error_code"] == "ValidationException"
    assert injected.count == 1  # botocore does not retry it either


def test_vectors_the_index_refuses_are_settled_not_parked(stack):
    good, bad = put(stack, "good", {"text": "window seat"}), put(stack, "bad", {"text": "aisle seat"})
    stack.fail("s3vectors", "PutVectors", code="ValidationException", status=400,
               when=lambda body: any(v["metadata"]["memory_id"] == bad.id for v in body["vectors"]))
    stack.drain(consumers=("indexer",))
    assert stack.invocations[-1]["response"] == {"batchItemFailures": []}  # nothing retried, nothing parked
    assert len(stack.app.store.get("acme", NS, "good").indexed_fields) == 1
    assert stack.app.store.get("acme", NS, "bad").indexed_fields == ()  # settled without vectors
    hits = stack.app.vectors.query("acme", NS, Filter(), stack.app.embedder.embed(["seat"])[0], 10)
    assert {h.memory_id for h in hits} == {good.id}
