"""The queue's member spans keep their exact instants (``QueueBacklogMember.due_at``/``until_at``, migration 0017): a
span whose edge falls inside the current hour is counted from them (``review_selectors.count_queue_reasons``), so
they must give, at every instant of that hour, exactly the membership and the reason ``queue_items`` reads. Checked
here before, at and after PENDING deadlines inside one clock hour (the head columns' span ending, the unrecorded
expiry's and a stored phase's starting), and the instants the triggers keep equal a rebuild's (also from rows that
had none, as before 0017).
"""

from __future__ import annotations

from collections import Counter
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from django.db import connection
from django.utils import timezone

from tests.history.conftest import Bulk
from tests.history.test_rollups import snapshot
from tests.portal.conftest import Queue
from verification.records import rollups
from verification.records.models import QueueBacklogMember
from verification.records.rollups_sql import FOREVER
from verification.reviews.selectors import count_queue_reasons, queue_items
from verification.runs.models import ReadPhase, Verification

pytestmark = pytest.mark.django_db

TICK = timedelta(microseconds=1)
MINUTE = timedelta(minutes=1)
HOUR = timedelta(hours=1)
PENDING = {
    "verdict": "PENDING",
    "automated_verdict": "PENDING",
    "determination": None,
    "flagged": False,
    "reason": None,
}
FLAGGED = {
    "verdict": "UNKNOWN",
    "automated_verdict": "UNKNOWN",
    "determination": "cannot_determine",
    "flagged": True,
    "reason": "missing-baseline",
}


def _hour(moment: datetime) -> int:
    return int(moment.timestamp() // 3600)


def _half_past() -> datetime:
    """Half past the current clock hour: deadlines 20 minutes either side stay inside it."""
    now = timezone.now()
    return now.replace(minute=30, second=0, microsecond=0, tzinfo=UTC)


def _read(now: datetime) -> list[tuple[str, int]]:
    """The queue at ``now`` counted by its reason as read (the definition the counts must equal)."""
    counts = Counter(queue_items(now=now).order_by().values_list("queue_reason", flat=True))
    return sorted(counts.items(), key=lambda pair: (-pair[1], pair[0]))


#: A phase's determination and flag by its verdict.
OUTCOMES = {
    "PASS": ("met", False),
    "MISMATCH": ("not_met", True),
    "UNKNOWN": ("cannot_determine", True),
    "NOT_RUN": ("cannot_determine", True),
}


def _phase(row: Verification, starts_at: datetime, ends_at: datetime | None, verdict: str, reason: str) -> ReadPhase:
    determination, flagged = OUTCOMES[verdict]
    return ReadPhase(
        verification=row,
        starts_at=starts_at,
        ends_at=ends_at,
        verdict=verdict,
        determination=determination,
        flagged=flagged,
        reason=reason,
    )


def _spans(verification: Verification) -> list[tuple[Any, ...]]:
    rows = QueueBacklogMember.objects.filter(verification_id=verification.pk)
    return sorted(
        rows.values_list("due_at", "until_at", "due_hour", "until_hour", "reason"),
        key=lambda row: (row[0] is not None, row[0] or datetime.min.replace(tzinfo=UTC)),
    )


def test_a_pending_deadline_inside_the_current_hour_before_and_after_now(queue: Queue, bulk: Bulk) -> None:
    """A PENDING head due at 30 past (the unrecorded expiry: ``pending-expired`` from the deadline on) and a flagged
    head due at 30 past (its head columns' span ends there; the unflagged phase then holds): both spans have their
    edge inside the hour, and the counts follow the deadline to the microsecond."""
    deadline = _half_past()
    hour = _hour(deadline)
    [pending] = bulk.add(1, start=deadline - 3 * HOUR, **{**PENDING, "pending_until": deadline})
    [flagged] = bulk.add(
        1,
        start=deadline - 2 * HOUR,
        **{**PENDING, "flagged": True, "reason": "missing-baseline", "pending_until": deadline},
    )
    _phase(flagged, deadline, None, "PASS", "digest-match").save()
    assert _spans(pending) == [(deadline, None, hour, FOREVER, "pending-expired")]
    assert _spans(flagged) == [(None, deadline, -1, hour, "missing-baseline")]
    for now, expected in (
        (deadline - 20 * MINUTE, [("missing-baseline", 1)]),
        (deadline - TICK, [("missing-baseline", 1)]),
        (deadline, [("pending-expired", 1)]),
        (deadline + 20 * MINUTE, [("pending-expired", 1)]),
    ):
        assert _hour(now) == hour
        assert _read(now) == expected, now
        assert count_queue_reasons(now=now) == expected, now


def test_stored_phases_starting_and_ending_inside_the_hour(queue: Queue, bulk: Bulk) -> None:
    """A PENDING head with three stored phases, two deadlines inside the hour: flagged ``no-result`` from 10 past to
    20 past, unflagged to 40 past, flagged ``baseline-changed`` for ever after. Each member row holds its phase's
    instants; the counts equal the queue at every edge and between them."""
    base = _half_past()
    hour = _hour(base)
    first, second, third = base - 20 * MINUTE, base - 10 * MINUTE, base + 10 * MINUTE
    [row] = bulk.add(1, start=base - 5 * HOUR, **{**PENDING, "pending_until": first})
    ReadPhase.objects.bulk_create(
        [
            _phase(row, first, second, "NOT_RUN", "no-result"),
            _phase(row, second, third, "PASS", "digest-match"),
            _phase(row, third, None, "MISMATCH", "baseline-changed"),
        ]
    )
    assert _spans(row) == [(first, second, hour, hour, "no-result"), (third, None, hour, FOREVER, "baseline-changed")]
    for now in (first - TICK, first, first + MINUTE, second - TICK, second, base, third - TICK, third, third + MINUTE):
        assert _hour(now) == hour
        assert count_queue_reasons(now=now) == _read(now), now
    assert count_queue_reasons(now=first) == [("no-result", 1)]
    assert count_queue_reasons(now=second) == []
    assert count_queue_reasons(now=third) == [("baseline-changed", 1)]


def test_the_instants_the_triggers_keep_are_a_rebuilds(queue: Queue, bulk: Bulk) -> None:
    """Member rows written by the triggers (bulk rows, a deadline moved, phases stored, flagged heads with a
    deadline) equal a rebuild's, the instants included; and a rebuild fills the instants of rows that had none (what
    migration 0017 does)."""
    base = _half_past()
    bulk.add(3, start=base - 2 * HOUR, **FLAGGED)
    rows = bulk.add(3, start=base - HOUR, **{**PENDING, "pending_until": base + 5 * MINUTE})
    Verification.objects.filter(pk=rows[0].pk).update(pending_until=base - 5 * MINUTE)
    _phase(rows[1], base + 5 * MINUTE, None, "UNKNOWN", "missing-baseline").save()
    flagged = bulk.add(
        2, start=base - HOUR, **{**PENDING, "flagged": True, "reason": "no-result", "pending_until": base + 10 * MINUTE}
    )
    _phase(flagged[0], base + 10 * MINUTE, base + 20 * MINUTE, "UNKNOWN", "missing-baseline").save()
    kept = snapshot()
    members = QueueBacklogMember.objects.all()
    assert members.filter(due_at__isnull=False).exists() and members.filter(until_at__isnull=False).exists()
    rollups.rebuild(connection)
    assert snapshot() == kept
    QueueBacklogMember.objects.update(due_at=None, until_at=None)  # the rows as 0016 left them
    rollups.rebuild(connection)
    assert snapshot() == kept
