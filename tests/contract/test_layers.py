"""Layer namespaces and governance on both backends, through the store routes' use cases
(put, get, delete, search, list, events): who reaches ["project", P], ["team", T], ["org", O] and
["company"], and that tenants stay walls even for members with the same claims. The claims are
as `Identity` leaves them in `jwt_claims` (lists)."""

from __future__ import annotations

import pytest

from memsvc.core.errors import Forbidden, NotFound, PolicyViolation
from memsvc.core.models import Caller
from memsvc.service.memories import PutMemory
from memsvc.service.search import ListNamespaces, SearchQuery
from memsvc.service.timeline import EventsQuery
from tests.conftest import admin

AKIA = "AKIA" + "IOSFODNN7EXAMPLE"  # AWS's documented example access key id
SHARED = [("project", "projects"), ("team", "teams"), ("org", "orgs")]


def user(sub: str, tenant: str = "acme", **claims: list[str]) -> Caller:
    return Caller(tenant_id=tenant, user_id=sub, roles=("user",), jwt_claims={"sub": sub, "roles": ["user"], **claims})


def put(backend, caller, namespace, key="k", value=None, **kw):
    value = value if value is not None else {"text": f"{key} lives in {'/'.join(namespace)}"}
    return backend.memories.put(caller, PutMemory(namespace=list(namespace), key=key, value=value, **kw))


def search(backend, caller, prefix, **kw):
    return backend.search.search(caller, SearchQuery(namespace_prefix=list(prefix), **kw))


def namespaces(backend, caller, prefix):
    return backend.search.list_namespaces(caller, ListNamespaces(prefix=list(prefix)))


def events(backend, caller, prefix):
    return backend.timeline.events(caller, EventsQuery(namespace_prefix=list(prefix))).events


@pytest.mark.parametrize("layer,claim", SHARED)
def test_members_share_their_layer(backend, layer, claim):
    alice, carol = user("alice", **{claim: ["x1"]}), user("carol", **{claim: ["x0", "x1"]})
    ns = (layer, "x1", "notes")
    written = put(backend, alice, ns, "plan", {"text": "ship the release on friday"}, sync_index=True)
    backend.drain()
    assert backend.memories.get(carol, ns, "plan").value == {"text": "ship the release on friday"}
    assert [m.id for m in search(backend, carol, [layer, "x1"])] == [written.id]
    assert [m.id for m in search(backend, carol, [layer, "x1"], query="release friday")] == [written.id]
    assert namespaces(backend, carol, [layer, "x1"]) == [ns]
    assert [v.event.memory_id for v in events(backend, carol, [layer, "x1"])] == [written.id]
    put(backend, carol, ns, "plan", {"text": "ship on monday"})
    assert backend.memories.get(alice, ns, "plan").version == 2
    backend.memories.delete(carol, ns, "plan")
    with pytest.raises(NotFound):
        backend.memories.get(alice, ns, "plan")


@pytest.mark.parametrize("layer,claim", SHARED)
def test_non_members_are_refused_every_operation(backend, layer, claim):
    ns = (layer, "x1", "notes")
    put(backend, user("alice", **{claim: ["x1"]}), ns)
    for outsider in (user("bob"), user("dave", **{claim: ["x10", "x"]}),
                     user("erin", **{other: ["x1"] for _, other in SHARED if other != claim})):
        with pytest.raises(Forbidden):
            backend.memories.get(outsider, ns, "k")
        with pytest.raises(Forbidden):
            put(backend, outsider, ns, "k2")
        with pytest.raises(Forbidden):
            backend.memories.delete(outsider, ns, "k")
        for prefix in ([layer, "x1"], [layer]):
            with pytest.raises(Forbidden):
                search(backend, outsider, prefix)
            with pytest.raises(Forbidden):
                namespaces(backend, outsider, prefix)
            with pytest.raises(Forbidden):
                events(backend, outsider, prefix)
    assert backend.memories.get(admin(), ns, "k").version == 1  # nothing was changed


