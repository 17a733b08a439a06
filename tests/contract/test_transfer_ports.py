"""What export and import (issue 26) add to the ports, on each backend: the transfer store (jobs
saved on their version, parts), the item store's paged walk over namespaces and its batched
writes, and an export imported into another tenant of the same backend, in process."""

from __future__ import annotations

import base64
import dataclasses
from datetime import timedelta

import pytest

from memsvc.core.errors import Conflict, InvalidArgument
from memsvc.core.models import Caller
from memsvc.core.transfer_jobs import TransferJob
from memsvc.service.data_export import StartExport
from memsvc.service.data_import import CreateImport, ImportPart, StartImport
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
