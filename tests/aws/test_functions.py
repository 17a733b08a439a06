"""The Lambda handlers (`functions/api.py`, `functions/indexer.py`) end to end on the moto stack,
driven by the sample events in `events/`.

The API samples are what API Gateway (HTTP API, payload 2.0) sends for a JWT-authorized and an
IAM-authorized request. The stream samples are one story told by the real service on moto, in
the shape Lambda delivers it (see `capture_stream_samples`, and `python -m tests.aws.test_functions`
to capture them again); `test_stream_samples_match_the_table_layout` fails when the table layout
drifts from them. A sample's value ciphertexts were sealed under a KMS key that no longer
exists, so `play_stream_sample` re-seals them under the test stack's key (the plaintexts are in
`VALUES`) and brings the table to the state the batch describes before the handler runs.
"""

from __future__ import annotations

import base64
import copy
import json
import logging
import sys
import threading
from collections import Counter
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import pytest

from memsvc.adapters.aws.dynamo_store import change_from_stream_record
from memsvc.adapters.aws.kms_keys import KmsKeyProvider
from memsvc.api.identity import caller_from_event
from memsvc.core.models import Caller
from memsvc.core.namespaces import decode_namespace, encode_namespace
from memsvc.service.graph import FindEntities
from memsvc.service.memories import PutMemory
from memsvc.service.recall import RecallQuery
from memsvc.service.sealing import Sealer
from tests.conftest import ManualClock
from tests.fakes.aws_stack import BUCKET, INDEX, TABLE, LambdaContext, aws_stack, epoch
from tests.fakes.embedder import HashEmbedder

EVENTS = Path(__file__).resolve().parents[2] / "events"
TENANT = "acme"
SUB = "8f6e0c52-3a41-4f5e-9a7b-2d1c0e9b7a14"  # alice's Cognito `sub`, in every sample
NS = ("user", SUB, "travel, 2025")  # a segment with a comma: ambiguous in queryStringParameters
STREAM_SAMPLES = ("stream_insert", "stream_modify", "stream_remove", "stream_ttl_remove")
STREAM_ARN = "arn:aws:dynamodb:us-east-1:123456789012:table/memsvc-dev-Memories/stream/2025-06-01T08:00:00.000"
START = datetime(2025, 6, 10, 9, 15, tzinfo=timezone.utc)
# The plaintext of every memory version in the stream samples (they carry only ciphertext).
VALUES = {
    ("hotel", 1): {"text": "Prefers a quiet room on a high floor, away from the elevator"},
    ("hotel", 2): {"text": "Prefers a quiet room on a high floor; allergic to feather pillows"},
    ("flight", 1): {"text": "Aisle seat on long-haul flights, never row 12"},
    ("loyalty", 1): {"text": "Gold member of the hotel loyalty programme"},
}


def Clock() -> ManualClock:
    return ManualClock(START)


class ApiContext(LambdaContext):
    function_name = "memsvc-api"
    invoked_function_arn = "arn:aws:lambda:us-east-1:123456789012:function:memsvc-api"
    aws_request_id = "api-test-request"


# -- helpers -------------------------------------------------------------------------------------


def load_event(name: str) -> dict[str, Any]:
    return json.loads((EVENTS / f"{name}.json").read_text())


def call_api(event: dict[str, Any]) -> tuple[int, Any, dict[str, str]]:
    from functions import api

    response = api.handler(event, ApiContext())
    body = json.loads(response["body"]) if response["body"] else None
    return response["statusCode"], body, response["headers"]


def index_batch(event: dict[str, Any]) -> dict[str, Any]:
    from functions import indexer

    return indexer.handler(event, LambdaContext())


def vectors_by_memory(stack, tenant: str = TENANT) -> Counter:
    """How many vectors each memory id has in the index (moto's ListVectors)."""
    client, found, token = stack.clients.s3vectors, Counter(), None
    while True:
        page = client.list_vectors(vectorBucketName=BUCKET, indexName=INDEX, returnMetadata=True,
                                   **({"nextToken": token} if token else {}))
        found.update(v["metadata"]["memory_id"] for v in page["vectors"] if v["metadata"]["tenant"] == tenant)
        token = page.get("nextToken")
        if not token:
            return found


def sample_ids() -> dict[tuple[str, int], str]:
    """(key, version) -> memory id, for every version in the stream samples."""
    ids = {}
    for name in STREAM_SAMPLES:
        for record in load_event(name)["Records"]:
            for image in (record["dynamodb"].get("NewImage"), record["dynamodb"].get("OldImage")):
                if image and image.get("rt", {}).get("S") == "item":
                    ids[(image["key"]["S"], int(image["version"]["N"]))] = image["id"]["S"]
    return ids


def sealer_for(stack) -> Sealer:
    key_id = stack.clients.kms.list_keys()["Keys"][0]["KeyId"]
    return Sealer(stack.app.store, KmsKeyProvider(stack.clients.kms, key_id))


def _low_level(image: dict[str, Any]) -> dict[str, Any]:
    """A Lambda-JSON image (binary as base64 text) as boto3's low-level client wants it."""
    return {k: ({"B": base64.b64decode(v["B"])} if "B" in v else v) for k, v in image.items()}


