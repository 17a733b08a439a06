"""`EventBridgePublisher`: requests of at most 10 entries, positional per-entry results with only
the failed entries sent again (full-jitter backoff, bounded), whole requests retried when
throttled, what is given up returned; and end to end on moto: the timeline's events reach a
queue through a rule on the bus, in the schema of docs/events.md, without values.

Per-entry failures are answered with botocore's `Stubber` (moto never fails an entry it can
parse); whole-request failures with `AwsStack.fail`."""

from __future__ import annotations

import dataclasses

import base64
import json
import re
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import boto3
import pytest
from botocore.stub import Stubber

from memsvc.adapters.aws import eventbridge
from memsvc.adapters.aws.eventbridge import EventBridgePublisher, entry_size
from memsvc.core.models import Caller, TimelineEvent
from memsvc.core.timeline import DETAIL_TYPES, KINDS, ACTION_DETAIL_TYPES, SOURCE, event_detail, put_events_entry
from memsvc.service.memories import PutMemory
from tests.conftest import ManualClock
from tests.fakes.aws_stack import EVENT_BUS, REGION, epoch

BUS = "memsvc-test-bus"
AT = datetime(2026, 3, 1, 12, 0, tzinfo=timezone.utc)
DETAIL_FIELDS = {"id", "tenant", "namespace", "namespace_path", "key", "memory_id", "version", "kind", "occurred_at", "expires_at"}
SECRET = "quokkazanzibar7731"


def event(n: int, *, kind: str = "add", tenant: str = "acme", key: str | None = None,
          namespace: tuple[str, ...] = ("user", "alice", "notes")) -> TimelineEvent:
    removed = kind in ("delete", "expired")
    return TimelineEvent(
        tenant=tenant, id=f"id-{n:04d}", kind=kind, namespace=namespace, key=key or f"k{n}",  # type: ignore[arg-type]
        memory_id=f"mem-{n:04d}", version=n + 1, changed_at=AT + timedelta(seconds=n),
        expires_at=AT + timedelta(days=30), policy_attributes={"namespace": "user", "sub": "alice", "tier": SECRET},
        value_ct=None if removed else SECRET.encode() * 3, attributes_ct=None if removed else b"attr-ct-" + SECRET.encode(),
        occurred_at=AT + timedelta(seconds=n, microseconds=1),
    )


@pytest.fixture
def client(monkeypatch):
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    return boto3.client("events", region_name=REGION)


def publisher(client, **kwargs: Any) -> tuple[EventBridgePublisher, list[float]]:
    sleeps: list[float] = []
    return EventBridgePublisher(client, BUS, sleep=sleeps.append, random=lambda: 1.0, **kwargs), sleeps


def entries(*events: TimelineEvent) -> list[dict[str, Any]]:
    return [put_events_entry(e, BUS) for e in events]


def ok(n: int) -> dict[str, Any]:
    return {"FailedEntryCount": 0, "Entries": [{"EventId": f"eb-{i}"} for i in range(n)]}


def answer(*codes: str | None) -> dict[str, Any]:
    """A PutEvents response, one result per entry in order: None accepted, else its ErrorCode."""
    return {"FailedEntryCount": sum(1 for c in codes if c),
            "Entries": [{"EventId": f"eb-{i}"} if c is None else {"ErrorCode": c, "ErrorMessage": f"{c}!"}
                        for i, c in enumerate(codes)]}


# -- the entry -----------------------------------------------------------------------------------


@pytest.fixture
def stack_clock() -> ManualClock:
    return ManualClock(datetime(2026, 5, 4, 8, 30, tzinfo=timezone.utc))


