"""Valid time and `as_of` (issue 25) over HTTP, on `memsvc serve` and on the AWS backend (moto):
remember's `valid_from`/`valid_to`, a supersession closing the older memory, recall and search
`as_of` before, between and after, and the 400s (which write nothing)."""

from __future__ import annotations

import httpx
import pytest

from tests.api.helpers import assert_error

BERLIN, MUNICH = "I live in Berlin", "I live in Munich"


def remember(client: httpx.Client, **body) -> httpx.Response:
    return client.post("/v1/memories/remember", json=body)


def recalled(client: httpx.Client, **body) -> list[str]:
    r = client.post("/v1/memories/recall", json={"query": "where do I live", **body})
    assert r.status_code == 200, r.text
    return [m["content"] for m in r.json()["memories"]]


def searched(client: httpx.Client, home: list[str], **body) -> list[str]:
    r = client.post("/v1/memories/search", json={"namespace_prefix": home, **body})
    assert r.status_code == 200, r.text
    return sorted(m["value"]["content"] for m in r.json()["items"])


def test_a_supersession_closes_the_older_and_as_of_answers_what_held(me, home):
    first = remember(me, content=BERLIN, valid_from="2020-01-01T00:00:00Z")
    assert first.status_code == 200, first.text
    assert first.json()["memory"]["value"]["valid_from"] == "2020-01-01T00:00:00.000000Z"
    second = remember(me, content=MUNICH, valid_from="2023-05-01T00:00:00+02:00").json()
    assert second["action"] == "superseded", second
    old = first.json()["memory"]
    got = me.get("/v1/memories", params=[("ns", s) for s in old["namespace"]] + [("key", old["key"])]).json()
    assert got["value"]["valid_to"] == "2023-04-30T22:00:00.000000Z" and "superseded" in got["value"]["tags"]

    assert recalled(me) == [MUNICH]
    assert recalled(me, as_of="2019-01-01T00:00:00Z") == []
    assert recalled(me, as_of="2021-01-01T00:00:00Z") == [BERLIN]
    assert recalled(me, as_of="2024-01-01T00:00:00Z") == [MUNICH]
    assert searched(me, home, query="where do I live", as_of="2021-01-01T00:00:00Z") == [BERLIN]
    assert searched(me, home, as_of="2024-01-01T00:00:00Z") == [MUNICH]
    assert searched(me, home) == [BERLIN, MUNICH]


@pytest.mark.parametrize(("body", "field"), [
    ({"valid_from": "2026-01-01T00:00:00"}, "valid_from"),
    ({"valid_to": "soon"}, "valid_to"),
    ({"valid_from": "2026-02-01T00:00:00Z", "valid_to": "2026-01-01T00:00:00Z"}, "valid_to"),
])
def test_remember_refuses_a_bad_time_and_writes_nothing(me, home, body, field):
    err = assert_error(remember(me, content=BERLIN, **body), 400, "INVALID_ARGUMENT")
    assert err["details"]["field"] == field
    assert searched(me, home) == []


def test_recall_and_search_refuse_a_bad_as_of(me, home):
    err = assert_error(me.post("/v1/memories/recall", json={"query": "x", "as_of": "2026-01-01"}), 400,
                       "INVALID_ARGUMENT")
    assert err["details"]["field"] == "as_of"
    err = assert_error(me.post("/v1/memories/search", json={"namespace_prefix": home, "as_of": "yesterday"}), 400,
                       "INVALID_ARGUMENT")
    assert err["details"]["field"] == "as_of"


def test_as_of_never_reaches_another_user(make_client, tenant, me, home, uid):
    other = make_client(uid + "-other", tenant=tenant)
    assert remember(other, content="I live in Paris", valid_from="2020-01-01T00:00:00Z").status_code == 200
    assert recalled(me, as_of="2021-01-01T00:00:00Z") == []
    assert searched(me, [], as_of="2021-01-01T00:00:00Z") == []
    r = me.post("/v1/memories/recall", json={"query": "where do I live", "as_of": "2021-01-01T00:00:00Z",
                                             "identifiers": {"user_id": uid + "-other"}})
    assert_error(r, 403, "FORBIDDEN")
