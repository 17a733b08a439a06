from decimal import Decimal

import pytest

from memsvc.core.errors import InvalidArgument
from memsvc.core.filters import (
    MAX_CONDITIONS,
    Condition,
    Filter,
    condition_matches,
    get_path,
    parse_filter,
)


def matches(filter_obj, value):
    return parse_filter(filter_obj).matches(lambda path: get_path(value, path))


DOC = {
    "n": 10,
    "f": 2.5,
    "s": "10",
    "word": "banana",
    "flag": True,
    "zero": 0,
    "none": None,
    "tags": ["a", "b"],
    "meta": {"lang": "en", "year": 2025, "at": "2024-05-01T12:00:00Z"},
    "items": [{"name": "x"}, {"name": "y"}],
}


# --- operators, both spellings ------------------------------------------------------------


@pytest.mark.parametrize("dollar", ["", "$"])
@pytest.mark.parametrize(
    "op, operand, expected",
    [
        ("eq", 10, True),
        ("eq", 11, False),
        ("ne", 11, True),
        ("ne", 10, False),
        ("in", [1, 10], True),
        ("in", [1, 2], False),
        ("in", [], False),
        ("nin", [1, 2], True),
        ("nin", [1, 10], False),
        ("nin", [], True),
        ("gt", 9, True),
        ("gt", 10, False),
        ("gte", 10, True),
        ("gte", 11, False),
        ("lt", 11, True),
        ("lt", 10, False),
        ("lte", 10, True),
        ("lte", 9, False),
    ],
)
def test_every_operator_in_both_spellings(dollar, op, operand, expected):
    assert matches({"n": {dollar + op: operand}}, DOC) is expected


@pytest.mark.parametrize("dollar", ["", "$"])
def test_spellings_parse_to_the_same_filter(dollar):
    f = parse_filter({"a": {dollar + "gte": 1, dollar + "nin": [2]}})
    assert f.conditions == (Condition("a", "gte", 1), Condition("a", "nin", (2,)))


def test_bare_scalar_is_equality():
    assert matches({"word": "banana"}, DOC)
    assert not matches({"word": "apple"}, DOC)
    assert parse_filter({"word": "banana"}) == parse_filter({"word": {"eq": "banana"}})


@pytest.mark.parametrize(
    "filter_obj, expected",
    [
        ({"tags": ["a", "b"]}, True),
        ({"tags": ["b", "a"]}, False),
        ({"tags": "a"}, False),  # JSON equality, not array membership
        ({"meta": {"lang": "en", "year": 2025, "at": "2024-05-01T12:00:00Z"}}, True),
        ({"meta": {"lang": "en"}}, False),
        ({"items": [{"name": "x"}, {"name": "y"}]}, True),
        ({"none": None}, True),
        ({"meta.lang": None}, False),
    ],
)
def test_bare_list_and_object_are_equality(filter_obj, expected):
    assert matches(filter_obj, DOC) is expected


def test_empty_object_is_equality_with_empty_object():
    assert parse_filter({"x": {}}).conditions == (Condition("x", "eq", {}),)
    assert matches({"x": {}}, {"x": {}})
    assert not matches({"x": {}}, {"x": {"a": 1}})


def test_eq_operator_can_compare_to_an_object_that_looks_like_an_operator():
    assert matches({"q": {"eq": {"gt": 1}}}, {"q": {"gt": 1}})
    assert not matches({"q": {"eq": {"gt": 1}}}, {"q": 5})


def test_operators_in_one_object_are_anded():
    assert matches({"meta.year": {"gte": 2024, "lt": 2026}}, DOC)
    assert not matches({"meta.year": {"gte": 2024, "lt": 2025}}, DOC)
    assert not matches({"meta.year": {"gt": 2025, "lt": 2030}}, DOC)


def test_top_level_conditions_are_anded():
    assert matches({"meta.lang": "en", "n": {"gt": 5}}, DOC)
    assert not matches({"meta.lang": "en", "n": {"gt": 50}}, DOC)
    assert not matches({"meta.lang": "fr", "n": {"gt": 5}}, DOC)


def test_empty_filter_matches_everything():
    f = parse_filter({})
    assert f.is_empty
    assert f.matches(lambda path: (False, None))
    assert not parse_filter({"a": 1}).is_empty


