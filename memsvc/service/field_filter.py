"""Deciding a filter search's equality conditions on blind field tokens instead of decrypting.

`eq`, `in`, `ne` and `nin` on a value field are answered from the keyword index's field tokens
(`KeywordIndex.field_holders`) for every item whose current version has its tokens written; the
other conditions (ranges) are checked on the decrypted value of the items the tokens leave. An
item whose current version has no tokens yet (written since the indexer last ran, written while
keyword indexing was off, or with too many fields) is decided by decrypting it, as before, so
an answer never depends on how far the indexer has got.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from memsvc.core.field_tokens import decidable_path
from memsvc.core.filters import Filter, equality_key, lookup_in
from memsvc.core.models import StoredItem
from memsvc.ports import KeywordIndex
from memsvc.service.sealing import Sealer

__all__ = ["FieldTokenPlan", "plan_field_tokens", "value_left"]

_POSITIVE = {"eq": True, "in": True, "ne": False, "nin": False}


@dataclass(frozen=True)
class FieldTokenPlan:
    """`indexed`: the memory versions under the searched prefix that have field tokens; `tests`:
    per condition of the caller's filter, in order, a test of a memory id, or None for a condition
    that tokens do not decide (a range, or a path they cannot name)."""

    indexed: frozenset[str]
    tests: tuple[Callable[[str], bool] | None, ...]


def plan_field_tokens(sealer: Sealer, keywords: KeywordIndex, tenant: str, prefix: tuple[str, ...],
                      user: Filter) -> FieldTokenPlan | None:
    """The token tests of `user`'s conditions under `prefix`; None when tokens decide none of them."""
    wanted: list[tuple[str, list[tuple[str, str]]] | None] = []
    for c in user.conditions:
        op = c.op.removeprefix("$")
        if op not in _POSITIVE or not decidable_path(c.path):
            wanted.append(None)
            continue
        operands = c.operand if op in ("in", "nin") else (c.operand,)
        # An operand equal to nothing (NaN) has no token: it matches no item's value.
        wanted.append((op, [(c.path, k) for x in operands if (k := equality_key(x)) is not None]))
    if all(w is None for w in wanted):
        return None
    pairs = list(dict.fromkeys(pair for w in wanted if w is not None for pair in w[1]))
    try:
        tokens = dict(zip(pairs, sealer.field_tokens(tenant, pairs, create=False)))
    except LookupError:  # a tenant without a data key has stored nothing
        return FieldTokenPlan(frozenset(), tuple(None for _ in wanted))
    found = keywords.field_holders(tenant, prefix, list(tokens.values()))
    return FieldTokenPlan(found.indexed, tuple(
        None if w is None else _test(_POSITIVE[w[0]], [found.holders[tokens[pair]] for pair in w[1]])
        for w in wanted))


def value_left(plan: FieldTokenPlan, scope: Filter, user: Filter, item: StoredItem) -> Filter | None:
    """What is left to check on the item's decrypted value, or None when it is rejected already:
    by its plaintext policy attributes (`scope`, and a condition whose path is one of them, as
    `FilterPlan.value_condition` decides) or by its field tokens."""
    attributes = lookup_in(item.policy_attributes)
    if not scope.matches(attributes):
        return None
    has_tokens = item.id in plan.indexed
    rest = []
    for c, test in zip(user.conditions, plan.tests):
        if c.path in item.policy_attributes:
            if not Filter((c,)).matches(attributes):
                return None
        elif has_tokens and test is not None:
            if not test(item.id):
                return None
        else:
            rest.append(c)
    return Filter(tuple(rest))


def _test(positive: bool, holder_sets: Sequence[frozenset[str]]) -> Callable[[str], bool]:
    holders = frozenset().union(*holder_sets)
    return holders.__contains__ if positive else (lambda memory_id: memory_id not in holders)