def test_an_entry_names_the_change_and_never_carries_the_value_or_attributes():
    for kind in sorted(KINDS):
        e = event(1, kind=kind)
        (entry,) = entries(e)
        assert set(entry) == {"Source", "DetailType", "Detail", "Time", "EventBusName"}
        assert (entry["Source"], entry["DetailType"], entry["EventBusName"]) == (SOURCE, DETAIL_TYPES[kind], BUS)
        assert entry["Time"] == e.occurred_at
        detail = json.loads(entry["Detail"])
        assert set(detail) == DETAIL_FIELDS
        assert detail == {"id": "id-0001", "tenant": "acme", "namespace": ["user", "alice", "notes"],
                          "namespace_path": "user/alice/notes/", "key": "k1",
                          "memory_id": "mem-0001", "version": 2, "kind": kind,
                          "occurred_at": "2026-03-01T12:00:01.000001Z", "expires_at": "2026-03-31T12:00:00.000000Z"}
        # neither the sealed value nor the attributes nor the policy attributes, in any form
        text = json.dumps(entry, default=str)
        for leaked in (SECRET, base64.b64encode(SECRET.encode()).decode(), SECRET.encode().hex()):
            assert leaked not in text


def test_the_largest_entry_the_service_can_make_is_far_below_the_limits():
    """The longest tenant, an 880-byte stored namespace and a 1024-byte key, all of characters
    JSON escapes six bytes each: one entry stays under 16 KB, ten under 256 KB."""
    worst = event(1, tenant="t" * 128, key="\x01" * 1024, namespace=("\x01",) * 220)
    size = entry_size(put_events_entry(worst, BUS))
    assert 6 * 1024 < size < 16 * 1024
    assert 10 * size < eventbridge.MAX_REQUEST_BYTES


def test_entry_size_is_counted_as_eventbridge_documents():
    entry = {"Source": "memsvc", "DetailType": "Memory Added", "Detail": '{"k":"é"}', "Time": AT}
    assert entry_size(entry) == 14 + 6 + 12 + len('{"k":"é"}'.encode())


# -- batching and retries (Stubber) ----------------------------------------------------------------


def test_events_go_ten_to_a_request_in_order(client):
    events = [event(n) for n in range(23)]
    pub, sleeps = publisher(client)
    with Stubber(client) as stub:
        for start, stop in ((0, 10), (10, 20), (20, 23)):
            stub.add_response("put_events", ok(stop - start), {"Entries": entries(*events[start:stop])})
        assert pub.publish(events) == []
        stub.assert_no_pending_responses()
    assert sleeps == []


def test_a_partly_failed_request_sends_only_the_failed_entries_again(client):
    events = [event(n) for n in range(4)]
    pub, sleeps = publisher(client)
    with Stubber(client) as stub:
        stub.add_response("put_events", answer(None, "ThrottlingException", None, "InternalFailure"),
                          {"Entries": entries(*events)})
        stub.add_response("put_events", answer(None, "InternalFailure"), {"Entries": entries(events[1], events[3])})
        stub.add_response("put_events", answer(None), {"Entries": entries(events[3])})
        assert pub.publish(events) == []
        stub.assert_no_pending_responses()
    assert sleeps == [0.1, 0.2]  # full jitter, pinned at its ceiling: base * 2**(n-1)


def test_what_still_fails_after_the_last_attempt_is_returned(client):
    events = [event(n) for n in range(3)]
    pub, sleeps = publisher(client, max_attempts=3)
    with Stubber(client) as stub:
        stub.add_response("put_events", answer("InternalFailure", None, None), {"Entries": entries(*events)})
        for _ in range(2):
            stub.add_response("put_events", answer("InternalFailure"), {"Entries": entries(events[0])})
        assert pub.publish(events) == [events[0]]
        stub.assert_no_pending_responses()
    assert sleeps == [0.1, 0.2]


def test_codes_another_attempt_cannot_fix_are_not_retried(client):
    events = [event(n) for n in range(3)]
    pub, sleeps = publisher(client)
    with Stubber(client) as stub:
        stub.add_response("put_events", answer(None, "MalformedDetail", "ThrottlingException"),
                          {"Entries": entries(*events)})
        stub.add_response("put_events", answer(None), {"Entries": entries(events[2])})
        assert pub.publish(events) == [events[1]]
        stub.assert_no_pending_responses()
    assert len(sleeps) == 1