# --- numbers versus text ---------------------------------------------------------------------


@pytest.mark.parametrize(
    "value, op, operand, expected",
    [
        (10, "gt", 9, True),
        (10, "gt", 9.5, True),
        (2.5, "lt", 3, True),
        (-1, "lt", 0, True),
        (100, "gt", 20, True),
        (9, "gt", 10, False),
        ("10", "gt", 9, False),  # a string is not a number
        (10, "gt", "2024-01-01", False),  # a number is not a timestamp
        ("2024-01-01", "gt", 9, False),
        (True, "gt", 0, False),  # a bool is not a number
        (True, "gte", 1, False),
        (False, "lte", 0, False),
        (None, "lt", 1, False),
        ([5], "lt", 10, False),
        ({"a": 1}, "lt", 10, False),
        (float("nan"), "lte", 1, False),
        (float("nan"), "gte", 1, False),
        (Decimal("10"), "gt", 9, True),
        (Decimal("10.5"), "lte", 10.5, True),
        (10**30, "gt", 10**29, True),
    ],
)
def test_range_on_numbers_never_falls_back_to_text(value, op, operand, expected):
    assert condition_matches(True, value, op, operand) is expected
    assert matches({"v": {op: operand}}, {"v": value}) is expected


@pytest.mark.parametrize("op", ["gt", "gte", "lt", "lte"])
@pytest.mark.parametrize("value", ["10", "9", "banana", "2024", "2024-13-01", ""])
def test_range_between_non_timestamp_strings_is_always_false(op, value):
    # parse_filter refuses a non-timestamp string operand; the adapters' entry point must agree.
    assert condition_matches(True, value, op, "9") is False
    assert condition_matches(True, value, op, "2024-05-01") is False


def test_text_strings_still_work_for_equality():
    assert matches({"s": "10"}, DOC)
    assert not matches({"s": 10}, DOC)  # "10" is not 10
    assert not matches({"n": "10"}, DOC)
    assert matches({"word": {"in": ["apple", "banana"]}}, DOC)
    assert matches({"word": {"nin": ["apple"]}}, DOC)
    assert matches({"word": {"ne": "Banana"}}, DOC)


# --- timestamps --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "a, b",
    [
        ("2024-01-01T01:00:00+01:00", "2024-01-01T00:00:00Z"),
        ("2024-01-01T00:00:00Z", "2024-01-01T00:00:00+00:00"),
        ("2024-01-01T00:00:00z", "2024-01-01T00:00:00-00:00"),
        ("2024-01-01", "2024-01-01T00:00:00Z"),
        ("2024-01-01T00:00:00", "2024-01-01T00:00:00Z"),  # naive is UTC
        ("2024-01-01 00:00:00Z", "2024-01-01T00:00:00Z"),
        ("2024-01-01T00:00Z", "2024-01-01T00:00:00.000Z"),
        ("2023-12-31T19:00:00-05:00", "2024-01-01T00:00:00Z"),
        ("2024-01-01T05:30:00+0530", "2024-01-01T00:00:00Z"),
        ("2024-01-01T00:00:00.5Z", "2024-01-01T00:00:00.500000Z"),
        ("2024-01-01T00:00:00.123456789Z", "2024-01-01T00:00:00.123456Z"),
    ],
)
def test_equal_instants_with_different_spellings(a, b):
    assert condition_matches(True, a, "eq", b)
    assert condition_matches(True, a, "in", [b])
    assert not condition_matches(True, a, "ne", b)
    assert not condition_matches(True, a, "nin", [b])
    assert condition_matches(True, a, "gte", b)
    assert condition_matches(True, a, "lte", b)
    assert not condition_matches(True, a, "gt", b)
    assert not condition_matches(True, a, "lt", b)


@pytest.mark.parametrize(
    "earlier, later",
    [
        ("2024-01-01T00:59:59+01:00", "2024-01-01T00:00:00Z"),  # 23:59:59Z the day before
        ("2024-01-01T00:00:00Z", "2024-01-01T01:00:01+01:00"),
        ("2024-05-01", "2024-05-01T00:00:00.000001Z"),
        ("2024-05-01T23:59:59Z", "2024-05-02"),
        ("0999-01-01", "2024-01-01"),
        ("2024-09-01", "2024-10-01"),  # would also hold as text; the next one would not
        ("2024-01-01T10:00:00+09:00", "2024-01-01T02:00:00Z"),
    ],
)
def test_timestamps_compare_as_instants(earlier, later):
    assert condition_matches(True, earlier, "lt", later)
    assert condition_matches(True, earlier, "lte", later)
    assert condition_matches(True, later, "gt", earlier)
    assert condition_matches(True, later, "gte", earlier)
    assert not condition_matches(True, earlier, "gt", later)
    assert not condition_matches(True, earlier, "eq", later)


