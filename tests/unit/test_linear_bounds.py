"""Work on client input is linear in its size (../shared/design/ARCHITECTURE.md, "Bounded work"; issue 22): the
parsers, the keyword analyzer, the filter planner, equality keys, field tokens, PII patterns and
the local extractor, fed the largest and deepest inputs the API's limits allow.

Sizes and step counts are asserted, never time: a quadratic pattern shows as a test that does
not finish (a 200,000-character word took the old analyzer minutes)."""

from __future__ import annotations

import json
import tracemalloc
import unicodedata
from typing import Any

import pytest
from hypothesis import HealthCheck, assume, example, given, settings
from hypothesis import strategies as st

from memsvc.adapters.local.pattern_extractor import PatternExtractor
from memsvc.core import field_tokens, filters, keywords, pii, unicode_text
from memsvc.core import paths as paths_module
from memsvc.core.crypto import field_tokens as hash_field_tokens
from memsvc.core.errors import InvalidArgument
from memsvc.core.field_tokens import MAX_FIELD_PATH_CHARS, MAX_FIELD_TOKENS, value_fields
from memsvc.core.filters import Filter, condition_matches, equality_key, parse_filter
from memsvc.core.graph import MAX_ENTITIES_PER_MEMORY, MAX_RELATIONS_PER_MEMORY, normalise_name
from memsvc.core.keywords import MAX_TERM_LENGTH, analyze
from memsvc.core.models import ItemHead
from memsvc.core.paths import extract_texts, validate_index_fields
from memsvc.core.unicode_text import MAX_NON_STARTERS, normalize
from memsvc.service.field_filter import FieldTokenPlan, FilterDecider, plan_field_tokens
from memsvc.service.graph_indexer import MAX_EXTRACTED_CHARS
from memsvc.service.memories import MAX_NESTING, check_nesting
from memsvc.service.recall import RecallQuery
from memsvc.service.search import MAX_QUERY_CHARS, SearchQuery

# Derandomized and without an example database: every run, CI's included, tries the same inputs.
FAST = settings(max_examples=60, deadline=None, derandomize=True, database=None,
                suppress_health_check=[HealthCheck.too_slow])
# A float's exact fraction has up to 324 digits a part (5e-324 is 1/2^1074): keys may spend that
# much on each number, a constant per scalar.
PER_SCALAR = 700

SCALARS = (st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False)
           | st.text(max_size=12) | st.sampled_from(["2024-05-01", "2024-05-01T02:00:00+02:00", "x" * 40]))
VALUES = st.recursive(SCALARS, lambda inner: st.lists(inner, max_size=4)
                      | st.dictionaries(st.text(max_size=6), inner, max_size=4), max_leaves=40)
# Texts made of what the patterns care about: word characters, the separators that join them,
# digits, PII punctuation, combining marks.
TEXT = st.text(alphabet="aAb1_0-./:@+%() \n'\u0301\u0316é", max_size=400)


def nested(depth: int, kinds: list[bool], leaf: Any, name: str = "a") -> Any:
    """`leaf` inside `depth` levels, each an object (`{name: ...}`) or a list as `kinds` says."""
    for level in range(depth):
        leaf = {name: leaf} if kinds[level % len(kinds)] else [leaf]
    return leaf


def nodes(x: Any) -> tuple[int, int]:
    """(containers, scalars) in `x`."""
    if isinstance(x, dict | list):
        children = [nodes(c) for c in (x.values() if isinstance(x, dict) else x)]
        return 1 + sum(c for c, _ in children), sum(s for _, s in children)
    return 0, 1


def size(x: Any) -> int:
    return len(json.dumps(x, ensure_ascii=False))


def counting(monkeypatch, module: Any, name: str) -> list[int]:
    """Counts calls of `module.name`, recursive ones included (they look the name up again)."""
    calls = [0]
    real = getattr(module, name)

    def counted(*args: Any, **kwargs: Any) -> Any:
        calls[0] += 1
        return real(*args, **kwargs)

    monkeypatch.setattr(module, name, counted)
    return calls


