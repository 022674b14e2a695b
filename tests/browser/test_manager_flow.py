"""A manager's day in a real browser (issue 6 acceptance): filter the history and share the address (a second
browser sees the same rows), open a timeline with a superseded verdict, close a finding with a rationale, and download
a CSV whose rows match the filtered view — with no console error, under the enforced CSP."""

from __future__ import annotations

import csv
import re
from pathlib import Path
from typing import Any

import pytest

from tests.browser.conftest import Console, expect
from tests.history.conftest import Story, decide, story  # noqa: F401 - the fixture, by name
from tests.portal.conftest import Queue
from verification.reviews.models import FindingEvent

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def _rows(page: Any) -> list[str]:
    return [row.get_attribute("data-history-row") for row in page.locator("[data-history-row]").all()]


def test_a_manager_filters_shares_reads_a_timeline_closes_a_finding_and_exports(
    story: Story,  # noqa: F811
    queue: Queue,
    reviewer: Any,
    manager: Any,
    make_user: Any,
    live_server: Any,
    new_context: Any,
    sign_in: Any,
    console: Console,
    artifacts: Path,
    tmp_path: Path,
) -> None:
    drift = queue.mismatch("Config drift")
    queue.unknown("Timeout review")
    decided = queue.unknown("Retry policy")
    decide(reviewer, decided, "FAIL", rationale="Retries were raised without a baseline.")
    page = console.watch(new_context().new_page())
    sign_in(page, manager)

    # 1. Filter the history: flagged, not_met.
    page.goto(f"{live_server.url}/history/")
    assert len(_rows(page)) == 5
    page.select_option('select[name="flagged"]', "true")
    page.select_option('select[name="determination"]', "not_met")
    page.click("[data-apply-filters]")
    page.wait_for_url(re.compile(r".*/history/\?determination=not_met&flagged=true$"))
    expect(page.locator("[data-history-row]")).to_have_count(1)
    shown = _rows(page)
    assert shown == [str(drift.pk)]
    page.screenshot(path=str(artifacts / "history-filtered.png"), full_page=True)

    # ... and share the address: another person, in another browser context, sees the same rows.
    colleague = console.watch(new_context().new_page())
    sign_in(colleague, make_user("mia", "manager"))
    colleague.goto(page.url)
    assert _rows(colleague) == shown
    assert colleague.locator('select[name="flagged"]').input_value() == "true"

    # 4. Download the CSV of this view: its rows are the rows shown.
    with page.expect_download() as info:
        page.click("[data-export-csv]")
    saved = tmp_path / "history.csv"
    info.value.save_as(saved)
    with saved.open(encoding="utf-8", newline="") as handle:
        exported = list(csv.DictReader(handle))
    assert [r["verification_id"] for r in exported] == shown
    assert exported[0]["verdict"] == "MISMATCH" and exported[0]["flagged"] == "true"

    # 2. Open a subject's timeline with a superseded verdict: fail, repair, pass, all on record.
    page.goto(f"{live_server.url}/history/?subject={story.task.pk}")
    page.locator("[data-timeline-link]").first.click()
    page.wait_for_url(re.compile(rf".*/history/subject/{story.task.pk}/$"))
    receipts = page.locator("[data-receipt]")
    assert [receipts.nth(i).get_attribute("data-verdict") for i in range(receipts.count())] == ["UNKNOWN", "FAIL",
                                                                                               "PASS"]
    assert page.locator("[data-superseded]").count() == 2
    decision = page.locator('[data-receipt][data-kind="decision"]')
    assert "rita" in decision.locator("[data-who]").inner_text()
    assert decision.locator("[data-authority]").inner_text() == "human"
    assert "resubmit it" in decision.locator("[data-rationale]").inner_text()
    page.locator('[data-supersedes]').last.click()  # the pass's arrow leads to the decision it supersedes
    assert page.url.endswith("#" + (decision.get_attribute("id") or "?"))
    page.screenshot(path=str(artifacts / "timeline.png"), full_page=True)

    # 3. Close a finding with a rationale.
    page.goto(f"{live_server.url}/findings/?kind=evidence_integrity")
    page.click(f'[data-finding-row="{story.integrity_finding.pk}"] a')
    page.wait_for_selector("[data-finding-form]")
    page.fill("#id_rationale", "The store lost the bytes in a migration; the re-run with the file passed.")
    page.click("[data-close]")
    page.wait_for_url(re.compile(rf".*/findings/{story.integrity_finding.pk}/$"))
    assert page.locator("[data-finding-state]").first.get_attribute("data-finding-state") == "closed"
    assert "re-run with the file passed" in page.locator("[data-event-rationale]").last.inner_text()
    assert page.locator("[data-finding-form]").count() == 0
    closed = FindingEvent.objects.get(finding=story.integrity_finding, action="closed")
    assert closed.actor is not None and closed.actor.name == "user:mona"

    # The dashboards draw under the CSP too (no console error is asserted by the fixture).
    page.goto(f"{live_server.url}/dashboards/?period=7d")
    assert page.locator("svg.chart").count() == 6
    page.screenshot(path=str(artifacts / "dashboards.png"), full_page=True)
