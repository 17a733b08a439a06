"""`memsvc serve`'s own pages (docs/console.md): the console's files and config, its loopback
sign-in helper, and the API reference at /docs, through the ASGI app the server runs. Requests
are built as raw ASGI scopes, so a path reaches the server exactly as a client wrote it (an HTTP
client library would normalise `..` away), and the client address is whatever a test says."""

from __future__ import annotations

import asyncio
import json
import logging
import re
import time
import tomllib
from pathlib import Path
from typing import Any

import httpx
import pytest

from memsvc.console_assets import CONSOLE_CSP, StaticSite, console_site, docs_site
from memsvc.core.timestamps import parse_rfc3339
from memsvc.local_server import MAX_BODY_BYTES, LocalServer
from tests.conftest import local_data_dir, start_server, stop_server
from tests.fakes.embedder import HashEmbedder

ROOT = Path(__file__).resolve().parents[2]
LOOPBACK = ("127.0.0.1", 50123)
HOST = "127.0.0.1:8000"
INDEX = b"<!DOCTYPE html><title>console</title>"
SECRET = b"outside the console directory"
JSON = {"content-type": "application/json"}


@pytest.fixture(scope="module")
def static_dir(tmp_path_factory) -> Path:
    """A stand-in for the built console, beside a file and a directory it must never reach."""
    base = tmp_path_factory.mktemp("console")
    (base / "secret.txt").write_bytes(SECRET)
    (base / "private").mkdir()
    (base / "private" / "secret.txt").write_bytes(SECRET)
    static = base / "static"
    (static / "js" / "views").mkdir(parents=True)
    (static / "index.html").write_bytes(INDEX)
    (static / "console.css").write_bytes(b"body { margin: 0; }")
    (static / "js" / "main.js").write_bytes(b"import './views/memories.js';")
    (static / "js" / "views" / "memories.js").write_bytes(b"export {};")
    (static / "notes.py").write_bytes(b"print('not an asset type')")
    (static / ".hidden.txt").write_bytes(SECRET)
    (static / "leak.txt").symlink_to(base / "secret.txt")
    (static / "disguised.js").symlink_to(static / "notes.py")
    (static / "escape").symlink_to(base / "private", target_is_directory=True)
    return static


@pytest.fixture(scope="module")
def app(tmp_path_factory):
    from memsvc.bootstrap import build_local

    app = build_local(local_data_dir(tmp_path_factory.mktemp("console-app")), embedder=HashEmbedder(),
                      start_workers=False)
    yield app
    app.close()


@pytest.fixture(scope="module")
def server(app, static_dir):
    server = LocalServer(app.router, app.issuer, threads=2, console=console_site(static_dir), docs=docs_site())
    yield server
    server._pool.shutdown()


@pytest.fixture
def minted(app, monkeypatch) -> list[str]:
    """The subjects the issuer mints tokens for during the test."""
    subjects: list[str] = []
    mint = app.issuer.mint

    def counting_mint(**kw):
        subjects.append(kw["sub"])
        return mint(**kw)

    monkeypatch.setattr(app.issuer, "mint", counting_mint)
    return subjects


class Reply:
    def __init__(self, status: int, headers: dict[str, str], body: bytes) -> None:
        self.status, self.headers, self.body = status, headers, body

    def json(self) -> Any:
        return json.loads(self.body)


def call(server: LocalServer, method: str, raw_path: bytes | str, *, body: bytes = b"",
         headers: dict[str, str] | None = None, client: tuple[str, int] | None = LOOPBACK,
         host: str | None = HOST) -> Reply:
    raw, _, query = (raw_path.encode("latin-1") if isinstance(raw_path, str) else raw_path).partition(b"?")
    sent_headers = {**({"host": host} if host is not None else {}), **(headers or {})}
    scope = {"type": "http", "method": method, "path": raw.decode("latin-1"), "raw_path": raw, "query_string": query,
             "headers": [(k.encode("latin-1"), v.encode("latin-1")) for k, v in sent_headers.items()],
             "client": client}
    messages: list[dict[str, Any]] = []

    async def receive() -> dict[str, Any]:
        return {"type": "http.request", "body": body, "more_body": False}

    async def send(message: dict[str, Any]) -> None:
        messages.append(message)

    asyncio.run(server(scope, receive, send))
    start, *chunks = messages
    return Reply(start["status"], {k.decode(): v.decode() for k, v in start["headers"]},
                 b"".join(chunk.get("body", b"") for chunk in chunks))