def play_stream_sample(stack, name: str) -> dict[str, Any]:
    """The sample batch, made true on this stack: value ciphertexts re-sealed under this stack's
    KMS key, and the table brought to the state the batch describes (the indexer reads the
    current item, not the image). Returns the event, ready for the handler."""
    event = load_event(name)
    sealer = sealer_for(stack)
    db = stack.clients.dynamodb
    for record in event["Records"]:
        data = record["dynamodb"]
        for image in (data.get("OldImage"), data.get("NewImage")):
            if image and image.get("rt", {}).get("S") == "item" and "vct" in image:
                key, version = image["key"]["S"], int(image["version"]["N"])
                blob = sealer.seal_item(image["tenant"]["S"], decode_namespace(image["ns"]["S"]), key, version,
                                        value=VALUES[(key, version)], attributes=None).value_ct
                image["vct"] = {"B": base64.b64encode(blob).decode()}
            if image and "idx" in image:  # indexed fields are keyed hashes under the tenant's key: re-keyed too
                image["idx"] = {"S": json.dumps([sealer.field_id(image["tenant"]["S"], "text")])}
        if (data.get("NewImage") or {}).get("rt", {}).get("S") == "key":
            continue  # the tenant's wrapped data key: this stack has its own
        if record["eventName"] == "REMOVE":
            db.delete_item(TableName=TABLE, Key=_low_level(data["Keys"]))
        else:
            db.put_item(TableName=TABLE, Item=_low_level(data["NewImage"]))
    stack.read_stream()  # this set-up's own stream records are not what is under test
    return event


def play(stack, *names: str) -> list[dict[str, Any]]:
    return [index_batch(play_stream_sample(stack, name)) for name in names]


# -- capturing the stream samples ------------------------------------------------------------------


def capture_stream_samples() -> dict[str, dict[str, Any]]:
    """Tell the samples' story with the real service on moto and return each batch as Lambda
    delivers it. moto's records are given what AWS sends and moto does not: `eventVersion` 1.1,
    `ApproximateCreationDateTime` in whole seconds, the stream ARN of a deployed table, and no
    record for a write that changed nothing (DynamoDB Streams writes none)."""
    from functions import indexer

    clock = Clock()
    embedder = HashEmbedder()
    alice = Caller(tenant_id=TENANT, user_id=SUB, roles=("user",))
    batches: dict[str, dict[str, Any]] = {}
    with aws_stack(dimension=embedder.dimension, embedder=embedder, clock=clock) as stack:
        service = stack.app.services.memories

        def capture(name: str) -> None:
            records = []
            for record in stack.read_stream():
                data = record["dynamodb"]
                if record["eventName"] == "MODIFY" and data.get("OldImage") == data.get("NewImage"):
                    continue
                record["eventVersion"] = "1.1"
                record["eventSourceARN"] = STREAM_ARN
                data["ApproximateCreationDateTime"] = int(epoch(clock.now()))
                records.append({k: record[k] for k in ("eventID", "eventName", "eventVersion", "eventSource",
                                                       "awsRegion", "dynamodb", "userIdentity", "eventSourceARN")
                                if k in record})
            batches[name] = {"Records": records}
            indexer.handler(batches[name], LambdaContext())  # deliver: the index marks land in the next batch

        # 1. three memories in a new namespace (the tenant's first write makes its data key)
        service.put(alice, PutMemory(namespace=list(NS), key="hotel", value=VALUES[("hotel", 1)]))
        clock.advance(2)
        service.put(alice, PutMemory(namespace=list(NS), key="flight", value=VALUES[("flight", 1)],
                                     ttl_seconds=86_400))
        clock.advance(3)
        service.put(alice, PutMemory(namespace=list(NS), key="loyalty", value=VALUES[("loyalty", 1)]))
        capture("stream_insert")
        # 2. the indexer's marks, and an update of one memory
        clock.advance(3600)
        service.put(alice, PutMemory(namespace=list(NS), key="hotel", value=VALUES[("hotel", 2)]))
        capture("stream_modify")
        # 3. a delete through the API (a tombstone), and an operator's DeleteItem (a REMOVE)
        clock.advance(600)
        service.delete(alice, list(NS), "hotel")
        stack.clients.dynamodb.delete_item(
            TableName=TABLE, Key={"pk": {"S": f"T#{TENANT}#N#{encode_namespace(NS)}"}, "sk": {"S": "K#loyalty"}})
        capture("stream_remove")
        # 4. DynamoDB TTL: the flight memory expires, later the tombstone's retention runs out
        clock.advance(91 * 86_400)
        stack.expire(epoch(clock.now()))
        capture("stream_ttl_remove")
    return batches


def _shape(event: dict[str, Any]) -> list[tuple]:
    """What the table layout decides about a batch: per record, the event name, the identity,
    and each image's record type and attribute names and types."""
    out = []
    for record in event["Records"]:
        data = record["dynamodb"]
        images = []
        for name in ("Keys", "OldImage", "NewImage"):
            image = data.get(name)
            images.append(None if image is None else (
                image.get("rt", {}).get("S"), tuple(sorted((k, *v.keys()) for k, v in image.items()))))
        out.append((record["eventName"], json.dumps(record.get("userIdentity"), sort_keys=True), *images))
    return out


# -- the API Lambda ------------------------------------------------------------------------------


