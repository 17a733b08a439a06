"""`memsvc smoke` against both live servers (`memsvc serve` and the moto-backed AWS server): every
step passes, nothing of the run is left, a failing step is named and fails the run, and SigV4
requests carry a signature an independent implementation agrees with."""

from __future__ import annotations

import json
import re
import time

import httpx
import pytest
from botocore.credentials import Credentials

from memsvc.api.routes import ROUTES
from memsvc.cli import main
from memsvc.smoke import Bearer, SigV4, run_smoke
from tests.api.helpers import client_for, unique_tenant
from tests.langgraph.test_sigv4 import reference_signature

ADMIN_ONLY = {"index trigger", "settings", "policies", "check policies", "check a tenant's bundle",
              "export", "export status", "erase user", "erasure receipt",
              "force delete by id"}


def _left_behind(server, tenant: str, user: str, run_id: str) -> dict:
    """What a caller of the tenant still finds of the run: namespaces, the semantic memory, entities."""
    prefix = ["user", user, "sessions", f"memsvc-smoke-{run_id}"]
    with client_for(server, user, tenant=tenant) as me:
        namespaces = me.get("/v1/memories/namespaces", params=[("prefix", s) for s in ["user", user]]).json()
        semantic = me.get("/v1/memory/semantic", params={"external_id": f"memsvc-smoke-{run_id}"})
        entities = me.post("/v1/graph/entities/find", json={"namespace_prefix": prefix,
                                                             "names": ["Smoke Test", "memsvc"]}).json()
    return {"namespaces": [ns for ns in namespaces["namespaces"] if "sessions" in ns],
            "semantic": semantic.status_code, "entities": entities["entities"]}


def test_every_step_passes_for_an_admin_and_the_run_leaves_nothing(live_server, capsys):
    tenant = unique_tenant("smoke")
    token = live_server.token("ops", tenant=tenant, roles=["admin"])

    assert main(["smoke", "--url", live_server.url, "--token", token]) == 0
    table = capsys.readouterr().out
    rows = [line.split() for line in table.splitlines()[1:-1]]
    assert rows and all("pass" in row for row in rows), table
    assert table.splitlines()[-1].endswith("0 failed, 0 skipped")
    for route in ("PUT /v1/memories", "POST /v1/memories/recall", "POST /v1/memory/sessions",
                  "POST /v1/memory/plans", "PUT /v1/graph/entities", "GET /v1/memories/history",
                  "POST /admin/v1/memories/index/trigger", "POST /admin/v1/exports", "DELETE /admin/v1/users/{user_id}",
                  "DELETE /v1/memory/sessions/{id}", "PUT /store/items", "POST /store/namespaces"):
        assert route in table
    # Every family of the route table (its paths' first two segments) has a step.
    families = {"/".join(r.path.split("/")[:3]) for r in ROUTES}
    assert {f for f in families if f not in table} == set()

    results = run_smoke(live_server.url, Bearer(token), user="ops", run_id="fixed1")
    assert [r.step for r in results if r.status != "pass"] == []
    assert _left_behind(live_server, tenant, "ops", "fixed1") == {"namespaces": [], "semantic": 404, "entities": []}


def test_a_caller_who_is_not_an_admin_passes_with_the_admin_routes_skipped(live_server):
    tenant = unique_tenant("smoke")
    results = run_smoke(live_server.url, Bearer(live_server.token("dana", tenant=tenant)), user="dana",
                        run_id="user1")
    assert [(r.step, r.status) for r in results if r.status != "pass"] == [("index status", "skip")]
    assert not ADMIN_ONLY & {r.step for r in results}
    assert _left_behind(live_server, tenant, "dana", "user1") == {"namespaces": [], "semantic": 404, "entities": []}


def test_a_wrong_token_fails_the_run_and_the_table_says_which_steps(live_server, capsys):
    wrong = live_server.token("ops", ttl=-3600)  # expired

    assert main(["smoke", "--url", live_server.url, "--token", wrong]) == 1
    table = capsys.readouterr().out
    assert re.search(r"^put memory +PUT /v1/memories +fail .* HTTP 401 UNAUTHORIZED", table, re.M), table
    assert re.search(r"^health +GET /health +pass", table, re.M), table


class _FailingRoute(httpx.BaseTransport):
    """The live server, except that one route answers 500."""

    def __init__(self, method: str, path: str) -> None:
        self.method, self.path = method, path
        self.server = httpx.HTTPTransport()

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        if request.method == self.method and request.url.path == self.path:
            return httpx.Response(500, json={"error": {"code": "INTERNAL", "message": "injected", "retryable": True,
                                                       "details": {}}})
        return self.server.handle_request(request)


def test_a_failing_step_still_cleans_up_what_the_run_wrote(live_server):
    tenant = unique_tenant("smoke")
    results = run_smoke(live_server.url, Bearer(live_server.token("erin", tenant=tenant)), user="erin",
                        run_id="fails1", transport=_FailingRoute("POST", "/v1/memory/plans"))

    failed = [(r.step, r.note) for r in results if r.status == "fail"]
    assert failed[0] == ("create plan", "HTTP 500 INTERNAL: injected")
    assert {r.step for r in results if r.status == "pass"} >= {"delete memory", "delete session", "nothing left"}
    assert _left_behind(live_server, tenant, "erin", "fails1") == {"namespaces": [], "semantic": 404, "entities": []}


