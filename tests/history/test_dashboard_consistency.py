"""The dashboards (issue 6 §3) equal their definitions over the base tables, whatever wrote the rows.

Every dashboard aggregate of ``verification.records.selectors_dashboards`` is checked against a reference computed
here in Python from rows read straight from the records (verifications, review decisions, findings and their events),
never through the functions under test or their aggregate code. The state is built by as many write paths as practical:
the real services (submissions and runs, claims and decisions, requests for more evidence, re-runs that supersede,
findings raised, acknowledged and closed), ``bulk_create`` (and, on PostgreSQL, one ``INSERT … SELECT``), single
inserts, queryset ``update()``, ``bulk_update`` and a model's ``save()`` of head columns after the fact, and rows of
decisions and findings inserted directly with times on other days. Items sit right at the edges that matter: the age
buckets (1 h, 1 d, 7 d, ± 30 s and exact), the PENDING deadlines (``now`` ± 30 s, the current clock hour) and the
periods (the first midnight, ``now`` itself, which a period excludes).

Only the public functions and their return types are used, so the module proves any implementation of them (such as
one over rollup tables kept by triggers) equal to the definition: the backlog at several ``now`` values (later ones
expire PENDING items into the queue and age items across buckets), the period dashboards for 7, 30 and 90 days at
``now`` and a day later, and again after each of a series of interleaved changes.
"""

from __future__ import annotations

import math
import uuid
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, time, timedelta
from typing import Any, Final

import pytest
from django.db import DatabaseError, transaction
from django.utils import timezone

from tests.history.conftest import Bulk, Story, decide
from tests.portal.conftest import Queue
from tests.verification.service_world import CONFIG_AFTER, inline
from verification.actors.services.actors import actor_for_user, portal_service_actor
from verification.kernel.errors import KernelError
from verification.kernel.findings import Finding as KernelFinding
from verification.kernel.findings import FindingKind
from verification.records import selectors_dashboards as hs
from verification.reviews.models import Finding, FindingEvent, ReviewDecision
from verification.reviews.selectors import queue_items
from verification.reviews.services.claims import review_claim
from verification.reviews.services.decisions import new_request_key, review_request_evidence
from verification.reviews.services.findings import finding_acknowledge, finding_close, finding_raise
from verification.runs.models import Verification
from verification.runs.services.run import verification_run
from verification.runs.services.submit import verification_add_evidence, verification_submit

pytestmark = pytest.mark.django_db

SECOND: Final = timedelta(seconds=1)
MINUTE: Final = timedelta(minutes=1)
HOUR: Final = timedelta(hours=1)
DAY: Final = timedelta(days=1)
TICK: Final = timedelta(microseconds=1)

#: The backlog's buckets, restated from the definition: (key, lowest age, age it stays under or None).
BUCKETS: Final = (("lt1h", timedelta(0), HOUR), ("lt1d", HOUR, DAY), ("lt7d", DAY, 7 * DAY), ("ge7d", 7 * DAY, None))
PERIOD_KEYS: Final = ("7d", "30d", "90d")
ABSTAINS: Final = frozenset({"UNKNOWN", "NOT_RUN"})

#: Head columns of the kinds of rows the scenario writes in bulk.
FLAGGED: Final = {"verdict": "UNKNOWN", "automated_verdict": "UNKNOWN", "determination": "cannot_determine",
                  "flagged": True, "reason": "missing-baseline"}
MISMATCH: Final = {"verdict": "MISMATCH", "automated_verdict": "MISMATCH", "determination": "not_met",
                   "flagged": True, "reason": "baseline-changed"}
NOT_RUN: Final = {"verdict": "NOT_RUN", "automated_verdict": "NOT_RUN", "determination": "cannot_determine",
                  "flagged": True, "reason": "no-result"}
PENDING: Final = {"verdict": "PENDING", "automated_verdict": "PENDING", "determination": None, "flagged": False,
                  "reason": None}
FAILED: Final = {"verdict": "FAIL", "automated_verdict": "FAIL", "determination": "not_met", "flagged": False,
                 "reason": "digest-mismatch"}
NEVER_RUN: Final = {"verdict": None, "automated_verdict": None, "determination": None, "flagged": True,
                    "reason": None}


# --- the references: the definitions, in plain Python over the records ----------------------------------------------


def percentile_cont(values: list[float], fraction: float) -> float:
    """PostgreSQL's ``percentile_cont``: linear interpolation between the two closest ranks of the sorted values."""
    ordered = sorted(values)
    position = (len(ordered) - 1) * fraction
    low = math.floor(position)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (position - low) * (ordered[high] - ordered[low])


def bucket_of(submitted_at: datetime, now: datetime) -> str | None:
    """The backlog bucket of an item submitted at ``submitted_at``: ``submitted_at <= now - low`` and
    ``> now - high``. An item submitted after ``now`` is in no bucket."""
    for key, low, high in BUCKETS:
        if submitted_at <= now - low and (high is None or submitted_at > now - high):
            return key
    return None


def ref_queue_ids(now: datetime) -> set[uuid.UUID]:
    """The queue at ``now`` from its definition, row by row: a head with a verdict, not decided by a person, flagged
    or PENDING past its deadline, not superseded by a newer verification, not sent back for more evidence."""
    rows = list(Verification.objects.values("pk", "verdict", "flagged", "human_decided", "pending_until",
                                            "supersedes_id"))
    superseded = {r["supersedes_id"] for r in rows if r["supersedes_id"] is not None}
    sent_back = set(ReviewDecision.objects.filter(action="MORE_EVIDENCE").values_list("verification_id", flat=True))
    return {
        r["pk"]
        for r in rows
        if r["verdict"] is not None
        and not r["human_decided"]
        and (r["flagged"] or (r["verdict"] == "PENDING" and r["pending_until"] is not None
                              and r["pending_until"] <= now))
        and r["pk"] not in superseded
        and r["pk"] not in sent_back
    }


