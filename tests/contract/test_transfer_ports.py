"""What export and import (issue 26) add to the ports, on each backend: the transfer store (jobs
saved on their version, parts), the item store's paged walk over namespaces and its batched
writes, the event log's walk of a key's versions and its restore, and an export imported into
another tenant of the same backend, in process, with every memory's history."""

from __future__ import annotations

import base64
import dataclasses
import json
from datetime import timedelta

import pytest

from memsvc.core.errors import Conflict, InvalidArgument, NotFound
from memsvc.core.export_format import LineWriter
from memsvc.core.models import Caller, TimelineEvent
from memsvc.core.transfer_jobs import TransferJob
from memsvc.service import data_export, data_import
from memsvc.service.data_export import StartExport
from memsvc.service.data_import import CreateImport, ImportPart, StartImport
from memsvc.service.history import HistoryQuery
from memsvc.service.memories import PutMemory
from tests.conftest import admin, alice
from tests.fakes.aws_stack import TABLE


def transfer_store(backend, tmp_path):
    if backend.local is not None:
        from memsvc.adapters.local.transfer_store import SqliteTransferStore

        return SqliteTransferStore(tmp_path / "transfers.db")
    from memsvc.adapters.aws.dynamo_transfers import DynamoTransferStore
    from tests.fakes.aws_stack import TABLE

    return DynamoTransferStore(backend.app.clients.dynamodb, TABLE)


def test_a_job_is_saved_on_its_version_and_its_parts_read_back(backend, tmp_path, clock):
    store = transfer_store(backend, tmp_path)
    now = clock.now()
    job = TransferJob("acme", "j1", "export", "running", 1, now, now, now + timedelta(days=7), options={"a": [1]},
                      sealed=b"\x00sealed")
    store.save_job(job, expected_version=None)
    with pytest.raises(Conflict):
        store.save_job(job, expected_version=None)
    moved = dataclasses.replace(job, version=2, done=5, counts={"memory": {"exported": 5}})
    store.save_job(moved, expected_version=1)
    with pytest.raises(Conflict):
        store.save_job(dataclasses.replace(moved, version=3), expected_version=1)
    assert store.get_job("acme", "j1") == moved and store.get_job("other", "j1") is None
    store.put_part("acme", "j1", 0, b"first")
    store.put_part("acme", "j1", 1, b"")
    store.put_part("acme", "j1", 0, b"again")
    assert (store.get_part("acme", "j1", 0), store.get_part("acme", "j1", 1)) == (b"again", b"")
    assert store.get_part("acme", "j1", 2) is None and store.get_part("other", "j1", 0) is None
    store.put_part("acme", "j1", 12, b"far")
    assert (store.last_part("acme", "j1"), store.last_part("acme", "j2"), store.last_part("other", "j1")) == (
        12, None, None)


def test_namespaces_are_walked_in_pages_in_encoded_order(backend):
    for ns in (["user", "a", "memories"], ["user", "a", "sessions", "s1"], ["user", "b", "memories"],
               ["project", "x"], ["user", "ab", "memories"]):
        backend.memories.put(admin(), PutMemory(namespace=ns, key="k", value={"text": "t"}))
    backend.memories.delete(admin(), ["user", "b", "memories"], "k")  # a tombstone still holds a row
    store = backend.store
    seen, after = [], None
    while page := store.namespaces_after("acme", ("user",), after, 2):
        assert len(page) <= 2
        seen.extend(page)
        after = page[-1]
    assert seen == [("user", "a", "memories"), ("user", "a", "sessions", "s1"), ("user", "ab", "memories"),
                    ("user", "b", "memories")]
    assert store.namespaces_after("acme", (), None, 10)[0] == ("project", "x")
    assert store.namespaces_after("acme", ("user", "a"), ("user", "a", "memories"), 10) == [
        ("user", "a", "sessions", "s1")]
    assert store.namespaces_after("other", (), None, 10) == []


def test_write_many_writes_each_and_reports_the_one_that_lost(backend):
    memories, ns = backend.memories, ("user", "alice", "memories")
    memories.put(alice(), PutMemory(namespace=list(ns), key="a", value={"text": "1"}))
    old = backend.store.get("acme", ns, "a")

    def version(key, text, over):
        return memories.build_version("acme", ns, key, {"text": text}, old=over, attributes=None,
                                      policy_attributes={}, index_fields=None, ttl_seconds=None)

    outcomes = backend.store.write_many([(version("a", "2", old), "update", old),
                                         (version("c", "4", None), "update", old),  # c is not at a's version
                                         (version("b", "3", None), "add", None)])
    assert outcomes[0] is None and isinstance(outcomes[1], Conflict) and outcomes[2] is None
    assert memories.get(alice(), list(ns), "a").value == {"text": "2"}
    assert memories.get(alice(), list(ns), "b").version == 1
    assert backend.store.get("acme", ns, "c") is None