class _QueuedByTheServer(httpx.BaseTransport):
    """The live server, with remember and extract sent `wait: false`: the server answers 202 and
    queues the work, as it does when the model provider is slow or failing."""

    def __init__(self) -> None:
        self.server = httpx.HTTPTransport()
        self.answered: dict[str, int] = {}

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        if request.method == "POST" and request.url.path in ("/v1/memories/remember", "/v1/memories/extract"):
            request = httpx.Request("POST", request.url, headers={
                k: v for k, v in request.headers.items() if k.lower() != "content-length"},
                json={**json.loads(request.content), "wait": False})
        response = self.server.handle_request(request)
        self.answered.setdefault(request.url.path, response.status_code)
        return response


def test_remember_and_extract_queued_pass_and_the_cleanup_waits_for_their_work(live_server):
    tenant = unique_tenant("smoke")
    sleeps: list[float] = []
    transport = _QueuedByTheServer()
    results = run_smoke(live_server.url, Bearer(live_server.token("quinn", tenant=tenant)), user="quinn",
                        run_id="queued1", transport=transport, poll_seconds=0.05, poll_attempts=600,
                        sleep=lambda seconds: (sleeps.append(seconds), time.sleep(seconds)))

    assert transport.answered["/v1/memories/remember"] == transport.answered["/v1/memories/extract"] == 202
    by_step = {r.step: r for r in results}
    assert by_step["remember"].status == by_step["extract"].status == "pass"
    assert by_step["remember"].note.startswith("202: queued")
    assert by_step["recall"].status == "skip" and by_step["recall"].note == "remember was queued (202)"
    assert by_step["queued work"].status == "pass", by_step["queued work"].note
    assert set(sleeps) <= {0.05}
    steps = [r.step for r in results]
    assert steps.index("queued work") < steps.index("delete session") < steps.index("nothing left")
    assert [r.step for r in results if r.status == "fail"] == []
    assert _left_behind(live_server, tenant, "quinn", "queued1") == {"namespaces": [], "semantic": 404,
                                                                    "entities": []}


def test_queued_work_that_never_runs_fails_the_cleanup_after_its_checks():
    """The poll is bounded: a job that never writes is reported, not waited for forever."""
    def answer(request: httpx.Request) -> httpx.Response:
        if request.url.path == "/v1/memories/remember":
            return httpx.Response(202, json={"candidate_id": "c1"})
        if request.url.path == "/v1/memories/events":
            return httpx.Response(200, json={"events": [], "after_cursor": None})
        return httpx.Response(503, json={"error": {"code": "UNAVAILABLE", "message": "a fake", "retryable": True,
                                                   "details": {}}})

    sleeps: list[float] = []
    results = run_smoke("http://memsvc.test", Bearer("t"), user="u", run_id="never1",
                        transport=httpx.MockTransport(answer), poll_seconds=7, poll_attempts=4, sleep=sleeps.append)

    queued = next(r for r in results if r.step == "queued work")
    assert queued.status == "fail" and sleeps == [7, 7, 7]
    assert queued.note == ("what remember queued had not run after 4 checks, 7 s apart: it may write into "
                           "user/u/sessions/memsvc-smoke-never1 after this run")
    assert next(r for r in results if r.step == "remember").status == "pass"


def test_sigv4_signs_every_call_with_the_tenant_header_covered():
    credentials = Credentials("AKIDEXAMPLE", "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY", "session-token")
    seen: list[httpx.Request] = []

    def answer(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return httpx.Response(503, json={"error": {"code": "UNAVAILABLE", "message": "a fake", "retryable": True,
                                                   "details": {}}})

    url = "https://abc123.execute-api.eu-west-1.amazonaws.com"
    results = run_smoke(url, SigV4(credentials, "eu-west-1"), user="memsvc-smoke", tenant="acme",
                        transport=httpx.MockTransport(answer))

    assert {r.status for r in results if r.step != "health"} == {"fail", "skip"}  # a failed remember skips recall
    signed = [r for r in seen if r.url.path not in ("/health", "/metrics")]  # the two public routes go unsigned
    assert len(signed) > 20
    for request in signed:
        authorization = request.headers["authorization"]
        credential, headers, signature = re.fullmatch(
            r"AWS4-HMAC-SHA256 Credential=(\S+), SignedHeaders=(\S+), Signature=([0-9a-f]{64})", authorization).groups()
        amz_date = request.headers["x-amz-date"]
        assert credential == f"AKIDEXAMPLE/{amz_date[:8]}/eu-west-1/execute-api/aws4_request"
        assert "x-tenant-id" in headers.split(";") and request.headers["x-amz-security-token"] == "session-token"
        expected = reference_signature(
            request.method, str(request.url), {name: request.headers[name] for name in headers.split(";")},
            request.content, secret_key=credentials.secret_key, region="eu-west-1", service="execute-api",
            amz_date=amz_date)
        assert (headers, signature) == expected, request.url


@pytest.mark.parametrize(("args", "message"), [
    (["--token", "not-a-jwt"], "the token is not a JWT with a sub claim: name the user with --user"),
    (["--sigv4"], "no region for SigV4: pass --region (the URL is not an execute-api host)"),
])
def test_a_run_that_cannot_start_says_why_in_one_line(args, message, capsys, monkeypatch):
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIDEXAMPLE")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "secret")
    for name in ("AWS_PROFILE", "AWS_DEFAULT_REGION", "AWS_REGION"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_CONFIG_FILE", "/nonexistent")
    assert main(["smoke", "--url", "http://127.0.0.1:9", *args]) == 2
    assert capsys.readouterr().err == f"memsvc: {message}\n"
