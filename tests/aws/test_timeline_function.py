"""The timeline Lambda (`functions/timeline.py`) on moto's real stream records: changes become
events in the log (on the table) and on the bus; a record whose event is not recorded or not
published is reported as a partial batch failure, and redelivered (`AwsStack.drain`) it records
nothing twice; an unreadable record is reported, not dropped; the stream samples of `events/`
replay to the same events; metrics and logs count and never leak."""

from __future__ import annotations

import copy
import json
import logging
from typing import Any

import pytest
from botocore.awsrequest import AWSResponse

from memsvc.adapters.aws.dynamo_store import change_from_stream_record
from memsvc.core.models import Caller
from memsvc.core.timeline import KINDS, event_detail
from memsvc.service.memories import PutMemory
from tests.aws.test_functions import (
    NS,
    STREAM_SAMPLES,
    SUB,
    TENANT,
    _CurrentStdout,
    emf_documents,
    log_lines,
    metric,
    play_stream_sample,
    sample_ids,
)
from tests.fakes.aws_stack import TimelineContext, aws_stack, epoch
from tests.fakes.embedder import HashEmbedder

ALICE = Caller(tenant_id=TENANT, user_id=SUB, roles=("user",))
SECRET = "quokkazanzibar7731"


@pytest.fixture
def stdout(capsys):
    from functions import timeline

    handler = timeline.logger.registered_handler
    saved, handler.stream = handler.stream, _CurrentStdout()
    capsys.readouterr()
    yield lambda: capsys.readouterr().out
    handler.stream = saved


def apply(event: dict[str, Any]) -> dict[str, Any]:
    from functions import timeline

    return timeline.handler(copy.deepcopy(event), TimelineContext())


def put(stack, key: str, text: str = "some text", **kwargs: Any):
    return stack.app.services.memories.put(ALICE, PutMemory(namespace=list(NS), key=key, value={"text": text}, **kwargs))


def logged(stack, tenant: str = TENANT) -> list[dict[str, Any]]:
    return [event_detail(e) for e in stack.app.timeline.log.scan(tenant, (), kinds=KINDS)]


def failures(stack) -> list[list[str]]:
    return [[f["itemIdentifier"] for f in i["response"]["batchItemFailures"]] for i in stack.timeline_invocations]


def seq_of(records: list[dict[str, Any]], key: str, event_name: str = "INSERT") -> str:
    def image(r: dict[str, Any]) -> dict[str, Any]:
        return r["dynamodb"].get("NewImage") or r["dynamodb"].get("OldImage") or {}

    return next(r["dynamodb"]["SequenceNumber"] for r in records if r["eventName"] == event_name
                and image(r).get("rt", {}).get("S") == "item" and image(r)["key"]["S"] == key)


def reject_entries(stack, code: str = "InternalFailure"):
    """EventBridge answering 200 with every entry refused (`ErrorCode` per entry), as PutEvents does
    when it takes part of a request; returns a callable that removes the hook."""
    client = stack.clients.events
    name, uid = "before-call.eventbridge.PutEvents", "reject-every-entry"

    def answer(params: dict[str, Any], **_: Any):
        n = len(json.loads(params["body"])["Entries"])
        parsed = {"FailedEntryCount": n, "Entries": [{"ErrorCode": code, "ErrorMessage": "no"}] * n,
                  "ResponseMetadata": {"HTTPStatusCode": 200, "HTTPHeaders": {}, "RetryAttempts": 0}}
        return AWSResponse(params["url"], 200, {}, None), parsed

    client.meta.events.register(name, answer, unique_id=uid)
    return lambda: client.meta.events.unregister(name, unique_id=uid)


# -- the story ---------------------------------------------------------------------------------


def test_each_change_becomes_one_event_in_the_log_and_on_the_bus(stack):
    hotel = put(stack, "hotel")
    stack.clock.advance(1)
    put(stack, "hotel", "another text")
    stack.clock.advance(1)
    stack.app.services.memories.delete(ALICE, list(NS), "hotel")
    stack.clock.advance(1)
    put(stack, "flight", ttl_seconds=30)
    stack.clock.advance(60)
    stack.expire(epoch(stack.clock.now()))
    stack.drain(consumers=("timeline",))

    assert failures(stack) == [[]]
    events = logged(stack)
    assert [(e["key"], e["kind"], e["version"]) for e in events] == [
        ("hotel", "add", 1), ("hotel", "update", 2), ("hotel", "delete", 3), ("flight", "add", 1),
        ("flight", "expired", 2)]
    assert events[0]["id"] == hotel.id
    assert [e["detail"] for e in stack.published()] == events
    # the indexer has not run: the consumers are independent
    assert stack.invocations == [] and stack.pending["indexer"]


