"""Strict JSON in, RFC 8785 (JCS) canonical bytes out (SPEC §7 "Hardening").

JSON that is hashed or signed is parsed strictly: duplicate keys at any depth, NaN/Infinity (and numbers that
overflow to infinity), lone surrogates and integer literals outside ±(2^53−1) are refused, each with its own
reason code. Canonical bytes are RFC 8785 exactly: object members sorted by their UTF-16 code units (not by
code point, as ``json.dumps(sort_keys=True)`` does) and numbers printed as ECMAScript's Number.prototype.toString.

One deliberate restriction beyond RFC 8785: ``canonicalize`` refuses a float whose canonical form would be an
integer literal outside ±(2^53−1) (an integral float with 2^53 ≤ |x| < 1e21, e.g. ``1e20``), because
``loads_strict`` refuses that literal. Every canonical byte string we produce therefore re-parses strictly:
we never sign bytes that our own verifier would refuse.
"""

from __future__ import annotations

import _json
import json
import math
import re
from collections.abc import Callable, Iterable, Mapping
from typing import Any, Final, NoReturn

from verification.kernel.errors import StrictJSONError
from verification.kernel.reasons import Reason

MAX_SAFE_INTEGER: Final = 2**53 - 1
_INTEGER_LITERAL_FLOOR: Final = 2.0**53  # floats at or above this print as integer literals ...
_EXPONENT_FORM_FLOOR: Final = 1e21  # ... until ES6 switches to exponent form here.
_MAX_SAFE_DIGITS: Final = len(str(MAX_SAFE_INTEGER))
_UTF8_BOM: Final = b"\xef\xbb\xbf"
_SURROGATE: Final = re.compile("[\ud800-\udfff]")

# RFC 8785 §3.2.2.2: the two-character escapes, every other control character as \u00xx (lowercase hex),
# and nothing else escaped (not "/", not DEL, not non-ASCII).
_ESCAPES: Final[dict[str, str]] = {
    '"': '\\"',
    "\\": "\\\\",
    "\b": "\\b",
    "\f": "\\f",
    "\n": "\\n",
    "\r": "\\r",
    "\t": "\\t",
}
for _code in range(0x20):
    _ESCAPES.setdefault(chr(_code), f"\\u{_code:04x}")
_NEEDS_ESCAPE: Final = re.compile('["\\\\\x00-\x1f]')


# --- strict parsing ------------------------------------------------------------------------------------------


def _preview(text: str, limit: int = 40) -> str:
    shown = text if len(text) <= limit else text[:limit] + "…"
    return shown.encode("unicode_escape").decode("ascii")


