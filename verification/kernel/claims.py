"""Claims inside a submission (SPEC §5: "Claims inside a submission bind and answer UNKNOWN").

A submitter (or an imported verifier) may send its own assertions about evidence: ``{symbol, observable,
expression}``. Each is classified by ``expressions.classify_claim`` (strict and total: no input crashes it):

- a well-formed ``evidence.content-digest`` equality over the claim's own symbol is decidable: PASS or FAIL against
  the recomputed digest of the bytes bound to that symbol (UNKNOWN when none are bound or they are inaccessible);
- ``evidence.present`` answers UNKNOWN ``evidence-present-declined`` (the absence of cited evidence is not falsehood);
- any other observable answers UNKNOWN ``unsupported-observable``; any other shape ``malformed-expression``.

A claim never raises a determination (the contract decides); a decidable claim that evaluates FAIL flags the
verification for review with ``claim-contradicted`` (``flag_contradicted``), when issued and when read.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, Final

from verification.kernel.determination import NEEDS_REVIEW_PREFIX, Outcome
from verification.kernel.digests import sha256_digest
from verification.kernel.expressions import Obligation, classify_claim
from verification.kernel.reasons import Reason
from verification.kernel.verdicts import Verdict

MAX_CLAIMS: Final = 64


@dataclass(frozen=True)
class ClaimResult:
    """One claim as it bound and answered."""

    symbol: str
    observable: str
    expression: str
    verdict: Verdict
    reason: Reason
    evidence_id: str | None = None
    detail: str = ""

    def as_payload(self) -> dict[str, Any]:
        return {
            "symbol": self.symbol,
            "observable": self.observable,
            "expression": self.expression,
            "verdict": self.verdict.value,
            "reason": self.reason.value,
            "evidence_id": self.evidence_id,
            "detail": self.detail,
        }


@dataclass(frozen=True)
class BoundBytes:
    """What a claim may be evaluated over: the item bound to a symbol and its bytes (None: not accessible)."""

    evidence_id: str
    content: bytes | None


def _text(value: object) -> str:
    return str.__str__(value) if isinstance(value, str) else ""


def evaluate_claim(claim: Mapping[str, Any], bound: Mapping[str, BoundBytes]) -> ClaimResult:
    """Classify one claim and, when decidable, evaluate it over the bytes bound to its symbol. Never raises."""
    symbol, observable, expression = (_text(claim.get(k)) for k in ("symbol", "observable", "expression"))
    outcome = classify_claim(Obligation(observable=observable, expression=expression))

    def answer(verdict: Verdict, reason: Reason, evidence_id: str | None = None, detail: str = "") -> ClaimResult:
        return ClaimResult(symbol, observable, expression, verdict, reason, evidence_id, detail)

    if outcome.equality is None:
        return answer(Verdict.UNKNOWN, outcome.reason or Reason.MALFORMED_EXPRESSION)
    if outcome.equality.symbol != symbol:
        return answer(Verdict.UNKNOWN, Reason.MALFORMED_EXPRESSION, detail="the expression names another symbol")
    item = bound.get(symbol)
    if item is None:
        return answer(Verdict.UNKNOWN, Reason.EVIDENCE_NOT_BOUND, detail=symbol)
    if item.content is None:
        return answer(Verdict.UNKNOWN, Reason.EVIDENCE_INACCESSIBLE, item.evidence_id)
    recomputed = sha256_digest(item.content)
    if recomputed == outcome.equality.digest:
        return answer(Verdict.PASS, Reason.DIGEST_MATCH, item.evidence_id, recomputed)
    return answer(Verdict.FAIL, Reason.CLAIM_CONTRADICTED, item.evidence_id,
                  f"claimed {outcome.equality.digest}, recomputed {recomputed}")


def evaluate_claims(claims: Sequence[Mapping[str, Any]], bound: Mapping[str, BoundBytes]) -> tuple[ClaimResult, ...]:
    return tuple(evaluate_claim(c if isinstance(c, Mapping) else {}, bound) for c in claims[:MAX_CLAIMS])


def contradicted(claims: Sequence[Mapping[str, Any]]) -> bool:
    """Does a stored claim list (a receipt payload's ``claims``) hold a decidable claim that evaluated FAIL?"""
    return any(isinstance(c, Mapping) and c.get("verdict") == Verdict.FAIL.value for c in claims)


def flag_contradicted(outcome: Outcome, claims: Sequence[Mapping[str, Any]]) -> Outcome:
    """SPEC §5: a contradicted claim flags the verification for review (``claim-contradicted``); it changes nothing
    else (never the verdict or the determination). A running outcome is not flagged yet; one already flagged keeps
    its own reason."""
    if outcome.status_running or outcome.flagged or not contradicted(claims):
        return outcome
    return replace(outcome, flagged=True, flag_reason=NEEDS_REVIEW_PREFIX + Reason.CLAIM_CONTRADICTED.value)


__all__ = [
    "MAX_CLAIMS",
    "BoundBytes",
    "ClaimResult",
    "contradicted",
    "evaluate_claim",
    "evaluate_claims",
    "flag_contradicted",
]