def assert_site_headers(reply: Reply) -> None:
    assert reply.headers["content-security-policy"] == CONSOLE_CSP
    assert reply.headers["x-content-type-options"] == "nosniff"
    assert reply.headers["referrer-policy"] == "no-referrer"


def assert_envelope(reply: Reply, status: int, code: str) -> dict[str, Any]:
    assert reply.status == status, reply.body
    assert reply.headers["content-type"] == "application/json"
    error = reply.json()["error"]
    assert (error["code"], error["retryable"], set(error)) == (code, False, {"code", "message", "retryable",
                                                                            "details"})
    return error


def sign_in(server: LocalServer, claims: dict[str, Any], **kw) -> Reply:
    return call(server, "POST", "/console/sign-in", body=json.dumps(claims).encode(),
                headers={**JSON, **kw.pop("headers", {})}, **kw)


# --- files -------------------------------------------------------------------------------------


def test_the_policy_is_the_contract_s_strict_one():
    assert CONSOLE_CSP == ("default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
                           "connect-src 'self'; font-src 'self'; base-uri 'none'; form-action 'none'; "
                           "frame-ancestors 'none'")


@pytest.mark.parametrize("path, content_type, cache, body", [
    ("/console/", "text/html; charset=utf-8", "no-cache", INDEX),
    ("/console/index.html", "text/html; charset=utf-8", "no-cache", INDEX),
    ("/console/console.css", "text/css; charset=utf-8", "max-age=300", b"body { margin: 0; }"),
    ("/console/js/main.js", "text/javascript; charset=utf-8", "max-age=300", b"import './views/memories.js';"),
    ("/console/js/views/memories.js", "text/javascript; charset=utf-8", "max-age=300", b"export {};"),
])
def test_console_files_are_served_with_their_type_cache_rule_and_security_headers(server, path, content_type,
                                                                                   cache, body):
    reply = call(server, "GET", path)
    assert (reply.status, reply.body) == (200, body)
    assert (reply.headers["content-type"], reply.headers["cache-control"]) == (content_type, cache)
    assert_site_headers(reply)


def test_head_answers_the_headers_of_get_without_the_body(server):
    reply = call(server, "HEAD", "/console/js/main.js")
    assert (reply.status, reply.body) == (200, b"")
    assert reply.headers["content-length"] == str(len(b"import './views/memories.js';"))
    assert_site_headers(reply)


@pytest.mark.parametrize("site", ["/console", "/docs"])
def test_the_bare_prefix_redirects_to_its_directory(server, site):
    reply = call(server, "GET", site)
    assert (reply.status, reply.headers["location"]) == (308, site + "/")
    assert_site_headers(reply)


@pytest.mark.parametrize("raw_path", [
    b"/console/../secret.txt",
    b"/console/js/../../secret.txt",
    b"/console/%2e%2e/secret.txt",
    b"/console/%2E%2E%2Fsecret.txt",
    b"/console/js/..%2f..%2fsecret.txt",
    b"/console/..\\secret.txt",
    b"/console/js%5c..%5c..%5csecret.txt",
    b"/console/index.html%00.css",
    b"/console/index.html\x00.css",
    b"/console//etc/passwd",
    b"/console/%2fetc%2fpasswd",
    b"/console/escape/secret.txt",  # a symlinked directory leading out
    b"/console/leak.txt",  # a symlinked file leading out
    b"/console/.hidden.txt",
    b"/console/notes.py",  # not a type the console serves
    b"/console/disguised.js",  # nor under another name
    b"/console/js",
    b"/console/missing.js",
    b"/console/" + b"a/" * 20 + b"main.js",
    b"/console/" + b"a" * 300 + b".js",
    b"/console/" + b"a" * 100_000 + b".js",
])
def test_paths_that_are_not_plain_names_inside_the_directory_are_refused(server, raw_path):
    reply = call(server, "GET", raw_path)
    error = assert_envelope(reply, 404, "NOT_FOUND")
    assert error["message"] == "no such file"
    assert SECRET not in reply.body
    assert_site_headers(reply)


