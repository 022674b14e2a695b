"""Running verifications (issue 4 §2; SPEC §3, §7): the locked, idempotent run that signs seq 0, and the failed mark.

``verification_run`` loads the stored facts (``services.facts``), builds the kernel's records, calls
``kernel.evaluation.evaluate_run`` and issues receipt seq 0 (kind ``run``); what the outcome becomes (payload, head
columns, findings, events) is ``services.outcome``. Every rule is the kernel's; this module only gathers facts and
stores outcomes. Results that arrive later for a PENDING criterion are ``services.results``.
"""

from __future__ import annotations

import time
import uuid
from datetime import datetime
from typing import Final

from django.db import transaction
from django.db.models import Exists, F, OuterRef
from django.utils import timezone

from verification.actors.services.actors import portal_service_actor
from verification.errors import NotFound
from verification.kernel.evaluation import (
    evaluate_run,
)
from verification.kernel.reasons import Reason
from verification.kernel.verdicts import Authority
from verification.records import metrics
from verification.runs import run_signal
from verification.runs.models import Verification
from verification.runs.services import events
from verification.runs.services.facts import claims_of, load_facts
from verification.runs.services.outcome import record_outcome, run_payload
from verification.trust.models import Receipt, ReceiptKind
from verification.trust.selectors import head_of
from verification.trust.services.receipts import receipt_issue_held

#: Attempts of an operational failure before the run is recorded as failed (SPEC §3).
MAX_ATTEMPTS: Final = 3


def run_locked(verification: Verification, *, now: datetime) -> Receipt:
    facts = load_facts(verification, now=now)
    result = evaluate_run(
        criteria=facts.criteria,
        ctx=facts.ctx,
        bound=facts.bound,
        arrived=facts.arrived,
        claims=claims_of(verification, facts),
    )
    previous = head_of(verification.supersedes) if verification.supersedes is not None else None
    payload = run_payload(
        facts,
        result,
        issuer=facts.portal or portal_service_actor(),
        authority=Authority.DETERMINISTIC,
        supersedes_receipt_id=previous.content_hash if previous is not None else None,
    )
    # Inside verification_run's (or result_deliver's) transaction, without a savepoint of its own.
    receipt = receipt_issue_held(verification=verification, kind=ReceiptKind.RUN, payload=payload, superseded=previous)
    record_outcome(verification, facts, result, receipt)
    return receipt


def seq0(verification_pk: uuid.UUID) -> Receipt | None:
    return Receipt.objects.filter(verification_id=verification_pk, seq=0).first()


def _verification_pk(verification_id: str | uuid.UUID) -> uuid.UUID:
    try:
        return verification_id if isinstance(verification_id, uuid.UUID) else uuid.UUID(str(verification_id))
    except ValueError:
        raise NotFound(f"no verification {verification_id!r}", verification_id=str(verification_id)) from None


def verification_run(*, verification_id: str | uuid.UUID, now: datetime | None = None) -> Receipt | None:
    """Run a verification and issue receipt seq 0 (kind ``run``); idempotent and safe to run concurrently.

    If seq 0 exists it is returned (a redelivered or duplicated task). Otherwise the attempt is counted (committed
    on its own, so a reader sees ``running``), the verification row is locked (``SELECT … FOR UPDATE``), seq 0 is
    looked for again after the lock, and the run is evaluated and signed in that one transaction: two workers on
    the same verification yield one chain. A failed verification (``verification_mark_failed``) is not run again
    (a new attempt is a new submission): None. Operational errors propagate; the Celery task retries them.
    """
    pk = _verification_pk(verification_id)
    when = now or timezone.now()
    # The attempt is counted only when the run is owed (no seq 0 yet, not failed): one statement for the common case.
    counted = (
        Verification.objects.filter(pk=pk, failed_at__isnull=True)
        .exclude(Exists(Receipt.objects.filter(verification_id=OuterRef("pk"), seq=0)))
        .update(attempts=F("attempts") + 1, started_at=when)
    )
    if not counted:
        existing = seq0(pk)
        if existing is not None:
            metrics.observe_run(status="already-run")
            return existing
        if not Verification.objects.filter(pk=pk).exists():
            raise NotFound(f"no verification {pk}", verification_id=str(pk))
        metrics.observe_run(status="not-owed")
        return None
    started = time.perf_counter()
    try:
        with transaction.atomic():
            locked = (
                Verification.objects.select_for_update(of=("self",))
                .select_related("task", "rubric", "submitted_by", "supersedes")
                .get(pk=pk)
            )
            existing = seq0(pk)
            if existing is not None:
                metrics.observe_run(status="already-run")
                return existing
            receipt = run_locked(locked, now=when)
            # Wake a wait_ms submission waiting for this run, once committed (nothing to do without a broker).
            transaction.on_commit(lambda: run_signal.announce(pk))
    except Exception as exc:
        Verification.objects.filter(pk=pk).update(last_error=f"{type(exc).__name__}: {exc}"[:2000])
        raise
    # Counted once committed (reviewportal/metrics.py: the run latency histogram by verdict).
    metrics.observe_run(status="signed", verdict=receipt.verdict or "", seconds=time.perf_counter() - started)
    return receipt


def verification_mark_failed(*, verification_id: str | uuid.UUID, error: str) -> bool:
    """Record an operational failure after the last attempt (SPEC §3): ``failed``, no determination, no receipt.

    True when it was marked now; False when it already had a receipt or was failed already.
    """
    pk = _verification_pk(verification_id)
    with transaction.atomic():
        locked = Verification.objects.select_for_update().filter(pk=pk).first()
        if locked is None or locked.failed_at is not None or seq0(pk) is not None:
            return False
        locked.failed_at = timezone.now()
        locked.last_error = (error or "failed")[:2000]
        locked.started_at = None
        locked.save(update_fields=["failed_at", "last_error", "started_at"])
        events.event_emit(
            kind=events.VERIFICATION_FAILED,
            verification=locked,
            payload={
                "verification_id": str(pk),
                "reason": Reason.RUN_FAILED.value,
                "attempts": locked.attempts,
                "error": locked.last_error,
            },
        )
    metrics.observe_run(status="failed")
    transaction.on_commit(lambda: run_signal.announce(pk))  # failed is finished too: wake its waiters
    return True