def run_jobs(backend) -> None:
    if backend.local is not None:
        while backend.local.workers.run_remember_jobs():
            pass
    else:
        while backend.aws.run_remember_jobs()["records"]:
            pass


def test_a_part_past_the_files_end_is_refused_at_start_not_left_unread(backend):
    imports = backend.app.services.imports
    job = imports.create(admin(), CreateImport.parse({}))
    for index in (0, 7):
        imports.put_part(admin(), job.job_id, ImportPart.parse({"index": index, "data": base64.b64encode(
            b'{"kind":"header"}\n').decode()}))
    with pytest.raises(InvalidArgument) as refused:
        imports.start(admin(), job.job_id, StartImport.parse({"parts": 1}))
    assert refused.value.details == {"field": "parts"} and "part 7" in str(refused.value)
    assert imports.status(admin(), job.job_id).state == "uploading"


def test_an_export_imports_into_another_tenant_of_the_same_backend(backend):
    ns = ["user", "alice", "memories"]
    backend.memories.put(alice(), PutMemory(namespace=ns, key="a", value={"text": "likes tea"}, ttl_seconds=600))
    exports, imports = backend.app.services.exports, backend.app.services.imports
    job = exports.start(admin(), StartExport.parse({"scope": {"user_id": "alice"}, "passphrase": "a long passphrase"}))
    run_jobs(backend)
    job = exports.status(admin(), job.job_id)
    assert job.state == "done", job.error
    data = b"".join(exports.part(admin(), job.job_id, i)[0] for i in range(job.parts))
    target = Caller("beta", "root", ("admin",))
    imported = imports.create(target, CreateImport.parse({"allow_other_tenant": True}))
    imports.put_part(target, imported.job_id, ImportPart.parse({"index": 0, "data": base64.b64encode(data).decode()}))
    imports.start(target, imported.job_id, StartImport.parse({"parts": 1, "passphrase": "a long passphrase"}))
    run_jobs(backend)
    imported = imports.status(target, imported.job_id)
    assert imported.state == "done" and imported.counts == {"memory": {"create": 1}}, imported.error
    source = backend.memories.get(alice(), ns, "a")
    copy = backend.memories.get(Caller("beta", "alice"), ns, "a")
    assert (copy.id, copy.version, copy.value, copy.expires_at, copy.created_at) == (
        source.id, source.version, source.value, source.expires_at, source.created_at)


def test_an_export_sealed_under_a_named_kms_key_opens_only_with_it(backend):
    exports, imports = backend.app.services.exports, backend.app.services.imports
    if backend.local is not None:  # no KMS on this machine
        with pytest.raises(InvalidArgument, match="AWS backend only"):
            exports.start(admin(), StartExport.parse({"kms_key_id": "alias/anything"}))
        return
    kms = backend.app.clients.kms
    [key_id] = [meta["Arn"] for meta in (kms.describe_key(KeyId=k["KeyId"])["KeyMetadata"]
                                          for k in kms.list_keys()["Keys"]) if meta["Description"] == "memsvc exports"]
    backend.memories.put(alice(), PutMemory(namespace=["user", "alice", "memories"], key="a", value={"text": "x"}))
    # a key the deployment does not list (export_kms_key_arns) is refused, even one that works
    unlisted = kms.create_key(Description="not for exports")["KeyMetadata"]["Arn"]
    for refused in (unlisted, "arn:aws:kms:us-east-1:123456789012:key/missing", "alias/anything"):
        with pytest.raises(InvalidArgument, match="not one of the KMS keys this deployment lets exports use"):
            exports.start(admin(), StartExport.parse({"kms_key_id": refused}))
    listed = backend.app.clients.dynamodb.query(TableName=TABLE, KeyConditionExpression="pk = :p",
                                                ExpressionAttributeValues={":p": {"S": "T#acme#XFERS"}})
    assert listed["Items"] == []  # refused before any job was written
    job = exports.start(admin(), StartExport.parse({"kms_key_id": key_id}))
    run_jobs(backend)
    job = exports.status(admin(), job.job_id)
    data = b"".join(exports.part(admin(), job.job_id, i)[0] for i in range(job.parts))
    assert job.state == "done" and job.options["encryption"] == "kms" and b'"kind":"kms"' in data.split(b"\n")[0]
    target = Caller("gamma", "root", ("admin",))
    imported = imports.create(target, CreateImport.parse({"allow_other_tenant": True}))
    imports.put_part(target, imported.job_id, ImportPart.parse({"index": 0, "data": base64.b64encode(data).decode()}))
    imports.start(target, imported.job_id, StartImport.parse({"parts": 1}))  # no passphrase: KMS opens it
    run_jobs(backend)
    assert imports.status(target, imported.job_id).counts == {"memory": {"create": 1}}
    assert backend.memories.get(Caller("gamma", "alice"), ["user", "alice", "memories"], "a").value == {"text": "x"}


