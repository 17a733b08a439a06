"""`DynamoEventLog` on moto: stamps, exactly-once recording, chunked transactions, concurrent
recorders, and scans (order, filters, cursors, prefix scoping, tenant isolation, the horizon)."""

from __future__ import annotations

import itertools
import threading
from dataclasses import replace
from datetime import datetime, timedelta, timezone
from typing import Any

import pytest
from botocore.exceptions import ClientError
from moto import mock_aws

from memsvc.adapters.aws import dynamo_timeline
from memsvc.adapters.aws.dynamo_store import table_definition
from memsvc.adapters.aws.dynamo_timeline import DynamoEventLog
from memsvc.core.errors import Conflict, InvalidArgument, RateLimited
from memsvc.core.models import TimelineEvent, to_epoch_us
from memsvc.core.namespaces import encode_namespace
from memsvc.core.timeline import KINDS
from tests.fakes.aws_stack import _AtomicWrites, moto_client

TABLE = "timeline-test"
T0 = datetime(2026, 1, 1, tzinfo=timezone.utc)
US = timedelta(microseconds=1)
_ids = itertools.count()


def event(ns=("user", "alice"), *, at: datetime = T0, kind: str = "add", tenant: str = "acme",
          value: bytes | None = b"value-ct", attributes: bytes | None = b"attrs-ct", id: str | None = None,
          key: str = "k") -> TimelineEvent:
    removed = kind in ("delete", "expired")
    return TimelineEvent(
        tenant=tenant, id=id or f"ev-{next(_ids):06d}", kind=kind, namespace=tuple(ns), key=key,
        memory_id="mem-1", version=1, changed_at=at, expires_at=T0 + timedelta(days=3),
        policy_attributes={"owner": "alice"},
        value_ct=None if removed else value, attributes_ct=None if removed else attributes,
    )


class Spy:
    """A client proxy that can run code before a call and rewrite its error (failure injection)."""

    def __init__(self, client: Any) -> None:
        self._client = client
        self.before: dict[str, Any] = {}
        self.calls: dict[str, list[dict[str, Any]]] = {}
        self.strip_reasons = False

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self._client, name)

        def call(**kwargs: Any) -> Any:
            self.calls.setdefault(name, []).append(kwargs)
            if name in self.before:
                self.before[name](**kwargs)
            try:
                return attr(**kwargs)
            except ClientError as exc:
                if self.strip_reasons:
                    exc.response.pop("CancellationReasons", None)
                raise

        return call


class Serialised(_AtomicWrites):
    """Reads under the writers' lock too. moto applies a transaction (even one UpdateItem) a step
    at a time, so a concurrent GetItem can see the clock item created but not yet set; DynamoDB's
    GetItem is serializable with transactions, which is what the horizon argument relies on."""

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self._client, name)
        if name == "meta" or not callable(attr):
            return attr

        def locked(*args: Any, **kwargs: Any) -> Any:
            with self._lock:
                return attr(*args, **kwargs)

        return locked


@pytest.fixture
def db():
    with mock_aws():
        client = moto_client("dynamodb", aws_access_key_id="testing", aws_secret_access_key="testing")
        client.create_table(**table_definition(TABLE))
        yield Spy(Serialised(client))


@pytest.fixture
def log(db) -> DynamoEventLog:
    return DynamoEventLog(db, TABLE)


def rows(db, pk: str) -> list[dict[str, Any]]:
    return db._client.query(TableName=TABLE, KeyConditionExpression="pk = :p",
                            ExpressionAttributeValues={":p": {"S": pk}}, ConsistentRead=True)["Items"]


def scan_all(log, tenant="acme", prefix=(), **kw) -> list[TimelineEvent]:
    return list(log.scan(tenant, tuple(prefix), kinds=kw.pop("kinds", KINDS), **kw))


def ids(events) -> list[str]:
    return [e.id for e in events]


# -- record -------------------------------------------------------------------------------------


def test_stamps_are_changed_at_when_in_order_and_strictly_increase(log):
    events = [event(at=T0 + timedelta(seconds=s)) for s in (1, 2, 3)]
    recorded = log.record(events)
    assert [e.occurred_at for e in recorded] == [e.changed_at for e in events]
    assert [replace(e, occurred_at=None) for e in recorded] == events
    assert ids(scan_all(log)) == ids(events)


