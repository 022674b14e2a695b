"""Findings: what the system noticed and a person must look at (SPEC §10).

Findings are append-only records. Only a human can acknowledge or close one, with a rationale; no automated
component or model output closes a finding.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum
from typing import Final

from verification.kernel.actors import Actor, ActorKind
from verification.kernel.digests import is_digest
from verification.kernel.errors import InvariantError
from verification.kernel.integrity import IntegrityProof
from verification.kernel.reasons import Reason
from verification.kernel.verdicts import Authority, Verdict


class FindingKind(StrEnum):
    DISAGREEMENT = "disagreement"
    TAMPER = "tamper"
    EVIDENCE_INTEGRITY = "evidence_integrity"
    REVOKED_KEY = "revoked_key"


FINDING_REASON: Final[dict[FindingKind, Reason]] = {
    FindingKind.DISAGREEMENT: Reason.FINDING_DISAGREEMENT,
    FindingKind.TAMPER: Reason.FINDING_TAMPER,
    FindingKind.EVIDENCE_INTEGRITY: Reason.FINDING_EVIDENCE_INTEGRITY,
    FindingKind.REVOKED_KEY: Reason.FINDING_REVOKED_KEY,
}


@dataclass(frozen=True)
class VerificationRecord:
    """What disagreement detection needs to know about one verification (SPEC §10).

    ``subject`` is the task id and cycle (``contracts.subject_key``). ``verdict`` is the verdict decided by
    ``authority_of_decision``: a record whose authority is ``human`` carries a person's verdict, not an automated
    one, and is never compared. ``superseded_by_human`` says a reviewer's decision has since superseded this
    verification; its automated verdict stays what it was and is still compared with other verifications'.
    """

    verification_id: str
    subject: str
    rubric_hash: str
    evidence_digests: frozenset[str]
    verdict: Verdict
    authority_of_decision: Authority
    superseded_by_human: bool
    created_at: datetime

    def __post_init__(self) -> None:
        for name in ("verification_id", "subject", "rubric_hash"):
            value = getattr(self, name)
            if not isinstance(value, str) or not value:
                raise InvariantError(Reason.MALFORMED_RECORD, f"{name} must be a non-empty string")
        given: object = self.evidence_digests
        if not isinstance(given, (set, frozenset, list, tuple)):
            raise InvariantError(Reason.MALFORMED_RECORD, "evidence_digests must be a set of digests")
        digests = frozenset(given)
        if not all(is_digest(d) for d in digests):
            raise InvariantError(Reason.MALFORMED_RECORD, "evidence digests must be sha256:<64 lowercase hex>")
        object.__setattr__(self, "evidence_digests", digests)
        if not isinstance(self.verdict, Verdict) or not isinstance(self.authority_of_decision, Authority):
            raise InvariantError(Reason.MALFORMED_RECORD, "verdict and authority must be kernel enums")
        if not isinstance(self.superseded_by_human, bool):
            raise InvariantError(Reason.MALFORMED_RECORD, "superseded_by_human must be a bool")
        if not isinstance(self.created_at, datetime) or self.created_at.utcoffset() is None:
            raise InvariantError(Reason.MALFORMED_RECORD, "created_at must be a timezone-aware datetime")

    @property
    def automated(self) -> bool:
        """Is ``verdict`` an automated verdict worth comparing?

        Not a person's (any authority but ``human`` is automated, so a new authority is compared, failing toward
        more review), and not PENDING (a check still awaiting its result has concluded nothing yet).
        """
        return self.authority_of_decision is not Authority.HUMAN and self.verdict is not Verdict.PENDING


@dataclass(frozen=True)
class Disagreement:
    """Two verifications of one subject, rubric and evidence whose automated verdicts differ.

    ``first`` is the earlier (by ``created_at``, then id) of the pair.
    """

    subject: str
    rubric_hash: str
    evidence_digests: frozenset[str]
    first_id: str
    first_verdict: Verdict
    second_id: str
    second_verdict: Verdict


def detect_disagreements(records: Iterable[VerificationRecord]) -> list[Disagreement]:
    """Every pair of verifications that disagree (SPEC §10), in a deterministic order.

    A pair counts only if both share subject, rubric hash and the exact set of evidence digests, both verdicts are
    automated (``VerificationRecord.automated``) and they differ. Records of the same verification are never a pair:
    a human decision superseding a run lives in the same chain and is not a disagreement. Output: grouped by
    (subject, rubric hash, sorted digests), pairs in chronological order within a group; independent of the input
    order.
    """
    groups: dict[tuple[str, str, tuple[str, ...]], list[VerificationRecord]] = defaultdict(list)
    for record in records:
        if record.automated:
            groups[(record.subject, record.rubric_hash, tuple(sorted(record.evidence_digests)))].append(record)
    found: list[Disagreement] = []
    for key in sorted(groups):
        members = sorted(groups[key], key=lambda r: (r.created_at, r.verification_id, r.verdict.value))
        for i, first in enumerate(members):
            for second in members[i + 1 :]:
                if first.verification_id == second.verification_id or first.verdict is second.verdict:
                    continue
                found.append(
                    Disagreement(
                        subject=first.subject,
                        rubric_hash=first.rubric_hash,
                        evidence_digests=first.evidence_digests,
                        first_id=first.verification_id,
                        first_verdict=first.verdict,
                        second_id=second.verification_id,
                        second_verdict=second.verdict,
                    )
                )
    return found


@dataclass(frozen=True)
class Finding:
    """A finding as recorded: its kind, what it refers to, and its reason code (SPEC §10, §11).

    ``refs`` name what the finding is about (verification ids, receipt ids, evidence ids, key ids, a subject).
    ``reason`` is always the kind's registered code; it defaults to it and any other value is refused.
    """

    kind: FindingKind
    refs: tuple[str, ...]
    detail: str = ""
    reason: Reason | None = field(default=None)

    def __post_init__(self) -> None:
        try:
            kind = FindingKind(self.kind)
        except ValueError:
            raise InvariantError(Reason.MALFORMED_RECORD, f"unknown finding kind {self.kind!r}") from None
        object.__setattr__(self, "kind", kind)
        refs: object = self.refs
        if not isinstance(refs, (tuple, list)) or not all(isinstance(r, str) and r for r in refs):
            raise InvariantError(Reason.MALFORMED_RECORD, "refs must be a tuple of non-empty strings")
        object.__setattr__(self, "refs", tuple(refs))
        if not self.refs:
            raise InvariantError(Reason.MALFORMED_RECORD, "a finding refers to something")
        expected = FINDING_REASON[kind]
        if self.reason is None:
            object.__setattr__(self, "reason", expected)
        elif self.reason != expected:
            raise InvariantError(Reason.MALFORMED_RECORD, f"a {kind} finding carries {expected}, not {self.reason}")


def disagreement_finding(disagreement: Disagreement) -> Finding:
    """The finding that records one disagreement: refs are the subject and both verification ids."""
    d = disagreement
    return Finding(
        kind=FindingKind.DISAGREEMENT,
        refs=(d.subject, d.first_id, d.second_id),
        detail=f"{d.first_id} said {d.first_verdict}, {d.second_id} said {d.second_verdict} (same rubric, evidence)",
    )


def evidence_integrity_findings(*, proof: IntegrityProof, subject: str) -> list[Finding]:
    """One finding per item whose bytes are gone or changed (SPEC §2); a redaction raises none."""
    return [
        Finding(
            kind=FindingKind.EVIDENCE_INTEGRITY,
            refs=(subject, entry.evidence_id),
            detail=f"{entry.status}: recorded {entry.recorded}, recomputed {entry.recomputed}",
        )
        for entry in proof.entries
        if entry.raises_finding
    ]


def may_close(actor_kind: ActorKind) -> Reason | None:
    """Only a human acknowledges or closes a finding (SPEC §10): None for a human, else the refusal's code."""
    try:
        kind = ActorKind(actor_kind)
    except ValueError:
        return Reason.FINDING_CLOSE_REQUIRES_HUMAN
    return None if kind is ActorKind.HUMAN else Reason.FINDING_CLOSE_REQUIRES_HUMAN


def check_closure(*, actor: Actor, rationale: str) -> Reason | None:
    """May ``actor`` acknowledge or close a finding with ``rationale``? None if so, else the refusal's code.

    In order: not a human → ``finding-close-requires-human``; unnamed → ``unnamed-actor``; a blank rationale →
    ``finding-close-needs-rationale``.
    """
    refusal = may_close(actor.kind)
    if refusal is not None:
        return refusal
    if not actor.named:
        return Reason.UNNAMED_ACTOR
    if not isinstance(rationale, str) or not rationale.strip():
        return Reason.FINDING_CLOSE_NEEDS_RATIONALE
    return None