def event(tenant, event_id, version, at, kind="add", key="k"):
    return TimelineEvent(tenant=tenant, id=event_id, kind=kind, namespace=("user", "alice", "memories"), key=key,
                         memory_id=event_id, version=version, changed_at=at, expires_at=None,
                         policy_attributes={}, occurred_at=at)


def test_restore_keeps_its_own_stamps_where_the_timeline_is_older_once_per_id(backend, clock):
    log, ns, t0 = backend.event_log, ("user", "alice", "memories"), clock.now() - timedelta(days=3)
    restored = [event("acme", f"e{n}", n, t0 + timedelta(hours=n), "update" if n > 1 else "add") for n in (1, 2, 3)]
    assert log.restore([*restored, restored[0]]) == [True, True, True, False]  # a repeated id: once
    assert log.restore([restored[1], event("beta", "e2", 1, t0)]) == [False, True]  # ids are per tenant
    walked, after = [], None
    while page := log.versions_after("acme", ns, "k", after=after, limit=2):
        walked.extend(page)
        after = (page[-1].occurred_at, page[-1].id)
    assert [(e.id, e.version, e.occurred_at) for e in walked] == [(e.id, e.version, e.occurred_at) for e in restored]
    assert [e.id for e in log.history("acme", ns, "k")] == ["e3", "e2", "e1"]
    assert log.versions_after("acme", ns, "other", after=None, limit=5) == []
    # the clock moved up to the latest restored stamp: what is recorded next is stamped above it
    ahead = event("acme", "ahead", 4, clock.now() + timedelta(hours=1))
    log.restore([ahead])
    [recorded] = log.record([event("acme", "next", 5, clock.now())])
    assert recorded.occurred_at > ahead.occurred_at
    assert [e.id for e in log.history("acme", ns, "k", limit=2)] == ["next", "ahead"]


def test_a_restored_event_older_than_the_timeline_lands_after_it_never_behind_a_reader(backend, clock):
    """Stamps only grow, restores included: an event older than the tenant's latest is stamped 1 µs
    past it (its `changed_at` keeps when it happened), so a walk that has passed the latest event
    still meets it."""
    log = backend.event_log
    [latest] = log.record([event("acme", "live", 1, clock.now(), key="live")])
    old = event("acme", "old", 1, clock.now() - timedelta(days=2))
    assert log.restore([old, event("acme", "older", 1, clock.now() - timedelta(days=3), key="k2")]) == [True, True]
    walked = list(log.scan("acme", (), kinds=frozenset({"add"}), start_after=(latest.occurred_at, latest.id)))
    assert [e.id for e in walked] == ["old", "older"]  # in the order restored
    assert walked[0].occurred_at > latest.occurred_at and walked[1].occurred_at > walked[0].occurred_at
    assert [e.changed_at for e in walked] == [old.changed_at, clock.now() - timedelta(days=3)]
    assert log.held("acme", ["old", "live", "missing"]) == {"old", "live"} and log.held("beta", ["old"]) == set()


