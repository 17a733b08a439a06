"""Step definitions for seed 000's Cucumber scenarios, run over HTTP against the shared
`memsvc serve` (the `live_server` fixture).

Isolation: every scenario gets its own tenant, so its users can literally be "alice" and "bob".

Two readings of the seed worth knowing:
- Under the default policy a user may write only below ["user", <self>]. The seed has alice
  write into ["user","bob",...] and ["user","aliced",...] to set traps for prefix matching; here
  such a write must be refused (403) and the trap item is then written by the tenant's admin,
  so that "does not return" is tested against an item that really exists.
- "alice deletes ..." first makes sure the memory is in the vector index (sync + semantic hit),
  so "the vector index has no entry for the deleted memory" proves a removal, not an absence.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from typing import Any

import httpx
import pytest
from pytest_bdd import given, parsers, scenarios, then, when

from tests.api.helpers import (
    assert_error,
    client_for,
    delete,
    get,
    keys_of,
    namespaces_ok,
    put,
    search_ok,
    sync_index,
    unique_tenant,
)
from tests.conftest import shared_ssl_context

pytestmark = pytest.mark.slow

scenarios("episodic_memory.feature")

# Attribute extraction that keeps the defaults (namespace, sub: the filter injection relies on
# them) and also extracts `lang` from the write's attributes when it is a string.
LANG_ATTRIBUTES_REGO = """package memories.attributes

default attributes := {}

base := {"namespace": input.namespace[0], "sub": input.namespace[1]} if {
	count(input.namespace) >= 2
} else := {"namespace": input.namespace[0]}

