"""Erasing a user (issue 26), on both backends, through each backend's router: every kind of
object the user can have is written, the user is erased, and the raw storage (every SQLite file
of the data dir, byte for byte; every DynamoDB table and the S3 Vectors index on moto) holds
neither the user's id nor a word of what they wrote. Another user and another tenant keep all of
theirs; the erasure is idempotent, resumable and admin only."""

from __future__ import annotations

import base64
import json
from urllib.parse import urlencode

import pytest

from memsvc.core.errors import NotFound
from memsvc.local_server import build_event, stringify_claims
from memsvc.service.user_erasure import UserErasure
from tests.fakes.aws_stack import BUCKET, INDEX, KEYWORD_TABLE, TABLE


def call(backend, method: str, path: str, claims: dict, body=None, query: dict | None = None):
    event = build_event(method=method, path=path, raw_query=urlencode(query or {}, doseq=True), headers={},
                        source_ip="127.0.0.1", body=json.dumps(body) if body is not None else None,
                        authorizer={"jwt": {"claims": stringify_claims(claims), "scopes": None}})
    response = backend.app.router.handle(event)
    return response["statusCode"], json.loads(response["body"]) if response["body"] else None


def admin_of(tenant: str) -> dict:
    return {"sub": "root", "tenant_id": tenant, "roles": ["admin"]}


def write_everything(backend, tenant: str, user: str, mark: str) -> None:
    """One of every kind of object for `user`, each carrying `mark` in what it keeps in the clear
    (keys and ids) and in its content (sealed at rest)."""
    me = {"sub": user, "tenant_id": tenant}

    def ok(method, path, body=None, query=None, *, status=(200, 201, 202, 204)):
        got, answer = call(backend, method, path, me, body, query)
        assert got in status, (method, path, got, answer)
        return answer

    notes = ["user", user, "notes"]
    ok("PUT", "/v1/memories", {"namespace": notes, "key": f"note-{mark}",
                               "value": {"text": f"{mark} lives in Quintessa"}, "attributes": {"tag": mark}})
    ok("PUT", "/v1/memories", {"namespace": notes, "key": f"note-{mark}",
                               "value": {"text": f"{mark} moved to Quintessa harbour"}})
    ok("PUT", "/v1/memories", {"namespace": notes, "key": f"gone-{mark}", "value": {"text": f"{mark} deleted"}})
    ok("DELETE", "/v1/memories", query={"ns": notes, "key": f"gone-{mark}"})
    remembered = ok("POST", "/v1/memories/remember", {"content": f"{mark} prefers marzipan"})
    ok("POST", "/v1/memories/feedback", {"id": remembered["memory"]["id"], "signal": "useful"})
    ok("POST", "/v1/memories/remember", {"content": f"{mark} likes queued jobs", "wait": False}, status=(202,))
    ok("POST", "/v1/memory/semantic", {"content": f"{mark} semantic fact", "external_id": f"ext-{mark}"})
    ok("POST", "/v1/memory/sessions", {"session_id": f"s-{mark}", "title": f"{mark} trip"})
    ok("POST", f"/v1/memory/sessions/s-{mark}/messages", {"role": "user", "content": f"{mark} hotel in Alfama"})
    ok("POST", "/v1/memory/task-context", {"task_id": f"t-{mark}", "event_type": "research.requested",
                                           "data": {"q": mark}, "sub_tasks": [f"st-{mark}"]})
    ok("POST", "/v1/memory/plans", {"plan_id": f"p-{mark}", "goal_event": "trip.booked", "goal_data": {"x": mark}})
    ok("PUT", f"/v1/memory/working/p-{mark}/k-{mark}", {"value": {"v": mark}})
    ok("PUT", "/v1/graph/entities", {"namespace": notes, "name": f"{mark}corp", "type": "ORGANIZATION"})
    ok("PUT", "/v1/graph/entities", {"namespace": notes, "name": f"{mark}son", "type": "PERSON"})
    ok("PUT", "/v1/graph/relations", {"namespace": notes, "source": f"{mark}son", "type": "WORKS_ON",
                                      "target": f"{mark}corp"})
    backend.drain()