@pytest.mark.parametrize("method, path", [
    ("POST", "/console/index.html"),
    ("PUT", "/console/js/main.js"),
    ("DELETE", "/console/"),
    ("PATCH", "/console/config.json"),
    ("POST", "/docs/"),
])
def test_other_methods_are_refused_with_405(server, method, path):
    reply = call(server, method, path, body=b"{}", headers=JSON)
    error = assert_envelope(reply, 405, "METHOD_NOT_ALLOWED")
    assert (error["details"], reply.headers["allow"]) == ({"allowed": ["GET", "HEAD"]}, "GET, HEAD")
    assert_site_headers(reply)


def test_a_long_method_name_is_cut_short_before_it_is_echoed(server):
    error = assert_envelope(call(server, "X" * 10_000, "/console/"), 405, "METHOD_NOT_ALLOWED")
    assert error["message"] == f"method {'X' * 16}… not allowed here"


@pytest.mark.parametrize("method", ["POST", "PUT", "DELETE"])
def test_other_methods_on_a_missing_name_are_404_as_for_get(server, method):
    assert_envelope(call(server, method, "/console/no-such-file.js", body=b"{}", headers=JSON), 404, "NOT_FOUND")


def test_a_body_over_the_server_limit_is_refused_with_the_site_headers(server):
    reply = call(server, "POST", "/console/sign-in", body=b" " * (MAX_BODY_BYTES + 1), headers=JSON)
    assert_envelope(reply, 413, "CONTENT_TOO_LONG")
    assert_site_headers(reply)


def test_a_failure_of_ours_under_the_console_still_carries_the_site_headers(server, monkeypatch, caplog):
    def unreadable(self, path):
        raise OSError("disk gone")

    monkeypatch.setattr(StaticSite, "file_response", unreadable)
    with caplog.at_level(logging.ERROR, logger="memsvc.local_server"):
        reply = call(server, "GET", "/console/index.html")
    error = assert_envelope(reply, 500, "INTERNAL")
    assert "disk gone" not in error["message"]
    assert_site_headers(reply)
    assert [r.getMessage() for r in caplog.records if r.name == "memsvc.local_server"] == [
        "the local server failed a request"]


def test_paths_that_only_start_like_the_console_go_to_the_api(server):
    reply = call(server, "GET", "/consoles")
    assert_envelope(reply, 404, "NOT_FOUND")
    assert "content-security-policy" not in reply.headers


# --- config.json -------------------------------------------------------------------------------


@pytest.mark.parametrize("client, host, helper", [
    (LOOPBACK, HOST, True),
    (("::1", 50123), "[::1]:8000", True),
    (("127.0.0.1", 50123), "localhost", True),
    (("192.0.2.7", 50123), HOST, False),
    (LOOPBACK, "memsvc.example:8000", False),
    (None, HOST, False),
])
def test_config_offers_the_sign_in_helper_to_loopback_requests_only(server, client, host, helper):
    reply = call(server, "GET", "/console/config.json", client=client, host=host)
    assert reply.status == 200
    assert reply.json() == {"api_base": "", "auth": {"mode": "local", "sign_in_helper": helper}}
    assert (reply.headers["content-type"], reply.headers["cache-control"]) == ("application/json", "no-cache")
    assert_site_headers(reply)


def test_config_offers_no_sign_in_helper_through_a_proxy(server):
    reply = call(server, "GET", "/console/config.json", headers={"x-forwarded-for": "198.51.100.4"})
    assert reply.json()["auth"]["sign_in_helper"] is False


# --- sign-in -----------------------------------------------------------------------------------


def test_a_signed_in_token_acts_as_its_sub_and_tenant(server, app, minted):
    reply = sign_in(server, {"sub": "carol", "tenant": "acme-console", "roles": ["admin"], "projects": ["p1"]})
    assert reply.status == 200, reply.body
    assert_site_headers(reply)
    assert reply.headers["cache-control"] == "no-store"
    token, expires_at = reply.json()["token"], reply.json()["expires_at"]
    lifetime = parse_rfc3339(expires_at).timestamp() - time.time()
    assert 3000 < lifetime <= 3600
    claims = app.issuer.verify(token)
    assert (claims["sub"], claims["tenant_id"], claims["roles"], claims["projects"]) == (
        "carol", "acme-console", ["admin"], ["p1"])
    assert minted == ["carol"]

    bearer = {"authorization": f"Bearer {token}", **JSON}
    item = {"namespace": ["user", "carol", "notes"], "key": "tip", "value": {"text": "signed in from the console"}}
    put = call(server, "PUT", "/v1/memories", body=json.dumps(item).encode(), headers=bearer)
    assert put.status == 200, put.body
    got = call(server, "GET", "/v1/memories?ns=user&ns=carol&ns=notes&key=tip", headers=bearer)
    assert (got.status, got.json()["value"]) == (200, item["value"]), got.body