def test_an_import_reaches_a_timeline_reader_who_walked_to_the_present_before_it(backend, clock):
    """API.md: following `after_cursor` until it is null yields every event once. A reader of the
    target tenant keeps its cursor across an import of older history, and meets every imported
    version; the history of each memory still shows when each version happened."""
    from memsvc.service.timeline import EventsQuery

    write_history(backend, clock)
    data = export_bytes(backend, admin(), scope={"user_id": "alice"})
    copy = Caller("beta", "alice")
    clock.advance(60)
    backend.memories.put(copy, PutMemory(namespace=["user", "alice", "memories"], key="own", value={"text": "mine"}))
    backend.drain()
    query = {"namespace_prefix": ["user", "alice"], "limit": 50}
    first = backend.timeline.events(copy, EventsQuery(**query))
    assert [v.event.key for v in first.events] == ["own"] and first.after_cursor is None

    job = import_bytes(backend, admin("beta"), data)
    assert job.state == "done", job.error
    backend.drain()
    later = backend.timeline.events(copy, EventsQuery(**query, after_cursor=first.resume_cursor))
    assert sorted((v.event.key, v.event.kind) for v in later.events) == sorted(
        [("j", "add"), ("k", "add"), ("k", "update"), ("k", "update"), ("k", "delete"), ("k", "add"), ("k", "update")])
    assert all(v.event.occurred_at > first.events[0].event.occurred_at for v in later.events)
    assert full_history(backend, copy) == full_history(backend, alice())  # the times each version happened


def export_bytes(backend, caller, **body) -> bytes:
    exports = backend.app.services.exports
    job = exports.start(caller, StartExport.parse({"encrypt": False, **body}))
    run_jobs(backend)
    job = exports.status(caller, job.job_id)
    assert job.state == "done", job.error
    return b"".join(exports.part(caller, job.job_id, i)[0] for i in range(job.parts))


def import_bytes(backend, caller, data: bytes, **options) -> TransferJob:
    imports = backend.app.services.imports
    job = imports.create(caller, CreateImport.parse({"allow_other_tenant": True, **options}))
    imports.put_part(caller, job.job_id, ImportPart.parse({"index": 0, "data": base64.b64encode(data).decode()}))
    imports.start(caller, job.job_id, StartImport.parse({"parts": 1}))
    run_jobs(backend)
    return imports.status(caller, job.job_id)


def full_history(backend, caller, key="k", ns=("user", "alice", "memories")):
    page = backend.app.services.history.history(caller, HistoryQuery(ns=list(ns), key=key, limit=100))
    assert page.next_cursor is None
    return page.versions


def records_of(data: bytes) -> list[dict]:
    return [json.loads(line) for line in data.splitlines()[1:-1]]


def rewritten(records: list[dict], *, format_version: int = 3) -> bytes:
    writer = LineWriter()
    header = {"kind": "header", "format": "memsvc-export", "format_version": format_version, "memsvc_version": "t",
              "tenant": "acme", "scope": {"user_id": "alice"}, "created_at": "2026-01-01T00:00:00.000000Z"}
    return writer.lines([header, *records]) + writer.trailer()


def write_history(backend, clock):
    """k: added, updated twice, deleted, added again, updated (6 versions); j: one version."""
    ns = ["user", "alice", "memories"]
    for n, text in enumerate(("one", "two", "three")):
        backend.memories.put(alice(), PutMemory(namespace=ns, key="k", value={"text": text, "n": n},
                                                attributes={"step": n}))
        clock.advance(1)
    backend.memories.delete(alice(), ns, "k")
    clock.advance(1)
    for text in ("four", "five"):
        backend.memories.put(alice(), PutMemory(namespace=ns, key="k", value={"text": text}, ttl_seconds=3600))
        clock.advance(1)
    backend.memories.put(alice(), PutMemory(namespace=ns, key="j", value={"text": "just one"}))
    backend.drain()