def test_late_and_same_microsecond_events_move_one_microsecond_past_the_last_stamp(log):
    first = log.record([event(at=T0 + timedelta(seconds=10))])[0]
    late, twin = log.record([event(at=T0), event(at=T0)])
    assert late.occurred_at == first.occurred_at + US
    assert twin.occurred_at == first.occurred_at + 2 * US
    assert late.changed_at == T0  # the change's own time is kept
    assert [e.occurred_at for e in scan_all(log)] == [first.occurred_at, late.occurred_at, twin.occurred_at]


def test_a_replay_records_nothing_new_and_returns_the_stored_stamps(log, db):
    batch = [event(at=T0 + timedelta(seconds=s)) for s in (1, 2, 3)]
    original = log.record(batch)
    clock = rows(db, "T#acme#TL")
    fresh = event(at=T0)
    # The same ids again (one with a later changed_at, as a redelivered change would not have,
    # but the log goes by id), plus a new event in between.
    again = log.record([batch[0], fresh, batch[1], batch[2]])
    assert [again[0].occurred_at, again[2].occurred_at, again[3].occurred_at] == [e.occurred_at for e in original]
    assert again[1].occurred_at == original[-1].occurred_at + US
    assert int(rows(db, "T#acme#TL")[0]["last"]["N"]) == int(clock[0]["last"]["N"]) + 1
    for e in batch + [fresh]:
        assert len(rows(db, f"T#acme#TL#ID#{e.id}")) == 1
    everything = rows(db, "T#acme#TL#ALL")
    assert sorted(r["id"]["S"] for r in everything) == sorted(ids(batch + [fresh]))
    assert len(rows(db, "T#acme#TL#R#user\x1ealice")) == 4
    assert ids(scan_all(log)) == ids(batch) + [fresh.id]
    # A pure replay writes nothing, the clock included.
    assert [e.occurred_at for e in log.record(batch)] == [e.occurred_at for e in original]
    assert int(rows(db, "T#acme#TL")[0]["last"]["N"]) == int(clock[0]["last"]["N"]) + 1


def test_a_replay_is_found_without_cancellation_reasons(log, db):
    batch = [event(at=T0 + timedelta(seconds=s)) for s in (1, 2)]
    original = log.record(batch)
    db.strip_reasons = True
    fresh = event(at=T0 + timedelta(seconds=5))
    again = log.record([batch[0], fresh, batch[1]])
    assert [again[0].occurred_at, again[2].occurred_at] == [e.occurred_at for e in original]
    assert again[1].occurred_at == fresh.changed_at
    assert len(rows(db, "T#acme#TL#ALL")) == 3


def test_an_id_repeated_within_a_batch_is_one_event(log, db):
    e = event()
    first, second = log.record([e, e])
    assert first.occurred_at == second.occurred_at
    assert len(rows(db, "T#acme#TL#ALL")) == 1


def test_a_concurrent_recorder_moves_the_clock_and_this_one_stamps_after_it(log, db):
    other = DynamoEventLog(db._client, TABLE)
    theirs: list[TimelineEvent] = []

    def race(**_: Any) -> None:
        db.before.pop("transact_write_items")  # once
        theirs.extend(other.record([event(at=T0 + timedelta(seconds=9))]))

    log.record([event(at=T0)])
    db.before["transact_write_items"] = race
    mine = log.record([event(at=T0 + timedelta(seconds=5))])[0]
    assert mine.occurred_at == theirs[0].occurred_at + US
    assert ids(scan_all(log))[1:] == [theirs[0].id, mine.id]


