"""The reviewer's day (issue 14): "Next item" offers only what the reviewer may decide, Skip, the page that says up
front why a reviewer cannot decide, Post/Redirect/Get for refused decisions, and the loop (next item, progress).

Each refusal asserts its code and the rows before and after (no lease, no decision, no receipt written).
"""

from __future__ import annotations

from typing import Any

import pytest
from django.test import Client
from django.utils import timezone

from tests.portal.conftest import Queue
from verification.kernel.reasons import Reason
from verification.reviews.models import ReviewDecision, ReviewLease
from verification.reviews.services.claims import review_bar, review_claim, review_claim_next
from verification.reviews.services.decisions import MAX_RATIONALE_CHARS, new_request_key, review_decide
from verification.runs.models import Verification
from verification.trust.models import Receipt, SecurityLogEntry

pytestmark = pytest.mark.django_db


def _client(user: Any) -> Client:
    client = Client()
    client.force_login(user)
    return client


def _holder(verification: Verification) -> Any:
    lease = ReviewLease.objects.filter(verification=verification).first()
    if lease is None or lease.released_at is not None or lease.expires_at <= timezone.now():
        return None
    return lease.holder


def _claims_logged(verification: Verification) -> int:
    return SecurityLogEntry.objects.filter(kind="claim", target=str(verification.pk)).count()


# --- "Next item" offers only what the reviewer may decide --------------------------------------------------------


@pytest.mark.parametrize("trap", ["self_review_trap", "authored_by"])
def test_next_item_passes_over_an_item_the_rails_bar_and_never_leases_it(
    queue: Queue, reviewer: Any, reviewer2: Any, trap: str
) -> None:
    barred = getattr(queue, trap)(reviewer)
    plain = queue.unknown()
    assert review_claim_next(user=reviewer) == plain
    assert _holder(barred) is None and _claims_logged(barred) == 0  # never leased, not even for a moment
    assert review_claim_next(user=reviewer) is None  # the barred item is all that is left: nothing for this reviewer
    assert _holder(barred) is None and _claims_logged(barred) == 0
    assert review_claim_next(user=reviewer2) == barred  # another reviewer may take it


def test_a_reviewer_sharing_the_workers_boundary_is_offered_none_of_their_items(
    queue: Queue, reviewer: Any, reviewer2: Any
) -> None:
    barred = queue.shared_boundary(reviewer)
    same_worker = queue.unknown()  # the same worker's boundary: barred too (rail 3)
    assert review_claim_next(user=reviewer) is None
    assert not ReviewLease.objects.exists() and not SecurityLogEntry.objects.filter(kind="claim").exists()
    refusal = review_bar(user=reviewer, verification=same_worker)
    assert refusal is not None and refusal.reason is Reason.SHARED_EXECUTION_BOUNDARY
    assert review_claim_next(user=reviewer2) == barred


def test_the_bar_says_why_before_anything_is_claimed(queue: Queue, reviewer: Any, reviewer2: Any) -> None:
    barred = queue.self_review_trap(reviewer)
    refusal = review_bar(user=reviewer, verification=barred)
    assert refusal is not None and refusal.reason is Reason.WORKER_SELF_VERIFICATION
    assert review_bar(user=reviewer2, verification=barred) is None
    assert not ReviewLease.objects.exists()


def test_the_review_page_says_up_front_the_reviewer_cannot_decide_and_offers_no_claim(
    queue: Queue, reviewer: Any
) -> None:
    barred = queue.self_review_trap(reviewer)
    client = _client(reviewer)
    page = client.get(f"/review/{barred.pk}/").content.decode()
    assert f'data-bar="{Reason.WORKER_SELF_VERIFICATION.value}"' in page
    assert "You cannot decide this item" in page
    assert "data-claim-this" not in page and "data-decision-form" not in page
    assert "data-skip" in page  # but it can be skipped
    response = client.post(f"/review/{barred.pk}/claim")  # a crafted POST: refused, nothing held
    assert response.status_code == 302
    assert _holder(barred) is None and _claims_logged(barred) == 0


def test_next_item_through_the_page_opens_the_plain_item_never_the_barred_one(
    queue: Queue, reviewer: Any
) -> None:
    barred = queue.self_review_trap(reviewer)
    plain = queue.unknown()
    client = _client(reviewer)
    first = client.post("/queue/claim-next")
    assert first["Location"] == f"/review/{plain.pk}/"
    second = client.post("/queue/claim-next")
    assert second["Location"] == "/queue/"  # nothing else this reviewer may decide
    assert _holder(barred) is None


# --- Skip ----------------------------------------------------------------------------------------------------------


def test_skip_releases_logs_the_reason_and_keeps_the_item_out_of_this_sessions_claims(
    queue: Queue, reviewer: Any
) -> None:
    first = queue.mismatch()
    second = queue.unknown()
    client = _client(reviewer)
    assert client.post("/queue/claim-next")["Location"] == f"/review/{first.pk}/"
    response = client.post(f"/review/{first.pk}/skip", {"reason": "  not my area:\nnetworking  "})
    assert response["Location"] == f"/review/{second.pk}/"  # the next item opens
    assert _holder(first) is None and _holder(second) == reviewer
    entry = SecurityLogEntry.objects.filter(kind="release", target=str(first.pk)).get()
    assert entry.detail == {"end_reason": "skipped", "skip_reason": "not my area: networking", "held": True}
    assert ReviewLease.objects.get(verification=first).end_reason == "skipped"
    client.post(f"/review/{second.pk}/release")
    assert client.post("/queue/claim-next")["Location"] == f"/review/{second.pk}/"  # never the skipped one
    client.post(f"/review/{second.pk}/skip")
    assert client.post("/queue/claim-next")["Location"] == "/queue/"
    fresh = _client(reviewer)  # a new session: skipped items are offered again
    assert fresh.post("/queue/claim-next")["Location"] == f"/review/{first.pk}/"