def raw_storage(backend) -> str:
    """Everything the backend keeps at rest, as text."""
    if backend.local is not None:
        files = sorted(p for p in backend.data_dir.rglob("*") if p.is_file())
        return "".join(f.read_bytes().decode("latin-1") for f in files)
    client = backend.aws.clients.dynamodb
    rows = [item for table in (TABLE, KEYWORD_TABLE)
            for page in client.get_paginator("scan").paginate(TableName=table) for item in page["Items"]]
    vectors, token = [], None
    while True:
        page = backend.aws.clients.s3vectors.list_vectors(vectorBucketName=BUCKET, indexName=INDEX,
                                                          returnMetadata=True, **({"nextToken": token} if token else {}))
        vectors += page["vectors"]
        if not (token := page.get("nextToken")):
            return json.dumps(rows, default=str) + json.dumps(vectors, default=str)


def erase(backend, tenant: str, user: str) -> dict:
    status, receipt = call(backend, "DELETE", f"/admin/v1/users/{user}", admin_of(tenant))
    assert status == 200, receipt
    backend.drain()  # AWS: the item deletions' stream records reach the indexer and the timeline
    return receipt


def test_erasing_a_user_leaves_nothing_of_theirs_in_any_store(backend):
    write_everything(backend, "acme", "zoe4711", "Qx9mark")
    write_everything(backend, "acme", "yan4711", "Wy7keep")
    write_everything(backend, "globex", "zed4711", "Vz5other")
    before = raw_storage(backend)
    assert "zoe4711" in before and "Qx9mark" in before and "Wy7keep" in before

    receipt = erase(backend, "acme", "zoe4711")

    assert receipt["status"] == "completed" and receipt["completed_at"] and receipt["user_id"] == "zoe4711"
    assert receipt["erased"]["memories"] == 5 and receipt["erased"]["timeline"] >= 6, receipt
    assert receipt["erased"]["sessions"] == 1 and receipt["erased"]["task_contexts"] == 1
    assert receipt["erased"].get("jobs", 1) == 1  # locally; SQS keeps a queued job (docs/data-ownership.md)
    after = raw_storage(backend)
    assert "zoe4711" not in after and "Qx9mark" not in after
    assert all(kept in after for kept in ("yan4711", "Wy7keep", "zed4711", "Vz5other"))


def test_the_other_users_and_tenants_keep_everything(backend):
    write_everything(backend, "acme", "zoe4711", "Qx9mark")
    write_everything(backend, "acme", "yan4711", "Wy7keep")
    write_everything(backend, "globex", "zoe4711", "Vz5other")
    kept = {(tenant, user): _visible(backend, tenant, user) for tenant, user in
            (("acme", "yan4711"), ("globex", "zoe4711"))}

    erase(backend, "acme", "zoe4711")

    assert _visible(backend, "acme", "zoe4711") == {"memories": 0, "sessions": 0, "plans": 0, "events": 0}
    for (tenant, user), seen in kept.items():
        assert _visible(backend, tenant, user) == seen


def _visible(backend, tenant: str, user: str) -> dict[str, int]:
    me = {"sub": user, "tenant_id": tenant}
    _, found = call(backend, "POST", "/v1/memories/search", me, {"namespace_prefix": ["user", user], "limit": 100})
    _, sessions = call(backend, "GET", "/v1/memory/sessions", me)
    _, plans = call(backend, "GET", "/v1/memory/plans", me)
    _, events = call(backend, "GET", "/v1/memories/events", admin_of(tenant), query={"ns": ["user", user]})
    return {"memories": len(found["items"]), "sessions": len(sessions["sessions"]), "plans": len(plans["plans"]),
            "events": len(events["events"])}