def ref_backlog(now: datetime) -> list[tuple[str, int]]:
    """``backlog_by_age``: the queue items (``queue_items``, the queue's definition) counted by their age bucket."""
    counts = Counter(bucket_of(s, now) for s in queue_items(now=now).values_list("submitted_at", flat=True))
    return [(key, counts[key]) for key, _, _ in BUCKETS]


def _days(period: hs.Period) -> list[date]:
    return [period.first_day + timedelta(days=i) for i in range((period.last_day - period.first_day).days + 1)]


def _in(period: hs.Period, at: datetime) -> bool:
    return period.start <= at < period.end


def _day(at: datetime) -> date:
    return timezone.localtime(at).date()


def _decisions_in(period: hs.Period) -> list[dict[str, Any]]:
    rows = ReviewDecision.objects.values("created_at", "action", "user__username", "receipt_id",
                                         "verification__submitted_at")
    return [r for r in rows if _in(period, r["created_at"])]


def ref_decisions_per_day(period: hs.Period) -> list[tuple[date, int, int, int]]:
    """``decisions_per_day``: (day, PASS, FAIL, MORE_EVIDENCE) for every day of the period, oldest first."""
    counts = Counter((_day(r["created_at"]), r["action"]) for r in _decisions_in(period))
    return [(d, counts[(d, "PASS")], counts[(d, "FAIL")], counts[(d, "MORE_EVIDENCE")]) for d in _days(period)]


def ref_reviewer_counts(period: hs.Period) -> list[tuple[str, int, int, int]]:
    """``reviewer_counts``: (username, PASS, FAIL, MORE_EVIDENCE) of everyone who acted in the period, most actions
    first, then by name."""
    per: dict[str, Counter[str]] = defaultdict(Counter)
    for r in _decisions_in(period):
        per[r["user__username"]][r["action"]] += 1
    rows = [(name, c["PASS"], c["FAIL"], c["MORE_EVIDENCE"]) for name, c in per.items()]
    return sorted(rows, key=lambda r: (-(r[1] + r[2] + r[3]), r[0]))


def ref_time_to_decision(period: hs.Period) -> tuple[int, float | None, float | None]:
    """``time_to_decision``: count, median and p90 (``percentile_cont``) of decision time minus submission time, in
    seconds, over the decisions of the period that issued a receipt (PASS, FAIL)."""
    delays = [(r["created_at"] - r["verification__submitted_at"]).total_seconds()
              for r in _decisions_in(period) if r["receipt_id"] is not None]
    if not delays:
        return 0, None, None
    return len(delays), percentile_cont(delays, 0.5), percentile_cont(delays, 0.9)


def ref_abstain_share(period: hs.Period) -> tuple[list[tuple[date, int, int]], int, int]:
    """``abstain_share``: per day of ``created_at``, the completed automated outcomes (not null, not PENDING) and the
    abstains among them (UNKNOWN, NOT_RUN); and the totals."""
    completed: Counter[date] = Counter()
    abstained: Counter[date] = Counter()
    for r in Verification.objects.values("created_at", "automated_verdict"):
        if not _in(period, r["created_at"]) or r["automated_verdict"] in (None, "PENDING"):
            continue
        completed[_day(r["created_at"])] += 1
        abstained[_day(r["created_at"])] += r["automated_verdict"] in ABSTAINS
    days = [(d, completed[d], abstained[d]) for d in _days(period)]
    return days, sum(c for _, c, _ in days), sum(a for _, _, a in days)


@dataclass(frozen=True)
class RefFlow:
    days: list[tuple[date, int, int]]
    opened: int
    closed: int
    open_now: int
    by_kind: list[tuple[str, int]]


def ref_findings_flow(period: hs.Period) -> RefFlow:
    """``findings_flow``: ``raised`` and ``closed`` events per day of the period; findings without a ``closed`` event
    (whenever raised) per kind, most first, then by kind."""
    events = list(FindingEvent.objects.values("finding_id", "action", "created_at"))
    counts = Counter((_day(e["created_at"]), e["action"]) for e in events if _in(period, e["created_at"]))
    days = [(d, counts[(d, "raised")], counts[(d, "closed")]) for d in _days(period)]
    closed = {e["finding_id"] for e in events if e["action"] == "closed"}
    kinds = Counter(f["kind"] for f in Finding.objects.values("pk", "kind") if f["pk"] not in closed)
    by_kind = sorted(kinds.items(), key=lambda pair: (-pair[1], pair[0]))
    return RefFlow(days, sum(o for _, o, _ in days), sum(c for _, _, c in days), sum(kinds.values()), by_kind)


# --- comparing -------------------------------------------------------------------------------------------------------


def got_backlog(now: datetime) -> list[tuple[str, int]]:
    return [(key, count) for key, _, count in hs.backlog_by_age(now=now)]


def assert_backlog_matches(now: datetime, *, where: str) -> list[tuple[str, int]]:
    """``backlog_by_age(now)`` equals the reference, and the queue the reference counts is the queue's definition."""
    assert {v.pk for v in queue_items(now=now)} == ref_queue_ids(now), f"queue_items vs definition {where}"
    expected = ref_backlog(now)
    assert got_backlog(now) == expected, f"backlog_by_age {where}"
    return expected


def _differences(name: str, got: Any, expected: Any) -> list[str]:
    """What differs, readably: for lists of equal length the differing entries only."""
    if got == expected:
        return []
    if isinstance(got, list) and isinstance(expected, list) and len(got) == len(expected):
        return [f"{name}: got {g!r}, expected {e!r}" for g, e in zip(got, expected, strict=True) if g != e]
    return [f"{name}: got {got!r}, expected {expected!r}"]


def _close(got: float | None, expected: float | None) -> bool:
    return got == expected if got is None or expected is None else abs(got - expected) <= 1


