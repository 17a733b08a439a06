"""Export and import (issue 26) over HTTP, on `memsvc serve` and on the AWS backend (moto): a
round trip into an empty tenant answers get, search, recall, every version of each memory's
history, sessions, plans and settings as the source does; a second import changes nothing; a
dry run writes nothing; scopes, roles and tenants are kept apart; a wrong passphrase, a changed
or cut-short file import nothing.

Each test's tenants are new, so "an empty tenant" is an empty stack for that tenant on either
backend (the shared live server holds other tests' tenants, never these)."""

from __future__ import annotations

import base64
import json
import re
import time
import uuid
from typing import Any
from urllib.parse import quote

import httpx

from memsvc.core.export_format import LineWriter
from tests.api.helpers import assert_error, delete, get, ns_query, put_ok, search_ok, sync_index, unique_tenant

PASSPHRASE = "correct horse battery staple"
PART_BYTES = 256 * 1024


def wait_job(admin: httpx.Client, path: str, timeout: float = 60.0) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    while True:
        r = admin.get(path)
        assert r.status_code == 200, r.text
        job = r.json()
        if job["state"] in ("done", "failed"):
            return job
        assert time.monotonic() < deadline, job
        time.sleep(0.1)


def export_file(admin: httpx.Client, **body: Any) -> tuple[dict[str, Any], bytes]:
    r = admin.post("/admin/v1/exports", json=body)
    assert r.status_code == 202, r.text
    job = wait_job(admin, f"/admin/v1/exports/{r.json()['id']}")
    assert job["state"] == "done", job
    parts = (admin.get(f"/admin/v1/exports/{job['id']}/parts", params={"index": i}) for i in range(job["parts"]))
    data = b"".join(base64.b64decode(part.json()["data"]) for part in parts)
    return job, data


def upload(admin: httpx.Client, data: bytes, **options: Any) -> str:
    r = admin.post("/admin/v1/imports", json=options)
    assert r.status_code == 201, r.text
    job_id = r.json()["id"]
    for index, start in enumerate(range(0, len(data), PART_BYTES)):
        part = base64.b64encode(data[start:start + PART_BYTES]).decode()
        r = admin.put(f"/admin/v1/imports/{job_id}/parts", json={"index": index, "data": part})
        assert r.status_code == 204, r.text
    return job_id


def import_file(admin: httpx.Client, data: bytes, *, passphrase: str | None = PASSPHRASE,
                **options: Any) -> dict[str, Any]:
    r = start_import(admin, data, passphrase=passphrase, **options)
    assert r.status_code == 202, r.text
    return wait_job(admin, f"/admin/v1/imports/{r.json()['id']}")


def start_import(admin: httpx.Client, data: bytes, *, passphrase: str | None = PASSPHRASE,
                 **options: Any) -> httpx.Response:
    job_id = upload(admin, data, **options)
    parts = (len(data) + PART_BYTES - 1) // PART_BYTES
    return admin.post(f"/admin/v1/imports/{job_id}/start",
                      json={"parts": parts, **({"passphrase": passphrase} if passphrase else {})})


def refused(admin: httpx.Client, data: bytes, **options: Any) -> str:
    """Why the import of `data` failed: at its start (a file small enough to be read whole there),
    or as its job."""
    r = start_import(admin, data, **options)
    if r.status_code != 202:
        return assert_error(r, 400, "INVALID_ARGUMENT")["message"]
    job = wait_job(admin, f"/admin/v1/imports/{r.json()['id']}")
    assert job["state"] == "failed", job
    return job["error"]["message"]


def full_history(me: httpx.Client, ns: list[str], key: str) -> list[dict[str, Any]]:
    r = me.get("/v1/memories/history", params=[*ns_query(ns, key), ("limit", "100")])
    assert r.status_code == 200, r.text
    assert r.json()["next_cursor"] is None
    return r.json()["versions"]


