"""`contains`, `any`, `exists` and `not` on search and recall, on both backends: typed memories'
`tags`, `category` and `kind` as filter paths, recall's `filter` ANDed with `types`, conditions on
plaintext policy attributes (a tenant policy copying value fields into them, and injecting a
negated condition), and isolation: a filter never reaches another user's items."""

from __future__ import annotations

import pytest

from memsvc.core.errors import InvalidArgument
from memsvc.core.filters import lookup_in, parse_filter
from memsvc.core.policy import default_bundle
from memsvc.service.admin import PolicyBundle
from memsvc.service.memories import PutMemory
from memsvc.service.recall import RecallQuery
from memsvc.service.search import SearchQuery
from tests.conftest import admin, alice, bob

NS = ["user", "alice", "memories"]
# Every content names lisbon, so a query for it ranks all of them; the filter decides which come back.
ITEMS = {
    "trip": {"content": "booked the flight to lisbon for the conference", "type": "fact", "kind": "episodic",
             "tags": ["travel", "work"], "category": "work"},
    "hotel": {"content": "the lisbon hotel has a rooftop pool", "type": "note", "kind": "episodic",
              "tags": ["travel"], "category": "personal"},
    "diet": {"content": "eats vegetarian food in lisbon", "type": "preference", "kind": "semantic",
             "tags": ["food"], "category": None},
    "budget": {"content": "two thousand euros is the lisbon budget", "type": "decision", "tags": "travel"},
    "plain": {"content": "lisbon weather", "meta": {"tags": [["nested", "lisbon"]]}},
}

FILTERS = [
    {"tags": {"contains": "travel"}},  # budget's scalar tag counts as a list of one
    {"tags": {"$contains": "food"}},
    {"tags": {"any": ["food", "work"]}},
    {"tags": {"$any": []}},
    {"category": "work"},
    {"category": {"exists": True}},  # diet's null category is present
    {"category": {"$exists": False}},
    {"kind": "episodic"},
    {"kind": {"not": {"eq": "episodic"}}},
    {"tags": {"not": {"contains": "travel"}}},
    {"tags": {"$not": {"any": ["travel", "food"], "exists": True}}},
    {"meta.tags": {"contains": ["nested", "lisbon"]}},
    {"meta.tags": {"contains": "nested"}},  # one level only
    {"category": {"not": {"exists": True}}, "tags": {"contains": "travel"}, "type": {"in": ["decision"]}},
]


def expected(flt: dict) -> set[str]:
    parsed = parse_filter(flt)
    return {key for key, value in ITEMS.items() if parsed.matches(lookup_in(value))}


def write(backend, caller=None, namespace=NS, items=ITEMS) -> None:
    for key, value in items.items():
        backend.memories.put(caller or alice(), PutMemory(namespace=namespace, key=key, value=value,
                                                          index_fields=["content"]))


def search(backend, flt, caller=None, prefix=("user", "alice"), **kw) -> set[str]:
    found = backend.search.search(caller or alice(), SearchQuery(namespace_prefix=list(prefix), filter=flt, **kw))
    return {m.key for m in found}


def recall(backend, caller=None, **kw) -> set[str]:
    result = backend.app.services.recall.recall(caller or alice(), RecallQuery(min_score=0, **kw))
    return {r.memory.key for r in result.memories}


@pytest.fixture
def written(backend):
    write(backend)
    backend.drain()
    return backend


def test_search_by_filter_with_each_operator(written):
    for flt in FILTERS:
        assert search(written, flt) == expected(flt), flt


def test_search_by_filter_before_the_index_catches_up(backend):
    write(backend)  # no field tokens yet: every condition decided on the decrypted value
    for flt in FILTERS:
        assert search(backend, flt) == expected(flt), flt


@pytest.mark.parametrize("mode", ["hybrid", "keyword", "semantic"])
def test_ranked_search_with_each_operator(written, mode):
    for flt in FILTERS:
        assert search(written, flt, query="lisbon", mode=mode) == expected(flt), (mode, flt)


def test_recall_filter_with_each_operator(written):
    for flt in FILTERS:
        found = recall(written, query="lisbon", namespace_prefix=NS, filter=flt)
        # Recall may leave out matches well below its best one; never one the filter rejects.
        assert found <= expected(flt), flt
        assert bool(found) == bool(expected(flt)), flt
        if len(expected(flt)) == 1:
            assert found == expected(flt), flt


def test_recall_filter_is_anded_with_types(written):
    flt = {"tags": {"contains": "travel"}}
    assert recall(written, query="lisbon", namespace_prefix=NS, filter=flt, types=["decision"]) == {"budget"}
    assert recall(written, query="lisbon", namespace_prefix=NS, filter=flt, types=["preference"]) == set()
    assert recall(written, query="lisbon", namespace_prefix=NS, filter={"kind": "semantic"},
                  types=["preference", "note"]) == {"diet"}
    # The same through layers: the user layer's root is ["user", "alice"].
    assert recall(written, query="lisbon", layers=["user"], filter={"category": "personal"}) == {"hotel"}