def test_offsets_beat_text_order():
    # As text "2024-01-01T10" > "2024-01-01T02"; as instants 01:00Z < 02:00Z.
    assert matches({"at": {"lt": "2024-01-01T02:00:00Z"}}, {"at": "2024-01-01T10:00:00+09:00"})


def test_timestamp_filter_on_nested_field():
    assert matches({"meta.at": {"gte": "2024-05-01", "lt": "2024-05-02"}}, DOC)
    assert matches({"meta.at": {"gt": "2024-05-01T13:00:00+02:00"}}, DOC)
    assert not matches({"meta.at": {"gt": "2024-05-01T13:00:00Z"}}, DOC)
    assert matches({"meta.at": "2024-05-01T14:00:00+02:00"}, DOC)


@pytest.mark.parametrize(
    "text",
    [
        "20240501",  # fromisoformat takes this; we do not
        "2024-W18-3",
        "2024-05",
        "2024",
        "2024-13-01",
        "2024-02-30",
        "2024-05-01T25:00:00Z",
        "2024-05-01T10:00:00+24:00",
        "2024-05-01T10:00:00+01:75",
        "2024-05-01T",
        "2024-05-01Z",
        "May 1, 2024",
        "2024-05-01T10:00:00Z trailing",
        "２０２４-05-01",
    ],
)
def test_not_timestamps(text):
    assert not condition_matches(True, text, "lte", "2100-01-01")
    assert not condition_matches(True, text, "gte", "1900-01-01")
    with pytest.raises(InvalidArgument):
        parse_filter({"at": {"gt": text}})


def test_timestamp_equality_needs_both_sides_to_parse():
    assert not condition_matches(True, "2024-05-01", "eq", "20240501")
    assert condition_matches(True, "20240501", "eq", "20240501")


# --- equality details ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "value, operand, expected",
    [
        (1, 1.0, True),
        (1.0, 1, True),
        (0, 0.0, True),
        (Decimal("1"), 1, True),
        (True, True, True),
        (False, False, True),
        (True, 1, False),
        (1, True, False),
        (False, 0, False),
        (0, False, False),
        (None, None, True),
        (None, 0, False),
        (None, "", False),
        ("", None, False),
        ("1", 1, False),
        ([1, 2], [1.0, 2.0], True),
        ([1], [True], False),
        ([True], [1], False),
        ({"a": 1}, {"a": 1.0}, True),
        ({"a": True}, {"a": 1}, False),
        ({"a": 1}, {"a": 1, "b": 2}, False),
        ([1, 2], [1, 2, 3], False),
        ([], {}, False),
        ("x", ["x"], False),
    ],
)
def test_equality(value, operand, expected):
    assert condition_matches(True, value, "eq", operand) is expected
    assert condition_matches(True, value, "ne", operand) is not expected
    assert condition_matches(True, value, "in", [operand]) is expected
    assert condition_matches(True, value, "nin", [operand]) is not expected


def test_bool_filters_only_match_bools():
    assert matches({"flag": True}, DOC)
    assert not matches({"flag": 1}, DOC)
    assert not matches({"zero": False}, DOC)
    assert matches({"zero": 0}, DOC)
    assert matches({"zero": {"in": [False, 0.0]}}, DOC)
    assert not matches({"zero": {"in": [False]}}, DOC)


# --- missing fields -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "op, operand, expected",
    [
        ("eq", None, False),
        ("eq", 1, False),
        ("in", [None, 1], False),
        ("gt", 0, False),
        ("gte", 0, False),
        ("lt", 0, False),
        ("lte", "2024-01-01", False),
        ("ne", 1, True),
        ("ne", None, True),
        ("nin", [1], True),
        ("nin", [None], True),
    ],
)
def test_missing_field(op, operand, expected):
    assert condition_matches(False, None, op, operand) is expected
    assert matches({"nope.deeper": {op: operand}}, DOC) is expected