def on_the_timeline(me: httpx.Client, ns: list[str], keys: list[str], timeout: float = 30.0) -> None:
    """Wait until the timeline has recorded every version of these keys (it does so a moment after
    each write), so that an export carries their whole history."""
    deadline = time.monotonic() + timeout
    while not all(v["recorded"] for key in keys for v in full_history(me, ns, key)):
        assert time.monotonic() < deadline, "the timeline did not record the writes"
        time.sleep(0.05)


def write_everything(me: httpx.Client, admin: httpx.Client, uid: str) -> None:
    ns = ["user", uid, "memories"]
    put_ok(me, ns, "diet", {"text": "I am vegetarian and cook Italian food"}, attributes={"source": "chat"})
    put_ok(me, ns, "city", {"text": "I moved to Lisbon", "valid_from": "2024-03-01T00:00:00Z"})
    put_ok(me, ns, "city", {"text": "I moved to Porto", "valid_from": "2025-06-01T00:00:00Z"})
    assert delete(me, ns, "diet").status_code == 204
    put_ok(me, ns, "diet", {"text": "I am vegetarian and cook Italian food"}, attributes={"source": "chat"})
    put_ok(me, ns, "trip", {"text": "Flight to Tokyo booked for the conference"}, ttl_seconds=86400)
    assert me.post("/v1/memory/sessions", json={"session_id": f"s-{uid}", "title": "planning"}).status_code == 201
    for text in ("hello there", "let us plan the trip"):
        r = me.post(f"/v1/memory/sessions/s-{uid}/messages", json={"role": "user", "content": text})
        assert r.status_code == 201, r.text
    r = me.post("/v1/memory/plans", json={"plan_id": f"p-{uid}", "goal_event": "trip.goal",
                                          "goal_data": {"to": "Tokyo"}, "status": "running"})
    assert r.status_code == 201, r.text
    assert me.put(f"/v1/memory/working/p-{uid}/step", json={"value": {"n": 2}}).status_code == 200
    r = me.post("/v1/memory/task-context", json={"task_id": f"t-{uid}", "plan_id": f"p-{uid}",
                                                 "event_type": "trip.book", "data": {"seat": "window"},
                                                 "sub_tasks": [f"t-{uid}-a", f"t-{uid}-b"], "state": {"step": 1}})
    assert r.status_code == 201, r.text
    assert admin.put("/admin/v1/memories/settings", json={"max_depth": 8}).status_code == 200
    for name, kind in (("Ana Lima", "PERSON"), ("Memsvc", "PROJECT")):
        r = me.put("/v1/graph/entities", json={"namespace": ns, "name": name, "type": kind})
        assert r.status_code == 200, r.text
    r = me.put("/v1/graph/relations", json={"namespace": ns, "source": "Ana Lima", "type": "WORKS_ON",
                                            "target": "Memsvc", "valid_from": "2025-01-01T00:00:00Z"})
    assert r.status_code == 200, r.text
    sync_index(admin)
    on_the_timeline(me, ns, ["diet", "city", "trip"])