def test_the_log_keeps_the_ciphertext_the_bus_gets_none(stack):
    put(stack, "hotel", f"the code word is {SECRET}")
    stack.drain(consumers=("timeline",))
    (event,) = stack.app.timeline.log.scan(TENANT, (), kinds=KINDS)
    stored = stack.app.store.get(TENANT, NS, "hotel")
    assert event.value_ct == stored.value_ct and event.value_ct  # copied, sealed, never decrypted
    assert SECRET not in json.dumps(stack.published())


def test_records_that_are_no_change_are_skipped(stack):
    put(stack, "hotel")
    stack.drain()  # both consumers: the indexer's mark and the timeline's own rows are new records
    before = logged(stack)
    records = stack.read_stream(queue_for=())
    assert records and all(change_from_stream_record(r) is None for r in records)
    assert {(r["dynamodb"].get("NewImage") or {}).get("rt", {}).get("S") for r in records} >= {
        "item", "timeline-id", "event", "timeline-clock"}
    assert apply({"Records": records}) == {"batchItemFailures": []}
    assert logged(stack) == before and len(stack.published()) == 1


# -- replays -------------------------------------------------------------------------------------


def test_a_replayed_batch_records_nothing_twice(stack):
    for key in ("hotel", "flight", "loyalty"):
        put(stack, key)
        stack.clock.advance(1)
    stack.app.services.memories.delete(ALICE, list(NS), "flight")
    records = stack.read_stream(queue_for=())
    assert apply({"Records": records}) == {"batchItemFailures": []}
    first = logged(stack)
    stack.clock.advance(3600)  # a late replay must keep the stamps it was given
    assert apply({"Records": records}) == {"batchItemFailures": []}
    assert logged(stack) == first and len(first) == 4
    # at least once on the bus: published again, under the same ids and stamps
    published = [e["detail"] for e in stack.published()]
    assert published == first + first


def test_an_older_batch_replayed_after_a_newer_one(stack):
    put(stack, "hotel")
    older = stack.read_stream(queue_for=())
    stack.clock.advance(5)
    put(stack, "hotel", "v2")
    newer = stack.read_stream(queue_for=())
    assert apply({"Records": older}) == {"batchItemFailures": []}
    assert apply({"Records": newer}) == {"batchItemFailures": []}
    assert apply({"Records": older}) == {"batchItemFailures": []}
    assert [(e["kind"], e["version"]) for e in logged(stack)] == [("add", 1), ("update", 2)]


# -- failures --------------------------------------------------------------------------------------


def test_put_events_refusing_the_entries_reports_the_records_and_redelivery_recovers(stack):
    put(stack, "hotel")
    put(stack, "flight")
    records = stack.read_stream(queue_for=("timeline",))
    remove = reject_entries(stack)
    stack.drain(consumers=("timeline",))
    # recorded, not published: both changes reported, Lambda retries from the first
    assert failures(stack) == [[seq_of(records, "hotel"), seq_of(records, "flight")]]
    assert len(stack.sleeps) == 4  # the publisher's own retries (5 attempts) before it gave up
    assert [e["key"] for e in logged(stack)] == ["hotel", "flight"]
    assert stack.published() == []
    assert stack.pending["timeline"][0]["dynamodb"]["SequenceNumber"] == seq_of(records, "hotel")

    remove()
    stack.drain(consumers=("timeline",))
    assert failures(stack)[-1] == []
    assert [e["key"] for e in logged(stack)] == ["hotel", "flight"]  # nothing recorded twice
    assert [e["detail"]["key"] for e in stack.published()] == ["hotel", "flight"]