def test_the_same_sub_in_another_tenant_sees_nothing_of_the_first(server):
    first = sign_in(server, {"sub": "dave", "tenant": "acme-one"}).json()["token"]
    second = sign_in(server, {"sub": "dave", "tenant": "acme-two"}).json()["token"]
    item = {"namespace": ["user", "dave", "notes"], "key": "k", "value": {"text": "tenant one only"}}
    put = call(server, "PUT", "/v1/memories", body=json.dumps(item).encode(),
               headers={"authorization": f"Bearer {first}", **JSON})
    assert put.status == 200, put.body
    path = "/v1/memories?ns=user&ns=dave&ns=notes&key=k"
    assert call(server, "GET", path, headers={"authorization": f"Bearer {first}"}).status == 200
    assert_envelope(call(server, "GET", path, headers={"authorization": f"Bearer {second}"}), 404, "NOT_FOUND")


@pytest.mark.parametrize("client, host, origin", [
    (("::1", 50123), "[::1]:8000", None),
    (("::ffff:127.0.0.1", 50123), "localhost:8000", "http://localhost:8000"),
    (LOOPBACK, HOST, "http://127.0.0.1:8000"),
])
def test_sign_in_answers_loopback_clients_from_their_own_origin(server, client, host, origin, minted):
    reply = sign_in(server, {"sub": "erin"}, client=client, host=host,
                    headers={"origin": origin} if origin else {})
    assert reply.status == 200, reply.body
    assert minted == ["erin"]


@pytest.mark.parametrize("client, host, headers", [
    (("192.0.2.7", 50123), HOST, JSON),  # another machine
    (("10.0.0.8", 50123), "localhost:8000", JSON),
    (None, HOST, JSON),  # no client address at all
    (LOOPBACK, "memsvc.example:8000", JSON),  # DNS rebinding: a foreign name resolved to 127.0.0.1
    (LOOPBACK, "127.0.0.1.nip.io:8000", JSON),
    (LOOPBACK, None, JSON),
    (LOOPBACK, HOST, {}),  # not declared JSON: what a cross-site form can send
    (LOOPBACK, HOST, {"content-type": "text/plain"}),
    (LOOPBACK, HOST, {"content-type": "application/x-www-form-urlencoded"}),
    (LOOPBACK, HOST, {**JSON, "origin": "http://evil.example"}),
    (LOOPBACK, HOST, {**JSON, "origin": "http://127.0.0.1:9999"}),  # another loopback origin
    (LOOPBACK, HOST, {**JSON, "origin": "null"}),
    # A reverse proxy on this machine, passing `Host: 127.0.0.1` on, for a client elsewhere.
    (LOOPBACK, HOST, {**JSON, "x-forwarded-for": "198.51.100.4"}),
    (LOOPBACK, HOST, {**JSON, "forwarded": "for=198.51.100.4"}),
    (LOOPBACK, HOST, {**JSON, "x-real-ip": "198.51.100.4"}),
    (LOOPBACK, HOST, {**JSON, "via": "1.1 proxy"}),
])
def test_sign_in_is_hidden_from_anything_but_a_same_origin_loopback_json_request(server, client, host, headers,
                                                                                  minted):
    reply = call(server, "POST", "/console/sign-in", body=b'{"sub": "mallory"}', headers=headers, client=client,
                 host=host)
    missing = call(server, "POST", "/console/sign-on", body=b'{"sub": "mallory"}', headers=headers, client=client,
                   host=host)
    assert (reply.status, reply.headers, reply.body) == (404, missing.headers, missing.body)
    assert_site_headers(reply)
    assert minted == []


