"""Issue 13 item 4's small bugs: after a person's decision the per-criterion results are still shown, and the
``verification.finished`` event carries the verification's reason."""

from __future__ import annotations

from typing import Any

import pytest
from django.utils import timezone

from tests.history.conftest import decide
from tests.portal.conftest import Queue, ensure_roles, make_user, queue, reviewer  # noqa: F401 - fixtures
from tests.verification.conftest import signing_key, var_dir  # noqa: F401 - fixtures
from verification.api.presenters import verification_view
from verification.runs.models import Event

pytestmark = pytest.mark.django_db


def test_results_stay_visible_after_a_human_decision(queue: Queue, reviewer: Any) -> None:  # noqa: F811
    verification = queue.unknown("decided")
    before = verification_view(verification, now=timezone.now())["verdict"]["results"]
    assert [r["reason"] for r in before] == ["missing-baseline"]
    decide(reviewer, verification, "FAIL", rationale="the config was changed by hand")
    verification.refresh_from_db()
    view = verification_view(verification, now=timezone.now())
    assert view["head_receipt_kind"] == "decision" and view["kernel_verdict"] == "FAIL"
    assert [(r["criterion"], r["reason"]) for r in view["verdict"]["results"]] == [
        (before[0]["criterion"], "missing-baseline")
    ]
    assert view["reason"] == "human-decision" and view["reason_text"]


def test_the_finished_event_names_the_reason(queue: Queue) -> None:  # noqa: F811
    verification = queue.unknown("reason in the event")
    event = Event.objects.filter(verification=verification, kind="verification.finished").get()
    assert event.payload["reason"] == "missing-baseline"
    assert event.payload["flag_reason"] == "needs_review: missing-baseline"