def test_identity_is_read_from_each_authorizer():
    jwt = caller_from_event(load_event("api_jwt_put"))
    assert (jwt.tenant_id, jwt.user_id, jwt.principal_type) == (TENANT, SUB, "user")
    assert jwt.roles == ("admin", "ops")  # "[admin ops]", as API Gateway hands an array claim over
    assert jwt.client_id == "3n4b5urk1ft4fl3mg5e62d9ado"
    assert caller_from_event(load_event("api_jwt_get")) == jwt

    iam = caller_from_event(load_event("api_iam_search"))
    assert iam.tenant_id == TENANT  # from X-Tenant-Id
    assert iam.user_id == "arn:aws:sts::123456789012:assumed-role/memsvc-agent/memsvc-agent-worker"
    assert (iam.roles, iam.principal_type, iam.client_id) == (("service",), "iam", "ASIAXAMPLEACCESSKEY1")


def test_jwt_put_then_get_reads_repeated_parameters_from_the_raw_query(stack):
    status, body, headers = call_api(load_event("api_jwt_put"))
    assert status == 200, body
    assert (body["namespace"], body["key"], body["version"]) == (list(NS), "hotel", 1)
    assert headers["x-request-id"] == "LmT0qgVxoAMEY1A="  # API Gateway's request id

    get = load_event("api_jwt_get")
    # API Gateway joins repeated parameters with commas, so this segment cannot be told apart there:
    assert get["queryStringParameters"]["ns"].split(",") == ["user", SUB, "travel", " 2025"]
    status, body, _ = call_api(get)
    assert status == 200, body
    assert body["namespace"] == list(NS)
    assert body["value"] == {"text": "Prefers a quiet room on a high floor, away from the elevator", "source": "chat"}
    assert body["attributes"] == {"confidence": 0.9}

    item = stack.app.store.get(TENANT, NS, "hotel")  # stored under the token's tenant
    assert item is not None and item.id == body["id"]


def test_iam_search_after_indexing(stack):
    assert call_api(load_event("api_jwt_put"))[0] == 200
    stack.drain()
    status, body, _ = call_api(load_event("api_iam_search"))
    assert status == 200, body
    assert [(m["namespace"], m["key"]) for m in body["items"]] == [(list(NS), "hotel")]
    assert body["items"][0]["score"] > 0


def test_iam_request_without_a_valid_tenant_header_is_refused(stack):
    event = load_event("api_iam_search")
    event["headers"]["x-tenant-id"] = "not a tenant!"
    status, body, _ = call_api(event)
    assert (status, body["error"]["code"]) == (400, "INVALID_ARGUMENT")


def _jwt_get(**claims: Any) -> dict[str, Any]:
    """The JWT GET event with these claims changed (None: removed), as API Gateway hands them over."""
    event = load_event("api_jwt_get")
    found = event["requestContext"]["authorizer"]["jwt"]["claims"]
    for name, value in claims.items():
        if value is None:
            found.pop(name, None)
        else:
            found[name] = value
    return event


def test_a_jwt_without_a_tenant_claim_is_401_unless_the_deployment_names_a_default(stack):
    """A Cognito access token passes the authorizer through `client_id` and has no tenant claim."""
    access_token = _jwt_get(**{"custom:tenant_id": None, "tenant_id": None, "token_use": "access"})
    status, body, _ = call_api(access_token)
    assert (status, body["error"]["code"]) == (401, "UNAUTHORIZED")
    assert "ID token" in body["error"]["message"]
    from memsvc.api.identity import Identity

    assert Identity(default_tenant="shared")(access_token).tenant_id == "shared"


def test_an_iam_request_without_a_tenant_header_is_400_unless_the_deployment_names_a_default(stack):
    event = load_event("api_iam_search")
    del event["headers"]["x-tenant-id"]
    status, body, _ = call_api(event)
    assert (status, body["error"]["code"], body["error"]["details"]) == (400, "INVALID_ARGUMENT",
                                                                         {"field": "X-Tenant-Id"})


@pytest.mark.parametrize("groups,roles", [
    ("[admin ops]", ("admin", "ops")),
    ("[ops]", ("ops",)),
    ("[x,admin]", ("x,admin",)),  # the form joins elements with spaces: a comma is inside one name
    ("[]", ()),
])
def test_api_gateways_array_form_is_split_on_whitespace_only(groups, roles):
    assert caller_from_event(_jwt_get(**{"cognito:groups": groups})).roles == roles


@pytest.mark.parametrize("tenant", ["acme\n", "", "<nil>", "null\n"])
def test_a_tenant_claim_that_is_not_exactly_a_tenant_id_is_401(stack, tenant):
    status, body, _ = call_api(_jwt_get(tenant_id=tenant))
    assert (status, body["error"]["code"]) == (401, "UNAUTHORIZED")


def test_a_named_stage_is_not_part_of_the_route(stack):
    event = load_event("api_jwt_put")
    event["requestContext"]["stage"] = "prod"
    event["rawPath"] = event["requestContext"]["http"]["path"] = "/prod/v1/memories"
    assert call_api(event)[0] == 200


def test_a_misconfigured_function_answers_500_without_details(monkeypatch, stdout):
    from functions import runtime

    for name in ("MEMSVC_TABLE_NAME", "MEMSVC_VECTOR_BUCKET", "MEMSVC_VECTOR_INDEX", "MEMSVC_KMS_KEY_ID"):
        monkeypatch.delenv(name, raising=False)
    runtime.set_app(None)  # a cold start
    status, body, _ = call_api(load_event("api_jwt_put"))
    assert (status, body["error"]["code"], body["error"]["retryable"]) == (500, "INTERNAL", True)
    out = stdout()
    failed = [line for line in log_lines(out) if line["message"] == "cold start failed"]
    assert failed and failed[0]["level"] == "ERROR"
    assert (failed[0]["error"], failed[0]["missing_variable"]) == ("KeyError", "MEMSVC_TABLE_NAME")
    assert metric(emf_documents(out), "Errors", code="INTERNAL") == [1.0]


