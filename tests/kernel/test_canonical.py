"""Strict JSON and RFC 8785 canonical bytes (SPEC §7 "Hardening"; vectors/jcs)."""

from __future__ import annotations

import enum
import hashlib
import json
import math
import struct
from decimal import Decimal
from pathlib import Path
from types import MappingProxyType
from typing import Any

import pytest
import rfc8785
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from verification.kernel.canonical import (
    MAX_SAFE_INTEGER,
    canonical_text,
    canonicalize,
    format_number,
    loads_strict,
)
from verification.kernel.errors import StrictJSONError
from verification.kernel.reasons import Reason

ES6_FILE_SHA256 = "b9f7a8e75ef22a835685a52ccba7f7d6bdc99e34b010992cbc5864cd12be6892"  # TESTDATA-README, 10000 lines
JCS_NAMES = ["arrays", "french", "structures", "unicode", "values", "weird"]


@pytest.fixture(scope="module")
def jcs_dir(vectors_dir: Path) -> Path:
    return vectors_dir / "jcs"


def _refusal(data: bytes | str) -> Reason:
    with pytest.raises(StrictJSONError) as info:
        loads_strict(data)
    return info.value.reason


def _canonical_refusal(value: Any) -> Reason:
    with pytest.raises(StrictJSONError) as info:
        canonicalize(value)
    return info.value.reason


# --- RFC 8785 vectors ----------------------------------------------------------------------------------------


def test_every_jcs_vector_is_present(jcs_dir: Path) -> None:
    assert sorted(p.stem for p in (jcs_dir / "input").glob("*.json")) == JCS_NAMES


@pytest.mark.parametrize("name", JCS_NAMES)
def test_jcs_vector_reproduces_byte_for_byte(jcs_dir: Path, name: str) -> None:
    produced = canonicalize(loads_strict((jcs_dir / "input" / f"{name}.json").read_bytes()))
    assert produced == (jcs_dir / "output" / f"{name}.json").read_bytes()
    assert produced == bytes.fromhex((jcs_dir / "outhex" / f"{name}.txt").read_text())
    # The canonical bytes are themselves strict JSON and a fixed point.
    assert canonicalize(loads_strict(produced)) == produced


def _es6_lines(jcs_dir: Path) -> list[tuple[str, float, str]]:
    raw = (jcs_dir / "es6numbers_first10000.txt").read_bytes()
    assert hashlib.sha256(raw).hexdigest() == ES6_FILE_SHA256
    rows = []
    for line in raw.decode("ascii").splitlines():
        hex_bits, expected = line.split(",")
        (value,) = struct.unpack(">d", int(hex_bits, 16).to_bytes(8, "big"))
        rows.append((hex_bits, value, expected))
    return rows


def test_es6_number_vectors_all_10000(jcs_dir: Path) -> None:
    rows = _es6_lines(jcs_dir)
    assert len(rows) == 10_000
    wrong = [(h, expected, format_number(v)) for h, v, expected in rows if format_number(v) != expected]
    assert wrong == []


def test_es6_numbers_inside_canonicalize(jcs_dir: Path) -> None:
    """canonicalize prints each number as format_number does, except the ones it refuses on purpose."""
    refused = 0
    for _h, value, expected in _es6_lines(jcs_dir):
        if 2.0**53 <= abs(value) < 1e21:
            assert _canonical_refusal(value) is Reason.INTEGER_OUT_OF_RANGE
            refused += 1
        else:
            assert canonicalize([value]) == f"[{expected}]".encode()
    assert 0 < refused < 10_000


@pytest.mark.parametrize(
    ("value", "text"),
    [
        (0.0, "0"),
        (-0.0, "0"),
        (1.0, "1"),
        (-1.5, "-1.5"),
        (1e21, "1e+21"),
        (1e-7, "1e-7"),
        (0.000001, "0.000001"),
        (123456789.0, "123456789"),
        (5e-324, "5e-324"),
        (1.7976931348623157e308, "1.7976931348623157e+308"),
        (9007199254740991, "9007199254740991"),
        (0.1 + 0.2, "0.30000000000000004"),
    ],
)
def test_format_number_es6_forms(value: float, text: str) -> None:
    assert format_number(value) == text


@pytest.mark.parametrize("value", [math.nan, math.inf, -math.inf])
def test_format_number_refuses_non_finite(value: float) -> None:
    with pytest.raises(StrictJSONError) as info:
        format_number(value)
    assert info.value.reason is Reason.NON_FINITE_NUMBER


