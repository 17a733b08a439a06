"""GET /v1/memories/events over HTTP, on `memsvc serve` and on the AWS backend (moto), where the
events arrive through the background consumers: the local feed worker and sweeper, or the stream
Lambdas and the TTL fake."""

from __future__ import annotations

from tests.api.helpers import assert_error, delete, events, parse_ts, put_ok
from tests.api.helpers import wait_for_events as wait_for
from tests.api.helpers import walk_events as walk

EVENT_KEYS = {"id", "namespace", "key", "kind", "occurred_at", "value", "attributes", "expires_at"}


def test_the_lifecycle_of_a_memory(me, home):
    ns = [*home, "facts"]
    first = put_ok(me, ns, "lang", {"text": "likes Python"}, attributes={"source": "chat"})
    put_ok(me, ns, "lang", {"text": "likes Rust"})
    assert delete(me, ns, "lang").status_code == 204
    short = put_ok(me, ns, "tmp", {"text": "soon gone"}, ttl_seconds=1)
    got = wait_for(me, home, 5, timeout=30)

    assert [e["kind"] for e in got] == ["add", "update", "delete", "add", "expired"]
    for e in got:
        assert EVENT_KEYS <= set(e), e
        assert e["namespace"][:2] == home
        parse_ts(e["occurred_at"])
    assert got[0]["id"] == first["id"] and got[0]["occurred_at"] == first["updated_at"]
    assert (got[0]["value"], got[0]["attributes"]) == ({"text": "likes Python"}, {"source": "chat"})
    assert got[1]["value"] == {"text": "likes Rust"} and got[1]["attributes"] is None
    assert got[2]["value"] is None and got[2]["attributes"] is None
    assert got[4]["key"] == "tmp" and got[4]["value"] is None
    assert got[4]["expires_at"] == short["expires_at"]
    stamps = [(parse_ts(e["occurred_at"]), e["id"]) for e in got]
    assert stamps == sorted(stamps)


def test_pages_kinds_and_time_window(me, home):
    ns = [*home, "n"]
    for n in range(5):
        put_ok(me, ns, f"k{n}", {"text": f"note {n}"})
    delete(me, ns, "k0")
    everything = wait_for(me, home, 6)
    assert [e["key"] for e in walk(me, home, limit=2)] == [e["key"] for e in everything]

    r = events(me, home, limit=2)
    assert r.status_code == 200 and len(r.json()["events"]) == 2 and r.json()["after_cursor"]
    assert [e["kind"] for e in walk(me, home, kinds=["delete"])] == ["delete"]
    assert len(walk(me, home, kinds=["add", "delete"])) == 6
    middle = everything[2]["occurred_at"]
    assert [e["key"] for e in walk(me, home, after=middle)] == [e["key"] for e in everything[3:]]
    assert [e["key"] for e in walk(me, home, before=middle)] == [e["key"] for e in everything[:2]]


def test_walls(me, make_client, home, uid, tenant):
    put_ok(me, [*home, "n"], "k", {"text": "mine"})
    wait_for(me, home, 1)
    other = make_client("other-" + uid, tenant=tenant)
    assert walk(other, []) == []  # narrowed to its own subtree, which is empty
    assert_error(events(other, home), 403, "FORBIDDEN")
    stranger = make_client(uid, tenant=tenant + "-x", roles=["admin"])  # same user id, another tenant
    assert walk(stranger, []) == []
    assert_error(events(make_client(None), home), 401)

    cursor = events(me, home, limit=1).json()["resume_cursor"]
    assert cursor
    err = assert_error(events(stranger, [], after_cursor=cursor), 400, "INVALID_ARGUMENT")
    assert err["details"]["field"] == "after_cursor"


def test_bad_input(me, home):
    for params in ({"limit": 0}, {"limit": 201}, {"limit": "ten"}, {"kinds": ["created"]},
                   {"after": "yesterday"}, {"after_cursor": "forged"}, {"after_cursor": ["a", "b"]}):
        assert_error(events(me, home, **params), 400, "INVALID_ARGUMENT")