def test_null_field_is_present():
    assert matches({"none": None}, DOC)
    assert not matches({"none": {"ne": None}}, DOC)
    assert matches({"none": {"ne": 0}}, DOC)


def test_condition_matches_rejects_unknown_operator():
    with pytest.raises(ValueError):
        condition_matches(True, 1, "regex", "x")


def test_condition_matches_accepts_dollar_spelling():
    assert condition_matches(True, 3, "$gt", 2)


# --- get_path ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "path, expected",
    [
        ("n", (True, 10)),
        ("meta.lang", (True, "en")),
        ("none", (True, None)),
        ("items.0.name", (True, "x")),
        ("items.1", (True, {"name": "y"})),
        ("items.2.name", (False, None)),
        ("items.-1.name", (False, None)),
        ("items.x", (False, None)),
        ("tags.1", (True, "b")),
        ("word.0", (False, None)),
        ("meta.lang.x", (False, None)),
        ("nope", (False, None)),
        ("n.x", (False, None)),
    ],
)
def test_get_path(path, expected):
    assert get_path(DOC, path) == expected


def test_get_path_prefers_dict_keys_that_look_like_numbers():
    assert get_path({"a": {"0": "zero"}}, "a.0") == (True, "zero")


# --- parse errors ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "obj",
    [
        None,
        [],
        "a=1",
        1,
        {"": 1},
        {"a..b": 1},
        {".a": 1},
        {"a.": 1},
        {"a": {"$regex": "x"}},
        {"a": {"$exists": 1}},
        {"a": {"$$eq": 1}},
        {"a": {"gt": 1, "foo": 2}},
        {"a": {"$gt": 1, "foo": 2}},
        {"a": {"eq": 1, "$and": []}},
        {"a": {"in": 1}},
        {"a": {"in": "ab"}},
        {"a": {"$nin": {"x": 1}}},
        {"a": {"nin": None}},
        {"a": {"gt": "9"}},
        {"a": {"gt": "banana"}},
        {"a": {"gte": True}},
        {"a": {"lt": None}},
        {"a": {"lte": [1]}},
        {"a": {"gt": {"x": 1}}},
        {"a": {"gt": float("inf")}},
        {"a": {"gt": float("nan")}},
    ],
)
def test_parse_errors(obj):
    with pytest.raises(InvalidArgument) as exc:
        parse_filter(obj)
    assert exc.value.details["field"] == "filter"
    assert exc.value.code == "INVALID_ARGUMENT"


def test_unknown_operator_is_named_in_the_error():
    with pytest.raises(InvalidArgument) as exc:
        parse_filter({"meta.lang": {"$regex": "e.*"}})
    assert exc.value.details == {"field": "filter", "key": "meta.lang", "op": "$regex"}
    assert "$regex" in exc.value.message


@pytest.mark.parametrize("key", ["$or", "$and", "$nor"])
def test_a_logical_operator_where_a_field_goes_is_refused_not_matched_as_a_field(key):
    # As a field path it matched nothing: `{"$or": [...]}` answered 200 and no memory.
    with pytest.raises(InvalidArgument) as exc:
        parse_filter({key: [{"a": 1}, {"b": 2}]})
    assert exc.value.details == {"field": "filter", "key": key}
    assert "is an operator, not a field" in exc.value.message


def test_listed_values_are_bounded_across_the_filter_nots_included():
    from memsvc.core.filters import MAX_LISTED_VALUES
    half = MAX_LISTED_VALUES // 2
    assert len(parse_filter({"a": {"in": list(range(half))}, "b": {"not": {"nin": list(range(half))}}}).conditions) == 2
    with pytest.raises(InvalidArgument) as exc:
        parse_filter({"a": {"in": list(range(half))}, "b": {"not": {"any": list(range(half + 1))}}})
    assert exc.value.details["max_listed_values"] == MAX_LISTED_VALUES


def test_condition_limit():
    fifty = {f"k{i}": i for i in range(MAX_CONDITIONS)}
    assert len(parse_filter(fifty).conditions) == 50
    with pytest.raises(InvalidArgument) as exc:
        parse_filter({**fifty, "one_more": 1})
    assert exc.value.details["max_conditions"] == 50


