"""Keyset pages seek to their cursor (issue 15): ``(rank, submitted_at, id) > cursor`` as one row comparison.

The pages still cover the queue exactly once, in queue order, through ties of rank and of submission time (where only
the id decides); and on PostgreSQL the comparison is an index condition on the queue index, so a page ~30,000 rows
deep starts where its cursor points instead of reading and dropping every earlier row.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.db import connection
from django.db.models import F
from django.utils import timezone

from reviewportal.portal.presenters import queue_page
from tests.history.conftest import Bulk
from verification.reviews.selectors import Cursor, RowAfter, queue_items, queue_rank

pytestmark = pytest.mark.django_db

FLAGGED = {"verdict": "UNKNOWN", "automated_verdict": "UNKNOWN", "determination": "cannot_determine",
           "flagged": True, "reason": "missing-baseline"}
MISMATCH = {"verdict": "MISMATCH", "automated_verdict": "MISMATCH", "determination": "not_met",
            "flagged": True, "reason": "baseline-changed"}
NOT_RUN = {"verdict": "NOT_RUN", "automated_verdict": "NOT_RUN", "determination": "cannot_determine",
           "flagged": True, "reason": "no-result"}


def _all_pages(now: Any, limit: int, filters: dict[str, str] | None = None) -> list[Any]:
    seen: list[Any] = []
    cursor = None
    for _ in range(100):
        page = queue_page(now=now, filters=filters or {}, cursor=cursor, limit=limit)
        seen += [row.verification.pk for row in page.rows]
        cursor = page.next_cursor
        if cursor is None:
            return seen
    raise AssertionError("the pages never ended")


def test_pages_cover_the_queue_once_in_order_through_ties(bulk: Bulk) -> None:
    at = timezone.now() - timedelta(hours=3)
    bulk.add(5, start=at, step=timedelta(0), **FLAGGED)  # five rows with one submission time: the id decides
    bulk.add(4, start=at, step=timedelta(0), **MISMATCH)  # the same time in another rank
    bulk.add(3, start=at - timedelta(days=1), step=timedelta(minutes=1), **NOT_RUN)
    bulk.add(3, start=at, step=timedelta(seconds=1), **FLAGGED)
    bulk.add(2, start=at, **{**FLAGGED, "flagged": False, "verdict": "PASS"})  # not queued
    now = timezone.now()
    expected = list(queue_items(now=now).values_list("pk", flat=True))
    assert len(expected) == 15
    for limit in (1, 2, 4, 7, 15, 50):
        assert _all_pages(now, limit) == expected, f"limit {limit}"
    # With a filter, the same seek: only the filtered rows, in order.
    flagged = list(queue_items(now=now).filter(queue_reason="missing-baseline").values_list("pk", flat=True))
    assert _all_pages(now, 3, {"reason": "missing-baseline"}) == flagged


def test_the_cursor_excludes_its_own_row_and_everything_before(bulk: Bulk) -> None:
    at = timezone.now() - timedelta(hours=1)
    bulk.add(6, start=at, step=timedelta(0), **FLAGGED)
    now = timezone.now()
    ordered = list(queue_items(now=now))
    middle = ordered[2]
    cursor = Cursor(3, middle.submitted_at, middle.pk)
    after = list(queue_items(now=now).filter(RowAfter(queue_rank(), F("submitted_at"), F("id"), after=cursor)))
    assert [v.pk for v in after] == [v.pk for v in ordered[3:]]


@pytest.mark.postgres
def test_a_deep_page_seeks_the_queue_index_to_its_cursor(bulk: Bulk) -> None:
    bulk.add(3, start=timezone.now() - timedelta(hours=2), **FLAGGED)
    now = timezone.now()
    last = list(queue_items(now=now))[-1]
    cursor = Cursor(3, last.submitted_at, last.pk)
    with connection.cursor() as db:
        db.execute("SET LOCAL enable_seqscan = off")
        db.execute("SET LOCAL enable_sort = off")
    page = queue_items(now=now).filter(RowAfter(queue_rank(), F("submitted_at"), F("id"), after=cursor))[:51]
    plan = page.explain()
    assert "verification_review_queue_idx" in plan, plan
    index_conditions = [line for line in plan.splitlines() if "Index Cond" in line]
    assert any("ROW(" in line and ">" in line for line in index_conditions), plan  # a seek, not a filter


def test_the_queue_cursor_is_the_shared_keyset_cursor_and_refuses_a_forged_one() -> None:
    """issue 12: one cursor helper (verification/cursors.py); the queue's cursor is its (rank, submitted_at, id)."""
    import base64
    import uuid

    from verification import cursors
    from verification.errors import ServiceError
    from verification.kernel.reasons import Reason

    at = Cursor(2, timezone.now(), uuid.uuid4())
    raw = at.encode()
    assert raw == cursors.encode(2, at.submitted_at, at.pk)
    assert Cursor.decode(raw) == at
    for forged in ("garbage", base64.urlsafe_b64encode(b"x|2025-01-01T00:00:00+00:00|y").decode(), raw[:-3]):
        with pytest.raises(ServiceError) as refused:
            Cursor.decode(forged)
        assert refused.value.reason is Reason.INVALID_REQUEST
