"""Fixtures for the HTTP-level tests: clients on the shared live server, closed after the test."""

from __future__ import annotations

import httpx
import pytest

from tests.api.helpers import client_for, unique_tenant


@pytest.fixture
def make_client(live_server):
    """`make_client(sub, tenant=..., roles=[...])` -> an httpx client with a bearer token.
    `make_client(None)` has no Authorization header."""
    made: list[httpx.Client] = []

    def make(sub: str | None, **kw) -> httpx.Client:
        client = client_for(live_server, sub, **kw)
        made.append(client)
        return client

    yield make
    for client in made:
        client.close()


@pytest.fixture
def tenant() -> str:
    """A tenant nobody else uses."""
    return unique_tenant()


@pytest.fixture
def me(make_client, uid, tenant):
    """The test's own user, in the test's own tenant."""
    return make_client(uid, tenant=tenant)


@pytest.fixture
def admin(make_client, tenant):
    """An admin of the test's tenant."""
    return make_client("root-" + tenant, tenant=tenant, roles=["admin"])


@pytest.fixture
def home(uid) -> list[str]:
    """The namespace every test user owns: ["user", <uid>]."""
    return ["user", uid]