def answers(me: httpx.Client, uid: str) -> dict[str, Any]:
    """What the tests compare between the source and the copy."""
    ns = ["user", uid, "memories"]
    memory = get(me, ns, "city").json()
    search = [(i["key"], i["value"]) for i in search_ok(me, ["user", uid], query="where do I live", limit=3)]
    recall = me.post("/v1/memories/recall", json={"query": "what food do I cook"}).json()
    messages = me.get(f"/v1/memory/sessions/s-{uid}/messages").json()["messages"]
    session = me.get(f"/v1/memory/sessions/s-{uid}").json()
    plan = me.get(f"/v1/memory/plans/p-{uid}").json()
    task = me.get(f"/v1/memory/task-context/t-{uid}").json()
    entities = me.post("/v1/graph/entities/find", json={"namespace_prefix": ["user", uid],
                                                        "names": ["Ana Lima", "Memsvc"]}).json()["entities"]
    path = me.post("/v1/graph/path", json={"namespace_prefix": ["user", uid], "from": {"entity": "Ana Lima"},
                                           "to": {"entity": "Memsvc"}}).json()
    return {
        "memory": memory,
        "search": search,
        "recall": [(m["key"], m["content"]) for m in recall["memories"]],
        "history": {key: full_history(me, ns, key) for key in ("city", "diet", "trip")},
        "messages": [(m["seq"], m["content"]) for m in messages],
        "session": {k: session[k] for k in ("title", "version", "message_count", "created_at")},
        "plan": {k: plan[k] for k in ("goal_data", "status", "version", "created_at")},
        "working": me.get(f"/v1/memory/working/p-{uid}/step").json()["value"],
        "task": task,
        "task_of_subtask": me.get(f"/v1/memory/task-context/by-subtask/t-{uid}-b").json().get("task_id"),
        "trip_expires": get(me, ns, "trip").json()["expires_at"],
        "entities": sorted((e["name"], e["type"], e["explicit"], e["namespaces"]) for e in entities),
        "path": (path["found"], path["hops"], [e["name"] for e in path["entities"]],
                 [[(d["type"], d["valid_from"]) for d in s["edges"]] for s in path["steps"]]),
    }


def settled(me: httpx.Client, uid: str, expected: dict[str, Any], timeout: float = 60.0) -> dict[str, Any]:
    """The copy's answers once its indexes are rebuilt (the import's writes index in the background)."""
    deadline = time.monotonic() + timeout
    while True:
        got = answers(me, uid)
        if got == expected or time.monotonic() > deadline:
            return got
        time.sleep(0.2)


def test_round_trip_into_an_empty_tenant_answers_the_same(live_server, make_client, me, admin, uid, tenant):
    write_everything(me, admin, uid)
    source = answers(me, uid)
    assert [v["kind"] for v in source["history"]["diet"]] == ["add", "delete", "add"]
    job, data = export_file(admin, passphrase=PASSPHRASE)
    assert job["counts"]["memory"] == {"exported": 3} and job["counts"]["message"] == {"exported": 2}
    assert job["counts"]["memory_version"] == {"exported": 6}  # diet 3, city 2, trip 1
    # and a session, a plan, its working memory, a task context, the settings, two entities and a relation
    assert job["counts"]["task"] == {"exported": 1}
    assert job["total"] == job["done"] == 19 and job["encryption"] == "passphrase"
    assert b"Lisbon" not in data and b"vegetarian" not in data  # sealed by default

    other = unique_tenant()
    other_admin = make_client("root-" + other, tenant=other, roles=["admin"])
    done = import_file(other_admin, data, allow_other_tenant=True)
    assert done["state"] == "done", done["error"]
    assert done["source"]["tenant"] == tenant and done["total"] == 19
    assert done["counts"]["entity"] == {"create": 2} and done["counts"]["relation"] == {"create": 1}
    assert done["counts"]["memory"] == {"create": 3} and done["counts"]["session"] == {"create": 1}
    assert done["counts"]["memory_version"] == {"create": 6}
    assert done["counts"]["settings"] == {"create": 1} and done["remapped"] == []
    assert done["counts"]["task"] == {"create": 1}
    copy_me = make_client(uid, tenant=other)
    sync_index(other_admin)
    assert settled(copy_me, uid, source) == source
    assert other_admin.get("/admin/v1/memories/settings").json()["max_depth"] == 8

    again = import_file(other_admin, data, allow_other_tenant=True)  # idempotent: the same file changes nothing
    assert again["state"] == "done" and {k: set(v) for k, v in again["counts"].items()} == {
        kind: {"skip"} for kind in again["counts"]}, again
    assert answers(copy_me, uid) == source


