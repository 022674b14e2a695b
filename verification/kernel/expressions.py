"""The obligation expression parser and the classification of claims (SPEC §5; first seed, "What counts as evidence").

The one decidable observable at this tier is ``evidence.content-digest`` with an expression of exactly the form
``(= <symbol> "sha256:<64 lowercase hex>")``. The grammar, precisely (ASCII only, case-sensitive)::

    expression := "(" SP* "=" SP+ symbol SP+ literal SP* ")"
    symbol     := [A-Za-z_] [A-Za-z0-9_.-]{0,63}
    literal    := '"' "sha256:" [0-9a-f]{64} '"'
    SP         := U+0020 (the ASCII space; no tab, newline or other whitespace)

Nothing may precede the ``(`` or follow the ``)``; uppercase hex, other digit characters, escapes inside the
literal, other operators and longer forms are all malformed. The parser is strict and total: for any input it
returns a ``DigestEquality`` or raises ``ExpressionError(malformed-expression)``, nothing else.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Final

from verification.kernel.digests import is_digest
from verification.kernel.errors import ExpressionError
from verification.kernel.reasons import Reason
from verification.kernel.verdicts import Verdict

OBSERVABLE_CONTENT_DIGEST: Final = "evidence.content-digest"
OBSERVABLE_PRESENT: Final = "evidence.present"

# Longer than any well-formed expression can be: refuse before matching (64-char symbol + literal + spaces slack).
MAX_EXPRESSION_LENGTH: Final = 512

_SYMBOL: Final = r"[A-Za-z_][A-Za-z0-9_.\-]{0,63}"
_SYMBOL_RE: Final = re.compile(_SYMBOL)
#: The same grammar as a JSON Schema ``pattern`` (the API publishes it: SPEC §3, issue 13 item 4).
SYMBOL_PATTERN: Final = "^" + _SYMBOL + "$"
_EXPRESSION_RE: Final = re.compile(
    r"\( *= +(?P<symbol>" + _SYMBOL + r") +\"(?P<digest>sha256:[0-9a-f]{64})\" *\)"
)
#: The decidable expression's grammar as a JSON Schema ``pattern`` (published by the API).
EXPRESSION_PATTERN: Final = (
    "^" + _EXPRESSION_RE.pattern.replace("(?P<symbol>", "(").replace("(?P<digest>", "(").replace('\\"', '"') + "$"
)


def is_symbol(value: object) -> bool:
    """True for a well-formed evidence symbol (see the module grammar)."""
    return isinstance(value, str) and _SYMBOL_RE.fullmatch(value) is not None


@dataclass(frozen=True)
class DigestEquality:
    """A parsed ``(= <symbol> "sha256:<hex>")``: the bytes bound to ``symbol`` must have digest ``digest``."""

    symbol: str
    digest: str

    def __post_init__(self) -> None:
        if not is_symbol(self.symbol):
            raise ExpressionError(Reason.MALFORMED_EXPRESSION, f"not a symbol: {_excerpt(self.symbol)}")
        if not is_digest(self.digest):
            raise ExpressionError(Reason.MALFORMED_EXPRESSION, f"not a sha256 digest: {_excerpt(self.digest)}")

    def render(self) -> str:
        """The canonical text of the expression (single spaces)."""
        return f'(= {self.symbol} "{self.digest}")'


def _excerpt(value: object) -> str:
    text = repr(str.__str__(value)) if isinstance(value, str) else f"<{type(value).__name__}>"
    return text if len(text) <= 80 else text[:77] + "..."


def parse(text: str) -> DigestEquality:
    """Parse an obligation expression; raise only ``ExpressionError(malformed-expression)`` (SPEC §5)."""
    if not isinstance(text, str):
        raise ExpressionError(Reason.MALFORMED_EXPRESSION, f"an expression is text, not {type(text).__name__}")
    text = str.__str__(text)  # an exact str: a subclass's overridden methods never run here
    if len(text) > MAX_EXPRESSION_LENGTH:
        raise ExpressionError(Reason.MALFORMED_EXPRESSION, f"longer than {MAX_EXPRESSION_LENGTH} characters")
    match = _EXPRESSION_RE.fullmatch(text)
    if match is None:
        raise ExpressionError(
            Reason.MALFORMED_EXPRESSION,
            f'{_excerpt(text)} is not of the form (= <symbol> "sha256:<64 lowercase hex>")',
        )
    return DigestEquality(symbol=match.group("symbol"), digest=match.group("digest"))


@dataclass(frozen=True)
class Obligation:
    """An assertion about evidence: an observable and an expression over it.

    Not validated on construction: a claim inside a submission must bind and answer, never crash.
    """

    observable: str
    expression: str


@dataclass(frozen=True)
class ClaimOutcome:
    """How a claim sent inside a submission binds (SPEC §5).

    Exactly one of ``equality`` (decidable: evaluate it over the bound bytes) and ``reason`` (answers UNKNOWN
    with that reason) is set.
    """

    obligation: Obligation
    equality: DigestEquality | None = None
    reason: Reason | None = None

    def __post_init__(self) -> None:
        if (self.equality is None) == (self.reason is None):
            raise ExpressionError(Reason.MALFORMED_EXPRESSION, "a claim either binds an equality or has a reason")

    @property
    def decidable(self) -> bool:
        return self.equality is not None

    @property
    def verdict(self) -> Verdict | None:
        """UNKNOWN for a claim that cannot be decided; None for one still to be evaluated over the bytes."""
        return None if self.decidable else Verdict.UNKNOWN


def classify_claim(obligation: Obligation) -> ClaimOutcome:
    """Bind a submitted claim: a well-formed content-digest binds its equality; anything else answers UNKNOWN.

    ``evidence.present`` → ``evidence-present-declined`` (the absence of cited evidence is not falsehood); any
    other observable → ``unsupported-observable``; a malformed expression → ``malformed-expression``. Never raises.
    """
    observable: object = getattr(obligation, "observable", None)
    expression: object = getattr(obligation, "expression", None)
    name = str.__str__(observable) if isinstance(observable, str) else None
    if name == OBSERVABLE_PRESENT:
        return ClaimOutcome(obligation, reason=Reason.EVIDENCE_PRESENT_DECLINED)
    if name != OBSERVABLE_CONTENT_DIGEST:
        return ClaimOutcome(obligation, reason=Reason.UNSUPPORTED_OBSERVABLE)
    try:
        equality = parse(expression)  # type: ignore[arg-type]  # total on any input: non-text is malformed too
    except ExpressionError:
        return ClaimOutcome(obligation, reason=Reason.MALFORMED_EXPRESSION)
    return ClaimOutcome(obligation, equality=equality)
