"""A subject's timeline (issue 6 §1; SPEC §7): every cycle, verification and receipt in order, supersession drawn,
who decided with what authority and why, and each receipt linked to its chain."""

from __future__ import annotations

import re
from typing import Any

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from reviewportal.history.presenters import timeline_view
from tests.history.conftest import Story, client_for
from tests.portal.conftest import Queue
from verification.records import selectors_timeline as hs
from verification.runs.models import TaskCycle
from verification.trust.models import Receipt
from verification.trust.selectors import head_of

pytestmark = pytest.mark.django_db


def test_fail_repair_pass_is_all_on_record_in_order(story: Story) -> None:
    timeline = timeline_view(story.task, now=timezone.now())
    assert [c.number for c in timeline.cycles] == [1]
    first, second = timeline.cycles[0].verifications
    assert (first.verification.pk, second.verification.pk) == (story.failed.pk, story.passed.pk)
    assert (first.state, second.state) == ("superseded", "succeeded")
    assert first.superseded_by == story.passed.pk
    run, decision = first.receipts
    (rerun,) = second.receipts
    # fail: the run abstained, a person FAILed it
    assert (run.seq, run.kind, run.verdict, run.authority, run.actor) == (0, "run", "UNKNOWN", "deterministic",
                                                                          "portal")
    assert run.reason == "missing-evidence-integrity-proof" and run.reason_text
    assert (decision.seq, decision.kind, decision.verdict, decision.authority) == (1, "decision", "FAIL", "human")
    assert (decision.actor, decision.decided_by) == ("user:rita", "rita")
    assert decision.rationale == "The notes file is gone from the store; resubmit it."
    # repair and pass: the re-run's first receipt supersedes the decision (SPEC §7), in another verification
    assert (rerun.kind, rerun.verdict, rerun.determination, rerun.authority) == ("run", "PASS", "met", "deterministic")
    assert decision.supersedes == run.content_hash and decision.supersedes_label == "seq 0"
    assert rerun.supersedes == decision.content_hash and rerun.supersedes_label == "seq 1 of verification #1"
    assert run.superseded_by == [decision.content_hash] and decision.superseded_by == [rerun.content_hash]
    assert not rerun.superseded
    assert [f.kind for f in first.findings] == ["evidence_integrity"]
    assert timeline.receipt_count == 3


def test_the_selector_says_where_each_superseded_receipt_stands(story: Story) -> None:
    """The domain record carries the facts (each verification's number on the subject, the verification and seq of
    the receipt a receipt supersedes); the words ("seq 1 of verification #1") are the presenter's."""
    timeline = hs.subject_timeline(story.task, now=timezone.now())
    first, second = timeline.cycles[0].verifications
    assert (first.position, second.position) == (1, 2)
    run, decision = first.receipts
    (rerun,) = second.receipts
    assert run.supersedes_at is None
    assert decision.supersedes_at == (story.failed.pk, 0)
    assert rerun.supersedes_at == (story.failed.pk, 1)
    assert not hasattr(rerun, "supersedes_label") and not hasattr(rerun, "reason_text")


def test_the_page_draws_supersession_and_links_every_receipt_to_its_chain(story: Story, manager: Any) -> None:
    html = client_for(manager).get(f"/history/subject/{story.task.pk}/").content.decode()
    receipts = re.findall(r'data-receipt="([0-9a-f]{64})" data-kind="(\w+)" data-verdict="(\w*)"', html)
    assert [(k, v) for _, k, v in receipts] == [("run", "UNKNOWN"), ("decision", "FAIL"), ("run", "PASS")]
    run, decision, rerun = (h for h, _, _ in receipts)
    # Each superseding receipt points at (an anchor on this page of) the receipt it supersedes.
    arrows = dict(re.findall(r'href="#(r-[0-9a-f]{16})" data-supersedes="([0-9a-f]{64})"', html))
    assert arrows == {f"r-{run[:16]}": run, f"r-{decision[:16]}": decision}
    for anchor in arrows:
        assert f'id="{anchor}"' in html
    assert html.count("data-superseded>superseded<") == 2  # the run and the decision; the pass stands
    assert "“The notes file is gone from the store; resubmit it.”" in html
    assert 'data-who>rita<' in html and 'data-authority>human<' in html
    chain_links = re.findall(r'href="(/history/verification/[^"]+/chain)" data-chain-link', html)
    assert len(chain_links) == 3
    for link, content_hash in zip(chain_links, (run, decision, rerun), strict=True):
        assert content_hash in link
        assert client_for(manager).get(link).status_code == 302
    assert "data-limits" in html  # SPEC §12 beside every result shown


def test_a_reopened_subject_shows_each_cycle(story: Story, queue: Queue) -> None:
    TaskCycle.objects.create(task=story.task, number=2)
    timeline = hs.subject_timeline(story.task, now=timezone.now())
    assert [(c.number, len(c.verifications)) for c in timeline.cycles] == [(1, 2), (2, 0)]


def test_a_request_for_more_evidence_is_on_the_timeline(queue: Queue, reviewer: Any, manager: Any) -> None:
    from verification.reviews.services.claims import review_claim
    from verification.reviews.services.decisions import new_request_key, review_request_evidence

    item = queue.unknown("needs config")
    review_claim(user=reviewer, verification=item)
    review_request_evidence(
        user=reviewer, verification=item, rationale="send the config", request_key=new_request_key()
    )
    html = client_for(manager).get(f"/history/subject/{item.task_id}/").content.decode()
    assert "data-evidence-request" in html and "“send the config”" in html and "awaiting evidence" in html


def test_the_timeline_costs_the_same_queries_for_a_longer_subject(story: Story, queue: Queue, manager: Any) -> None:
    client = client_for(manager)
    url = f"/history/subject/{story.task.pk}/"
    client.get(url)

    def count() -> int:
        with CaptureQueriesContext(connection) as captured:
            assert client.get(url).status_code == 200
        return len(captured.captured_queries)

    before = count()
    # Two more verifications of the same subject, each with a receipt (a re-submission supersedes the latest).
    queue.world.task = story.task
    for _ in range(2):
        queue.world.submit_and_run({"evidence": []})
    assert Receipt.objects.filter(verification__task=story.task).count() == 5
    assert count() == before
    head = head_of(story.passed)
    assert head is not None
