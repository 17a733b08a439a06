"""Failures on the AWS path, through the real Lambda handlers on the moto stack: Titan throttling
(recovered, and exhausted), S3 Vectors failing for one record of a batch, a replayed record, and
KMS failing on a write. Failures are injected where AWS would produce them, in botocore (the
Titan fake's knobs, `AwsStack.fail`), so every adapter runs its real error path.

Redelivery is `AwsStack.drain()`: after a reported failure it stops, and the next call delivers
again from the first failed record, as the event source mapping does."""

from __future__ import annotations

import json
from collections import Counter
from typing import Any

import pytest

from functions import runtime
from memsvc.bootstrap import build_aws
from memsvc.core.models import Caller
from memsvc.service.memories import PutMemory
from memsvc.settings import AwsSettings
from tests.aws.test_functions import (
    NS,
    SUB,
    TENANT,
    Clock,
    call_api,
    index_batch,
    load_event,
    vectors_by_memory,
)
from tests.fakes.aws_stack import BUCKET, INDEX, KEYWORD_TABLE, REGION, TABLE

ALICE = Caller(tenant_id=TENANT, user_id=SUB, roles=("user",))
TEXTS = {
    "hotel": "Prefers a quiet room on a high floor, away from the elevator",
    "flight": "Aisle seat on long-haul flights, never row 12",
    "loyalty": "Gold member of the hotel loyalty programme",
}


def put(stack, key: str, text: str | None = None):
    return stack.app.services.memories.put(ALICE, PutMemory(namespace=list(NS), key=key, value={"text": text or TEXTS[key]}))


def failures(stack) -> list[list[str]]:
    return [[f["itemIdentifier"] for f in i["response"]["batchItemFailures"]] for i in stack.invocations]


def item_seq(records: list[dict[str, Any]], key: str) -> str:
    return next(r["dynamodb"]["SequenceNumber"] for r in records
                if r["dynamodb"].get("NewImage", {}).get("key", {}).get("S") == key)


# -- Titan ----------------------------------------------------------------------------------------


def test_titan_throttles_then_recovers(titan_stack):
    stack = titan_stack
    memory = put(stack, "hotel")
    stack.titan.throttle_next = 3
    stack.drain()
    assert failures(stack) == [[]]
    assert vectors_by_memory(stack) == {memory.id: 1}
    assert [c["outcome"] for c in stack.titan.calls] == ["ThrottlingException"] * 3 + ["ok"]
    assert stack.sleeps == [0.25, 0.5, 1.0]  # exponential backoff (full jitter, pinned at its ceiling)
    stats = stack.app.embedder.stats
    assert (stats.calls, stats.throttles, stats.retries, stats.failures) == (4, 3, 3, 0)


def test_exhausted_throttling_is_a_batch_failure_and_a_redelivery_succeeds(titan_stack):
    stack = titan_stack
    hotel, flight = put(stack, "hotel"), put(stack, "flight")
    records = stack.read_stream()
    stack.pending["indexer"].extend(records)
    stack.titan.throttle_next = 10_000
    stack.drain()
    # Both changes are reported (Lambda retries from the first); nothing was written.
    assert failures(stack) == [[item_seq(records, "hotel"), item_seq(records, "flight")]]
    assert vectors_by_memory(stack) == {}
    # Each text got at most its 6 attempts: a throttled batch is not retried item by item.
    assert len(stack.titan.calls) <= 2 * 6
    assert stack.app.store.get(TENANT, NS, "hotel").indexed_fields is None

    stack.titan.throttle_next = 0
    stack.drain()  # the redelivery, from the first failed record
    assert failures(stack)[-1] == []
    assert vectors_by_memory(stack) == {hotel.id: 1, flight.id: 1}


# -- S3 Vectors ------------------------------------------------------------------------------------


def test_s3_vectors_failing_for_one_record_retries_only_that_record(stack):
    memories = {key: put(stack, key) for key in ("hotel", "flight", "loyalty")}
    bad = memories["flight"].id
    records = stack.read_stream()
    stack.pending["indexer"].extend(records)
    injected = stack.fail("s3vectors", "PutVectors", code="InternalServerException", status=500,
                          when=lambda body: any(v["metadata"]["memory_id"] == bad for v in body.get("vectors", [])))
    stack.drain()
    assert failures(stack) == [[item_seq(records, "flight")]]  # exactly that record
    assert injected.count == 2  # the batch's write, then the item's own retry in the same invocation
    assert vectors_by_memory(stack) == {memories["hotel"].id: 1, memories["loyalty"].id: 1}
    # texts embedded: the batch once (its vectors went in one request, which failed), then item by item
    assert stack.embedder.calls == [[TEXTS["hotel"], TEXTS["flight"], TEXTS["loyalty"]],
                                    [TEXTS["hotel"]], [TEXTS["flight"]], [TEXTS["loyalty"]]]

    injected.remove()
    # Lambda redelivers from the failed record on: flight, then loyalty (already indexed)
    assert stack.pending["indexer"][0]["dynamodb"]["SequenceNumber"] == item_seq(records, "flight")
    stack.drain()
    assert failures(stack)[-1] == []
    assert stack.embedder.calls[-1] == [TEXTS["flight"]]  # loyalty was not embedded again
    # nothing lost, nothing duplicated
    assert vectors_by_memory(stack) == {m.id: 1 for m in memories.values()}
    assert all(len(stack.app.store.get(TENANT, NS, k).indexed_fields) == 1 for k in memories)


