"""Questions that name a time (issue 25) over HTTP: a plain item's `valid_from`/`valid_to` written
with PUT rank it first for a query naming its month, `"temporal": false` opts out, and a
`temporal` that is no boolean is a 400."""

from __future__ import annotations

import httpx

from tests.api.helpers import assert_error

TRIP = "we drove the coast highway on a long road trip"


def put(client: httpx.Client, home: list[str], key: str, day: str) -> None:
    r = client.put("/v1/memories", json={
        "namespace": [*home, "notes"], "key": key, "sync_index": True,
        "value": {"text": TRIP, "valid_from": f"{day}T00:00:00Z", "valid_to": f"{day}T23:59:59Z"}})
    assert r.status_code == 200, r.text


def keys(client: httpx.Client, path: str, body: dict) -> list[str]:
    r = client.post(path, json=body)
    assert r.status_code == 200, r.text
    return [m["key"] for m in r.json()["items" if path.endswith("search") else "memories"]]


def test_a_query_naming_a_month_ranks_the_item_valid_then_first(me, home):
    put(me, home, "july", "2023-07-24")
    put(me, home, "march", "2023-03-10")  # the same words, newer: first when no time is named
    search = {"namespace_prefix": home}
    assert keys(me, "/v1/memories/search", {**search, "query": "which road trip did we take"}) == ["march", "july"]
    asked = "which road trip did we take in July"
    assert keys(me, "/v1/memories/search", {**search, "query": asked}) == ["july", "march"]
    assert keys(me, "/v1/memories/search", {**search, "query": asked, "temporal": False}) == ["march", "july"]
    recall = {"namespace_prefix": home, "min_score": 0}
    assert keys(me, "/v1/memories/recall", {**recall, "query": asked})[0] == "july"
    assert keys(me, "/v1/memories/recall", {**recall, "query": asked, "temporal": False})[0] == "march"


def test_temporal_must_be_a_boolean(me, home):
    for path, body in (("/v1/memories/search", {"namespace_prefix": home}), ("/v1/memories/recall", {})):
        err = assert_error(me.post(path, json={**body, "query": "trip in July", "temporal": "no"}), 400,
                           "INVALID_ARGUMENT")
        assert err["details"]["field"] == "temporal"


def test_the_last_day_of_the_calendar_is_never_a_500(me, home):
    """A query naming 9999-12-31 (its end would be in year 10000) reads no time; an item whose
    valid_from is the last representable instant is ranked like any other, never a 500 (a writer
    to a shared namespace could otherwise break every temporal search that reaches it)."""
    for query in ("what happened on 9999-12-31", "road trip since 9999-12-31", "road trip in December 9999"):
        assert keys(me, "/v1/memories/search", {"namespace_prefix": home, "query": query}) == []
        keys(me, "/v1/memories/recall", {"query": query})
    r = me.put("/v1/memories", json={"namespace": [*home, "notes"], "key": "last", "sync_index": True,
                                     "value": {"text": TRIP, "valid_from": "9999-12-31T23:59:59.999999Z"}})
    assert r.status_code == 200, r.text
    put(me, home, "july", "2023-07-24")
    for query in ("road trip in July", "road trip in 2025", "road trip in December", "road trip since 2020",
                  "road trip on 31 December", "road trip on 9999-12-30"):
        found = keys(me, "/v1/memories/search", {"namespace_prefix": home, "query": query})
        assert sorted(found) == ["july", "last"], (query, found)
        assert keys(me, "/v1/memories/recall", {"namespace_prefix": home, "query": query, "min_score": 0})
