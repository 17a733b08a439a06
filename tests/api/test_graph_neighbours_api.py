"""`POST /v1/graph/neighbours` over HTTP: the answer's shape, paging by next_cursor, bad input in
the error envelope (changing nothing), and another user or tenant refused or shown nothing."""

from __future__ import annotations

import pytest

from tests.api.helpers import assert_error


def relate(client, ns, source, kind, target):
    for name in (source, target):
        assert client.put("/v1/graph/entities", json={"namespace": ns, "name": name}).status_code == 200
    r = client.put("/v1/graph/relations", json={"namespace": ns, "source": source, "type": kind, "target": target})
    assert r.status_code == 200, r.text


def neighbours(client, prefix, **body):
    return client.post("/v1/graph/neighbours", json={"namespace_prefix": list(prefix), "entity": {"entity": "Dana"},
                                                     **body})


def test_the_answer_and_its_pages(live_server, me, home):
    ns = [*home, "notes"]
    relate(me, ns, "Dana", "WORKS_ON", "Project Q")
    relate(me, ns, "Erin", "REPORTS_TO", "Dana")
    r = neighbours(me, home)
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["next_cursor"] is None and len(body["edges"]) == 2
    edge = next(e for e in body["edges"] if e["relation"] == "REPORTS_TO")
    assert set(edge) == {"relation", "direction", "entity", "namespace", "memory", "valid_from", "valid_to"}
    assert (edge["direction"], edge["entity"]["name"], edge["namespace"], edge["memory"]) == ("in", "Erin", ns, None)
    first = neighbours(me, home, limit=1).json()
    second = neighbours(me, home, limit=1, cursor=first["next_cursor"]).json()
    assert [e["relation"] for e in first["edges"] + second["edges"]] == [e["relation"] for e in body["edges"]]


@pytest.mark.parametrize("body", [{"limit": 0}, {"limit": 101}, {"direction": "up"}, {"relation": "LIKES"},
                                  {"as_of": "soon"}, {"cursor": "AAAA"}, {"entity": {}}])
def test_bad_input_is_400_and_changes_nothing(live_server, me, home, body):
    ns = [*home, "notes"]
    relate(me, ns, "Dana", "WORKS_ON", "Project Q")
    before = neighbours(me, home).json()
    assert_error(neighbours(me, home, **body), 400, "INVALID_ARGUMENT")
    assert neighbours(me, home).json() == before


def test_other_users_and_tenants(live_server, me, make_client, tenant, home):
    ns = [*home, "notes"]
    relate(me, ns, "Dana", "WORKS_ON", "Project Q")
    relate(me, ns, "Dana", "OWNS", "Kafka")
    cursor = neighbours(me, home, limit=1).json()["next_cursor"]
    bob = make_client("bob-" + home[1], tenant=tenant)
    assert_error(neighbours(bob, home), 403, "FORBIDDEN")
    assert neighbours(bob, []).json() == {"edges": [], "next_cursor": None}  # narrowed to Bob's own subtree
    stranger = make_client(home[1], tenant="other-" + home[1][:20])  # the same user id, another tenant
    assert neighbours(stranger, home).json() == {"edges": [], "next_cursor": None}
    for other in (bob, stranger):  # Alice's cursor opens for neither
        assert_error(neighbours(other, [], limit=1, cursor=cursor), 400, "INVALID_ARGUMENT")
