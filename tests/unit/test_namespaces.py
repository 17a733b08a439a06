import pytest

from memsvc.core.errors import InvalidArgument
from memsvc.core.namespaces import (
    SEP,
    ancestors,
    decode_namespace,
    encode_namespace,
    is_under,
    match_namespace_pattern,
    prefix_range,
    validate_key,
    validate_namespace,
)

AWKWARD_SEGMENTS = ["a\x1eb", "a\x1fb", "a/b", "100%", "%2F", "with space", "日本語", "émoji 🧠", "*", ".", "..", "a.b"]


@pytest.mark.parametrize("segment", AWKWARD_SEGMENTS)
def test_round_trip_of_awkward_segments(segment):
    ns = ("user", segment, "x")
    encoded = encode_namespace(ns)
    assert encoded.count(SEP) == 2
    assert decode_namespace(encoded) == ns


@pytest.mark.parametrize("segment", AWKWARD_SEGMENTS)
def test_encoded_segments_are_printable_ascii(segment):
    encoded = encode_namespace([segment])
    assert encoded.isascii()
    assert all(c > "\x1f" for c in encoded)


def test_encoding_is_quote_joined_with_sep():
    assert encode_namespace(["user", "a/b", "x y"]) == "user\x1ea%2Fb\x1ex%20y"


def test_empty_namespace_encodes_to_empty_string_and_back():
    assert encode_namespace([]) == ""
    assert decode_namespace("") == ()


@pytest.mark.parametrize("ns", [["a"], ("a", "b"), ["user", "alice", "notes"]])
def test_validate_namespace_accepts_and_returns_tuple(ns):
    assert validate_namespace(ns, max_depth=10) == tuple(ns)


@pytest.mark.parametrize(
    "ns, reason",
    [
        ("user", "not_a_list"),
        (None, "not_a_list"),
        ({"a": 1}, "not_a_list"),
        ([], "depth"),
        (["a", ""], "segment"),
        (["a", 1], "segment"),
        (["a", None], "segment"),
        (["\ud800"], "segment"),
    ],
)
def test_validate_namespace_rejects(ns, reason):
    with pytest.raises(InvalidArgument) as exc:
        validate_namespace(ns, max_depth=10)
    assert exc.value.details["field"] == "namespace"
    assert exc.value.details["reason"] == reason


def test_validate_namespace_depth_limit():
    assert len(validate_namespace(["s"] * 3, max_depth=3)) == 3
    with pytest.raises(InvalidArgument) as exc:
        validate_namespace(["s"] * 4, max_depth=3)
    assert exc.value.details["max_depth"] == 3


def test_validate_namespace_allow_empty_for_prefixes():
    assert validate_namespace([], max_depth=3, allow_empty=True) == ()
    with pytest.raises(InvalidArgument):
        validate_namespace(["s"] * 4, max_depth=3, allow_empty=True)
    with pytest.raises(InvalidArgument):
        validate_namespace([""], max_depth=3, allow_empty=True)


def test_star_is_an_ordinary_segment_when_validating():
    assert validate_namespace(["user", "*"], max_depth=3) == ("user", "*")


@pytest.mark.parametrize("key", ["k", "a" * 1024, "é" * 512, "🧠" * 256, " ", "a/b\x1e"])
def test_validate_key_accepts_up_to_1024_bytes(key):
    assert validate_key(key) == key


@pytest.mark.parametrize("key", ["a" * 1025, "é" * 513, "🧠" * 256 + "a", "a" * 1023 + "é"])
def test_validate_key_rejects_over_1024_bytes(key):
    with pytest.raises(InvalidArgument) as exc:
        validate_key(key)
    assert exc.value.details == {"field": "key", "max_bytes": 1024}


@pytest.mark.parametrize("key", ["", None, 5, b"bytes", ["k"], "\udc80"])
def test_validate_key_rejects_non_strings_and_empty(key):
    with pytest.raises(InvalidArgument) as exc:
        validate_key(key)
    assert exc.value.details["field"] == "key"


def test_prefix_range_of_empty_prefix_is_everything():
    assert prefix_range([]) is None
    assert is_under("anything\x1eat\x1eall", [])


