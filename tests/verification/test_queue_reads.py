"""Queue membership is read the one way (SPEC §3, issue 13's last gap): the reviewer queue at ``now`` holds exactly the
heads that *read* as flagged at ``now`` (``read_state``, the single read's ``read_outcome``), with the reason as read,
and the dashboards' counts agree with it.

Before: the queue took "a PENDING head past its first deadline" as queued and ``pending-expired``. With several
PENDING checks of different deadlines and expiry verdicts the read can differ: a soft check that expires FAIL while
another is still pending leaves the head running (not flagged), and a head issued FAIL (a deterministic criterion,
not flagged) whose imported check then expires reads flagged, though its verdict was never PENDING.
"""

from __future__ import annotations

import contextlib
import uuid
from collections import Counter
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from django.db import transaction
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.history.test_dashboard_consistency import BUCKETS, bucket_of
from tests.portal.conftest import make_user, reviewer  # noqa: F401 - fixtures
from tests.verification.service_world import NOTES, OTHER_DIGEST, World, digest_entry, imported_entry, inline
from verification.api.presenters import verification_view
from verification.errors import ServiceError
from verification.records.selectors_dashboards import backlog_by_age
from verification.records.selectors_history import STATE_IN_REVIEW, state_q
from verification.reviews.models import ReviewAction, ReviewDecision
from verification.reviews.selectors import in_queue, queue_counts, queue_items
from verification.reviews.services.claims import review_claim
from verification.reviews.services.decisions import new_request_key, review_decide
from verification.runs.models import Verification
from verification.runs.services.results import result_deliver
from verification.runs.services.run import verification_run
from verification.runs.services.submit import verification_add_evidence

pytestmark = pytest.mark.django_db

T0 = datetime(2026, 3, 1, 12, 0, 0, tzinfo=UTC)


def _queued(now: datetime) -> dict[str, str]:
    return {str(pk): reason for pk, reason in queue_items(now=now).values_list("pk", "queue_reason")}


def test_a_head_still_running_after_its_first_deadline_is_not_queued(signing_key: Any) -> None:
    """ext-soft (soft) expires FAIL at +1 s; ext-hard is pending until +3 s. Between the two the head reads PENDING,
    running, not flagged: a soft FAIL does not count in the verdict (SPEC §3). The old queue had it, pending-expired."""
    world = World.build()
    world.contract(
        digest_entry(),
        imported_entry("ext-soft", deadline_seconds=1, on_expiry="FAIL", hard=False),
        imported_entry("ext-hard", deadline_seconds=3, on_expiry="UNKNOWN"),
    )
    verification, _ = world.submit_and_run({"evidence": [inline("notes", NOTES)]}, now=T0)
    between = T0 + timedelta(seconds=2)
    view = verification_view(verification, now=between)
    assert (view["status"], view["kernel_verdict"], view["flagged"]) == ("running", "PENDING", False)
    assert str(verification.pk) not in _queued(between)
    assert not in_queue(verification, now=between)
    assert dict(queue_counts(now=between, cached=False)) == {}
    after = T0 + timedelta(seconds=3)
    view = verification_view(verification, now=after)
    assert (view["kernel_verdict"], view["flagged"], view["reason"]) == ("UNKNOWN", True, "pending-expired")
    assert _queued(after) == {str(verification.pk): "pending-expired"}
    assert dict(queue_counts(now=after, cached=False)) == {"pending-expired": 1}


def test_a_clean_fail_whose_imported_check_expires_is_queued_with_its_reason_as_read(signing_key: Any) -> None:
    """The digest criterion FAILs (a clean deterministic not_met, not flagged); the imported one is PENDING until +2 s.
    From then on the head reads flagged (an imported criterion decided it: SPEC §3), its reason the FAIL's, as read.
    The old queue never had it: its verdict column was FAIL, not PENDING, and it was not flagged as issued."""
    world = World.build()
    world.contract(digest_entry(), imported_entry(deadline_seconds=2, on_expiry="UNKNOWN"))
    verification, _ = world.submit_and_run({"evidence": [inline("notes", OTHER_DIGEST.encode())]}, now=T0)
    before, after = T0 + timedelta(seconds=1), T0 + timedelta(seconds=2)
    assert verification_view(verification, now=before)["flagged"] is False
    assert str(verification.pk) not in _queued(before)
    view = verification_view(verification, now=after)
    assert (view["kernel_verdict"], view["flagged"]) == ("FAIL", True)
    assert _queued(after) == {str(verification.pk): view["reason"]}
    assert in_queue(verification, now=after)
    assert dict(queue_counts(now=after, cached=False)) == {view["reason"]: 1}
    Verification.objects.get(pk=verification.pk)  # nothing was written back (SPEC §2)


# --- the property: the queue, its counts and the dashboards equal the per-item reads over random histories ----------

