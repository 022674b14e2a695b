"""Determinations, score, confidence, flags and the automation gate (SPEC §3).

A criterion's checks fold to its verdict (through the authority allow-list, SPEC §2); the criteria roll up to one
``Outcome``: a verdict, a determination in the second seed's vocabulary, a score, a confidence and the review flag.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum
from typing import Final

from verification.kernel.criteria import apply_integrity
from verification.kernel.errors import InvariantError
from verification.kernel.integrity import IntegrityProof, gate_pass
from verification.kernel.reasons import Reason
from verification.kernel.verdicts import (
    PASS_AUTHORITIES,
    PRECEDENCE,
    Authority,
    Check,
    Verdict,
    deciding_check,
    fold,
    fold_verdicts,
    resolve_pending,
)


class Determination(StrEnum):
    MET = "met"
    NOT_MET = "not_met"
    CANNOT_DETERMINE = "cannot_determine"
    PARTIAL = "partial"


class Status(StrEnum):
    """Lifecycle of a verification run, derived when read (SPEC §3): queued → running → succeeded | failed."""

    QUEUED = "queued"
    RUNNING = "running"
    SUCCEEDED = "succeeded"
    FAILED = "failed"


# SPEC §3's table, per criterion. PENDING has no determination: the verification is running.
_DETERMINATION: Final[dict[Verdict, Determination | None]] = {
    Verdict.PASS: Determination.MET,
    Verdict.FAIL: Determination.NOT_MET,
    Verdict.MISMATCH: Determination.NOT_MET,
    Verdict.UNKNOWN: Determination.CANNOT_DETERMINE,
    Verdict.NOT_RUN: Determination.CANNOT_DETERMINE,
    Verdict.PENDING: None,
}

# SPEC §9 (and §1, §5): the refusals of the anti-gaming rails. Each one flags the verification for a person.
RAIL_REASONS: Final[frozenset[Reason]] = frozenset(
    {
        Reason.UNNAMED_ACTOR,
        Reason.WORKER_SELF_VERIFICATION,
        Reason.STALE_CYCLE,
        Reason.VERIFIER_AUTHORED_WORK,
        Reason.SHARED_EXECUTION_BOUNDARY,
        Reason.SELF_CONTRACT_ACCEPTANCE,
        Reason.CHANGE_MANIFEST_NOT_INDEPENDENTLY_OBSERVED,
        Reason.MISSING_BASELINE,
        Reason.OBLIGATION_NOT_FALSIFIABLE,
    }
)

# SPEC §2: the evidence-integrity failures. Each one flags the verification.
INTEGRITY_REASONS: Final[frozenset[Reason]] = frozenset(
    {
        Reason.MISSING_EVIDENCE_INTEGRITY_PROOF,
        Reason.EVIDENCE_INTEGRITY_MISMATCH,
        Reason.EVIDENCE_REDACTED,
    }
)

MISMATCH_PREFIX: Final = "mismatch: "
NEEDS_REVIEW_PREFIX: Final = "needs_review: "

_RANK: Final[dict[Verdict, int]] = {v: len(PRECEDENCE) - i for i, v in enumerate(PRECEDENCE)}


def determination_of(verdict: Verdict) -> Determination | None:
    """SPEC §3's table: PASS→met, FAIL/MISMATCH→not_met, UNKNOWN/NOT_RUN→cannot_determine, PENDING→None."""
    return _DETERMINATION[Verdict(verdict)]


def _bad(detail: str) -> InvariantError:
    return InvariantError(Reason.MALFORMED_RECORD, detail)


