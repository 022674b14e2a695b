"""``make run``'s demo fills the queue with every kind of item, through the services, idempotently (issue 5)."""

from __future__ import annotations

from io import StringIO
from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.utils import timezone

from verification.kernel.errors import KernelError
from verification.kernel.reasons import Reason
from verification.models import Receipt, Task, Verification
from verification.review_selectors import queue_page
from verification.services.reviews import new_request_key, review_claim, review_decide

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