def test_a_dry_run_counts_and_writes_nothing(make_client, me, admin, uid):
    put_ok(me, ["user", uid, "memories"], "a", {"text": "one"})
    put_ok(me, ["user", uid, "memories"], "a", {"text": "two"})
    on_the_timeline(me, ["user", uid, "memories"], ["a"])
    _, data = export_file(admin, encrypt=False)
    other = unique_tenant()
    other_admin = make_client("root-" + other, tenant=other, roles=["admin"])
    job = import_file(other_admin, data, passphrase=None, dry_run=True, allow_other_tenant=True)
    assert job["state"] == "done" and job["dry_run"] is True and job["counts"] == {
        "memory": {"create": 1}, "memory_version": {"create": 2}}
    assert_error(get(make_client(uid, tenant=other), ["user", uid, "memories"], "a"), 404, "NOT_FOUND")
    r = make_client(uid, tenant=other).get("/v1/memories/history", params=ns_query(["user", uid, "memories"], "a"))
    assert_error(r, 404, "NOT_FOUND")


def test_import_over_changed_keys_updates_and_reports_remapped_ids(me, admin, uid):
    ns = ["user", uid, "memories"]
    first = put_ok(me, ns, "a", {"text": "one"})
    on_the_timeline(me, ns, ["a"])
    _, data = export_file(admin, passphrase=PASSPHRASE)
    put_ok(me, ns, "a", {"text": "changed"})
    job = import_file(admin, data)
    # the key's version 1 is the tenant's already; its history goes on from version 2
    assert job["counts"] == {"memory": {"update": 1, "remapped": 1}, "memory_version": {"skip": 1}}, job
    [remap] = job["remapped"]
    assert remap["id"] == first["id"] and remap["new_version"] == 3 and remap["key"] == "a"
    assert get(me, ns, "a").json()["value"] == {"text": "one"}


def test_a_user_export_holds_that_user_only(make_client, admin, tenant, uid):
    alice, bob = make_client(uid, tenant=tenant), make_client("bob-" + uid, tenant=tenant)
    put_ok(alice, ["user", uid, "memories"], "mine", {"text": "alice secret"})
    put_ok(bob, ["user", "bob-" + uid, "memories"], "mine", {"text": "bob secret"})
    on_the_timeline(alice, ["user", uid, "memories"], ["mine"])
    on_the_timeline(bob, ["user", "bob-" + uid, "memories"], ["mine"])
    job, data = export_file(admin, scope={"user_id": uid}, encrypt=False)
    lines = [json.loads(line) for line in data.splitlines()]
    assert lines[0]["kind"] == "header" and lines[0]["scope"] == {"user_id": uid}
    assert lines[0]["format_version"] == 3
    assert lines[-1]["kind"] == "trailer" and lines[-1]["records"] == 2
    assert b"bob" not in data and [(r["kind"], r["value"]) for r in lines[1:-1]] == [
        ("memory_version", {"text": "alice secret"}), ("memory", {"text": "alice secret"})]


def test_a_tenant_export_holds_the_sessions_and_plans_of_a_user_with_no_memory(make_client, admin, tenant, uid):
    talker, quiet = make_client(uid, tenant=tenant), make_client("quiet-" + uid, tenant=tenant)
    put_ok(talker, ["user", uid, "memories"], "a", {"text": "one"})
    assert quiet.post("/v1/memory/sessions", json={"session_id": "only-a-session"}).status_code == 201
    r = quiet.post("/v1/memory/plans", json={"plan_id": "only-a-plan", "goal_event": "g", "status": "running"})
    assert r.status_code == 201, r.text
    for scope in ({}, {"scope": {"prefix": ["user"]}}):
        _, data = export_file(admin, encrypt=False, **scope)
        records = [json.loads(line) for line in data.splitlines()[1:-1]]
        assert [(r["user_id"], r["session_id"]) for r in records if r["kind"] == "session"] == [
            ("quiet-" + uid, "only-a-session")], scope
        assert [(r["user_id"], r["plan_id"]) for r in records if r["kind"] == "plan"] == [
            ("quiet-" + uid, "only-a-plan")], scope
        assert [r["key"] for r in records if r["kind"] == "memory"] == ["a"]