def period_differences(key: str, now: datetime) -> list[str]:
    """Every period dashboard for ``period_of(key, now)`` against its reference (percentiles within a second): the
    differences, all of them (one failing dashboard does not hide another's)."""
    period = hs.period_of(key, now=now)
    out: list[str] = []
    start = timezone.make_aware(datetime.combine(period.first_day, time.min))
    end = timezone.make_aware(datetime.combine(_day(now) + timedelta(days=1), time.min))  # whole days, today's too
    out += _differences("period", (period.start, period.end, period.last_day, len(_days(period))),
                        (start, end, _day(now), int(key[:-1])))
    got_days = [(d.day, d.passed, d.failed, d.more_evidence) for d in hs.decisions_per_day(period=period)]
    out += _differences("decisions_per_day", got_days, ref_decisions_per_day(period))
    got_reviewers = [(r.username, r.passed, r.failed, r.more_evidence) for r in hs.reviewer_counts(period=period)]
    out += _differences("reviewer_counts", got_reviewers, ref_reviewer_counts(period))
    ttd = hs.time_to_decision(period=period)
    count, median, p90 = ref_time_to_decision(period)
    if ttd.count != count or not _close(ttd.median_seconds, median) or not _close(ttd.p90_seconds, p90):
        out.append(f"time_to_decision: got {(ttd.count, ttd.median_seconds, ttd.p90_seconds)}, "
                   f"expected {(count, median, p90)}")
    share = hs.abstain_share(period=period)
    days, completed, abstained = ref_abstain_share(period)
    out += _differences("abstain_share days", [(d.day, d.completed, d.abstained) for d in share.days], days)
    out += _differences("abstain_share totals", (share.completed, share.abstained, share.share),
                        (completed, abstained, abstained / completed if completed else None))
    flow = hs.findings_flow(period=period)
    ref = ref_findings_flow(period)
    out += _differences("findings_flow days", [(d.day, d.opened, d.closed) for d in flow.days], ref.days)
    out += _differences("findings_flow totals", (flow.opened, flow.closed, flow.open_now),
                        (ref.opened, ref.closed, ref.open_now))
    out += _differences("findings_flow by_kind", list(flow.by_kind), ref.by_kind)
    return out


def assert_period_matches(key: str, now: datetime, *, where: str) -> None:
    """Every period dashboard for ``period_of(key, now)`` equals its reference."""
    problems = period_differences(key, now)
    assert not problems, f"{key} at {where}:\n" + "\n".join(problems)


def assert_all_match(now: datetime, *, where: str) -> None:
    """The backlog and every period dashboard (7, 30, 90 days) at ``now`` equal their references; all differences
    are reported together."""
    assert {v.pk for v in queue_items(now=now)} == ref_queue_ids(now), f"queue_items vs definition {where}"
    problems = _differences("backlog_by_age", got_backlog(now), ref_backlog(now))
    for key in PERIOD_KEYS:
        problems += [f"{key} {p}" for p in period_differences(key, now)]
    assert not problems, f"at {where}:\n" + "\n".join(problems)


def attempt(change: Callable[[], Any]) -> bool:
    """Run ``change`` in a savepoint: True if the database took it, False if a guard refused it."""
    try:
        with transaction.atomic():
            change()
    except (DatabaseError, KernelError):
        return False
    return True


# --- the scenario ----------------------------------------------------------------------------------------------------


@dataclass
class Scenario:
    now: datetime
    queue: Queue
    bulk: Bulk
    story: Story
    reviewer: Any
    reviewer2: Any
    manager: Any
    #: Service-made queue items the interleaved test acts on, by name.
    items: dict[str, Verification] = field(default_factory=dict)
    #: Bulk rows the later tests change, by name.
    rows: dict[str, Verification] = field(default_factory=dict)
    open_findings: list[Finding] = field(default_factory=list)

    def at(self, offset: timedelta) -> datetime:
        return self.now + offset


def _one(bulk: Bulk, at: datetime, **columns: Any) -> Verification:
    return bulk.add(1, start=at, **columns)[0]


def _resubmit(queue: Queue, item: Verification, *, now: datetime) -> Verification:
    """A new submission for the subject of ``item`` (the same contract and evidence), run: it supersedes ``item``."""
    assert item.task is not None
    world = queue.world
    again, created = verification_submit(actor=world.agent.actor, token=world.agent.token, task=item.task,
                                         body={"evidence": [inline("config", CONFIG_AFTER)]}, idempotency_key=None,
                                         now=now)
    assert created
    verification_run(verification_id=again.pk, now=now)
    again.refresh_from_db()
    assert again.supersedes_id == item.pk
    return again


def _add_evidence(queue: Queue, item: Verification, *, now: datetime) -> Verification:
    """New evidence for ``item`` (sent back for more evidence): a re-run that supersedes it, submitted and run at
    ``now``."""
    world = queue.world
    again = verification_add_evidence(actor=world.agent.actor, token=world.agent.token, verification=item,
                                      body={"evidence": [inline("config", CONFIG_AFTER)]}, now=now)
    verification_run(verification_id=again.pk, now=now)
    again.refresh_from_db()
    assert again.supersedes_id == item.pk
    return again


def _raise(kind: FindingKind, ref: str, *, verification: Verification | None = None) -> Finding:
    """A finding through the service (its ``raised`` event is stamped with the clock)."""
    row = finding_raise(finding=KernelFinding(kind=kind, refs=(ref,)), subject=ref, verification=verification)
    assert row is not None
    return row


def _recorded_finding(kind: FindingKind, at: datetime, service_actor: Any) -> Finding:
    """A finding and its ``raised`` event inserted directly, on another day (the service stamps the clock)."""
    row = Finding.objects.create(kind=kind.value, reason=f"finding-{kind.value}", refs=[f"ref-{uuid.uuid4()}"],
                                 dedupe_key=uuid.uuid4().hex * 2, created_at=at)
    FindingEvent.objects.create(finding=row, action="raised", actor=service_actor, created_at=at)
    return row