attributes := object.union(base, {"lang": input.attributes.lang}) if {
	is_string(input.attributes.lang)
} else := base
"""


@dataclass
class World:
    server: Any
    tenant: str
    users: dict[str, httpx.Client] = field(default_factory=dict)
    admin: httpx.Client | None = None
    written: dict[str, dict[str, Any]] = field(default_factory=dict)  # key -> PUT response + value
    lang_policy: bool = False
    deleted: dict[str, Any] | None = None
    timeline: list[dict[str, Any]] = field(default_factory=list)

    def user(self, name: str) -> httpx.Client:
        assert name in self.users, f'user "{name}" is not authenticated in this scenario'
        return self.users[name]

    @property
    def default_user(self) -> httpx.Client:
        return self.user("alice")


@pytest.fixture(autouse=True)
def _on_each_backend(live_server):
    """pytest-bdd requests `world` only when a step runs, too late for `live_server`'s
    parametrization: asking for it here runs every scenario once per backend."""


@pytest.fixture
def world(live_server):
    tenant = unique_tenant("bdd")
    w = World(live_server, tenant)
    w.admin = client_for(live_server, "svc-admin", tenant=tenant, roles=["admin"])
    yield w
    for client in [*w.users.values(), w.admin]:
        client.close()


def _json(text: str) -> Any:
    return json.loads(text)


def _own(namespace: list[str], user: str) -> bool:
    return len(namespace) >= 2 and namespace[0] == "user" and namespace[1] == user


# -- Given ---------------------------------------------------------------------------------------


@given("a memory service is running")
def service_running(world):
    r = httpx.get(world.server.url + "/health", timeout=30, verify=shared_ssl_context())
    assert r.status_code == 200, r.text
    assert r.json()["status"] == "healthy"


@given(parsers.parse('user "{name}" is authenticated'))
def user_authenticated(world, name):
    client = client_for(world.server, name, tenant=world.tenant)
    # the token is accepted: the user can search their own (empty) subtree
    assert search_ok(client, ["user", name]) == []
    world.users[name] = client


# -- When ----------------------------------------------------------------------------------------


@when(parsers.re(
    r'(?P<actor>\w+) puts namespace (?P<ns>\[.*?\]),\s*key "(?P<key>[^"]+)", value (?P<value>\{.*?\})'
    r'(?: with ttl_seconds (?P<ttl>\d+))?(?: with extracted attributes (?P<attrs>\{.*\}))?'
))
def actor_puts(world, actor, ns, key, value, ttl, attrs):
    namespace, value = _json(ns), _json(value)
    extra: dict[str, Any] = {}
    if ttl is not None:
        extra["ttl_seconds"] = int(ttl)
    if attrs is not None:
        _install_lang_policy(world)
        extra["attributes"] = _json(attrs)
    r = put(world.user(actor), namespace, key, value, **extra)
    if not _own(namespace, actor):
        # the default policy keeps users inside ["user", <self>, ...]
        assert_error(r, 403, "FORBIDDEN")
        assert_error(get(world.admin, namespace, key), 404, "NOT_FOUND")  # the refused write left nothing
        r = put(world.admin, namespace, key, value, **extra)  # plant the item the scenario expects
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["namespace"] == namespace and body["key"] == key and body["version"] >= 1
    if attrs is not None:
        assert body["attributes"] == _json(attrs)
    world.written[key] = {**body, "value": value}


def _install_lang_policy(world: World) -> None:
    if world.lang_policy:
        return
    r = world.admin.get("/admin/v1/memories/policies")
    assert r.status_code == 200, r.text
    policies = dict(r.json()["policies"])
    policies["attributes.rego"] = LANG_ATTRIBUTES_REGO
    r = world.admin.put("/admin/v1/memories/policies", json={"policies": policies})
    assert r.status_code == 200, r.text
    assert r.json()["version"] != "builtin"
    world.lang_policy = True


@when(parsers.re(r'(?P<actor>\w+) deletes namespace (?P<ns>\[.*?\]),\s*key "(?P<key>[^"]+)"'))
def actor_deletes(world, actor, ns, key):
    namespace = _json(ns)
    client = world.user(actor)
    written = world.written[key]
    # precondition: the memory is in the vector index, so its removal is what gets tested
    sync_index(world.admin)
    query = " ".join(v for v in written["value"].values() if isinstance(v, str))
    hits = search_ok(client, namespace[:2], query=query, limit=100)
    assert written["id"] in [h["id"] for h in hits], "the memory was not indexed before the delete"
    r = delete(client, namespace, key)
    assert r.status_code == 204, r.text
    world.deleted = {"namespace": namespace, "key": key, "id": written["id"], "query": query}


@when(parsers.parse("{seconds:d} seconds pass"))
def seconds_pass(seconds):
    time.sleep(seconds)


@when("the vector index has been synchronized")
def index_synchronized(world):
    sync_index(world.admin)


# -- Then ----------------------------------------------------------------------------------------


@then(parsers.re(r'getting namespace (?P<ns>\[.*?\]),\s*key "(?P<key>[^"]+)" returns value (?P<value>\{.*\})'))
def get_returns_value(world, ns, key, value):
    r = get(world.default_user, _json(ns), key)
    assert r.status_code == 200, r.text
    item = r.json()
    assert item["value"] == _json(value)
    assert item["namespace"] == _json(ns) and item["key"] == key
    assert item["id"] == world.written[key]["id"]


@then(parsers.re(
    r'(?:(?P<actor>\w+) )?getting namespace (?P<ns>\[.*?\]),\s*key "(?P<key>[^"]+)" returns (?P<status>\d{3})'
))
def get_returns_status(world, actor, ns, key, status):
    client = world.user(actor) if actor else world.default_user
    code = {403: "FORBIDDEN", 404: "NOT_FOUND", 401: "UNAUTHORIZED", 400: "INVALID_ARGUMENT"}[int(status)]
    assert_error(get(client, _json(ns), key), int(status), code)


@then(parsers.re(
    r'searching prefix (?P<prefix>\[.*?\]) returns keys (?P<keys>\[.*?\]) but not "(?P<excluded>[^"]+)"'
))
def search_returns_keys_but_not(world, prefix, keys, excluded):
    items = search_ok(world.default_user, _json(prefix), limit=100)
    found = keys_of(items)
    assert sorted(found) == sorted(_json(keys))
    assert excluded not in found
    for item in items:
        assert item["namespace"][: len(_json(prefix))] == _json(prefix)
    # the excluded item does exist (planted by the admin), it is just not under the prefix
    assert excluded in keys_of(search_ok(world.admin, [], limit=100))


@then(parsers.re(
    r'searching prefix (?P<prefix>\[.*?\]) filter (?P<flt>\{.*?\}) returns only "(?P<key>[^"]+)"'
))
def search_filter_returns_only(world, prefix, flt, key):
    items = search_ok(world.default_user, _json(prefix), filter=_json(flt), limit=100)
    assert keys_of(items) == [key]
    assert items[0]["id"] == world.written[key]["id"]
    # the same search without the filter sees the others too, so the filter did the narrowing
    assert len(search_ok(world.default_user, _json(prefix), limit=100)) > 1


@then(parsers.re(r'searching prefix (?P<prefix>\[.*?\]) does not return key "(?P<key>[^"]+)"'))
def search_does_not_return(world, prefix, key):
    prefix = _json(prefix)
    assert key not in keys_of(search_ok(world.default_user, prefix, limit=100))
    # an admin's search is not narrowed by policy, so this checks the prefix boundary itself
    assert key not in keys_of(search_ok(world.admin, prefix, limit=100))
    planted = world.written[key]["namespace"]
    assert key in keys_of(search_ok(world.admin, planted[:2], limit=100)), "the trap item must exist"


@then(parsers.re(
    r'searching prefix (?P<prefix>\[.*?\]) with query "(?P<query>[^"]+)" returns "(?P<key>[^"]+)" in top results'
))
def semantic_search_top(world, prefix, query, key):
    items = search_ok(world.default_user, _json(prefix), query=query, limit=3)
    assert key in keys_of(items)
    hit = next(i for i in items if i["key"] == key)
    assert isinstance(hit["score"], float) and hit["score"] > 0
    assert hit["id"] == world.written[key]["id"]


@then("the vector index has no entry for the deleted memory")
def no_vector_entry(world):
    deleted = world.deleted
    assert deleted is not None
    sync_index(world.admin)
    for client in (world.default_user, world.admin):
        hits = search_ok(client, deleted["namespace"][:2], query=deleted["query"], limit=100)
        assert deleted["key"] not in keys_of(hits)
        assert deleted["id"] not in [h["id"] for h in hits]
        everything = search_ok(client, [], query=deleted["query"], limit=100)
        assert deleted["id"] not in [h["id"] for h in everything]
    status = world.admin.get("/admin/v1/memories/index/status").json()
    assert status["pending"] == 0


@then(parsers.re(r'listing namespaces with prefix (?P<prefix>\[.*?\]) returns (?P<expected>\[\[.*\]\])'))
def listing_namespaces(world, prefix, expected):
    assert namespaces_ok(world.default_user, prefix=_json(prefix)) == _json(expected)


def _timeline(client: httpx.Client, prefix: list[str]) -> list[dict[str, Any]]:
    seen, cursor = [], None
    while True:
        params = [("ns", s) for s in prefix] + [("limit", "2")] + ([("after_cursor", cursor)] if cursor else [])
        r = client.get("/v1/memories/events", params=params)
        assert r.status_code == 200, r.text
        seen.extend(r.json()["events"])
        cursor = r.json()["after_cursor"]
        if cursor is None:
            return seen


@then(parsers.re(r'the event timeline for prefix (?P<prefix>\[.*?\]) has kinds (?P<kinds>\[.*\])'))
def timeline_kinds(world, prefix, kinds):
    expected = _json(kinds)
    deadline = time.monotonic() + 30  # the consumers and the TTL cleanup run in the background
    while True:
        got = _timeline(world.default_user, _json(prefix))
        if len(got) >= len(expected) or time.monotonic() > deadline:
            break
        time.sleep(0.1)
    assert [e["kind"] for e in got] == expected
    world.timeline = got


@then("the timeline's add and update events carry their values, the others none")
def timeline_values(world):
    assert [e["value"] for e in world.timeline] == [{"text": "first"}, {"text": "second"}, None, {"x": 1}, None]
    assert all(e["attributes"] is None for e in world.timeline)
