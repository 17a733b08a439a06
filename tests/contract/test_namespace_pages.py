"""`GET /v1/memories/namespaces` pages on both backends: in ascending order of segments (not of
their stored, percent-encoded form), pages partition one listing, and a page costs what it shows,
not what the tenant holds: the namespaces past it, or shown as an entry already listed, get no
policy check and no read for a live item (on DynamoDB, a Query each)."""

from __future__ import annotations

import pytest

from memsvc.core.models import Caller
from memsvc.core.policy import CompiledPolicies
from memsvc.service.memories import PutMemory
from memsvc.service.search import ListNamespaces
from tests.conftest import alice

# Percent-encoding reorders these: "é" is "%C3%A9" and "{" is "%7B" (before "a" once encoded).
SEGMENTS = ["a", "b b", "é", "{x}", "~", "Z", "0", "a-b", "a.b", "日本"]


def put(backend, namespace, key="k", caller=None):
    backend.memories.put(caller or alice(), PutMemory(namespace=namespace, key=key, value={"text": key},
                                                     index_fields=False))


def listed(backend, caller=None, **query):
    return backend.search.list_namespaces(caller or alice(), ListNamespaces(**query))


@pytest.fixture
def policy_checks(monkeypatch):
    """The namespaces below `user/alice` the policies were asked about (the listing's scope, the
    prefix itself, is checked once first)."""
    asked = []
    allow = CompiledPolicies.allow

    def counted(self, operation, namespace, key, context):
        if len(namespace) > 2:
            asked.append(tuple(namespace))
        return allow(self, operation, namespace, key, context)

    monkeypatch.setattr(CompiledPolicies, "allow", counted)
    return asked


def test_namespaces_list_in_the_order_of_their_segments_and_pages_partition_it(backend):
    for segment in SEGMENTS:
        put(backend, ["user", "alice", segment])
        put(backend, ["user", "alice", segment, "deeper"])
    whole = listed(backend, limit=1000)
    assert whole == sorted([("user", "alice", s) for s in SEGMENTS] + [("user", "alice", s, "deeper") for s in SEGMENTS])
    for size in (1, 3, 7):
        pages = [ns for offset in range(0, len(whole), size) for ns in listed(backend, limit=size, offset=offset)]
        assert pages == whole, size
    assert listed(backend, max_depth=3, limit=1000) == sorted(("user", "alice", s) for s in SEGMENTS)


def test_a_page_checks_only_the_namespaces_it_shows(backend, policy_checks):
    for n in range(40):
        put(backend, ["user", "alice", f"n{n:02d}"])
    policy_checks.clear()
    assert listed(backend, limit=5) == [("user", "alice", f"n{n:02d}") for n in range(5)]
    assert len(policy_checks) == 5
    policy_checks.clear()
    assert listed(backend, limit=5, offset=30) == [("user", "alice", f"n{n:02d}") for n in range(30, 35)]
    assert len(policy_checks) == 35  # an offset's namespaces are read to know where the page starts


def test_a_namespace_shown_as_one_already_listed_costs_no_check(backend, policy_checks):
    for n in range(30):
        put(backend, ["user", "alice", "many", f"n{n:02d}"])
    put(backend, ["user", "alice", "other"])
    policy_checks.clear()
    assert listed(backend, max_depth=3) == [("user", "alice", "many"), ("user", "alice", "other")]
    assert policy_checks == [("user", "alice", "many", "n00"), ("user", "alice", "other")]
    # Counted, the page's entry reads what it counts: every namespace under it.
    listing = backend.search.namespace_listing(alice(), ListNamespaces(max_depth=3, limit=1, counts=True))
    assert (listing.namespaces, listing.counts) == ([("user", "alice", "many")], [30])


def test_namespaces_without_live_items_are_passed_over_not_listed(backend):
    put(backend, ["user", "alice", "a"])
    put(backend, ["user", "alice", "b"])
    put(backend, ["user", "alice", "c"])
    backend.memories.delete(alice(), ("user", "alice", "a"), "k")
    assert listed(backend, limit=1) == [("user", "alice", "b")]
    assert listed(backend, limit=1, offset=1) == [("user", "alice", "c")]


def test_other_users_and_tenants_namespaces_never_fill_a_page(backend):
    stranger = Caller(tenant_id="globex", user_id="alice", roles=("user",))
    for n in range(5):
        put(backend, ["user", "alice", f"g{n}"], caller=stranger)
    put(backend, ["user", "alice", "mine"])
    assert listed(backend, limit=2) == [("user", "alice", "mine")]
    assert listed(backend, caller=stranger, limit=2) == [("user", "alice", "g0"), ("user", "alice", "g1")]