def deepest(levels: int) -> st.SearchStrategy[Any]:
    """Values nested up to `levels` deep."""
    return st.builds(nested, st.integers(1, levels), st.lists(st.booleans(), min_size=1, max_size=4), SCALARS,
                     st.text(min_size=1, max_size=8))


# What a filter's (or a value's) own object leaves for an operand (or a field).
DEEPEST = deepest(MAX_NESTING - 1)


def test_the_deep_inputs_are_the_deepest_the_api_takes():
    # A filter's (or a value's) own object is the first level; an operand has the others.
    check_nesting({"a": nested(MAX_NESTING - 1, [True, False], 1)}, "filter")
    with pytest.raises(InvalidArgument):
        check_nesting({"a": nested(MAX_NESTING, [True, False], 1)}, "filter")


class TestEqualityKeys:
    @FAST
    @given(VALUES | DEEPEST)
    def test_a_key_is_linear_in_the_value_and_built_in_one_visit_per_node(self, x):
        with pytest.MonkeyPatch.context() as mp:
            visits = counting(mp, filters, "_append_composite_key")
            key = equality_key(x)
        containers, scalars = nodes(x)
        assert visits[0] == (containers + scalars if containers else 0)
        assert key is not None and len(key) <= 3 * size(x) + PER_SCALAR * scalars

    @FAST
    @given(VALUES, VALUES)
    def test_keys_are_equal_exactly_when_eq_says_so(self, a, b):
        assert (equality_key(a) == equality_key(b)) == condition_matches(True, a, "eq", b)
        assert equality_key(a) == equality_key(json.loads(json.dumps(a)))  # lists and tuples alike

    def test_a_filter_operand_nested_to_the_limit_has_a_short_key(self):
        # Issue 22: 31 levels made a key of 2^31 characters (each level escaped the one below).
        operand = nested(MAX_NESTING - 1, [True, False], "leaf")
        assert len(equality_key(operand)) < 10 * size(operand)


class _Sealer:
    def __init__(self) -> None:
        self.pairs: list[tuple[str, str]] = []

    def field_tokens(self, tenant: str, pairs: list[tuple[str, str]], *, create: bool) -> list[str]:
        self.pairs += pairs
        return [f"t{i}" for i in range(len(pairs))]


class _Keywords:
    field_tokens_per_search = None

    def field_holders(self, tenant: str, prefix: tuple[str, ...], tokens: list[str]) -> object:
        return object()


# An operand in an operator object ({"in": [...]}, {"$ne": ...}) has one or two levels less.
FILTERS = st.dictionaries(
    st.text(alphabet="ab.0", min_size=1, max_size=6).filter(lambda p: "" not in p.split(".")),
    st.one_of(SCALARS, VALUES, DEEPEST,
              st.fixed_dictionaries({"in": st.lists(SCALARS | VALUES | deepest(MAX_NESTING - 3), max_size=4)}),
              st.fixed_dictionaries({"$ne": SCALARS | VALUES | deepest(MAX_NESTING - 2)})),
    max_size=8)