@pytest.mark.parametrize("body, field", [
    (b"not json", None),
    (b"[]", None),
    (b"[" * 10_000 + b"]" * 10_000, None),
    (b"{}", "sub"),
    (b'{"sub": ""}', "sub"),
    (b'{"sub": 7}', "sub"),
    (b'{"sub": " alice"}', "sub"),
    (b'{"sub": "al\\nice"}', "sub"),
    (json.dumps({"sub": "a" * 257}).encode(), "sub"),
    (b'{"sub": "alice", "tenant": "bad tenant"}', "tenant"),
    (b'{"sub": "alice", "tenant": 5}', "tenant"),
    (b'{"sub": "alice", "roles": "admin"}', "roles"),
    (b'{"sub": "alice", "roles": ["a b"]}', "roles"),
    (b'{"sub": "alice", "roles": [""]}', "roles"),
    (json.dumps({"sub": "alice", "roles": [f"r{i}" for i in range(33)]}).encode(), "roles"),
    (json.dumps({"sub": "alice", "teams": ["t" * 65]}).encode(), "teams"),
    (b'{"sub": "alice", "projects": [1]}', "projects"),
    (b'{"sub": "alice", "orgs": null}', "orgs"),
    (b'{"sub": "alice", "exp": 9999999999}', "exp"),
    (b'{"sub": "x", "sub": "y"}', "body"),  # which sub is meant is not guessed
    (b'{"sub": "alice", "roles": ["a"], "roles": ["admin"]}', "body"),
    (b'{"sub": "\xff"}', None),  # not UTF-8
    (json.dumps({"sub": "alice", "x" * 10_000: 1}).encode(), "x" * 64),
    (json.dumps({"sub": "alice", "pad": "x" * 20_000}).encode(), None),
])
def test_bad_sign_in_bodies_are_refused_and_mint_nothing(server, body, field, minted):
    reply = call(server, "POST", "/console/sign-in", body=body, headers=JSON)
    error = assert_envelope(reply, 400, "INVALID_ARGUMENT")
    assert error["details"].get("field") == field
    assert_site_headers(reply)
    assert minted == []


def test_a_client_that_leaves_mid_body_gets_nothing_done(server, minted):
    """Its body so far is a whole JSON object, but the request never ended: nothing is minted and
    nothing answered (the server used to act on the part it had)."""
    scope = {"type": "http", "method": "POST", "path": "/console/sign-in", "raw_path": b"/console/sign-in",
             "query_string": b"", "client": LOOPBACK,
             "headers": [(k.encode(), v.encode()) for k, v in {"host": HOST, **JSON}.items()]}
    arriving = iter([{"type": "http.request", "body": json.dumps({"sub": "alice"}).encode(), "more_body": True},
                     {"type": "http.disconnect"}])
    sent: list[dict[str, Any]] = []

    async def receive() -> dict[str, Any]:
        return next(arriving)

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    asyncio.run(server(scope, receive, send))
    assert sent == [] and minted == []
    assert sign_in(server, {"sub": "alice"}).status == 200 and minted == ["alice"]  # the same body, whole


def test_a_sign_in_is_logged_without_the_token_or_the_sub(server, caplog):
    with caplog.at_level(logging.INFO, logger="memsvc.local_server"):
        reply = sign_in(server, {"sub": "frank-the-private-name", "roles": ["admin"]})
    token = reply.json()["token"]
    [record] = [r for r in caplog.records if r.name == "memsvc.local_server"]
    message = record.getMessage()
    assert "sha256:" in message and "admin" in message
    assert "frank-the-private-name" not in message and token not in message


@pytest.mark.slow
def test_memsvc_serve_prints_where_the_console_is_and_signs_in_over_a_real_loopback_socket(tmp_path):
    live = start_server(tmp_path / "data")
    try:
        with httpx.Client(base_url=live.url, timeout=30) as http:
            config = http.get("/console/config.json")
            signed = http.post("/console/sign-in", json={"sub": "gina", "tenant": "acme-live"})
            bearer = {"authorization": f"Bearer {signed.json()['token']}"}
            namespaces = http.get("/v1/memories/namespaces?prefix=user&prefix=gina", headers=bearer)
            docs = http.get("/docs/")
    finally:
        stop_server(live)
    port = live.url.rsplit(":", 1)[1]
    printed = (tmp_path / f"serve-local-{port}.log").read_text()
    assert f"memsvc: console: http://127.0.0.1:{port}/console/" in printed
    assert f"memsvc: API reference: http://127.0.0.1:{port}/docs" in printed
    assert config.json()["auth"]["sign_in_helper"] is True
    assert (signed.status_code, namespaces.status_code, docs.status_code) == (200, 200, 200)
    assert signed.json()["token"] not in printed


