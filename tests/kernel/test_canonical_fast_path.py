"""canonical_text's fast path (json's C encoder) against its definition (``_emit``), and loads_strict's direct scan.

The fast path is taken only when ``_fast_path_admits`` says the C encoder writes RFC 8785 text; whatever it takes,
``canonical_text`` must give the bytes, or the refusal with its reason code and words, that ``_emit`` gives.
"""

from __future__ import annotations

import enum
import json
from collections import OrderedDict, UserDict
from types import MappingProxyType
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from verification.kernel import canonical
from verification.kernel.canonical import MAX_SAFE_INTEGER, canonical_text, loads_strict
from verification.kernel.errors import StrictJSONError
from verification.kernel.reasons import Reason


class _Str(str):
    def __str__(self) -> str:
        return "overridden"


class _Int(int):
    def __repr__(self) -> str:
        return "overridden"


class _Color(enum.IntEnum):
    RED = 7


class _Name(enum.StrEnum):
    ALICE = "alice"


class _Dict(dict):  # type: ignore[type-arg]
    def __getitem__(self, key: Any) -> Any:
        return "overridden"


class _List(list):  # type: ignore[type-arg]
    def __iter__(self) -> Any:
        return iter(["overridden"])


def _outcome(write: Any, value: Any) -> tuple[str, str]:
    """("ok", text) or (reason code, words): what ``write`` makes of ``value``."""
    try:
        return "ok", write(value)
    except StrictJSONError as exc:
        return exc.reason.value, exc.detail


# Characters that decide the fast path: control characters, quotes and backslashes, DEL, the BMP below and above the
# surrogates (U+E000 and up sorts after non-BMP by UTF-16 code unit, before it by code point), non-BMP, and lone
# surrogates (refused).
_chars = (
    st.characters(min_codepoint=0, max_codepoint=0x7F)
    | st.sampled_from(
        ["\u00e9", "\u4e2d", "\ud7ff", "\ue000", "\uffff", "\U0001f600", "\U00010000", "\ud800", "\udfff"]
    )
    | st.characters(exclude_categories=())
)
_text = st.text(_chars, max_size=6)
_ints = (
    st.integers(min_value=-MAX_SAFE_INTEGER, max_value=MAX_SAFE_INTEGER)
    | st.sampled_from([MAX_SAFE_INTEGER, -MAX_SAFE_INTEGER, MAX_SAFE_INTEGER + 1, -MAX_SAFE_INTEGER - 1, 2**64])
    | st.integers()
)
_floats = st.floats() | st.sampled_from([0.0, -0.0, 1.0, 1e21, 1e20, 2.0**53, 5e-324, 0.1])
_leaves = (
    st.none()
    | st.booleans()
    | _ints
    | _floats
    | _text
    | st.builds(_Str, _text)
    | st.builds(_Int, st.integers(min_value=-1000, max_value=1000))
    | st.just(_Color.RED)
    | st.just(_Name.ALICE)
)
_keys = _text | st.builds(_Str, _text) | st.sampled_from([1, True, None, 1.5, _Name.ALICE])