def _more_evidence_row(user: Any, verification: Verification, at: datetime) -> ReviewDecision:
    """A "needs more evidence" decision inserted directly (no receipt, as the service's): the row leaves the queue."""
    return ReviewDecision.objects.create(request_key=new_request_key(), verification=verification, user=user,
                                         actor=actor_for_user(user), action="MORE_EVIDENCE", rationale="more, please",
                                         created_at=at)


def _build_service_items(s: Scenario) -> None:
    """Verifications, decisions, requests for more evidence and re-runs through the real services, spread over days
    and placed at the periods' first midnights and at ``now`` itself."""
    queue, now = s.queue, s.now
    starts = {key: hs.period_of(key, now=now).start for key in PERIOD_KEYS}
    # (name, who, action, delay from submission, decided at)
    plan: list[tuple[str, Any, str, timedelta, datetime]] = [
        ("pass-5min", s.reviewer, "PASS", HOUR, now - 5 * MINUTE),
        ("fail-3h", s.reviewer2, "FAIL", 10 * HOUR, now - 3 * HOUR),
        ("more-1d", s.reviewer, "MORE_EVIDENCE", 2 * HOUR, now - DAY),
        ("pass-2d", s.reviewer2, "PASS", 30 * MINUTE, now - 2 * DAY),
        ("fail-3d", s.reviewer, "FAIL", 2 * DAY, now - 3 * DAY - 2 * HOUR),
        ("pass-7d-start", s.reviewer, "PASS", 5 * HOUR, starts["7d"]),
        ("fail-before-7d", s.reviewer2, "FAIL", 7 * HOUR, starts["7d"] - TICK),
        ("more-20d", s.reviewer2, "MORE_EVIDENCE", 3 * HOUR, now - 20 * DAY),
        ("pass-30d-start", s.reviewer, "PASS", 11 * HOUR, starts["30d"]),
        ("fail-45d", s.reviewer, "FAIL", 3 * DAY, now - 45 * DAY),
        ("pass-before-90d", s.reviewer2, "PASS", 13 * HOUR, starts["90d"] - TICK),
        ("fail-at-now", s.reviewer, "FAIL", 4 * HOUR, now),  # end-exclusive: counted only a day later
    ]
    for name, user, action, delay, at in plan:
        item = queue.unknown(name, now=at - delay)
        cited = queue.evidence_ids(item) if action == "PASS" else ()
        decide(user, item, action, rationale=f"{name}: checked by hand", cited=cited, now=at)
        s.items[name] = item
    # A re-run with new evidence after "needs more evidence": the old one stays out, the new one is flagged again.
    s.items["rerun-of-more-1d"] = _add_evidence(queue, s.items["more-1d"], now=now - 12 * HOUR)
    # A second submission for a queued subject supersedes the first (out of the queue), the new one is queued.
    first = queue.unknown("resubmitted", now=now - 3 * DAY)
    s.items["resubmitted-old"] = first
    s.items["resubmitted-new"] = _resubmit(queue, first, now=now - 2 * HOUR)
    # Queue items of other kinds, and ones the interleaved test decides, sends back and re-runs.
    s.items["mismatch"] = queue.mismatch()
    s.items["not-run"] = queue.not_run()
    s.items["expired-pending"] = queue.expired_pending("scan overdue", ago=2 * HOUR, deadline=60)
    s.items["pending-50min"] = queue.expired_pending("scan due soon", ago=10 * MINUTE, deadline=3600)
    s.items["to-decide"] = queue.unknown("decided later", now=now - 5 * HOUR)
    s.items["to-send-back"] = queue.unknown("sent back later", now=now - 2 * DAY)
    s.items["to-resubmit"] = queue.unknown("resubmitted later", now=now - 10 * DAY)
    s.items["clean"] = queue.clean_pass()
    s.items["unknown-decided-by-update"] = queue.unknown("decided by an update", now=now - 4 * HOUR)
    # Head columns changed after the services wrote them.
    Verification.objects.filter(pk=s.items["clean"].pk).update(flagged=True, flag_reason="re-examined")
    Verification.objects.filter(pk=s.items["unknown-decided-by-update"].pk).update(human_decided=True)