def test_concurrent_recorders_on_one_tenant_get_unique_increasing_stamps(db):
    threads, batches, per_batch = 4, 3, 3  # small: moto deep-copies the table per transaction item
    recorded: list[TimelineEvent] = []
    lock = threading.Lock()

    def worker(n: int) -> None:
        log = DynamoEventLog(db, TABLE)
        for b in range(batches):
            batch = [event(at=T0 + timedelta(milliseconds=b), key=f"w{n}") for _ in range(per_batch)]
            while True:
                try:
                    out = log.record(batch)
                    break
                except Conflict:  # the caller retries the batch, as the stream consumer does
                    continue
            assert [e.occurred_at for e in out] == sorted({e.occurred_at for e in out})
            with lock:
                recorded.extend(out)

    pool = [threading.Thread(target=worker, args=(n,)) for n in range(threads)]
    for t in pool:
        t.start()
    for t in pool:
        t.join()
    assert len(recorded) == threads * batches * per_batch
    stamps = [e.occurred_at for e in recorded]
    assert len(set(stamps)) == len(stamps)
    scanned = scan_all(DynamoEventLog(db, TABLE), page_size=7)
    assert {(e.id, e.occurred_at) for e in scanned} == {(e.id, e.occurred_at) for e in recorded}
    assert [e.occurred_at for e in scanned] == sorted(stamps)


def test_a_batch_larger_than_one_transaction_is_chunked(log, db):
    big = b"\x01" * 200_000
    events = [event(at=T0 + timedelta(seconds=i), value=big if i % 4 == 0 else b"small") for i in range(80)]
    recorded = log.record(events)
    assert [e.occurred_at for e in recorded] == [e.changed_at for e in events]
    transactions = db.calls["transact_write_items"]
    assert len(transactions) >= 3
    for t in transactions:
        assert len(t["TransactItems"]) <= 100
        assert sum(len(a["Put"]["Item"].get("vct", {}).get("B", b"")) for a in t["TransactItems"] if "Put" in a) \
            < 4_000_000
    scanned = scan_all(log, page_size=30)
    assert ids(scanned) == ids(events)
    assert [e.value_ct for e in scanned] == [e.value_ct for e in events]