@pytest.mark.parametrize("flt, op", [
    ({"tags": {"any": "travel"}}, "any"),
    ({"kind": {"exists": "yes"}}, "exists"),
    ({"tags": {"not": {"not": {"contains": "x"}}}}, "not"),
    ({"tags": {"not": {}}}, "not"),
    ({"tags": {"$has": "x"}}, "$has"),
])
def test_a_malformed_operator_is_a_400_naming_the_field_on_search_and_recall(written, flt, op):
    key = next(iter(flt))
    for call in (lambda: search(written, flt),
                 lambda: recall(written, query="lisbon", namespace_prefix=NS, filter=flt)):
        with pytest.raises(InvalidArgument) as exc:
            call()
        assert exc.value.details["field"] == "filter"
        assert exc.value.details["key"] == key
        assert exc.value.details["op"] == op


# A tenant policy copies category and tags into plaintext attributes (`area`, `labels`, names the
# values do not have, so only the attributes can answer), and hides what is labelled secret.
# An item without a string category has no `area` (an attribute is never null): the value decides.
ATTRIBUTES_REGO = ('package memories.attributes\n\n'
                   'base := {"namespace": input.namespace[0], "sub": input.namespace[1], '
                   '"labels": object.get(input.value, "tags", [])}\n\n'
                   'area := {"area": input.value.category} if is_string(input.value.category) else := {}\n\n'
                   'attributes := object.union(base, area)\n')


def with_attribute_policies(backend) -> None:
    bundle = default_bundle()
    search_rego = bundle["search.rego"].replace(
        'own_filter := {"namespace": "user", "sub": input.context.user_id}',
        'own_filter := {"namespace": "user", "sub": input.context.user_id, '
        '"labels": {"$not": {"$contains": "secret"}}}')
    assert search_rego != bundle["search.rego"]
    backend.admin.put_policies(admin(), PolicyBundle(policies={**bundle, "attributes.rego": ATTRIBUTES_REGO,
                                                               "search.rego": search_rego}))


def test_conditions_on_policy_attributes_and_an_injected_not(backend):
    with_attribute_policies(backend)
    write(backend)
    write(backend, items={"vault": {"content": "the lisbon safe code", "type": "fact", "tags": ["secret"],
                                    "category": "work"}})
    backend.drain()
    stored = backend.store.get("acme", tuple(NS), "trip")
    assert stored.policy_attributes == {"namespace": "user", "sub": "alice", "area": "work",
                                        "labels": ["travel", "work"]}
    cases = [
        ({"area": "work"}, {"trip"}),  # vault is work too, but the injected not hides it
        ({"labels": {"contains": "travel"}}, {"trip", "hotel", "budget"}),
        ({"labels": {"any": ["food", "secret"]}}, {"diet"}),
        ({"area": {"exists": True}}, {"trip", "hotel"}),
        ({"area": {"exists": False}}, {"diet", "budget", "plain"}),  # decided on values, which have no area
        ({"area": {"not": {"in": ["work", "personal"]}}}, {"diet", "budget", "plain"}),
        ({"labels": {"not": {"contains": "travel"}}, "kind": "semantic"}, {"diet"}),
    ]
    for flt, keys in cases:
        assert search(backend, flt) == keys, flt
        assert search(backend, flt, query="lisbon") == keys, flt
        found = recall(backend, query="lisbon", namespace_prefix=NS, filter=flt)
        assert found <= keys and bool(found) == bool(keys), flt
    assert "vault" in search(backend, {"area": "work"}, caller=admin(), prefix=())  # the policy hid it


ISOLATION_FILTERS = [
    {"tags": {"contains": "travel"}},
    {"tags": {"not": {"contains": "nothing"}}},
    {"sub": {"not": {"eq": "alice"}}},
    {"sub": {"any": ["bob", "alice"]}},
    {"content": {"exists": True}},
    {"namespace": {"exists": True}, "category": {"not": {"exists": False}}},
]


def test_a_filter_never_reveals_another_users_items(written):
    write(written, caller=bob(), namespace=["user", "bob", "memories"])
    written.drain()
    for flt in ISOLATION_FILTERS:
        for prefix in ((), ("user",), ("user", "alice")):
            assert search(written, flt, prefix=prefix) <= set(ITEMS), flt
            for m in written.search.search(alice(), SearchQuery(namespace_prefix=list(prefix), filter=flt,
                                                                query="lisbon")):
                assert m.namespace[:2] == ("user", "alice"), (flt, m.namespace)
        recalled = written.app.services.recall.recall(alice(), RecallQuery(query="lisbon", filter=flt, min_score=0))
        assert all(r.memory.namespace[:2] == ("user", "alice") for r in recalled.memories), flt
    assert search(written, {"sub": {"not": {"eq": "alice"}}}, prefix=()) == set()
    admin_sees = written.search.search(admin(), SearchQuery(namespace_prefix=[], filter={"sub": {"not": {"eq": "alice"}}}))
    assert {m.namespace[1] for m in admin_sees} == {"bob"}


def test_type_conditions_in_the_filter_and_in_types_are_anded(written):
    flt = {"type": {"nin": ["note"]}}
    assert recall(written, query="lisbon", namespace_prefix=NS, filter=flt, types=["note"]) == set()
    assert recall(written, query="lisbon", namespace_prefix=NS, filter=flt, types=["note", "decision"]) == {"budget"}
    with pytest.raises(InvalidArgument) as exc:  # three nin on one path: the policy's flat JSON cannot say it
        recall(written, query="lisbon", namespace_prefix=NS, filter={"type": {"nin": ["x"], "$nin": ["y"]}},
               types=["fact"])
    assert exc.value.details == {"field": "filter", "key": "type"}
