"""Reads for the managers' dashboards (issue 6 §3): aggregates over the rollups, per period."""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from typing import Any, Final

from django.db import connection
from django.db.models import (
    Q,
    Sum,
)
from django.utils import timezone

from verification.records.models import (
    DecisionDayCount,
    DecisionDelay,
    FindingDayCount,
    OpenFindingCount,
    QueueBacklogCount,
    VerificationDayCount,
)
from verification.records.read_helpers import bad_request, start_of_day
from verification.reviews.models import FindingAction, ReviewAction
from verification.reviews.selectors import edge_in_hour_q, queue_items, spans_hour_q

PERIODS: Final[dict[str, int]] = {"7d": 7, "30d": 30, "90d": 90}
DEFAULT_PERIOD: Final = "30d"
#: Queue backlog buckets: (key, label, lower bound of age, upper bound or None).
AGE_BUCKETS: Final = (
    ("lt1h", "under 1 hour", timedelta(0), timedelta(hours=1)),
    ("lt1d", "1 hour – 1 day", timedelta(hours=1), timedelta(days=1)),
    ("lt7d", "1 – 7 days", timedelta(days=1), timedelta(days=7)),
    ("ge7d", "7 days or more", timedelta(days=7), None),
)


@dataclass(frozen=True)
class Period:
    key: str
    days: int
    start: datetime  # inclusive: midnight (current time zone) of the first day
    end: datetime  # exclusive: midnight after the last day (today): the days are counted whole
    first_day: date
    last_day: date

    @property
    def day_list(self) -> list[date]:
        return [self.first_day + timedelta(days=i) for i in range((self.last_day - self.first_day).days + 1)]


def period_of(key: str | None, *, now: datetime) -> Period:
    """The last ``days`` calendar days up to ``now``, today included, each counted whole (the rollups count per day;
    at the current time nothing is recorded after ``now`` anyway); ``invalid-request`` for an unknown key."""
    chosen = key or DEFAULT_PERIOD
    if chosen not in PERIODS:
        raise bad_request(f"period is one of {', '.join(PERIODS)}")
    days = PERIODS[chosen]
    last = timezone.localtime(now).date()
    first = last - timedelta(days=days - 1)
    return Period(chosen, days, start_of_day(first), start_of_day(last + timedelta(days=1)), first, last)


def _hour(moment: datetime) -> int:
    """Whole hours since the Unix epoch (the rollups' hour)."""
    return math.floor(moment.timestamp() / 3600)


def _hour_start(hour: int) -> datetime:
    return datetime.fromtimestamp(hour * 3600, tz=UTC)


def _age_bucket(moment: datetime, now: datetime) -> str | None:
    """The bucket of an item submitted at ``moment`` (None: submitted after ``now``)."""
    for key, _, low, high in AGE_BUCKETS:
        if moment <= now - low and (high is None or moment > now - high):
            return key
    return None