def test_only_the_records_whose_events_failed_are_reported(stack):
    put(stack, "hotel")
    put(stack, "flight")
    records = stack.read_stream(queue_for=())
    flight_id = stack.app.store.get(TENANT, NS, "flight").id
    client = stack.clients.events

    def refuse_flight(params: dict[str, Any], **_: Any):
        entries = json.loads(params["body"])["Entries"]
        results = [{"ErrorCode": "InternalFailure", "ErrorMessage": "no"} if json.loads(e["Detail"])["id"] == flight_id
                   else {"EventId": "ok"} for e in entries]
        parsed = {"FailedEntryCount": sum("ErrorCode" in r for r in results), "Entries": results,
                  "ResponseMetadata": {"HTTPStatusCode": 200, "HTTPHeaders": {}, "RetryAttempts": 0}}
        return AWSResponse(params["url"], 200, {}, None), parsed

    client.meta.events.register("before-call.eventbridge.PutEvents", refuse_flight, unique_id="refuse-flight")
    try:
        response = apply({"Records": records})
    finally:
        client.meta.events.unregister("before-call.eventbridge.PutEvents", unique_id="refuse-flight")
    assert response == {"batchItemFailures": [{"itemIdentifier": seq_of(records, "flight")}]}


def test_a_put_events_refused_for_good_is_reported_at_once(stack):
    put(stack, "hotel")
    records = stack.read_stream(queue_for=())
    injected = stack.fail("events", "PutEvents", code="AccessDeniedException", status=400)
    assert apply({"Records": records}) == {"batchItemFailures": [{"itemIdentifier": seq_of(records, "hotel")}]}
    assert injected.count == 1 and stack.sleeps == []


def test_a_failed_log_write_reports_every_change_of_the_batch(stack):
    put(stack, "hotel")
    put(stack, "flight")
    records = stack.read_stream(queue_for=())
    injected = stack.fail("dynamodb", "TransactWriteItems", code="ValidationException", status=400)
    response = apply({"Records": records})
    assert response == {"batchItemFailures": [{"itemIdentifier": seq_of(records, "hotel")},
                                              {"itemIdentifier": seq_of(records, "flight")}]}
    assert injected.count >= 1 and stack.published() == []
    injected.remove()
    assert apply({"Records": records}) == {"batchItemFailures": []}
    assert [e["key"] for e in logged(stack)] == ["hotel", "flight"]


def test_an_unreadable_record_is_reported_not_dropped(stack):
    put(stack, "hotel")
    put(stack, "flight")
    records = stack.read_stream(queue_for=())
    broken = next(r for r in records if r["eventName"] == "INSERT"
                  and r["dynamodb"]["NewImage"].get("key", {}).get("S") == "hotel")
    del broken["dynamodb"]["NewImage"]["version"]
    assert apply({"Records": records}) == {"batchItemFailures": [{"itemIdentifier": seq_of(records, "hotel")}]}
    assert [e["key"] for e in logged(stack)] == ["flight"]


# -- the stream samples ----------------------------------------------------------------------------


def test_the_stream_samples_become_their_events(stack):
    ids = sample_ids()
    kinds = []
    for name in STREAM_SAMPLES:
        event = play_stream_sample(stack, name)
        seen = len(stack.published())
        assert apply(event) == {"batchItemFailures": []}, name
        kinds.append([(e["detail"]["key"], e["detail"]["kind"]) for e in stack.published()[seen:]])
        before = logged(stack)
        assert apply(event) == {"batchItemFailures": []}, name
        assert logged(stack) == before, name  # replayed: nothing new in the log
    assert kinds == [
        [("hotel", "add"), ("flight", "add"), ("loyalty", "add")],
        [("hotel", "update")],
        [("hotel", "delete"), ("loyalty", "delete")],
        [("flight", "expired")],
    ]
    events = logged(stack)
    assert len(events) == 7 and len({e["id"] for e in events}) == 7
    assert events[0]["id"] == ids[("hotel", 1)] and events[3]["memory_id"] == ids[("hotel", 2)]


# -- metrics and logs ------------------------------------------------------------------------------


