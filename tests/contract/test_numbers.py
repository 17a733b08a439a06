"""Every number a value may hold is governed, stored and read back exactly on both backends (issue
22). What a client sends is sealed (SQLite blob; DynamoDB binary), so DynamoDB's 38-digit numbers
never hold it; only the policy attributes are stored in the clear, as JSON text."""

from __future__ import annotations

import math
from typing import Any

from memsvc.core.policy import default_bundle
from memsvc.service.admin import PolicyBundle
from memsvc.service.memories import PutMemory
from memsvc.service.search import SearchQuery
from tests.conftest import admin, alice

NS = ["user", "alice", "numbers"]
NUMBERS = [1.7976931348623157e308, -1.7976931348623157e308, 5e-324, -5e-324, 1e-310, -0.0, 2**63, 2**64 + 1,
           -(2**63) - 1, 10**308, int("9" * 4300), -int("9" * 4300)]


def assert_identical(got: Any, sent: Any) -> None:
    """Equal, of the same type, with the same sign of zero."""
    assert type(got) is type(sent), (got, sent)
    if isinstance(sent, dict):
        assert list(got) == list(sent)
        for k in sent:
            assert_identical(got[k], sent[k])
    elif isinstance(sent, list):
        assert len(got) == len(sent)
        for g, s in zip(got, sent):
            assert_identical(g, s)
    else:
        assert got == sent and (not isinstance(sent, float) or math.copysign(1, got) == math.copysign(1, sent))


def test_extreme_numbers_are_stored_and_read_back_exactly(backend):
    value = {"numbers": NUMBERS, "max": NUMBERS[0], "long": NUMBERS[-2], "text": "plain words"}
    attributes = {"numbers": NUMBERS, "zero": -0.0}
    backend.memories.put(alice(), PutMemory(namespace=NS, key="k", value=value, attributes=attributes,
                                            sync_index=True))
    memory = backend.memories.get(alice(), NS, "k")
    assert_identical(memory.value, value)
    assert_identical(memory.attributes, attributes)
    stored = backend.store.get("acme", tuple(NS), "k")
    assert stored.policy_attributes == {"namespace": "user", "sub": "alice"}  # the only clear-text part

    backend.drain()
    found = backend.search.search(alice(), SearchQuery(namespace_prefix=NS, filter={
        "max": 1.7976931348623157e308, "long": {"gte": 10**4299}}))
    assert [m.key for m in found] == ["k"]


def test_numbers_a_tenant_policy_copies_into_clear_attributes_are_stored_and_pushed_down(backend):
    # Policy attributes pass through regorus, which holds 64-bit integers and doubles below 1e308
    # as sent, and sees anything larger in magnitude as +-1e308 (docs/api.md, "Policies").
    attributes_rego = ('package memories.attributes\n\n'
                       'attributes := {"namespace": input.namespace[0], "sub": input.namespace[1], '
                       '"max": input.value.max, "long": input.value.long, "int": input.value.int, '
                       '"tiny": input.value.tiny}\n')  # namespace and sub: what the built-in search.rego pushes down
    backend.admin.put_policies(admin(), PolicyBundle(policies={**default_bundle(), "attributes.rego": attributes_rego}))
    value = {"max": NUMBERS[0], "long": NUMBERS[-1], "int": 2**63, "tiny": 5e-324, "text": "plain words"}
    backend.memories.put(alice(), PutMemory(namespace=NS, key="p", value=value, sync_index=True))
    assert_identical(backend.memories.get(alice(), NS, "p").value, value)
    stored = backend.store.get("acme", tuple(NS), "p")
    assert stored.policy_attributes == {"namespace": "user", "sub": "alice", "max": 1e308, "long": -1e308,
                                        "int": 2**63, "tiny": 5e-324}
    backend.drain()
    for flt in ({"int": 2**63}, {"max": {"gte": 1e308}}, {"long": {"lt": 0}}):
        found = backend.search.search(alice(), SearchQuery(namespace_prefix=NS, query="plain words", filter=flt))
        assert [m.key for m in found] == ["p"], flt
