"""`memsvc smoke`: one call to every route family of a running deployment, in a namespace of its
own, with everything it wrote deleted afterwards (also when a step fails), and a table of what
passed and how long each call took.

Everything the run writes lies under one session layer, `user/<user>/sessions/memsvc-smoke-<run>`,
except the semantic memory (the API keeps those in `user/<user>/semantic`, under the run's own
external id); the last step checks that none of it is left. What stays, by design: the timeline's
record of the run's writes (kept for the tenant's retention), the export job of the run's
namespace (removed with its file when it expires) and the erasure receipt of a user of the run's
own who never wrote anything. Admin routes are called only when the caller is an admin (the
first one answering 403 skips the rest), and only the ones that change nothing but the run's own
data: a smoke test must not move a tenant's settings, policies or memories.

`remember` and `extract` may answer 202 (the model provider is slow or failing: the work is queued
and retried). That passes, with a note, and the cleanup first waits for the queued work to write
its memories (their events on the timeline, polled a bounded number of times) and only then
deletes the run's namespace and checks that nothing is left: a queued job that ran after the
delete would leave memories behind.
"""

from __future__ import annotations

import base64
import json
import re
import time
import uuid
from collections.abc import Callable, Generator, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote, urlsplit

import httpx

__all__ = ["Bearer", "SigV4", "SmokeError", "StepResult", "format_table", "run_smoke", "sigv4", "user_of_token"]

_EXECUTE_API_HOST = re.compile(r"\.execute-api\.([a-z0-9-]+)\.(?:vpce\.)?amazonaws\.com(?:\.cn)?$")
_TIMEOUT_SECONDS = 60.0  # a cold Lambda, or a first call to Bedrock
_STARTED, _LATENCY = "memsvc_smoke_started", "memsvc_smoke_ms"
_POLL_SECONDS, _POLL_ATTEMPTS = 2.0, 90  # a queued job is retried with backoff: up to 3 minutes
_WRITTEN = ("add", "update")  # the event kinds of a version a queued job wrote


class SmokeError(Exception):
    """The run cannot start: no credentials, no region, a token whose user cannot be read."""


@dataclass(frozen=True)
class StepResult:
    step: str
    route: str  # the route table's method and path template
    status: str  # "pass", "fail" or "skip"
    latency_ms: float | None  # None: no call was made, or none was answered
    note: str = ""


class Bearer(httpx.Auth):
    def __init__(self, token: str) -> None:
        self.token = token

    def auth_flow(self, request: httpx.Request) -> Generator[httpx.Request, httpx.Response, None]:
        request.headers["Authorization"] = f"Bearer {self.token}"
        yield request


def user_of_token(token: str) -> str:
    """The `sub` of a JWT, read without verifying it: the server verifies; the run only needs to
    know whose namespaces it may write."""
    try:
        payload = token.split(".")[1]
        sub = json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))["sub"]
    except (IndexError, ValueError, KeyError, TypeError):
        raise SmokeError("the token is not a JWT with a sub claim: name the user with --user") from None
    if not isinstance(sub, str) or not sub:
        raise SmokeError("the token's sub claim is empty: name the user with --user")
    return sub


def sigv4(url: str, region: str | None) -> httpx.Auth:
    """SigV4 for API Gateway's IAM authorizer (service `execute-api`), with the credentials of the
    default chain (environment, profile, SSO, instance or task role)."""
    import botocore.session
    from botocore.exceptions import BotoCoreError

    session = botocore.session.get_session()
    try:
        credentials = session.get_credentials()
        configured_region = session.get_config_variable("region")
    except BotoCoreError as exc:
        raise SmokeError(f"the AWS configuration cannot be read ({type(exc).__name__}): check AWS_PROFILE, "
                         "AWS_CONFIG_FILE and AWS_SHARED_CREDENTIALS_FILE") from None
    if credentials is None:
        raise SmokeError("no AWS credentials found (environment, AWS_PROFILE, SSO or an instance role) for --sigv4")
    match = _EXECUTE_API_HOST.search((urlsplit(url).hostname or "").lower())
    region = region or (match.group(1) if match else None) or configured_region
    if not region:
        raise SmokeError("no region for SigV4: pass --region (the URL is not an execute-api host)")
    return SigV4(credentials, region)


