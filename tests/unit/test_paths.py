import pytest

from memsvc.core.errors import InvalidArgument
from memsvc.core.paths import MAX_INDEX_FIELDS, extract_texts, validate_index_fields, worth_embedding

VALUE = {
    "text": "hello",
    "meta": {"title": "Title", "count": 3, "ratio": 0.5, "ok": True, "none": None, "blank": "  "},
    "tags": ["red", "", "blue"],
    "items": [
        {"name": "first", "price": 10, "notes": ["n1", "n2"]},
        {"name": "second", "price": 20},
        {"price": 30},
    ],
    "matrix": [["a", "b"], ["c"]],
    "empty": "",
    "n": 42,
}


def test_default_takes_every_string_leaf_in_document_order():
    assert extract_texts(VALUE, None) == [
        ("text", "hello"),
        ("meta.title", "Title"),
        ("tags[0]", "red"),
        ("tags[2]", "blue"),
        ("items[0].name", "first"),
        ("items[0].notes[0]", "n1"),
        ("items[0].notes[1]", "n2"),
        ("items[1].name", "second"),
        ("matrix[0][0]", "a"),
        ("matrix[0][1]", "b"),
        ("matrix[1][0]", "c"),
    ]


@pytest.mark.parametrize("value", [{}, {"a": 1, "b": True, "c": None}, {"a": ["", " \n\t"]}, {"a": {"b": {}}}])
def test_default_on_values_without_text(value):
    assert extract_texts(value, None) == []


def test_default_is_deterministic():
    assert extract_texts(VALUE, None) == extract_texts(VALUE, None)


def test_text_is_returned_unchanged():
    assert extract_texts({"t": "  padded  "}, None) == [("t", "  padded  ")]


@pytest.mark.parametrize(
    "fields, expected",
    [
        (["text"], [("text", "hello")]),
        (["meta.title"], [("meta.title", "Title")]),
        (["items[*].name"], [("items[0].name", "first"), ("items[1].name", "second")]),
        (["items[0].name"], [("items[0].name", "first")]),
        (["items[-1].price"], [("items[2].price", "30")]),
        (["items[-2].name"], [("items[1].name", "second")]),
        (["items[3].name"], []),
        (["items[-4].name"], []),
        (["items[*].notes[*]"], [("items[0].notes[0]", "n1"), ("items[0].notes[1]", "n2")]),
        (["matrix[*][0]"], [("matrix[0][0]", "a"), ("matrix[1][0]", "c")]),
        (["matrix[1]"], [("matrix[1][0]", "c")]),
        (["tags[*]"], [("tags[0]", "red"), ("tags[2]", "blue")]),
        (["tags[1]"], []),
        (["nope"], []),
        (["text.deeper"], []),
        (["meta[0]"], []),
        (["text[*]"], []),
        (["items.name"], []),  # items is a list; select elements with [*]
        (["meta.none"], []),
        (["meta.blank"], []),
        (["empty"], []),
    ],
)
def test_explicit_paths(fields, expected):
    assert extract_texts(VALUE, fields) == expected


@pytest.mark.parametrize(
    "field, text",
    [("n", "42"), ("meta.count", "3"), ("meta.ratio", "0.5"), ("meta.ok", "true"), ("items[1].price", "20")],
)
def test_explicit_path_to_a_number_or_bool_yields_its_json_text(field, text):
    assert extract_texts(VALUE, [field]) == [(field, text)]


def test_explicit_path_to_a_container_yields_its_string_leaves_only():
    assert extract_texts(VALUE, ["meta"]) == [("meta.title", "Title")]
    assert extract_texts(VALUE, ["items[0]"]) == [
        ("items[0].name", "first"),
        ("items[0].notes[0]", "n1"),
        ("items[0].notes[1]", "n2"),
    ]
    assert extract_texts(VALUE, ["items[*]"]) == extract_texts({"items": VALUE["items"]}, None)