def _build_bulk_rows(s: Scenario) -> None:
    """Head-column rows by ``bulk_create`` (and raw ``INSERT … SELECT`` on PostgreSQL), at the buckets' edges and the
    PENDING deadlines' edges, spread over a hundred days, then changed by ``update``, ``bulk_update`` and ``save``."""
    bulk, now, rows = s.bulk, s.now, s.rows
    hour_start = now.replace(minute=0, second=0, microsecond=0)
    # Flagged items at the age buckets' edges: exact, 30 s younger and 30 s older.
    for edge_name, edge in (("0", timedelta(0)), ("1h", HOUR), ("1d", DAY), ("7d", 7 * DAY)):
        for shift_name, shift in (("younger", 30 * SECOND), ("exact", timedelta(0)), ("older", -30 * SECOND)):
            if edge or shift <= timedelta(0):
                rows[f"edge-{edge_name}-{shift_name}"] = _one(bulk, now - edge + shift, **FLAGGED)
    rows["future"] = _one(bulk, now + 30 * SECOND, **FLAGGED)  # submitted after ``now``: queued, in no bucket
    rows["hour-start"] = _one(bulk, hour_start, **FLAGGED)
    rows["before-hour-start"] = _one(bulk, hour_start - TICK, **MISMATCH)
    rows["mismatch-2d"] = _one(bulk, now - 2 * DAY, **MISMATCH)
    rows["not-run-5h"] = _one(bulk, now - 5 * HOUR, **NOT_RUN)
    # PENDING deadlines: past, at ``now`` ± 30 s, within the current clock hour, later, never; and a flagged PENDING.
    for name, submitted, deadline in (
        ("pending-expired-30s", now - 2 * HOUR, now - 30 * SECOND),
        ("pending-due-30s", now - 20 * MINUTE, now + 30 * SECOND),
        ("pending-due-at-now", now - 40 * MINUTE, now),
        ("pending-hour-start", now - 8 * DAY, hour_start),
        ("pending-hour-end", now - 3 * HOUR, hour_start + HOUR - TICK),
        ("pending-due-1h", now - 30 * MINUTE, now + HOUR),
        ("pending-due-36h", now - 5 * DAY, now + 36 * HOUR),
        ("pending-due-2d", now - 6 * DAY, now + 2 * DAY),
        ("pending-due-30d", now - HOUR, now + 30 * DAY),
        ("pending-due-5min", now - 50 * MINUTE, now + 5 * MINUTE),
        ("pending-to-resolve", now - 3 * DAY, now + 10 * DAY),
    ):
        rows[name] = _one(bulk, submitted, pending_until=deadline, **PENDING)
    rows["pending-no-deadline"] = _one(bulk, now - 2 * DAY, **PENDING)
    rows["pending-flagged"] = _one(bulk, now - 3 * HOUR, pending_until=now + DAY, **{**PENDING, "flagged": True})
    # Out of the queue whatever ``now``: decided by a person (flagged or not), never run, clean.
    rows["decided-flagged"] = _one(bulk, now - 2 * HOUR, human_decided=True, **FLAGGED)
    rows["decided"] = _one(bulk, now - 2 * HOUR, human_decided=True, **{**FLAGGED, "flagged": False})
    rows["never-run"] = _one(bulk, now - 6 * HOUR, **NEVER_RUN)
    rows["clean"] = _one(bulk, now - 30 * MINUTE)
    rows["failed"] = _one(bulk, now - 2 * DAY, **FAILED)
    # Superseded at insert: the newer row names the older one (as a re-run does).
    rows["superseded-at-insert"] = _one(bulk, now - 3 * DAY, **FLAGGED)
    rows["superseding"] = _one(bulk, now - 90 * MINUTE, supersedes=rows["superseded-at-insert"], **FLAGGED)
    # Spread over a hundred days, for the abstain share and the oldest bucket.
    bulk.add(26, start=now - HOUR, step=97 * HOUR, **FLAGGED)
    bulk.add(40, start=now - 2 * HOUR, step=61 * HOUR)  # clean PASS
    bulk.add(19, start=now - 3 * HOUR, step=131 * HOUR, **{**NOT_RUN, "flagged": False})
    bulk.add(35, start=now - 4 * HOUR, step=71 * HOUR, **FAILED)
    bulk.add(50, start=now - 5 * HOUR, step=47 * HOUR, **{**PENDING, "pending_until": None})
    bulk.add(45, start=now - 6 * HOUR, step=53 * HOUR, **{**NEVER_RUN, "flagged": False})
    bulk.add(7, start=now - 7 * HOUR, step=17 * HOUR, human_decided=True, **{**FLAGGED, "verdict": "PASS",
                                                                             "flagged": False})
    # The raw multi-row insert (``add`` on SQLite; its span stays under 35 min, an int4 of microseconds there): runs
    # across the 1 h and the 1 d edge, flagged items and unflagged abstains.
    bulk.add_fast(40, start=now - 45 * MINUTE, step=50 * SECOND, **FLAGGED)
    bulk.add_fast(30, start=now - DAY + 10 * MINUTE, step=61 * SECOND, **{**NOT_RUN, "flagged": False})
    bulk.add_fast(20, start=now - DAY + 15 * MINUTE, step=83 * SECOND, **FLAGGED)
    # One at a time, through ``save()``.
    rows["created-one"] = Verification.objects.create(
        rubric_hash="2" * 64, submission_hash=uuid.uuid4().hex * 2, task=bulk.task, cycle=1,
        submitted_at=now - 26 * HOUR, created_at=now - 26 * HOUR, **FLAGGED,
    )

    # --- head columns changed after the rows were written -----------------------------------------------------------
    rows["flagged-by-update"] = _one(bulk, now - 4 * DAY)
    Verification.objects.filter(pk=rows["flagged-by-update"].pk).update(flagged=True, verdict="FAIL",
                                                                          automated_verdict="FAIL")
    rows["unflagged-by-update"] = _one(bulk, now - 5 * HOUR, **FLAGGED)
    Verification.objects.filter(pk=rows["unflagged-by-update"].pk).update(flagged=False, verdict="PASS")
    rows["decided-by-update"] = _one(bulk, now - 8 * DAY, **FLAGGED)
    Verification.objects.filter(pk=rows["decided-by-update"].pk).update(human_decided=True, verdict="FAIL",
                                                                          flagged=False)
    rows["verdict-changed"] = _one(bulk, now - 3 * HOUR, **FLAGGED)
    Verification.objects.filter(pk=rows["verdict-changed"].pk).update(verdict="MISMATCH", reason="baseline-changed")
    rows["deadline-moved-earlier"] = _one(bulk, now - 9 * HOUR, pending_until=now + 30 * DAY, **PENDING)
    Verification.objects.filter(pk=rows["deadline-moved-earlier"].pk).update(pending_until=now - HOUR)
    rows["deadline-moved-later"] = _one(bulk, now - 9 * HOUR, pending_until=now - 2 * HOUR, **PENDING)
    Verification.objects.filter(pk=rows["deadline-moved-later"].pk).update(pending_until=now + 4 * DAY)
    rows["deadline-dropped"] = _one(bulk, now - 2 * HOUR, pending_until=now - 5 * MINUTE, **PENDING)
    Verification.objects.filter(pk=rows["deadline-dropped"].pk).update(pending_until=None)
    # A PENDING resolved by a late result: UNKNOWN, flagged, no deadline (an abstain now, and queued).
    rows["pending-resolved"] = _one(bulk, now - 26 * HOUR, pending_until=now + DAY, **PENDING)
    Verification.objects.filter(pk=rows["pending-resolved"].pk).update(
        verdict="UNKNOWN", automated_verdict="UNKNOWN", determination="cannot_determine", flagged=True,
        reason="pending-expired", pending_until=None,
    )
    Verification.objects.filter(supersedes__isnull=True, automated_verdict="PENDING", created_at__lt=now - 40 * DAY,
                                pending_until__isnull=True).update(automated_verdict="UNKNOWN", verdict="UNKNOWN")
    rows["superseded-by-update"] = _one(bulk, now - 2 * DAY, **FLAGGED)
    Verification.objects.filter(pk=rows["flagged-by-update"].pk).update(supersedes=rows["superseded-by-update"])
    # ``bulk_update`` (one UPDATE … CASE) and a model's ``save()`` (every column).
    toggled = [_one(bulk, now - k * 7 * HOUR, **FLAGGED) for k in (1, 2, 3)]
    for row, flagged in zip(toggled, (False, True, False), strict=True):
        row.flagged = flagged
        row.verdict = "FAIL" if flagged else "PASS"
    Verification.objects.bulk_update(toggled, ["flagged", "verdict"])
    saved = _one(bulk, now - 12 * DAY, **PENDING)
    saved.pending_until = now - DAY
    saved.automated_verdict = "NOT_RUN"
    saved.save()
    rows["saved"] = saved
    # A reviewer sends a bulk row back directly (a decision row without the service): out of the queue.
    rows["sent-back-row"] = _one(bulk, now - 30 * HOUR, **FLAGGED)
    _more_evidence_row(s.reviewer2, rows["sent-back-row"], now - 6 * DAY)


