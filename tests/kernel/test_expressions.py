"""The obligation expression parser and claim classification (SPEC §5; seed 000 "What counts as evidence")."""

from __future__ import annotations

import re
from collections.abc import Callable

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from verification.kernel.errors import ExpressionError
from verification.kernel.expressions import (
    MAX_EXPRESSION_LENGTH,
    OBSERVABLE_CONTENT_DIGEST,
    OBSERVABLE_PRESENT,
    ClaimOutcome,
    DigestEquality,
    Obligation,
    classify_claim,
    is_symbol,
    parse,
)
from verification.kernel.reasons import Reason
from verification.kernel.verdicts import Verdict

HEX = "0123456789abcdef" * 4
DIGEST = "sha256:" + HEX
VALID = f'(= out "{DIGEST}")'

# An independent statement of the grammar, written differently from the module's regex.
_HEX_SET = frozenset("0123456789abcdef")
_SYMBOL_FIRST = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz_")
_SYMBOL_REST = _SYMBOL_FIRST | frozenset("0123456789.-")


def _oracle_accepts(text: str) -> bool:
    """A hand-written recognizer of the documented grammar, used as the reference for the fuzzers."""
    if not (text.startswith("(") and text.endswith(")")):
        return False
    inner = text[1:-1].strip(" ")
    if not inner.startswith("="):
        return False
    rest = inner[1:]
    if not rest.startswith(" "):
        return False
    parts = [p for p in rest.split(" ") if p != ""]
    if len(parts) != 2:
        return False
    symbol, literal = parts
    if not (1 <= len(symbol) <= 64 and symbol[0] in _SYMBOL_FIRST and all(c in _SYMBOL_REST for c in symbol[1:])):
        return False
    if not (literal.startswith('"sha256:') and literal.endswith('"') and len(literal) == len('"sha256:"') + 64):
        return False
    return all(c in _HEX_SET for c in literal[len('"sha256:') : -1])


# --- parse: accepted ------------------------------------------------------------------------------------------


def test_parses_the_canonical_form() -> None:
    eq = parse(VALID)
    assert eq == DigestEquality(symbol="out", digest=DIGEST)
    assert eq.render() == VALID


@pytest.mark.parametrize(
    "text",
    [
        f'(=  out   "{DIGEST}")',
        f'( = out "{DIGEST}" )',
        f'(   =     out "{DIGEST}"    )',
    ],
)
def test_runs_of_ascii_spaces_between_tokens_are_allowed(text: str) -> None:
    assert parse(text) == DigestEquality("out", DIGEST)


@pytest.mark.parametrize("symbol", ["a", "_", "A_b.c-d9", "x" * 64, "evidence.build-log_2"])
def test_symbol_grammar_accepts(symbol: str) -> None:
    assert parse(f'(= {symbol} "{DIGEST}")').symbol == symbol
    assert is_symbol(symbol)


# --- parse: refused, each with malformed-expression -------------------------------------------------------------

NEAR_MISSES = {
    "uppercase hex": f'(= out "sha256:{HEX.upper()}")',
    "one uppercase hex digit": f'(= out "sha256:{HEX[:-1]}F")',
    "63 hex digits": f'(= out "sha256:{HEX[:63]}")',
    "65 hex digits": f'(= out "sha256:{HEX}0")',
    "missing sha256: prefix": f'(= out "{HEX}")',
    "uppercase prefix": f'(= out "SHA256:{HEX}")',
    "other algorithm": f'(= out "sha512:{HEX}")',
    "missing closing quote": f'(= out "{DIGEST})',
    "missing opening quote": f'(= out {DIGEST}")',
    "unquoted literal": f"(= out {DIGEST})",
    "single quotes": f"(= out '{DIGEST}')",
    "escaped quote inside": f'(= out "\\"{DIGEST}")',
    "extra open paren": f'((= out "{DIGEST}")',
    "extra close paren": f'(= out "{DIGEST}"))',
    "double parens": f'((= out "{DIGEST}"))',
    "missing open paren": f'= out "{DIGEST}")',
    "missing close paren": f'(= out "{DIGEST}"',
    "tab separator": f'(=\tout "{DIGEST}")',
    "newline separator": f'(= out\n"{DIGEST}")',
    "trailing newline": VALID + "\n",
    "leading space": " " + VALID,
    "trailing space": VALID + " ",
    "trailing garbage": VALID + "x",
    "non-breaking space": f'(=\u00a0out "{DIGEST}")',
    "arabic-indic digit in hex": f'(= out "sha256:{HEX[:-1]}\u0663")',
    "fullwidth digit in hex": f'(= out "sha256:{HEX[:-1]}\uff11")',
    "unicode letter in symbol": f'(= \u00e9t "{DIGEST}")',
    "symbol starts with digit": f'(= 1out "{DIGEST}")',
    "symbol starts with dot": f'(= .out "{DIGEST}")',
    "symbol of 65 chars": f'(= {"x" * 65} "{DIGEST}")',
    "symbol with colon": f'(= a:b "{DIGEST}")',
    "no space after =": f'(=out "{DIGEST}")',
    "no space before literal": f'(= out"{DIGEST}")',
    "other operator": f'(!= out "{DIGEST}")',
    "extra operand": f'(= out "{DIGEST}" "{DIGEST}")',
    "missing symbol": f'(= "{DIGEST}")',
    "literal first": f'(= "{DIGEST}" out)',
    "empty": "",
    "only parens": "()",
    "nul byte": f'(= out "{DIGEST}")\x00',
    "lone surrogate": f'(= out "{DIGEST}")\ud800',
}


