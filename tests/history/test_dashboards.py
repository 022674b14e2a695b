"""Dashboards (issue 6 §3): backlog by age, decisions per day, median and p90 time to decision, per-reviewer counts,
share of abstains, findings opened and closed — aggregate queries for a selectable period, drawn as server-side SVG
that needs neither script nor inline style."""

from __future__ import annotations

import re
from datetime import datetime, timedelta
from typing import Any

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from reviewportal.history import charts
from tests.history.conftest import Bulk, Story, client_for, decide
from tests.portal.conftest import Queue
from verification.actors.services.actors import actor_for_user
from verification.records import selectors_dashboards as hs
from verification.reviews.services.findings import finding_close
from verification.runs.models import Verification

pytestmark = pytest.mark.django_db

HOUR = timedelta(hours=1)


def percentile_cont(values: list[float], fraction: float) -> float:
    """PostgreSQL's percentile_cont, for checking: linear interpolation between the closest ranks."""
    ordered = sorted(values)
    position = (len(ordered) - 1) * fraction
    low = int(position)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (position - low) * (ordered[high] - ordered[low])


def test_percentile_cont_reference() -> None:
    assert percentile_cont([1, 2, 3, 10], 0.5) == 2.5
    assert percentile_cont([1, 2, 3, 10], 0.9) == pytest.approx(7.9)
    assert percentile_cont([4], 0.9) == 4


def test_backlog_by_age_counts_the_queue_now(bulk: Bulk) -> None:
    now = timezone.now()
    flagged = {"verdict": "UNKNOWN", "automated_verdict": "UNKNOWN", "determination": "cannot_determine",
               "flagged": True, "reason": "missing-baseline"}
    bulk.add(2, start=now - timedelta(minutes=10), **flagged)
    bulk.add(3, start=now - 5 * HOUR, **flagged)
    bulk.add(1, start=now - timedelta(days=3), **flagged)
    bulk.add(4, start=now - timedelta(days=9), **flagged)
    bulk.add(6, start=now - timedelta(days=9))  # clean: not in the queue
    bulk.add(1, start=now - 2 * HOUR, human_decided=True, **{**flagged, "flagged": False})  # decided
    assert hs.backlog_by_age(now=now) == [
        ("lt1h", "under 1 hour", 2),
        ("lt1d", "1 hour – 1 day", 3),
        ("lt7d", "1 – 7 days", 1),
        ("ge7d", "7 days or more", 4),
    ]


@pytest.fixture
def decisions(queue: Queue, reviewer: Any, reviewer2: Any) -> dict[str, Any]:
    """Five reviewer actions at known times: rita PASS (1 h), PASS (2 h), FAIL (3 h); rob FAIL (10 h), more evidence.

    Each delay is from submission to the decision. Two yesterday, three today (a few minutes ago)."""
    now = timezone.now()
    yesterday, today = now - timedelta(days=1), now - timedelta(minutes=3)
    plan: list[tuple[Any, str, timedelta, datetime]] = [
        (reviewer, "PASS", 1 * HOUR, yesterday),
        (reviewer, "PASS", 2 * HOUR, yesterday),
        (reviewer, "FAIL", 3 * HOUR, today),
        (reviewer2, "FAIL", 10 * HOUR, today),
        (reviewer2, "MORE_EVIDENCE", 5 * HOUR, today),
    ]
    made = []
    for user, verdict, delay, at in plan:
        item = queue.unknown(f"{verdict} after {delay}", now=at - delay)
        cited = queue.evidence_ids(item) if verdict == "PASS" else ()
        decide(user, item, verdict, rationale="checked by hand", cited=cited, now=at)
        made.append((user, verdict, delay, at))
    return {"now": now, "plan": made}


