"""Verdicts, authorities, checks and folding (SPEC §2)."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, replace
from datetime import datetime
from enum import StrEnum
from typing import Final

from verification.kernel.errors import InvariantError
from verification.kernel.reasons import Reason


class Verdict(StrEnum):
    PASS = "PASS"
    FAIL = "FAIL"
    MISMATCH = "MISMATCH"
    UNKNOWN = "UNKNOWN"
    NOT_RUN = "NOT_RUN"
    PENDING = "PENDING"


# SPEC §2: MISMATCH > FAIL > UNKNOWN > NOT_RUN > PENDING > PASS. PASS is last.
PRECEDENCE: Final[tuple[Verdict, ...]] = (
    Verdict.MISMATCH,
    Verdict.FAIL,
    Verdict.UNKNOWN,
    Verdict.NOT_RUN,
    Verdict.PENDING,
    Verdict.PASS,
)
_RANK: Final[dict[Verdict, int]] = {v: len(PRECEDENCE) - i for i, v in enumerate(PRECEDENCE)}


class ExpiryVerdict(StrEnum):
    """What a PENDING check becomes after its deadline. The type cannot hold PASS (SPEC §2)."""

    UNKNOWN = "UNKNOWN"
    FAIL = "FAIL"
    MISMATCH = "MISMATCH"
    NOT_RUN = "NOT_RUN"

    def as_verdict(self) -> Verdict:
        return Verdict(self.value)


class Authority(StrEnum):
    DETERMINISTIC = "deterministic"
    HUMAN = "human"
    SEMANTIC = "semantic"
    IMPORTED = "imported"


# SPEC §2: who may carry a set to PASS is a membership test, so a new authority fails closed.
PASS_AUTHORITIES: Final[frozenset[Authority]] = frozenset({Authority.DETERMINISTIC, Authority.HUMAN})


def may_carry_pass(authority: Authority) -> bool:
    return authority in PASS_AUTHORITIES


class Origin(StrEnum):
    """Where a check was made. Only the oracle seam (the ``unchanged`` criterion) may author MISMATCH."""

    EVALUATOR = "evaluator"
    ORACLE_SEAM = "oracle-seam"


@dataclass(frozen=True)
class Pending:
    """The deadline and expiry verdict of a PENDING check."""

    deadline: datetime
    on_expiry: ExpiryVerdict = ExpiryVerdict.UNKNOWN

    def __post_init__(self) -> None:
        if not isinstance(self.on_expiry, ExpiryVerdict):
            # Covers Verdict.PASS or the string "PASS": the type cannot hold it.
            raise InvariantError(Reason.EXPIRY_VERDICT_CANNOT_PASS, f"on_expiry={self.on_expiry!r}")
        if self.deadline.tzinfo is None:
            raise InvariantError(Reason.MALFORMED_RUBRIC, "a deadline must be timezone-aware")


@dataclass(frozen=True)
class Check:
    """One check's outcome for one criterion, with the authority that decided it."""

    criterion: str
    authority: Authority
    verdict: Verdict
    reason: Reason
    origin: Origin = Origin.EVALUATOR
    pending: Pending | None = None
    evidence_ids: tuple[str, ...] = ()
    detail: str = ""

    def __post_init__(self) -> None:
        # The annotations are not enforced at run time: check what a caller really passed.
        authority: object = self.authority
        verdict: object = self.verdict
        reason: object = self.reason
        if not isinstance(authority, Authority):
            raise InvariantError(Reason.AUTHORITY_NOT_TRUSTED_FOR_PASS, f"authority={authority!r}")
        if not isinstance(verdict, Verdict):
            raise InvariantError(Reason.MALFORMED_RECORD, f"verdict={verdict!r}")
        if not isinstance(reason, Reason):
            object.__setattr__(self, "reason", Reason(str(reason)))
        if self.verdict is Verdict.MISMATCH and self.origin is not Origin.ORACLE_SEAM:
            raise InvariantError(Reason.MISMATCH_NOT_FROM_ORACLE, f"criterion {self.criterion}")
        if (self.verdict is Verdict.PENDING) != (self.pending is not None):
            raise InvariantError(Reason.MALFORMED_RECORD, "a PENDING check needs a deadline, and only it has one")
        if (
            self.pending is not None
            and self.pending.on_expiry is ExpiryVerdict.MISMATCH
            and self.origin is not Origin.ORACLE_SEAM
        ):
            raise InvariantError(Reason.MISMATCH_NOT_FROM_ORACLE, "MISMATCH on expiry only for oracle-seam checks")


def resolve_pending(check: Check, now: datetime) -> Check:
    """Resolve a PENDING check when read (SPEC §2): after its deadline it answers the expiry verdict.

    Nothing is written back; the stored receipt still says PENDING.
    """
    if check.pending is None or now < check.pending.deadline:
        return check
    return replace(
        check,
        verdict=check.pending.on_expiry.as_verdict(),
        reason=Reason.PENDING_EXPIRED,
        pending=None,
        detail=f"deadline {check.pending.deadline.isoformat()} passed",
    )


def effective(check: Check) -> Check:
    """Apply the authority allow-list: a PASS from an authority not on it counts as UNKNOWN (SPEC §2)."""
    if check.verdict is Verdict.PASS and not may_carry_pass(check.authority):
        return replace(check, verdict=Verdict.UNKNOWN, reason=Reason.AUTHORITY_NOT_TRUSTED_FOR_PASS)
    return check


def fold_verdicts(verdicts: Iterable[Verdict]) -> Verdict:
    """The highest verdict by precedence; the empty set folds to NOT_RUN, never PASS."""
    result: Verdict | None = None
    for verdict in verdicts:
        if result is None or _RANK[verdict] > _RANK[result]:
            result = verdict
    return Verdict.NOT_RUN if result is None else result


def fold(checks: Iterable[Check]) -> Verdict:
    """Fold checks into one verdict, each counted through the authority allow-list."""
    return fold_verdicts(effective(c).verdict for c in checks)


def deciding_check(checks: Iterable[Check]) -> Check | None:
    """The (effective) check that decides the fold: the first of the highest precedence."""
    best: Check | None = None
    for check in map(effective, checks):
        if best is None or _RANK[check.verdict] > _RANK[best.verdict]:
            best = check
    return best