def _containers(children: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    dicts = st.dictionaries(_keys, children, max_size=5)
    lists = st.lists(children, max_size=5)
    return (
        dicts
        | lists
        | lists.map(tuple)
        | dicts.map(_Dict)
        | lists.map(_List)
        | dicts.map(OrderedDict)
        | dicts.map(MappingProxyType)
        | dicts.map(UserDict)
    )


json_like = st.recursive(_leaves, _containers, max_leaves=30)

# Values the fast path admits most of the time: plain containers, keys below U+D800, no floats.
_plain_keys = st.text(st.characters(max_codepoint=0xD7FF, exclude_categories=()), max_size=8)
plain = st.recursive(
    st.none() | st.booleans() | st.integers(min_value=-MAX_SAFE_INTEGER, max_value=MAX_SAFE_INTEGER) | _text,
    lambda children: st.lists(children, max_size=5) | st.dictionaries(_plain_keys, children, max_size=5),
    max_leaves=30,
)


@settings(max_examples=400)
@given(json_like)
def test_fast_and_exact_paths_give_the_same_bytes_or_refusal(value: Any) -> None:
    assert _outcome(canonical_text, value) == _outcome(canonical._exact_text, value)


@settings(max_examples=400)
@given(plain)
def test_the_c_encoder_writes_the_exact_text_whenever_admitted(value: Any) -> None:
    if not canonical._fast_path_admits(value):
        return
    fast = "".join(canonical._C_CANONICAL(value, 0))
    outcome = _outcome(canonical._exact_text, value)
    if outcome[0] == "ok":
        assert fast == outcome[1]
    else:  # admitted with a lone surrogate in a string: canonical_text finds it in the text
        assert outcome[0] == Reason.LONE_SURROGATE.value
        assert canonical._SURROGATE.search(fast) is not None
        assert _outcome(canonical_text, value) == outcome


def test_a_receipt_body_takes_the_fast_path(monkeypatch: pytest.MonkeyPatch) -> None:
    body = {
        "format": "acretix-verify/proof/2",
        "seq": 3,
        "prev_hash": None,
        "payload": {"verdict": "PASS", "flagged": False, "checks": [{"criterion": "c1", "note": "é\n\u4e2d"}]},
    }
    expected = canonical._exact_text(body)

    def no_exact_path(value: Any, out: list[str]) -> None:
        raise AssertionError("the exact path was taken")

    monkeypatch.setattr(canonical, "_emit", no_exact_path)
    assert canonical_text(body) == expected


@pytest.mark.parametrize(
    "value, admitted",
    [
        ({"a": [1, "x", None, True, False, (), {}]}, True),
        ({"\u4e2d": 1, "\ud7ff": 2}, True),
        ({"\ue000": 1}, False),  # U+E000 and up: code point order is not UTF-16 order against non-BMP keys
        ({"\U0001f600": 1}, False),
        ({"a": 1.0}, True),  # integral: written as the int 1, as ES6 prints it
        ({"a": -0.0}, True),
        ({"a": 0.5, "b": 1e-4, "c": 123456.789, "d": 1e15 + 0.5}, True),  # repr's positional range is ES6's
        ({"a": 1e-5}, False),  # repr: 1e-05, ES6: 0.00001
        ({"a": 2.0**53}, False),  # refused by _emit: an integer literal outside ±(2^53−1)
        ({"a": 1e16}, False),
        ({"a": 5e-324}, False),
        ({"a": float("inf")}, False),
        ({"a": MAX_SAFE_INTEGER}, True),
        ({"a": MAX_SAFE_INTEGER + 1}, False),
        ({"a": -MAX_SAFE_INTEGER - 1}, False),
        ({1: "a"}, False),
        ({_Str("a"): 1}, False),
        ({"a": _Str("b")}, False),
        ({"a": _Color.RED}, False),
        (OrderedDict(a=1), False),
        (_List([1]), False),
        ({"a": {1, 2}}, False),
        (json.loads("[" * 64 + "]" * 64), True),
        (json.loads("[" * 65 + "]" * 65), False),
    ],
)
def test_what_the_fast_path_admits(value: Any, admitted: bool) -> None:
    assert bool(canonical._fast_path_admits(value)) is admitted
    assert _outcome(canonical_text, value) == _outcome(canonical._exact_text, value)


@settings(max_examples=600)
@given(st.floats() | st.integers(min_value=-(2**60), max_value=2**60).map(float))
def test_every_float_gives_the_exact_bytes_or_refusal(x: float) -> None:
    for value in ([x], {"k": x, "n": [x, 1]}, {"k": [x, {"m": x}]}):
        assert _outcome(canonical_text, value) == _outcome(canonical._exact_text, value)


def test_a_run_payloads_integral_floats_take_the_fast_path(monkeypatch: pytest.MonkeyPatch) -> None:
    """A PASS's score, confidence and weights are 1.0: written by the C encoder as 1, not by ``_emit``."""
    body = {"payload": {"score": 1.0, "confidence": 1.0, "criteria": [{"weight": 1.0}, {"weight": 0.25}]}, "seq": 0}
    expected = canonical._exact_text(body)
    assert expected == '{"payload":{"confidence":1,"criteria":[{"weight":1},{"weight":0.25}],"score":1},"seq":0}'

    def no_exact_path(value: Any, out: list[str]) -> None:
        raise AssertionError("the exact path was taken")

    monkeypatch.setattr(canonical, "_emit", no_exact_path)
    assert canonical_text(body) == expected
    assert body["payload"]["score"] == 1.0 and type(body["payload"]["score"]) is float  # the caller's value untouched


def test_a_cycle_is_not_admitted_and_is_refused() -> None:
    cycle: list[Any] = []
    cycle.append(cycle)
    cycle.append(cycle)
    assert not canonical._fast_path_admits(cycle)
    with pytest.raises(StrictJSONError) as info:
        canonical_text(cycle)
    assert info.value.reason is Reason.UNSUPPORTED_JSON_VALUE


@pytest.mark.parametrize(
    "value, reason",
    [
        ({"a": "x\ud800"}, Reason.LONE_SURROGATE),  # admitted by the walk, caught in the C encoder's text
        (["\udfff"], Reason.LONE_SURROGATE),
        ({"\ud800": 1}, Reason.LONE_SURROGATE),
        ({"a": [MAX_SAFE_INTEGER + 1]}, Reason.INTEGER_OUT_OF_RANGE),
        ({"a": float("nan")}, Reason.NON_FINITE_NUMBER),
        ({"a": 1e20}, Reason.INTEGER_OUT_OF_RANGE),
        ({1: 1}, Reason.UNSUPPORTED_JSON_VALUE),
        ({None: 1}, Reason.UNSUPPORTED_JSON_VALUE),
        ({"a": {1, 2}}, Reason.UNSUPPORTED_JSON_VALUE),
        ({"a": b"x"}, Reason.UNSUPPORTED_JSON_VALUE),
    ],
)
def test_each_refusal_keeps_its_reason_code(value: Any, reason: Reason) -> None:
    with pytest.raises(StrictJSONError) as info:
        canonical_text(value)
    assert info.value.reason is reason
    assert _outcome(canonical_text, value) == _outcome(canonical._exact_text, value)


# --- loads_strict's direct scan ------------------------------------------------------------------------------


@pytest.mark.parametrize("text", ['{"a":1}', ' {"a":1}', '{"a":1} ', '\n\t{"a":1}\r\n ', "1", " 1 ", '""', "[]"])
def test_surrounding_whitespace_is_accepted(text: str) -> None:
    assert loads_strict(text) == json.loads(text)


@pytest.mark.parametrize("text", ["", " ", "1 2", '{"a":1}x', '{"a":1} {}', "[1,]", '{"a" 1}', "x", " x", "[1] ]"])
def test_invalid_json_is_refused_with_the_decoders_words(text: str) -> None:
    with pytest.raises(json.JSONDecodeError) as expected:
        json.loads(text)
    with pytest.raises(StrictJSONError) as info:
        loads_strict(text)
    assert info.value.reason is Reason.INVALID_JSON
    exc = expected.value
    assert info.value.detail == f"{exc.msg} at line {exc.lineno} column {exc.colno}"


@pytest.mark.parametrize(
    "text, reason",
    [
        ('{"a":1,"a":2} ', Reason.DUPLICATE_KEY),
        (' [{"b":{"a":1,"a":1}}]', Reason.DUPLICATE_KEY),
        ("[NaN] ", Reason.NON_FINITE_NUMBER),
        (" 1e400", Reason.NON_FINITE_NUMBER),
        ("9007199254740992 ", Reason.INTEGER_OUT_OF_RANGE),
        (' "\\ud800"', Reason.LONE_SURROGATE),
        ("\ufeff{}", Reason.INVALID_JSON),
    ],
)
def test_refusals_with_surrounding_whitespace(text: str, reason: Reason) -> None:
    with pytest.raises(StrictJSONError) as info:
        loads_strict(text)
    assert info.value.reason is reason
