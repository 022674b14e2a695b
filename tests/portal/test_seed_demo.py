"""``make run``'s demo fills the queue with every kind of item, through the services, idempotently (issue 5)."""

from __future__ import annotations

import logging
from io import StringIO
from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.utils import timezone

from reviewportal.management.commands import seed_demo
from reviewportal.portal.presenters import queue_page
from verification.kernel.errors import KernelError
from verification.kernel.reasons import Reason
from verification.reviews.models import ReviewLease
from verification.reviews.services.claims import review_claim, review_claim_next
from verification.reviews.services.decisions import new_request_key, review_decide
from verification.runs.models import Task, Verification
from verification.trust.models import Receipt

pytestmark = pytest.mark.django_db


def _seed() -> str:
    out = StringIO()
    call_command("seed_demo", stdout=out)
    return out.getvalue()


def _item(kind: str) -> Verification:
    return Verification.objects.get(task__external_ref=f"demo:{kind}")


def test_the_demo_queue_has_every_kind_of_item_and_a_second_run_adds_nothing(signing_key: Any, var_dir: Path) -> None:
    first = _seed()
    counts = (Task.objects.count(), Verification.objects.count(), Receipt.objects.count())
    second = _seed()
    assert first == second
    assert (Task.objects.count(), Verification.objects.count(), Receipt.objects.count()) == counts
    assert "Demo queue: 10 items waiting for review at http://127.0.0.1:8000/queue/" in first

    page = queue_page(now=timezone.now(), filters={}, cursor=None, limit=50)
    by_kind = {row.verification.task.external_ref.removeprefix("demo:"): row for row in page.rows}
    assert set(by_kind) == {
        "mismatch", "semantic-conflict", "expired-pending", "self-review-trap", "missing-bytes",
        "deterministic-fail", "not-run", "unknown-1", "unknown-2", "unknown-3",
    }
    assert (by_kind["mismatch"].verdict, by_kind["mismatch"].rank_name) == ("MISMATCH", "MISMATCH")
    assert by_kind["semantic-conflict"].reason == "cited-conflict" and by_kind["semantic-conflict"].semantic
    assert (by_kind["expired-pending"].verdict, by_kind["expired-pending"].reason) == ("UNKNOWN", "pending-expired")
    assert by_kind["not-run"].verdict == "NOT_RUN"
    assert [row.verification.task.external_ref for row in page.rows][:2] == ["demo:mismatch", "demo:semantic-conflict"]


def _refusal(reviewer: Any, verification: Verification, verdict: str, cited: list[str]) -> Reason:
    review_claim(user=reviewer, verification=verification)
    with pytest.raises(KernelError) as info:
        review_decide(user=reviewer, verification=verification, verdict=verdict, rationale="demo",
                      cited_evidence_ids=cited, request_key=new_request_key())
    return info.value.reason


def test_the_demo_traps_refuse_the_demo_reviewer(signing_key: Any, var_dir: Path) -> None:
    _seed()
    reviewer = get_user_model().objects.get(username="reviewer")
    trap = _item("self-review-trap")
    lost = _item("missing-bytes")

    def evidence(v: Verification) -> list[str]:
        return [str(e) for e in v.bindings.values_list("evidence_id", flat=True)]

    assert _refusal(reviewer, trap, "PASS", evidence(trap)) is Reason.WORKER_SELF_VERIFICATION
    assert _refusal(reviewer, lost, "PASS", evidence(lost)) is Reason.MISSING_EVIDENCE_INTEGRITY_PROOF
    mismatch = _item("mismatch")
    assert _refusal(reviewer, mismatch, "PASS", evidence(mismatch)) is Reason.MISMATCH_NEEDS_NEW_EVIDENCE


# --- issue 14: a second reviewer, the printed address, a quiet seed, a trap "Next item" never offers ------------------


def test_the_demo_prints_only_the_logins_and_the_queue_and_its_address_follows_make_run(
    signing_key: Any, var_dir: Path
) -> None:
    out = StringIO()
    call_command("seed_demo", "--url", "http://0.0.0.0:8080", stdout=out)
    lines = out.getvalue().splitlines()
    assert lines[0].startswith("Demo portal: http://0.0.0.0:8080/ (passwords kept in ")
    assert [line.split()[:3] for line in lines[1:6]] == [
        ["reviewer", "user", "reviewer"], ["reviewer", "user", "reviewer2"], ["manager", "user", "manager"],
        ["admin", "user", "admin"], ["Demo", "queue:", "10"],
    ]
    assert "at http://0.0.0.0:8080/queue/" in lines[5] and len(lines) == 6
    assert get_user_model().objects.get(username="reviewer2").groups.filter(name="reviewer").exists()


def test_the_seed_holds_back_celery_and_kombu_below_error(caplog: pytest.LogCaptureFixture) -> None:
    """What ``make run`` printed before (issue 14): Celery's INFO per eager task, kombu's WARNING without a broker."""
    before = [logging.getLogger(n).level for n in ("celery", "kombu")]
    with caplog.at_level(logging.DEBUG), seed_demo._quiet():
        logging.getLogger("celery.app.trace").info("Task verification.run succeeded")
        logging.getLogger("kombu.connection").warning("No hostname was supplied. Reverting to default 'localhost'")
        logging.getLogger("celery.app.trace").error("a failure is still shown")
    assert [r.getMessage() for r in caplog.records] == ["a failure is still shown"]
    assert [logging.getLogger(n).level for n in ("celery", "kombu")] == before  # restored afterwards


def test_the_demo_reviewer_never_gets_the_trap_from_next_item_and_the_second_reviewer_clears_it(
    signing_key: Any, var_dir: Path
) -> None:
    _seed()
    users = get_user_model().objects
    reviewer, reviewer2 = users.get(username="reviewer"), users.get(username="reviewer2")
    trap = _item("self-review-trap")
    offered = []
    while (item := review_claim_next(user=reviewer)) is not None:  # holds each: the loop ends when none is left
        offered.append(item.task.external_ref)
    assert "demo:self-review-trap" not in offered and len(offered) == 9
    assert ReviewLease.objects.filter(verification=trap).count() == 0
    assert review_claim_next(user=reviewer2) == trap
    decision = review_decide(user=reviewer2, verification=trap, verdict="FAIL", rationale="reviewer wrote it",
                             cited_evidence_ids=[], request_key=new_request_key())
    assert decision.receipt is not None and decision.receipt.kind == "decision"