class TestFilterPlanner:
    @FAST
    @given(FILTERS)
    def test_tokens_asked_for_are_linear_in_the_filter_and_only_for_scalars(self, raw):
        try:
            check_nesting(raw, "filter")
            user = parse_filter(raw)
        except InvalidArgument:
            # The API refuses it: nested deeper than the limit, or a value that reads as an
            # operator object but is none ({"in": 1}, {"": ...} beside one).
            assume(False)
        sealer = _Sealer()
        plan = plan_field_tokens(sealer, _Keywords(), "t", (), user)
        asked = sum(len(path) + len(key) for path, key in sealer.pairs)
        assert asked <= 3 * size(raw) + PER_SCALAR * sum(nodes(v)[1] for v in raw.values())
        for condition, test in zip(user.conditions, plan.tests):
            operands = condition.operand if condition.op in ("in", "nin") else (condition.operand,)
            if any(isinstance(x, list | tuple | dict) for x in operands):
                assert test is None  # decided by decrypting: no tokens of lists and objects

    def test_an_item_costs_a_condition_its_own_tokens_not_the_conditions_list(self):
        """A filter may list 10,000 values under `in`/`nin`; deciding an item on its
        tokens looked at each of them (every item of a search: items x values, seconds for 2,000
        items). It looks at the item's own tokens, once."""

        class Held(tuple):
            looked_at = 0

            def __iter__(self):
                for token in super().__iter__():
                    Held.looked_at += 1
                    yield token

        class Holders:
            def indexed(self, namespace, memory_id):
                return True

            def tokens_held(self, namespace, memory_id):
                return Held(("t-own-1", "t-own-2"))

        user = parse_filter({"colour": {"in": [f"c{n}" for n in range(5000)]},
                             "size": {"nin": [f"s{n}" for n in range(5000)]}})
        sealer = _Sealer()
        plan = plan_field_tokens(sealer, _Keywords(), "t", (), user)
        decider = FilterDecider(Filter(), user, FieldTokenPlan(Holders(), plan.tests))
        heads = [ItemHead(f"m{n}", ("user", "a"), f"k{n}", {}) for n in range(100)]
        assert [decider.value_left(head) for head in heads] == [None] * 100  # no item holds a colour
        assert Held.looked_at <= 2 * 100

    def test_a_filter_nested_to_the_limit_is_planned(self):
        # Issue 22: {"a": {"a": ... 30 deep ... 1}} pinned a core, then took the server down.
        raw = {"a": nested(MAX_NESTING - 1, [True], 1)}
        check_nesting(raw, "filter")
        sealer = _Sealer()
        plan = plan_field_tokens(sealer, _Keywords(), "t", (), parse_filter(raw))
        assert plan.tests == (None,) and sealer.pairs == []


class TestFieldTokens:
    @FAST
    @given(st.dictionaries(st.text(max_size=6), VALUES | DEEPEST, max_size=6))
    def test_tokens_are_linear_in_the_value(self, value):
        with pytest.MonkeyPatch.context() as mp:
            keys = counting(mp, field_tokens, "equality_key")
            walks = counting(mp, field_tokens, "_walk")
            fields = value_fields(value)
        containers, scalars = nodes(value)
        assert keys[0] <= scalars and walks[0] <= containers
        if fields is not None:
            assert len(fields) <= MAX_FIELD_TOKENS
            assert all(len(path) <= MAX_FIELD_PATH_CHARS for path, _ in fields)
            assert sum(len(key) for _, key in fields) <= 3 * size(value) + PER_SCALAR * scalars

    def test_a_value_nested_to_the_limit_gets_its_tokens(self):
        # Issue 22: one PUT nested 28 deep held the indexer past 2.3 GB; 30 deep, the OOM killer.
        value = {"k": nested(MAX_NESTING - 1, [True, False], "leaf", name="k")}
        check_nesting(value, "value")
        fields = value_fields(value)
        assert [key for _, key in fields] == [equality_key("leaf")]
        assert len(hash_field_tokens(b"\x01" * 32, fields)) == 1

    def test_a_value_of_long_keys_makes_short_tokens(self):
        value = {"k" * 100_000: list(range(MAX_FIELD_TOKENS))}
        assert value_fields(value) == []  # every path is too long to be decided by tokens


class TestAnalyzer:
    @FAST
    @given(TEXT | st.text(max_size=400))
    @example("¼")  # one character, two terms
    def test_terms_are_at_most_one_per_normalised_character_and_the_compounds_one_pass_over_the_words(self, text):
        with pytest.MonkeyPatch.context() as mp:
            seen: list[int] = []
            real = keywords._compounds
            mp.setattr(keywords, "_compounds", lambda folded, words: seen.append(len(words)) or real(folded, words))
            terms = analyze(text)
        # NFKC and case folding may lengthen a text (`¼` is `1⁄4`), by a constant factor at most.
        folded = normalize("NFKC", text).casefold()
        assert len(terms) <= max(1, len(folded)) and all(len(t) <= MAX_TERM_LENGTH for t in terms)
        assert seen == [sum(1 for _ in keywords._WORD.finditer(folded))]

    @pytest.mark.parametrize("text", ["x" * 200_000, "a-" * 100_000, "a_" * 100_000, "-" * 200_000,
                                      "1." * 100_000, "é" + "\u0301" * 100_000 + "\u0316" * 100_000])
    def test_a_long_word_or_run_is_analyzed(self, text):
        # Issue 22: the compound pattern backtracked over a long word (50,000 characters: 28 s).
        assert len(analyze(text)) <= len(text) // 2 + 1

    def test_queries_are_cut_before_anything_reads_them(self):
        query = "x" * 200_000
        assert len(SearchQuery.parse({"namespace_prefix": [], "query": query}).query) == MAX_QUERY_CHARS
        assert len(RecallQuery.parse({"query": query}).query) == MAX_QUERY_CHARS