def test_condition_limit_counts_operators_not_keys():
    obj = {f"k{i}": {"gt": 0, "lt": 9} for i in range(25)}
    assert len(parse_filter(obj).conditions) == 50
    with pytest.raises(InvalidArgument):
        parse_filter({**obj, "x": 1})


@pytest.mark.parametrize("operand", [9, 9.5, -3, "2024-05-01", "2024-05-01T10:00:00+02:00"])
def test_range_operands_accepted(operand):
    assert parse_filter({"a": {"gt": operand}}).conditions == (Condition("a", "gt", operand),)


# --- Filter: immutable, split, merge, to_json -----------------------------------------------


def test_filter_is_immutable():
    f = parse_filter({"a": {"in": [1, 2]}})
    with pytest.raises(AttributeError):
        f.conditions = ()
    with pytest.raises(AttributeError):
        f.conditions[0].op = "nin"
    assert isinstance(f.conditions, tuple)
    assert f.conditions[0].operand == (1, 2)


def test_filter_does_not_alias_the_callers_list():
    raw = {"a": {"in": [1, 2]}}
    f = parse_filter(raw)
    raw["a"]["in"].append(3)
    assert not f.matches(lambda path: (True, 3))


def test_split():
    f = parse_filter({"namespace": "user", "sub": {"in": ["a", "b"]}, "meta.lang": "en", "year": {"gt": 1, "lt": 5}})
    pushed, rest = f.split({"namespace", "sub", "year"})
    assert [c.path for c in pushed.conditions] == ["namespace", "sub", "year", "year"]
    assert [c.path for c in rest.conditions] == ["meta.lang"]
    everything, nothing = f.split(["namespace", "sub", "year", "meta.lang"])
    assert everything == f and nothing.is_empty
    none_pushed, all_rest = f.split([])
    assert none_pushed.is_empty and all_rest == f


def test_split_uses_exact_paths():
    pushed, rest = parse_filter({"meta.lang": "en"}).split({"meta"})
    assert pushed.is_empty
    assert rest.conditions == (Condition("meta.lang", "eq", "en"),)


def test_split_halves_recombine_to_the_same_decisions():
    f = parse_filter({"a": 1, "b": {"gt": 2}})
    pushed, rest = f.split({"a"})
    for doc in [{"a": 1, "b": 3}, {"a": 1, "b": 2}, {"a": 2, "b": 3}, {}]:
        lookup = lambda path, doc=doc: get_path(doc, path)  # noqa: E731
        assert (pushed.matches(lookup) and rest.matches(lookup)) is f.matches(lookup)


def test_merge_is_and():
    user = parse_filter({"meta.lang": "en"})
    policy = parse_filter({"sub": "alice"})
    merged = user.merge(policy)
    assert merged.conditions == user.conditions + policy.conditions
    assert merged.matches(lambda p: get_path({"meta": {"lang": "en"}, "sub": "alice"}, p))
    assert not merged.matches(lambda p: get_path({"meta": {"lang": "en"}, "sub": "bob"}, p))
    assert not merged.matches(lambda p: get_path({"meta": {"lang": "fr"}, "sub": "alice"}, p))


def test_merge_with_empty_and_duplicates():
    f = parse_filter({"a": 1, "b": {"in": [1, 2]}})
    assert f.merge(Filter()) == f
    assert Filter().merge(f) == f
    assert f.merge(f) == f
    assert len(f.merge(parse_filter({"a": 1.0})).conditions) == 3


def test_merge_keeps_conditions_that_only_python_thinks_equal():
    merged = parse_filter({"a": 1}).merge(parse_filter({"a": True}))
    assert [repr(c.operand) for c in merged.conditions] == ["1", "True"]
    assert not merged.matches(lambda p: (True, 1))
    assert not merged.matches(lambda p: (True, True))


def test_merged_same_path_conditions_both_apply():
    merged = parse_filter({"a": {"gt": 1}}).merge(parse_filter({"a": {"lt": 5}}))
    assert merged.matches(lambda p: (True, 3))
    assert not merged.matches(lambda p: (True, 7))


