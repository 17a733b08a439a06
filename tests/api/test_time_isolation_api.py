"""Isolation over HTTP, on `memsvc serve` and on the AWS backend (moto), for the read-time fields
issue 25 added to existing routes: `as_of` and `known_at` on search and recall never reach what the
same user id wrote in another tenant (the contract suite covers the services; this covers the wire)."""

from __future__ import annotations

import time

from tests.api.helpers import put_ok

PAST = "2021-01-01T00:00:00Z"


def contents(client, home, **body) -> list[str]:
    r = client.post("/v1/memories/search", json={"namespace_prefix": home, **body})
    assert r.status_code == 200, r.text
    return sorted(str(m["value"]) for m in r.json()["items"])


def test_as_of_never_reaches_another_tenant(make_client, me, tenant, uid, home):
    stranger = make_client(uid, tenant=tenant + "-other")  # the same user id, another tenant
    r = stranger.post("/v1/memories/remember", json={"content": "I live in Paris", "valid_from": "2020-01-01T00:00:00Z",
                                                     "wait": True})
    assert r.status_code == 200, r.text
    assert contents(stranger, home, as_of=PAST) != []  # it holds then, for its own tenant
    assert contents(me, home, as_of=PAST) == []
    r = me.post("/v1/memories/recall", json={"query": "where do I live", "as_of": PAST})
    assert r.status_code == 200, r.text
    assert r.json()["memories"] == []


def test_known_at_never_reaches_another_tenant(make_client, me, tenant, uid, home):
    stranger = make_client(uid, tenant=tenant + "-other")
    ns = [*home, "notes"]
    put_ok(stranger, ns, "k", {"text": "the stranger's note"})
    put_ok(me, ns, "k", {"text": "my note"})
    time.sleep(0.05)
    known_at = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(time.time() + 1))
    deadline = time.monotonic() + 30
    while True:  # the AWS timeline records the versions in the background
        r = me.post("/v1/memories/search", json={"namespace_prefix": home, "known_at": known_at})
        if r.status_code == 200 and r.json()["items"]:
            break
        assert time.monotonic() < deadline, r.text
        time.sleep(0.2)
    assert [m["value"] for m in r.json()["items"]] == [{"text": "my note"}]