def test_the_timeline_keeps_each_entry_without_content(backend):
    write_everything(backend, "acme", "zoe4711", "Qx9mark")
    _, before = call(backend, "GET", "/v1/memories/events", admin_of("acme"), query={"ns": ["user", "zoe4711"]})

    receipt = erase(backend, "acme", "zoe4711")

    _, after = call(backend, "GET", "/v1/memories/events", admin_of("acme"),
                    query={"ns": ["erased", receipt["erasure_id"]]})
    assert [(e["id"], e["kind"], e["version"], e["occurred_at"]) for e in after["events"]] == \
        [(e["id"], e["kind"], e["version"], e["occurred_at"]) for e in before["events"]]
    assert all(e["key"] == e["memory_id"] and e["value"] is None and e["attributes"] is None
               for e in after["events"])


def test_erasing_again_answers_the_same_receipt(backend):
    write_everything(backend, "acme", "zoe4711", "Qx9mark")
    first = erase(backend, "acme", "zoe4711")

    assert erase(backend, "acme", "zoe4711") == first
    status, shown = call(backend, "GET", "/admin/v1/users/zoe4711/erasure", admin_of("acme"))
    assert status == 200 and shown == first


def test_a_user_who_wrote_again_is_erased_again(backend):
    write_everything(backend, "acme", "zoe4711", "Qx9mark")
    first = erase(backend, "acme", "zoe4711")
    backend.clock.advance(1)
    call(backend, "PUT", "/v1/memories", {"sub": "zoe4711", "tenant_id": "acme"},
         {"namespace": ["user", "zoe4711", "notes"], "key": "back", "value": {"text": "Ub3again"}})
    backend.drain()

    second = erase(backend, "acme", "zoe4711")

    assert second["erasure_id"] != first["erasure_id"] and second["erased"]["memories"] == 1
    assert "Ub3again" not in raw_storage(backend)


def test_a_user_with_nothing_is_erased_with_zero_counts(backend):
    receipt = erase(backend, "acme", "nobody")
    assert receipt["status"] == "completed" and set(receipt["erased"].values()) == {0}


def test_only_an_admin_of_the_tenant_may_erase(backend):
    write_everything(backend, "acme", "zoe4711", "Qx9mark")
    for claims in ({"sub": "zoe4711", "tenant_id": "acme"}, {"sub": "yan4711", "tenant_id": "acme"}):
        status, answer = call(backend, "DELETE", "/admin/v1/users/zoe4711", claims)
        assert status == 403 and answer["error"]["code"] == "FORBIDDEN"
    status, _ = call(backend, "DELETE", "/admin/v1/users/zoe4711", admin_of("globex"))
    assert status == 200
    assert _visible(backend, "acme", "zoe4711")["memories"] > 0


@pytest.mark.parametrize("user_id", ["%20%0A", "a%00b", "x" * 257])
def test_a_user_id_no_token_has_is_refused(backend, user_id):
    status, answer = call(backend, "DELETE", f"/admin/v1/users/{user_id}", admin_of("acme"))
    assert status == 400 and answer["error"]["code"] == "INVALID_ARGUMENT"
    assert answer["error"]["details"]["field"] == "user_id"


def test_an_erasure_cut_off_after_a_page_goes_on_where_it_stopped(backend):
    write_everything(backend, "acme", "zoe4711", "Qx9mark")
    for n in range(5):
        call(backend, "PUT", "/v1/memories", {"sub": "zoe4711", "tenant_id": "acme"},
             {"namespace": ["user", "zoe4711", "bulk"], "key": f"k{n}", "value": {"text": f"bulk {n}"}})
    backend.drain()
    erasure = _erasure_in_pages(backend, page_rows=2)

    first = erasure.erase(_caller("acme"), "zoe4711", pages=1)  # then the process dies
    status, shown = call(backend, "GET", "/admin/v1/users/zoe4711/erasure", admin_of("acme"))
    assert first.status == "running" and status == 200 and shown["status"] == "running"
    receipts = [first]
    while receipts[-1].status == "running":  # each call picks up where the last one stopped
        receipts.append(erasure.erase(_caller("acme"), "zoe4711", pages=3))
    backend.drain()

    done = receipts[-1]
    assert len(receipts) > 3 and {r.erasure_id for r in receipts} == {first.erasure_id}
    assert done.erased["memories"] == 10
    assert "zoe4711" not in raw_storage(backend)


