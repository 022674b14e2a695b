"""PENDING criteria and results that arrive later (SPEC §2): resolved when read, never written back.

An ``imported`` criterion with ``deadline_seconds`` stays PENDING in the run receipt. Read after the deadline it
answers its expiry verdict while the stored receipt still says PENDING; a result in time appends a ``result``
receipt superseding the head; a late one is refused with ``pending-expired``. The clock is passed (``now``).
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from tests.verification.service_world import (
    LOG,
    NOTES,
    World,
    digest_entry,
    head_payload,
    imported_entry,
    inline,
    result_for,
    view_of,
)
from verification.errors import ServiceError
from verification.kernel.reasons import Reason
from verification.reviews.selectors import review_queue
from verification.runs.models import ArrivedResult, Event
from verification.runs.services.results import result_deliver
from verification.trust.models import Receipt

pytestmark = pytest.mark.django_db

T0 = datetime(2026, 3, 1, 12, 0, 0, tzinfo=UTC)
DEADLINE = timedelta(seconds=2)


@pytest.fixture
def world(signing_key: Any) -> World:
    world = World.build()
    world.contract(digest_entry(), imported_entry(deadline_seconds=2, on_expiry="UNKNOWN"))
    return world


def submitted(world: World) -> Any:
    verification, receipt = world.submit_and_run({"evidence": [inline("notes", NOTES), inline("log", LOG)]}, now=T0)
    return verification, receipt


def deliver(world: World, verification: Any, *, at: datetime, verdict: str = "FAIL", party: Any = None) -> Receipt:
    who = party or world.external
    return result_deliver(
        actor=who.actor,
        token=who.token,
        verification=verification,
        criterion_id="ext-scan",
        body={"criterion": "ext-scan", "verdict": verdict, "detail": "2 findings", "evidence": ["log"]},
        now=at,
    )


def test_the_run_receipt_says_pending_and_the_verification_is_running_until_the_deadline(world: World) -> None:
    verification, receipt = submitted(world)
    assert (receipt.seq, receipt.kind, receipt.verdict, receipt.determination) == (0, "run", "PENDING", None)
    check = [c for c in head_payload(verification)["checks"] if c["criterion"] == "ext-scan"][0]
    assert (check["verdict"], check["reason"], check["on_expiry"]) == ("PENDING", "result-awaited", "UNKNOWN")
    assert datetime.fromisoformat(check["deadline"]) == T0 + DEADLINE
    view = view_of(verification, T0 + timedelta(seconds=1))
    assert (view["status"], view["determination"], view["score"], view["flagged"]) == ("running", None, None, False)
    assert result_for(view, "ext-scan")["deadline"] == check["deadline"]
    assert verification.pending_until == T0 + DEADLINE
    assert Event.objects.get().kind == "verification.pending"
    assert verification not in review_queue(now=T0 + timedelta(seconds=1))


def test_read_after_the_deadline_gives_the_expiry_verdict_while_the_receipt_says_pending(world: World) -> None:
    verification, receipt = submitted(world)
    later = T0 + DEADLINE + timedelta(seconds=1)
    view = view_of(verification, later)
    assert (view["status"], view["determination"], view["flagged"]) == ("succeeded", "cannot_determine", True)
    entry = result_for(view, "ext-scan")
    assert (entry["verdict"], entry["reason"], entry["determination"]) == (
        "UNKNOWN",
        "pending-expired",
        "cannot_determine",
    )
    assert view["flag_reason"] == "needs_review: pending-expired"
    # Nothing was written back: one receipt, still PENDING.
    assert list(Receipt.objects.filter(verification=verification).values_list("verdict", flat=True)) == ["PENDING"]
    assert head_payload(verification)["verdict"] == "PENDING"
    assert verification in review_queue(now=later)


def test_a_result_after_the_deadline_is_refused_pending_expired(world: World) -> None:
    verification, _ = submitted(world)
    with pytest.raises(ServiceError) as exc:
        deliver(world, verification, at=T0 + DEADLINE + timedelta(milliseconds=1))
    assert exc.value.reason is Reason.PENDING_EXPIRED and exc.value.http_status == 409
    assert not ArrivedResult.objects.exists()
    assert Receipt.objects.filter(verification=verification).count() == 1


def test_a_result_in_time_appends_a_result_receipt_superseding_the_head(world: World) -> None:
    verification, run = submitted(world)
    result = deliver(world, verification, at=T0 + timedelta(seconds=1))
    assert (result.seq, result.kind, result.prev_hash, result.supersedes_receipt_id) == (
        1,
        "result",
        run.content_hash,
        run.content_hash,
    )
    verification.refresh_from_db()
    payload = head_payload(verification)
    assert payload["actor"] == {"id": "ext-v", "kind": "external_verifier"} and payload["authority"] == "imported"
    # An imported FAIL is a hard not_met, flagged (decided by an authority outside the allow-list).
    view = view_of(verification, T0 + timedelta(seconds=5))
    assert (view["status"], view["determination"], view["flagged"]) == ("succeeded", "not_met", True)
    assert result_for(view, "ext-scan")["reason"] == "imported-result"
    assert list(Event.objects.order_by("id").values_list("kind", flat=True)) == [
        "verification.pending",
        "verification.finished",
        "result.received",
    ]
    # A second result for the same criterion awaits nothing any more.
    with pytest.raises(ServiceError) as exc:
        deliver(world, verification, at=T0 + timedelta(seconds=1, milliseconds=500))
    assert exc.value.reason is Reason.NOT_PENDING


def test_only_an_external_verifier_delivers_an_imported_result(world: World) -> None:
    verification, _ = submitted(world)
    with pytest.raises(ServiceError) as exc:
        deliver(world, verification, at=T0 + timedelta(seconds=1), party=world.semantic)
    assert exc.value.reason is Reason.ACTOR_CANNOT_AUTHOR_RESULT and exc.value.http_status == 403


def test_a_deterministic_criterion_awaits_no_result(world: World) -> None:
    verification, _ = submitted(world)
    with pytest.raises(ServiceError) as exc:
        result_deliver(
            actor=world.external.actor,
            token=world.external.token,
            verification=verification,
            criterion_id="notes-digest",
            body={"verdict": "FAIL"},
            now=T0 + timedelta(seconds=1),
        )
    assert exc.value.reason is Reason.NOT_PENDING and exc.value.http_status == 409


def test_a_result_before_the_run_is_kept_and_the_run_includes_it(world: World) -> None:
    verification = world.submit({"evidence": [inline("notes", NOTES), inline("log", LOG)]}, now=T0)
    receipt = deliver(world, verification, at=T0 + timedelta(seconds=1), verdict="UNKNOWN")
    assert (receipt.seq, receipt.kind) == (0, "run")
    verification.refresh_from_db()
    assert verification.verdict == "UNKNOWN" and verification.determination == "cannot_determine"


def test_the_head_read_with_a_page_is_the_last_receipt_of_each_chain(world: World) -> None:
    """``heads_of`` (a page of the API's list): the receipt of the highest seq, here the result's over the run's."""
    from verification.trust.selectors import head_of, heads_of

    verification, run = submitted(world)
    result = deliver(world, verification, at=T0 + timedelta(seconds=1))
    other, other_run = world.submit_and_run({"evidence": [inline("notes", NOTES), inline("log", LOG)]}, now=T0)
    heads = heads_of([verification.pk, other.pk])
    assert {pk: head.content_hash for pk, head in heads.items()} == {
        verification.pk: result.content_hash,
        other.pk: other_run.content_hash,
    }
    assert heads[verification.pk].seq == 1 and run.seq == 0
    for pk in (verification.pk, other.pk):
        found = head_of(heads[pk].verification)
        assert found is not None and found.content_hash == heads[pk].content_hash
