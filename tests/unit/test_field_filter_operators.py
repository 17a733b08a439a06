"""How `contains`, `any`, `exists` and `not` are planned: which go to field tokens, which to the
plaintext policy attributes, which to the decrypted value."""

from __future__ import annotations

from memsvc.core.filters import parse_filter
from memsvc.service.field_filter import attribute_verdicts, plan_field_tokens


class _Sealer:
    def field_tokens(self, tenant, pairs, *, create):
        return [f"{path}={key}" for path, key in pairs]


class _Keywords:
    field_tokens_per_search = None

    def field_holders(self, tenant, prefix, tokens):
        return object()


def token_tests(flt: dict):
    return plan_field_tokens(_Sealer(), _Keywords(), "t", (), parse_filter(flt)).tests


def test_not_of_one_equality_is_decided_on_tokens_as_its_opposite():
    assert token_tests({"lang": {"not": {"eq": "en"}}}) == ((False, frozenset({"lang=sen"})),)
    assert token_tests({"lang": {"not": {"nin": ["en", "fr"]}}}) == ((True, frozenset({"lang=sen", "lang=sfr"})),)
    assert token_tests({"lang": {"ne": "en"}}) == token_tests({"lang": {"$not": {"$eq": "en"}}})


def test_what_tokens_cannot_say_is_left_to_the_value():
    # Elements are tokenized under their index (tags.0), not under the list's path; nothing says
    # whether a path is present; a not of two conditions is no single token test.
    assert token_tests({"tags": {"contains": "a"}, "x": {"any": ["a"]}, "y": {"exists": True},
                     "z": {"not": {"eq": 1, "ne": 2}}, "w": {"not": {"contains": "a"}}}) == (None,) * 5


def test_policy_attributes_decide_the_new_operators():
    attributes = {"namespace": "user", "sub": "alice", "labels": ["travel", "work"], "area": "work"}
    scope = parse_filter({"labels": {"not": {"contains": "secret"}}})
    user = parse_filter({"labels": {"any": ["work", "x"]}, "area": {"exists": True}, "kind": {"exists": False}})
    assert attribute_verdicts(scope, user, attributes) == (True, True, None)  # kind: the value's to decide
    assert attribute_verdicts(scope, parse_filter({"area": {"not": {"eq": "work"}}}), attributes) is None
    secret = {**attributes, "labels": ["secret"]}
    assert attribute_verdicts(scope, parse_filter({}), secret) is None