def _build_findings(s: Scenario) -> None:
    """Findings raised by the service and directly on other days (one by ``bulk_create``), acknowledged and closed."""
    now, closer = s.now, actor_for_user(s.manager)
    starts = {key: hs.period_of(key, now=now).start for key in PERIOD_KEYS}
    service = portal_service_actor()
    tamper = _raise(FindingKind.TAMPER, "receipt-chain-1", verification=s.items["mismatch"])
    revoked = _raise(FindingKind.REVOKED_KEY, "key-1")
    _raise(FindingKind.REVOKED_KEY, "key-2")
    finding_acknowledge(actor=closer, finding=revoked, rationale="rotating the key", now=now - MINUTE)
    finding_close(actor=closer, finding=tamper, rationale="chain re-verified", now=now - 2 * MINUTE)
    finding_close(actor=closer, finding=s.story.integrity_finding, rationale="bytes restored", now=now)  # excluded
    dated = [
        _recorded_finding(FindingKind.TAMPER, now - 3 * DAY, service),
        _recorded_finding(FindingKind.EVIDENCE_INTEGRITY, now - 10 * DAY, service),
        _recorded_finding(FindingKind.DISAGREEMENT, starts["7d"], service),
        _recorded_finding(FindingKind.DISAGREEMENT, starts["30d"] - TICK, service),
        _recorded_finding(FindingKind.TAMPER, now - 60 * DAY, service),
        _recorded_finding(FindingKind.EVIDENCE_INTEGRITY, starts["90d"], service),
    ]
    finding_close(actor=closer, finding=dated[0], rationale="false alarm", now=now - 2 * DAY)
    finding_close(actor=closer, finding=dated[1], rationale="restored", now=starts["7d"] - TICK)
    finding_close(actor=closer, finding=dated[4], rationale="old", now=now - 59 * DAY)
    keys = [uuid.uuid4().hex * 2 for _ in range(5)]
    Finding.objects.bulk_create([
        Finding(kind=kind, reason=f"finding-{kind}", refs=[f"batch-{i}"], dedupe_key=keys[i],
                created_at=now - (i + 1) * 31 * HOUR)
        for i, kind in enumerate(["tamper", "revoked_key", "disagreement", "tamper", "evidence_integrity"])
    ])
    batch = list(Finding.objects.filter(dedupe_key__in=keys).order_by("-created_at"))
    FindingEvent.objects.bulk_create(
        [FindingEvent(finding=f, action="raised", actor=service, created_at=f.created_at) for f in batch]
    )
    finding_close(actor=closer, finding=batch[-1], rationale="batch closed", now=now - 3 * HOUR)
    s.open_findings = [f for f in Finding.objects.order_by("id") if not f.events.filter(action="closed").exists()]


@pytest.fixture
def scenario(queue: Queue, bulk: Bulk, story: Story, reviewer: Any, reviewer2: Any, manager: Any) -> Scenario:
    """A varied state from many write paths; ``now`` is a minute ahead of the clock, so whatever the services stamp
    with the clock is in the past of every ``now`` the tests use."""
    s = Scenario(timezone.now() + MINUTE, queue, bulk, story, reviewer, reviewer2, manager)
    _build_service_items(s)
    _build_bulk_rows(s)
    _build_findings(s)
    return s


def backlog_nows(s: Scenario) -> list[tuple[str, datetime]]:
    hour_start = s.now.replace(minute=0, second=0, microsecond=0)
    return [
        ("now", s.now),
        ("now - 1µs", s.at(-TICK)),
        ("now + 30s", s.at(30 * SECOND)),
        ("now + 20min", s.at(20 * MINUTE)),
        ("next clock hour", hour_start + HOUR),
        ("now + 2h", s.at(2 * HOUR)),
        ("now + 1d", s.at(DAY)),
        ("now + 3d", s.at(3 * DAY)),
    ]


def _total(backlog: Iterable[tuple[str, int]]) -> int:
    return sum(n for _, n in backlog)


# --- the tests -------------------------------------------------------------------------------------------------------


