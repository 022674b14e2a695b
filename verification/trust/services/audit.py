"""The continuous audit (issue 7 §5; SPEC §7 "Strict verification", §8 "External checkpoints", §10 findings).

``audit_run()`` is the one entry point: ``manage.py audit_chains`` and the Celery beat task
``verification.audit_chains`` only call it. One run:

1. **Leaves.** Every receipt the audit has not seen yet gets the next position of an append-only RFC 6962 Merkle tree
   (``AuditLeaf``). Order: a receipt's position is assigned once, when an audit first sees it; the receipts new to
   one run are taken in (signed ``created_at``, verification id, seq) order. Receipts can be signed with a past
   ``created_at`` (a backdated run), so the signed time alone would not give an append-only order; the first-seen
   position does, and it never changes. The leaf *data* is the 32 bytes of the content hash of the receipt found
   **now** at that position's (verification, seq) — a rewritten receipt changes its leaf, a deleted one leaves an
   empty leaf (``receipt-missing``).
2. **Chains.** Every chain is re-verified with the strict verifier (``kernel.verifier.verify_report``), streamed in
   (verification, seq) order, one chain in memory at a time: keys from the pin log (proof-signing), the stored head
   as the trusted head, the verification's own id and submission hash. The verifier is handed the pinned keys with
   their revocation marks lifted, and the audit reports revocation itself: a chain with an entry signed by a since-
   revoked key is a *revoked-key* finding (SPEC §8: not tampering), and any other failure in it is still found.
   Any failure is a *tamper* finding naming the verification, the entry (seq) and the code.
3. **Keys.** Every signing key of the portal is checked against the pin log: its id derives from its bytes
   (``kid-mismatch``), it is in the pin log for proof-signing (``unknown-key``: e.g. a key inserted straight into
   the keys table), and its revocation agrees with the pin log (``key-state-mismatch``).
4. **Checkpoint.** The tree over all leaves is computed in one streaming pass with O(log² n) memory, together with
   the RFC 6962 consistency proof from the last trusted checkpoint's size (``kernel.merkle.StreamingTree``); the proof
   is checked with ``kernel.merkle.verify_consistency`` against the checkpoint's root. Inconsistent: a tamper finding
   (``checkpoint-inconsistent``) and no new checkpoint — the audit keeps comparing with the last good one. Otherwise,
   when the tree grew, a signed tree head is appended to the checkpoint log, a file outside the database
   (``settings.REVIEWPORTAL_CHECKPOINT_LOG``, default ``<var>/checkpoints.log``).

A checkpoint line (its format, signature and strict parser: ``kernel.checkpoint``) is trusted when its signature
verifies under one of the portal's own keys that is pinned for proof-signing and not revoked; a malformed or forged
line is a tamper finding (``malformed-checkpoint``, ``unknown-key``, ``signature-failure``); lines signed by a
since-revoked key are set aside.

The steps live beside this module: ``audit_tree`` (1, 4), ``audit_chains`` (2), ``audit_keys`` (3), ``checkpoints``
(the log file); ``audit_report`` holds what a run finds.

Findings are raised through ``services.findings.finding_raise``, whose dedupe key is the finding's kind and refs: the
same state found again raises nothing new (the audit is idempotent). Runs are serialized by an exclusive lock on
``<checkpoint log>.lock``; a second run while one holds it returns at once with ``skipped``.
"""

from __future__ import annotations

import fcntl
import logging
import os
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime
from pathlib import Path
from typing import Any, Final

from django.db import transaction
from django.utils import timezone

from verification.actors import roles
from verification.kernel.contracts import subject_key
from verification.kernel.findings import Finding as KernelFinding
from verification.reviews.services.findings import finding_raise
from verification.runs.models import Verification
from verification.trust.models import AuditRun, SecurityEventKind
from verification.trust.services.audit_chains import check_chains
from verification.trust.services.audit_keys import check_keys, journal_keys
from verification.trust.services.audit_report import AuditReport
from verification.trust.services.audit_tree import check_tree, register_leaves
from verification.trust.services.checkpoints import checkpoint_log_path, trusted_checkpoint, write_checkpoint
from verification.trust.services.security_log import require_permission, security_log_record