def _object_pairs(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    obj = dict(pairs)  # built in C; a repeated key leaves fewer entries than pairs
    if len(obj) == len(pairs):
        return obj
    seen: set[str] = set()
    for key, _ in pairs:
        if key in seen:
            raise StrictJSONError(Reason.DUPLICATE_KEY, f"key {_preview(key)!r} appears more than once")
        seen.add(key)
    raise StrictJSONError(Reason.DUPLICATE_KEY, "a key appears more than once")  # pragma: no cover - found above


def _parse_constant(name: str) -> Any:
    raise StrictJSONError(Reason.NON_FINITE_NUMBER, f"{name} is not a JSON number")


def _parse_float(literal: str) -> float:
    value = float(literal)
    if not math.isfinite(value):
        raise StrictJSONError(Reason.NON_FINITE_NUMBER, f"{_preview(literal)} overflows to infinity")
    return value


def _parse_int(literal: str) -> int:
    if len(literal) < _MAX_SAFE_DIGITS:  # at most 15 digits (and a sign): always within ±(2^53−1)
        return int(literal)
    # Count digits before converting: a 5,000-digit literal must not reach int() (and its digit limit).
    if len(literal.lstrip("-")) <= _MAX_SAFE_DIGITS:
        value = int(literal)
        if abs(value) <= MAX_SAFE_INTEGER:
            return value
    raise StrictJSONError(Reason.INTEGER_OUT_OF_RANGE, f"integer literal {_preview(literal)} is outside ±(2^53−1)")


_DECODER: Final = json.JSONDecoder(
    object_pairs_hook=_object_pairs,
    parse_float=_parse_float,
    parse_int=_parse_int,
    parse_constant=_parse_constant,
    strict=True,  # raw control characters inside strings are refused
)


# The decoder's scanner (json's C scanner): one value at an index; ``decode`` wraps it for whitespace and errors.
_SCAN: Final[Callable[[str, int], tuple[Any, int]]] = _DECODER.scan_once  # type: ignore[attr-defined]
_JSON_WHITESPACE: Final = re.compile("[ \t\n\r]*")  # json.decoder.WHITESPACE


def _decode(text: str) -> Any:
    """``_DECODER.decode(text)``, calling its scanner directly when the value starts at the first character.

    ``decode`` also skips leading whitespace and words its errors; it is called for those cases, so the value, and
    every refusal with its words, are the same.
    """
    try:
        value, end = _SCAN(text, 0)
    except StopIteration:  # leading whitespace, or no value: ``decode`` skips the one and words the other
        return _DECODER.decode(text)
    if end != len(text) and _JSON_WHITESPACE.fullmatch(text, end) is None:
        return _DECODER.decode(text)  # extra data after the value: refused with decode's words
    return value


_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F]")


def _refuse_lone_surrogates(value: Any) -> None:
    """Walk the parsed value (iteratively: depth is bounded only by the parser) and refuse any lone surrogate.

    The parser joins a valid ``\\ud83d\\ude02`` pair into one character, so any surrogate left is lone.
    """
    stack: list[Any] = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            if _SURROGATE.search(item):
                raise StrictJSONError(Reason.LONE_SURROGATE, f"string {_preview(item)!r} holds a lone surrogate")
        elif isinstance(item, dict):
            for key in item:
                if _SURROGATE.search(key):
                    raise StrictJSONError(Reason.LONE_SURROGATE, f"key {_preview(key)!r} holds a lone surrogate")
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)


def loads_strict(data: bytes | str) -> Any:
    """Parse JSON strictly (SPEC §7); refuse with ``StrictJSONError`` and the precise reason code.

    Bytes must be UTF-8 without a byte order mark. Refused: anything that is not exactly one JSON value
    (``invalid-json``), a repeated key in any object (``duplicate-key``), NaN/Infinity or a number that overflows
    to infinity (``non-finite-number``), a lone UTF-16 surrogate in a key or value (``lone-surrogate``), an
    integer literal outside ±(2^53−1) (``integer-out-of-range``).
    """
    if type(data) is str:  # the usual case first (an envelope, a proof already decoded)
        text = data
    elif isinstance(data, (bytes, bytearray, memoryview)):
        raw = bytes(data)
        if raw.startswith(_UTF8_BOM):
            raise StrictJSONError(Reason.INVALID_JSON, "a byte order mark is not allowed")
        try:
            text = raw.decode("utf-8")  # strict: also refuses UTF-8-encoded surrogates
        except UnicodeDecodeError as exc:
            raise StrictJSONError(Reason.INVALID_JSON, f"not UTF-8 at byte {exc.start}") from None
    elif isinstance(data, str):
        text = data
    else:
        raise StrictJSONError(Reason.INVALID_JSON, f"expected bytes or str, got {type(data).__name__}")
    if text.startswith("\ufeff"):
        raise StrictJSONError(Reason.INVALID_JSON, "a byte order mark is not allowed")
    try:
        value = _decode(text)
    except StrictJSONError:
        raise
    except json.JSONDecodeError as exc:
        raise StrictJSONError(Reason.INVALID_JSON, f"{exc.msg} at line {exc.lineno} column {exc.colno}") from None
    except RecursionError:
        raise StrictJSONError(Reason.INVALID_JSON, "nested too deeply") from None
    except (ValueError, TypeError, OverflowError) as exc:  # pragma: no cover - defensive: never crash the caller
        raise StrictJSONError(Reason.INVALID_JSON, str(exc)) from None
    # A surrogate can only reach the value through a raw one in the text or a \uD800–\uDFFF escape; skip the walk
    # when neither is present (it is a third of the cost of verifying a long chain).
    # ``isascii`` runs at memory speed. The escape's pattern is searched directly: a substring test for ``\\u``
    # first was slower on a proof document, whose escaped envelopes put a backslash every few characters (12 ms
    # against the pattern's 5 ms over a 10,000-entry chain), and no faster on an envelope.
    raw_surrogate = not text.isascii() and _SURROGATE.search(text) is not None
    if raw_surrogate or _SURROGATE_ESCAPE.search(text) is not None:
        _refuse_lone_surrogates(value)
    return value