def test_with_the_helper_turned_off_config_offers_none_and_sign_in_is_a_missing_name(app, static_dir, minted):
    server = LocalServer(app.router, app.issuer, threads=1, console=console_site(static_dir), docs=docs_site(),
                         console_sign_in=False)
    try:
        config = call(server, "GET", "/console/config.json")
        refused = sign_in(server, {"sub": "mallory", "roles": ["admin"]})
        missing = call(server, "POST", "/console/no-such-file", body=b"{}", headers=JSON)
    finally:
        server._pool.shutdown()
    assert config.json()["auth"]["sign_in_helper"] is False
    assert_envelope(refused, 404, "NOT_FOUND") == assert_envelope(missing, 404, "NOT_FOUND")
    assert minted == []


# --- /docs -------------------------------------------------------------------------------------


def test_docs_page_loads_swagger_ui_and_our_initializer_only(server):
    reply = call(server, "GET", "/docs/")
    assert (reply.status, reply.headers["content-type"]) == (200, "text/html; charset=utf-8")
    assert_site_headers(reply)
    html = reply.body.decode()
    assert re.findall(r'<script src="([^"]+)"></script>', html) == ["swagger-ui-bundle.js", "api-reference.js"]
    assert html.count("<script") == 2 and "style=" not in html
    assert "http://" not in html and "https://" not in html


def test_docs_initializer_points_at_our_document_with_the_validator_off(server):
    reply = call(server, "GET", "/docs/api-reference.js")
    assert (reply.status, reply.headers["content-type"]) == (200, "text/javascript; charset=utf-8")
    script = reply.body.decode()
    assert 'url: "/openapi.json"' in script
    assert "validatorUrl: null" in script and "queryConfigEnabled: false" in script
    assert "persistAuthorization" not in script, "a token pasted into Authorize stays out of localStorage"
    assert "http://" not in script and "https://" not in script


@pytest.mark.parametrize("name, content_type", [
    ("swagger-ui-bundle.js", "text/javascript; charset=utf-8"),
    ("swagger-ui.css", "text/css; charset=utf-8"),
    ("index.css", "text/css; charset=utf-8"),
    ("favicon-32x32.png", "image/png"),
])
def test_swagger_ui_files_come_from_the_pinned_package(server, name, content_type):
    from swagger_ui_bundle import swagger_ui_path

    reply = call(server, "GET", f"/docs/{name}")
    assert (reply.status, reply.headers["content-type"]) == (200, content_type)
    assert reply.body == (Path(str(swagger_ui_path)) / name).read_bytes()
    assert_site_headers(reply)


@pytest.mark.parametrize("name", ["swagger-initializer.js", "index.j2", "swagger-ui-bundle.js.map", "../__init__.py"])
def test_other_files_of_the_swagger_package_are_not_served(server, name):
    assert_envelope(call(server, "GET", f"/docs/{name}"), 404, "NOT_FOUND")


def test_the_openapi_document_the_page_loads_is_served_same_origin(server):
    reply = call(server, "GET", "/openapi.json")
    assert reply.status == 200
    assert reply.json()["openapi"].startswith("3.1")


# --- packaging ---------------------------------------------------------------------------------


def test_the_package_data_covers_the_console_build_and_the_docs_page(tmp_path):
    patterns = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["package-data"]["memsvc"]
    package = ROOT / "memsvc"
    docs_files = {p for p in (package / "api_reference").iterdir() if p.is_file()}
    assert {p.name for p in docs_files} >= {"index.html", "api-reference.js"}
    assert docs_files <= {p for pattern in patterns for p in package.glob(pattern)}
    # The console build is another helper's output: the patterns must reach its nested modules.
    built = tmp_path / "console" / "static" / "js" / "views" / "memories.js"
    built.parent.mkdir(parents=True)
    built.write_text("export {};")
    (tmp_path / "console" / "static" / "index.html").write_text("<!DOCTYPE html>")
    matched = {p for pattern in patterns for p in tmp_path.glob(pattern) if p.is_file()}
    assert matched == {built, tmp_path / "console" / "static" / "index.html"}
    if (package / "console" / "static").is_dir():
        shipped = {p for p in (package / "console" / "static").rglob("*") if p.is_file()}
        assert shipped <= {p for pattern in patterns for p in package.glob(pattern)}
