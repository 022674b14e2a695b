"""Reads for operations: verifications whose run is owed and not done (issue 16; SPEC §3 lifecycle).

A verification is *unfinished* while it has no seq-0 receipt and no ``failed_at``: it reads ``queued`` (no attempt
yet) or ``running`` (an attempt began, or waits to be retried). The row itself is the record that its run is owed,
so the sweeper (``services.sweeper``) and the operations views read the same definition from here.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Final

from django.db.models import Exists, OuterRef, Q, QuerySet

from verification.runs.models import Verification
from verification.trust.models import Receipt

#: Rows listed on the operations page (the oldest first); the counts cover them all.
STUCK_LISTED: Final = 50


def unfinished() -> QuerySet[Verification]:
    """Every verification of a task with no seq-0 receipt and not failed, oldest first.

    ``verdict IS NULL`` only narrows the scan (the column caches the head's verdict, set with seq 0); the receipt is
    the truth.
    """
    seq0 = Receipt.objects.filter(verification=OuterRef("pk"), seq=0)
    return (
        Verification.objects.filter(task__isnull=False, failed_at__isnull=True, verdict__isnull=True)
        .filter(~Exists(seq0))
        .order_by("created_at", "id")
    )


def owed_runs(*, before: datetime) -> QuerySet[Verification]:
    """Unfinished verifications submitted before ``before`` whose latest attempt (if any) also began before it: their
    message is lost or long overdue, so the sweeper publishes their run again."""
    return unfinished().filter(created_at__lte=before).filter(Q(started_at__isnull=True) | Q(started_at__lte=before))


@dataclass(frozen=True)
class Stuck:
    """Verifications queued or running for longer than ``after_seconds`` since they were submitted."""

    queued: int
    running: int
    after_seconds: int
    rows: tuple[Verification, ...]

    @property
    def total(self) -> int:
        return self.queued + self.running


def stuck(*, now: datetime, after_seconds: int, listed: int = STUCK_LISTED) -> Stuck:
    """The stuck verifications: counts by status (``queued``: no attempt yet; ``running``: attempted) and the oldest
    ``listed`` rows."""
    old = unfinished().filter(created_at__lte=now - timedelta(seconds=after_seconds))
    queued = old.filter(attempts=0).count()
    running = old.filter(attempts__gt=0).count()
    rows = tuple(old.select_related("task")[:listed]) if queued + running else ()
    return Stuck(queued=queued, running=running, after_seconds=after_seconds, rows=rows)