def test_only_an_admin_exports_and_only_their_own_tenants_jobs(make_client, me, admin):
    assert_error(me.post("/admin/v1/exports", json={"passphrase": PASSPHRASE}), 403, "FORBIDDEN")
    assert_error(me.post("/admin/v1/imports", json={}), 403, "FORBIDDEN")
    job_id = admin.post("/admin/v1/exports", json={"passphrase": PASSPHRASE}).json()["id"]
    wait_job(admin, f"/admin/v1/exports/{job_id}")
    other = unique_tenant()
    stranger = make_client("root-" + other, tenant=other, roles=["admin"])
    assert_error(stranger.get(f"/admin/v1/exports/{job_id}"), 404, "NOT_FOUND")
    assert_error(stranger.get(f"/admin/v1/exports/{job_id}/parts", params={"index": 0}), 404, "NOT_FOUND")
    assert_error(me.get(f"/admin/v1/exports/{job_id}/parts", params={"index": 0}), 403, "FORBIDDEN")


def test_another_tenants_file_needs_the_flag_and_lands_in_the_callers_tenant(make_client, me, admin, uid):
    put_ok(me, ["user", uid, "memories"], "a", {"text": "one"})
    _, data = export_file(admin, passphrase=PASSPHRASE)
    other = unique_tenant()
    other_admin = make_client("root-" + other, tenant=other, roles=["admin"])
    job_id = upload(other_admin, data)
    err = assert_error(other_admin.post(f"/admin/v1/imports/{job_id}/start",
                                        json={"parts": 1, "passphrase": PASSPHRASE}), 403, "FORBIDDEN")
    assert err["details"] == {"field": "allow_other_tenant"}
    r = start_import(other_admin, data, allow_other_tenant=True)
    assert r.status_code == 202, r.text
    job = wait_job(other_admin, f"/admin/v1/imports/{r.json()['id']}")
    assert job["state"] == "done" and job["source"]["tenant"] != other
    assert get(make_client(uid, tenant=other), ["user", uid, "memories"], "a").json()["value"] == {"text": "one"}
    assert_error(other_admin.post(f"/admin/v1/imports/{job['id']}/start", json={"parts": 1}), 409, "CONFLICT")
    assert_error(other_admin.put(f"/admin/v1/imports/{job['id']}/parts", json={"index": 0, "data": "AAAA"}), 409)


def test_a_wrong_passphrase_a_changed_or_cut_file_import_nothing(make_client, me, admin, uid):
    put_ok(me, ["user", uid, "memories"], "a", {"text": "one"})
    _, data = export_file(admin, passphrase=PASSPHRASE)
    other = unique_tenant()
    other_admin = make_client("root-" + other, tenant=other, roles=["admin"])
    job_id = upload(other_admin, data, allow_other_tenant=True)
    err = assert_error(other_admin.post(f"/admin/v1/imports/{job_id}/start",
                                        json={"parts": 1, "passphrase": "not the passphrase"}), 400)
    assert err["message"] == "the passphrase does not open this export"

    changed = bytearray(data)
    changed[-40] ^= 1
    assert refused(other_admin, bytes(changed), allow_other_tenant=True) == (
        "frame 1 of the file does not open: it was cut short or changed")
    assert refused(other_admin, data[:-30], allow_other_tenant=True) == (
        "the file ends in the middle of a frame: it was cut short")
    assert_error(get(make_client(uid, tenant=other), ["user", uid, "memories"], "a"), 404, "NOT_FOUND")

    _, plain = export_file(admin, encrypt=False)
    lines = plain.splitlines(keepends=True)
    forged = b"".join([lines[0], lines[1].replace(b"one", b"two"), *lines[2:]])
    assert refused(other_admin, forged, passphrase=None, allow_other_tenant=True) == (
        "the file's checksum does not match its records: it was changed or cut short")
    assert_error(get(make_client(uid, tenant=other), ["user", uid, "memories"], "a"), 404, "NOT_FOUND")


