"""The sweeper: acknowledgement means "will run" (issue 16).

A submission is acknowledged (202) once its row is committed; that row is the record that its run is owed. The run's
message can still be lost — a publish that failed after the commit (broker down), a broker restarted without
persistence, a retry that could not be published. Celery beat calls ``verification_sweep`` every
``REVIEWPORTAL_SWEEP_INTERVAL_SECONDS``: every verification with no seq-0 receipt, not failed, submitted and last
attempted longer than ``REVIEWPORTAL_SWEEP_AFTER_SECONDS`` ago is published again. The run is idempotent (it locks
the row and looks for seq 0 after the lock), so a message that was only late, not lost, costs one duplicate
delivery that finds seq 0 and returns.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Final

from django.conf import settings
from django.utils import timezone

from verification.runs import operations as operations_selectors
from verification.runs.services.submit import verification_enqueue

logger = logging.getLogger(__name__)

#: At most this many runs are published by one sweep (the oldest first); the next sweep takes the rest.
SWEEP_BATCH: Final = 2000


@dataclass(frozen=True)
class SweepReport:
    owed: int  # verifications found whose run is owed
    enqueued: int  # published again
    publish_failed: bool  # the broker refused a publish: the sweep stopped, the next one tries again

    def summary(self) -> dict[str, int]:
        return {"owed": self.owed, "enqueued": self.enqueued, "publish_failed": int(self.publish_failed)}


def verification_sweep(
    *, now: datetime | None = None, after_seconds: int | None = None, limit: int = SWEEP_BATCH
) -> SweepReport:
    """Publish again the run of every verification owed one for longer than ``after_seconds``."""
    after = int(settings.REVIEWPORTAL_SWEEP_AFTER_SECONDS if after_seconds is None else after_seconds)
    before = (now or timezone.now()) - timedelta(seconds=after)
    owed = list(operations_selectors.owed_runs(before=before).values_list("pk", flat=True)[:limit])
    enqueued = 0
    for pk in owed:
        if not verification_enqueue(verification_id=pk):
            logger.warning("sweep: the broker refused a publish; %d of %d owed runs enqueued", enqueued, len(owed))
            return SweepReport(owed=len(owed), enqueued=enqueued, publish_failed=True)
        enqueued += 1
    if owed:
        logger.warning("sweep: %d verification(s) owed a run for over %d s; enqueued again", enqueued, after)
    return SweepReport(owed=len(owed), enqueued=enqueued, publish_failed=False)
