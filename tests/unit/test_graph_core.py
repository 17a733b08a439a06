"""The knowledge graph's pure parts: name normalisation, the type vocabulary, the bounded BFS, and
the local pattern extractor (what it finds, and what it must not)."""

from __future__ import annotations

import pytest

from memsvc.adapters.local.pattern_extractor import PatternExtractor
from memsvc.core.crypto import entity_ids
from memsvc.core.errors import InvalidArgument
from memsvc.core.graph import (MAX_ENTITIES_PER_MEMORY, MAX_RELATIONS_PER_MEMORY, GraphEdge, ValidAt, entity_type,
                               normalise_name, reach, relation_type, shortest_path)


class TestNames:
    @pytest.mark.parametrize("spelling", ["Project A", "project a", "PROJECT  A", " the Project\u00a0A ",
                                          "The project a", "Ｐｒｏｊｅｃｔ Ａ"])
    def test_spellings_of_one_name_normalise_alike(self, spelling):
        assert normalise_name(spelling) == "project a"

    def test_the_is_dropped_only_as_a_leading_word(self):
        assert normalise_name("Theo Smith") == "theo smith"
        assert normalise_name("Bank of the West") == "bank of the west"

    @pytest.mark.parametrize("bad", ["", "   ", "\t\n", "x" * 201, None])
    def test_empty_overlong_or_non_string_names_are_refused(self, bad):
        with pytest.raises(InvalidArgument):
            normalise_name(bad)

    def test_ids_are_keyed_per_tenant_and_never_the_name(self):
        one, other = entity_ids(b"k" * 32, ["project a"]), entity_ids(b"j" * 32, ["project a"])
        assert one != other and len(one[0]) == 32 and "project" not in one[0]
        assert entity_ids(b"k" * 32, ["project a"]) == one

    def test_types_outside_the_vocabulary_fall_back(self):
        assert (entity_type("person"), entity_type("Spaceship"), entity_type(None)) == ("PERSON", "CONCEPT", "CONCEPT")
        assert (relation_type("caused by"), relation_type("LOVES")) == ("CAUSED_BY", "RELATES_TO")


def _graph(*pairs):
    edges = [GraphEdge("t", ("n",), a, "RELATES_TO", b, "k", "m") for a, b in pairs]
    calls = []

    def expand(ids):
        calls.append(sorted(ids))
        wanted = set(ids)
        return [e for e in edges if e.source_id in wanted or e.target_id in wanted]

    return expand, calls


class TestTraversal:
    def test_reach_is_breadth_first_both_ways_one_expand_per_hop(self):
        expand, calls = _graph(("a", "b"), ("c", "b"), ("c", "d"), ("d", "e"))
        found = reach(["a"], expand, max_hops=2, max_nodes=100)
        assert found.hops == {"a": 0, "b": 1, "c": 2} and not found.truncated
        assert calls == [["a"], ["b"]]

    def test_reach_stops_at_the_node_limit_and_says_so(self):
        expand, _ = _graph(("a", "b"), ("a", "c"), ("a", "d"), ("b", "e"))
        found = reach(["a"], expand, max_hops=5, max_nodes=3)
        assert found.hops == {"a": 0, "b": 1, "c": 1} and found.truncated  # cut in id order

    def test_shortest_path_prefers_fewest_edges_then_smallest_ids(self):
        expand, calls = _graph(("a", "x"), ("x", "z"), ("a", "b"), ("b", "z"), ("a", "c"), ("c", "d"), ("d", "z"))
        result = shortest_path(["a"], ["z"], expand, max_hops=4, max_nodes=100)
        assert result.path.entity_ids == ("a", "b", "z") and result.depth == 2
        assert len(calls) == 2

    def test_two_ends_one_hop_from_a_hub_meet_there_without_reading_the_hub(self):
        expand, calls = _graph(("a", "hub"), ("z", "hub"), *((f"spoke{n:03}", "hub") for n in range(500)))
        result = shortest_path(["a"], ["z"], expand, max_hops=6, max_nodes=100)
        assert result.path.entity_ids == ("a", "hub", "z") and not result.truncated
        assert calls == [["a"], ["z"]]  # with equal frontiers the shallower side goes: never "hub"

    def test_shortest_path_within_the_limits_or_truncated(self):
        expand, _ = _graph(("a", "b"), ("b", "c"), ("c", "d"))
        assert shortest_path(["a"], ["d"], expand, max_hops=2, max_nodes=100).truncated
        assert shortest_path(["a"], ["d"], expand, max_hops=3, max_nodes=2).truncated
        assert shortest_path(["a"], ["d"], expand, max_hops=3, max_nodes=100).path.entity_ids == ("a", "b", "c", "d")
        isolated = shortest_path(["a"], ["q"], expand, max_hops=6, max_nodes=100)
        assert isolated.path is None and not isolated.truncated

    def test_a_shared_entity_is_a_path_of_no_edges(self):
        expand, calls = _graph(("a", "b"))
        result = shortest_path(["a", "b"], ["b"], expand, max_hops=3, max_nodes=10)
        assert result.path.entity_ids == ("b",) and result.path.steps == () and calls == []

    def test_every_edge_between_two_steps_is_kept(self):
        edges = [GraphEdge("t", ("n",), "a", "WORKS_ON", "b", "k1", "m1"),
                 GraphEdge("t", ("n",), "b", "RELATES_TO", "a", "k2", "m2")]
        result = shortest_path(["a"], ["b"], lambda ids: edges, max_hops=1, max_nodes=10)
        assert [e.key for e in result.path.steps[0].edges] == ["k1", "k2"]


