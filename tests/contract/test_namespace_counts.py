"""`GET /v1/memories/namespaces?counts=true` on both backends: each listed namespace's live items,
itself and below, capped; expired items and what the caller may not read are never counted."""

from __future__ import annotations

from memsvc.adapters.aws.dynamo_store import COUNT_READ_FACTOR
from memsvc.core.policy import default_bundle
from memsvc.service.admin import PolicyBundle
from memsvc.service.memories import PutMemory
from memsvc.service.search import NAMESPACE_COUNT_BUDGET, NAMESPACE_COUNT_CAP, ListNamespaces
from tests.conftest import admin, alice, bob


def put(backend, namespace, key, caller=None, **fields):
    backend.memories.put(caller or alice(), PutMemory(namespace=namespace, key=key, value={"text": key}, **fields))


def counted(backend, caller=None, **query):
    listing = backend.search.namespace_listing(caller or alice(), ListNamespaces(counts=True, **query))
    return dict(zip(listing.namespaces, listing.counts, strict=True)), listing.count_cap


def test_each_namespace_counts_its_live_items_itself_and_below(backend):
    for key in ("a1", "a2"):
        put(backend, ["user", "alice", "a"], key)
    for key in ("b1", "b2", "b3"):
        put(backend, ["user", "alice", "a", "b"], key)
    put(backend, ["user", "alice", "c"], "c1")
    counts, cap = counted(backend, prefix=["user", "alice"])
    assert counts == {("user", "alice", "a"): 5, ("user", "alice", "a", "b"): 3, ("user", "alice", "c"): 1}
    assert cap == NAMESPACE_COUNT_CAP == 1000
    # Truncated at max_depth, a namespace sums the namespaces listed under it.
    assert counted(backend, prefix=["user", "alice"], max_depth=2)[0] == {("user", "alice"): 6}
    # A suffix counts only the namespaces it matched.
    assert counted(backend, prefix=["user", "alice"], suffix=["b"], max_depth=3)[0] == {("user", "alice", "a"): 3}


def test_without_counts_the_listing_has_none(backend):
    put(backend, ["user", "alice", "a"], "a1")
    listing = backend.search.namespace_listing(alice(), ListNamespaces(prefix=["user", "alice"]))
    assert (listing.namespaces, listing.counts, listing.count_cap) == ([("user", "alice", "a")], None, None)


def test_deleted_and_expired_items_are_not_counted(backend):
    put(backend, ["user", "alice", "a"], "stays")
    put(backend, ["user", "alice", "a"], "deleted")
    put(backend, ["user", "alice", "a"], "expires", ttl_seconds=60)
    backend.memories.delete(alice(), ("user", "alice", "a"), "deleted")
    assert counted(backend, prefix=["user", "alice"])[0] == {("user", "alice", "a"): 2}
    backend.clock.advance(61)  # expired, not yet swept: the service already shows it as gone
    assert counted(backend, prefix=["user", "alice"])[0] == {("user", "alice", "a"): 1}


def test_a_count_stops_at_the_cap(backend, monkeypatch):
    monkeypatch.setattr("memsvc.service.search.NAMESPACE_COUNT_CAP", 3)
    for key in ("1", "2", "3", "4", "5"):
        put(backend, ["user", "alice", "big"], key)
    for key in ("1", "2"):
        put(backend, ["user", "alice", "two", "x"], key)
        put(backend, ["user", "alice", "two", "y"], key)
    counts, cap = counted(backend, prefix=["user", "alice"], max_depth=3)
    assert cap == 3 and counts == {("user", "alice", "big"): 3, ("user", "alice", "two"): 3}
    assert backend.store.count_live("acme", ("user", "alice", "big"), backend.clock.now(), 2) == 2


def test_a_page_of_more_than_a_hundred_namespaces_gets_a_lower_cap(backend):
    put(backend, ["user", "alice", "a"], "a1")
    assert NAMESPACE_COUNT_BUDGET == 100_000
    assert counted(backend, prefix=["user", "alice"], limit=100) == ({("user", "alice", "a"): 1}, 1000)
    assert counted(backend, prefix=["user", "alice"], limit=200)[1] == 500
    assert counted(backend, prefix=["user", "alice"], limit=1000) == ({("user", "alice", "a"): 1}, 100)


def test_another_users_and_another_tenants_namespaces_are_neither_listed_nor_counted(backend):
    put(backend, ["user", "alice", "a"], "mine")
    put(backend, ["user", "bob", "a"], "his", caller=bob())
    put(backend, ["user", "alice", "a"], "other tenant's", caller=admin("globex"))
    put(backend, ["user", "alice", "a", "deep"], "other tenant's", caller=admin("globex"))
    assert counted(backend, prefix=[])[0] == {("user", "alice", "a"): 1}  # narrowed to alice's own
    assert counted(backend, bob(), prefix=[])[0] == {("user", "bob", "a"): 1}
    assert counted(backend, admin("globex"), prefix=["user"])[0] == {("user", "alice", "a"): 2,
                                                                     ("user", "alice", "a", "deep"): 1}
    assert counted(backend, admin(), prefix=["user"], max_depth=2)[0] == {("user", "alice"): 1, ("user", "bob"): 1}


LIST_ALL_READ_OWN = """package memories.authz

default allow := false

allow if "admin" in input.context.roles

allow if input.operation == "list"

allow if {
	input.operation in {"read", "write", "delete", "search", "events"}
	input.namespace[0] == "user"
	input.namespace[1] == input.context.user_id
}
"""


def test_a_namespace_the_caller_may_list_but_not_read_counts_nothing(backend):
    put(backend, ["user", "alice", "a"], "mine")
    put(backend, ["user", "bob", "a"], "his", caller=bob())
    backend.admin.put_policies(admin(), PolicyBundle(policies={**default_bundle(), "authz.rego": LIST_ALL_READ_OWN}))
    assert counted(backend, prefix=["user", "bob"])[0] == {("user", "bob", "a"): 0}
    assert counted(backend, prefix=["user", "alice"])[0] == {("user", "alice", "a"): 1}


def test_expired_rows_awaiting_removal_are_read_past_within_a_bound(backend, monkeypatch):
    monkeypatch.setattr("memsvc.service.search.NAMESPACE_COUNT_CAP", 5)
    for n in range(20):
        put(backend, ["user", "alice", "a"], f"gone{n:02}", ttl_seconds=60)
    backend.clock.advance(61)  # expired, not yet swept: DynamoDB's TTL can take days
    for key in ("live1", "live2", "live3"):
        put(backend, ["user", "alice", "a"], key)
    read = []
    if backend.name == "aws":
        call = backend.store._call

        def counting(operation, **kwargs):
            answer = call(operation, **kwargs)
            if operation == "Query" and kwargs.get("Select") == "COUNT":
                read.append(answer["ScannedCount"])
            return answer

        monkeypatch.setattr(backend.store, "_call", counting)
    assert counted(backend, prefix=["user", "alice"]) == ({("user", "alice", "a"): 3}, 5)
    if backend.name == "aws":  # the newest rows first, and never more than twice the cap of them
        assert 0 < sum(read) <= COUNT_READ_FACTOR * 5 == 10