def test_prefix_range_bounds():
    assert prefix_range(["user", "alice"]) == ("user\x1ealice", "user\x1ealice\x1e", "user\x1ealice\x1f")


@pytest.mark.parametrize(
    "ns, under",
    [
        (["user", "alice"], True),
        (["user", "alice", "notes"], True),
        (["user", "alice", "notes", "deep"], True),
        (["user", "alice", ""], True),
        (["user", "alicea"], False),
        (["user", "alicea", "notes"], False),
        (["user", "alice/x"], False),
        (["user", "alice%2Fx"], False),
        (["user", "alice\x1ex"], False),
        (["user", "alice ", "x"], False),
        (["user", "alic"], False),
        (["user"], False),
        (["users", "alice"], False),
        (["other"], False),
    ],
)
def test_prefix_never_crosses_a_segment_boundary(ns, under):
    encoded = encode_namespace(ns)
    exact, lo, hi = prefix_range(["user", "alice"])
    assert (encoded == exact or lo <= encoded < hi) is under
    assert is_under(encoded, ["user", "alice"]) is under


def test_prefix_range_orders_like_a_sorted_store():
    names = [
        ["user", "alice"],
        ["user", "alice", "a"],
        ["user", "alice", "zzz", "z"],
        ["user", "alice", "~"],
        ["user", "alice!"],
        ["user", "alice%"],
        ["user", "alicea"],
        ["user", "alic"],
    ]
    encoded = sorted(encode_namespace(n) for n in names)
    exact, lo, hi = prefix_range(["user", "alice"])
    selected = [decode_namespace(e) for e in encoded if e == exact or lo <= e < hi]
    assert selected == [("user", "alice"), ("user", "alice", "a"), ("user", "alice", "zzz", "z"), ("user", "alice", "~")]


def test_ancestors_shortest_first():
    assert ancestors(["a", "b", "c/d"]) == ["a", "a\x1eb", "a\x1eb\x1ec%2Fd"]
    assert ancestors([]) == []
    assert ancestors(["only"]) == ["only"]


@pytest.mark.parametrize(
    "ns, prefix, suffix, expected",
    [
        (["a", "b", "c"], None, None, True),
        (["a", "b", "c"], [], [], True),
        (["a", "b", "c"], ["a"], None, True),
        (["a", "b", "c"], ["a", "b", "c"], None, True),
        (["a", "b", "c"], ["a", "b", "c", "d"], None, False),
        (["a", "b", "c"], ["b"], None, False),
        (["a", "b", "c"], ["*", "b"], None, True),
        (["a", "b", "c"], ["*", "*", "*"], None, True),
        (["a", "b", "c"], ["*", "*", "*", "*"], None, False),
        (["a", "b", "c"], None, ["c"], True),
        (["a", "b", "c"], None, ["b"], False),
        (["a", "b", "c"], None, ["*", "c"], True),
        (["a", "b", "c"], None, ["a", "*", "c"], True),
        (["a", "b", "c"], None, ["x", "a", "b", "c"], False),
        (["a", "b", "c"], ["a"], ["c"], True),
        (["a", "b", "c"], ["a"], ["b"], False),
        (["a"], ["a"], ["a"], True),
        (["a", "b"], ["a", "b"], ["a", "b"], True),
        (["user", "alicea"], ["user", "alice"], None, False),
        (["*"], ["x"], None, False),
        (["x"], ["*"], None, True),
    ],
)
def test_match_namespace_pattern(ns, prefix, suffix, expected):
    assert match_namespace_pattern(ns, prefix, suffix) is expected


def test_stored_form_has_a_byte_limit_that_fits_every_backend():
    from memsvc.core.namespaces import MAX_NAMESPACE_BYTES

    fits = ["user", "a" * (MAX_NAMESPACE_BYTES - len("user") - 1)]
    assert validate_namespace(fits, max_depth=10) == tuple(fits)
    with pytest.raises(InvalidArgument) as raised:
        validate_namespace(fits[:1] + [fits[1] + "a"], max_depth=10)
    assert raised.value.details["max_bytes"] == MAX_NAMESPACE_BYTES
    with pytest.raises(InvalidArgument):  # percent-encoding triples non-ASCII: 400 é are 2400 bytes
        validate_namespace(["user", "é" * 400], max_depth=10)