@pytest.mark.parametrize(
    "obj",
    [
        {},
        {"a": 1},
        {"a": "x", "b": None, "c": True},
        {"tags": ["a", "b"]},
        {"meta": {"lang": "en"}},
        {"a": {}},
        {"a": {"eq": {"gt": 1}}},
        {"a": {"$eq": 1}},
        {"a": {"ne": 1}},
        {"a": {"in": [1, "x", None]}},
        {"a": {"$nin": []}},
        {"a": {"gte": 2024, "lt": 2026}},
        {"a": {"gt": 1, "$gt": 2}},
        {"a": {"eq": 1, "$eq": 2}},
        {"at": {"gte": "2024-05-01", "$lt": "2024-06-01T00:00:00+02:00"}, "meta.lang": {"in": ["en", "fr"]}},
    ],
)
def test_to_json_round_trips(obj):
    f = parse_filter(obj)
    out = f.to_json()
    assert parse_filter(out) == f
    assert repr(parse_filter(out)) == repr(f)  # == alone would let True stand for 1
    assert out == parse_filter(out).to_json()


def test_to_json_shape():
    f = parse_filter({"a": {"$eq": 1}, "b": {"$in": [1]}, "c": {"gt": 1, "$gt": 2}})
    assert f.to_json() == {"a": 1, "b": {"in": [1]}, "c": {"gt": 1, "$gt": 2}}


def test_to_json_of_merged_filter_groups_by_path():
    merged = parse_filter({"a": 1}).merge(parse_filter({"b": 2})).merge(parse_filter({"a": {"lt": 5}}))
    out = merged.to_json()
    assert out == {"a": {"eq": 1, "lt": 5}, "b": 2}
    again = parse_filter(out)
    for value in [{"a": 1, "b": 2}, {"a": 1, "b": 3}, {"a": 6, "b": 2}]:
        lookup = lambda p, value=value: get_path(value, p)  # noqa: E731
        assert again.matches(lookup) is merged.matches(lookup)


def test_to_json_refuses_what_the_flat_form_cannot_say():
    merged = parse_filter({"a": {"gt": 1, "$gt": 2}}).merge(parse_filter({"a": {"gt": 3}}))
    with pytest.raises(ValueError):
        merged.to_json()


# --- infinities and NaN, which JSON cannot carry ---------------------------------------------


INF, NEG_INF, NAN = ({"$numberDouble": s} for s in ("Infinity", "-Infinity", "NaN"))


@pytest.mark.parametrize(
    "filter_obj, expected",
    [
        ({"n": {"$lt": INF}}, True),
        ({"n": {"lte": INF}}, True),
        ({"n": {"$gt": NEG_INF}}, True),
        ({"n": {"gt": INF}}, False),
        ({"n": {"$eq": NAN}}, False),
        ({"n": NAN}, False),
        ({"n": {"$ne": NAN}}, True),
        ({"n": {"gt": NAN}}, False),
        ({"n": {"lt": NAN}}, False),
        ({"n": {"in": [NAN, INF]}}, False),
        ({"n": {"nin": [NEG_INF]}}, True),
        ({"word": {"lt": INF}}, False),  # a range never compares text
    ],
)
def test_non_finite_operands_compare_as_ieee_754(filter_obj, expected):
    assert matches(filter_obj, DOC) is expected


def test_non_finite_operands_against_dynamodb_decimals():
    lookup = lambda path: (True, Decimal("3"))  # noqa: E731
    assert parse_filter({"n": {"lt": INF}}).matches(lookup)
    assert not parse_filter({"n": {"gte": NAN}}).matches(lookup)


def test_non_finite_operands_survive_to_json():
    f = parse_filter({"n": {"lt": INF, "$gt": NEG_INF}, "m": {"in": [NAN, 1]}})
    assert f.to_json() == {"n": {"lt": INF, "gt": NEG_INF}, "m": {"in": [NAN, 1]}}
    assert parse_filter(f.to_json()).to_json() == f.to_json()


@pytest.mark.parametrize("tag", [{"$numberDouble": "inf"}, {"$numberDouble": 1}, {"$numberDouble": "NaN", "x": 1}])
def test_other_tags_are_not_numbers(tag):
    with pytest.raises(InvalidArgument):
        parse_filter({"n": {"gt": tag}})


# --- contains, any, exists, not ---------------------------------------------------------------