def test_sync_index_indexes_inline_and_the_stream_then_skips_that_version(stack):
    event = load_event("api_jwt_put")
    body = json.loads(event["body"])
    event["body"] = json.dumps({**body, "sync_index": True})
    status, out, _ = call_api(event)
    assert status == 200, out
    assert vectors_by_memory(stack) == {out["id"]: 1}  # before any stream record was delivered
    embedded = len(stack.embedder.calls)

    stack.drain()
    assert [i["response"] for i in stack.invocations] == [{"batchItemFailures": []}]
    assert len(stack.embedder.calls) == embedded  # the INSERT was seen as indexed: no second embedding
    assert vectors_by_memory(stack) == {out["id"]: 1}


# -- the indexer Lambda, on the stream samples ---------------------------------------------------


def test_insert_batch_indexes_each_memory(stack):
    ids = sample_ids()
    event = play_stream_sample(stack, "stream_insert")
    assert [r["eventName"] for r in event["Records"]] == ["INSERT"] * 6
    assert index_batch(event) == {"batchItemFailures": []}
    assert vectors_by_memory(stack) == {ids[("hotel", 1)]: 1, ids[("flight", 1)]: 1, ids[("loyalty", 1)]: 1}
    assert stack.embedder.calls == [[VALUES[(k, 1)]["text"] for k in ("hotel", "flight", "loyalty")]]  # one call
    for key in ("hotel", "flight", "loyalty"):
        assert len(stack.app.store.get(TENANT, NS, key).indexed_fields) == 1


def test_modify_batch_replaces_the_old_versions_vectors(stack):
    ids = sample_ids()
    play(stack, "stream_insert")
    calls = len(stack.embedder.calls)
    assert play(stack, "stream_modify") == [{"batchItemFailures": []}]
    assert vectors_by_memory(stack) == {ids[("hotel", 2)]: 1, ids[("flight", 1)]: 1, ids[("loyalty", 1)]: 1}
    assert stack.embedder.calls[calls:] == [[VALUES[("hotel", 2)]["text"]]]  # only the new version


def test_attempt_and_index_marks_are_not_changes(stack):
    play(stack, "stream_insert")
    event = load_event("stream_modify")
    marks = [r for r in event["Records"] if r["dynamodb"]["OldImage"]["version"] == r["dynamodb"]["NewImage"]["version"]]
    assert [r["dynamodb"]["NewImage"]["chg"]["S"] for r in marks] == ["attempt"] * 3 + ["index"] * 3
    assert [change_from_stream_record(r) for r in marks] == [None] * 6
    before, calls = vectors_by_memory(stack), len(stack.embedder.calls)
    assert index_batch({"Records": marks}) == {"batchItemFailures": []}
    assert vectors_by_memory(stack) == before and len(stack.embedder.calls) == calls


def test_remove_batch_deletes_vectors(stack):
    ids = sample_ids()
    play(stack, "stream_insert", "stream_modify")
    event = play_stream_sample(stack, "stream_remove")
    kinds = [getattr(change_from_stream_record(r), "kind", None) for r in event["Records"]]
    assert kinds == [None, None, "delete", "delete"]  # attempt and index marks; API delete (a tombstone); DeleteItem
    assert index_batch(event) == {"batchItemFailures": []}
    assert vectors_by_memory(stack) == {ids[("flight", 1)]: 1}


def test_ttl_remove_is_an_expiry(stack):
    play(stack, "stream_insert", "stream_modify", "stream_remove")
    event = play_stream_sample(stack, "stream_ttl_remove")
    assert all(r["userIdentity"] == {"type": "Service", "principalId": "dynamodb.amazonaws.com"}
               for r in event["Records"])
    changes = [change_from_stream_record(r) for r in event["Records"]]
    assert changes[0].kind == "expired" and changes[0].new.deleted == "expired"
    assert changes[0].occurred_at == changes[0].old.expires_at  # when it expired, not when TTL got to it
    assert changes[1] is None  # a tombstone's retention ran out: not an event
    assert index_batch(event) == {"batchItemFailures": []}
    assert vectors_by_memory(stack) == {}


def test_a_replayed_batch_changes_nothing(stack):
    for name in STREAM_SAMPLES:
        event = play_stream_sample(stack, name)
        assert index_batch(copy.deepcopy(event)) == {"batchItemFailures": []}
        vectors, calls = vectors_by_memory(stack), len(stack.embedder.calls)
        assert index_batch(copy.deepcopy(event)) == {"batchItemFailures": []}, name
        assert vectors_by_memory(stack) == vectors, name  # nothing duplicated, nothing lost
        assert len(stack.embedder.calls) == calls, name  # nothing embedded again


