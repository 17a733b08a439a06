"""Recursive Rego is refused at compile (`policy._refuse_recursion`), through a reference to a
whole package as to one rule, in work that grows with the bundle, not with rules x rules."""

from __future__ import annotations

import tracemalloc

import pytest

from memsvc.core import policy
from memsvc.core.errors import InvalidArgument


def _rules(package: str, rules: str) -> dict[str, str]:
    return {f"{package}.rego": f"package {package}\n\n{rules}"}


def _bundle(extra: dict[str, str]) -> dict[str, str]:
    return {**policy.default_bundle(), **extra}


@pytest.mark.parametrize("extra,cycle", [
    (_rules("p", "r := count(data.p)\n"), {"data.p.r"}),
    ({**_rules("p", "a := data.q\n"), **_rules("q", "b := data.p.a\n")}, {"data.p.a", "data.q.b"}),
    (_rules("p", 'r := data["p"][input.x]\n'), {"data.p.r"}),
])
def test_a_rule_reaching_itself_through_a_package_is_refused_by_name(extra, cycle):
    with pytest.raises(InvalidArgument) as refused:
        policy.compile_bundle(_bundle(extra))
    assert refused.value.details["rule"] in cycle  # whichever the search met first: each reaches itself
    assert "reaches itself" in str(refused.value)


def test_rules_reaching_a_package_without_a_way_back_are_taken():
    extra = {**_rules("q", "a := 1\n\nb := 2\n"), **_rules("p", "x := data.q\n\ny := count(data.q) + count(x)\n")}
    assert policy.compile_bundle(_bundle(extra)).bundle.policies == _bundle(extra)


def test_many_rules_each_reaching_a_package_of_many_rules_stay_small():
    # Each of 2,000 rules used to get an edge to each of the other package's 2,000: 265 MB.
    many = 2000
    extra = {**_rules("q", "".join(f"a{i} := {i}\n" for i in range(many))),
             **_rules("p", "".join(f"b{i} := data.q\n" for i in range(many)))}
    tracemalloc.start()
    try:
        policy.compile_bundle(_bundle(extra))
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 60_000_000, f"{peak} bytes at peak"
