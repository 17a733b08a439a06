"""Small helpers shared by the HTTP-level tests (tests/api and tests/bdd).

Everything here talks to a running `memsvc serve` over HTTP with httpx; nothing imports the
service's internals except the local token issuer (to mint tokens the server accepts).
"""

from __future__ import annotations

import functools
import time
import uuid
from collections.abc import Iterable, Sequence
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import httpx

ERROR_KEYS = {"code", "message", "retryable", "details"}
PUT_KEYS = {"id", "namespace", "key", "attributes", "created_at", "updated_at", "expires_at", "version"}
GET_KEYS = PUT_KEYS | {"value"}
SEARCH_ITEM_KEYS = {"id", "namespace", "key", "value", "attributes", "score", "created_at", "updated_at", "expires_at"}


def token_for(server, sub: str, *, tenant: str | None = None, roles: list[str] | None = None,
              ttl: int = 3600) -> str:
    """Same token as `server.token(...)`."""
    return server.token(sub, tenant=tenant, roles=roles, ttl=ttl)


def client_for(server, sub: str | None, **kw: Any) -> httpx.Client:
    """Same client as `server.client(...)`: a bearer token for `sub`, or no Authorization header."""
    from tests.conftest import shared_ssl_context

    headers = {"Authorization": f"Bearer {token_for(server, sub, **kw)}"} if sub else {}
    return httpx.Client(base_url=server.url, headers=headers, timeout=30.0, verify=shared_ssl_context())


@functools.cache
def _signing_key(data_dir: Path):
    from cryptography.hazmat.primitives import serialization

    return serialization.load_pem_private_key((Path(data_dir) / "keys" / "jwt-private.pem").read_bytes(),
                                              password=None)


def signed_token(server, **claims: Any) -> str:
    """A token with exactly these claims (plus iss/aud/iat/exp defaults) signed by the server's key."""
    import jwt

    now = int(time.time())
    full = {"iss": "memsvc-local", "aud": "memsvc", "iat": now, "exp": now + 600, **claims}
    return jwt.encode(full, _signing_key(server.data_dir), algorithm="RS256")


def unique_tenant(prefix: str = "t") -> str:
    return f"{prefix}-{uuid.uuid4().hex[:12]}"


def ns_query(namespace: Sequence[str], key: str | None = None) -> list[tuple[str, str]]:
    """Query parameters for GET/DELETE /v1/memories: one `ns` per segment, then `key`."""
    params = [("ns", s) for s in namespace]
    if key is not None:
        params.append(("key", key))
    return params


def put(client: httpx.Client, namespace: Sequence[str], key: str, value: Any, **extra: Any) -> httpx.Response:
    return client.put("/v1/memories", json={"namespace": list(namespace), "key": key, "value": value, **extra})


def put_ok(client: httpx.Client, namespace: Sequence[str], key: str, value: Any, **extra: Any) -> dict[str, Any]:
    r = put(client, namespace, key, value, **extra)
    assert r.status_code == 200, r.text
    return r.json()


def get(client: httpx.Client, namespace: Sequence[str], key: str) -> httpx.Response:
    return client.get("/v1/memories", params=ns_query(namespace, key))


def delete(client: httpx.Client, namespace: Sequence[str], key: str) -> httpx.Response:
    return client.delete("/v1/memories", params=ns_query(namespace, key))


def search(client: httpx.Client, prefix: Sequence[str], **body: Any) -> httpx.Response:
    return client.post("/v1/memories/search", json={"namespace_prefix": list(prefix), **body})


def search_ok(client: httpx.Client, prefix: Sequence[str], **body: Any) -> list[dict[str, Any]]:
    r = search(client, prefix, **body)
    assert r.status_code == 200, r.text
    items = r.json()["items"]
    for item in items:
        assert SEARCH_ITEM_KEYS <= item.keys(), item
    return items


def keys_of(items: Iterable[dict[str, Any]]) -> list[str]:
    return [i["key"] for i in items]


def namespaces(client: httpx.Client, *, prefix: Sequence[str] = (), suffix: Sequence[str] = (),
               **params: Any) -> httpx.Response:
    query: list[tuple[str, Any]] = [("prefix", s) for s in prefix] + [("suffix", s) for s in suffix]
    query += [(k, str(v)) for k, v in params.items()]
    return client.get("/v1/memories/namespaces", params=query)