class SigV4(httpx.Auth):
    """Signs the method, the URL as sent, the body, `host`, `content-type` and every `x-` header
    (so `X-Tenant-Id` is covered), as botocore signs for `execute-api`."""

    requires_request_body = True

    def __init__(self, credentials: Any, region: str) -> None:
        self.credentials = credentials
        self.region = region

    def auth_flow(self, request: httpx.Request) -> Generator[httpx.Request, httpx.Response, None]:
        from botocore.auth import SigV4Auth
        from botocore.awsrequest import AWSRequest

        frozen = self.credentials.get_frozen_credentials()
        signed = {name: value for name, value in request.headers.items()
                  if name in ("host", "content-type") or (name.startswith("x-") and not name.startswith("x-amz-"))}
        aws = AWSRequest(method=request.method, url=str(request.url), data=request.content, headers=signed)
        SigV4Auth(frozen, "execute-api", self.region).add_auth(aws)
        for name in ("X-Amz-Date", "X-Amz-Security-Token", "Authorization"):
            if name in aws.headers:
                request.headers[name] = aws.headers[name]
        yield request


def run_smoke(url: str, auth: httpx.Auth, *, user: str, tenant: str | None = None, run_id: str | None = None,
              transport: httpx.BaseTransport | None = None, poll_seconds: float = _POLL_SECONDS,
              poll_attempts: int = _POLL_ATTEMPTS, sleep: Callable[[float], None] = time.sleep) -> list[StepResult]:
    """Every step's result, in order; the cleanup's steps last. `run_id`: the run's namespace
    segment is `memsvc-smoke-<run_id>` (default: random). `poll_seconds` and `poll_attempts`: how
    the cleanup waits for work a 202 queued."""
    headers = {"X-Tenant-Id": tenant} if tenant else {}
    with httpx.Client(base_url=url.rstrip("/"), auth=auth, headers=headers, timeout=_TIMEOUT_SECONDS,
                      transport=transport, event_hooks={"request": [_start_clock], "response": [_stop_clock]}) as http:
        run = _Run(http, user, run_id or uuid.uuid4().hex[:12], _Poll(poll_seconds, poll_attempts, sleep))
        try:
            run.exercise()
        finally:
            run.clean_up()
        return run.results


def format_table(results: list[StepResult]) -> str:
    rows = [("step", "route", "status", "ms", "note")] + [
        (r.step, r.route, r.status, "" if r.latency_ms is None else f"{r.latency_ms:.1f}", r.note) for r in results]
    widths = [max(len(row[i]) for row in rows) for i in range(4)]
    lines = ["  ".join([*(cell.ljust(w) if i != 3 else cell.rjust(w) for i, (cell, w) in
                          enumerate(zip(row[:4], widths))), row[4]]).rstrip() for row in rows]
    failed = sum(r.status == "fail" for r in results)
    skipped = sum(r.status == "skip" for r in results)
    lines.append(f"{len(results) - failed - skipped} passed, {failed} failed, {skipped} skipped")
    return "\n".join(lines)


@dataclass(frozen=True)
class _Poll:
    seconds: float
    attempts: int
    sleep: Callable[[float], None]


