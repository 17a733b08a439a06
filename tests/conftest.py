"""Shared fixtures: an in-process service on a fake embedder, and a live server on each backend
(`memsvc serve` for `local`, `tests.fakes.aws_server` on moto for `aws`)."""

from __future__ import annotations

import functools
import os
import socket
import ssl
import subprocess
import sys
import time
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from pathlib import Path

import httpx
import pytest

from memsvc.core.models import Caller
from tests.fakes.embedder import HashEmbedder


class ManualClock:
    def __init__(self, start: datetime = datetime(2026, 1, 1, tzinfo=timezone.utc)) -> None:
        self.current = start

    def now(self) -> datetime:
        return self.current

    def advance(self, seconds: float) -> None:
        self.current += timedelta(seconds=seconds)


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock()


@functools.cache
def _token_key_pem() -> bytes:
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import rsa

    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                             serialization.NoEncryption())


def local_data_dir(tmp_path: Path) -> Path:
    """A fresh data dir for `build_local` that already holds a token signing key, one per session:
    the in-process tests build an app each and mint no tokens, and generating an RSA-2048 pair was
    half of each build (0.1-1 s). Everything else in the dir (the KEK, the databases) is new."""
    from memsvc.adapters.local.secret_files import write_private

    data_dir = tmp_path / "data"
    write_private(data_dir / "keys" / "jwt-private.pem", _token_key_pem())
    return data_dir


@pytest.fixture
def local_app(tmp_path, clock):
    """The whole local backend in-process (no HTTP, no background threads, fake embedder)."""
    from memsvc.bootstrap import build_local

    app = build_local(local_data_dir(tmp_path), embedder=HashEmbedder(), clock=clock, start_workers=False)
    yield app
    app.close()


def alice() -> Caller:
    return Caller(tenant_id="acme", user_id="alice", roles=("user",))


def bob() -> Caller:
    return Caller(tenant_id="acme", user_id="bob")


def admin(tenant: str = "acme") -> Caller:
    return Caller(tenant_id=tenant, user_id="root", roles=("admin",))


# -- a live server -----------------------------------------------------------------------------


BACKENDS = ("local", "aws")


@dataclass
class LiveServer:
    url: str
    data_dir: Path
    process: subprocess.Popen
    backend: str = "local"  # "local": `memsvc serve`; "aws": tests/fakes/aws_server.py (moto)

    def token(self, sub: str, *, tenant: str | None = None, roles: list[str] | None = None, ttl: int = 3600) -> str:
        return local_issuer(self.data_dir).mint(sub=sub, tenant=tenant, roles=roles, ttl_seconds=ttl)

    def client(self, sub: str | None = None, **kw) -> httpx.Client:
        headers = {"Authorization": f"Bearer {self.token(sub, **kw)}"} if sub else {}
        return httpx.Client(base_url=self.url, headers=headers, timeout=30.0, verify=shared_ssl_context())


@functools.cache
def local_issuer(data_dir: Path):
    """The server's token issuer, loaded once: loading its RSA key costs ~50 ms, and the
    LangGraph tests mint a token or more per test."""
    from memsvc.adapters.local.issuer import LocalIssuer

    return LocalIssuer(Path(data_dir) / "keys")


@functools.cache
def shared_ssl_context() -> ssl.SSLContext:
    """One TLS context for every test client: httpx builds a new one (loading the CA bundle,
    ~40 ms) for each client otherwise, and the API tests make a few clients per test. The live
    servers speak plain HTTP, so it is never used for a handshake there."""
    return ssl.create_default_context()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _server_command(backend: str, data_dir: Path, port: int) -> list[str]:
    if backend in ("local", "local-workers"):  # local-workers: `memsvc serve --workers 2`
        return [sys.executable, "-m", "memsvc.cli", "serve", "--data-dir", str(data_dir), "--port", str(port),
                "--log-level", "warning", *(["--workers", "2"] if backend == "local-workers" else [])]
    if backend in ("aws", "aws-titan"):  # aws-titan: the Titan fake embeds, not MiniLM
        return [sys.executable, "-m", "tests.fakes.aws_server", "--data-dir", str(data_dir), "--port", str(port),
                "--log-level", "warning", *(["--titan"] if backend == "aws-titan" else [])]
    raise ValueError(f"unknown backend {backend!r}")


def start_server(data_dir: Path, backend: str = "local") -> LiveServer:
    """Start the HTTP API on `backend` with its tokens keyed in `data_dir/keys`; wait until healthy."""
    port = _free_port()
    log_path = data_dir.parent / f"serve-{backend}-{port}.log"
    log = open(log_path, "wb")
    proc = subprocess.Popen(
        _server_command(backend, data_dir, port),
        stdout=log, stderr=subprocess.STDOUT, env={**os.environ, "PYTHONUNBUFFERED": "1"},
        cwd=Path(__file__).resolve().parent.parent,  # `tests.fakes` must be importable
    )
    log.close()
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"the {backend} server exited: {log_path.read_text()}")
        try:
            if httpx.get(url + "/health", timeout=2).status_code == 200:
                return LiveServer(url, data_dir, proc, backend)
        except httpx.HTTPError:
            time.sleep(0.2)
    proc.kill()
    raise RuntimeError(f"the {backend} server did not become healthy in 60 s: {log_path.read_text()}")


def stop_server(server: LiveServer) -> None:
    server.process.terminate()
    try:
        server.process.wait(timeout=15)
    except subprocess.TimeoutExpired:
        server.process.kill()


@pytest.fixture(scope="session", params=BACKENDS, ids=BACKENDS)
def live_server(request, tmp_path_factory) -> LiveServer:
    """The HTTP API with the real model, shared by the API, BDD and LangGraph tests, once per
    backend: `local` is `memsvc serve`; `aws` is the same router on DynamoDB + Streams, S3 Vectors
    and KMS (moto), with the real indexer Lambda fed from the stream (tests/fakes/aws_server.py).
    Tests isolate themselves by user and tenant names, never by wiping data."""
    server = start_server(tmp_path_factory.mktemp(f"live-{request.param}") / "data", request.param)
    yield server
    stop_server(server)


@pytest.fixture
def uid() -> str:
    """A user id unique to the test, so tests sharing the live server never see each other."""
    import uuid

    return "u" + uuid.uuid4().hex[:10]
