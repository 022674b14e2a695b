"""Raising findings (SPEC §10): append-only records a person must look at.

The portal raises them (evidence integrity during a run, disagreements between verifications of one subject);
raising the same finding twice is a no-op (``Finding.dedupe_key``). Acknowledging and closing are a person's, with
a rationale (``kernel.findings.check_closure``): ``finding_acknowledge`` and ``finding_close`` append a
``FindingEvent`` (append-only, like the finding) and refuse any actor that is not a human bound to a portal user who
holds ``close_finding`` — so no automated component or model output can close a finding (SPEC §10).
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from datetime import datetime
from typing import Any, Final

from django.db import IntegrityError, connection, transaction
from django.utils import timezone

from verification.actors.models import Actor
from verification.actors.roles import CLOSE_FINDING
from verification.actors.services.actors import kernel_actor, portal_service_actor
from verification.errors import NotFound, PermissionRefused, ServiceError
from verification.evidence.models import Evidence
from verification.kernel.canonical import canonicalize
from verification.kernel.findings import Finding as KernelFinding
from verification.kernel.findings import check_closure, may_close
from verification.kernel.reasons import Reason
from verification.reviews.models import Finding, FindingAction, FindingEvent
from verification.runs.models import Verification
from verification.runs.services import events


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


# --- a person acknowledges or closes (SPEC §10) ----------------------------------------------------------------------

CLOSE_PERMISSION: Final = CLOSE_FINDING
MAX_RATIONALE_CHARS: Final = 10_000


def _may_step(actor: Actor, user: Any) -> None:
    """Only a human actor, bound to an active portal user who holds ``close_finding``, and acting as that user."""
    refusal = may_close(actor.kind)  # the kernel's rule: not a human -> finding-close-requires-human
    if refusal is not None:
        raise ServiceError(refusal, f"{actor.name} is a {actor.kind}, not a person", status=403)
    person = actor.user
    if person is None or not person.is_active or not person.has_perm(CLOSE_PERMISSION):
        raise PermissionRefused(f"{actor.name} may not acknowledge or close findings")
    if user is not None and getattr(user, "pk", None) != person.pk:
        raise PermissionRefused("a person acts as their own actor only")


def _lock_finding(pk: int) -> None:
    """A transaction-scoped advisory lock per finding on PostgreSQL (SQLite's IMMEDIATE transactions serialize all
    writers already). The key is 64 bits of a hash: two findings that collide only take turns, nothing more."""
    if connection.vendor != "postgresql":
        return
    key = int.from_bytes(hashlib.sha256(f"finding:{pk}".encode()).digest()[:8], "big", signed=True)
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_advisory_xact_lock(%s)", [key])


def _step(*, actor: Actor, finding: Finding, action: FindingAction, rationale: str, user: Any,
          now: datetime | None) -> FindingEvent:
    _may_step(actor, user)
    if isinstance(rationale, str) and len(rationale) > MAX_RATIONALE_CHARS:
        raise ServiceError(Reason.INVALID_REQUEST, f"a rationale is at most {MAX_RATIONALE_CHARS} characters")
    refusal = check_closure(actor=kernel_actor(actor, frozenset()), rationale=rationale)
    if refusal is not None:
        raise ServiceError(refusal, status=403 if refusal is Reason.FINDING_CLOSE_REQUIRES_HUMAN else 400)
    with transaction.atomic():
        # Two people closing at once record one close: they take turns on the finding's lock. Not a row lock: FOR
        # UPDATE needs the UPDATE privilege, which the application role never has on an append-only table (SPEC §8).
        _lock_finding(finding.pk)
        locked = Finding.objects.filter(pk=finding.pk).first()
        if locked is None:
            raise NotFound(f"no finding {finding.pk}", finding_id=finding.pk)
        if FindingEvent.objects.filter(finding=locked, action=FindingAction.CLOSED).exists():
            raise ServiceError(Reason.FINDING_ALREADY_CLOSED, f"finding {locked.pk}", status=409)
        event = FindingEvent(
            finding=locked, action=action, actor=actor, rationale=rationale.strip(), created_at=now or timezone.now()
        )
        event.save()
    return event


def finding_acknowledge(
    *, actor: Actor, finding: Finding, rationale: str, user: Any = None, now: datetime | None = None
) -> FindingEvent:
    """A person acknowledges ``finding`` with a rationale: an ``acknowledged`` event (append-only).

    Refusals: ``finding-close-requires-human`` (403) for any actor that is not a human; ``permission-denied`` for a
    human who is not an active portal user with ``close_finding`` (or acts as another user's actor);
    ``unnamed-actor``; ``finding-close-needs-rationale`` (400); ``finding-already-closed`` (409).
    """
    return _step(actor=actor, finding=finding, action=FindingAction.ACKNOWLEDGED, rationale=rationale, user=user,
                 now=now)


def finding_close(
    *, actor: Actor, finding: Finding, rationale: str, user: Any = None, now: datetime | None = None
) -> FindingEvent:
    """A person closes ``finding`` with a rationale: a ``closed`` event (append-only); the same refusals as
    ``finding_acknowledge``. A closed finding stays on record with its whole history; nothing reopens it."""
    return _step(actor=actor, finding=finding, action=FindingAction.CLOSED, rationale=rationale, user=user, now=now)