def test_bad_requests_are_400_envelopes(admin):
    assert_error(admin.post("/admin/v1/exports", json={}), 400, "INVALID_ARGUMENT")  # no key and no encrypt: false
    assert_error(admin.post("/admin/v1/exports", json={"passphrase": "short"}), 400, "INVALID_ARGUMENT")
    assert_error(admin.post("/admin/v1/exports", json={"encrypt": False, "passphrase": PASSPHRASE}), 400)
    assert_error(admin.post("/admin/v1/exports", json={"encrypt": False, "scope": {"prefix": []}}), 400)
    # a KMS key the deployment does not list for exports (and, locally, any KMS key)
    unlisted = "arn:aws:kms:us-east-1:123456789012:key/11111111-2222-3333-4444-555555555555"
    assert_error(admin.post("/admin/v1/exports", json={"kms_key_id": unlisted}), 400, "INVALID_ARGUMENT")
    job_id = admin.post("/admin/v1/imports", json={}).json()["id"]
    assert_error(admin.put(f"/admin/v1/imports/{job_id}/parts", json={"index": "x", "data": "AAAA"}), 400)
    assert_error(admin.put(f"/admin/v1/imports/{job_id}/parts", json={"index": 0, "data": "!!!!"}), 400)
    assert_error(admin.post(f"/admin/v1/imports/{job_id}/start", json={"parts": 1}), 400)  # nothing uploaded
    admin.put(f"/admin/v1/imports/{job_id}/parts",
              json={"index": 0, "data": base64.b64encode(b"not an export\n").decode()})
    assert_error(admin.post(f"/admin/v1/imports/{job_id}/start", json={"parts": 1}), 400)
    assert_error(admin.get(f"/admin/v1/exports/{quote('00000000-0000-0000-0000-000000000000')}"), 404)


def test_the_cli_and_the_client_export_and_import(live_server, me, uid, tenant, tmp_path, capsys):
    from memsvc.cli import main
    from memsvc_client import MemsvcClient
    from memsvc_client.transfer import export_to_file, import_file as client_import

    put_ok(me, ["user", uid, "memories"], "a", {"text": "one"})
    on_the_timeline(me, ["user", uid, "memories"], ["a"])
    (tmp_path / "pass").write_text(PASSPHRASE + "\n")
    source_token = live_server.token("root-" + tenant, tenant=tenant, roles=["admin"])
    other = unique_tenant()
    other_token = live_server.token("root-" + other, tenant=other, roles=["admin"])
    out = tmp_path / "alice.mexp"
    assert main(["export", "--url", live_server.url, "--token", source_token, "--out", str(out), "--user-id", uid,
                 "--passphrase-file", str(tmp_path / "pass")]) == 0
    assert json.loads(capsys.readouterr().out)["counts"] == {"memory": 1, "memory_version": 1}
    assert main(["import", str(out), "--url", live_server.url, "--token", other_token, "--passphrase-file",
                 str(tmp_path / "pass")]) == 1  # another tenant's file, without the flag
    assert "allow_other_tenant" in capsys.readouterr().err
    assert main(["import", str(out), "--url", live_server.url, "--token", other_token, "--passphrase-file",
                 str(tmp_path / "pass"), "--allow-other-tenant"]) == 0
    assert json.loads(capsys.readouterr().out)["counts"] == {"memory": {"create": 1}, "memory_version": {"create": 1}}

    with MemsvcClient(live_server.url, other_token) as client:
        job = client_import(client, out, passphrase=PASSPHRASE, allow_other_tenant=True, poll=0.1)
        assert job["counts"] == {"memory": {"skip": 1}, "memory_version": {"skip": 1}}
        job = export_to_file(client, tmp_path / "copy.jsonl", encrypt=False, poll=0.1)
    lines = (tmp_path / "copy.jsonl").read_bytes().splitlines()
    assert json.loads(lines[0])["tenant"] == other and json.loads(lines[1])["value"] == {"text": "one"}