def backlog_by_age(*, now: datetime) -> list[tuple[str, str, int]]:
    """The reviewer queue now, by age since submission: ``(key, label, count)`` per bucket.

    From the rollup (``rollups``: the spans in which a verification reads as a queue member, counted per submission
    hour and the hours a span starts and ends in), whose size follows the hours, not the items: every submission hour
    that lies wholly inside one bucket is summed from the spans covering the whole current hour (one aggregate). The
    hours a bucket boundary cuts (the current hour, and those of now - 1 hour, 1 day and 7 days), and the items with a
    span edge inside the current hour (a PENDING deadline falling in it), are counted from the queue itself, exactly
    (one query over those few hours' rows).
    """
    now_hour = _hour(now)
    split = sorted({_hour(now - low) for _, _, low, _ in AGE_BUCKETS})
    sums: dict[str, Any] = {}
    for key, _, low, high in AGE_BUCKETS:
        # A whole hour h is in a bucket iff its first instant is: h is never a boundary's hour here.
        condition = Q(submitted_hour__lte=_hour(now - low))
        if high is not None:
            condition &= Q(submitted_hour__gt=_hour(now - high))
        sums[key] = Sum("n", filter=condition)
    counted = (
        QueueBacklogCount.objects.filter(spans_hour_q(now_hour), submitted_hour__lt=now_hour)
        .exclude(submitted_hour__in=split)
        .aggregate(**sums)
    )
    result = {key: int(counted[key] or 0) for key, _, _, _ in AGE_BUCKETS}
    # One SELECT per cut hour and one for the deadlines falling due this hour, each a narrow range of its own partial
    # index (migration 0008), joined by UNION (a row in two of them counts once). Separate SELECTs, not one OR, so
    # the planner never trades those ranges for a scan of every flagged row.
    queue = queue_items(now=now).order_by()
    parts = [
        queue.filter(submitted_at__gte=_hour_start(hour), submitted_at__lt=_hour_start(hour + 1)).values_list(
            "pk", "submitted_at"
        )
        for hour in split
    ]
    parts.append(queue.filter(edge_in_hour_q(now_hour)).values_list("pk", "submitted_at"))
    for _, submitted in parts[0].union(*parts[1:]):
        bucket = _age_bucket(submitted, now)
        if bucket is not None:
            result[bucket] += 1
    return [(key, label, result[key]) for key, label, _, _ in AGE_BUCKETS]


@dataclass(frozen=True, kw_only=True)
class DecisionCounts:
    """Reviewers' actions counted together (a day's, a reviewer's): PASS, FAIL and needs more evidence."""

    passed: int = 0
    failed: int = 0
    more_evidence: int = 0

    @property
    def total(self) -> int:
        return self.passed + self.failed + self.more_evidence


def _decision_sums() -> dict[str, Sum]:
    """The fields of ``DecisionCounts`` summed over ``DecisionDayCount`` rows, one filtered sum per action."""
    return {
        "passed": Sum("n", filter=Q(action=ReviewAction.PASS), default=0),
        "failed": Sum("n", filter=Q(action=ReviewAction.FAIL), default=0),
        "more_evidence": Sum("n", filter=Q(action=ReviewAction.MORE_EVIDENCE), default=0),
    }


@dataclass(frozen=True, kw_only=True)
class DayDecisions(DecisionCounts):
    day: date


def _in_period(period: Period, column: str = "created_at") -> Q:
    return Q(**{f"{column}__gte": period.start, f"{column}__lt": period.end})


def _days_of(period: Period) -> Q:
    """The rollup days of a period: its calendar days."""
    return Q(day__gte=period.first_day, day__lte=period.last_day)


def decisions_per_day(*, period: Period) -> list[DayDecisions]:
    """Reviewers' actions per day of the period (PASS, FAIL, needs more evidence); one grouped query over the daily
    rollup (``DecisionDayCount``)."""
    rows = DecisionDayCount.objects.filter(_days_of(period)).order_by().values("day").annotate(**_decision_sums())
    counts = {row.pop("day"): row for row in rows}
    return [DayDecisions(day=day, **counts.get(day, {})) for day in period.day_list]


@dataclass(frozen=True)
class TimeToDecision:
    count: int
    median_seconds: float | None
    p90_seconds: float | None