@dataclass(frozen=True)
class CriterionResult:
    """One criterion's checks folded to its verdict; reason and authority are those of the deciding check."""

    criterion_id: str
    hard: bool
    weight: float
    verdict: Verdict
    reason: Reason
    authority: Authority
    checks: tuple[Check, ...]
    semantic: bool

    def __post_init__(self) -> None:
        if not isinstance(self.criterion_id, str) or not self.criterion_id:
            raise _bad("a criterion needs a non-empty id")
        if not isinstance(self.hard, bool) or not isinstance(self.semantic, bool):
            raise _bad(f"criterion {self.criterion_id}: hard and semantic are booleans")
        weight = self.weight
        if isinstance(weight, bool) or not isinstance(weight, (int, float)) or not math.isfinite(weight) or weight <= 0:
            raise _bad(f"criterion {self.criterion_id}: weight must be a finite number > 0, got {weight!r}")
        object.__setattr__(self, "weight", float(weight))
        checks = tuple(self.checks)
        object.__setattr__(self, "checks", checks)
        if not checks:
            # Fail closed: a criterion is judged by at least one check; nothing "skips" quietly (STYLE §6).
            raise _bad(f"criterion {self.criterion_id} has no checks")
        for check in checks:
            if not isinstance(check, Check) or check.criterion != self.criterion_id:
                raise _bad(f"criterion {self.criterion_id}: every check must be a Check of this criterion")
        decider = deciding_check(checks)
        if decider is None:  # unreachable: checks is non-empty; kept so the type narrows without assert
            raise _bad(f"criterion {self.criterion_id} has no checks")
        if (
            self.verdict is not fold(checks)
            or self.reason is not decider.reason
            or self.authority is not decider.authority
        ):
            raise _bad(f"criterion {self.criterion_id}: verdict, reason and authority must be those its checks fold to")
        if not self.semantic and any(c.authority is Authority.SEMANTIC for c in checks):
            raise _bad(f"criterion {self.criterion_id}: a criterion with a semantic check is semantic")

    @property
    def determination(self) -> Determination | None:
        return determination_of(self.verdict)

    @property
    def decided_by_trusted_authority(self) -> bool:
        """Decided by a deterministic or human authority (a membership test, so a new authority fails closed)."""
        return self.authority in PASS_AUTHORITIES

    @property
    def soft_fail(self) -> bool:
        """A soft FAIL shows as ``partial`` and is left out of the verdict (SPEC §3)."""
        return not self.hard and self.verdict is Verdict.FAIL


def criterion_result(
    criterion_id: str,
    *,
    hard: bool = True,
    weight: float = 1.0,
    checks: Iterable[Check],
    semantic: bool = False,
) -> CriterionResult:
    """Fold a criterion's checks (through the authority allow-list) into its result.

    ``semantic`` is also true whenever any check has semantic authority; the argument can only add the flag.
    """
    checks = tuple(checks)
    decider = deciding_check(checks)
    if decider is None:
        raise _bad(f"criterion {criterion_id} has no checks")
    return CriterionResult(
        criterion_id=criterion_id,
        hard=hard,
        weight=weight,
        verdict=fold(checks),
        reason=decider.reason,
        authority=decider.authority,
        checks=checks,
        semantic=semantic or any(c.authority is Authority.SEMANTIC for c in checks),
    )


@dataclass(frozen=True)
class Outcome:
    """A verification's roll-up over its criteria (SPEC §3). Built by ``roll_up``; validated so it cannot lie."""

    verdict: Verdict
    determination: Determination | None
    score: float | None
    confidence: float
    flagged: bool
    flag_reason: str | None
    reason: Reason | None
    criteria: tuple[CriterionResult, ...]
    status_running: bool

    def __post_init__(self) -> None:
        object.__setattr__(self, "criteria", tuple(self.criteria))
        if not isinstance(self.verdict, Verdict):
            raise _bad(f"verdict={self.verdict!r}")
        if self.determination is not None and not isinstance(self.determination, Determination):
            raise _bad(f"determination={self.determination!r}")
        running = self.verdict is Verdict.PENDING
        if self.status_running is not running or (self.determination is None) is not running:
            raise _bad("running exactly when an unexpired PENDING decides, and then there is no determination")
        if (self.score is None) is not (running or self.determination is Determination.CANNOT_DETERMINE):
            raise _bad("score is null exactly for cannot_determine and while running")
        if self.score is not None and not 0.0 <= self.score <= 1.0:
            raise _bad(f"score={self.score!r}")
        if not 0.0 <= self.confidence <= 1.0:
            raise _bad(f"confidence={self.confidence!r}")
        if self.determination is Determination.CANNOT_DETERMINE and self.confidence != 0.0:
            raise _bad("confidence is 0 for cannot_determine")
        if self.determination is Determination.MET and self.verdict is not Verdict.PASS:
            raise _bad("met needs a PASS verdict")
        if self.verdict is Verdict.PASS and self.determination not in (Determination.MET, Determination.PARTIAL):
            raise _bad("a PASS verdict is met or partial")
        if self.flagged is not (self.flag_reason is not None):
            raise _bad("flag_reason is given exactly when flagged")
        if self.flag_reason is not None and not self.flag_reason.startswith((MISMATCH_PREFIX, NEEDS_REVIEW_PREFIX)):
            raise _bad(f"flag_reason={self.flag_reason!r}")
        if self.determination is Determination.CANNOT_DETERMINE and not self.flagged:
            raise _bad("every cannot_determine is flagged")
        if self.verdict is Verdict.MISMATCH and not (self.flag_reason or "").startswith(MISMATCH_PREFIX):
            raise _bad("a MISMATCH is flagged with a mismatch: reason")