def rewritten(plain: bytes, records: Any) -> bytes:
    """A plaintext export with its records replaced by `records(list of the file's records)`, and
    its checksum made again: a file written by hand, or by another tool, that is otherwise whole."""
    lines = [json.loads(line) for line in plain.splitlines()]
    writer = LineWriter()
    return writer.lines([lines[0], *records(lines[1:-1])]) + writer.trailer()


def test_a_record_dated_in_the_future_is_refused_before_anything_is_written(make_client, me, admin, uid):
    """A restored event's stamp moves the tenant's timeline clock up to it: one dated 9999-12-31
    once stopped the local timeline, every tenant's writes with it. No record may say it happened
    after the import (5 minutes of the exporting machine's clock running ahead aside)."""
    ns = ["user", uid, "memories"]
    put_ok(me, ns, "a", {"text": "one"})
    put_ok(me, ns, "a", {"text": "two"})
    on_the_timeline(me, ns, ["a"])
    _, plain = export_file(admin, encrypt=False)
    other = unique_tenant()
    other_admin = make_client("root-" + other, tenant=other, roles=["admin"])
    for kind, field in (("memory_version", "occurred_at"), ("memory_version", "changed_at"),
                        ("memory", "created_at"), ("memory", "updated_at"), ("memory", "last_accessed_at")):
        def dated_later(records, kind=kind, field=field):
            return [{**r, field: "9999-12-31T23:59:59.999999Z"} if r["kind"] == kind else r for r in records]

        why = refused(other_admin, rewritten(plain, dated_later), passphrase=None, allow_other_tenant=True)
        assert re.fullmatch(rf"line \d+: {field} 9999-12-31T23:59:59.999999Z is in the future", why), why

    def updated_before_created(records):  # reads order by updated_at; created_at is the first write
        return [{**r, "updated_at": "2020-01-01T00:00:00Z"} if r["kind"] == "memory" else r for r in records]

    why = refused(other_admin, rewritten(plain, updated_before_created), passphrase=None, allow_other_tenant=True)
    assert re.fullmatch(r"line \d+: updated_at is before created_at", why), why
    assert_error(get(make_client(uid, tenant=other), ns, "a"), 404, "NOT_FOUND")
    # the tenant's timeline goes on
    theirs = make_client(uid, tenant=other)
    put_ok(theirs, ns, "b", {"text": "after"})
    on_the_timeline(theirs, ns, ["b"])
    assert import_file(other_admin, plain, passphrase=None, allow_other_tenant=True)["state"] == "done"


def test_an_imported_id_that_names_another_memory_is_not_kept(make_client, me, admin, uid, tenant):
    """Feedback, restore and an admin's delete find a memory by its id: a file's id that already
    names another memory of the tenant (another user's) refuses the file, as does one that is
    not a UUID as memsvc mints them; one that names another memory of the same file gets a new
    id, listed as remapped."""
    mine = put_ok(me, ["user", uid, "memories"], "a", {"text": "alice's"})
    bob_uid = "bob-" + uid
    bob = make_client(bob_uid, tenant=tenant)
    put_ok(bob, ["user", bob_uid, "memories"], "b", {"text": "bob's"})
    _, plain = export_file(admin, encrypt=False, scope={"user_id": bob_uid})

    def bobs_memory_as(key, memory_id):
        return lambda records: [{**r, "key": key, "id": memory_id} for r in records if r["kind"] == "memory"]

    for key, bad in (("b2", mine["id"]), ("b3", "NOT-A-UUID " + "x" * 20000), ("b4", mine["id"].upper())):
        why = refused(admin, rewritten(plain, bobs_memory_as(key, bad)), passphrase=None)
        assert why.startswith("line 2:") and "id" in why, why
        assert_error(get(bob, ["user", bob_uid, "memories"], key), 404, "NOT_FOUND")

    fresh = str(uuid.uuid4())
    twice = rewritten(plain, lambda records: [*bobs_memory_as("c1", fresh)(records),
                                              *bobs_memory_as("c2", fresh)(records)])
    job = import_file(admin, twice, passphrase=None)
    assert job["state"] == "done" and job["counts"]["memory"] == {"create": 2, "remapped": 1}, job
    [remap] = job["remapped"]
    assert (remap["key"], remap["id"]) == ("c2", fresh) and uuid.UUID(remap["new_id"])
    assert get(bob, ["user", bob_uid, "memories"], "c1").json()["id"] == fresh
    assert get(bob, ["user", bob_uid, "memories"], "c2").json()["id"] == remap["new_id"]
    r = admin.delete(f"/admin/v1/memories/{mine['id']}")
    assert r.status_code in (200, 204), r.text
    assert_error(get(me, ["user", uid, "memories"], "a"), 404, "NOT_FOUND")  # the one the id names