# --- canonical form ------------------------------------------------------------------------------------------


def format_number(x: float) -> str:
    """ECMAScript Number.prototype.toString of ``x`` as a double (RFC 8785 §3.2.2.3).

    Python's ``repr`` gives the shortest digit string that round-trips (ties broken to the closest, as ES6
    requires); only the layout differs, and is redone here. NaN and infinities have no JSON form.
    """
    if isinstance(x, bool) or not isinstance(x, (int, float)):
        raise StrictJSONError(Reason.UNSUPPORTED_JSON_VALUE, f"{type(x).__name__} is not a number")
    try:
        value = float(x)
    except OverflowError:
        raise StrictJSONError(Reason.INTEGER_OUT_OF_RANGE, "integer too large for a double") from None
    if not math.isfinite(value):
        raise StrictJSONError(Reason.NON_FINITE_NUMBER, f"{value!r} is not a JSON number")
    if value == 0:
        return "0"  # ES6 prints -0 as "0"
    sign = "-" if value < 0 else ""
    mantissa, _, exp_text = repr(abs(value)).partition("e")
    int_part, _, frac_part = mantissa.partition(".")
    digits = int_part + frac_part
    point = len(int_part) + (int(exp_text) if exp_text else 0)  # decimal point after `point` digits
    stripped = digits.lstrip("0")
    point -= len(digits) - len(stripped)
    digits = stripped.rstrip("0")
    k, n = len(digits), point  # value = 0.<digits> × 10^n, i.e. the s, k, n of ECMA-262 Number::toString
    if k <= n <= 21:
        body = digits + "0" * (n - k)
    elif 0 < n <= 21:
        body = digits[:n] + "." + digits[n:]
    elif -6 < n <= 0:
        body = "0." + "0" * (-n) + digits
    else:
        e = n - 1
        exponent = ("+" if e >= 0 else "-") + str(abs(e))
        body = (digits if k == 1 else digits[0] + "." + digits[1:]) + "e" + exponent
    return sign + body


def _string(text: str) -> str:
    if _SURROGATE.search(text):
        raise StrictJSONError(Reason.LONE_SURROGATE, f"string {_preview(text)!r} holds a lone surrogate")
    return '"' + _NEEDS_ESCAPE.sub(lambda m: _ESCAPES[m.group(0)], str.__str__(text)) + '"'


def _number(value: float) -> str:
    if isinstance(value, int):
        if abs(value) > MAX_SAFE_INTEGER:
            raise StrictJSONError(Reason.INTEGER_OUT_OF_RANGE, f"integer {value} is outside ±(2^53−1)")
        return str(int(value))
    if not math.isfinite(value):
        raise StrictJSONError(Reason.NON_FINITE_NUMBER, f"{value!r} is not a JSON number")
    if _INTEGER_LITERAL_FLOOR <= abs(value) < _EXPONENT_FORM_FLOOR:
        # Its ES6 form is an integer literal that loads_strict refuses (see the module docstring).
        raise StrictJSONError(
            Reason.INTEGER_OUT_OF_RANGE, f"{value!r} would print as an integer literal outside ±(2^53−1)"
        )
    return format_number(value)