#: PENDING criteria: deadlines from a minute to 2.5 hours (so they fall in the current clock hour and in others), every
#: expiry verdict an imported check may take, hard or soft.
_IMPORTED = st.fixed_dictionaries(
    {
        "deadline": st.sampled_from([60, 1200, 3000, 3600, 5400, 9000]),
        "on_expiry": st.sampled_from(["FAIL", "UNKNOWN", "NOT_RUN"]),
        "hard": st.booleans(),
    }
)
_EVENT = st.one_of(
    st.tuples(st.just("submit"), st.integers(0, 50), st.booleans()),
    st.tuples(st.just("deliver"), st.integers(0, 50), st.sampled_from(["PASS", "FAIL", "UNKNOWN"])),
    st.tuples(st.just("decide"), st.integers(0, 50), st.sampled_from(["FAIL", "MORE_EVIDENCE"])),
    st.tuples(st.just("rerun"), st.integers(0, 50), st.booleans()),
    st.tuples(st.just("read"), st.integers(0, 90), st.just(None)),
)
START = datetime(2026, 3, 1, 12, 40, 0, tzinfo=UTC)


def _expected_queue(now: datetime) -> dict[uuid.UUID, str]:
    """The queue at ``now`` from the single read, item by item (SPEC §3): a head no person decided that reads flagged,
    not superseded by a re-run, not sent back for more evidence; with its reason as read."""
    rows = list(Verification.objects.all())
    superseded = {v.supersedes_id for v in rows if v.supersedes_id is not None}
    sent_back = set(
        ReviewDecision.objects.filter(action=ReviewAction.MORE_EVIDENCE).values_list("verification_id", flat=True)
    )
    out = {}
    for v in rows:
        if v.verdict is None or v.human_decided or v.pk in superseded or v.pk in sent_back:
            continue
        view = verification_view(v, now=now)
        if view["flagged"]:
            out[v.pk] = view["reason"] or ""
    return out


def _check_queue_against_reads(now: datetime) -> None:
    expected = _expected_queue(now)
    assert dict(queue_items(now=now).values_list("pk", "queue_reason")) == expected, now
    for v in Verification.objects.all():
        assert in_queue(v, now=now) is (v.pk in expected), (v.pk, now)
    counts = Counter(expected.values())
    assert queue_counts(now=now, cached=False) == sorted(counts.items(), key=lambda p: (-p[1], p[0])), now
    submitted = dict(Verification.objects.filter(pk__in=expected).values_list("pk", "submitted_at"))
    buckets = Counter(bucket_of(at, now) for at in submitted.values())
    assert [(key, n) for key, _, n in backlog_by_age(now=now)] == [(key, buckets[key]) for key, _, _ in BUCKETS]
    in_review = set(Verification.objects.filter(state_q(STATE_IN_REVIEW, now)).values_list("pk", flat=True))
    assert in_review == set(expected), now


def _pending_world(imported: list[dict[str, Any]]) -> World:
    """A task whose contract has the digest criterion and one PENDING imported criterion per entry of ``imported``."""
    world = World.build()
    world.contract(
        digest_entry(),
        *(
            imported_entry(f"ext-{i}", deadline_seconds=c["deadline"], on_expiry=c["on_expiry"], hard=c["hard"])
            for i, c in enumerate(imported)
        ),
    )
    return world


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(imported=st.lists(_IMPORTED, min_size=1, max_size=3), events=st.lists(_EVENT, min_size=1, max_size=8))
def test_the_queue_and_its_counts_are_exactly_the_items_that_read_flagged(
    signing_key: Any,
    reviewer: Any,  # noqa: F811 - the fixture imported above, by name
    imported: list[dict[str, Any]],
    events: list[tuple[str, int, Any]],
) -> None:
    with transaction.atomic():
        world = _pending_world(imported)
        clock = START
        submitted: list[Verification] = []
        for i, (kind, step, arg) in enumerate(events):
            clock += timedelta(minutes=step)
            target = submitted[i % len(submitted)] if submitted else None
            with contextlib.suppress(ServiceError):  # refused (not pending, late, not queued, …): nothing written
                if kind == "submit":
                    content = NOTES if arg else OTHER_DIGEST.encode()
                    submitted.append(world.submit_and_run({"evidence": [inline("notes", content)]}, now=clock)[0])
                elif kind == "deliver" and target is not None:
                    result_deliver(
                        actor=world.external.actor,
                        token=world.external.token,
                        verification=target,
                        criterion_id=f"ext-{i % len(imported)}",
                        body={"verdict": arg},
                        now=clock,
                    )
                elif kind == "decide" and target is not None:
                    review_claim(user=reviewer, verification=target, now=clock)
                    review_decide(
                        user=reviewer,
                        verification=target,
                        verdict=arg,
                        rationale="read it",
                        cited_evidence_ids=[],
                        request_key=new_request_key(),
                        now=clock,
                    )
                elif kind == "rerun" and target is not None:
                    content = NOTES if arg else OTHER_DIGEST.encode()
                    again = verification_add_evidence(
                        actor=world.agent.actor,
                        token=world.agent.token,
                        verification=target,
                        body={"evidence": [inline("notes", content)]},
                        now=clock,
                    )
                    verification_run(verification_id=again.pk, now=clock)
                    submitted.append(again)
            _check_queue_against_reads(clock)
        for later in (timedelta(minutes=59), timedelta(hours=3)):
            _check_queue_against_reads(clock + later)
        transaction.set_rollback(True)
