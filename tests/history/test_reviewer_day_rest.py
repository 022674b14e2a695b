"""Issue 14 item 9's smaller things on the history side: the exports carry the decision's rationale, the reason
filter offers only the codes something reads as, and a finding's close refusal is Post/Redirect/Get."""

from __future__ import annotations

import re
from typing import Any

from tests.history.conftest import Story, client_for
from tests.history.test_exports import csv_rows, streamed
from verification.kernel.reasons import Reason
from verification.reviews.models import FindingEvent


def test_the_exports_carry_the_rationale_of_the_decision_and_none_for_an_automated_head(
    story: Story, manager: Any
) -> None:
    client = client_for(manager)
    rows = {r["verification_id"]: r for r in csv_rows(streamed(client.get("/history/export.csv")))}
    assert rows[str(story.failed.pk)]["rationale"] == "The notes file is gone from the store; resubmit it."
    assert rows[str(story.passed.pk)]["rationale"] == ""
    assert rows[str(story.passed.pk)]["decided_by"] == "portal"  # the export keeps actor names


def test_the_reason_filter_offers_only_the_codes_in_use(story: Story, queue: Any, manager: Any) -> None:
    queue.mismatch()
    html = client_for(manager).get("/history/").content.decode()
    select = re.search(r'<select name="reason".*?</select>', html, re.S)
    assert select is not None
    offered = re.findall(r'<option value="([^"]*)"', select.group(0))
    assert offered[0] == "" and "baseline-changed" in offered and "human-decision" in offered
    assert len(offered) < 12 < len(Reason)  # not the whole registry
    asked = client_for(manager).get("/history/?reason=digest-differs").content.decode()
    assert '<option value="digest-differs" selected>' in asked  # the one asked for stays selectable


def test_a_refused_close_survives_reload_and_writes_nothing(story: Story, manager: Any) -> None:
    client = client_for(manager)
    url = f"/findings/{story.integrity_finding.pk}/"
    before = FindingEvent.objects.count()
    refused = client.post(f"{url}close", {"rationale": "   "})
    assert refused.status_code == 302 and refused["Location"] == f"{url}#refusal"
    for _ in range(2):  # the page, then a reload: the refusal both times, nothing written
        page = client.get(url).content.decode()
        assert "<strong>finding-close-needs-rationale</strong>" in page
    reopened = client.get(f"{url}close")  # the POST-only address reopened: the finding's page, never a 405
    assert reopened.status_code == 302 and reopened["Location"] == url
    assert FindingEvent.objects.count() == before


def test_a_findings_page_names_its_subject_and_says_no_recomputed_none(story: Story, manager: Any) -> None:
    finding = story.integrity_finding
    assert "@" in finding.subject and "recomputed None" in finding.detail  # as stored
    html = client_for(manager).get(f"/findings/{finding.pk}/").content.decode()
    subject = re.search(r"<dd data-finding-subject>(.*?)</dd>", html, re.S)
    assert subject is not None and story.task.title in subject.group(1) and "cycle 1" in subject.group(1)
    assert finding.subject not in html and "recomputed None" not in html
    assert "nothing to recompute (the bytes are gone)" in html