def test_decisions_per_day_per_reviewer_and_time_to_decision(decisions: dict[str, Any]) -> None:
    now = decisions["now"]
    period = hs.period_of("7d", now=now)
    days = {d.day: d for d in hs.decisions_per_day(period=period)}
    assert len(days) == 7 and list(days)[-1] == timezone.localtime(now).date()
    expected: dict[Any, list[int]] = {}
    for _, verdict, _, at in decisions["plan"]:
        counts = expected.setdefault(timezone.localtime(at).date(), [0, 0, 0])
        counts[("PASS", "FAIL", "MORE_EVIDENCE").index(verdict)] += 1
    got = {day: [d.passed, d.failed, d.more_evidence] for day, d in days.items() if d.total}
    assert got == expected
    assert [(r.username, r.passed, r.failed, r.more_evidence) for r in hs.reviewer_counts(period=period)] == [
        ("rita", 2, 1, 0),
        ("rob", 0, 1, 1),
    ]
    result = hs.time_to_decision(period=period)
    hours = [1.0, 2.0, 3.0, 10.0]  # PASS and FAIL only: "needs more evidence" decides nothing
    assert result.count == 4
    assert result.median_seconds == pytest.approx(percentile_cont(hours, 0.5) * 3600, abs=1)
    assert result.p90_seconds == pytest.approx(percentile_cont(hours, 0.9) * 3600, abs=1)


def test_time_to_decision_is_one_aggregate_on_postgresql_and_offset_queries_elsewhere(
    decisions: dict[str, Any]
) -> None:
    period = hs.period_of("30d", now=decisions["now"])
    with CaptureQueriesContext(connection) as captured:
        hs.time_to_decision(period=period)
    sql = [q["sql"].upper() for q in captured.captured_queries]
    if connection.vendor == "postgresql":
        assert len(sql) == 1 and "PERCENTILE_CONT(ARRAY[0.5, 0.9]) WITHIN GROUP" in sql[0]
    else:
        assert len(sql) == 3 and "COUNT(" in sql[0]
        assert all("LIMIT 2 OFFSET" in s and "ORDER BY" in s for s in sql[1:])


def test_the_period_bounds_what_counts(decisions: dict[str, Any]) -> None:
    now = decisions["now"] + timedelta(days=6)  # yesterday's decisions fall out of a 7-day window; today's stay
    period = hs.period_of("7d", now=now)
    assert period.first_day > timezone.localtime(decisions["now"] - timedelta(days=1)).date()
    assert hs.time_to_decision(period=period).count == 2
    assert hs.period_of("90d", now=now).days == 90


def test_share_of_abstains_counts_the_machines_outcome(bulk: Bulk) -> None:
    now = timezone.now()
    bulk.add(3, start=now - HOUR, verdict="UNKNOWN", automated_verdict="UNKNOWN", determination="cannot_determine")
    bulk.add(1, start=now - HOUR, verdict="NOT_RUN", automated_verdict="NOT_RUN", determination="cannot_determine")
    bulk.add(4, start=now - HOUR)  # PASS, met
    bulk.add(1, start=now - HOUR, verdict="FAIL", automated_verdict="FAIL", determination="not_met")
    # A person later decided an abstain: it still counts as the machine's abstain.
    bulk.add(1, start=now - HOUR, verdict="PASS", automated_verdict="UNKNOWN", determination="met", human_decided=True)
    bulk.add(2, start=now - HOUR, verdict="PENDING", automated_verdict="PENDING", determination=None)  # not completed
    bulk.add(5, start=now - timedelta(days=40), verdict="UNKNOWN", automated_verdict="UNKNOWN")  # outside the period
    share = hs.abstain_share(period=hs.period_of("30d", now=now))
    assert (share.completed, share.abstained) == (10, 5)
    assert share.share == 0.5
    assert sum(d.completed for d in share.days) == 10 and len(share.days) == 30


def test_findings_opened_and_closed(story: Story, manager: Any) -> None:
    period = hs.period_of("7d", now=timezone.now())
    flow = hs.findings_flow(period=period)
    assert (flow.opened, flow.closed, flow.open_now) == (2, 0, 2)
    finding_close(actor=actor_for_user(manager), finding=story.integrity_finding, rationale="restored")
    flow = hs.findings_flow(period=hs.period_of("7d", now=timezone.now()))
    assert (flow.opened, flow.closed, flow.open_now, flow.by_kind) == (2, 1, 1, [("disagreement", 1)])
    today = flow.days[-1]
    assert (today.opened, today.closed) == (2, 1)