@pytest.mark.parametrize("dollar", ["", "$"])
@pytest.mark.parametrize(
    "path, op, operand, expected",
    [
        ("tags", "contains", "a", True),
        ("tags", "contains", "c", False),
        ("tags", "contains", ["a"], False),  # an element equal to the list ["a"]: none
        ("word", "contains", "banana", True),  # a scalar counts as a list of one
        ("word", "contains", "ban", False),  # never a substring
        ("n", "contains", 10.0, True),  # equal as eq says: 10 == 10.0
        ("n", "contains", "10", False),
        ("none", "contains", None, True),
        ("missing", "contains", None, False),
        ("meta", "contains", {"lang": "en", "year": 2025, "at": "2024-05-01T12:00:00Z"}, True),
        ("meta.at", "contains", "2024-05-01T14:00:00+02:00", True),  # the same instant
        ("items", "contains", {"name": "y"}, True),
        ("tags", "any", ["x", "b"], True),
        ("tags", "any", ["x", "y"], False),
        ("tags", "any", [], False),
        ("word", "any", ["apple", "banana"], True),
        ("missing", "any", [None, "a"], False),
        ("n", "any", [True, "10"], False),
        ("tags", "exists", True, True),
        ("none", "exists", True, True),  # null is present
        ("missing", "exists", True, False),
        ("missing", "exists", False, True),
        ("tags.1", "exists", True, True),
        ("tags.2", "exists", False, True),
        ("meta.lang.x", "exists", False, True),
        ("tags", "not", {"contains": "a"}, False),
        ("tags", "not", {"contains": "c"}, True),
        ("missing", "not", {"contains": "a"}, True),
        ("missing", "not", {"exists": True}, True),
        ("n", "not", {"gt": 5, "lt": 20}, False),
        ("n", "not", {"gt": 5, "lt": 8}, True),  # both must hold for not to fail
        ("word", "not", {"gt": 5}, True),  # a range on text is false, so its negation holds
        ("tags", "not", {"any": ["x", "a"]}, False),
    ],
)
def test_agent_operators(dollar, path, op, operand, expected):
    assert matches({path: {dollar + op: operand}}, DOC) is expected


def test_contains_looks_one_level_into_nested_lists():
    value = {"grid": [["a", "b"], "c"]}
    assert matches({"grid": {"contains": ["a", "b"]}}, value)
    assert matches({"grid": {"contains": "c"}}, value)
    assert not matches({"grid": {"contains": "a"}}, value)
    assert matches({"grid.0": {"contains": "a"}}, value)


def test_any_is_linear_in_operand_and_value():
    from memsvc.core.filters import MAX_LISTED_VALUES
    many = [f"t{i}" for i in range(20_000)]
    listed = many[:MAX_LISTED_VALUES - 1]
    assert matches({"tags": {"any": listed + ["b"]}}, {"tags": many[::-1]})
    assert not matches({"tags": {"any": listed}}, {"tags": [f"u{i}" for i in range(20_000)]})


def test_not_of_one_operator_equals_its_opposite():
    for value in ({"x": 1}, {"x": 2}, {"x": None}, {}, {"x": [1]}):
        assert matches({"x": {"not": {"eq": 1}}}, value) is matches({"x": {"ne": 1}}, value)
        assert matches({"x": {"not": {"in": [1, 3]}}}, value) is matches({"x": {"nin": [1, 3]}}, value)
        assert matches({"x": {"not": {"exists": True}}}, value) is matches({"x": {"exists": False}}, value)


def test_new_operators_round_trip_through_to_json():
    f = parse_filter({"tags": {"contains": "a", "$not": {"any": ["x", INF], "$exists": False, "exists": True}},
                      "kind": {"$any": ["episodic"]}, "category": {"exists": True}})
    inf = float("inf")
    assert f.conditions[1] == Condition("tags", "not", (("any", ("x", inf)), ("exists", False), ("exists", True)))
    assert parse_filter(f.to_json()) == f
    assert f.to_json()["tags"]["not"]["any"][1] == INF


def test_operators_inside_not_count_toward_the_limit():
    near = {f"k{i}": i for i in range(MAX_CONDITIONS - 2)}
    assert len(parse_filter({**near, "x": {"not": {"gt": 1, "lt": 2}}}).conditions) == MAX_CONDITIONS - 1
    with pytest.raises(InvalidArgument) as exc:
        parse_filter({**near, "x": {"not": {"gt": 1, "lt": 2, "ne": 3}}})
    assert exc.value.details["max_conditions"] == MAX_CONDITIONS