def test_metrics_count_events_by_kind_and_what_eventbridge_took(stack, stdout, caplog):
    caplog.set_level(logging.DEBUG)
    put(stack, "hotel", SECRET)
    put(stack, "flight", SECRET)
    stack.app.services.memories.delete(ALICE, list(NS), "flight")
    stack.drain(consumers=("timeline",))
    remove = reject_entries(stack)
    put(stack, "loyalty", SECRET)
    stack.drain(consumers=("timeline",))
    remove()

    out = stdout()
    docs = emf_documents(out)
    svc = {"service": "memsvc-timeline"}
    assert metric(docs, "Events", **svc) == [3.0, 1.0]
    assert metric(docs, "AddEvents", **svc) == [2.0, 1.0]
    assert metric(docs, "DeleteEvents", **svc) == [1.0, 0.0]
    assert metric(docs, "ExpiredEvents", **svc) == [0.0, 0.0]
    assert metric(docs, "EventsPublished", **svc) == [3.0, 0.0]
    assert metric(docs, "EventsFailed", **svc) == [0.0, 1.0]
    assert metric(docs, "EventsRejected", **svc) == [0.0, 5.0]  # one entry, five attempts
    assert metric(docs, "PutEventsCalls", **svc) == [1.0, 5.0]
    lines = [line for line in log_lines(out) if line["message"] == "batch"]
    assert [(line["level"], line["events"], line["published"]) for line in lines] == [
        ("INFO", {"add": 2, "delete": 1}, 3), ("WARNING", {"add": 1}, 0)]
    assert len(lines[1]["failed"]) == 1
    for leaked in (SECRET, "hotel", "flight", "loyalty", "travel"):
        assert leaked not in out, leaked
    ours = "\n".join(r.getMessage() + str(r.__dict__) for r in caplog.records if not r.name.startswith("moto"))
    assert SECRET not in ours


# -- the fake: moto's transactions, rolled back by item ---------------------------------------------


def _cancelled_transaction(db, table: str) -> tuple[dict[str, Any], list[str]]:
    """Put a row, then a transaction (a put, an update, a put whose condition fails) that DynamoDB
    cancels; returns what the table holds afterwards and the cancellation reasons."""
    from botocore.exceptions import ClientError

    db.put_item(TableName=table, Item={"pk": {"S": "p"}, "sk": {"S": "old"}, "n": {"N": "1"}})
    db.put_item(TableName=table, Item={"pk": {"S": "p"}, "sk": {"S": "taken"}})
    try:
        db.transact_write_items(TransactItems=[
            {"Put": {"TableName": table, "Item": {"pk": {"S": "p"}, "sk": {"S": "new"}}}},
            {"Update": {"TableName": table, "Key": {"pk": {"S": "p"}, "sk": {"S": "old"}},
                        "UpdateExpression": "SET n = :n", "ExpressionAttributeValues": {":n": {"N": "2"}}}},
            {"Put": {"TableName": table, "Item": {"pk": {"S": "p"}, "sk": {"S": "taken"}, "x": {"S": "y"}},
                     "ConditionExpression": "attribute_not_exists(pk)"}},
        ])
    except ClientError as exc:
        reasons = [r["Code"] for r in exc.response["CancellationReasons"]]
    else:
        raise AssertionError("the transaction should have been cancelled")
    rows = db.scan(TableName=table)["Items"]
    return {r["sk"]["S"]: r for r in rows if r["pk"]["S"] == "p"}, reasons


def test_the_fakes_transactions_answer_and_roll_back_as_moto_does(monkeypatch):
    import boto3
    from moto import mock_aws

    from memsvc.adapters.aws.dynamo_store import table_definition

    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    with mock_aws():  # moto as it is
        db = boto3.client("dynamodb", region_name="us-east-1")
        db.create_table(**table_definition("plain"))
        expected = _cancelled_transaction(db, "plain")
    with aws_stack(dimension=HashEmbedder().dimension, embedder=HashEmbedder()) as stack:  # item-level rollback
        from moto.dynamodb.models import dynamodb_backends

        db = stack.clients.dynamodb
        db.create_table(**table_definition("patched"))
        backend = dynamodb_backends["123456789012"]["us-east-1"]
        table = backend.tables["patched"]
        records_before = len(table.stream_shard.items)
        got = _cancelled_transaction(db, "patched")
        assert backend.tables["patched"] is table  # rolled back in place, not replaced
        assert len(table.stream_shard.items) == records_before + 2  # the two puts before it only
    assert got == expected
    assert got[0] == {"old": {"pk": {"S": "p"}, "sk": {"S": "old"}, "n": {"N": "1"}},
                      "taken": {"pk": {"S": "p"}, "sk": {"S": "taken"}}}
    assert got[1] == ["None", "None", "ConditionalCheckFailed"]