def _key_order(key: str) -> bytes:
    # Big-endian UTF-16 bytes compare exactly like the sequence of UTF-16 code units (RFC 8785 §3.2.3).
    return key.encode("utf-16-be")


def _emit(value: Any, out: list[str]) -> None:
    if value is None:
        out.append("null")
    elif value is True:
        out.append("true")
    elif value is False:
        out.append("false")
    elif isinstance(value, str):
        out.append(_string(value))
    elif isinstance(value, (int, float)) and not isinstance(value, bool):
        out.append(_number(value))
    elif isinstance(value, Mapping):
        keys = list(value.keys())
        for key in keys:
            if not isinstance(key, str):
                raise StrictJSONError(Reason.UNSUPPORTED_JSON_VALUE, f"object key {key!r} is not a string")
            if _SURROGATE.search(key):
                raise StrictJSONError(Reason.LONE_SURROGATE, f"key {_preview(key)!r} holds a lone surrogate")
        out.append("{")
        for index, key in enumerate(sorted(keys, key=_key_order)):
            if index:
                out.append(",")
            out.append(_string(key))
            out.append(":")
            _emit(value[key], out)
        out.append("}")
    elif isinstance(value, (list, tuple)):
        out.append("[")
        for index, item in enumerate(value):
            if index:
                out.append(",")
            _emit(item, out)
        out.append("]")
    else:
        raise StrictJSONError(Reason.UNSUPPORTED_JSON_VALUE, f"{type(value).__name__} has no JSON form")


def _no_json_form(value: object) -> NoReturn:
    raise TypeError(f"{type(value).__name__} has no JSON form")  # pragma: no cover - only admitted types get here


# json's C encoder, set up to write RFC 8785 text for the values ``_fast_path_admits``: object members sorted by code
# point (the keys admitted sort the same by UTF-16 code unit), no whitespace, and strings escaped as RFC 8785 §3.2.2.2
# escapes them (the two-character escapes, every other control character as \u00xx in lowercase hex, nothing else;
# ``encode_basestring`` is the C escaper of ``ensure_ascii=False``). Integers print as ``int.__repr__``, like
# ``_number``. Without a circular check: the admitted values are no deeper than ``_FAST_MAX_DEPTH``, so acyclic.
_C_CANONICAL: Final = _json.make_encoder(
    None, _no_json_form, _json.encode_basestring, None, ":", ",", True, False, False
)
#: The fast path's nesting limit: deeper values (and cycles, which are infinitely deep) take the exact path, which
#: also decides when a value is too deep to write.
_FAST_MAX_DEPTH: Final = 64
_STR_ONLY: Final = frozenset({str})


#: Non-integral floats whose ``repr`` is ES6's Number::toString: at least 1e-4 (Python's repr turns to exponent form
#: below, ES6 only below 1e-6) and below 1e16 (Python's exponent form from there, ES6's from 1e21); in that range both
#: print the same shortest round-trip digits positionally.
_REPR_FLOOR: Final = 1e-4
_REPR_CEILING: Final = 1e16
#: What ``_fast_path_admits`` answers: not admitted, admitted as it is, admitted once its integral floats are ints.
_REFUSED, _AS_IS, _INTEGRAL_FLOATS = 0, 1, 2