def test_each_memorys_history_round_trips_and_a_second_import_skips_it(backend, clock):
    write_history(backend, clock)
    source = full_history(backend, alice())
    assert [(v.kind, v.version) for v in source] == [("update", 6), ("add", 5), ("delete", 4), ("update", 3),
                                                     ("update", 2), ("add", 1)]
    data = export_bytes(backend, admin(), scope={"user_id": "alice"})
    kinds = [(r["kind"], r["key"], r["version"]) for r in records_of(data)]
    assert kinds == [("memory_version", "j", 1), ("memory", "j", 1),
                     *(("memory_version", "k", n) for n in range(1, 7)), ("memory", "k", 6)]
    source_events = list(backend.event_log.scan("acme", (), kinds=frozenset({"add", "update", "delete"})))

    dry = import_bytes(backend, admin("beta"), data, dry_run=True)
    assert dry.counts == {"memory_version": {"create": 7}, "memory": {"create": 2}}, dry.error
    with pytest.raises(NotFound):
        full_history(backend, Caller("beta", "alice"))

    job = import_bytes(backend, admin("beta"), data)
    assert job.state == "done" and job.counts == {"memory_version": {"create": 7}, "memory": {"create": 2}}, job.error
    backend.drain()
    copy = Caller("beta", "alice")
    assert full_history(backend, copy) == source
    assert full_history(backend, copy, key="j") == full_history(backend, alice(), key="j")
    got = backend.memories.get(copy, ["user", "alice", "memories"], "k")
    want = backend.memories.get(alice(), ["user", "alice", "memories"], "k")
    assert (got.id, got.version, got.value, got.updated_at, got.expires_at) == (
        want.id, want.version, want.value, want.updated_at, want.expires_at)
    # the source tenant's timeline is as it was: the import wrote into the caller's tenant only
    assert list(backend.event_log.scan("acme", (), kinds=frozenset({"add", "update", "delete"}))) == source_events

    again = import_bytes(backend, admin("beta"), data)
    assert again.counts == {"memory_version": {"skip": 7}, "memory": {"skip": 2}}, again.error
    again_dry = import_bytes(backend, admin("beta"), data, dry_run=True)
    assert again_dry.counts == {"memory_version": {"skip": 7}, "memory": {"skip": 2}}
    backend.drain()
    assert full_history(backend, copy) == source


def test_a_long_history_is_exported_and_imported_a_page_at_a_time(backend, clock, monkeypatch):
    monkeypatch.setattr(data_export, "_PAGE", 3)
    monkeypatch.setattr(data_export, "STEP_RECORDS", 4)
    monkeypatch.setattr(data_import, "STEP_RECORDS", 3)
    monkeypatch.setattr(data_import, "_BATCH", 2)
    ns = ["user", "alice", "memories"]
    for n in range(8):
        backend.memories.put(alice(), PutMemory(namespace=ns, key="k", value={"n": n}))
        clock.advance(1)
    for key in ("a", "z"):
        backend.memories.put(alice(), PutMemory(namespace=ns, key=key, value={"key": key}))
    backend.drain()
    data = export_bytes(backend, admin(), scope={"user_id": "alice"})
    assert [(r["kind"], r["key"]) for r in records_of(data)] == [
        ("memory_version", "a"), ("memory", "a"), *[("memory_version", "k")] * 8, ("memory", "k"),
        ("memory_version", "z"), ("memory", "z")]
    job = import_bytes(backend, admin("beta"), data)
    assert job.counts == {"memory_version": {"create": 10}, "memory": {"create": 3}}, job.error
    backend.drain()
    assert full_history(backend, Caller("beta", "alice")) == full_history(backend, alice())


def test_a_version_2_file_imports_without_history(backend, clock):
    write_history(backend, clock)
    records = [r for r in records_of(export_bytes(backend, admin(), scope={"user_id": "alice"}))
               if r["kind"] != "memory_version"]
    job = import_bytes(backend, admin("beta"), rewritten(records, format_version=2))
    assert job.state == "done" and job.counts == {"memory": {"create": 2}}, job.error
    backend.drain()
    [only] = full_history(backend, Caller("beta", "alice"))
    assert (only.version, only.value) == (6, {"text": "five"})


def test_over_a_key_with_versions_of_its_own_the_history_is_not_carried(backend, clock):
    write_history(backend, clock)
    data = export_bytes(backend, admin(), scope={"user_id": "alice"})
    beta = Caller("beta", "alice")
    backend.memories.put(beta, PutMemory(namespace=["user", "alice", "memories"], key="k", value={"text": "mine"}))
    backend.drain()
    job = import_bytes(backend, admin("beta"), data)
    assert job.counts == {"memory_version": {"not_carried": 6, "create": 1},
                          "memory": {"update": 1, "remapped": 1, "create": 1}}, job.error
    backend.drain()
    assert [(v.version, v.value) for v in full_history(backend, beta)] == [(2, {"text": "five"}), (1, {"text": "mine"})]