def test_percentile_cont_reference() -> None:
    """The reference percentile interpolates as PostgreSQL's ``percentile_cont`` does; the reference buckets put an
    age exactly on an edge in the older bucket and a submission after ``now`` in none."""
    assert percentile_cont([1, 2, 3, 10], 0.5) == 2.5
    assert percentile_cont([10, 1, 3, 2], 0.9) == pytest.approx(7.9)
    assert percentile_cont([4], 0.9) == 4
    noon = datetime(2025, 1, 1, 12, tzinfo=UTC)
    assert [bucket_of(noon, noon + age) for age in (-TICK, timedelta(0), HOUR - TICK, HOUR, DAY, 7 * DAY)] == [
        None, "lt1h", "lt1h", "lt1d", "lt7d", "ge7d"]


def test_the_scenario_is_not_vacuous(scenario: Scenario) -> None:
    """The references see what the scenario meant to build: every backlog bucket holds items, later ``now`` values
    bring expired PENDING items in, every period has decisions with receipts, abstains and findings both ways, and
    each special row is where the definition puts it."""
    s = scenario
    at_now = dict(ref_backlog(s.now))
    assert all(at_now[key] >= 1 for key, _, _ in BUCKETS), at_now
    assert at_now["lt1d"] >= 40 and at_now["ge7d"] >= 20  # the raw-insert run and the hundred-day spread
    queued = ref_queue_ids(s.now)
    rows, items = s.rows, s.items
    expected_in = ["edge-0-exact", "edge-1h-older", "edge-7d-older", "future", "pending-expired-30s",
                   "pending-due-at-now", "pending-hour-start", "pending-flagged", "superseding",
                   "deadline-moved-earlier", "pending-resolved", "saved"]
    expected_out = ["pending-due-30s", "pending-due-1h", "pending-no-deadline", "decided-flagged", "decided",
                    "never-run", "clean", "superseded-at-insert", "unflagged-by-update", "decided-by-update",
                    "deadline-moved-later", "deadline-dropped", "superseded-by-update", "sent-back-row"]
    for name in expected_in:
        assert rows[name].pk in queued, name
    for name in expected_out:
        assert rows[name].pk not in queued, name
    assert items["clean"].pk in queued and items["unknown-decided-by-update"].pk not in queued
    assert items["rerun-of-more-1d"].pk in queued and items["more-1d"].pk not in queued
    assert items["resubmitted-new"].pk in queued and items["resubmitted-old"].pk not in queued
    assert items["expired-pending"].pk in queued and items["pending-50min"].pk not in queued
    assert bucket_of(rows["future"].submitted_at, s.now) is None
    later = {label: _total(ref_backlog(now)) for label, now in backlog_nows(s)}
    assert later["now + 20min"] >= later["now"] + 2  # due in 30 s and 5 min
    assert later["now + 2h"] >= later["now + 20min"] + 2  # the service's 50-minute deadline, and due in 1 h
    assert later["now + 3d"] >= later["now + 2h"] + 2  # due in 36 h and in 2 d

    for key in PERIOD_KEYS:
        period = hs.period_of(key, now=s.now)
        assert sum(p + f + m for _, p, f, m in ref_decisions_per_day(period)) >= 4, key
        assert len(ref_reviewer_counts(period)) == 2, key
        assert ref_time_to_decision(period)[0] >= 3, key
        _, completed, abstained = ref_abstain_share(period)
        assert completed > abstained > 0, key
        flow = ref_findings_flow(period)
        assert flow.opened > 0 and flow.closed > 0, key
    flow = ref_findings_flow(hs.period_of("7d", now=s.now))
    assert flow.open_now == len(s.open_findings) and len(flow.by_kind) >= 3
    # A period's days are whole: the FAIL decided at ``now`` counts today, and a day later under yesterday.
    today = ref_decisions_per_day(hs.period_of("7d", now=s.now))[-1]
    tomorrow = ref_decisions_per_day(hs.period_of("7d", now=s.at(DAY)))
    assert today[2] >= 1 and tomorrow[-2] == today


def test_backlog_by_age_equals_the_definition_at_several_nows(scenario: Scenario) -> None:
    """``backlog_by_age`` equals the queue counted by age bucket at ``now``, a microsecond before, 30 s, 20 min, the
    next clock hour, 2 h, 1 d and 3 d later: PENDING items expire into the queue at their deadlines (also within the
    current clock hour), items age across the 1 h, 1 d and 7 d edges (exact and ± 30 s), a row submitted after
    ``now`` is in no bucket, and the queue the reference counts is the queue's own definition."""
    problems: list[str] = []
    seen = set()
    for label, now in backlog_nows(scenario):
        assert {v.pk for v in queue_items(now=now)} == ref_queue_ids(now), f"queue_items vs definition at {label}"
        expected = ref_backlog(now)
        problems += _differences(f"backlog_by_age at {label}", got_backlog(now), expected)
        seen.add(tuple(expected))
    assert not problems, "\n".join(problems)
    assert len(seen) >= 5  # the ``now`` values really see different backlogs


@pytest.mark.parametrize("key", PERIOD_KEYS)
def test_period_dashboards_equal_the_definition(scenario: Scenario, key: str) -> None:
    """Decisions per day, per-reviewer counts, time to decision (median and p90), the share of abstains and the
    findings flow equal their references for the period at ``now`` and a day later (which takes in what happened at
    ``now`` and drops the period's first day), with rows at the first midnight and a microsecond before it."""
    problems = [f"{label}: {p}" for label, now in (("now", scenario.now), ("now + 1d", scenario.at(DAY)))
                for p in period_differences(key, now)]
    assert not problems, "\n".join(problems)