def test_format_number_refuses_bool() -> None:
    with pytest.raises(StrictJSONError) as info:
        format_number(True)
    assert info.value.reason is Reason.UNSUPPORTED_JSON_VALUE


# --- strict parsing: each refusal with its exact code --------------------------------------------------------


@pytest.mark.parametrize(
    ("data", "reason"),
    [
        # not JSON, trailing garbage, bad UTF-8, BOM
        (b"", Reason.INVALID_JSON),
        (b"   ", Reason.INVALID_JSON),
        (b"{", Reason.INVALID_JSON),
        (b"{} {}", Reason.INVALID_JSON),
        (b'{"a":1} x', Reason.INVALID_JSON),
        (b"[1,]", Reason.INVALID_JSON),
        (b"{'a': 1}", Reason.INVALID_JSON),
        (b"01", Reason.INVALID_JSON),
        (b"+1", Reason.INVALID_JSON),
        (b".5", Reason.INVALID_JSON),
        (b"1.", Reason.INVALID_JSON),
        (b"\x00", Reason.INVALID_JSON),
        (b'"\x01"', Reason.INVALID_JSON),  # raw control character in a string
        (b'"\\x41"', Reason.INVALID_JSON),
        (b'"\\u12"', Reason.INVALID_JSON),
        (b"\xff", Reason.INVALID_JSON),
        (b'"\xc3"', Reason.INVALID_JSON),  # truncated UTF-8 sequence
        (b'"\xed\xa0\x80"', Reason.INVALID_JSON),  # a UTF-8-encoded surrogate is not UTF-8
        (b"\xef\xbb\xbf{}", Reason.INVALID_JSON),  # BOM
        ("\ufeff{}", Reason.INVALID_JSON),
        (b"\x0c1", Reason.INVALID_JSON),  # form feed is not JSON whitespace
        ("\u00a01", Reason.INVALID_JSON),  # nor is NBSP
        ("\uff11", Reason.INVALID_JSON),  # a fullwidth digit is not a digit
        (b"[" * 100_000, Reason.INVALID_JSON),  # nesting deeper than the parser goes
        (b"true false", Reason.INVALID_JSON),
        # duplicate keys, at any depth
        (b'{"a":1,"a":2}', Reason.DUPLICATE_KEY),
        (b'{"a":1,"a":1}', Reason.DUPLICATE_KEY),
        (b'{"a":1,"\\u0061":2}', Reason.DUPLICATE_KEY),  # same key after unescaping
        (b'{"x":{"y":[{"z":1,"z":2}]}}', Reason.DUPLICATE_KEY),
        (b'[[[{"k":null,"k":null}]]]', Reason.DUPLICATE_KEY),
        # NaN / Infinity, and overflow to infinity
        (b"NaN", Reason.NON_FINITE_NUMBER),
        (b"Infinity", Reason.NON_FINITE_NUMBER),
        (b"-Infinity", Reason.NON_FINITE_NUMBER),
        (b'{"a":[1,NaN]}', Reason.NON_FINITE_NUMBER),
        (b"1e400", Reason.NON_FINITE_NUMBER),
        (b"-1e400", Reason.NON_FINITE_NUMBER),
        (b'{"n":[1.7976931348623159e308]}', Reason.NON_FINITE_NUMBER),
        # lone surrogates, in values and keys
        (b'"\\ud800"', Reason.LONE_SURROGATE),
        (b'"\\udc00"', Reason.LONE_SURROGATE),
        (b'"a\\ud83d"', Reason.LONE_SURROGATE),  # high surrogate without its low half
        (b'"\\ude02\\ud83d"', Reason.LONE_SURROGATE),  # the pair in the wrong order
        (b'{"\\ud800":1}', Reason.LONE_SURROGATE),
        (b'{"ok":{"\\udfff":1}}', Reason.LONE_SURROGATE),
        (b'["x",["\\ud800x"]]', Reason.LONE_SURROGATE),
        ('"\ud800"', Reason.LONE_SURROGATE),  # a str argument carrying a raw surrogate
        # integer literals outside ±(2^53−1)
        (b"9007199254740992", Reason.INTEGER_OUT_OF_RANGE),
        (b"-9007199254740992", Reason.INTEGER_OUT_OF_RANGE),
        (b"100000000000000000000", Reason.INTEGER_OUT_OF_RANGE),
        (b'{"a":[18446744073709551616]}', Reason.INTEGER_OUT_OF_RANGE),
        (b"1" * 5000, Reason.INTEGER_OUT_OF_RANGE),  # longer than Python's int() digit limit
    ],
)
def test_strict_refusal_codes(data: bytes | str, reason: Reason) -> None:
    assert _refusal(data) is reason