def _integrity_checked(check: Check, integrity: IntegrityProof) -> Check:
    """SPEC §2: a check citing an item whose bytes are gone, changed or redacted — or that the proof does not
    cover at all — is UNKNOWN with that code, never a FAIL charged to the submitter (rule: ``apply_integrity``)."""
    checked = apply_integrity(check, integrity)
    if checked.verdict is check.verdict and checked.reason is check.reason:
        return check
    return checked


def _read(result: CriterionResult, *, integrity: IntegrityProof, now: datetime | None) -> CriterionResult:
    checks = result.checks
    if now is not None:
        # SPEC §2: PENDING is resolved when read, never written back; when issuing (now=None) it stays PENDING.
        checks = tuple(resolve_pending(c, now) for c in checks)
    checks = tuple(_integrity_checked(c, integrity) for c in checks)
    if checks == result.checks:
        return result
    return criterion_result(
        result.criterion_id, hard=result.hard, weight=result.weight, checks=checks, semantic=result.semantic
    )


def _deciding(criteria: Sequence[CriterionResult]) -> CriterionResult | None:
    best: CriterionResult | None = None
    for c in criteria:
        if best is None or _RANK[c.verdict] > _RANK[best.verdict]:
            best = c
    return best


def _determine(criteria: Sequence[CriterionResult]) -> Determination:
    # SPEC §3: not_met > cannot_determine > partial > met.
    if any(c.verdict is Verdict.MISMATCH or (c.hard and c.determination is Determination.NOT_MET) for c in criteria):
        return Determination.NOT_MET
    if any(c.determination is Determination.CANNOT_DETERMINE for c in criteria):
        return Determination.CANNOT_DETERMINE
    if any(not c.hard and c.determination is Determination.NOT_MET for c in criteria):
        return Determination.PARTIAL
    return Determination.MET


def _share(criteria: Sequence[CriterionResult], counted: Iterable[CriterionResult]) -> float:
    return sum(c.weight for c in counted) / sum(c.weight for c in criteria)


def _flag_reason(
    criteria: Sequence[CriterionResult],
    *,
    determination: Determination,
    reason: Reason,
    integrity: IntegrityProof,
) -> str | None:
    """SPEC §3: flagged for every MISMATCH, cannot_determine, rail refusal, integrity failure, semantic outcome,
    and any criterion decided by an authority outside the allow-list (an imported FAIL)."""
    for c in criteria:
        if c.verdict is Verdict.MISMATCH:
            return MISMATCH_PREFIX + c.reason.value
    if determination is Determination.CANNOT_DETERMINE:
        return NEEDS_REVIEW_PREFIX + reason.value
    checks = [k for c in criteria for k in c.checks]
    for k in checks:
        if k.reason in RAIL_REASONS:
            return NEEDS_REVIEW_PREFIX + k.reason.value
    for k in checks:
        if k.reason in INTEGRITY_REASONS:
            return NEEDS_REVIEW_PREFIX + k.reason.value
    failure = integrity.first_failure()
    if failure is not None and failure.reason is not None:
        return NEEDS_REVIEW_PREFIX + failure.reason.value
    for c in criteria:
        if c.semantic and c.verdict is not Verdict.PENDING:
            return NEEDS_REVIEW_PREFIX + c.reason.value
    for c in criteria:
        # Only a deterministic or human authority settles a criterion without a person (SPEC §3 exempts only a
        # clean *deterministic* outcome); so an imported FAIL, an adverse action on relayed word, is flagged too.
        if not c.decided_by_trusted_authority and c.verdict is not Verdict.PENDING:
            return NEEDS_REVIEW_PREFIX + c.reason.value
    return None