class TestPatternExtractor:
    x = PatternExtractor()

    def test_the_seed_example(self):
        found = self.x.extract("Alice works on Project A. Project A caused the memory leak.")
        assert found.entities == (("Alice", "PERSON"), ("Project A", "PROJECT"), ("memory leak", "CONCEPT"))
        assert found.relations == (("Alice", "Project A", "WORKS_ON"), ("memory leak", "Project A", "CAUSED_BY"))

    @pytest.mark.parametrize("text, relation", [
        ("The outage was caused by INC-7.", ("outage", "INC-7", "CAUSED_BY")),
        ("INC-7 caused the outage.", ("outage", "INC-7", "CAUSED_BY")),
        ("Billing Service depends on Kafka.", ("Billing Service", "Kafka", "DEPENDS_ON")),
        ("Bob Stone reports to Carol Diaz.", ("Bob Stone", "Carol Diaz", "REPORTS_TO")),
        ("PROJ-9 is blocked by INC-3.", ("INC-3", "PROJ-9", "BLOCKS")),
        ("INC-3 was fixed by Dana Ruiz.", ("Dana Ruiz", "INC-3", "FIXES")),
        ("Eve joined Team Rocket.", ("Eve", "Team Rocket", "MEMBER_OF")),
    ])
    def test_relation_patterns(self, text, relation):
        assert relation in self.x.extract(text).relations

    def test_names_of_one_sentence_relate_and_codes_are_tickets(self):
        found = self.x.extract("During the review Grace Hopper mentioned OPS-12 and Acme Labs.")
        assert dict(found.entities) == {"Grace Hopper": "CONCEPT", "OPS-12": "TICKET", "Acme Labs": "ORGANIZATION"}
        assert ("Grace Hopper", "OPS-12", "RELATES_TO") in found.relations

    @pytest.mark.parametrize("text", [
        "Deploy failed yesterday.",  # a capitalised first word alone is not a name
        "Write to alice.smith@example.com or see https://Example.org/Docs.",
        "we met on Monday and then In March.",
        "python uses indentation for blocks",
        "",
    ])
    def test_what_it_must_not_find(self, text):
        assert self.x.extract(text).entities == ()

    def test_sentences_do_not_relate_across(self):
        found = self.x.extract("Grace Hopper wrote code. Alan Turing broke codes.")
        assert found.relations == ()

    def test_bounded_per_memory_and_deterministic(self):
        text = " ".join(f"Person{i} Name met Person{i + 1} Name." for i in range(40))
        found = self.x.extract(text)
        assert len(found.entities) == MAX_ENTITIES_PER_MEMORY and len(found.relations) <= MAX_RELATIONS_PER_MEMORY
        assert self.x.extract(text) == found


class TestValidAt:
    """Which edges a traversal walks (issue 25): half-open intervals, an open end either side."""

    EDGE = GraphEdge("acme", ("n",), "a", "USES", "b", valid_from="2020-01-01T00:00:00.000000Z",
                     valid_to="2023-01-01T00:00:00.000000Z")

    @pytest.mark.parametrize(("at", "started", "walked"), [
        ("2019-12-31T23:59:59.999999Z", True, False),
        ("2020-01-01T00:00:00.000000Z", True, True),  # from valid_from on
        ("2022-12-31T23:59:59.999999Z", True, True),
        ("2023-01-01T00:00:00.000000Z", True, False),  # valid_to is out
        ("2019-01-01T00:00:00.000000Z", False, True),  # current facts: only an ended edge is left out
        ("2023-01-01T00:00:00.000000Z", False, False),
    ])
    def test_an_edge_is_walked_inside_its_interval(self, at, started, walked):
        assert ValidAt(at, started).admits(self.EDGE) is walked

    def test_an_edge_without_times_is_walked_at_every_time(self):
        edge = GraphEdge("acme", ("n",), "a", "USES", "b")
        assert all(ValidAt(at, s).admits(edge) for at in ("0001-01-01T00:00:00.000000Z", "9999-12-31T00:00:00.000000Z")
                   for s in (True, False))
