"""Field-token postings on moto: a version is `indexed` only once every token posting is written
(and no longer as soon as its delete starts), prefix scoping, tenant walls, and a crash midway."""

from __future__ import annotations

import json
from typing import Any

import pytest

from memsvc.adapters.aws.dynamo_keywords import DynamoKeywordIndex
from memsvc.core.errors import ProviderError
from memsvc.core.models import FieldDoc
from tests.aws.test_dynamo_keywords import TABLE, client, fail, rows  # noqa: F401 (the fixture)


class Recorder:
    """A client proxy recording the partition kind (`FT`, `FI`, `FD`) of every BatchWriteItem request."""

    def __init__(self, client: Any) -> None:
        self._client = client
        self.kinds: list[tuple[str, set[str]]] = []

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self._client, name)
        if name != "batch_write_item":
            return attr

        def call(**kwargs: Any) -> Any:
            for requests in kwargs["RequestItems"].values():
                verb = "put" if "PutRequest" in requests[0] else "delete"
                self.kinds.append((verb, {_kind(r) for r in requests}))
            return attr(**kwargs)

        return call


def _kind(request: dict[str, Any]) -> str:
    body = request.get("PutRequest", {}).get("Item") or request["DeleteRequest"]["Key"]
    return body["pk"]["S"].split("#")[2]


def fdoc(ns: tuple[str, ...], memory_id: str, tokens: set[str], tenant: str = "acme") -> FieldDoc:
    return FieldDoc(tenant, ns, memory_id, frozenset(tokens))


def test_indexed_is_written_last_and_deleted_first(client):
    proxy = Recorder(client)
    index = DynamoKeywordIndex(proxy, TABLE)
    index.put_many([], [fdoc(("a",), "m1", {"t1", "t2"})])
    assert proxy.kinds == [("put", {"FD"}), ("put", {"FT"}), ("put", {"FI"})]
    proxy.kinds.clear()
    index.delete_many("acme", ["m1"])
    assert proxy.kinds == [("delete", {"FI"}), ("delete", {"FT"}), ("delete", {"FD"})]
    assert [k for k in rows(client) if "#F" in k[0]] == []


def test_holders_under_a_prefix_and_per_tenant(client):
    index = DynamoKeywordIndex(client, TABLE)
    index.put_many([], [fdoc(("a",), "m1", {"t1"}), fdoc(("a", "x"), "m2", {"t1", "t2"}), fdoc(("ab",), "m3", {"t1"}),
                      fdoc(("a",), "m4", {"t1"}, tenant="other")])
    found = index.field_holders("acme", ("a",), ["t1", "t2", "t3"])
    assert found.indexed_ids == {"m1", "m2"}  # never ["ab"], never another tenant's
    assert found.holders == {"t1": {"m1", "m2"}, "t2": {"m2"}, "t3": frozenset()}
    assert index.field_holders("acme", (), ["t1"]).holders["t1"] == {"m1", "m2", "m3"}
    index.delete_tenant("acme")
    assert index.field_holders("acme", (), ["t1"]).indexed_ids == frozenset()
    assert index.field_holders("other", (), ["t1"]).indexed_ids == {"m4"}


def test_a_put_that_stopped_midway_is_not_indexed_and_its_retry_finishes(client):
    index = DynamoKeywordIndex(client, TABLE)
    d = fdoc(("a",), "m1", {f"t{i}" for i in range(30)})  # two BatchWriteItems of token postings
    failure = fail(client, "BatchWriteItem", when=lambda body: "#FI" in json.dumps(body))  # all but the last phase
    with pytest.raises(ProviderError):
        index.put_many([], [d])
    failure.remove()
    assert index.field_holders("acme", ("a",), ["t1"]).indexed_ids == frozenset()
    assert index.field_holders("acme", ("a",), ["t1"]).holders["t1"] == {"m1"}  # written, but not yet to be used
    index.put_many([], [d])
    found = index.field_holders("acme", ("a",), sorted(d.tokens))
    assert found.indexed_ids == {"m1"} and all(h == {"m1"} for h in found.holders.values())