class TestNormalization:
    @FAST
    @given(st.text(max_size=10))
    def test_short_text_normalizes_as_unicodedata_does(self, text):
        # At most 3 non-starters come of one character, so no run here is cut.
        for form in ("NFC", "NFKC"):
            assert normalize(form, text) == unicodedata.normalize(form, text)

    @FAST
    @given(st.text(alphabet="a\u0301\u0316\u0344\uff9e\u0f73\u0334 ", max_size=300) | st.text(max_size=300))
    def test_the_stream_safe_pass_looks_at_each_character_once(self, text):
        with pytest.MonkeyPatch.context() as mp:
            looks = counting(mp, unicode_text, "_non_starters")
            out = normalize("NFKC", text)
        assert looks[0] <= len(text)
        assert len(out) <= 18 * len(text) + len(text) // MAX_NON_STARTERS  # U+FDFA is 18 characters in NFKC

    @pytest.mark.parametrize("marks", ["\u0301" * 100_000 + "\u0316" * 100_000, "\uff9e" * 100_000 + "\u0334" * 100_000])
    def test_a_long_run_of_marks_out_of_order_is_normalized(self, marks):
        # CPython sorts a run with an insertion sort: 20,000 marks took 6 s. Cut into runs of 30.
        assert len(normalize("NFKC", "a" + marks)) <= 2 * len(marks)
        with pytest.raises(Exception, match="at most"):
            normalise_name("a" + marks)  # too long, found without the quadratic sort


class TestPii:
    @FAST
    @given(TEXT)
    def test_each_pattern_finds_at_most_one_match_per_character(self, text):
        with pytest.MonkeyPatch.context() as mp:
            found = [0]
            mp.setattr(pii, "PATTERNS", tuple(
                (kind, pattern, lambda m, sub=sub: found.__setitem__(0, found[0] + 1) or sub(m))
                for kind, pattern, sub in pii.PATTERNS))
            out = pii.redact(text)
        assert found[0] <= len(pii.PATTERNS) * len(text)
        assert len(out) <= len(text) + 16 * found[0]

    @pytest.mark.parametrize("text", ["1" * 100_000, "1 " * 50_000, "+1 " * 30_000, "1-" * 50_000, "%x" * 50_000,
                                      "a." * 50_000 + "@", "a@" * 50_000, "::" * 50_000 + "g", "a:" * 50_000 + "g",
                                      "DE12" * 25_000, "1." * 50_000, "(555) " * 20_000])
    def test_long_runs_are_redacted(self, text):
        pii.redact(text)


