"""A human decision supersedes, it does not join (SPEC §2; the rails of §9 apply to reviewers too).

A reviewer's decision is a new receipt whose verdict *replaces* the folded verdict of the receipt it supersedes.
``decide`` either returns the decision's outcome or raises ``DecisionRefused`` with the code; a refused decision
issues no receipt.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final

from verification.kernel.determination import CriterionResult, Determination, Outcome, determination_of
from verification.kernel.errors import DecisionRefused, InvariantError
from verification.kernel.integrity import IntegrityProof
from verification.kernel.reasons import Reason
from verification.kernel.verdicts import Authority, Check, Verdict, effective

# SPEC §2: a person decides PASS or FAIL, nothing else.
DECISION_VERDICTS: Final[frozenset[Verdict]] = frozenset({Verdict.PASS, Verdict.FAIL})

# The criterion name of the single human check a decision carries.
DECISION_CRITERION: Final = "decision"


def _bad(detail: str) -> InvariantError:
    return InvariantError(Reason.MALFORMED_RECORD, detail)


def _integrity_failure(cited: Sequence[str], integrity: IntegrityProof) -> Reason | None:
    """The code of the first cited item without an intact entry, or of any failing entry; None when complete."""
    for evidence_id in cited:
        entry = integrity.entry(evidence_id)
        if entry is None:
            return Reason.MISSING_EVIDENCE_INTEGRITY_PROOF
        if entry.reason is not None:
            return entry.reason
    failure = integrity.first_failure()
    if failure is not None and failure.reason is not None:
        return failure.reason
    if not integrity.complete:
        return Reason.MISSING_EVIDENCE_INTEGRITY_PROOF
    return None


@dataclass(frozen=True)
class DecisionOutcome:
    """The outcome of a human decision: its verdict replaces the superseded receipt's folded verdict.

    A human PASS is met, score 1.0, and clears ``flagged`` and the route hold; a human FAIL is not_met, score 0.0,
    and is not flagged either (a person already looked). ``criteria`` are the superseded outcome's criteria, kept so
    that a later decision in the same chain still sees any MISMATCH or deterministic FAIL beneath.
    """

    verdict: Verdict
    determination: Determination
    score: float
    confidence: float
    flagged: bool
    flag_reason: str | None
    reason: Reason
    authority: Authority
    check: Check
    cited_evidence_ids: tuple[str, ...]
    integrity: IntegrityProof
    rationale: str
    criteria: tuple[CriterionResult, ...]
    status_running: bool = False

    def __post_init__(self) -> None:
        object.__setattr__(self, "cited_evidence_ids", tuple(self.cited_evidence_ids))
        object.__setattr__(self, "criteria", tuple(self.criteria))
        if self.verdict not in DECISION_VERDICTS:
            raise _bad(f"a decision's verdict is PASS or FAIL, got {self.verdict!r}")
        passed = self.verdict is Verdict.PASS
        if (
            self.determination is not determination_of(self.verdict)
            or self.score != (1.0 if passed else 0.0)
            or self.confidence != 1.0
            or self.flagged is not False
            or self.flag_reason is not None
            or self.status_running is not False
        ):
            raise _bad("a decision's determination, score, confidence and flag follow from its verdict")
        if self.authority is not Authority.HUMAN or self.reason is not Reason.HUMAN_DECISION:
            raise _bad("a decision is decided by a human authority with reason human-decision")
        expected = Check(
            criterion=DECISION_CRITERION,
            authority=Authority.HUMAN,
            verdict=self.verdict,
            reason=Reason.HUMAN_DECISION,
            evidence_ids=self.cited_evidence_ids,
        )
        if self.check != expected:
            raise _bad("a decision carries exactly one human check of its verdict and citations")
        if not isinstance(self.rationale, str) or not self.rationale.strip():
            raise _bad("a decision has a rationale")
        if passed and (not self.cited_evidence_ids or _integrity_failure(self.cited_evidence_ids, self.integrity)):
            raise _bad("a human PASS cites evidence under a complete integrity proof")


def _refuse_pass_over(criteria: Sequence[CriterionResult], prior_verdict: Verdict) -> None:
    """SPEC §2: a human cannot PASS over a MISMATCH or a deterministic FAIL; those clear only by new evidence."""
    if prior_verdict is Verdict.MISMATCH or any(
        c.verdict is Verdict.MISMATCH or any(k.verdict is Verdict.MISMATCH for k in c.checks) for c in criteria
    ):
        raise DecisionRefused(Reason.MISMATCH_NEEDS_NEW_EVIDENCE, "the superseded outcome holds a MISMATCH")
    for c in criteria:
        for k in map(effective, c.checks):
            # Fail closed: a deterministic FAIL blocks a PASS however it arose (even from an expired PENDING).
            if k.authority is Authority.DETERMINISTIC and k.verdict is Verdict.FAIL:
                raise DecisionRefused(
                    Reason.DETERMINISTIC_FAIL_NEEDS_NEW_EVIDENCE, f"criterion {c.criterion_id} failed deterministically"
                )


def decide(
    *,
    prior: Outcome | DecisionOutcome,
    verdict: Verdict,
    cited_evidence_ids: Sequence[str],
    integrity: IntegrityProof,
    rationale: str,
    rail_refusal: Reason | None = None,
) -> DecisionOutcome:
    """Record a reviewer's decision over ``prior`` (the superseded receipt's outcome, as read now), or refuse it.

    ``integrity`` is recomputed now over exactly the cited items; ``rail_refusal`` is the code of a rail (SPEC §9)
    that refused this reviewer, if any. Raises ``DecisionRefused`` with the code; nothing is issued then.
    """
    if not isinstance(verdict, Verdict) or verdict not in DECISION_VERDICTS:
        raise DecisionRefused(Reason.DECISION_VERDICT_NOT_ALLOWED, f"verdict={verdict!r}")
    if rail_refusal is not None:
        # SPEC §9: for a human decision a rail refusal is an error shown to the reviewer; no receipt is issued.
        raise DecisionRefused(Reason(rail_refusal), "a rail refused this reviewer")
    if not isinstance(rationale, str) or not rationale.strip():
        raise DecisionRefused(Reason.RATIONALE_REQUIRED)
    if isinstance(cited_evidence_ids, str):
        raise DecisionRefused(Reason.DECISION_CITES_NO_EVIDENCE, "cited_evidence_ids must be a sequence of ids")
    cited = tuple(dict.fromkeys(cited_evidence_ids))
    if any(not isinstance(e, str) or not e.strip() for e in cited):
        raise DecisionRefused(Reason.DECISION_CITES_NO_EVIDENCE, "an evidence id is blank")
    if verdict is Verdict.PASS:
        _refuse_pass_over(prior.criteria, prior.verdict)
        if not cited:
            raise DecisionRefused(Reason.DECISION_CITES_NO_EVIDENCE)
        failure = _integrity_failure(cited, integrity)
        if failure is not None:
            # SPEC §2: a human PASS carries its own integrity proof, recomputed when the decision is made.
            raise DecisionRefused(failure, "the cited evidence's integrity proof is not complete")
    return DecisionOutcome(
        verdict=verdict,
        determination=Determination.MET if verdict is Verdict.PASS else Determination.NOT_MET,
        score=1.0 if verdict is Verdict.PASS else 0.0,
        confidence=1.0,
        flagged=False,
        flag_reason=None,
        reason=Reason.HUMAN_DECISION,
        authority=Authority.HUMAN,
        check=Check(
            criterion=DECISION_CRITERION,
            authority=Authority.HUMAN,
            verdict=verdict,
            reason=Reason.HUMAN_DECISION,
            evidence_ids=cited,
        ),
        cited_evidence_ids=cited,
        integrity=integrity,
        rationale=rationale,
        criteria=prior.criteria,
    )
