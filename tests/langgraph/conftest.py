"""Fixtures for the LangGraph store tests: a `MemsvcStore` on the session's live server, acting
as a user of its own (`("user", <uid>, ...)` is all the default policy lets a user reach)."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from memsvc_client import MemsvcStore


@pytest.fixture
def ns(uid) -> tuple[str, str]:
    """The test's own namespace root."""
    return ("user", uid)


@pytest.fixture
def make_store(live_server, uid):
    """`make_store(**kw)`: a store for this test's user (closed at teardown)."""
    stores: list[MemsvcStore] = []

    def make(**kw) -> MemsvcStore:
        kw.setdefault("url", live_server.url)
        kw.setdefault("token", live_server.token(uid))
        store = MemsvcStore(**kw)
        stores.append(store)
        return store

    yield make
    for store in stores:
        store.close()


@pytest.fixture
def store(make_store) -> MemsvcStore:
    return make_store()


@pytest.fixture
def raw(live_server, uid):
    """The HTTP API itself, as the same user: `raw(namespace, key)` -> the stored memory (JSON)."""
    client = live_server.client(uid)

    def get(namespace: Sequence[str], key: str) -> dict | None:
        response = client.get("/v1/memories", params=[*(("ns", s) for s in namespace), ("key", key)])
        if response.status_code == 404:
            return None
        response.raise_for_status()
        return response.json()

    yield get
    client.close()
