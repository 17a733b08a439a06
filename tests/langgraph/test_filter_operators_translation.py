"""LangGraph filters with the agent operators reach the API as it parses them."""

from __future__ import annotations

import json
import math

from memsvc.core.filters import Filter, parse_filter
from memsvc_client.store import translate_filter


def test_agent_operators_pass_through_and_non_finite_operands_inside_not_are_encoded():
    sent = translate_filter({"tags": {"$contains": "travel"}, "meta": {"kind": {"$any": ["episodic"]}},
                             "category": {"$exists": True}, "price": {"$not": {"$lt": math.inf, "$gt": 3}}})
    assert sent == {"tags": {"$contains": "travel"}, "meta.kind": {"$any": ["episodic"]},
                    "category": {"$exists": True},
                    "price": {"$not": {"$lt": {"$numberDouble": "Infinity"}, "$gt": 3}}}
    parsed = parse_filter(json.loads(json.dumps(sent, allow_nan=False)))
    assert [c.op for c in parsed.conditions] == ["contains", "any", "exists", "not"]
    price = Filter(parsed.conditions[3:])
    assert price.matches(lambda path: (True, 2)) and not price.matches(lambda path: (True, 5))


def test_the_client_sends_a_recall_filter():
    from memsvc_client.client import recall_body

    body = recall_body("lisbon", filter={"tags": {"contains": "travel"}}, types=["fact"])
    assert body["filter"] == {"tags": {"contains": "travel"}} and body["types"] == ["fact"]