@pytest.mark.parametrize("change, why", [
    (lambda rs: rs[1].update(version=0), "line 3: version"),
    (lambda rs: rs[1].update(version="7"), "line 3: version"),
    (lambda rs: rs[1].update(version=2**60), "line 3: version"),
    (lambda rs: rs[4].update(occurred_at=rs[2]["occurred_at"]), "line 6: a memory's versions come oldest first"),
    (lambda rs: rs[3].update(key="other"), "line 5: a memory's versions come right before its memory record"),
    (lambda rs: rs[8].update(kind="message"), "line 10: a memory's versions come right before its memory record"),
    (lambda rs: rs[2].update(change="delete"), "line 4: a delete version carries no value"),
    (lambda rs: rs[5].update(change="update"), "line 7: an update version carries its value"),
    (lambda rs: rs[2].update(change="renamed"), "line 4: change"),
    (lambda rs: rs[2].update(namespace=[]), "line 4: namespace"),
    (lambda rs: rs.pop(), "the file ends inside a memory's history"),
])
def test_a_crafted_version_record_fails_the_import_and_writes_nothing(backend, clock, change, why):
    write_history(backend, clock)
    records = records_of(export_bytes(backend, admin(), scope={"user_id": "alice"}))
    change(records)
    job = import_bytes(backend, admin("beta"), rewritten(records))
    assert job.state == "failed" and why in job.error["message"], job.error
    for key in ("j", "k"):
        with pytest.raises(NotFound):
            full_history(backend, Caller("beta", "alice"), key=key)
    assert list(backend.event_log.scan("beta", (), kinds=frozenset({"add", "update", "delete"}))) == []


def test_an_import_resumed_after_a_crash_restores_the_rest_of_a_history(backend, clock):
    write_history(backend, clock)
    data = export_bytes(backend, admin(), scope={"user_id": "alice"})
    ns, sealer = ("user", "alice", "memories"), backend.sealer

    def in_beta(e: TimelineEvent) -> TimelineEvent:
        value, attributes = sealer.open_item(e)
        sealed = sealer.seal_item("beta", ns, "k", e.version, value=value, attributes=attributes)
        return dataclasses.replace(e, tenant="beta", value_ct=sealed.value_ct, attributes_ct=sealed.attributes_ct)

    # what a step that died after restoring k's first three versions left behind
    first = backend.event_log.versions_after("acme", ns, "k", after=None, limit=3)
    assert backend.event_log.restore([in_beta(e) for e in first]) == [True] * 3
    job = import_bytes(backend, admin("beta"), data)
    assert job.counts == {"memory_version": {"skip": 3, "create": 4}, "memory": {"create": 2}}, job.error
    backend.drain()
    assert full_history(backend, Caller("beta", "alice")) == full_history(backend, alice())


def test_a_history_that_went_another_way_is_not_carried_past_where_it_parted(backend, clock):
    write_history(backend, clock)
    records = records_of(export_bytes(backend, admin(), scope={"user_id": "alice"}))
    k = [r for r in records if r["key"] == "k"]
    third = k[2]
    earlier = [*k[:3], {**k[-1], "id": third["memory_id"], "version": 3, "value": third["value"],
                        "attributes": third["attributes"], "expires_at": None, "ttl_seconds": None}]
    job = import_bytes(backend, admin("beta"), rewritten(earlier))
    assert job.counts == {"memory_version": {"create": 3}, "memory": {"create": 1}}, job.error
    job = import_bytes(backend, admin("beta"), rewritten(records))
    assert job.counts == {"memory_version": {"skip": 3, "not_carried": 3, "create": 1},
                          "memory": {"update": 1, "remapped": 1, "create": 1}}, job.error
    backend.drain()
    history = full_history(backend, Caller("beta", "alice"))
    assert [(v.version, v.value) for v in history] == [(4, {"text": "five"}), (3, {"text": "three", "n": 2}),
                                                       (2, {"text": "two", "n": 1}), (1, {"text": "one", "n": 0})]


def test_a_version_written_while_the_export_reads_its_memory_is_left_out_with_it(backend, clock, monkeypatch):
    ns = ["user", "alice", "memories"]
    backend.memories.put(alice(), PutMemory(namespace=ns, key="k", value={"text": "one"}))
    backend.drain()
    sessions = backend.app.services.exports._sessions
    read_rows = sessions.messages

    def rows_then_a_write(*args, **kwargs):
        rows = read_rows(*args, **kwargs)
        if rows:  # the memory is read; a newer version reaches the timeline before its history is
            backend.memories.put(alice(), PutMemory(namespace=ns, key="k", value={"text": "two"}))
            backend.drain()
        return rows

    monkeypatch.setattr(sessions, "messages", rows_then_a_write)
    records = records_of(export_bytes(backend, admin(), scope={"user_id": "alice"}))
    assert [(r["kind"], r["version"], r["value"]) for r in records] == [
        ("memory_version", 1, {"text": "one"}), ("memory", 1, {"text": "one"})]
    assert [v.version for v in full_history(backend, alice())] == [2, 1]