def test_ttl_comes_from_the_tenants_retention(db):
    log = DynamoEventLog(db, TABLE, retention_days=lambda tenant: 7 if tenant == "acme" else 30)
    e = log.record([event(at=T0 + timedelta(microseconds=1_500_000))])[0]
    expected = str(to_epoch_us(e.occurred_at) // 1_000_000 + 7 * 86_400)
    sk = f"{to_epoch_us(e.occurred_at):020d}#{e.id}"
    assert [r["ttl"]["N"] for r in rows(db, "T#acme#TL#ALL")] == [expected]
    assert [r["ttl"]["N"] for r in rows(db, "T#acme#TL#R#user\x1ealice")] == [expected]
    assert [r["sk"]["S"] for r in rows(db, "T#acme#TL#ALL")] == [sk]
    marker = rows(db, f"T#acme#TL#ID#{e.id}")[0]
    assert marker["ttl"]["N"] == expected and marker["root"]["S"] == "user\x1ealice"
    assert "ttl" not in rows(db, "T#acme#TL")[0]


def test_throttled_transactions_raise_rate_limited(log, db, monkeypatch):
    monkeypatch.setattr(dynamo_timeline.time, "sleep", lambda s: None)

    def throttle(**_: Any) -> None:
        raise ClientError({"Error": {"Code": "ThrottlingException", "Message": "slow down"}}, "TransactWriteItems")

    db.before["transact_write_items"] = throttle
    with pytest.raises(RateLimited):
        log.record([event()])


@pytest.mark.parametrize("write", ["record", "restore"])
def test_a_transaction_throttled_every_time_raises_rate_limited(log, db, monkeypatch, write):
    monkeypatch.setattr(dynamo_timeline.time, "sleep", lambda s: None)

    def cancel(TransactItems: list, **_: Any) -> None:
        raise ClientError({"Error": {"Code": "TransactionCanceledException", "Message": "cancelled"},
                           "CancellationReasons": [{"Code": "ThrottlingError"}] * len(TransactItems)},
                          "TransactWriteItems")

    db.before["transact_write_items"] = cancel
    with pytest.raises(RateLimited):
        if write == "record":
            log.record([event()])
        else:  # an import's carried history: its own stamp
            log.restore([replace(event(), occurred_at=T0)])
    assert len(db.calls["transact_write_items"]) == dynamo_timeline.MAX_ATTEMPTS


def test_an_event_too_large_for_an_item_is_refused_as_invalid_not_retryable(log, db):
    with pytest.raises(InvalidArgument) as raised:  # DynamoDB's ValidationException: no retry can help
        log.record([event(value=b"\x00" * 420_000)])
    assert not raised.value.retryable
    assert rows(db, "T#acme#TL#ALL") == []


def test_a_clock_that_keeps_moving_raises_conflict(log, db, monkeypatch):
    monkeypatch.setattr(dynamo_timeline.time, "sleep", lambda s: None)
    other = DynamoEventLog(db._client, TABLE)
    db.before["transact_write_items"] = lambda **_: other.record([event()])
    with pytest.raises(Conflict):
        log.record([event()])


def test_retention_is_dynamodb_ttl(log):
    log.record([event()])
    assert log.purge("acme", T0 + timedelta(days=1000)) == 0
    assert log.tenants() == []
    assert log.record([]) == []


# -- scan ---------------------------------------------------------------------------------------


@pytest.fixture
def timeline(log):
    """One event per namespace, a second apart, kinds cycling."""
    namespaces = [("a",), ("a", "x"), ("ab", "x"), ("a", "x", "deep"), ("a", "x", "deeper", "more"),
                  ("a", "xy"), ("b", "y"), ("a", "x", "deep", "er")]
    kinds = ["add", "update", "delete", "expired"]
    events = [event(ns, at=T0 + timedelta(seconds=i), kind=kinds[i % 4]) for i, ns in enumerate(namespaces)]
    log.record(events + [event(("a", "x"), tenant="other", at=T0)])
    return {e.namespace: e for e in events}


def names(events) -> list[tuple[str, ...]]:
    return [e.namespace for e in events]


@pytest.mark.parametrize("prefix, expected", [
    ((), [("a",), ("a", "x"), ("ab", "x"), ("a", "x", "deep"), ("a", "x", "deeper", "more"), ("a", "xy"),
          ("b", "y"), ("a", "x", "deep", "er")]),
    (("a",), [("a",), ("a", "x"), ("a", "x", "deep"), ("a", "x", "deeper", "more"), ("a", "xy"),
              ("a", "x", "deep", "er")]),
    (("ab",), [("ab", "x")]),
    (("a", "x"), [("a", "x"), ("a", "x", "deep"), ("a", "x", "deeper", "more"), ("a", "x", "deep", "er")]),
    (("a", "x", "deep"), [("a", "x", "deep"), ("a", "x", "deep", "er")]),
    (("a", "x", "deeper", "more"), [("a", "x", "deeper", "more")]),
    (("a", "xy"), [("a", "xy")]),
    (("zz",), []),
    (("zz", "y"), []),
])
def test_scan_is_scoped_to_the_prefix_in_stamp_order(log, timeline, prefix, expected):
    got = scan_all(log, prefix=prefix)
    assert names(got) == expected
    assert all(e.tenant == "acme" for e in got)


def test_scan_filters_kinds_and_times(log, timeline):
    assert names(scan_all(log, kinds=frozenset({"delete", "expired"}))) == [("ab", "x"), ("a", "x", "deep"),
                                                                             ("b", "y"), ("a", "x", "deep", "er")]
    assert names(scan_all(log, prefix=("a",), kinds=frozenset({"add"}))) == [("a",), ("a", "x", "deeper", "more")]
    assert scan_all(log, kinds=frozenset()) == []
    at = {ns: e.changed_at for ns, e in timeline.items()}
    window = scan_all(log, after=at[("a", "x")], before=at[("b", "y")])
    assert names(window) == [("ab", "x"), ("a", "x", "deep"), ("a", "x", "deeper", "more"), ("a", "xy")]
    assert scan_all(log, after=at[("a", "x")], before=at[("a", "x")] + US) == []
    assert scan_all(log, before=T0) == []


def test_tenants_are_isolated(log, timeline):
    theirs = scan_all(log, tenant="other")
    assert [(e.tenant, e.namespace) for e in theirs] == [("other", ("a", "x"))]
    assert "other" not in {e.tenant for e in scan_all(log)}
    assert all(e.id not in ids(theirs) for e in scan_all(log, prefix=("a", "x")))
    assert scan_all(log, tenant="nobody") == []


@pytest.mark.parametrize("prefix", [(), ("a",), ("a", "x")])
def test_start_after_is_exclusive_and_pages_cover_everything_once(log, timeline, prefix):
    everything = scan_all(log, prefix=prefix)
    walked: list[TimelineEvent] = []
    cursor = None
    while True:
        page = list(itertools.islice(log.scan("acme", prefix, kinds=KINDS, start_after=cursor, page_size=1), 2))
        if not page:
            break
        walked.extend(page)
        cursor = (page[-1].occurred_at, page[-1].id)
    assert ids(walked) == ids(everything)
    # A cursor between two events (same microsecond, a smaller id) starts at the later one.
    second = everything[1]
    assert ids(scan_all(log, prefix=prefix, start_after=(second.occurred_at, "")))[0] == second.id


@pytest.mark.parametrize("prefix", [(), ("a",), ("a", "x")])
def test_values_are_returned_from_either_partition(log, timeline, prefix, db):
    got = {e.id: e for e in scan_all(log, prefix=prefix)}
    assert got
    for e in timeline.values():
        if e.id in got:
            assert got[e.id].value_ct == e.value_ct and got[e.id].attributes_ct == e.attributes_ct
            assert got[e.id].policy_attributes == e.policy_attributes and got[e.id].expires_at == e.expires_at
    assert not any("vct" in r or "act" in r for r in rows(db, "T#acme#TL#ALL"))


def test_scan_stops_at_the_clock_it_read_first(log, db):
    first = log.record([event(at=T0), event(at=T0 + US)])
    walk = log.scan("acme", (), kinds=KINDS, page_size=1)
    assert next(walk).id == first[0].id  # the horizon is read here
    later = log.record([event(at=T0 + timedelta(seconds=1))])
    assert ids(walk) == [first[1].id]
    assert ids(scan_all(log))[-1] == later[0].id


def test_scan_never_yields_an_item_stamped_above_the_clock(log, db):
    e = log.record([event(at=T0)])[0]
    above = {k: v for k, v in rows(db, "T#acme#TL#ALL")[0].items()}
    above["sk"] = {"S": f"{to_epoch_us(e.occurred_at) + 1:020d}#in-flight"}
    above["id"] = {"S": "in-flight"}
    db._client.put_item(TableName=TABLE, Item=above)  # as if a transaction were not yet visible
    assert ids(scan_all(log)) == [e.id]


def test_the_longest_tenant_and_namespace_fit_every_key():
    """128-byte tenant, 880-byte namespace: the item (whose pk sorts the `pending` index, 1024
    bytes at most) and its timeline copies are all accepted, and the event reads back."""
    from memsvc.core.models import Caller
    from memsvc.core.namespaces import MAX_NAMESPACE_BYTES
    from memsvc.service.memories import PutMemory
    from memsvc.service.timeline import EventsQuery
    from tests.fakes.aws_stack import aws_stack
    from tests.fakes.embedder import HashEmbedder

    tenant = "t" * 128
    ns = ["é" * 76, "x" * (MAX_NAMESPACE_BYTES - 76 * 6 - 1)]  # é is 6 bytes percent-encoded
    assert len(encode_namespace(ns).encode()) == MAX_NAMESPACE_BYTES
    caller = Caller(tenant_id=tenant, user_id="root", roles=("admin",))
    embedder = HashEmbedder()
    with aws_stack(dimension=embedder.dimension, embedder=embedder) as stack:
        written = stack.app.services.memories.put(caller, PutMemory(namespace=ns, key="k", value={"text": "long"}))
        stack.drain()
        page = stack.app.services.timeline.events(caller, EventsQuery(namespace_prefix=ns))
        assert [v.event.id for v in page.events] == [written.id]


def test_the_aws_app_records_and_scans_on_its_table():
    from tests.fakes.aws_stack import aws_stack

    with aws_stack(dimension=256) as stack:
        log = stack.app.timeline.log
        assert isinstance(log, DynamoEventLog)
        e = log.record([event()])[0]
        assert ids(scan_all(log, prefix=("user",))) == [e.id]