@pytest.mark.parametrize(
    "spec, op",
    [
        ({"any": "a"}, "any"),
        ({"$any": {"a": 1}}, "$any"),
        ({"any": None}, "any"),
        ({"exists": 1}, "exists"),
        ({"exists": "true"}, "exists"),
        ({"$exists": None}, "$exists"),
        ({"not": "a"}, "not"),
        ({"not": {}}, "not"),
        ({"not": {"lang": "en"}}, "not"),  # an object to equal is not an operator object
        ({"not": [{"eq": 1}]}, "not"),
        ({"not": {"not": {"eq": 1}}}, "not"),
        ({"not": {"$not": {"eq": 1}}}, "$not"),
        ({"not": {"exists": "yes"}}, "exists"),
        ({"not": {"gt": "banana"}}, "gt"),
        ({"not": {"eq": 1, "foo": 2}}, "foo"),
        ({"not": {"$regex": "x"}}, "$regex"),
        ({"contains": "a", "foo": 1}, "foo"),
    ],
)
def test_agent_operator_errors_name_the_field(spec, op):
    with pytest.raises(InvalidArgument) as exc:
        parse_filter({"meta.tags": spec})
    assert exc.value.details == {"field": "filter", "key": "meta.tags", "op": op}
    assert "'meta.tags'" in exc.value.message


def test_a_path_named_like_an_operator_is_still_a_path():
    assert matches({"not": True, "any.exists": 1}, {"not": True, "any": {"exists": 1}})


_SCHEMA_CASES_TAKEN = [{"contains": "a"}, {"$contains": ["a", {"b": 1}]}, {"any": []}, {"$any": [1, "a", None]},
                       {"exists": False}, {"$exists": True}, {"not": {"contains": "a"}},
                       {"$not": {"gt": 1, "$lte": "2024-05-01", "exists": True, "any": ["x"]}},
                       {"not": {"eq": {"not": 1}}}]
_SCHEMA_CASES_REFUSED = [{"any": "a"}, {"exists": 1}, {"exists": None}, {"not": {}}, {"not": 1},
                         {"not": {"not": {"eq": 1}}}, {"not": {"$not": {"eq": 1}}}, {"not": {"x": 1}},
                         {"not": {"in": 1}}, {"contains": 1, "x": 2}]


@pytest.mark.parametrize("condition", _SCHEMA_CASES_TAKEN)
def test_the_filter_schema_admits_the_agent_operators_the_parser_takes(condition):
    import jsonschema_rs

    from memsvc.service.search import FILTER_SCHEMA

    parse_filter({"a": condition})
    assert jsonschema_rs.validator_for({"type": "object", **FILTER_SCHEMA}).is_valid({"a": condition})


@pytest.mark.parametrize("condition", _SCHEMA_CASES_REFUSED)
def test_the_filter_schema_refuses_the_agent_operator_misuses_the_parser_refuses(condition):
    import jsonschema_rs

    from memsvc.service.search import FILTER_SCHEMA

    assert not jsonschema_rs.validator_for({"type": "object", **FILTER_SCHEMA}).is_valid({"a": condition})
    with pytest.raises(InvalidArgument):
        parse_filter({"a": condition})


def test_a_not_over_a_list_operand_reads_the_operand_once_not_once_per_value(monkeypatch):
    """`not {any: [...]}` / `not {in: [...]}`: the inner operand's equality keys are made once per
    condition, so checking n values costs O(n + operand), not O(n x operand)."""
    import memsvc.core.filters as filters

    calls = []
    real = filters.equality_key
    monkeypatch.setattr(filters, "equality_key", lambda x: (calls.append(x), real(x))[1])
    operand = [f"v{i}" for i in range(1000)]
    for inner in ("any", "in"):
        calls.clear()
        flt = parse_filter({"tag": {"not": {inner: operand}}})
        matched = [flt.matches(filters.lookup_in({"tag": [f"x{i}"] if inner == "any" else f"x{i}"})) for i in range(100)]
        assert all(matched)
        assert flt.matches(filters.lookup_in({"tag": ["v5"] if inner == "any" else "v5"})) is False
        assert len(calls) <= len(operand) + 2 * 101