def test_a_relation_whose_ends_the_file_never_names_writes_them_and_the_rest(make_client, me, admin, uid):
    """The ends of a relation are written as entities where the tenant has none, also when the
    file has no `entity` record for them: the import does not stop halfway, after what came
    before the relation was written."""
    ns = ["user", uid, "memories"]
    put_ok(me, ns, "before", {"text": "one"})
    put_ok(me, ns, "after", {"text": "two"})
    _, plain = export_file(admin, encrypt=False)
    relation = {"kind": "relation", "namespace": ns, "source": "Nowhere One", "type": "RELATES_TO",
                "target": "Nowhere Two", "valid_from": None, "valid_to": None}

    def with_a_bare_relation(records):
        memories = [r for r in records if r["kind"] == "memory"]
        return [relation, *memories]

    other = unique_tenant()
    other_admin = make_client("root-" + other, tenant=other, roles=["admin"])
    job = import_file(other_admin, rewritten(plain, with_a_bare_relation), passphrase=None,
                      allow_other_tenant=True)
    assert job["state"] == "done", json.dumps(job)
    assert job["counts"] == {"relation": {"create": 1}, "memory": {"create": 2}}, job
    theirs = make_client(uid, tenant=other)
    assert get(theirs, ns, "before").status_code == get(theirs, ns, "after").status_code == 200
    r = theirs.post("/v1/graph/path", json={"namespace_prefix": ns, "from": {"entity": "Nowhere One"},
                                            "to": {"entity": "Nowhere Two"}})
    assert r.status_code == 200 and r.json()["found"] is True, r.text


def test_a_record_the_tenant_refuses_while_writing_ends_the_job_saying_what_was_written(make_client, me, admin, uid):
    """What only the target can refuse (a sub-task that another of its task contexts holds) is
    found as the job writes: the records before it are written, and the failed job counts them."""
    ns = ["user", uid, "memories"]
    put_ok(me, ns, "a", {"text": "one"})
    r = me.post("/v1/memory/task-context", json={"task_id": f"t-{uid}", "event_type": "e", "response_topic": "r",
                                                 "sub_tasks": [f"t-{uid}-a"]})
    assert r.status_code in (200, 201), r.text
    on_the_timeline(me, ns, ["a"])
    _, plain = export_file(admin, encrypt=False)
    other = unique_tenant()
    other_admin = make_client("root-" + other, tenant=other, roles=["admin"])
    theirs = make_client(uid, tenant=other)
    r = theirs.post("/v1/memory/task-context", json={"task_id": f"other-{uid}", "event_type": "e",
                                                     "response_topic": "r", "sub_tasks": [f"t-{uid}-a"]})
    assert r.status_code in (200, 201), r.text
    job = import_file(other_admin, plain, passphrase=None, allow_other_tenant=True)
    assert job["state"] == "failed" and f"task context t-{uid}" in job["error"]["message"], job
    assert job["counts"] == {"memory": {"create": 1}, "memory_version": {"create": 1}}, job
    assert get(theirs, ns, "a").json()["value"] == {"text": "one"}
