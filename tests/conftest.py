"""Shared fixtures: an in-process service on a fake embedder, and a live `memsvc serve`."""

from __future__ import annotations

import os
import socket
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
    def __init__(self) -> None:
        self.current = datetime(2026, 1, 1, tzinfo=timezone.utc)

    def now(self) -> datetime:
        return self.current

    def advance(self, seconds: float) -> None:
        self.current += timedelta(seconds=seconds)


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock()


@pytest.fixture
def local_app(tmp_path, clock):
    """The whole local backend in-process (no HTTP, no background threads, fake embedder)."""
    from memsvc.bootstrap import build_local

    app = build_local(tmp_path / "data", embedder=HashEmbedder(), clock=clock, start_workers=False)
    yield app
    app.close()


def alice() -> Caller:
    return Caller(tenant_id="acme", user_id="alice", roles=("user",))


def bob() -> Caller:
    return Caller(tenant_id="acme", user_id="bob")


def admin(tenant: str = "acme") -> Caller:
    return Caller(tenant_id=tenant, user_id="root", roles=("admin",))


# -- a live server -----------------------------------------------------------------------------


@dataclass
class LiveServer:
    url: str
    data_dir: Path
    process: subprocess.Popen

    def token(self, sub: str, *, tenant: str | None = None, roles: list[str] | None = None, ttl: int = 3600) -> str:
        from memsvc.adapters.local.issuer import LocalIssuer

        return LocalIssuer(self.data_dir / "keys").mint(sub=sub, tenant=tenant, roles=roles, ttl_seconds=ttl)

    def client(self, sub: str | None = None, **kw) -> httpx.Client:
        headers = {"Authorization": f"Bearer {self.token(sub, **kw)}"} if sub else {}
        return httpx.Client(base_url=self.url, headers=headers, timeout=30.0)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_server(data_dir: Path) -> LiveServer:
    port = _free_port()
    log = open(data_dir.parent / f"serve-{port}.log", "wb")
    proc = subprocess.Popen(
        [sys.executable, "-m", "memsvc.cli", "serve", "--data-dir", str(data_dir), "--port", str(port),
         "--log-level", "warning"],
        stdout=log, stderr=subprocess.STDOUT, env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"memsvc serve exited: {(data_dir.parent / f'serve-{port}.log').read_text()}")
        try:
            if httpx.get(url + "/health", timeout=2).status_code == 200:
                return LiveServer(url, data_dir, proc)
        except httpx.HTTPError:
            time.sleep(0.2)
    proc.kill()
    raise RuntimeError("memsvc serve did not become healthy in 60 s")


def stop_server(server: LiveServer) -> None:
    server.process.terminate()
    try:
        server.process.wait(timeout=15)
    except subprocess.TimeoutExpired:
        server.process.kill()


@pytest.fixture(scope="session")
def live_server(tmp_path_factory) -> LiveServer:
    """One `memsvc serve` subprocess with the real model, shared by the API and BDD tests.
    Tests isolate themselves by user and tenant names, never by wiping data."""
    server = start_server(tmp_path_factory.mktemp("live") / "data")
    yield server
    stop_server(server)


@pytest.fixture
def uid() -> str:
    """A user id unique to the test, so tests sharing the live server never see each other."""
    import uuid

    return "u" + uuid.uuid4().hex[:10]
