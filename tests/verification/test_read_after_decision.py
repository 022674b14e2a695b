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


def test_a_page_of_decided_verifications_reads_what_their_decisions_superseded_at_once(
    queue: Queue,  # noqa: F811
    reviewer: Any,  # noqa: F811
) -> None:
    """``GET /v1/verifications`` (a reviewer's session may read it): a decided row shows the results of the run its
    decision superseded (``latest_automated``). A page reads those runs in one query (``latest_automated_of``), not
    one per decided row; each row is still what its own view gives."""
    import json

    from django.db import connection
    from django.test import Client
    from django.test.utils import CaptureQueriesContext

    client = Client(HTTP_HOST="localhost")
    client.force_login(reviewer)

    def listed() -> tuple[int, list[dict[str, Any]]]:
        with CaptureQueriesContext(connection) as captured:
            page = client.get("/v1/verifications", {"limit": 50})
        assert page.status_code == 200, page.content[:300]
        return len(captured.captured_queries), json.loads(page.content)["results"]

    decided = [queue.unknown(f"decided {n}") for n in range(4)]
    decide(reviewer, decided[0], "FAIL", rationale="changed by hand")
    one, _ = listed()
    for verification in decided[1:]:
        decide(reviewer, verification, "FAIL", rationale="changed by hand")
    four, rows = listed()
    assert one == four  # the same statements for 1 decided row or 4
    by_id = {row["id"]: row for row in rows}
    for verification in decided:  # each row as the verification's own GET gives it (its reads made one by one)
        row = by_id[str(verification.pk)]
        assert row["head_receipt_kind"] == "decision" and row["verdict"]["results"]
        alone = client.get(f"/v1/verifications/{verification.pk}")
        assert alone.status_code == 200 and row == json.loads(alone.content)