logger = logging.getLogger(__name__)

AUDIT_LABEL: Final = "system: audit_chains"


# --- the run ------------------------------------------------------------------------------------------------------


@contextmanager
def _exclusive(path: Path) -> Iterator[bool]:
    """An exclusive, non-blocking lock on ``<checkpoint log>.lock``; yields False when another run holds it."""
    lock_path = path.with_name(path.name + ".lock")
    lock_path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(lock_path, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            yield False
            return
        try:
            yield True
        finally:
            fcntl.flock(fd, fcntl.LOCK_UN)
    finally:
        os.close(fd)


def _subject(task_id: Any, cycle: Any) -> str:
    if task_id is None:
        return ""
    return subject_key(task_id=str(task_id), cycle=int(cycle or 1))


def _raise_findings(report: AuditReport) -> None:
    verifications = {
        str(v.pk): v
        for v in Verification.objects.filter(pk__in={p.verification_id for p in report.problems if p.verification_id})
    }
    for problem in report.problems:
        verification = verifications.get(problem.verification_id or "")
        subject = ""
        if verification is not None and verification.task_id is not None:
            subject = _subject(verification.task_id, verification.cycle)
        finding = KernelFinding(kind=problem.kind, refs=problem.refs, detail=problem.detail)
        with transaction.atomic():
            row = finding_raise(
                finding=finding,
                subject=subject,
                verification=verification,
                receipt_refs=[problem.receipt_id] if problem.receipt_id else [],
            )
            if row is not None:
                report.findings_raised += 1
                security_log_record(
                    kind=SecurityEventKind.AUDIT_FINDING,
                    actor_label=AUDIT_LABEL,
                    target=problem.verification_id or "/".join(problem.refs[:2]),
                    detail={"finding": row.pk, **problem.as_json()},
                )


def _record(report: AuditReport) -> None:
    run = AuditRun(
        started_at=report.started_at,
        finished_at=report.finished_at or timezone.now(),
        chains=report.chains,
        receipts=report.receipts,
        tree_size=report.tree_size,
        root_hash=report.root_hash,
        checkpoint_size=report.checkpoint.tree_size if report.checkpoint is not None else None,
        consistent=report.consistent,
        checkpoint_written=report.written is not None,
        ok=report.ok,
        problems=[p.as_json() for p in report.problems],
        findings_raised=report.findings_raised,
    )
    run.save()
    report.run_id = run.pk


INSPECT_CHAINS: Final = roles.INSPECT_CHAINS


def audit_run(*, now: datetime | None = None, checkpoint_path: Path | None = None, by: Any = None) -> AuditReport:
    """Run the continuous audit once (see the module docstring); the report, also recorded as an ``AuditRun``.

    Idempotent: a second run over the same state raises no new finding and writes no new checkpoint. ``by``: the
    portal user who asked for it from the admin pages (``permission-denied`` unless they may inspect chains); the
    beat task and the command run it as the system.
    """
    if by is not None:
        require_permission(by, INSPECT_CHAINS, "run the audit")
    when = now or timezone.now()
    path = checkpoint_path or checkpoint_log_path()
    report = AuditReport(started_at=when)
    with _exclusive(path) as acquired:
        if not acquired:
            report.skipped = True
            report.notes.append("another audit run holds the lock; skipped")
            return report
        state, keys, trusted = journal_keys(report)
        report.checkpoint = trusted_checkpoint(path, trusted, report)
        report.leaves_added = register_leaves(when)
        revoked = {key_id for key_id, k in trusted.items() if k.revoked}
        check_chains(keys, revoked, state, report)
        check_keys(state, report)
        if check_tree(report.checkpoint, report):
            write_checkpoint(path, report.checkpoint, report, when)
        _raise_findings(report)
        report.finished_at = timezone.now()
        _record(report)
    level = logging.INFO if report.ok else logging.WARNING
    logger.log(
        level,
        "audit: %d chains, %d receipts, tree %d, %d problem(s), %d new finding(s)",
        report.chains,
        report.receipts,
        report.tree_size,
        len(report.problems),
        report.findings_raised,
    )
    return report