def test_a_poison_record_is_reported_done_and_its_memory_quarantined(stack, stdout):
    """The indexer never fails a poison memory's record (which would hold the shard up for every
    tenant, through bisection and retries, until the on-failure queue took it): the memory is
    quarantined on its row, the batch answers no failures, the rest of it is indexed."""
    alice = Caller(tenant_id=TENANT, user_id=SUB, roles=("user",))
    stack.embedder.poison = {"poisonpill"}
    for key, text in (("hotel", "quiet room"), ("bad", "the poisonpill"), ("flight", "aisle seat")):
        stack.app.services.memories.put(alice, PutMemory(namespace=list(NS), key=key, value={"text": text}))
    stack.drain(consumers=("indexer",))

    assert [i["response"] for i in stack.invocations] == [{"batchItemFailures": []}]
    bad = stack.app.store.get(TENANT, NS, "bad")
    assert bad.index_error == "the embedding model failed on it (ValueError)" and bad.index_attempt is None
    assert vectors_by_memory(stack) == {stack.app.store.get(TENANT, NS, k).id: 1 for k in ("hotel", "flight")}
    out = stdout()
    assert metric(emf_documents(out), "Quarantined", service="memsvc-indexer") == [1.0]
    assert [line["quarantined"] for line in log_lines(out) if line["message"] == "batch"] == [1]
    # the quarantine is a change of its own: the timeline's; the indexer has nothing to do with it
    (record,) = [r for r in stack.read_stream(queue_for=())
                 if (r["dynamodb"].get("NewImage") or {}).get("chg") == {"S": "quarantine"}]
    assert change_from_stream_record(record).kind == "index_failed"
    assert index_batch({"Records": [record]}) == {"batchItemFailures": []}
    assert stack.app.store.get(TENANT, NS, "bad").index_error is not None


def test_a_redelivered_batch_whose_invocation_died_runs_its_marked_items_alone(stack):
    """Lambda redelivers a batch whose invocation was killed (a timeout, out of memory): the rows
    still carry the attempt marks the dead invocation wrote, so the retry runs each item alone."""
    alice = Caller(tenant_id=TENANT, user_id=SUB, roles=("user",))
    for key in ("hotel", "flight"):
        stack.app.services.memories.put(alice, PutMemory(namespace=list(NS), key=key, value=VALUES[(key, 1)]))
    records = stack.read_stream(queue_for=())
    rows = [stack.app.store.get(TENANT, NS, k) for k in ("hotel", "flight")]
    stack.app.store.begin_attempts(rows, "batch")  # what the dead invocation left, and nothing more

    assert index_batch({"Records": records}) == {"batchItemFailures": []}

    assert [len(call) for call in stack.embedder.calls] == [1, 1]  # one by one
    assert all(stack.app.store.get(TENANT, NS, k).index_attempt is None for k in ("hotel", "flight"))
    assert set(vectors_by_memory(stack)) == {r.id for r in rows}


def test_records_that_are_not_memories_are_skipped(stack):
    event = load_event("stream_insert")
    others = [r for r in event["Records"] if r["dynamodb"]["NewImage"]["rt"]["S"] != "item"]
    assert {r["dynamodb"]["NewImage"]["rt"]["S"] for r in others} == {"key", "namespace"}
    assert index_batch({"Records": others}) == {"batchItemFailures": []}
    assert stack.embedder.calls == []


def test_an_unreadable_record_is_reported_not_dropped(stack):
    event = play_stream_sample(stack, "stream_insert")
    broken = next(r for r in event["Records"] if r["dynamodb"]["NewImage"]["rt"]["S"] == "item")
    del broken["dynamodb"]["NewImage"]["version"]
    response = index_batch(event)
    assert response == {"batchItemFailures": [{"itemIdentifier": broken["dynamodb"]["SequenceNumber"]}]}


def test_stream_samples_match_the_table_layout():
    """The samples were captured from the code; a change of the table layout must recapture them
    (`python -m tests.aws.test_functions`)."""
    fresh = capture_stream_samples()
    for name in STREAM_SAMPLES:  # in any order: a batch's index marks are written in no fixed order
        assert sorted(_shape(fresh[name]), key=repr) == sorted(_shape(load_event(name)), key=repr), \
            f"events/{name}.json is stale"


# -- logs and metrics --------------------------------------------------------------------------

SECRET = "quokkazanzibar7731"  # a word that appears nowhere but in what a caller stored or asked


class _CurrentStdout:
    """Writes to whatever `sys.stdout` is at the time of the write."""

    def write(self, text: str) -> int:
        return sys.stdout.write(text)

    def flush(self) -> None:
        sys.stdout.flush()


@pytest.fixture
def stdout(capsys):
    """What the handlers print: their JSON log lines and EMF documents. Powertools prints EMF to
    `sys.stdout`; the loggers' handler keeps the stdout of the moment it was built, so for the
    test it writes to the current (captured) one."""
    from functions import api, indexer

    handlers = list({id(h): h for h in (api.logger.registered_handler, indexer.logger.registered_handler)}.values())
    saved = [(h, h.stream) for h in handlers]
    for h in handlers:
        h.stream = _CurrentStdout()
    capsys.readouterr()
    yield lambda: capsys.readouterr().out
    for h, stream in saved:
        h.stream = stream


def emf_documents(out: str) -> list[dict[str, Any]]:
    docs = [json.loads(line) for line in out.splitlines() if line.startswith('{"_aws"')]
    for doc in docs:  # every document is valid EMF: its metrics and dimensions are in the document
        for directive in doc["_aws"]["CloudWatchMetrics"]:
            assert all(m["Name"] in doc for m in directive["Metrics"])
            assert all(d in doc for dims in directive["Dimensions"] for d in dims)
    return docs


def log_lines(out: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in out.splitlines() if line.startswith("{") and '"_aws"' not in line]