@pytest.mark.parametrize("text", NEAR_MISSES.values(), ids=NEAR_MISSES.keys())
def test_near_misses_are_malformed(text: str) -> None:
    with pytest.raises(ExpressionError) as info:
        parse(text)
    assert info.value.reason is Reason.MALFORMED_EXPRESSION
    assert not _oracle_accepts(text)


@pytest.mark.parametrize("value", [None, b'(= out "sha256:' + HEX.encode() + b'")', 42, ["(="], object()])
def test_non_text_is_malformed(value: object) -> None:
    with pytest.raises(ExpressionError) as info:
        parse(value)  # type: ignore[arg-type]
    assert info.value.reason is Reason.MALFORMED_EXPRESSION


def test_overlong_input_is_refused_before_matching() -> None:
    text = f'(= out "{DIGEST}"' + " " * MAX_EXPRESSION_LENGTH + ")"
    with pytest.raises(ExpressionError) as info:
        parse(text)
    assert info.value.reason is Reason.MALFORMED_EXPRESSION
    assert "longer than" in info.value.detail


def test_str_subclass_methods_are_not_trusted() -> None:
    class Hostile(str):
        def __len__(self) -> int:
            raise RuntimeError("boom")

    assert parse(Hostile(VALID)) == DigestEquality("out", DIGEST)
    with pytest.raises(ExpressionError):
        parse(Hostile("(nope)"))


@pytest.mark.parametrize(
    ("symbol", "digest"), [("1x", DIGEST), ("out", "sha256:" + HEX.upper()), ("out", HEX), ("", DIGEST)]
)
def test_digest_equality_cannot_be_built_invalid(symbol: str, digest: str) -> None:
    with pytest.raises(ExpressionError) as info:
        DigestEquality(symbol, digest)
    assert info.value.reason is Reason.MALFORMED_EXPRESSION


# --- fuzzing: strict and total ------------------------------------------------------------------------------------

symbols = st.from_regex(re.compile(r"[A-Za-z_][A-Za-z0-9_.\-]{0,63}"), fullmatch=True)
hex64 = st.text(alphabet="0123456789abcdef", min_size=64, max_size=64)
spaces0 = st.integers(0, 3).map(lambda n: " " * n)
spaces1 = st.integers(1, 3).map(lambda n: " " * n)


@st.composite
def valid_expressions(draw: st.DrawFn) -> str:
    return (
        f"({draw(spaces0)}={draw(spaces1)}{draw(symbols)}{draw(spaces1)}"
        f'"sha256:{draw(hex64)}"{draw(spaces0)})'
    )


def _parse_or_error(text: object) -> DigestEquality | None:
    """Parse, asserting that the only possible failure is ExpressionError(malformed-expression)."""
    try:
        return parse(text)  # type: ignore[arg-type]
    except ExpressionError as exc:
        assert exc.reason is Reason.MALFORMED_EXPRESSION
        return None


@settings(max_examples=400)
@given(st.text())
def test_fuzz_arbitrary_text_only_raises_expression_error(text: str) -> None:
    result = _parse_or_error(text)
    assert (result is not None) == _oracle_accepts(text)


@settings(max_examples=300)
@given(
    st.one_of(
        st.none(), st.integers(), st.floats(), st.binary(),
        st.lists(st.text()), st.dictionaries(st.text(), st.text())
    )
)
def test_fuzz_non_text_only_raises_expression_error(value: object) -> None:
    assert _parse_or_error(value) is None


@settings(max_examples=300)
@given(valid_expressions())
def test_fuzz_valid_expressions_parse_and_round_trip(text: str) -> None:
    eq = parse(text)
    assert parse(eq.render()) == eq
    assert _oracle_accepts(text)