class TestExtractor:
    @pytest.mark.parametrize("text", ["A" * MAX_EXTRACTED_CHARS, "A'" * (MAX_EXTRACTED_CHARS // 2),
                                      "A-a" * (MAX_EXTRACTED_CHARS // 3), "a." * (MAX_EXTRACTED_CHARS // 2),
                                      "The a " * (MAX_EXTRACTED_CHARS // 6), "x@" * (MAX_EXTRACTED_CHARS // 2),
                                      "".join(f"N{i} works on P{i}, " for i in range(MAX_EXTRACTED_CHARS // 20)),
                                      " ".join(f"Name{i}" for i in range(MAX_EXTRACTED_CHARS // 8))])
    def test_worst_texts_are_extracted_within_the_caps(self, text):
        found = PatternExtractor().extract(text)
        assert len(found.entities) <= MAX_ENTITIES_PER_MEMORY and len(found.relations) <= MAX_RELATIONS_PER_MEMORY

    def test_a_sentence_of_many_names_allocates_linear_memory(self):
        # Names of one sentence relate pairwise: 1,600 names made 1.3 million pairs (100 MB) of which
        # only those between the first 16 entities could be kept.
        text = ", ".join(f"N{i}" for i in range(1600))[:MAX_EXTRACTED_CHARS]
        extractor = PatternExtractor()
        extractor.extract("Alice works on Apollo")  # the patterns' own allocations are done
        tracemalloc.start()
        try:
            found = extractor.extract(text)
            peak = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
        assert peak < 100 * len(text)
        assert len(found.relations) == MAX_RELATIONS_PER_MEMORY


class TestPaths:
    @FAST
    @given(st.lists(st.text(alphabet="ab.[]*-0123456789", min_size=1, max_size=40), min_size=1, max_size=8),
           VALUES | DEEPEST)
    def test_extraction_is_linear_in_paths_and_value(self, paths, value):
        try:
            fields = validate_index_fields(paths)
        except Exception:
            return
        texts = extract_texts({"v": value}, fields)
        containers, scalars = nodes(value)
        assert len(texts) <= scalars
        assert sum(len(path) for path, _ in texts) <= len(texts) * (MAX_NESTING * 12 + sum(map(len, paths)) + 8)

    def test_paths_that_meet_walk_what_they_share_once(self, monkeypatch):
        """64 paths leading into one list 120,000 long, 29 levels down, walked it once each (2 s
        in a PUT, 4 s more in the indexer): each node is now resolved once per distinct rest of a
        path, and a subtree's leaves are listed once."""
        bottom: Any = [0] * 120_000
        value = bottom
        for _ in range(28):
            value = [value]
        paths = (["a" + "[*]" * k for k in range(29)] + ["a" + "[0]" * k + "[*]" * (28 - k) for k in range(1, 29)]
                 + ["a" + "[-1]" * 28 + "[*]"] * 7)
        fields = validate_index_fields(paths)
        steps = 0
        real_resolve, real_leaves = paths_module._Walk.resolve, paths_module._Walk.leaves

        def counted(real):
            def step(*args, **kwargs):
                nonlocal steps
                steps += 1
                yield from real(*args, **kwargs)
            return step

        monkeypatch.setattr(paths_module._Walk, "resolve", counted(real_resolve))
        monkeypatch.setattr(paths_module._Walk, "leaves", counted(real_leaves))
        texts = extract_texts({"a": value}, fields)
        assert len(texts) == len(bottom)  # each "0" once, though every path reaches it
        assert steps <= 4 * (len(bottom) + 29 + sum(len(p) for p in paths))
        assert len(extract_texts({"a": value}, fields, limit=65)) == 65  # a PUT stops at the 65th text

    def test_names_that_no_element_holds_cost_no_walk_below_the_list(self, monkeypatch):
        """64 paths `a[*].k<i>` over elements that hold none of the names: the list is read
        once per path (a membership test per element), and nothing is kept per element and path
        (a memo of (node, rest of path) took 850 MB here)."""
        elements = [{} for _ in range(20_000)]
        calls = 0
        real = paths_module._Walk.resolve

        def counted(*args, **kwargs):
            nonlocal calls
            calls += 1
            yield from real(*args, **kwargs)

        monkeypatch.setattr(paths_module._Walk, "resolve", counted)
        tracemalloc.start()
        try:
            assert extract_texts({"a": elements}, [f"a[*].k{i}" for i in range(64)]) == []
            _, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
        assert calls == 64 * 2 and peak < 100_000

    def test_a_huge_list_index_is_beyond_every_list(self):
        paths = validate_index_fields(["a[" + "9" * 5000 + "]", "a[-" + "9" * 5000 + "]"])
        assert extract_texts({"a": ["x"]}, paths) == []
        assert filters.get_path({"a": ["x"]}, "a." + "0" * 5000) == (True, "x")
        assert filters.get_path({"a": ["x"]}, "a." + "9" * 5000) == (False, None)