def test_failures_in_one_request_do_not_hold_back_the_next(client):
    events = [event(n) for n in range(12)]
    pub, _ = publisher(client, max_attempts=1)
    with Stubber(client) as stub:
        stub.add_response("put_events", answer(*(["InternalFailure"] + [None] * 9)), {"Entries": entries(*events[:10])})
        stub.add_response("put_events", ok(2), {"Entries": entries(*events[10:])})
        assert pub.publish(events) == [events[0]]


def test_a_request_still_throttled_after_botocores_retries_gives_up_its_events(client):
    """Whole requests are botocore's to retry (standard mode); the publisher adds no loop of its own."""
    events = [event(n) for n in range(2)]
    pub, sleeps = publisher(client)
    with Stubber(client) as stub:
        stub.add_client_error("put_events", "ThrottlingException", "Rate exceeded", 400)
        assert pub.publish(events) == events
        stub.assert_no_pending_responses()
    assert sleeps == []


def test_a_request_refused_for_good_gives_up_its_events_at_once(client):
    events = [event(n) for n in range(12)]
    pub, sleeps = publisher(client)
    with Stubber(client) as stub:
        stub.add_client_error("put_events", "AccessDeniedException", "no", 400)
        stub.add_response("put_events", ok(2), {"Entries": entries(*events[10:])})
        assert pub.publish(events) == events[:10]
    assert sleeps == []


def test_a_missing_result_counts_as_a_failure(client):
    events = [event(n) for n in range(2)]
    pub, _ = publisher(client, max_attempts=2)
    with Stubber(client) as stub:
        stub.add_response("put_events", {"FailedEntryCount": 0, "Entries": [{"EventId": "eb-0"}]},
                          {"Entries": entries(*events)})
        stub.add_response("put_events", ok(1), {"Entries": entries(events[1])})
        assert pub.publish(events) == []


