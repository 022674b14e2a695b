"""What one audit run finds (``Problem``) and its outcome (``AuditReport``, also recorded as an ``AuditRun``)."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Final

from verification.kernel.checkpoint import Checkpoint
from verification.kernel.findings import FindingKind
from verification.kernel.reasons import Reason

#: Rows fetched per round trip while streaming (chains, leaves).
CHUNK: Final = 2000


@dataclass(frozen=True)
class Problem:
    """One thing the audit found. ``refs`` identify the state: the same state found again is the same finding."""

    kind: FindingKind
    code: Reason
    refs: tuple[str, ...]
    detail: str
    verification_id: str | None = None
    seq: int | None = None
    receipt_id: str | None = None
    step: int | None = None

    def as_json(self) -> dict[str, Any]:
        return {
            "kind": self.kind.value,
            "code": self.code.value,
            "refs": list(self.refs),
            "detail": self.detail,
            "verification_id": self.verification_id,
            "seq": self.seq,
            "step": self.step,
        }


@dataclass
class AuditReport:
    """The outcome of one run (also recorded as an ``AuditRun``)."""

    started_at: datetime
    finished_at: datetime | None = None
    chains: int = 0
    receipts: int = 0
    leaves_added: int = 0
    tree_size: int = 0
    root_hash: str = ""
    checkpoint: Checkpoint | None = None  # the last trusted checkpoint compared with
    consistent: bool | None = None  # None: no trusted checkpoint to compare with
    written: Checkpoint | None = None  # the checkpoint this run appended
    problems: list[Problem] = field(default_factory=list)
    findings_raised: int = 0
    notes: list[str] = field(default_factory=list)
    skipped: bool = False
    run_id: int | None = None

    @property
    def tamper(self) -> list[Problem]:
        return [p for p in self.problems if p.kind is FindingKind.TAMPER]

    @property
    def revoked(self) -> list[Problem]:
        return [p for p in self.problems if p.kind is FindingKind.REVOKED_KEY]

    @property
    def ok(self) -> bool:
        """No tampering found (chains signed by a revoked key are findings of their own kind, SPEC §8)."""
        return not self.skipped and not self.tamper

    def summary(self) -> dict[str, Any]:
        """A JSON-able summary (the Celery task's result, ``audit_chains --json``)."""
        return {
            "ok": self.ok,
            "skipped": self.skipped,
            "chains": self.chains,
            "receipts": self.receipts,
            "leaves_added": self.leaves_added,
            "tree_size": self.tree_size,
            "root_hash": self.root_hash,
            "checkpoint_size": self.checkpoint.tree_size if self.checkpoint else None,
            "consistent": self.consistent,
            "checkpoint_written": self.written.as_line() if self.written else None,
            "findings_raised": self.findings_raised,
            "problems": [p.as_json() for p in self.problems],
            "notes": list(self.notes),
            "run_id": self.run_id,
        }