def namespaces_ok(client: httpx.Client, **kw: Any) -> list[list[str]]:
    r = namespaces(client, **kw)
    assert r.status_code == 200, r.text
    return r.json()["namespaces"]


def assert_error(r: httpx.Response, status: int, code: str | None = None) -> dict[str, Any]:
    """The response is `status` with the error envelope of API.md; returns the inner object."""
    assert r.status_code == status, f"expected {status}, got {r.status_code}: {r.text}"
    body = r.json()
    assert set(body) == {"error"}, body
    err = body["error"]
    assert ERROR_KEYS <= set(err), err
    assert isinstance(err["code"], str) and err["code"]
    assert isinstance(err["message"], str) and err["message"]
    assert isinstance(err["retryable"], bool)
    assert isinstance(err["details"], dict)
    assert "Traceback" not in err["message"] and 'File "' not in err["message"], err["message"]
    if code is not None:
        assert err["code"] == code, err
    return err


def parse_ts(s: str) -> datetime:
    """An RFC 3339 UTC timestamp ("...Z" or "+00:00"), as an aware datetime; fails otherwise."""
    assert isinstance(s, str), s
    assert s.endswith("Z") or s.endswith("+00:00"), f"not UTC: {s}"
    assert "T" in s, f"not RFC 3339: {s}"
    dt = datetime.fromisoformat(s.replace("Z", "+00:00"))
    assert dt.utcoffset() == timezone.utc.utcoffset(None)
    return dt


def sync_index(admin: httpx.Client, timeout: float = 30.0) -> None:
    """Run an indexing cycle as an admin of the tenant, then wait until nothing is pending."""
    r = admin.post("/admin/v1/memories/index/trigger")
    assert r.status_code == 200, r.text
    assert isinstance(r.json()["processed"], int)
    deadline = time.monotonic() + timeout
    while True:
        r = admin.get("/admin/v1/memories/index/status")
        assert r.status_code == 200, r.text
        if r.json()["pending"] == 0:
            return
        assert time.monotonic() < deadline, f"index still pending after {timeout}s: {r.json()}"
        admin.post("/admin/v1/memories/index/trigger")
        time.sleep(0.05)


def events(client: httpx.Client, prefix: list[str], **params: Any) -> httpx.Response:
    query: list[tuple[str, Any]] = [("ns", s) for s in prefix]
    for name, value in params.items():
        for v in value if isinstance(value, list) else [value]:
            query.append((name, v))
    return client.get("/v1/memories/events", params=query)


def walk_events(client: httpx.Client, prefix: list[str], **params: Any) -> list[dict[str, Any]]:
    seen: list[dict[str, Any]] = []
    cursor = None
    for _ in range(100):
        r = events(client, prefix, **params, **({"after_cursor": cursor} if cursor else {}))
        assert r.status_code == 200, r.text
        body = r.json()
        seen.extend(body["events"])
        cursor = body["after_cursor"]
        if cursor is None:
            return seen
    raise AssertionError("the walk did not end")


def wait_for_events(client: httpx.Client, prefix: list[str], count: int, timeout: float = 20.0) -> list[dict[str, Any]]:
    """The events under `prefix` once there are at least `count`: on AWS they arrive through the
    stream's consumers, a moment after the write."""
    deadline = time.monotonic() + timeout
    while True:
        got = walk_events(client, prefix)
        if len(got) >= count:
            return got
        assert time.monotonic() < deadline, f"{len(got)} of {count} events after {timeout}s: {got}"
        time.sleep(0.1)


async def asgi_get(app: Any, path: str, *, query: bytes = b"",
                   headers: Sequence[tuple[bytes, bytes]] = ()) -> list[dict[str, Any]]:
    """The messages an ASGI `app` sends for one GET of `path` without a body, as uvicorn hands it
    the request (the response start, then its body)."""
    sent: list[dict[str, Any]] = []

    async def receive() -> dict[str, Any]:
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    scope = {"type": "http", "method": "GET", "path": path, "raw_path": path.encode(), "query_string": query,
             "client": ("127.0.0.1", 1), "headers": list(headers)}
    await app(scope, receive, send)
    return sent