def time_to_decision(*, period: Period) -> TimeToDecision:
    """Median and p90 of the time from submission to a person's PASS or FAIL, over decisions made in the period.

    Over ``DecisionDelay`` (one narrow row per decision, its delay computed when it was recorded), read through its
    (decided_at, seconds) index. PostgreSQL: one ``percentile_cont(ARRAY[0.5, 0.9])`` ordered-set aggregate.
    Elsewhere (SQLite): the count, then for each percentile the two ordered values around its position
    (``ORDER BY … LIMIT 2 OFFSET k``), interpolated as ``percentile_cont`` does.
    """
    delays = DecisionDelay.objects.filter(_in_period(period, "decided_at"))
    if connection.vendor == "postgresql":
        inner, params = delays.order_by().values("seconds").query.sql_with_params()
        # One pass: both percentiles from one ordering of the delays (the ORM has no ordered-set aggregate).
        sql = (
            "SELECT COUNT(*), PERCENTILE_CONT(ARRAY[0.5, 0.9]) WITHIN GROUP (ORDER BY delays.seconds) "  # noqa: S608
            f"FROM ({inner}) AS delays"
        )
        with connection.cursor() as cursor:
            cursor.execute(sql, params)
            count, percentiles = cursor.fetchone()
        if not count:
            return TimeToDecision(0, None, None)
        return TimeToDecision(int(count), float(percentiles[0]), float(percentiles[1]))
    n = delays.count()
    if n == 0:
        return TimeToDecision(0, None, None)
    ordered = delays.order_by("seconds").values_list("seconds", flat=True)

    def percentile(fraction: float) -> float:
        position = (n - 1) * fraction
        low = math.floor(position)
        values = [float(v) for v in ordered[low : low + 2]]
        if len(values) == 1 or position == low:
            return values[0]
        return values[0] + (position - low) * (values[1] - values[0])

    return TimeToDecision(n, percentile(0.5), percentile(0.9))


@dataclass(frozen=True, kw_only=True)
class ReviewerCount(DecisionCounts):
    username: str


def reviewer_counts(*, period: Period) -> list[ReviewerCount]:
    """Actions per reviewer in the period, most first; one grouped query over the daily rollup."""
    rows = (
        DecisionDayCount.objects.filter(_days_of(period))
        .order_by()
        .values("user__username")
        .annotate(**_decision_sums())
    )
    out = [ReviewerCount(username=row.pop("user__username"), **row) for row in rows]
    return sorted((r for r in out if r.total), key=lambda r: (-r.total, r.username))


@dataclass(frozen=True)
class DayAbstains:
    day: date
    completed: int
    abstained: int

    @property
    def share(self) -> float | None:
        return self.abstained / self.completed if self.completed else None


@dataclass(frozen=True)
class AbstainShare:
    days: list[DayAbstains]
    completed: int
    abstained: int

    @property
    def share(self) -> float | None:
        return self.abstained / self.completed if self.completed else None


def abstain_share(*, period: Period) -> AbstainShare:
    """Share of completed automated outcomes that abstained (``cannot_determine``), per day the verification was
    recorded (``created_at``).

    Counted on ``automated_verdict`` (the latest run or result as issued), so a person's later decision does not
    hide the machine's abstain (``rollups.ABSTAIN_VERDICTS``); a still-PENDING outcome is not completed. Read from the
    daily rollup (``VerificationDayCount``): one query over the period's days.
    """
    rows = VerificationDayCount.objects.filter(_days_of(period)).values_list("day", "completed", "abstained")
    by_day = {day: (completed, abstained) for day, completed, abstained in rows}
    days = [DayAbstains(d, *by_day.get(d, (0, 0))) for d in period.day_list]
    return AbstainShare(days, sum(d.completed for d in days), sum(d.abstained for d in days))


@dataclass(frozen=True)
class DayFindings:
    day: date
    opened: int
    closed: int


@dataclass(frozen=True)
class FindingsFlow:
    days: list[DayFindings]
    opened: int
    closed: int
    open_now: int
    by_kind: list[tuple[str, int]]  # open findings per kind, now


def findings_flow(*, period: Period) -> FindingsFlow:
    """Findings raised and closed per day of the period, and how many are open now (per kind): two queries over the
    rollups (``FindingDayCount``, ``OpenFindingCount``)."""
    rows = FindingDayCount.objects.filter(_days_of(period)).values_list("day", "action", "n")
    counts = {(day, action): n for day, action, n in rows}
    days = [
        DayFindings(d, counts.get((d, FindingAction.RAISED.value), 0), counts.get((d, FindingAction.CLOSED.value), 0))
        for d in period.day_list
    ]
    open_rows = OpenFindingCount.objects.filter(n__gt=0).values_list("kind", "n")
    by_kind = sorted(open_rows, key=lambda pair: (-pair[1], pair[0]))
    return FindingsFlow(
        days, sum(d.opened for d in days), sum(d.closed for d in days), sum(n for _, n in by_kind), by_kind
    )