def test_a_skip_reason_past_its_limit_is_refused_and_nothing_is_released(queue: Queue, reviewer: Any) -> None:
    item = queue.unknown()
    client = _client(reviewer)
    client.post("/queue/claim-next")
    response = client.post(f"/review/{item.pk}/skip", {"reason": "x" * 501})
    assert response["Location"] == f"/review/{item.pk}/"
    assert _holder(item) == reviewer
    assert not SecurityLogEntry.objects.filter(kind="release").exists()
    page = client.get(response["Location"]).content.decode()
    assert "at most 500 characters" in page


# --- Post/Redirect/Get, and the rationale limit --------------------------------------------------------------------


def test_a_refused_decision_redirects_to_the_review_page_with_the_form_kept_and_survives_reload(
    queue: Queue, reviewer: Any
) -> None:
    item = queue.mismatch()
    client = _client(reviewer)
    client.post(f"/review/{item.pk}/claim")
    key = new_request_key()
    form = {"verdict": "PASS", "rationale": "the change looks deliberate", "request_key": key,
            "cited_evidence": queue.evidence_ids(item)}
    receipts = Receipt.objects.count()
    response = client.post(f"/review/{item.pk}/decide", form)
    assert response.status_code == 302 and response["Location"] == f"/review/{item.pk}/#refusal"
    assert Receipt.objects.count() == receipts and not ReviewDecision.objects.exists()
    for _ in range(2):  # the redirect, then a reload: the same page, the refusal and the typed text still there
        page = client.get(f"/review/{item.pk}/").content.decode()
        assert f"<code>{Reason.MISMATCH_NEEDS_NEW_EVIDENCE.value}</code>" in page
        assert "the change looks deliberate</textarea>" in page
        assert f'value="{key}"' in page  # unused: the same form may try again
    reopened = client.get(f"/review/{item.pk}/decide")  # the address bar of the old POST: the page, not a 405
    assert reopened.status_code == 302 and reopened["Location"] == f"/review/{item.pk}/"


def test_a_rationale_past_the_limit_is_refused_not_cut(queue: Queue, reviewer: Any) -> None:
    item = queue.unknown()
    client = _client(reviewer)
    client.post(f"/review/{item.pk}/claim")
    text = "y" * (MAX_RATIONALE_CHARS + 1)
    response = client.post(
        f"/review/{item.pk}/decide",
        {"verdict": "PASS", "rationale": text, "request_key": new_request_key(),
         "cited_evidence": queue.evidence_ids(item)},
    )
    assert response["Location"] == f"/review/{item.pk}/#refusal"
    assert not ReviewDecision.objects.exists()
    page = client.get(f"/review/{item.pk}/").content.decode()
    assert f"<code>{Reason.INVALID_REQUEST.value}</code>" in page
    assert f"at most {MAX_RATIONALE_CHARS} characters" in page
    assert f">{text}</textarea>" in page  # kept whole, to be shortened by the reviewer
    assert "maxlength=\"10000\"" not in page  # the browser no longer cuts it silently
    assert f'data-max-chars="{MAX_RATIONALE_CHARS}"' in page


# --- the loop --------------------------------------------------------------------------------------------------------


def test_after_a_decision_the_next_item_opens_with_the_progress_line(queue: Queue, reviewer: Any) -> None:
    first = queue.mismatch()
    second = queue.unknown()
    client = _client(reviewer)
    client.post("/queue/claim-next")
    response = client.post(
        f"/review/{first.pk}/decide",
        {"verdict": "FAIL", "rationale": "the config changed", "request_key": new_request_key()},
    )
    assert response["Location"] == f"/review/{second.pk}/"
    assert _holder(second) == reviewer
    page = client.get(response["Location"]).content.decode()
    assert "<strong data-progress-decided>1</strong> decided this session" in page
    assert "<strong data-progress-left>1</strong> left in queue" in page
    assert f'href="/review/{first.pk}/" data-progress-last' in page


def test_the_empty_queue_lists_what_is_awaiting_evidence(queue: Queue, reviewer: Any) -> None:
    item = queue.unknown("waiting for logs")
    review_claim(user=reviewer, verification=item)
    review_decide(user=reviewer, verification=item, verdict="MORE_EVIDENCE", rationale="attach the run log",
                  cited_evidence_ids=[], request_key=new_request_key())
    page = _client(reviewer).get("/queue/").content.decode()
    assert "data-empty-state" in page and "data-awaiting-list" in page
    assert f'href="/review/{item.pk}/"' in page and "waiting for logs" in page


def test_the_shortcut_sheet_is_per_role(queue: Queue, reviewer: Any, manager: Any) -> None:
    reviewer_page = _client(reviewer).get("/queue/").content.decode()
    manager_page = _client(manager).get("/queue/").content.decode()
    assert "data-reviewer-key" in reviewer_page
    assert "data-reviewer-key" not in manager_page and "<kbd>j</kbd>" in manager_page