class _Run:
    def __init__(self, http: httpx.Client, user: str, run_id: str, poll: _Poll) -> None:
        self.http = http
        self.poll = poll
        self.queued: dict[str, str] = {}  # step -> the id of the work a 202 queued (a candidate, a job)
        self.user = user
        self.session_id = f"memsvc-smoke-{run_id}"
        self.prefix = ["user", user, "sessions", self.session_id]
        self.results: list[StepResult] = []
        self.written: dict[str, Any] = {}  # what the cleanup deletes, as it is created
        self.admin = False

    # -- the steps ---------------------------------------------------------------------------

    def exercise(self) -> None:
        self._service()
        self._memories()
        self._langgraph_store()
        self._typed_memories()
        self._sessions()
        self._workflow()
        self._graph()
        self._admin()

    def _service(self) -> None:
        with self.step("health", "GET /health") as s:
            s.expect(self.http.get("/health", auth=None), 200)
        with self.step("openapi", "GET /openapi.json") as s:
            s.expect(self.http.get("/openapi.json"), 200)
        with self.step("metrics", "GET /metrics") as s:
            answer = s.expect(self.http.get("/metrics", auth=None), 200, 404)
            if answer.status_code == 404:
                s.note = "published to CloudWatch as EMF here"
        with self.step("identity", "GET /v1/identity") as s:
            me = s.expect(self.http.get("/v1/identity"), 200).json()
            s.check(me["auth"] in ("jwt", "iam") and me["tenant_id"] and me["user_id"], "no identity came back")

    def _memories(self) -> None:
        notes = self.prefix + ["notes"]
        with self.step("put memory", "PUT /v1/memories") as s:
            s.expect(self.http.put("/v1/memories", json={
                "namespace": notes, "key": "tip", "value": {"text": "Python uses indentation for blocks"},
                "sync_index": True}), 200)
            self.written["memory"] = (notes, "tip")
        with self.step("get memory", "GET /v1/memories") as s:
            got = s.expect(self.http.get("/v1/memories", params=_ns(notes, key="tip")), 200).json()
            s.check(got["value"] == {"text": "Python uses indentation for blocks"}, "another value came back")
            self.written["memory_id"] = got["id"]
        with self.step("search", "POST /v1/memories/search") as s:
            found = s.expect(self.http.post("/v1/memories/search", json={
                "namespace_prefix": self.prefix, "query": "whitespace-sensitive syntax", "limit": 5}), 200).json()
            s.check([i["key"] for i in found["items"]] == ["tip"], "the memory was not found")
        with self.step("list namespaces", "GET /v1/memories/namespaces") as s:
            listed = s.expect(self.http.get("/v1/memories/namespaces", params=_ns(self.prefix, repeated="prefix")),
                              200).json()
            s.check(notes in listed["namespaces"], "the memory's namespace is not listed")
        with self.step("count namespaces", "GET /v1/memories/namespaces") as s:
            counted = s.expect(self.http.get("/v1/memories/namespaces", params=_ns(notes, repeated="prefix",
                                                                                   counts="true")), 200).json()
            s.check(counted["counts"] == [1], "the memory's namespace does not count it")
        with self.step("history", "GET /v1/memories/history") as s:
            history = s.expect(self.http.get("/v1/memories/history", params=_ns(notes, key="tip")), 200).json()
            s.check(len(history["versions"]) >= 1, "no version")
        with self.step("events", "GET /v1/memories/events") as s:
            s.expect(self.http.get("/v1/memories/events", params=_ns(self.prefix)), 200)

    def _langgraph_store(self) -> None:
        """LangGraph Platform's store API, as `langgraph_sdk`'s clients call it."""
        namespace = self.prefix + ["store"]
        with self.step("store put", "PUT /store/items") as s:
            if any("." in label for label in namespace):
                raise _Skipped("a namespace label holds '.', which the store API's GET cannot name")
            s.expect(self.http.put("/store/items", json={"namespace": namespace, "key": "lg",
                                                         "value": {"text": "LangGraph agents share this store"}}), 204)
            self.written["store_item"] = namespace
        with self.step("store get", "GET /store/items") as s:
            self.requires("store_item", "store put")
            got = s.expect(self.http.get("/store/items", params={"namespace": ".".join(namespace), "key": "lg"}),
                           200).json()
            s.check(got is not None and got["value"] == {"text": "LangGraph agents share this store"},
                    "another value came back")
        with self.step("store search", "POST /store/items/search") as s:
            self.requires("store_item", "store put")
            found = s.expect(self.http.post("/store/items/search", json={
                "namespace_prefix": namespace, "query": "graph agents", "limit": 5}), 200).json()
            s.check([i["key"] for i in found["items"]] == ["lg"], "the item was not found")
        with self.step("store namespaces", "POST /store/namespaces") as s:
            self.requires("store_item", "store put")
            listed = s.expect(self.http.post("/store/namespaces", json={"prefix": namespace}), 200).json()
            s.check(namespace in listed["namespaces"], "the item's namespace is not listed")
        with self.step("store delete", "DELETE /store/items") as s:
            self.requires("store_item", "store put")
            s.expect(self.http.request("DELETE", "/store/items", json={"namespace": namespace, "key": "lg"}), 204)
            del self.written["store_item"]

    def _typed_memories(self) -> None:
        session_layer = {"layer": "session", "identifiers": {"user_id": self.user, "session_id": self.session_id}}
        with self.step("remember", "POST /v1/memories/remember") as s:
            answer = s.expect(self.http.post("/v1/memories/remember", json={
                "content": "The smoke test prefers green checkmarks", "type": "preference", **session_layer}),
                200, 202)
            if answer.status_code == 202:
                self.queued["remember"] = answer.json()["candidate_id"]
                s.note = "202: queued (the model is slow or failing); the cleanup waits for it"
            else:
                self.written["remembered"] = answer.json()["memory"]
        with self.step("recall", "POST /v1/memories/recall") as s:
            self.requires("remembered", "remember")
            recalled = s.expect(self.http.post("/v1/memories/recall", json={
                "query": "what does the smoke test prefer?", "namespace_prefix": self.prefix, "min_score": 0}),
                200).json()
            s.check(any(m["id"] == self.written["remembered"]["id"] for m in recalled["memories"]),
                    "the remembered memory was not recalled")
        with self.step("feedback", "POST /v1/memories/feedback") as s:
            self.requires("remembered", "remember")
            given = s.expect(self.http.post("/v1/memories/feedback", json={
                "id": self.written["remembered"]["id"], "signal": "useful"}), 200).json()
            self.written["remembered"] = given["memory"]
        with self.step("restore archived", "POST /v1/memories/restore") as s:
            self.requires("remembered", "remember")
            restored = s.expect(self.http.post("/v1/memories/restore", json={
                "id": self.written["remembered"]["id"]}), 200).json()
            s.check(restored["restored"] is False, "a memory that was not archived was restored")
        with self.step("extract", "POST /v1/memories/extract") as s:
            answer = s.expect(self.http.post("/v1/memories/extract", json={
                "messages": [{"role": "user", "content": "I am vegetarian."}], **session_layer}), 200, 202)
            if answer.status_code == 202:
                self.queued["extract"] = answer.json()["job_id"]
                s.note = "202: queued (the model is slow or failing); the cleanup waits for it"
        with self.step("profile", "GET /v1/memory/profile") as s:
            s.expect(self.http.get("/v1/memory/profile"), 200)
        external_id = self.session_id
        with self.step("semantic upsert", "POST /v1/memory/semantic") as s:
            s.expect(self.http.post("/v1/memory/semantic", json={
                "content": "memsvc smoke tests leave nothing behind", "external_id": external_id}), 200)
            self.written["semantic"] = external_id
        with self.step("semantic get", "GET /v1/memory/semantic") as s:
            s.expect(self.http.get("/v1/memory/semantic", params={"external_id": external_id}), 200)

    def _sessions(self) -> None:
        sid = quote(self.session_id, safe="")
        with self.step("create session", "POST /v1/memory/sessions") as s:
            s.expect(self.http.post("/v1/memory/sessions", json={"session_id": self.session_id,
                                                                 "title": "memsvc smoke"}), 201)
            self.written["session"] = sid
        with self.step("append message", "POST /v1/memory/sessions/{id}/messages") as s:
            s.expect(self.http.post(f"/v1/memory/sessions/{sid}/messages", json={
                "role": "user", "content": "hello from the smoke test"}), 201)
        with self.step("list messages", "GET /v1/memory/sessions/{id}/messages") as s:
            messages = s.expect(self.http.get(f"/v1/memory/sessions/{sid}/messages"), 200).json()
            s.check(messages["count"] == 1, "the message is not listed")
        with self.step("get session", "GET /v1/memory/sessions/{id}") as s:
            s.expect(self.http.get(f"/v1/memory/sessions/{sid}"), 200)

    def _workflow(self) -> None:
        task_id, plan_id = f"{self.session_id}-task", f"{self.session_id}-plan"
        with self.step("create task context", "POST /v1/memory/task-context") as s:
            s.expect(self.http.post("/v1/memory/task-context", json={
                "task_id": task_id, "event_type": "smoke.checked", "sub_tasks": [f"{task_id}-1"]}), 201)
            self.written["task"] = task_id
        with self.step("get task context", "GET /v1/memory/task-context/{task_id}") as s:
            s.expect(self.http.get(f"/v1/memory/task-context/{task_id}"), 200)
        with self.step("create plan", "POST /v1/memory/plans") as s:
            s.expect(self.http.post("/v1/memory/plans", json={"plan_id": plan_id, "goal_event": "smoke.done"}), 201)
            self.written["plan"] = plan_id
        with self.step("put working memory", "PUT /v1/memory/working/{plan_id}/{key}") as s:
            s.expect(self.http.put(f"/v1/memory/working/{plan_id}/step", json={"value": {"n": 1}}), 200)
        with self.step("get working memory", "GET /v1/memory/working/{plan_id}/{key}") as s:
            working = s.expect(self.http.get(f"/v1/memory/working/{plan_id}/step"), 200).json()
            s.check(working["value"] == {"n": 1}, "another value came back")

    def _graph(self) -> None:
        entities = self.prefix + ["graph"]
        with self.step("put entity", "PUT /v1/graph/entities") as s:
            for name in ("Smoke Test", "memsvc"):
                s.expect(self.http.put("/v1/graph/entities", json={"namespace": entities, "name": name}), 200)
                self.written.setdefault("entities", []).append(name)
        with self.step("put relation", "PUT /v1/graph/relations") as s:
            s.expect(self.http.put("/v1/graph/relations", json={
                "namespace": entities, "source": "Smoke Test", "type": "USES", "target": "memsvc"}), 200)
        with self.step("find entities", "POST /v1/graph/entities/find") as s:
            found = s.expect(self.http.post("/v1/graph/entities/find", json={
                "namespace_prefix": self.prefix, "names": ["Smoke Test"]}), 200).json()
            s.check(len(found["entities"]) == 1, "the entity was not found")
        with self.step("path", "POST /v1/graph/path") as s:
            s.expect(self.http.post("/v1/graph/path", json={
                "namespace_prefix": self.prefix, "from": {"entity": "Smoke Test"}, "to": {"entity": "memsvc"}}), 200)
        with self.step("neighbours", "POST /v1/graph/neighbours") as s:
            edges = s.expect(self.http.post("/v1/graph/neighbours", json={
                "namespace_prefix": self.prefix, "entity": {"entity": "Smoke Test"}}), 200).json()["edges"]
            s.check([(e["relation"], e["direction"], e["entity"]["name"]) for e in edges] == [("USES", "out", "memsvc")],
                    "the relation was not among the entity's neighbours")

    def _admin(self) -> None:
        with self.step("index status", "GET /admin/v1/memories/index/status") as s:
            answer = s.expect(self.http.get("/admin/v1/memories/index/status"), 200, 403)
            if answer.status_code == 403:
                raise _Skipped("the caller is not an admin: admin routes skipped")
            self.admin = True
        if not self.admin:
            return
        with self.step("index trigger", "POST /admin/v1/memories/index/trigger") as s:
            s.expect(self.http.post("/admin/v1/memories/index/trigger"), 200)
        with self.step("settings", "GET /admin/v1/memories/settings") as s:
            s.expect(self.http.get("/admin/v1/memories/settings"), 200)
        bundle = None
        with self.step("policies", "GET /admin/v1/memories/policies") as s:
            bundle = s.expect(self.http.get("/admin/v1/memories/policies"), 200).json()["policies"]
        with self.step("check policies", "PUT /admin/v1/memories/policies") as s:
            if bundle is None:
                raise _Skipped("policies failed")
            checked = s.expect(self.http.put("/admin/v1/memories/policies", params={"dry_run": "true"},
                                             json={"policies": bundle}), 200).json()
            s.check(checked == {"valid": True}, "the bundle in force does not check as valid")
        with self.step("check a tenant's bundle", "PUT /admin/v1/memories/policies") as s:
            # A bundle of the tenant's own is compiled in a policy worker process (the built-in one
            # in the server's): this proves the deployment can start one. A dry run stores nothing.
            if bundle is None:
                raise _Skipped("policies failed")
            own = {**bundle, "memsvc_smoke.rego": "package memsvc_smoke\n\nchecked := true\n"}
            checked = s.expect(self.http.put("/admin/v1/memories/policies", params={"dry_run": "true"},
                                             json={"policies": own}), 200).json()
            s.check(checked == {"valid": True}, "a tenant's bundle does not check as valid in a policy worker")
        export_id = None
        with self.step("export", "POST /admin/v1/exports") as s:
            export_id = s.expect(self.http.post("/admin/v1/exports", json={
                "scope": {"prefix": self.prefix}, "passphrase": uuid.uuid4().hex}), 202).json()["id"]
        with self.step("export status", "GET /admin/v1/exports/{id}") as s:
            if export_id is None:
                raise _Skipped("export failed")
            s.expect(self.http.get(f"/admin/v1/exports/{export_id}"), 200)
        # A user of the run's own, who never wrote anything: the erasure's receipt, and nobody's data.
        nobody = quote(f"{self.session_id}-erased", safe="")
        with self.step("erase user", "DELETE /admin/v1/users/{user_id}") as s:
            s.expect(self.http.delete(f"/admin/v1/users/{nobody}"), 200, 202)
        with self.step("erasure receipt", "GET /admin/v1/users/{user_id}/erasure") as s:
            s.expect(self.http.get(f"/admin/v1/users/{nobody}/erasure"), 200)

    # -- the cleanup -------------------------------------------------------------------------

    def clean_up(self) -> None:
        """Delete what the run wrote, each kind in its own step, whatever failed before."""
        written = self.written
        if "entities" in written:
            with self.step("delete relation", "DELETE /v1/graph/relations") as s:
                s.expect(self.http.delete("/v1/graph/relations", params=_ns(self.prefix + ["graph"], **{
                    "source": "Smoke Test", "type": "USES", "target": "memsvc"})), 204)
            with self.step("delete entities", "DELETE /v1/graph/entities") as s:
                for name in written["entities"]:
                    s.expect(self.http.delete("/v1/graph/entities", params=_ns(self.prefix + ["graph"], name=name)),
                             204)
        if "plan" in written:
            with self.step("delete plan", "DELETE /v1/memory/plans/{plan_id}") as s:
                s.expect(self.http.delete(f"/v1/memory/plans/{written['plan']}"), 204)
        if "task" in written:
            with self.step("delete task context", "DELETE /v1/memory/task-context/{task_id}") as s:
                s.expect(self.http.delete(f"/v1/memory/task-context/{written['task']}"), 204)
        if "semantic" in written:
            with self.step("delete semantic", "DELETE /v1/memory/semantic") as s:
                s.expect(self.http.delete("/v1/memory/semantic", params={"external_id": written["semantic"]}), 204)
        if "remembered" in written and self.admin:
            with self.step("force delete by id", "DELETE /admin/v1/memories/{id}") as s:
                s.expect(self.http.delete(f"/admin/v1/memories/{written['remembered']['id']}"), 204)
        if self.queued:
            with self.step("queued work", "GET /v1/memories/events") as s:
                self._wait_for_queued(s)
        if "store_item" in written:
            with self.step("delete store item", "DELETE /store/items") as s:
                s.expect(self.http.request("DELETE", "/store/items", json={
                    "namespace": written["store_item"], "key": "lg"}), 204)
        if "memory" in written:
            namespace, key = written["memory"]
            with self.step("delete memory", "DELETE /v1/memories") as s:
                s.expect(self.http.delete("/v1/memories", params=_ns(namespace, key=key)), 204)
        with self.step("delete session", "DELETE /v1/memory/sessions/{id}") as s:
            # also the run's session layer: the memories remember and extract wrote there
            s.expect(self.http.delete(f"/v1/memory/sessions/{quote(self.session_id, safe='')}"), 204)
        with self.step("nothing left", "GET /v1/memories/namespaces") as s:
            left = s.expect(self.http.get("/v1/memories/namespaces", params=_ns(self.prefix, repeated="prefix")),
                            200).json()
            s.check(left["namespaces"] == [], f"left behind: {left['namespaces']}")
            entities = s.expect(self.http.post("/v1/graph/entities/find", json={
                "namespace_prefix": self.prefix, "names": ["Smoke Test", "memsvc"]}), 200).json()
            s.check(entities["entities"] == [], "graph entities left behind")
            if "semantic" in written:
                s.expect(self.http.get("/v1/memory/semantic", params={"external_id": written["semantic"]}), 404)

    def _wait_for_queued(self, s: _Step) -> None:
        """Until the timeline shows what the queued work wrote: the remembered candidate's version,
        and a version for every candidate the extraction found (it records its candidates first)."""
        waiting = list(self.queued)
        for attempt in range(self.poll.attempts):
            events = self._events(s)
            written = {e["key"] for e in events if e["kind"] in _WRITTEN}
            candidates = {e["key"] for e in events if e["kind"] == "candidate"}
            waiting = [step for step, done in (
                ("remember", self.queued.get("remember") in written),
                ("extract", bool(candidates) and candidates <= written)) if step in self.queued and not done]
            if not waiting:
                s.note = f"the work {' and '.join(self.queued)} queued has written its memories"
                return
            if attempt + 1 < self.poll.attempts:
                self.poll.sleep(self.poll.seconds)
        raise _StepFailed(f"what {' and '.join(waiting)} queued had not run after {self.poll.attempts} checks, "
                          f"{self.poll.seconds:g} s apart: it may write into {'/'.join(self.prefix)} after this run")

    def _events(self, s: _Step) -> list[dict[str, Any]]:
        events: list[dict[str, Any]] = []
        cursor = None
        while True:
            page = s.expect(self.http.get("/v1/memories/events", params=_ns(self.prefix, limit="200", **(
                {"after_cursor": cursor} if cursor else {}))), 200).json()
            events += page["events"]
            cursor = page.get("after_cursor")
            if not cursor or not page["events"]:
                return events

    # -- recording ---------------------------------------------------------------------------

    def requires(self, written: str, by_step: str) -> None:
        """Skip the step when an earlier one failed to write what it works on, or queued it."""
        if written not in self.written:
            raise _Skipped(f"{by_step} was queued (202)" if by_step in self.queued else f"{by_step} failed")

    @contextmanager
    def step(self, name: str, route: str) -> Iterator[_Step]:
        step = _Step()
        try:
            yield step
        except _Skipped as skipped:
            self.results.append(StepResult(name, route, "skip", step.latency_ms, str(skipped)))
        except _StepFailed as failed:
            self.results.append(StepResult(name, route, "fail", step.latency_ms, str(failed)))
        except httpx.HTTPError as exc:
            self.results.append(StepResult(name, route, "fail", step.latency_ms, f"no answer: {type(exc).__name__}"))
        except (KeyError, TypeError, ValueError) as exc:
            self.results.append(StepResult(name, route, "fail", step.latency_ms,
                                           f"an answer of another shape ({type(exc).__name__}: {exc})"))
        else:
            self.results.append(StepResult(name, route, "pass", step.latency_ms, step.note))