# Right after the memories (on AWS before the namespace registry's step), or past the registry too.
@pytest.mark.parametrize("behind", ["memories", "timeline"])
def test_a_write_that_lands_behind_the_erasure_is_erased_before_it_completes(backend, behind):
    """The user's agent writes while the erasure runs: once the first pass has gone by the
    memories and the plans, a memory (into a namespace the user had) and a plan land behind it.
    The erasure goes over every store again and only completes after a pass that found nothing."""
    write_everything(backend, "acme", "zoe4711", "Qx9mark")
    erasure = _erasure_in_pages(backend, page_rows=1000)
    stores, written = erasure._stores, []
    after = stores.stores.index(behind)

    class WritingBehind:
        def __getattr__(self, name):
            return getattr(stores, name)

        def erase(self, tenant, user_id, store, **kw):
            answer = stores.erase(tenant, user_id, store, **kw)
            if not written and stores.stores.index(store) >= after:
                me = {"sub": "zoe4711", "tenant_id": "acme"}
                written.append(call(backend, "PUT", "/v1/memories", me, {
                    "namespace": ["user", "zoe4711", "notes"], "key": "Wr1tebehind", "value": {"text": "Wr1tebehind"}}))
                written.append(call(backend, "POST", "/v1/memory/plans", me, {
                    "plan_id": "Pl4nbehind", "goal_event": "trip.booked"}))
                backend.drain()  # its indexing and its timeline event, while the erasure runs
            return answer

    erasure._stores = WritingBehind()
    receipt = erasure.erase(_caller("acme"), "zoe4711")
    while receipt.status == "running":  # on AWS a request's pages may end before the second pass does
        receipt = erasure.erase(_caller("acme"), "zoe4711")
    backend.drain()

    assert [w[0] for w in written] == [200, 201] and receipt.status == "completed"
    status, _ = call(backend, "GET", "/v1/memories", {"sub": "zoe4711", "tenant_id": "acme"},
                     query={"ns": ["user", "zoe4711", "notes"], "key": "Wr1tebehind"})
    assert status == 404 and _visible(backend, "acme", "zoe4711")["memories"] == 0
    assert _visible(backend, "acme", "zoe4711")["plans"] == 0
    storage = raw_storage(backend)
    assert "Wr1tebehind" not in storage and "Pl4nbehind" not in storage  # keys and ids are in the clear


def _caller(tenant: str):
    from memsvc.core.models import Caller

    return Caller(tenant_id=tenant, user_id="root", roles=("admin",))


def _erasure_in_pages(backend, *, page_rows: int) -> UserErasure:
    """The backend's erasure with pages of `page_rows` rows (the service's own stores and ledger)."""
    service = backend.app.services.user_erasure
    return UserErasure(stores=service._stores, ledger=service._ledger, sealer=service._sealer,
                       access=service._access, clock=backend.clock, bus=None, page_rows=page_rows)


def test_a_completed_erasure_is_announced_once_on_the_bus(backend):
    if backend.aws is None:
        pytest.skip("the local bus is the events file of `memsvc serve --events-file` (tests/api)")
    write_everything(backend, "acme", "zoe4711", "Qx9mark")
    receipt = erase(backend, "acme", "zoe4711")
    erase(backend, "acme", "zoe4711")

    erased = [e for e in backend.aws.published() if e["detail-type"] == "user.erased"]
    assert [e["detail"] for e in erased] == [{
        "id": receipt["erasure_id"], "tenant": "acme", "user_id": "zoe4711", "erasure_id": receipt["erasure_id"],
        "started_at": receipt["started_at"], "completed_at": receipt["completed_at"], "erased": receipt["erased"]}]


def test_the_local_worker_finishes_an_erasure_a_request_left_running(backend):
    if backend.local is None:
        pytest.skip("on AWS the next DELETE continues it: no worker does")
    write_everything(backend, "acme", "zoe4711", "Qx9mark")
    write_everything(backend, "acme", "yan4711", "Wy7keep")
    erasure = _erasure_in_pages(backend, page_rows=2)
    started = erasure.erase(_caller("acme"), "zoe4711", pages=1)

    assert erasure.continue_running(pages=1_000) == 1
    assert erasure.continue_running(pages=1_000) == 0  # nothing left running

    done = erasure.status(_caller("acme"), "zoe4711")
    assert (done.erasure_id, done.status) == (started.erasure_id, "completed")
    assert "zoe4711" not in raw_storage(backend) and "Wy7keep" in raw_storage(backend)