def test_requests_are_also_split_by_size(client, monkeypatch):
    events = [event(n) for n in range(5)]
    one = entry_size(entries(events[0])[0])
    monkeypatch.setattr(eventbridge, "MAX_REQUEST_BYTES", 2 * one + one // 2)  # two entries fit, not three
    pub, _ = publisher(client)
    with Stubber(client) as stub:
        for start, stop in ((0, 2), (2, 4), (4, 5)):
            stub.add_response("put_events", ok(stop - start), {"Entries": entries(*events[start:stop])})
        assert pub.publish(events) == []
        stub.assert_no_pending_responses()


def test_nothing_to_publish_sends_nothing(client):
    pub, _ = publisher(client)
    with Stubber(client) as stub:
        assert pub.publish([]) == []
        stub.assert_no_pending_responses()


# -- on moto: the bus, a rule, a queue -------------------------------------------------------------


def test_the_publisher_on_moto_reaches_a_rule_target(stack):
    events = [event(n, kind=k) for n, k in enumerate(sorted(KINDS) * 3)]  # 12: two requests
    pub = EventBridgePublisher(stack.clients.events, EVENT_BUS)
    assert pub.publish(events) == []
    got = stack.published()
    assert [(e["source"], e["detail-type"], e["detail"]) for e in got] == [
        (SOURCE, DETAIL_TYPES[e.kind], event_detail(e)) for e in events]


def test_a_refused_put_events_returns_every_event(stack):
    injected = stack.fail("events", "PutEvents", code="AccessDeniedException", status=400)
    pub = EventBridgePublisher(stack.clients.events, EVENT_BUS)
    events = [event(n) for n in range(3)]
    assert pub.publish(events) == events
    assert injected.count == 1 and stack.published() == []


def test_the_service_story_as_the_bus_delivers_it(stack):
    """Add, update, delete and TTL expiry through the service: one envelope each on the bus,
    source `memsvc`, the detail-type of its kind, the documented detail and no value."""
    alice = Caller(tenant_id="acme", user_id="alice", roles=("user",))
    ns = ["user", "alice", "trips"]
    service = stack.app.services.memories
    first = service.put(alice, PutMemory(namespace=ns, key="hotel", value={"text": f"quiet room {SECRET}"},
                                         attributes={"source": SECRET}))
    stack.clock.advance(1)
    second = service.put(alice, PutMemory(namespace=ns, key="hotel", value={"text": f"high floor {SECRET}"}))
    stack.clock.advance(1)
    service.delete(alice, ns, "hotel")
    stack.clock.advance(1)
    flight = service.put(alice, PutMemory(namespace=ns, key="flight", value={"text": SECRET}, ttl_seconds=60))
    stack.clock.advance(120)
    assert stack.expire(epoch(stack.clock.now())) == 1
    stack.drain(consumers=("timeline",))
    assert all(i["response"] == {"batchItemFailures": []} for i in stack.timeline_invocations)

    got = stack.published()
    assert [(e["source"], e["detail-type"]) for e in got] == [
        ("memsvc", "Memory Added"), ("memsvc", "Memory Updated"), ("memsvc", "Memory Deleted"),
        ("memsvc", "Memory Added"), ("memsvc", "Memory Expired")]
    details = [e["detail"] for e in got]
    assert all(set(d) == DETAIL_FIELDS for d in details)
    assert [(d["key"], d["kind"], d["version"]) for d in details] == [
        ("hotel", "add", 1), ("hotel", "update", 2), ("hotel", "delete", 3), ("flight", "add", 1),
        ("flight", "expired", 2)]
    assert [d["memory_id"] for d in details] == [first.id, second.id, second.id, flight.id, flight.id]
    assert all(d["tenant"] == "acme" and d["namespace"] == ns for d in details)
    assert len({d["id"] for d in details}) == 5
    assert details[0]["id"] == first.id  # an add's event id is the id of the row it wrote
    stamps = [datetime.fromisoformat(d["occurred_at"].replace("Z", "+00:00")) for d in details]
    assert stamps == sorted(stamps) and len(set(stamps)) == 5
    assert details[3]["expires_at"] is not None and details[4]["expires_at"] == details[3]["expires_at"]
    assert stamps[4] == datetime.fromisoformat(details[4]["expires_at"].replace("Z", "+00:00"))  # when it expired
    assert SECRET not in json.dumps(got)
    # the events on the bus are the events in the log
    logged = list(stack.app.timeline.log.scan("acme", (), kinds=KINDS))
    assert [event_detail(e) for e in logged] == details


# -- docs/events.md and the bus samples in events/ ---------------------------------------------------

ROOT = Path(__file__).resolve().parents[2]
BUS_SAMPLES = ("bus_memory_added", "bus_memory_deleted", "bus_memory_expired")


def bus_sample(name: str) -> dict[str, Any]:
    return json.loads((ROOT / "events" / f"{name}.json").read_text())


def documented_patterns() -> list[tuple[dict[str, Any], set[str]]]:
    """(pattern, samples it matches) from the table under "## Rule patterns" in docs/events.md."""
    doc = (ROOT / "docs" / "events.md").read_text()
    section = doc[doc.index("## Rule patterns"):]
    rows = []
    for line in section.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == 3 and cells[1].startswith("`{"):
            matched = set() if cells[2].startswith("none") else {
                name for name in ("added", "deleted", "expired") if re.search(rf"\b{name}\b", cells[2])}
            rows.append((json.loads(cells[1].strip("`")), matched))
    return rows


def test_the_bus_samples_are_what_the_timeline_publishes(stack):
    from functions import timeline
    from tests.aws.test_functions import STREAM_SAMPLES, play_stream_sample
    from tests.fakes.aws_stack import TimelineContext

    for name in STREAM_SAMPLES:
        assert timeline.handler(play_stream_sample(stack, name), TimelineContext()) == {"batchItemFailures": []}
    published = {e["detail"]["id"]: e for e in stack.published()}
    for name in BUS_SAMPLES:
        sample = bus_sample(name)
        got = published[sample["detail"]["id"]]
        assert {k: got[k] for k in ("source", "detail-type", "time", "detail")} == {
            k: sample[k] for k in ("source", "detail-type", "time", "detail")}, name
        assert set(sample) == {"version", "id", "detail-type", "source", "account", "time", "region", "resources",
                               "detail"}
        assert sample["time"] == sample["detail"]["occurred_at"][:19] + "Z"
    doc = (ROOT / "docs" / "events.md").read_text()
    example = doc[doc.index("```json") + len("```json"):]
    assert json.loads(example[: example.index("```")]) == bus_sample("bus_memory_added")


def test_the_documented_rule_patterns_match_as_documented(stack):
    """Each pattern of docs/events.md as a rule on the moto bus, the three samples put on it:
    each rule's queue gets exactly the samples the table says."""
    events, sqs = stack.clients.events, stack.sqs
    patterns = documented_patterns()
    assert len(patterns) >= 6
    queues = []
    for n, (pattern, _) in enumerate(patterns):
        url = sqs.create_queue(QueueName=f"doc-pattern-{n}")["QueueUrl"]
        arn = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
        events.put_rule(Name=f"doc-pattern-{n}", EventBusName=EVENT_BUS, EventPattern=json.dumps(pattern))
        events.put_targets(Rule=f"doc-pattern-{n}", EventBusName=EVENT_BUS, Targets=[{"Id": "q", "Arn": arn}])
        queues.append(url)
    samples = {name.removeprefix("bus_memory_"): bus_sample(name) for name in BUS_SAMPLES}
    response = events.put_events(Entries=[
        {"Source": s["source"], "DetailType": s["detail-type"], "Detail": json.dumps(s["detail"]),
         "EventBusName": EVENT_BUS} for s in samples.values()])
    assert response["FailedEntryCount"] == 0
    by_id = {s["detail"]["id"]: name for name, s in samples.items()}
    for (pattern, expected), url in zip(patterns, queues):
        got = set()
        while messages := sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10).get("Messages"):
            for m in messages:
                got.add(by_id[json.loads(m["Body"])["detail"]["id"]])
                sqs.delete_message(QueueUrl=url, ReceiptHandle=m["ReceiptHandle"])
        assert got == expected, pattern


