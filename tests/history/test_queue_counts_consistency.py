"""The queue's counts per reason (issue 15) equal their definition over the records, whatever wrote the rows.

``review_selectors.queue_counts`` reads the rollup the database keeps (``QueueReasonCount``) instead of counting every
queued row. Checked here, on the varied state of ``test_dashboard_consistency`` (services, ``bulk_create``, queryset
updates, PENDING deadlines at ``now`` ± 30 s and within the current clock hour), against a reference computed in plain
Python from the verifications and decisions themselves: at several ``now`` values, after each of a series of
interleaved changes (a reason rewritten in place among them), and after deletes and moved timestamps. The number of
queries does not grow with the queue.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from datetime import datetime
from typing import Any

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from tests.history.test_dashboard_consistency import (
    DAY,
    FLAGGED,
    HOUR,
    MINUTE,
    NOT_RUN,
    PENDING,
    SECOND,
    Scenario,
    _add_evidence,
    _more_evidence_row,
    _resubmit,
    attempt,
    backlog_nows,
    decide,
    ref_queue_ids,
    scenario,
)
from verification.records.models import QueueReasonCount
from verification.reviews.selectors import queue_counts, queue_items
from verification.reviews.services.claims import review_claim
from verification.reviews.services.decisions import new_request_key, review_request_evidence
from verification.runs.models import Verification

pytestmark = pytest.mark.django_db
__all__ = ["scenario"]  # the fixture, shared with the dashboards' consistency tests


def ref_counts(now: datetime) -> list[tuple[str, int]]:
    """The queue at ``now`` (its definition, row by row) counted by the reason as read: a PENDING head whose deadline
    passed reads ``pending-expired``, any other its reason (none: the empty code); most first, then by code."""
    queued = ref_queue_ids(now)
    rows = Verification.objects.filter(pk__in=queued).values("verdict", "pending_until", "reason")
    counts = Counter(
        "pending-expired"
        if r["verdict"] == "PENDING" and r["pending_until"] is not None and r["pending_until"] <= now
        else (r["reason"] or "")
        for r in rows
    )
    return sorted(counts.items(), key=lambda pair: (-pair[1], pair[0]))


def got(now: datetime) -> list[tuple[str, int]]:
    return queue_counts(now=now, cached=False)


def assert_counts_match(now: datetime, *, where: str) -> list[tuple[str, int]]:
    expected = ref_counts(now)
    assert got(now) == expected, f"queue_counts {where}"
    # The old definition (every queued row grouped by its reason as read) says the same.
    rows = queue_items(now=now).order_by().values_list("queue_reason", flat=True)
    assert sorted(Counter(rows).items(), key=lambda pair: (-pair[1], pair[0])) == expected, where
    return expected


def test_counts_equal_the_definition_at_several_nows(scenario: Scenario) -> None:
    """Now, a microsecond before, 30 s, 20 min, the next clock hour, 2 h, 1 d and 3 d later: PENDING items expire into
    ``pending-expired`` at their deadlines, also within the current clock hour."""
    seen = set()
    for label, now in backlog_nows(scenario):
        seen.add(tuple(assert_counts_match(now, where=f"at {label}")))
    assert len(seen) >= 3  # the ``now`` values really see different counts
    assert QueueReasonCount.objects.exists()  # read from the rollup, which the triggers filled


def test_each_change_moves_the_counts_as_the_definition_does(scenario: Scenario) -> None:
    s = scenario
    now = s.now
    rows = s.rows
    assert_counts_match(now, where="at the start")

    def step(where: str, change: Callable[[], Any], delta: dict[str, int]) -> None:
        before = dict(got(now))
        change()
        after = dict(assert_counts_match(now, where=where))
        moved = {k: after.get(k, 0) - before.get(k, 0) for k in set(before) | set(after)}
        assert {k: d for k, d in moved.items() if d} == delta, where

    item = s.items["to-decide"]
    reason = item.reason or ""
    step("decide", lambda: decide(s.reviewer, item, "PASS", rationale="fine", cited=s.queue.evidence_ids(item),
                                  now=now - SECOND), {reason: -1})
    sent_back = s.items["to-send-back"]

    def send_back() -> None:
        review_claim(user=s.reviewer2, verification=sent_back, now=now - SECOND)
        review_request_evidence(user=s.reviewer2, verification=sent_back, rationale="the log, please",
                                request_key=new_request_key(), now=now - SECOND)

    step("more evidence", send_back, {sent_back.reason or "": -1})
    rerun: list[Verification] = []
    before = dict(got(now))
    rerun.append(_add_evidence(s.queue, sent_back, now=now - 2 * MINUTE))
    rerun[0].refresh_from_db()
    after = dict(assert_counts_match(now, where="new evidence"))
    assert sum(after.values()) == sum(before.values()) + 1
    assert after.get(rerun[0].reason or "", 0) == before.get(rerun[0].reason or "", 0) + 1
    old = s.items["to-resubmit"]
    before = dict(got(now))
    _resubmit(s.queue, old, now=now - 90 * MINUTE)
    assert sum(dict(assert_counts_match(now, where="resubmission")).values()) == sum(before.values())

    # Head columns updated directly, the reason among them (it is not a column the backlog needed).
    step("reason rewritten", lambda: Verification.objects.filter(pk=rows["mismatch-2d"].pk).update(
        reason="cited-conflict"), {"baseline-changed": -1, "cited-conflict": 1})
    step("unflag", lambda: Verification.objects.filter(pk=rows["edge-1d-exact"].pk).update(
        flagged=False, verdict="PASS"), {"missing-baseline": -1})
    step("deadline into the past", lambda: Verification.objects.filter(pk=rows["pending-due-30d"].pk).update(
        pending_until=now - SECOND), {"pending-expired": 1})
    step("decided by update", lambda: Verification.objects.filter(pk=rows["mismatch-2d"].pk).update(
        human_decided=True), {"cited-conflict": -1})
    step("new rows", lambda: s.bulk.add(3, start=now - 8 * DAY, step=HOUR, **FLAGGED), {"missing-baseline": 3})
    step("new NOT_RUN rows", lambda: s.bulk.add(2, start=now - DAY, **NOT_RUN), {"no-result": 2})
    step("new PENDING rows due in the current hour", lambda: s.bulk.add(
        2, start=now - HOUR, **{**PENDING, "pending_until": now - SECOND}), {"pending-expired": 2})
    hour_row = Verification.objects.get(pk=rows["hour-start"].pk)
    step("a row sent back directly", lambda: _more_evidence_row(s.reviewer, hour_row, now - SECOND),
         {dict(queue_items(now=now).filter(pk=hour_row.pk).values_list("pk", "queue_reason")).get(hour_row.pk, ""): -1})
    for label, later in backlog_nows(s):
        assert_counts_match(later, where=f"after the changes, {label}")


def test_moved_deadlines_and_deleted_rows_are_followed_or_refused(scenario: Scenario) -> None:
    s = scenario
    now = s.now
    rows = s.rows
    changes: list[tuple[str, Callable[[], Any]]] = [
        ("a deadline moved into the next hour",
         lambda: Verification.objects.filter(verdict="PENDING").update(pending_until=now + HOUR)),
        ("a queued row deleted", lambda: Verification.objects.filter(pk=rows["edge-7d-exact"].pk).delete()),
        ("a clean row deleted", lambda: Verification.objects.filter(pk=rows["clean"].pk).delete()),
        ("a queued row submitted twelve days earlier",
         lambda: Verification.objects.filter(pk=rows["not-run-5h"].pk).update(submitted_at=now - 12 * DAY)),
    ]
    for where, change in changes:
        attempt(change)
        for label, at in (("now", now), ("now + 2h", now + 2 * HOUR)):
            assert_counts_match(at, where=f"{where}, {label}")


def test_counting_costs_the_same_queries_however_long_the_queue(scenario: Scenario) -> None:
    """One statement (the rollup and the current hour's deadlines, ``UNION ALL``; two queries before issue 15) with the
    scenario's queue and with 200 more rows."""
    with CaptureQueriesContext(connection) as small:
        got(scenario.now)
    scenario.bulk.add(200, start=scenario.now - 3 * DAY, step=MINUTE, **FLAGGED)
    with CaptureQueriesContext(connection) as large:
        counts = got(scenario.now)
    assert len(small.captured_queries) == len(large.captured_queries) == 1
    assert counts == ref_counts(scenario.now)