def test_the_worker_leaves_alone_an_erasure_a_request_is_running(backend):
    """A DELETE and the worker's turn never run one erasure at once (each would count the other's
    rows as 0 and announce it again): the worker's turn, coming while a page runs, passes it over."""
    write_everything(backend, "acme", "zoe4711", "Qx9mark")
    erasure = _erasure_in_pages(backend, page_rows=2)
    stores, turns = erasure._stores, []

    class TurnDuringAPage:
        def __getattr__(self, name):
            return getattr(stores, name)

        def erase(self, *args, **kwargs):
            if not turns:
                turns.append(erasure.continue_running(pages=1_000))
            return stores.erase(*args, **kwargs)

    erasure._stores = TurnDuringAPage()
    receipt = erasure.erase(_caller("acme"), "zoe4711", pages=10_000)

    assert turns == [0] and receipt.status == "completed"
    assert "zoe4711" not in raw_storage(backend)


def test_erasing_a_user_removes_the_exports_and_imports_that_may_hold_them(backend):
    """An export of the user, of the tenant or of `["user"]`, and any import (its file is the
    uploader's: it may hold anyone), go with their files' parts: the service keeps no copy of an
    erased user. Another user's export and one of a shared prefix stay."""
    from tests.contract.test_transfer_ports import run_jobs
    from memsvc.core.models import Caller
    from memsvc.service.data_export import StartExport
    from memsvc.service.data_import import CreateImport, ImportPart

    write_everything(backend, "acme", "zoe4711", "Qx9mark")
    write_everything(backend, "acme", "yan4711", "Wy7keep")
    root = Caller("acme", "root", ("admin",))
    exports, imports = backend.app.services.exports, backend.app.services.imports
    scopes = {"zoe": {"user_id": "zoe4711"}, "tenant": {}, "users": {"prefix": ["user"]},
              "yan": {"user_id": "yan4711"}, "project": {"prefix": ["project"]}}
    jobs = {name: exports.start(root, StartExport.parse({"scope": scope, "encrypt": False})).job_id
            for name, scope in scopes.items()}
    run_jobs(backend)  # the exports, and write_everything's queued remember
    backend.drain()
    assert all(exports.status(root, job_id).state == "done" for job_id in jobs.values())
    zoe = exports.status(root, jobs["zoe"])
    data = b"".join(exports.part(root, zoe.job_id, i)[0] for i in range(zoe.parts))
    upload = imports.create(root, CreateImport.parse({}))  # uploaded, never started
    imports.put_part(root, upload.job_id, ImportPart.parse({"index": 0, "data": base64.b64encode(data).decode()}))
    assert b"Qx9mark" in data and "Qx9mark" in raw_storage(backend)

    receipt = erase(backend, "acme", "zoe4711")

    assert receipt["erased"]["transfers"] == 4, receipt  # zoe's, the tenant's, ["user"]'s, the upload
    after = raw_storage(backend)
    assert "zoe4711" not in after and "Qx9mark" not in after
    for name in ("zoe", "tenant", "users"):
        with pytest.raises(NotFound):
            exports.status(root, jobs[name])
    with pytest.raises(NotFound):
        imports.status(root, upload.job_id)
    kept = exports.status(root, jobs["yan"])
    assert kept.state == "done" and exports.status(root, jobs["project"]).state == "done"
    assert b"Wy7keep" in b"".join(exports.part(root, kept.job_id, i)[0] for i in range(kept.parts))


def test_no_lock_outlives_the_erasures_it_served(backend):
    """The per-erasure locks go with the last run that held them: a long-lived server keeps none
    for users erased long ago."""
    erasure = backend.app.services.user_erasure
    for user in ("zoe4711", "yan4711"):
        erasure.erase(_caller("acme"), user)
    erasure.continue_running()
    assert erasure._runs == {}
