"""Deciding a filter search's equality conditions on blind field tokens instead of decrypting.

`eq`, `in`, `ne` and `nin` on a value field (and a `not` of just one of them) are answered from
the keyword index's field tokens (`KeywordIndex.field_holders`) for every item whose current
version has its tokens written; the other conditions (ranges, equality with a list or an object,
which get no tokens: `core.field_tokens`; `exists`, which no token says; `contains` and `any`,
whose list elements are tokenized under their index, `tags.0`, not under the list's path) are
checked on the decrypted value of the items the tokens leave. An
item whose current version has no tokens yet (written since the indexer last ran, written while
keyword indexing was off, or with too many fields) is decided by decrypting it, as before, so
an answer never depends on how far the indexer has got.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from memsvc.core.field_tokens import decidable_path
from memsvc.core.filters import Filter, equality_key, lookup_in
from memsvc.core.models import ItemHead
from memsvc.ports import FieldHolders, KeywordIndex
from memsvc.service.sealing import Sealer

__all__ = ["FieldTokenPlan", "FilterDecider", "plan_field_tokens"]

_POSITIVE = {"eq": True, "in": True, "ne": False, "nin": False}


@dataclass(frozen=True)
class FieldTokenPlan:
    """`holders`: what the index says about the items under the searched prefix (None: nothing
    is decided on tokens); `tests`: per condition of the caller's filter, in order, whether it
    holds when the item has one of its tokens (`eq`, `in`, a `not` of `ne` or `nin`) or none (`ne`,
    `nin`, a `not` of `eq` or `in`), and those tokens; None for a condition that tokens do not
    decide (a range, `contains`, `any`, `exists`, any other `not`, a path they cannot name, or a
    list or object operand)."""

    holders: FieldHolders | None
    tests: tuple[tuple[bool, frozenset[str]] | None, ...]

    @staticmethod
    def without_tokens(user: Filter) -> FieldTokenPlan:
        """Every condition decided by decrypting (the tenant's keyword indexing is off)."""
        return FieldTokenPlan(None, tuple(None for _ in user.conditions))


def plan_field_tokens(sealer: Sealer, keywords: KeywordIndex, tenant: str, prefix: tuple[str, ...],
                      user: Filter) -> FieldTokenPlan:
    """The token tests of `user`'s conditions under `prefix`. O(size of `user`) before the index
    is asked: equality keys of scalar operands only."""
    wanted: list[tuple[bool, list[tuple[str, str]]] | None] = []
    budget = keywords.field_tokens_per_search  # tokens one search may look up; a condition past it is the values'
    counted: set[tuple[str, str]] = set()
    for c in user.conditions:
        op, operand, negated = c.op.removeprefix("$"), c.operand, False
        if op == "not" and len(operand) == 1:  # not eq is ne, not in is nin, and so on
            (op, operand), negated = operand[0], True
        operands = operand if op in ("in", "nin") else (operand,)
        composite = any(isinstance(x, (list, tuple, dict)) for x in operands)  # no tokens: field_tokens
        if op not in _POSITIVE or not decidable_path(c.path) or composite:
            wanted.append(None)
            continue
        # An operand equal to nothing (NaN) has no token: it matches no item's value.
        pairs = [(c.path, k) for x in operands if (k := equality_key(x)) is not None]
        if budget is not None and len(counted.union(pairs)) > budget:
            wanted.append(None)
            continue
        counted.update(pairs)
        wanted.append((_POSITIVE[op] != negated, pairs))
    if all(w is None for w in wanted):
        return FieldTokenPlan.without_tokens(user)
    pairs = list(dict.fromkeys(pair for w in wanted if w is not None for pair in w[1]))
    try:
        tokens = dict(zip(pairs, sealer.field_tokens(tenant, pairs, create=False)))
    except LookupError:  # a tenant without a data key has stored nothing
        return FieldTokenPlan.without_tokens(user)
    return FieldTokenPlan(keywords.field_holders(tenant, prefix, list(tokens.values())), tuple(
        None if w is None else (w[0], frozenset(tokens[pair] for pair in w[1])) for w in wanted))


def attribute_verdicts(scope: Filter, user: Filter, attributes: dict[str, Any]) -> tuple[bool | None, ...] | None:
    """How an item's plaintext policy attributes decide a search's filter: None when they reject
    the item (the filter-injection policy's `scope`, or a condition of the caller's `user` filter
    on one of them, fails); else, per condition of `user`, True when decided on them (passed) and
    None when it is the decrypted value's to decide (API.md)."""
    lookup = lookup_in(attributes)
    if not scope.matches(lookup):
        return None
    verdicts = tuple(Filter((c,)).matches(lookup) if c.path in attributes else None for c in user.conditions)
    return None if False in verdicts else verdicts


class FilterDecider:
    """Decides a filter search's items as far as their heads allow: on their plaintext policy
    attributes (`attribute_verdicts`), then equality conditions on field tokens where the item
    has them; `value_left` is what only its decrypted value can decide."""

    def __init__(self, scope: Filter, user: Filter, tokens: FieldTokenPlan) -> None:
        self._scope = scope
        self._user = user
        self._tokens = tokens
        # Items mostly share a few attribute dicts (the store hands each distinct one once): their
        # verdicts are worked out once per dict.
        self._by_attributes: dict[int, tuple[tuple[bool | None, ...] | None, dict[str, Any]]] = {}

    def value_left(self, head: ItemHead) -> Filter | None:
        """What is left to check on the item's decrypted value; None when it is rejected already."""
        verdicts = self._attribute_verdicts(head.policy_attributes)
        if verdicts is None:
            return None
        holders = self._tokens.holders
        has_tokens = holders is not None and holders.indexed(head.namespace, head.id)
        rest = []
        for c, on_attributes, test in zip(self._user.conditions, verdicts, self._tokens.tests):
            if on_attributes is not None:
                continue  # passed on the attributes (a failure rejected the whole dict's items)
            if has_tokens and test is not None:
                positive, tokens = test
                # In the item's own token count: a condition may list thousands (`in`, `nin`).
                if tokens.isdisjoint(holders.tokens_held(head.namespace, head.id)) == positive:
                    return None
            else:
                rest.append(c)
        return Filter(tuple(rest))

    def _attribute_verdicts(self, attributes: dict[str, Any]) -> tuple[bool | None, ...] | None:
        """Per condition: True when decided (passed) on the attributes, None when it is the value's
        to decide; None overall when the attributes reject the item."""
        cached = self._by_attributes.get(id(attributes))
        if cached is None:
            # Kept with the dict itself, so that its id is never reused for another while cached.
            verdicts = attribute_verdicts(self._scope, self._user, attributes)
            cached = self._by_attributes[id(attributes)] = (verdicts, attributes)
        return cached[0]
