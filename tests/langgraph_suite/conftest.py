"""LangGraph's own SQLite store tests (`upstream/`, unpacked from the pinned
langgraph-checkpoint-sqlite sdist by `make test`) run against `MemsvcStore` on the live servers.

The tests import `SqliteStore`, `AsyncSqliteStore` and a few helpers from
`langgraph.store.sqlite`; this harness puts stand-ins under those names before the tests are
imported. `from_conn_string(conn)` gives a store in a tenant of its own (an admin of it, so the
whole tenant is reachable, as a SQLite file is): `:memory:` is always a new tenant, and a file
name is one tenant for the test, like one SQLite file. The tests themselves are unchanged.
"""

from __future__ import annotations

import importlib.util
import sys
import types
import uuid
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path

import pytest

from memsvc_client import AsyncMemsvcStore, MemsvcStore

UPSTREAM = Path(__file__).parent / "upstream"
SDIST = "langgraph-checkpoint-sqlite==3.1.1"  # the Makefile unpacks this version's tests

# Tests that need the client's own embedding function: the service embeds with its own model.
# {test name: why}; a name with "[...]" is that parametrization only.
NEEDS_CLIENT_EMBEDDINGS = {
    "test_vector_store_initialization": "reads `store.embeddings`, `index_config` and SQLite's vector tables",
    "test_embed_with_path": "expects scores from the test's character-count embeddings",
    "test_scores[bbb]": "expects the cosine similarity of the test's character-count embeddings",
    "test_scores[ccc]": "expects the cosine similarity of the test's character-count embeddings",
    "test_scores[abcd]": "expects the cosine similarity of the test's character-count embeddings",
    "test_scores[poisson]": "expects the cosine similarity of the test's character-count embeddings",
}

_target: dict = {}  # the live server and this test's tenants, set per test by `_live_target`


def _store_kwargs(conn_string: str, index, ttl) -> dict:
    server, tenants = _target["server"], _target["tenants"]
    tenant = "lg-" + uuid.uuid4().hex[:12] if conn_string == ":memory:" else tenants.setdefault(
        conn_string, "lg-" + uuid.uuid4().hex[:12]
    )
    token = server.token("suite", tenant=tenant, roles=["admin"])
    return {"url": server.url, "token": token, "index": index, "ttl": ttl}


class SqliteStore(MemsvcStore):
    """`SqliteStore` as the tests build it, on memsvc."""

    @classmethod
    @contextmanager
    def from_conn_string(cls, conn_string: str, *, index=None, ttl=None):
        with cls(**_store_kwargs(conn_string, index, ttl)) as store:
            yield store

    def setup(self) -> None:
        """Nothing to create: the service has its tables."""


class AsyncSqliteStore(AsyncMemsvcStore):
    """`AsyncSqliteStore` as the tests build it, on memsvc."""

    @classmethod
    @asynccontextmanager
    async def from_conn_string(cls, conn_string: str, *, index=None, ttl=None):
        async with cls(**_store_kwargs(conn_string, index, ttl)) as store:
            yield store

    async def setup(self) -> None:
        """Nothing to create: the service has its tables."""


def _install_standins() -> None:
    real = importlib.util.find_spec("langgraph.store.sqlite") is not None
    assert not real, "langgraph-checkpoint-sqlite is installed: the tests would run on SQLite"
    package = types.ModuleType("langgraph.store.sqlite")
    package.SqliteStore, package.AsyncSqliteStore = SqliteStore, AsyncSqliteStore
    aio = types.ModuleType("langgraph.store.sqlite.aio")
    aio.AsyncSqliteStore = AsyncSqliteStore
    base = types.ModuleType("langgraph.store.sqlite.base")
    base.SqliteIndexConfig = dict
    # Only the deselected tests of SQLite's own SQL helpers use these.
    base.NS_MATCH_FUNCTION = base.BaseSqliteStore = base._escape_glob_literal = base._namespace_match_pattern = None
    sys.modules.update({package.__name__: package, aio.__name__: aio, base.__name__: base})
    # test_async_store.py takes its embeddings from `tests.test_store`, its own package's module.
    if (UPSTREAM / "test_store.py").exists():
        spec = importlib.util.spec_from_file_location("tests.test_store", UPSTREAM / "test_store.py")
        sys.modules[spec.name] = module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)


_install_standins()


# Where SQLite's store departs from LangGraph's documented `TTLConfig` and MemsvcStore follows
# the documentation (as `tests/langgraph/test_ttl.py` checks).
FOLLOWS_LANGGRAPH_DOCS = {
    "test_ttl_override_default": (
        "SQLite's store refreshes a TTL on read only when the TTLConfig sets refresh_on_read=True; "
        "TTLConfig documents True as the default, and Postgres's store and MemsvcStore refresh"
    ),
}

# Tests of SQLite's own SQL and migrations: there is no SQLite behind `MemsvcStore` to test.
SQLITE_INTERNALS = {
    "test_nonnull_migrations",
    "test_escape_glob_literal",
    "test_namespace_match_pattern",
    "test_list_namespaces_prefix_uses_indexable_condition",
}


# Run on `local` only, to keep `make test` within its time: the TTL tests sleep about 40 s,
# and `test_large_batches_async` makes 6,000 calls, minutes on moto. tests/langgraph/test_ttl.py
# and test_store_async.py check the same on both backends.
LOCAL_ONLY = {"test_ttl.py", "test_large_batches_async"}


def pytest_collection_modifyitems(config, items):
    ours = [item for item in items if item.path.parent == UPSTREAM]
    # The tests' "memory" and "file" variants build the same MemsvcStore (a tenant of its own):
    # one of them is enough.
    dropped = [
        item for item in ours
        if item.originalname in SQLITE_INTERNALS
        or "file" in item.callspec.params.values()
        or (item.callspec.params["live_server"] == "aws" and {item.path.name, item.originalname} & LOCAL_ONLY)
    ]
    if dropped:
        config.hook.pytest_deselected(items=dropped)
        items[:] = [item for item in items if item not in dropped]
    for item in ours:
        param = item.callspec.params.get("query") if hasattr(item, "callspec") else None
        reason = NEEDS_CLIENT_EMBEDDINGS.get(item.originalname) or NEEDS_CLIENT_EMBEDDINGS.get(
            f"{item.originalname}[{param}]"
        )
        if reason:
            item.add_marker(pytest.mark.xfail(strict=True, reason=f"needs the client's own embeddings: {reason}"))
        if item.originalname in FOLLOWS_LANGGRAPH_DOCS:
            item.add_marker(pytest.mark.xfail(strict=True, reason=FOLLOWS_LANGGRAPH_DOCS[item.originalname]))


def pytest_configure(config):
    config.addinivalue_line("markers", "flaky(retries): LangGraph's mark for a retried test (not retried here)")


@pytest.fixture(autouse=True)
def _live_target(live_server):
    _target.update(server=live_server, tenants={})
    yield
    _target.clear()