def test_fields_are_taken_in_the_order_given():
    assert extract_texts(VALUE, ["meta.title", "text"]) == [("meta.title", "Title"), ("text", "hello")]


NAMES = [("items[0].name", "first"), ("items[1].name", "second")]


@pytest.mark.parametrize(
    "fields, expected",
    [
        (["text", "text"], [("text", "hello")]),
        (["items[*].name", "items[0].name"], NAMES),
        (["items[0].name", "items[-2].name", "items[*].name"], NAMES),
        (["items[1]", "items[*].name"], [("items[1].name", "second"), ("items[0].name", "first")]),
        (["meta", "meta.title", "meta.count"], [("meta.title", "Title"), ("meta.count", "3")]),
    ],
)
def test_a_leaf_reached_twice_appears_once(fields, expected):
    assert extract_texts(VALUE, fields) == expected


def test_negative_and_positive_index_collapse_to_one_concrete_path():
    assert extract_texts(VALUE, ["tags[-1]", "tags[2]"]) == [("tags[2]", "blue")]


def test_dotted_dict_keys_are_distinct_leaves_even_with_the_same_label():
    value = {"a.b": "flat", "a": {"b": "nested"}}
    assert extract_texts(value, None) == [("a.b", "flat"), ("a.b", "nested")]


def test_false_means_nothing():
    assert extract_texts(VALUE, False) == []


@pytest.mark.parametrize(
    "obj",
    [
        None,
        False,
        ["text"],
        ["a.b", "arr[*].c", "arr[0]", "arr[-1]", "m[0][*]", "with space", "ünïcode.ключ", "$"],
        ["x"] * MAX_INDEX_FIELDS,
    ],
)
def test_validate_index_fields_accepts(obj):
    assert validate_index_fields(obj) == obj


def test_validate_index_fields_returns_a_list():
    assert validate_index_fields(("a", "b")) == ["a", "b"]


@pytest.mark.parametrize("obj", [[], ()])
def test_no_path_is_no_indexing(obj):  # what a LangGraph store does with `index=[]`
    assert validate_index_fields(obj) is False


@pytest.mark.parametrize(
    "obj",
    [
        True,
        0,
        "text",
        {"text": True},
        ["x"] * (MAX_INDEX_FIELDS + 1),
        [""],
        [None],
        [1],
        ["a", ""],
        ["a..b"],
        [".a"],
        ["a."],
        ["[0]"],
        ["a[]"],
        ["a[x]"],
        ["a[1.5]"],
        ["a[*"],
        ["a]"],
        ["a[0]b"],
        ["a[١]"],
        ["a.[0]"],
    ],
)
def test_validate_index_fields_rejects(obj):
    with pytest.raises(InvalidArgument) as exc:
        validate_index_fields(obj)
    assert exc.value.details["field"] == "index_fields"


def test_invalid_path_is_named_in_the_error():
    with pytest.raises(InvalidArgument) as exc:
        validate_index_fields(["ok", "bad[x]"])
    assert exc.value.details == {"field": "index_fields", "path": "bad[x]"}


def test_extract_texts_rejects_an_invalid_path_too():
    with pytest.raises(InvalidArgument):
        extract_texts(VALUE, ["a[x]"])


class TestWorthEmbedding:
    def test_one_word_labels_are_left_to_the_keyword_index(self):
        texts = [("content", "I am allergic to peanuts"), ("type", "fact"), ("valid_from", "2026-01-01T00:00:00Z")]
        assert worth_embedding(texts) == [("content", "I am allergic to peanuts")]

    def test_a_value_of_labels_only_embeds_them_all(self):
        texts = [("name", "Lisbon"), ("kind", "city")]
        assert worth_embedding(texts) == texts

    def test_a_sentence_written_without_spaces_is_no_label(self):
        texts = [("content", "我对花生过敏，不能吃花生酱。"), ("source", "chat log"), ("type", "fact")]
        assert worth_embedding(texts) == texts[:2]