def roll_up(
    criteria: Sequence[CriterionResult],
    *,
    integrity: IntegrityProof,
    now: datetime | None = None,
) -> Outcome:
    """Roll a verification's criteria up to its verdict, determination, score, confidence and flag (SPEC §2, §3).

    ``now`` given (reading): PENDING checks past their deadline answer their expiry verdict. ``now`` None (issuing a
    receipt): they stay PENDING. A set that would fold to PASS needs a complete integrity proof.
    """
    if now is not None and now.tzinfo is None:
        raise ValueError("now must be timezone-aware")
    read = tuple(_read(c, integrity=integrity, now=now) for c in criteria)
    ids = [c.criterion_id for c in read]
    if len(set(ids)) != len(ids):
        raise _bad("criterion ids must be unique")
    if not read:
        # SPEC §2: the empty set folds to NOT_RUN, never PASS.
        return Outcome(
            verdict=Verdict.NOT_RUN,
            determination=Determination.CANNOT_DETERMINE,
            score=None,
            confidence=0.0,
            flagged=True,
            flag_reason=NEEDS_REVIEW_PREFIX + Reason.NO_CRITERIA.value,
            reason=Reason.NO_CRITERIA,
            criteria=(),
            status_running=False,
        )
    # SPEC §3: the verdict folds every criterion's verdict except soft FAILs.
    counted = [c for c in read if not c.soft_fail]
    verdict = fold_verdicts(c.verdict for c in counted)
    decider = _deciding(counted) or _deciding(read)
    if decider is None:  # unreachable: read is non-empty
        raise _bad("no criterion decides")
    reason = decider.reason
    if verdict is Verdict.PENDING:
        # An unexpired PENDING decides the fold: the verification is running, with no determination yet.
        return Outcome(
            verdict=verdict,
            determination=None,
            score=None,
            confidence=0.0,
            flagged=False,
            flag_reason=None,
            reason=reason,
            criteria=read,
            status_running=True,
        )
    determination = _determine(read)
    gated, code = gate_pass(verdict, integrity)
    if code is not None:
        # SPEC §2: no PASS without a complete evidence-integrity proof; the result is UNKNOWN, flagged, with the code.
        verdict, reason, determination = gated, code, Determination.CANNOT_DETERMINE
    if determination is Determination.CANNOT_DETERMINE:
        score: float | None = None
        confidence = 0.0
    else:
        score = _share(read, (c for c in read if c.determination is Determination.MET))
        confidence = _share(read, (c for c in read if c.decided_by_trusted_authority))
    flag_reason = _flag_reason(read, determination=determination, reason=reason, integrity=integrity)
    return Outcome(
        verdict=verdict,
        determination=determination,
        score=score,
        confidence=confidence,
        flagged=flag_reason is not None,
        flag_reason=flag_reason,
        reason=reason,
        criteria=read,
        status_running=False,
    )


def automation_gate(*, status: str, determination: Determination | None, flagged: bool, proof_verified: bool) -> bool:
    """The narrow automation gate (SPEC §3): succeeded, met, not flagged, and a proof that verified.

    Strict identity tests, so a truthy non-boolean never opens the gate.
    """
    return (
        status == Status.SUCCEEDED
        and determination is Determination.MET
        and flagged is False
        and proof_verified is True
    )