def test_the_empty_prefix_stays_narrowed_to_the_own_subtree_for_members(backend):
    alice = user("alice", projects=["p1"], teams=["t1"], orgs=["o1"])
    for ns in (("project", "p1"), ("team", "t1"), ("org", "o1"), ("company",)):
        put(backend, admin(), ns, "shared")
    mine = put(backend, alice, ("user", "alice", "memories"), "mine")
    assert [m.id for m in search(backend, alice, [])] == [mine.id]
    assert namespaces(backend, alice, []) == [("user", "alice", "memories")]


def test_everyone_reads_the_company_layer_and_only_admins_write_it(backend):
    ns = ("company", "handbook")
    written = put(backend, admin(), ns, "holidays", {"text": "the office closes in august"}, sync_index=True)
    backend.drain()
    bob = user("bob")
    assert backend.memories.get(bob, ns, "holidays").id == written.id
    assert [m.id for m in search(backend, bob, ["company"], query="office august")] == [written.id]
    assert namespaces(backend, bob, ["company"]) == [ns]
    assert [v.event.memory_id for v in events(backend, bob, ["company"])] == [written.id]
    with pytest.raises(Forbidden):
        put(backend, bob, ns, "holidays", {"text": "closed all year"})
    with pytest.raises(Forbidden):
        backend.memories.delete(bob, ns, "holidays")
    service = Caller(tenant_id="acme", user_id="arn:aws:iam::1:role/x", roles=("service",), principal_type="iam")
    assert put(backend, service, ns, "holidays", {"text": "and in december"}).version == 2


@pytest.mark.parametrize("layer,claim", SHARED + [("company", None)])
def test_another_tenant_never_sees_a_layer_even_with_the_same_claims(backend, layer, claim):
    ns = (layer, "x1") if claim else (layer,)
    claims = {claim: ["x1"]} if claim else {}
    put(backend, user("alice", **claims) if claim else admin(), ns, "k", {"text": "acme only"}, sync_index=True)
    backend.drain()
    stranger = user("alice", tenant="globex", **claims)  # same name, same claims, other tenant
    with pytest.raises(NotFound):
        backend.memories.get(stranger, ns, "k")
    assert search(backend, stranger, ns) == []
    assert search(backend, stranger, ns, query="acme only") == []
    assert namespaces(backend, stranger, ns) == []
    assert events(backend, stranger, ns) == []
    assert search(backend, admin("globex"), [], query="acme only") == []
    put(backend, admin("globex"), ns, "k", {"text": "globex"})
    assert backend.memories.get(user("alice", **claims) if claim else admin(), ns, "k").value == {"text": "acme only"}


# --- governance ----------------------------------------------------------------------------------


def test_a_credential_is_refused_with_422_and_nothing_is_written(backend):
    alice = user("alice", projects=["p1"])
    ns = ("project", "p1")
    put(backend, alice, ns, "deploy", {"text": "deploy with the ci role"})
    backend.drain()
    with pytest.raises(PolicyViolation) as info:
        put(backend, alice, ns, "deploy", {"text": f"deploy with {AKIA}"})
    assert info.value.details["policies"] == ["no_credentials"] and AKIA not in repr(info.value.to_body())
    with pytest.raises(PolicyViolation):
        put(backend, alice, ns, "fresh", {"text": "fine"}, attributes={"creds": AKIA})
    assert backend.changes() == []  # no change reached the feed: no index, no event
    assert backend.memories.get(alice, ns, "deploy").value == {"text": "deploy with the ci role"}
    with pytest.raises(NotFound):
        backend.memories.get(alice, ns, "fresh")


def test_a_caller_who_may_not_write_gets_403_before_any_governance(backend):
    with pytest.raises(Forbidden):
        put(backend, user("bob"), ("project", "p1"), "k", {"text": AKIA})