def test_each_change_moves_the_dashboards_as_the_definition_does(scenario: Scenario) -> None:
    """Interleaved writes, with every dashboard checked after each: a decision takes one item out of its bucket and
    adds a PASS today; "needs more evidence" takes one out; new evidence brings a flagged re-run into the newest
    bucket; a resubmission swaps the old item for the new one; closing a finding lowers its kind's open count by one;
    updates of head columns (unflag, deadline moved into the past, a person's decision by ``update``, a supersedes
    link dropped), new rows and a decision row inserted directly move the backlog as they should; a renamed reviewer
    is counted under the new name."""
    s = scenario
    now = s.now
    period = hs.period_of("7d", now=now)
    assert_all_match(now, where="the start")

    def backlog() -> dict[str, int]:
        return dict(got_backlog(now))

    def step(where: str, change: Callable[[], Any], delta: dict[str, int]) -> None:
        before = backlog()
        change()
        assert_all_match(now, where=where)
        after = backlog()
        assert {k: after[k] - before[k] for k in after if after[k] != before[k]} == delta, where

    # A PASS five hours after submission: out of the 1 h – 1 d bucket; one more PASS today, one more receipt.
    item = s.items["to-decide"]
    passes = sum(d.passed for d in hs.decisions_per_day(period=period))
    count = hs.time_to_decision(period=period).count
    step("decide", lambda: decide(s.reviewer, item, "PASS", rationale="fine", cited=s.queue.evidence_ids(item),
                                  now=now - SECOND), {"lt1d": -1})
    assert sum(d.passed for d in hs.decisions_per_day(period=period)) == passes + 1
    assert hs.time_to_decision(period=period).count == count + 1

    # "Needs more evidence" on a two-day-old item: out of the 1 – 7 d bucket, no receipt.
    sent_back = s.items["to-send-back"]

    def send_back() -> None:
        review_claim(user=s.reviewer2, verification=sent_back, now=now - SECOND)
        review_request_evidence(user=s.reviewer2, verification=sent_back, rationale="the log, please",
                                request_key=new_request_key(), now=now - SECOND)

    step("more evidence", send_back, {"lt7d": -1})
    assert hs.time_to_decision(period=period).count == count + 1

    # New evidence: its run is flagged again, so the re-run is queued in the newest bucket.
    step("new evidence", lambda: s.items.update(rerun=_add_evidence(s.queue, sent_back, now=now - 2 * MINUTE)),
         {"lt1h": 1})
    # A resubmission of a ten-day-old item: the old one leaves the oldest bucket, the new one is an hour old.
    step("resubmission", lambda: _resubmit(s.queue, s.items["to-resubmit"], now=now - 90 * MINUTE),
         {"ge7d": -1, "lt1d": 1})

    # Closing a finding: its kind's open count drops by one, one more closed today.
    finding = next(f for f in s.open_findings if f.kind == "disagreement")
    open_before = dict(hs.findings_flow(period=period).by_kind)
    closed_before = hs.findings_flow(period=period).closed
    step("close a finding", lambda: finding_close(actor=actor_for_user(s.manager), finding=finding,
                                                  rationale="explained", now=now - SECOND), {})
    flow = hs.findings_flow(period=period)
    assert dict(flow.by_kind).get("disagreement", 0) == open_before["disagreement"] - 1
    assert flow.closed == closed_before + 1 and flow.days[-1].closed >= 1

    # Head columns updated directly.
    rows = s.rows
    step("unflag", lambda: Verification.objects.filter(pk=rows["edge-1d-exact"].pk).update(
        flagged=False, verdict="PASS"), {"lt7d": -1})
    step("deadline into the past", lambda: Verification.objects.filter(pk=rows["pending-due-30d"].pk).update(
        pending_until=now - SECOND), {"lt1d": 1})
    step("decided by update", lambda: Verification.objects.filter(pk=rows["mismatch-2d"].pk).update(
        human_decided=True), {"lt7d": -1})
    step("unsupersede", lambda: Verification.objects.filter(pk=rows["superseding"].pk).update(supersedes=None),
         {"lt7d": 1})
    step("new rows", lambda: s.bulk.add(3, start=now - 8 * DAY, step=HOUR, **FLAGGED), {"ge7d": 3})
    step("a row sent back directly", lambda: _more_evidence_row(s.reviewer, rows["hour-start"], now - SECOND),
         {"lt1h": -1})
    # A reviewer renamed: the per-reviewer counts name the person as they are now.
    step("rename", lambda: type(s.reviewer2).objects.filter(pk=s.reviewer2.pk).update(username="bob"), {})
    assert "bob" in {r.username for r in hs.reviewer_counts(period=period)}
    # The later ``now`` values still agree after all of it.
    for label, later in backlog_nows(s):
        assert_backlog_matches(later, where=f"after the changes, {label}")
    assert_period_matches("7d", s.at(DAY), where="after the changes, now + 1d")


def test_moved_timestamps_and_deleted_rows_are_followed_or_refused(scenario: Scenario) -> None:
    """The dashboards read the records as they are: if the database lets a verification's ``submitted_at`` or
    ``created_at`` move, or a verification be deleted, the backlog, the time to decision and the share of abstains
    follow (or the database refuses the change, which is as good). Either way they equal the definition after each."""
    s = scenario
    now = s.now
    rows, items = s.rows, s.items
    changes: list[tuple[str, Callable[[], Any]]] = [
        ("a queued row submitted twelve days earlier",
         lambda: Verification.objects.filter(pk=rows["not-run-5h"].pk).update(submitted_at=now - 12 * DAY)),
        ("a decided verification submitted a day earlier",
         lambda: Verification.objects.filter(pk=items["pass-2d"].pk).update(
             submitted_at=items["pass-2d"].submitted_at - DAY)),
        ("a verification created on another day",
         lambda: Verification.objects.filter(pk=rows["pending-resolved"].pk).update(created_at=now - 20 * DAY)),
        ("a queued row deleted", lambda: Verification.objects.filter(pk=rows["edge-7d-exact"].pk).delete()),
        ("a clean row deleted", lambda: Verification.objects.filter(pk=rows["clean"].pk).delete()),
    ]
    for where, change in changes:
        attempt(change)
        assert_all_match(now, where=where)
        assert_period_matches("30d", s.at(DAY), where=f"{where}, now + 1d")
