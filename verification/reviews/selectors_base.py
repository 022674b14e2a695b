"""The queue's base reads: heads awaiting review, a verification's findings."""

from __future__ import annotations

from datetime import datetime

from django.db.models import Q, QuerySet

from verification.kernel.verdicts import Verdict
from verification.reviews.models import Finding
from verification.runs.models import Verification


def review_queue(*, now: datetime) -> QuerySet[Verification]:
    """The review queue (SPEC §3): every flagged verification that no human decision has superseded, oldest first.

    Flagged as read at ``now``: a head that was PENDING and whose deadline has passed reads as its expiry verdict,
    which is always flagged (it cannot be a clean deterministic outcome), so it is in the queue too.
    """
    expired = Q(verdict=Verdict.PENDING.value, pending_until__lte=now)
    return (
        Verification.objects.filter(verdict__isnull=False, human_decided=False)
        .filter(Q(flagged=True) | expired)
        .select_related("task", "submitted_by")
        .order_by("submitted_at", "id")
    )


def findings_of(verification: Verification) -> QuerySet[Finding]:
    return Finding.objects.filter(verification=verification).order_by("id")
