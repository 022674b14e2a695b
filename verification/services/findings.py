"""Raising findings (SPEC §10): append-only records a person must look at.

The portal raises them (evidence integrity during a run, disagreements between verifications of one subject);
raising the same finding twice is a no-op (``Finding.dedupe_key``). Closing and acknowledging are a person's, with
a rationale (``kernel.findings.check_closure``); their screens come with the review issue.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence

from django.db import IntegrityError, transaction

from verification.kernel.canonical import canonicalize
from verification.kernel.findings import Finding as KernelFinding
from verification.models import Evidence, Finding, FindingAction, FindingEvent, Verification
from verification.services import events
from verification.services.actors import portal_service_actor


def dedupe_key(finding: KernelFinding) -> str:
    return hashlib.sha256(canonicalize([finding.kind.value, list(finding.refs)])).hexdigest()


def finding_raise(
    *,
    finding: KernelFinding,
    subject: str = "",
    verification: Verification | None = None,
    evidence: Evidence | None = None,
    receipt_refs: Sequence[str] = (),
) -> Finding | None:
    """Record ``finding`` (built and validated by the kernel) with its ``raised`` event; None if already raised.

    Emits ``finding.raised`` on the feed; call it near the end of the transaction (the feed lock, see ``events``).
    """
    key = dedupe_key(finding)
    if Finding.objects.filter(dedupe_key=key).exists():
        return None
    try:
        with transaction.atomic():
            row = Finding(
                kind=finding.kind.value,
                reason=finding.reason.value if finding.reason is not None else "",
                subject=subject,
                verification=verification,
                evidence=evidence,
                refs=list(finding.refs),
                receipt_refs=list(receipt_refs),
                detail=finding.detail,
                dedupe_key=key,
            )
            row.save()
    except IntegrityError:  # raised concurrently by another run
        return None
    FindingEvent(finding=row, action=FindingAction.RAISED, actor=portal_service_actor()).save()
    events.event_emit(
        kind=events.FINDING_RAISED,
        verification=verification,
        payload={"finding_id": row.id, "kind": row.kind, "reason": row.reason, "refs": row.refs},
    )
    return row
