"""The evidence-integrity proof that every run and every decision starts with (SPEC §2)."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from verification.kernel.digests import sha256_digest
from verification.kernel.reasons import Reason
from verification.kernel.verdicts import Verdict


class IntegrityStatus(StrEnum):
    INTACT = "intact"
    MISSING = "missing"
    CHANGED = "changed"
    REDACTED = "redacted"


_STATUS_REASON: dict[IntegrityStatus, Reason] = {
    IntegrityStatus.MISSING: Reason.MISSING_EVIDENCE_INTEGRITY_PROOF,
    IntegrityStatus.CHANGED: Reason.EVIDENCE_INTEGRITY_MISMATCH,
    IntegrityStatus.REDACTED: Reason.EVIDENCE_REDACTED,
}


@dataclass(frozen=True)
class StoredItem:
    """What the store holds for one cited evidence item: the digest recorded at admission and its bytes now.

    ``content`` is None when the bytes are gone; ``redacted`` when an admin removed them on purpose.
    """

    evidence_id: str
    recorded: str
    content: bytes | None
    redacted: bool = False


@dataclass(frozen=True)
class IntegrityEntry:
    evidence_id: str
    recorded: str
    recomputed: str | None
    status: IntegrityStatus

    @property
    def reason(self) -> Reason | None:
        return _STATUS_REASON.get(self.status)

    @property
    def raises_finding(self) -> bool:
        """Gone or changed bytes raise an evidence-integrity finding; a redaction does not (SPEC §2)."""
        return self.status in (IntegrityStatus.MISSING, IntegrityStatus.CHANGED)

    def as_payload(self) -> dict[str, Any]:
        return {"evidence_id": self.evidence_id, "recorded": self.recorded, "recomputed": self.recomputed}


@dataclass(frozen=True)
class IntegrityProof:
    entries: tuple[IntegrityEntry, ...]

    @property
    def complete(self) -> bool:
        """Non-empty and every item intact. A set citing no evidence has no proof (SPEC §2)."""
        return bool(self.entries) and all(e.status is IntegrityStatus.INTACT for e in self.entries)

    def entry(self, evidence_id: str) -> IntegrityEntry | None:
        for e in self.entries:
            if e.evidence_id == evidence_id:
                return e
        return None

    def first_failure(self, evidence_ids: Iterable[str] | None = None) -> IntegrityEntry | None:
        """The first failing entry (by evidence id) among ``evidence_ids`` (all entries when None)."""
        wanted = None if evidence_ids is None else set(evidence_ids)
        for e in self.entries:
            if e.status is not IntegrityStatus.INTACT and (wanted is None or e.evidence_id in wanted):
                return e
        return None

    def as_payload(self) -> list[dict[str, Any]]:
        return [e.as_payload() for e in self.entries]


def recheck(items: Iterable[StoredItem]) -> IntegrityProof:
    """Recompute the sha256 of every cited item over its stored bytes, against the digest recorded at admission."""
    by_id: dict[str, IntegrityEntry] = {}
    for item in items:
        if item.redacted:
            entry = IntegrityEntry(item.evidence_id, item.recorded, None, IntegrityStatus.REDACTED)
        elif item.content is None:
            entry = IntegrityEntry(item.evidence_id, item.recorded, None, IntegrityStatus.MISSING)
        else:
            recomputed = sha256_digest(item.content)
            status = IntegrityStatus.INTACT if recomputed == item.recorded else IntegrityStatus.CHANGED
            entry = IntegrityEntry(item.evidence_id, item.recorded, recomputed, status)
        by_id[item.evidence_id] = entry
    return IntegrityProof(tuple(by_id[k] for k in sorted(by_id)))


def gate_pass(verdict: Verdict, proof: IntegrityProof) -> tuple[Verdict, Reason | None]:
    """No PASS without a complete integrity proof (SPEC §2): otherwise UNKNOWN with the code."""
    if verdict is not Verdict.PASS or proof.complete:
        return verdict, None
    failure = proof.first_failure()
    reason = failure.reason if failure is not None and failure.reason is not None else None
    return Verdict.UNKNOWN, reason or Reason.MISSING_EVIDENCE_INTEGRITY_PROOF