MUTATIONS: dict[str, Callable[[str], str]] = {
    "upper hex": lambda t: re.sub(r"sha256:([0-9a-f]{64})", lambda m: "sha256:" + m.group(1).upper(), t),
    "drop hex digit": lambda t: re.sub(r'(sha256:[0-9a-f]{63})[0-9a-f]"', r'\1"', t),
    "add hex digit": lambda t: re.sub(r'(sha256:[0-9a-f]{64})"', r'\g<1>0"', t),
    "drop closing quote": lambda t: re.sub(r'([0-9a-f]{64})"', r"\1", t),
    "drop opening quote": lambda t: t.replace('"sha256:', "sha256:"),
    "extra open paren": lambda t: "(" + t,
    "extra close paren": lambda t: t + ")",
    "tab for space": lambda t: t.replace(" ", "\t", 1),
    "unicode digit": lambda t: re.sub(r'[0-9a-f]"', '\u0663"', t),
    "fullwidth digit": lambda t: re.sub(r'[0-9a-f]"', '\uff10"', t),
    "missing prefix": lambda t: t.replace("sha256:", ""),
    "trailing newline": lambda t: t + "\n",
    "leading text": lambda t: "x" + t,
}


@settings(max_examples=400)
@given(valid_expressions(), st.sampled_from(sorted(MUTATIONS)))
def test_fuzz_near_miss_mutations_are_malformed_and_never_decide(text: str, mutation: str) -> None:
    mutated = MUTATIONS[mutation](text)
    assert mutated != text
    with pytest.raises(ExpressionError) as info:
        parse(mutated)
    assert info.value.reason is Reason.MALFORMED_EXPRESSION
    outcome = classify_claim(Obligation(OBSERVABLE_CONTENT_DIGEST, mutated))
    assert outcome.equality is None
    assert outcome.reason is Reason.MALFORMED_EXPRESSION
    assert outcome.verdict is Verdict.UNKNOWN


@settings(max_examples=400)
@given(valid_expressions(), st.integers(min_value=0), st.characters())
def test_fuzz_single_character_edits_agree_with_the_reference(text: str, position: int, char: str) -> None:
    index = position % (len(text) + 1)
    for candidate in (text[:index] + char + text[index:], text[:index] + char + text[index + 1 :]):
        result = _parse_or_error(candidate)
        assert (result is not None) == _oracle_accepts(candidate)
        outcome = classify_claim(Obligation(OBSERVABLE_CONTENT_DIGEST, candidate))
        assert outcome.decidable == (result is not None)


# --- claims inside a submission bind and answer UNKNOWN -----------------------------------------------------------


def test_well_formed_content_digest_claim_binds_its_equality() -> None:
    outcome = classify_claim(Obligation(OBSERVABLE_CONTENT_DIGEST, VALID))
    assert outcome.decidable
    assert outcome.equality == DigestEquality("out", DIGEST)
    assert outcome.reason is None
    assert outcome.verdict is None  # still to be evaluated over the bound bytes


@pytest.mark.parametrize("expression", [VALID, "", "(anything)", None, 7])
def test_evidence_present_is_declined_whatever_the_expression(expression: object) -> None:
    outcome = classify_claim(Obligation(OBSERVABLE_PRESENT, expression))  # type: ignore[arg-type]
    assert outcome.reason is Reason.EVIDENCE_PRESENT_DECLINED
    assert outcome.equality is None
    assert outcome.verdict is Verdict.UNKNOWN


@pytest.mark.parametrize(
    "observable", ["evidence.size", "Evidence.Content-Digest", "evidence.content-digest ", "", None, 3, b"evidence"]
)
def test_other_observables_are_unsupported(observable: object) -> None:
    outcome = classify_claim(Obligation(observable, VALID))  # type: ignore[arg-type]
    assert outcome.reason is Reason.UNSUPPORTED_OBSERVABLE
    assert outcome.verdict is Verdict.UNKNOWN


@pytest.mark.parametrize("expression", list(NEAR_MISSES.values())[:8] + [None, 12, b"(= x)"])
def test_malformed_claims_bind_and_answer_unknown(expression: object) -> None:
    outcome = classify_claim(Obligation(OBSERVABLE_CONTENT_DIGEST, expression))  # type: ignore[arg-type]
    assert outcome.reason is Reason.MALFORMED_EXPRESSION
    assert outcome.verdict is Verdict.UNKNOWN


@settings(max_examples=300)
@given(st.one_of(st.text(), st.sampled_from([OBSERVABLE_PRESENT, OBSERVABLE_CONTENT_DIGEST])), st.text())
def test_fuzz_classify_claim_never_raises(observable: str, expression: str) -> None:
    outcome = classify_claim(Obligation(observable, expression))
    assert (outcome.equality is None) != (outcome.reason is None)
    if outcome.decidable:
        assert observable == OBSERVABLE_CONTENT_DIGEST


def test_claim_outcome_holds_exactly_one_of_equality_and_reason() -> None:
    ob = Obligation(OBSERVABLE_CONTENT_DIGEST, VALID)
    with pytest.raises(ExpressionError):
        ClaimOutcome(ob)
    with pytest.raises(ExpressionError):
        ClaimOutcome(ob, equality=parse(VALID), reason=Reason.MALFORMED_EXPRESSION)