class _StepFailed(Exception):
    pass


class _Skipped(Exception):
    pass


class _Step:
    """One step's calls: the latency of its slowest, and why it failed."""

    def __init__(self) -> None:
        self.latency_ms: float | None = None
        self.note = ""

    def expect(self, response: httpx.Response, *statuses: int) -> httpx.Response:
        self.latency_ms = max(self.latency_ms or 0.0, response.extensions[_LATENCY])
        if response.status_code not in statuses:
            raise _StepFailed(f"HTTP {response.status_code}{_error_of(response)}")
        return response

    @staticmethod
    def check(condition: bool, why: str) -> None:
        if not condition:
            raise _StepFailed(why)


def _start_clock(request: httpx.Request) -> None:
    request.extensions[_STARTED] = time.perf_counter()


def _stop_clock(response: httpx.Response) -> None:
    """The call's latency: from the signed request leaving to the answer's headers."""
    response.extensions[_LATENCY] = (time.perf_counter() - response.request.extensions[_STARTED]) * 1000


def _error_of(response: httpx.Response) -> str:
    try:
        error = response.json()["error"]
        return f" {error['code']}: {error['message']}"
    except (ValueError, KeyError, TypeError):
        return ""


def _ns(namespace: list[str], *, repeated: str = "ns", **params: str) -> list[tuple[str, str]]:
    """A namespace as the query repeats it, one parameter per segment, then `params`."""
    return [(repeated, segment) for segment in namespace] + list(params.items())