def _fast_path_admits(value: object) -> int:
    """Whether ``_C_CANONICAL`` provably writes RFC 8785 text for ``value``, the text ``_emit`` writes (falsy: no).

    Admitted: exact ``dict`` (every key an exact ``str`` below U+D800, where code point order is UTF-16 order),
    exact ``list`` and ``tuple``, exact ``str``, exact ``int`` within ±(2^53−1), ``bool`` and ``None``, exact
    ``float`` that is integral within ±(2^53−1) (ES6 prints it as the integer: ``_INTEGRAL_FLOATS``, the value must be
    rewritten with ints by ``_integral_floats_as_ints``) or non-integral with ``_REPR_FLOOR <= |x| < _REPR_CEILING``
    (``repr`` prints it as ES6 does), nested at most ``_FAST_MAX_DEPTH`` deep. Not admitted, so written or refused by
    ``_emit``: other floats (ES6 number layout), subclasses and other mappings (their own methods decide what ``_emit``
    reads), every value ``_emit`` refuses. A lone surrogate in a string value is admitted here and looked for in the
    text (one scan, usually just ``isascii``).
    """
    keys: list[Any] = []
    answer = _AS_IS
    pending: list[tuple[Iterable[Any], int]] = [((value,), 0)]
    while pending:
        items, depth = pending.pop()
        for item in items:
            kind = type(item)
            if kind is str or kind is bool or item is None:
                continue
            if kind is int:
                if -MAX_SAFE_INTEGER <= item <= MAX_SAFE_INTEGER:
                    continue
                return _REFUSED
            if kind is float:
                size = abs(item)
                if item.is_integer():  # every float from 2^53 up is integral: _emit refuses or lays those out
                    if size <= MAX_SAFE_INTEGER:
                        answer = _INTEGRAL_FLOATS
                        continue
                    return _REFUSED
                if _REPR_FLOOR <= size < _REPR_CEILING:  # NaN and infinities fail this test
                    continue
                return _REFUSED
            if depth == _FAST_MAX_DEPTH:
                return _REFUSED
            if kind is dict:
                keys.extend(item)
                pending.append((item.values(), depth + 1))
            elif kind is list or kind is tuple:
                pending.append((item, depth + 1))
            else:
                return _REFUSED
    if not keys:
        return answer
    if not _STR_ONLY.issuperset(map(type, keys)):
        return _REFUSED
    joined = "".join(keys)
    return answer if joined.isascii() or max(joined) < "\ud800" else _REFUSED


def _integral_floats_as_ints(value: Any) -> Any:
    """``value`` (admitted by ``_fast_path_admits``) with every integral float an int, containers copied where needed:
    ES6 prints ``1.0`` as ``1``, as ``repr`` prints ``1``."""
    kind = type(value)
    if kind is float:
        return int(value) if value.is_integer() else value
    if kind is dict:
        return {key: _integral_floats_as_ints(item) for key, item in value.items()}
    if kind is list or kind is tuple:
        return [_integral_floats_as_ints(item) for item in value]
    return value


def canonical_text(value: Any) -> str:
    """The RFC 8785 canonical JSON text of ``value`` (dict/Mapping, list/tuple, str, int, float, bool, None).

    Refused with ``StrictJSONError``: values with no JSON form or non-string keys (``unsupported-json-value``),
    lone surrogates, NaN/infinities, integers outside ±(2^53−1) — the codes ``loads_strict`` uses.

    Most values (plain containers, keys below U+D800, floats that are integral or in ``repr``'s positional range) are
    written by json's C encoder, ``_fast_path_admits`` says when that gives the same text; the rest, and every
    refusal, by ``_emit``.
    """
    admitted = _fast_path_admits(value)
    if admitted:
        try:
            written = _integral_floats_as_ints(value) if admitted == _INTEGRAL_FLOATS else value
            text: str = "".join(_C_CANONICAL(written, 0))
        except RecursionError:  # pragma: no cover - only when the caller's own stack is nearly exhausted
            pass
        else:
            if text.isascii() or _SURROGATE.search(text) is None:
                return text
    return _exact_text(value)


def _exact_text(value: Any) -> str:
    """``canonical_text`` written by ``_emit``, for every value: the definition the fast path must agree with."""
    out: list[str] = []
    try:
        _emit(value, out)
    except RecursionError:
        raise StrictJSONError(Reason.UNSUPPORTED_JSON_VALUE, "nested too deeply (or cyclic)") from None
    return "".join(out)


def canonicalize(value: Any) -> bytes:
    """The RFC 8785 canonical JSON bytes (UTF-8) of ``value``; see ``canonical_text`` for what is refused."""
    return canonical_text(value).encode("utf-8")
