"""`contains`, `any`, `exists` and `not` pushed down to S3 Vectors (on moto, with the QueryVectors
fake): a pushed clause never drops a vector whose policy attributes the service would admit, and
what S3 Vectors cannot evaluate as the service does stays with the service."""

from __future__ import annotations

import pytest

from memsvc.adapters.aws.s3vectors_index import build_filter
from memsvc.core.filters import Filter, lookup_in, parse_filter
from tests.aws.test_s3vectors_index import aws, e, put  # noqa: F401  (aws is a fixture)

ATTRS = {
    "m1": {"tags": ["a", "b"], "area": "work", "n": 1},
    "m2": {"tags": ["c"], "area": None, "n": 2},  # null is present to the service, absent in S3 Vectors
    "m3": {"tags": [], "n": 3},  # so is []
    "m4": {"tags": "a", "area": "home"},  # a scalar counts as a list of one
}


@pytest.fixture
def attributed(aws):  # noqa: F811
    for i, (memory_id, attrs) in enumerate(ATTRS.items()):
        put(aws, key=memory_id, memory_id=memory_id, attrs=attrs, vectors=[("text", e(0, i + 1))])
    return aws


def service_admits(flt: dict) -> set[str]:
    parsed = parse_filter(flt)
    return {m for m, attrs in ATTRS.items() if parsed.matches(lookup_in(attrs))}


@pytest.mark.parametrize(
    "flt, pushed",
    [
        ({"tags": {"contains": "a"}}, [{"pa.tags": {"$eq": "a"}}]),
        ({"tags": {"$contains": "c"}}, [{"pa.tags": {"$eq": "c"}}]),
        ({"tags": {"any": ["b", "c"]}}, [{"$or": [{"pa.tags": {"$eq": "b"}}, {"pa.tags": {"$eq": "c"}}]}]),
        ({"n": {"any": [1, 3.0]}}, [{"$or": [{"pa.n": {"$eq": 1}}, {"pa.n": {"$eq": 3.0}}]}]),
        ({"area": {"exists": False}}, [{"pa.area": {"$exists": False}}]),
    ],
)
def test_pushed_clauses_are_exact_or_looser(attributed, flt, pushed):
    hits = {h.memory_id for h in attributed.index.query("acme", (), parse_filter(flt), e(0), 10)}
    assert attributed.fake.queries[-1]["filter"]["$and"][1:] == pushed
    assert hits >= service_admits(flt)
    if "exists" not in flt.get("area", {}):
        assert hits == service_admits(flt)  # contains and any are exact


def test_exists_false_on_a_null_attribute_is_looser_and_the_service_decides():
    assert service_admits({"area": {"exists": False}}) == {"m3"}


@pytest.mark.parametrize(
    "flt",
    [
        {"area": {"exists": True}},  # would drop m2 and m3, whose null and [] S3 Vectors does not hold
        {"tags": {"not": {"contains": "a"}}},  # S3 Vectors has no not
        {"tags": {"any": []}},
        {"tags": {"any": ["a", ["b"]]}},
        {"tags": {"contains": ["a", "b"]}},
        {"tags": {"contains": "2024-05-01"}},  # a timestamp: an instant to the service, text to S3 Vectors
        {"meta.tags": {"contains": "a"}},
        {"tags": {"any": [f"t{i}" for i in range(51)]}},  # the filter stays small
    ],
)
def test_what_s3_vectors_would_decide_differently_stays_with_the_service(attributed, flt):
    assert build_filter("acme", (), parse_filter(flt)) == build_filter("acme", (), Filter())
    hits = {h.memory_id for h in attributed.index.query("acme", (), parse_filter(flt), e(0), 10)}
    assert hits == set(ATTRS)