def metric(docs: list[dict[str, Any]], name: str, **dims: str) -> list[float]:
    """Every value of metric `name` in documents whose dimensions include `dims`."""
    values = []
    for doc in docs:
        names = {m["Name"] for d in doc["_aws"]["CloudWatchMetrics"] for m in d["Metrics"]}
        if name in names and all(doc.get(k) == v for k, v in dims.items()):
            values.extend(doc[name] if isinstance(doc[name], list) else [doc[name]])
    return values


def test_api_metrics_are_labelled_with_route_templates(stack, stdout):
    assert call_api(load_event("api_jwt_put"))[0] == 200
    missing = load_event("api_jwt_get")
    missing["rawQueryString"] = missing["rawQueryString"].replace("key=hotel", "key=lost-passport")
    assert call_api(missing)[0] == 404
    stray = load_event("api_jwt_get")
    stray["rawPath"] = stray["requestContext"]["http"]["path"] = "/v1/notes/alice-diary"
    assert call_api(stray)[0] == 404
    wrong_method = load_event("api_jwt_put")
    wrong_method["requestContext"]["http"]["method"] = "PATCH"
    assert call_api(wrong_method)[0] == 405

    out = stdout()
    docs = emf_documents(out)
    assert metric(docs, "Requests", route="PUT /v1/memories", service="memsvc-api") == [1.0]
    assert metric(docs, "Requests", route="GET /v1/memories") == [1.0]
    assert metric(docs, "Requests", route="UNMATCHED") == [1.0, 1.0]
    assert metric(docs, "ClientErrors", route="GET /v1/memories") == [1.0]
    assert len(metric(docs, "Latency", route="PUT /v1/memories")) == 1
    assert metric(docs, "Errors", code="NOT_FOUND") == [1.0, 1.0]
    assert metric(docs, "Errors", code="METHOD_NOT_ALLOWED") == [1.0]
    routes = {doc.get("route") for doc in docs} - {None}
    assert routes == {"PUT /v1/memories", "GET /v1/memories", "UNMATCHED"}
    for doc in docs:  # dimension sets: per route and per service; errors per code
        dims = [d for directive in doc["_aws"]["CloudWatchMetrics"] for d in directive["Dimensions"]]
        assert sorted(map(sorted, dims)) in ([["route", "service"], ["service"]], [["code", "service"]],
                                             [["function_name", "service"]],  # ColdStart
                                             *SEED_001_DIMENSION_SETS)
    # neither the raw path nor the query nor the namespace reaches a log line or a metric
    for leaked in ("lost-passport", "alice-diary", "travel", SUB, "/v1/notes"):
        assert leaked not in out, leaked
    lines = [line for line in log_lines(out) if line["message"] == "request"]
    assert [(line["route"], line["status"], line.get("code")) for line in lines] == [
        ("PUT /v1/memories", 200, None), ("GET /v1/memories", 404, "NOT_FOUND"),
        ("UNMATCHED", 404, "NOT_FOUND"), ("UNMATCHED", 405, "METHOD_NOT_ALLOWED")]
    assert lines[0]["correlation_id"] == "LmT0qgVxoAMEY1A="  # API Gateway's request id


# seed 001's metrics (memsvc.adapters.aws.emf_metrics): per operation and per tenant, never both
SEED_001_DIMENSION_SETS = (
    [["operation", "service"], ["service", "tenant"]],  # memory.operations.total, .latency
    [["code", "operation", "service"], ["code", "service", "tenant"]],  # memory.operations.errors
    [["layer", "operation", "service"]],  # memory.search.results
)


def test_seed_001_metrics_are_emf_documents_per_operation_and_tenant(stack, stdout):
    assert call_api(load_event("api_jwt_put"))[0] == 200
    missing = load_event("api_jwt_get")
    missing["rawQueryString"] = missing["rawQueryString"].replace("key=hotel", "key=lost-passport")
    assert call_api(missing)[0] == 404
    stack.drain()  # indexed, so the search finds it
    search = load_event("api_iam_search")
    status, found, _ = call_api(search)
    assert status == 200 and len(found["items"]) == 1
    in_layer = copy.deepcopy(search)
    in_layer["body"] = json.dumps({"namespace_prefix": ["user", SUB, "memories"], "query": "quiet hotel room"})
    assert call_api(in_layer)[0] == 200  # in the user layer, where nothing is stored

    out = stdout()
    docs = emf_documents(out)
    put, get, find = "PUT /v1/memories", "GET /v1/memories", "POST /v1/memories/search"
    assert metric(docs, "memory.operations.total", operation=put, service="memsvc-api") == [1.0]
    assert metric(docs, "memory.operations.total", operation=find) == [1.0, 1.0]
    assert metric(docs, "memory.operations.total", tenant=TENANT) == [1.0, 1.0, 1.0, 1.0]
    assert len(metric(docs, "memory.operations.latency", operation=get)) == 1
    assert metric(docs, "memory.operations.errors", operation=get, code="NOT_FOUND", tenant=TENANT) == [1.0]
    assert metric(docs, "memory.operations.errors", operation=put) == []
    assert metric(docs, "memory.search.results", operation=find, layer="all") == [1.0, 0.0]
    assert metric(docs, "memory.search.results", operation=find, layer="user") == [0.0]
    seed = [d for d in docs if any(m["Name"].startswith("memory.") for c in d["_aws"]["CloudWatchMetrics"]
                                   for m in c["Metrics"])]
    for doc in seed:
        dims = [sorted(d) for c in doc["_aws"]["CloudWatchMetrics"] for d in c["Dimensions"]]
        assert sorted(dims) in SEED_001_DIMENSION_SETS, dims
        assert doc["_aws"]["CloudWatchMetrics"][0]["Namespace"] == "memsvc"
    for leaked in ("lost-passport", "travel", SUB, "quiet"):
        assert leaked not in json.dumps(seed), leaked