@pytest.mark.parametrize("data", [None, 5, 1.5, ["[]"], {"a": 1}])
def test_non_text_input_is_invalid_json(data: Any) -> None:
    assert _refusal(data) is Reason.INVALID_JSON


@pytest.mark.parametrize(
    ("data", "value"),
    [
        (b"9007199254740991", MAX_SAFE_INTEGER),
        (b"-9007199254740991", -MAX_SAFE_INTEGER),
        (b"-0", 0),
        (b"1e20", 1e20),  # an exponent makes it a number, not an integer literal
        (b"9007199254740992.0", 9007199254740992.0),
        (b"1e-400", 0.0),  # underflow to zero is not a refusal
        (b'"\\ud83d\\ude02"', "\U0001f602"),  # a surrogate pair is one character
        (b' \t\r\n{"a" : [ 1 , 2 ] }\n', {"a": [1, 2]}),
        (bytearray(b"[true,false,null]"), [True, False, None]),
        (memoryview(b'"\\u00e9"'), "é"),
        ('{"é":"😀"}', {"é": "😀"}),
        (b'{"a":{},"b":{"a":{}}}', {"a": {}, "b": {"a": {}}}),  # the same key in different objects is fine
    ],
)
def test_strict_accepts(data: bytes | str, value: Any) -> None:
    parsed = loads_strict(data)
    assert parsed == value
    assert type(parsed) is type(value)


def test_refusal_detail_names_the_duplicate_key() -> None:
    with pytest.raises(StrictJSONError) as info:
        loads_strict(b'{"outer":{"seq":1,"seq":2}}')
    assert "seq" in info.value.detail
    assert info.value.reason.value == "duplicate-key"


# --- canonicalize: refusals and the points where json.dumps goes wrong ---------------------------------------


class _Colour(enum.StrEnum):
    RED = "red"


@pytest.mark.parametrize(
    ("value", "reason"),
    [
        (b"bytes", Reason.UNSUPPORTED_JSON_VALUE),
        ({1, 2}, Reason.UNSUPPORTED_JSON_VALUE),
        (object(), Reason.UNSUPPORTED_JSON_VALUE),
        (Decimal("1.5"), Reason.UNSUPPORTED_JSON_VALUE),
        ({1: "a"}, Reason.UNSUPPORTED_JSON_VALUE),
        ({None: "a"}, Reason.UNSUPPORTED_JSON_VALUE),
        ({"a": [1, {"b": b"x"}]}, Reason.UNSUPPORTED_JSON_VALUE),
        (math.nan, Reason.NON_FINITE_NUMBER),
        ([math.inf], Reason.NON_FINITE_NUMBER),
        ({"a": -math.inf}, Reason.NON_FINITE_NUMBER),
        ("\ud800", Reason.LONE_SURROGATE),
        (["ok", "x\udfff"], Reason.LONE_SURROGATE),
        ({"\udc00": 1}, Reason.LONE_SURROGATE),
        (2**53, Reason.INTEGER_OUT_OF_RANGE),
        (-(2**53), Reason.INTEGER_OUT_OF_RANGE),
        ({"n": 10**30}, Reason.INTEGER_OUT_OF_RANGE),
        (2.0**53, Reason.INTEGER_OUT_OF_RANGE),  # would print as 9007199254740992, which loads_strict refuses
        (1e20, Reason.INTEGER_OUT_OF_RANGE),
        (-9.99e20, Reason.INTEGER_OUT_OF_RANGE),
    ],
)
def test_canonicalize_refusal_codes(value: Any, reason: Reason) -> None:
    assert _canonical_refusal(value) is reason


def test_canonicalize_refuses_a_cycle() -> None:
    cycle: list[Any] = []
    cycle.append(cycle)
    assert _canonical_refusal(cycle) is Reason.UNSUPPORTED_JSON_VALUE


def test_bool_is_not_an_int() -> None:
    assert canonicalize({"b": True, "a": 1, "c": False}) == b'{"a":1,"b":true,"c":false}'
    assert canonicalize([True, 1, 1.0]) == b"[true,1,1]"


def test_keys_sort_by_utf16_code_units_not_code_points() -> None:
    value = {"\uffff": 2, "\U0001f600": 1, "a": 0}
    # U+1F600 is the surrogate pair D83D DE00, which sorts before FFFF in UTF-16 ...
    assert canonical_text(value) == '{"a":0,"\U0001f600":1,"\uffff":2}'
    # ... while Python's sort_keys orders by code point: exactly the mistake SPEC §7 warns about.
    assert json.dumps(value, sort_keys=True, ensure_ascii=False, separators=(",", ":")) != canonical_text(value)