def test_the_dashboards_page_draws_svg_under_the_csp(story: Story, decisions: dict[str, Any], manager: Any) -> None:
    client = client_for(manager)
    html = client.get("/dashboards/?period=7d").content.decode()
    panels = re.findall(r'data-panel="([\w-]+)"', html)
    assert panels == ["backlog", "decisions", "time-to-decision", "reviewers", "abstains", "findings"]
    assert html.count("<svg class=\"chart\"") == 6
    assert " style=" not in html and "<style" not in html
    assert re.findall(r"<script\b[^>]*>", html) == [
        '<script src="/static/vendor/htmx/htmx.min.js" defer>', '<script src="/static/js/portal.js" defer>'
    ]
    bars = re.findall(r'<rect class="bar ([\w-]+)" x="[\d.]+" y="[\d.]+" width="[\d.]+" height="[\d.]+">', html)
    assert {"pass", "fail", "more", "median", "p90", "opened"} <= set(bars)
    assert '<option value="7d" selected>' in html
    assert "over 5 decisions" in html  # the four PASS/FAIL above and the story's FAIL
    one = client.get("/dashboards/reviewers/?period=7d").content.decode()
    assert re.findall(r'data-panel="([\w-]+)"', one) == ["reviewers"] and "<td>rita</td>" in one
    fragment = client.get("/dashboards/?period=30d", headers={"HX-Request": "true"}).content.decode()
    assert "<html" not in fragment and 'id="dashboards"' in fragment and 'data-period="30d"' in fragment
    bad = client.get("/dashboards/?period=forever").content.decode()
    assert "<strong>invalid-request</strong>" in bad and 'data-period="30d"' in bad


def test_the_dashboards_cost_the_same_queries_with_10_and_1000_verifications(
    story: Story, decisions: dict[str, Any], bulk: Bulk, manager: Any
) -> None:
    client = client_for(manager)
    urls = ["/dashboards/", *(f"/dashboards/{p}/" for p in ("backlog", "decisions", "time-to-decision",
                                                           "reviewers", "abstains", "findings"))]
    for url in urls:
        client.get(url)

    def counts() -> list[int]:
        out = []
        for url in urls:
            with CaptureQueriesContext(connection) as captured:
                assert client.get(url).status_code == 200
            out.append(len(captured.captured_queries))
        return out

    small = counts()
    bulk.add(500, verdict="UNKNOWN", automated_verdict="UNKNOWN", determination="cannot_determine", flagged=True,
             reason="missing-baseline", step=timedelta(minutes=7))
    bulk.add(500, step=timedelta(minutes=13))
    assert Verification.objects.count() > 1000
    assert counts() == small


def test_stacked_columns_geometry() -> None:
    chart = charts.stacked_columns(
        title="t", categories=["a", "b", "c"],
        series=[charts.Series("pass", "PASS", [1, 0, 3]), charts.Series("fail", "FAIL", [1, 0, 2])],
    )
    plot_h = charts.HEIGHT - charts.TOP - charts.BOTTOM
    assert [r.css for r in chart.rects] == ["pass", "fail", "pass", "fail"]
    # The axis top is 5 (a nice number ≥ 5); heights are proportional; a column's segments stack without gaps.
    first_pass, first_fail, third_pass, third_fail = chart.rects
    assert first_pass.height == pytest.approx(plot_h / 5, abs=0.01)
    assert third_pass.height + third_fail.height == pytest.approx(plot_h, abs=0.02)
    assert third_fail.y + third_fail.height == pytest.approx(third_pass.y, abs=0.02)
    assert third_pass.y + third_pass.height == pytest.approx(charts.TOP + plot_h, abs=0.02)
    assert not chart.empty and "c: 3 PASS" in third_pass.title
    assert charts.stacked_columns(title="t", categories=["a"], series=[charts.Series("x", "x", [0])]).empty


@pytest.mark.parametrize(("value", "top"), [(0, 1), (1, 1), (3, 5), (7, 10), (11, 20), (250, 500), (1001, 2000)])
def test_axis_maximum_is_a_nice_number(value: float, top: float) -> None:
    assert charts._nice_max(value) == top