def test_the_api_function_counts_each_invocations_vectors(stack, stdout):
    event = load_event("api_jwt_put")
    body = json.loads(event["body"])
    for text in ("A quiet room", "A quiet room on a high floor", "A quiet room on a high floor, please"):
        event["body"] = json.dumps({**body, "value": {"text": text}, "sync_index": True})
        assert call_api(event)[0] == 200
    assert call_api(load_event("api_jwt_get"))[0] == 200
    docs = emf_documents(stdout())
    assert metric(docs, "VectorsWritten", service="memsvc-api") == [1.0, 1.0, 1.0]  # none for the GET


def test_cold_start_is_counted_once(stack, stdout):
    from aws_lambda_powertools.metrics.provider import cold_start

    cold_start.is_cold_start = True
    call_api(load_event("api_jwt_put"))
    call_api(load_event("api_jwt_get"))
    docs = emf_documents(stdout())
    assert metric(docs, "ColdStart", function_name="memsvc-api", service="memsvc-api") == [1.0]


def test_indexer_metrics_count_embedding_calls_cache_hits_and_vectors(titan_stack, stdout):
    stack, alice = titan_stack, Caller(tenant_id=TENANT, user_id=SUB, roles=("user",))
    for key in ("hotel", "flight"):
        stack.app.services.memories.put(alice, PutMemory(namespace=list(NS), key=key, value=VALUES[(key, 1)]))
    stack.drain()
    first = emf_documents(stdout())
    assert metric(first, "Changes", service="memsvc-indexer") == [2.0]
    assert metric(first, "EmbeddingCalls") == [2.0] and metric(first, "EmbeddingCacheHits") == [0.0]
    assert metric(first, "VectorsWritten") == [2.0] and metric(first, "VectorsDeleted") == [0.0]

    # the same text again (a new version): the old version's vector is taken over, so neither
    # Titan nor its cache is asked, and the old version's vector goes
    stack.app.services.memories.put(alice, PutMemory(namespace=list(NS), key="hotel", value=VALUES[("hotel", 1)]))
    stack.drain()
    out = stdout()
    second = emf_documents(out)
    assert metric(second, "EmbeddingCalls") == [] and metric(second, "EmbeddedTexts") == [0.0]
    assert metric(second, "ReusedTexts") == [1.0]
    assert metric(second, "VectorsWritten") == [1.0] and metric(second, "VectorsDeleted") == [1.0]
    batch = [line for line in log_lines(out) if line["message"] == "batch" and line.get("service") == "memsvc-indexer"]
    assert batch[-1]["changes"] == {"update": 1} and "embedding" not in batch[-1]

    # a text the cache holds, for a key whose previous version is not the same: the cache answers
    stack.app.services.memories.put(alice, PutMemory(namespace=list(NS), key="flight", value=VALUES[("hotel", 1)]))
    stack.drain()
    third = emf_documents(stdout())
    assert metric(third, "EmbeddingCalls") == [0.0] and metric(third, "EmbeddingCacheHits") == [1.0]


def test_indexer_metrics_count_entity_extraction(stack, stdout):
    """The graph step's Bedrock calls (the Converse fake answers with the pattern extractor's
    finds), a malformed answer (no graph, the change succeeds) and a throttle (the change fails and
    is delivered again)."""
    alice = Caller(tenant_id=TENANT, user_id=SUB, roles=("user",))
    put = lambda key, text: stack.app.services.memories.put(  # noqa: E731
        alice, PutMemory(namespace=list(NS), key=key, value={"text": text}))
    put("a", "Alice works on Project Atlas.")
    stack.drain()
    first = emf_documents(stdout())
    assert metric(first, "ExtractionCalls", service="memsvc-indexer") == [1.0]
    assert metric(first, "ExtractionInputTokens") == [170.0] and metric(first, "ExtractionMalformed") == [0.0]

    stack.converse.answer = "Sure! Alice works on Atlas."
    put("b", "Bob uses Kafka.")
    stack.drain()
    second = emf_documents(stdout())
    assert metric(second, "ExtractionMalformed") == [1.0] and metric(second, "ChangesFailed") == [0.0]

    stack.converse.answer, stack.converse.fail = "heuristic", "ThrottlingException"
    put("c", "Carol owns Project Zed.")
    stack.drain(max_invocations=1, consumers=("indexer",))
    third = emf_documents(stdout())
    assert metric(third, "ExtractionFailed") == [1.0] and metric(third, "ChangesFailed") == [1.0]
    stack.converse.fail = None
    stack.drain()
    assert [e.name for e in stack.app.services.graph.find_entities(
        alice, FindEntities(namespace_prefix=list(NS), names=["Project Zed"]))] == ["Project Zed"]