def test_string_escapes_are_rfc8785() -> None:
    text = '"\\/\b\f\n\r\t\x00\x1f\x7f é€😀</script>'
    assert canonical_text(text) == '"\\"\\\\/\\b\\f\\n\\r\\t\\u0000\\u001f\x7f é€😀</script>"'
    assert canonicalize(text) == canonical_text(text).encode("utf-8")


def test_float_layout_differs_from_json_dumps() -> None:
    assert canonicalize([1e21, 1.0, 1e-7, 100.0]) == b"[1e+21,1,1e-7,100]"
    assert json.dumps([1e21, 1.0, 1e-7, 100.0]) == "[1e+21, 1.0, 1e-07, 100.0]"


def test_other_mappings_sequences_and_str_enums() -> None:
    assert canonicalize(MappingProxyType({"b": (1, 2), "a": _Colour.RED})) == b'{"a":"red","b":[1,2]}'
    assert canonicalize([]) == b"[]" and canonicalize({}) == b"{}"
    assert canonicalize(None) == b"null"


def test_canonical_text_matches_bytes() -> None:
    value = {"é": ["€", 0.5, None]}
    assert canonicalize(value) == canonical_text(value).encode("utf-8")
    assert canonical_text(value) == '{"é":["€",0.5,null]}'


# --- properties ----------------------------------------------------------------------------------------------

_floats = st.floats(allow_nan=False, allow_infinity=False).filter(lambda f: not 2.0**53 <= abs(f) < 1e21)
_scalars = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-MAX_SAFE_INTEGER, max_value=MAX_SAFE_INTEGER)
    | _floats
    | st.text()
)
json_values = st.recursive(
    _scalars,
    lambda children: st.lists(children, max_size=5) | st.dictionaries(st.text(max_size=8), children, max_size=5),
    max_leaves=25,
)


@settings(max_examples=400, suppress_health_check=[HealthCheck.too_slow])
@given(json_values)
def test_canonical_round_trip_is_a_fixed_point(value: Any) -> None:
    once = canonicalize(value)
    assert canonicalize(loads_strict(once)) == once


@settings(max_examples=300)
@given(json_values)
def test_agrees_with_the_rfc8785_package(value: Any) -> None:
    assert canonicalize(value) == rfc8785.dumps(value)


@settings(max_examples=300)
@given(json_values)
def test_canonical_bytes_parse_back_to_an_equal_value(value: Any) -> None:
    # Numbers compare by value in Python (1 == 1.0, -0.0 == 0), and the shortest ES6 form round-trips exactly.
    assert loads_strict(canonicalize(value)) == value


# --- fuzz: loads_strict never raises anything but StrictJSONError --------------------------------------------

_json_tokens = st.sampled_from(
    [
        "{", "}", "[", "]", ":", ",", '"', '\\"', "\\u", "d800", "dc00", "\\ud83d\\ude02", "0061", "a", "\\",
        "NaN", "Infinity", "-", "+", "1", "0", "9007199254740992", "1e400", "e", "E", ".", "true", "false",
        "null", " ", "\n", "\t", "\x00", "\x7f", "é", "\ufeff", "\ud800",
    ]
)  # fmt: skip


def _strict_or_refused(data: bytes | str) -> None:
    try:
        loads_strict(data)
    except StrictJSONError as exc:
        assert isinstance(exc.reason, Reason)


@settings(max_examples=500)
@given(st.text(alphabet=st.characters(exclude_categories=())))
def test_fuzz_text(data: str) -> None:
    _strict_or_refused(data)


@settings(max_examples=500)
@given(st.binary())
def test_fuzz_bytes(data: bytes) -> None:
    _strict_or_refused(data)


@settings(max_examples=500)
@given(st.lists(_json_tokens, max_size=30).map("".join))
def test_fuzz_json_shaped_text(data: str) -> None:
    _strict_or_refused(data)
    _strict_or_refused(data.encode("utf-8", "surrogatepass"))


@settings(max_examples=300, suppress_health_check=[HealthCheck.too_slow])
@given(json_values, st.data())
def test_fuzz_mutated_canonical_bytes(value: Any, data: st.DataObject) -> None:
    raw = bytearray(canonicalize(value))
    for _ in range(data.draw(st.integers(min_value=1, max_value=4))):
        position = data.draw(st.integers(min_value=0, max_value=len(raw)))
        raw[position:position] = data.draw(st.binary(min_size=1, max_size=3))
    _strict_or_refused(bytes(raw))