def test_a_vector_delete_failure_is_retried_too(stack):
    old = put(stack, "hotel")
    stack.drain()
    new = put(stack, "hotel", "Prefers a quiet room; allergic to feather pillows")
    injected = stack.fail("s3vectors", "DeleteVectors", code="ServiceUnavailableException", status=503)
    stack.drain()
    assert len(failures(stack)[-1]) == 1  # the update: its old version's vectors are still there
    assert vectors_by_memory(stack) == {old.id: 1, new.id: 1}
    injected.remove()
    stack.drain()
    assert failures(stack)[-1] == []
    assert vectors_by_memory(stack) == {new.id: 1}


# -- replays --------------------------------------------------------------------------------------


def test_a_record_replayed_twice_and_an_older_one_after_a_newer(stack):
    put(stack, "hotel")
    first = stack.read_stream()
    assert index_batch({"Records": first}) == {"batchItemFailures": []}
    newer = put(stack, "hotel", "Prefers a quiet room; allergic to feather pillows")
    second = stack.read_stream()
    assert index_batch({"Records": second}) == {"batchItemFailures": []}
    vectors, calls = vectors_by_memory(stack), len(stack.embedder.calls)
    assert vectors == {newer.id: 1}

    for replay in (second, second, first, first):  # twice each, the older one after the newer
        assert index_batch({"Records": json.loads(json.dumps(replay))}) == {"batchItemFailures": []}
        assert vectors_by_memory(stack) == vectors  # no old vector back, none duplicated
        assert len(stack.embedder.calls) == calls  # nothing embedded again


# -- KMS ------------------------------------------------------------------------------------------


def _put_event(tenant: str, text: str = "Prefers a quiet room") -> dict[str, Any]:
    event = load_event("api_jwt_put")
    event["requestContext"]["authorizer"]["jwt"]["claims"]["tenant_id"] = tenant
    body = json.loads(event["body"])
    body["value"] = {"text": text}
    event["body"] = json.dumps(body)
    return event


def _rows(stack, tenant: str) -> list[dict[str, Any]]:
    """Every row of the tenant (a test-only Scan of moto's table)."""
    rows = []
    for page in stack.clients.dynamodb.get_paginator("scan").paginate(TableName=TABLE):
        rows += [r for r in page["Items"] if r["pk"]["S"].startswith(f"T#{tenant}#")]
    return rows


@pytest.mark.parametrize("code, status, error", [
    ("KMSInternalException", 500, ("PROVIDER_ERROR", 502)),
    ("ThrottlingException", 400, ("RATE_LIMITED", 429)),
])
def test_kms_failing_on_a_fresh_tenants_first_write_leaves_nothing(stack, code, status, error):
    stack.read_stream()
    injected = stack.fail("kms", "GenerateDataKey", code=code, status=status)
    got_status, body, headers = call_api(_put_event("globex"))
    assert (body["error"]["code"], got_status) == error
    assert body["error"]["retryable"] is True
    if error[0] == "RATE_LIMITED":
        assert headers["retry-after"] == "1"
    assert injected.count == 1
    assert _rows(stack, "globex") == []  # no item, no registry row, no data key
    assert stack.read_stream() == []  # so nothing on the stream either

    injected.remove()  # the client's retry then works
    assert call_api(_put_event("globex"))[0] == 200
    assert {r["rt"]["S"] for r in _rows(stack, "globex")} == {"item", "key", "namespace"}


def test_kms_failing_to_unwrap_on_a_cold_start_leaves_the_item_as_it_was(stack):
    assert call_api(_put_event(TENANT, "first"))[0] == 200
    stack.read_stream()
    # A new execution environment: its data-key cache is empty, so the wrapped key must be unwrapped.
    key_id = stack.clients.kms.list_keys()["Keys"][0]["KeyId"]
    settings = AwsSettings(region=REGION, table_name=TABLE, keyword_table_name=KEYWORD_TABLE, vector_bucket=BUCKET,
                           vector_index=INDEX, kms_key_id=key_id, embedding_dimension=stack.embedder.dimension)
    runtime.set_app(build_aws(settings, clients=stack.clients, embedder=stack.embedder, clock=Clock()))
    injected = stack.fail("kms", "Decrypt", code="DependencyTimeoutException", status=503)
    status, body, _ = call_api(_put_event(TENANT, "second"))
    assert (status, body["error"]["code"], body["error"]["retryable"]) == (502, "PROVIDER_ERROR", True)
    assert injected.count == 1
    assert stack.read_stream() == []
    assert Counter(r["rt"]["S"] for r in _rows(stack, TENANT))["item"] == 1
    assert stack.app.store.get(TENANT, NS, "hotel").version == 1

    injected.remove()
    status, got, _ = call_api(load_event("api_jwt_get"))
    assert (status, got["value"], got["version"]) == (200, {"text": "first"}, 1)