def test_a_stream_batch_extracts_its_memories_concurrently(stack):
    """On AWS each extraction waits on Bedrock: the indexer's graph step runs a batch's keys side
    by side (the barrier opens only when four calls are in flight at once)."""
    barrier = threading.Barrier(4, timeout=30)
    graph_step = stack.app.indexer._graph
    extractor = graph_step._extractor

    class Concurrent:
        def extract(self, text):
            barrier.wait()
            return extractor.extract(text)

    graph_step._extractor = Concurrent()
    alice = Caller(tenant_id=TENANT, user_id=SUB, roles=("user",))
    for n, name in enumerate(("Alice Smith", "Bob Stone", "Carol Diaz", "Dan Wu")):
        stack.app.services.memories.put(alice, PutMemory(namespace=list(NS), key=f"k{n}",
                                                         value={"text": f"{name} works on Project Zed."}))
    stack.drain()
    assert not barrier.broken
    found = stack.app.services.graph.find_entities(alice, FindEntities(namespace_prefix=list(NS),
                                                                       names=["Alice Smith", "Dan Wu"]))
    assert sorted(e.name for e in found) == ["Alice Smith", "Dan Wu"]


def test_recall_expands_along_the_graph_on_dynamodb(stack):
    """Recall's `graph_hops` on the AWS graph store: the keyword hit's entities, one hop on."""
    alice = Caller(tenant_id=TENANT, user_id=SUB, roles=("user",))
    for key, text in (("b", "Project A caused the memory leak."), ("c", "The memory leak was fixed by INC-42."),
                      ("d", "Bob Stone uses Kafka.")):
        stack.app.services.memories.put(alice, PutMemory(namespace=list(NS), key=key, value={"text": text}))
    stack.drain()
    found = stack.app.services.recall.recall(alice, RecallQuery(
        namespace_prefix=list(NS), query="INC-42 fixed", mode="keyword", min_score=0, limit=1, graph_hops=2))
    assert [(m.memory.key, m.graph_hops) for m in found.memories] == [("c", None), ("b", 1)]


def test_no_plaintext_in_logs_or_metrics(titan_stack, stdout, caplog):
    """A distinctive word stored in a value and in attributes and used as a search query goes
    through PUT, indexing (with throttling and retries), GET, search, an inline index and a
    failing search, all at DEBUG: it never appears in what the functions print or log."""
    from functions import api, indexer

    stack = titan_stack
    levels = [(lg, lg.level) for lg in (api.logger._logger, indexer.logger._logger, logging.getLogger("memsvc"))]
    for lg, _ in levels:
        lg.setLevel(logging.DEBUG)
    caplog.set_level(logging.DEBUG)
    try:
        put = load_event("api_jwt_put")
        body = json.loads(put["body"])
        body["value"] = {"text": f"The locker code word is {SECRET}", "note": SECRET}
        body["attributes"] = {"hint": SECRET}
        body.pop("index_fields")
        put["body"] = json.dumps(body)
        assert call_api(put)[0] == 200
        stack.titan.throttle_next = 2  # the indexer retries (and logs that it does)
        stack.drain()
        status, got, _ = call_api(load_event("api_jwt_get"))
        assert status == 200 and got["value"]["note"] == SECRET  # it is there, for the caller

        search = load_event("api_iam_search")
        search["body"] = json.dumps({"namespace_prefix": ["user", SUB], "query": f"locker {SECRET}"})
        status, found, _ = call_api(search)
        assert status == 200 and found["items"][0]["key"] == "hotel"

        body["value"] = {"text": f"New code word {SECRET} {SECRET}"}
        body["sync_index"] = True
        put["body"] = json.dumps(body)
        assert call_api(put)[0] == 200

        stack.titan.fail_next = 100  # Titan down: a semantic search fails, and says so in the logs
        search["body"] = json.dumps({"namespace_prefix": ["user", SUB], "query": f"where is {SECRET} now",
                                     "mode": "semantic"})
        status, failed, _ = call_api(search)
        assert status == 503 and failed["error"]["code"] == "EMBEDDING_FAILED"
        search["body"] = json.dumps({"namespace_prefix": ["user", SUB], "query": f"where is {SECRET} now"})
        status, degraded, _ = call_api(search)  # hybrid answers from keywords, and logs that it did
        assert status == 200 and degraded["metadata"]["degraded"] is True
    finally:
        for lg, level in levels:
            lg.setLevel(level)

    out = stdout()
    assert '"route":"PUT /v1/memories"' in out and '"message":"batch"' in out  # the capture is not empty
    assert metric(emf_documents(out), "EmbeddingCalls")  # nor are the metrics
    assert any(r.levelno == logging.INFO and "retry" in r.getMessage() for r in caplog.records) or "retry" in out
    assert SECRET not in out.lower()
    ours = [r for r in caplog.records if not r.name.startswith("moto")]  # moto plays AWS here
    logged = "\n".join(r.getMessage() + str(r.__dict__) for r in ours)
    assert ours and SECRET not in logged.lower()
    # nor does the tenant's data key (botocore at DEBUG would log KMS's answer with it)
    wrapped = stack.app.store.get_wrapped_key(TENANT)
    data_key = stack.clients.kms.decrypt(CiphertextBlob=wrapped, EncryptionContext={"memsvc:tenant": TENANT})
    for form in (base64.b64encode(data_key["Plaintext"]).decode(), data_key["Plaintext"].hex()):
        assert form not in out and form not in logged


if __name__ == "__main__":  # python -m tests.aws.test_functions: capture the stream samples again
    for name, batch in capture_stream_samples().items():
        (EVENTS / f"{name}.json").write_text(json.dumps(batch, indent=2, ensure_ascii=False) + "\n")
        print(f"wrote events/{name}.json ({len(batch['Records'])} records)", file=sys.stderr)