def test_the_documented_schema_is_the_published_one():
    doc = (ROOT / "docs" / "events.md").read_text()
    section = doc[doc.index("## The detail"):doc.index("## Delivery")]
    fields = set(re.findall(r"^\| `(\w+)` \|", section, flags=re.M))
    # `action` only on versions remember wrote, `reason` only on index_failed
    assert fields == DETAIL_FIELDS | {"action", "reason"}
    assert set(event_detail(event(1))) == DETAIL_FIELDS
    remembered = dataclasses.replace(event(1), action="superseded")
    assert set(event_detail(remembered)) == DETAIL_FIELDS | {"action"}
    assert put_events_entry(remembered, "bus")["DetailType"] == "memory.superseded"
    failed = dataclasses.replace(event(1), kind="index_failed", reason="indexing it raised ValueError")
    assert set(event_detail(failed)) == DETAIL_FIELDS | {"reason"}
    assert put_events_entry(failed, "bus")["DetailType"] == "memory.index_failed"
    for kind, detail_type in DETAIL_TYPES.items():
        assert f"`{detail_type}`" in doc and f"`{kind}`" in doc
    for action, detail_type in ACTION_DETAIL_TYPES.items():
        assert f"`{detail_type}`" in doc and f"`{action}`" in doc
    assert f"`{SOURCE}`" in doc
