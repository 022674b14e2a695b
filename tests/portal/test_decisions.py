"""Deciding a queue item (issue 5 §3; SPEC §2 "A human decision supersedes", §9 the rails for reviewers).

Each refusal asserts its exact code and that nothing was issued; each acceptance asserts the receipt, the head
columns, the queue, the event and the strict verification of the chain.
"""

from __future__ import annotations

import threading
from datetime import timedelta
from typing import Any

import pytest
from django.db import connection
from django.test import Client
from django.utils import timezone

from tests.portal.conftest import Queue
from tests.verification.service_world import NOTES, inline
from verification.api.presenters import verification_view
from verification.errors import PermissionRefused, ServiceError
from verification.kernel.errors import KernelError
from verification.kernel.reasons import Reason
from verification.kernel.verifier import verify_strict
from verification.reviews.models import Finding, ReviewDecision, ReviewLease
from verification.reviews.selectors import in_queue, queue_items
from verification.reviews.services.claims import review_claim, review_claim_next
from verification.reviews.services.decisions import new_request_key, review_decide, review_request_evidence
from verification.runs.models import Event, Verification
from verification.runs.services.run import verification_run
from verification.runs.services.submit import verification_add_evidence
from verification.runs.services.tasks import task_reopen
from verification.trust.models import Receipt
from verification.trust.selectors import head_of, proof_for, receipt_payload, trusted_keys

pytestmark = pytest.mark.django_db


def decide(user: Any, verification: Verification, verdict: str, *, cited: Any = (), key: str | None = None,
           rationale: str = "checked the config by hand") -> ReviewDecision:
    return review_decide(
        user=user,
        verification=verification,
        verdict=verdict,
        rationale=rationale,
        cited_evidence_ids=list(cited),
        request_key=key or new_request_key(),
    )


def refused(user: Any, verification: Verification, verdict: str, **kwargs: Any) -> KernelError:
    receipts = Receipt.objects.count()
    with pytest.raises(KernelError) as info:
        decide(user, verification, verdict, **kwargs)
    assert Receipt.objects.count() == receipts  # SPEC §9: a refused decision issues no receipt
    assert not ReviewDecision.objects.filter(verification=verification).exists()
    return info.value


def held_by(verification: Verification) -> Any:
    lease = ReviewLease.objects.filter(verification=verification).first()
    if lease is None or lease.released_at is not None or lease.expires_at <= timezone.now():
        return None
    return lease.holder


# --- an accepted decision ----------------------------------------------------------------------------------------


def test_a_pass_over_unknown_appends_a_human_decision_receipt_that_supersedes_the_head(
    queue: Queue, reviewer: Any
) -> None:
    verification = queue.unknown()
    old_head = head_of(verification)
    assert old_head is not None
    evidence_id = queue.evidence_ids(verification)[0]
    review_claim(user=reviewer, verification=verification)
    events_before = Event.objects.count()

    decision = decide(reviewer, verification, "PASS", cited=[evidence_id], rationale="the config is what we shipped")

    receipt = decision.receipt
    assert receipt is not None and head_of(verification) == receipt
    assert (receipt.kind, receipt.seq, receipt.verdict, receipt.determination, receipt.authority) == (
        "decision", old_head.seq + 1, "PASS", "met", "human"
    )
    assert receipt.actor == "user:rita"
    assert receipt.supersedes_receipt_id == old_head.content_hash
    payload = receipt_payload(receipt)
    assert payload["supersedes_receipt_id"] == old_head.content_hash
    assert payload["rationale"] == "the config is what we shipped"
    assert payload["cited_evidence_ids"] == [evidence_id]
    assert payload["checks"] == [
        {"criterion": "decision", "authority": "human", "verdict": "PASS", "reason": "human-decision",
         "origin": "evaluator", "evidence_ids": [evidence_id], "detail": "", "deadline": None, "on_expiry": None}
    ]
    [proof_entry] = payload["integrity_proof"]
    assert proof_entry["evidence_id"] == evidence_id and proof_entry["recorded"] == proof_entry["recomputed"]
    assert payload["superseded"]["verdict"] == "UNKNOWN" and payload["superseded"]["reason"] == "missing-baseline"
    assert [e["id"] for e in payload["evidence"]] == [evidence_id]
    assert "criteria" not in payload  # the decision's verdict replaces the fold; it does not join it (SPEC §2)

    verification.refresh_from_db()
    assert (verification.verdict, verification.determination, verification.flagged, verification.human_decided) == (
        "PASS", "met", False, True
    )
    assert verification not in queue_items(now=timezone.now())
    view = verification_view(verification, now=timezone.now())
    assert (view["determination"], view["flagged"], view["kernel_verdict"]) == ("met", False, "PASS")
    assert held_by(verification) is None
    assert ReviewLease.objects.get(verification=verification).end_reason == "decided"
    [event] = Event.objects.filter(id__gt=0).order_by("-id")[:1]
    assert Event.objects.count() == events_before + 1
    assert event.kind == "verification.decided" and event.payload["receipt_id"] == receipt.content_hash
    report = verify_strict(
        proof_for(verification),
        keys=trusted_keys("proof-signing"),
        trusted_head=receipt.content_hash,
        expected_verification_id=str(verification.pk),
        expected_submission_hash=verification.submission_hash,
    )
    assert report.entries_verified == receipt.seq + 1


def test_a_fail_needs_no_evidence_and_may_overrule_anything(queue: Queue, reviewer: Any) -> None:
    verification = queue.mismatch()
    review_claim(user=reviewer, verification=verification)
    decision = decide(reviewer, verification, "FAIL", rationale="the config was changed on purpose, not allowed")
    assert decision.receipt is not None and decision.receipt.verdict == "FAIL"
    assert receipt_payload(decision.receipt)["integrity_proof"] == []
    verification.refresh_from_db()
    assert (verification.verdict, verification.determination, verification.human_decided) == ("FAIL", "not_met", True)
    assert verification.awaiting_evidence is True  # a failed item can still be repaired with new evidence


@pytest.mark.parametrize("kind", ["expired_pending", "cited_conflict", "not_run"])
def test_a_person_may_pass_over_expired_pending_semantic_and_not_run(queue: Queue, reviewer: Any, kind: str) -> None:
    verification = getattr(queue, kind)()
    review_claim(user=reviewer, verification=verification)
    decision = decide(reviewer, verification, "PASS", cited=queue.evidence_ids(verification)[:1])
    assert decision.receipt is not None and decision.receipt.verdict == "PASS"


# --- refusals by the kernel (SPEC §2) ----------------------------------------------------------------------------


def test_no_pass_over_a_mismatch(queue: Queue, reviewer: Any) -> None:
    verification = queue.mismatch()
    review_claim(user=reviewer, verification=verification)
    exc = refused(reviewer, verification, "PASS", cited=queue.evidence_ids(verification))
    assert exc.reason is Reason.MISMATCH_NEEDS_NEW_EVIDENCE
    assert held_by(verification) == reviewer  # not a rail: the reviewer keeps the item (to FAIL it or ask for more)


def test_no_pass_over_a_deterministic_fail(queue: Queue, reviewer: Any) -> None:
    verification = queue.deterministic_fail()
    review_claim(user=reviewer, verification=verification)
    exc = refused(reviewer, verification, "PASS", cited=queue.evidence_ids(verification))
    assert exc.reason is Reason.DETERMINISTIC_FAIL_NEEDS_NEW_EVIDENCE


def test_a_pass_must_cite_evidence_and_every_decision_needs_a_rationale(queue: Queue, reviewer: Any) -> None:
    verification = queue.unknown()
    review_claim(user=reviewer, verification=verification)
    assert refused(reviewer, verification, "PASS").reason is Reason.DECISION_CITES_NO_EVIDENCE
    cited = queue.evidence_ids(verification)
    assert refused(reviewer, verification, "PASS", cited=cited, rationale="  ").reason is Reason.RATIONALE_REQUIRED
    assert refused(reviewer, verification, "FAIL", rationale="").reason is Reason.RATIONALE_REQUIRED
    assert refused(reviewer, verification, "MORE_EVIDENCE", rationale="\n").reason is Reason.RATIONALE_REQUIRED
    assert refused(reviewer, verification, "UNKNOWN", cited=cited).reason is Reason.DECISION_VERDICT_NOT_ALLOWED


def test_a_pass_may_cite_only_this_verifications_evidence(queue: Queue, reviewer: Any) -> None:
    other = queue.unknown("other")
    verification = queue.unknown()
    review_claim(user=reviewer, verification=verification)
    exc = refused(reviewer, verification, "PASS", cited=queue.evidence_ids(other))
    assert exc.reason is Reason.DECISION_CITES_NO_EVIDENCE and "not evidence of this verification" in exc.detail


def test_a_pass_rechecks_the_cited_bytes_first_and_refuses_when_they_are_gone(queue: Queue, reviewer: Any) -> None:
    verification = queue.bytes_gone()
    review_claim(user=reviewer, verification=verification)
    exc = refused(reviewer, verification, "PASS", cited=queue.evidence_ids(verification))
    assert exc.reason is Reason.MISSING_EVIDENCE_INTEGRITY_PROOF
    finding = Finding.objects.get(verification=verification, kind="evidence_integrity")
    assert finding.refs[1] == queue.evidence_ids(verification)[0]
    assert held_by(verification) == reviewer
    # A FAIL does not rest on the evidence, so it may still be recorded.
    assert decide(reviewer, verification, "FAIL", rationale="the evidence is gone").receipt is not None


# --- refusals by the rails (SPEC §9): shown to the reviewer, nothing issued, the item released -------------------


@pytest.mark.parametrize(
    ("trap", "code"),
    [
        ("self_review_trap", Reason.WORKER_SELF_VERIFICATION),
        ("authored_by", Reason.VERIFIER_AUTHORED_WORK),
        ("shared_boundary", Reason.SHARED_EXECUTION_BOUNDARY),
    ],
)
def test_the_rails_refuse_a_reviewer_who_worked_on_the_task_and_release_the_item(
    queue: Queue, reviewer: Any, reviewer2: Any, trap: str, code: Reason
) -> None:
    verification = getattr(queue, trap)(reviewer)
    review_claim(user=reviewer, verification=verification)
    for verdict in ("PASS", "FAIL", "MORE_EVIDENCE"):
        if verdict != "PASS":
            review_claim(user=reviewer, verification=verification)
        exc = refused(reviewer, verification, verdict, cited=queue.evidence_ids(verification))
        assert exc.reason is code, exc
        assert exc.detail.startswith("rail ")
        assert held_by(verification) is None  # back in the queue for others
    review_claim(user=reviewer2, verification=verification)
    assert decide(reviewer2, verification, "PASS", cited=queue.evidence_ids(verification)).receipt is not None


def test_an_approval_of_an_earlier_cycle_is_stale(queue: Queue, reviewer: Any) -> None:
    verification = queue.unknown()
    review_claim(user=reviewer, verification=verification)
    task_reopen(actor=queue.world.owner.actor, task=verification.task)
    exc = refused(reviewer, verification, "PASS", cited=queue.evidence_ids(verification))
    assert exc.reason is Reason.STALE_CYCLE


# --- leases, permissions, and once only ------------------------------------------------------------------------


def test_deciding_needs_the_lease(queue: Queue, reviewer: Any, reviewer2: Any) -> None:
    verification = queue.unknown()
    cited = queue.evidence_ids(verification)
    assert refused(reviewer, verification, "PASS", cited=cited).reason is Reason.REVIEW_LEASE_NOT_HELD
    review_claim(user=reviewer2, verification=verification)
    assert refused(reviewer, verification, "PASS", cited=cited).reason is Reason.REVIEW_LEASE_NOT_HELD


def test_a_manager_decides_nothing(queue: Queue, manager: Any) -> None:
    verification = queue.unknown()
    with pytest.raises(PermissionRefused):
        review_claim_next(user=manager)
    with pytest.raises(PermissionRefused):
        decide(manager, verification, "FAIL")
    assert not ReviewDecision.objects.exists()


def test_the_same_form_twice_creates_one_receipt(queue: Queue, reviewer: Any) -> None:
    verification = queue.unknown()
    review_claim(user=reviewer, verification=verification)
    key = new_request_key()
    first = decide(reviewer, verification, "PASS", cited=queue.evidence_ids(verification), key=key)
    second = decide(reviewer, verification, "PASS", cited=queue.evidence_ids(verification), key=key)
    assert first.pk == second.pk and first.receipt_id == second.receipt_id
    assert Receipt.objects.filter(verification=verification, kind="decision").count() == 1
    # Another form after the decision: refused, the decision stands.
    exc = refused_after(reviewer, verification)
    assert exc.reason in (Reason.ALREADY_DECIDED, Reason.REVIEW_LEASE_NOT_HELD)


def refused_after(user: Any, verification: Verification) -> KernelError:
    with pytest.raises(KernelError) as info:
        decide(user, verification, "FAIL")
    return info.value


def test_a_request_key_belongs_to_one_verification(queue: Queue, reviewer: Any) -> None:
    first, second = queue.unknown("a"), queue.unknown("b")
    key = new_request_key()
    review_claim(user=reviewer, verification=first)
    review_claim(user=reviewer, verification=second)
    decide(reviewer, first, "FAIL", key=key)
    with pytest.raises(ServiceError) as info:
        decide(reviewer, second, "FAIL", key=key)
    assert info.value.reason is Reason.IDEMPOTENCY_CONFLICT


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_two_concurrent_posts_of_one_form_create_one_receipt(queue: Queue, reviewer: Any) -> None:
    verification = queue.unknown()
    review_claim(user=reviewer, verification=verification)
    key = new_request_key()
    cited = queue.evidence_ids(verification)
    start = threading.Barrier(6)
    results: list[Any] = []

    def post() -> None:
        try:
            start.wait(timeout=30)
            results.append(decide(reviewer, verification, "PASS", cited=cited, key=key).pk)
        except BaseException as exc:  # noqa: BLE001 - reported below
            results.append(exc)
        finally:
            connection.close()

    threads = [threading.Thread(target=post) for _ in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert len(results) == 6 and len(set(results)) == 1, results
    assert Receipt.objects.filter(verification=verification, kind="decision").count() == 1


# --- needs more evidence ------------------------------------------------------------------------------------------


def test_needs_more_evidence_leaves_the_queue_and_is_in_the_feed(queue: Queue, reviewer: Any) -> None:
    verification = queue.unknown()
    review_claim(user=reviewer, verification=verification)
    receipts = Receipt.objects.count()
    decision = review_request_evidence(
        user=reviewer, verification=verification, rationale="need the collector's baseline",
        request_key=new_request_key(),
    )
    assert decision.action == "MORE_EVIDENCE" and decision.receipt is None
    assert Receipt.objects.count() == receipts
    assert not in_queue(verification, now=timezone.now())
    verification.refresh_from_db()
    assert verification.awaiting_evidence is True and verification.human_decided is False
    event = Event.objects.order_by("-id").first()
    assert event is not None and event.kind == "verification.evidence_requested"
    assert event.payload["rationale"] == "need the collector's baseline"
    assert held_by(verification) is None


def test_new_evidence_brings_a_flagged_rerun_back_to_the_queue(queue: Queue, reviewer: Any) -> None:
    verification = queue.unknown()
    review_claim(user=reviewer, verification=verification)
    review_request_evidence(user=reviewer, verification=verification, rationale="more", request_key=new_request_key())
    world = queue.world
    rerun = verification_add_evidence(
        actor=world.agent.actor,
        token=world.agent.token,
        verification=verification,
        body={"evidence": [inline("config", b"retries = 4\n")]},
    )
    verification_run(verification_id=rerun.pk)
    rerun.refresh_from_db()
    now = timezone.now()
    assert rerun.flagged and in_queue(rerun, now=now)  # still no baseline: back to a person
    assert not in_queue(verification, now=now)


def test_new_evidence_that_meets_the_contract_resolves_it(queue: Queue, reviewer: Any) -> None:
    verification = queue.bytes_gone_digest()
    review_claim(user=reviewer, verification=verification)
    review_request_evidence(
        user=reviewer, verification=verification, rationale="re-send", request_key=new_request_key()
    )
    world = queue.world
    rerun = verification_add_evidence(
        actor=world.agent.actor, token=world.agent.token, verification=verification,
        body={"evidence": [inline("notes", NOTES)]},
    )
    verification_run(verification_id=rerun.pk)
    rerun.refresh_from_db()
    now = timezone.now()
    assert (rerun.verdict, rerun.flagged) == ("PASS", False)
    assert not in_queue(rerun, now=now) and not in_queue(verification, now=now)


# --- through the pages ---------------------------------------------------------------------------------------------


def _client(user: Any) -> Client:
    client = Client()
    client.force_login(user)
    return client


def test_the_decide_page_shows_a_refusal_in_plain_words(queue: Queue, reviewer: Any) -> None:
    verification = queue.self_review_trap(reviewer)
    review_claim(user=reviewer, verification=verification)  # through the service: the page no longer offers it
    client = _client(reviewer)
    response = client.post(
        f"/review/{verification.pk}/decide",
        {"verdict": "PASS", "rationale": "fine", "cited_evidence": queue.evidence_ids(verification),
         "request_key": new_request_key()},
    )
    # Post/Redirect/Get (issue 14): the refusal is shown on the review page, a GET URL
    assert response.status_code == 302 and response["Location"] == f"/review/{verification.pk}/#refusal"
    html = client.get(f"/review/{verification.pk}/").content.decode()
    assert "worker-self-verification" in html
    assert "The verifier claimed the task in this cycle" in html or "claimed the task" in html
    assert 'role="alert"' in html
    assert held_by(verification) is None


def test_posting_the_same_form_twice_through_the_page_records_one_decision(queue: Queue, reviewer: Any) -> None:
    verification = queue.unknown()
    client = _client(reviewer)
    client.post(f"/review/{verification.pk}/claim")
    form = {"verdict": "PASS", "rationale": "ok", "cited_evidence": queue.evidence_ids(verification),
            "request_key": new_request_key()}
    first = client.post(f"/review/{verification.pk}/decide", form)
    second = client.post(f"/review/{verification.pk}/decide", form)
    assert first.status_code == second.status_code == 302
    # issue 14: after a decision the next item opens; with none left, the queue's empty state
    assert first["Location"] == second["Location"] == "/queue/"
    assert ReviewDecision.objects.filter(verification=verification).count() == 1
    queue_page = client.get(first["Location"]).content.decode()
    assert "1</strong> decided this session" in queue_page  # the replayed form is not counted twice
    page = client.get(f"/review/{verification.pk}/").content.decode()
    head = head_of(verification)
    assert head is not None and head.kind == "decision"
    assert f"data-decision-receipt>{head.content_hash}<" in page
    assert "data-claim-next" in page  # the next item is offered


def test_the_lease_is_renewed_while_the_page_is_open(queue: Queue, reviewer: Any, reviewer2: Any) -> None:
    verification = queue.unknown()
    client = _client(reviewer)
    client.post(f"/review/{verification.pk}/claim")
    lease = ReviewLease.objects.get(verification=verification)
    ReviewLease.objects.filter(pk=lease.pk).update(expires_at=timezone.now() + timedelta(seconds=5))
    response = client.post(f"/review/{verification.pk}/renew", {"active": "1"})  # the reviewer did something
    assert response.status_code == 200
    lease.refresh_from_db()
    assert lease.expires_at > timezone.now() + timedelta(minutes=14)
    other = _client(reviewer2).post(f"/review/{verification.pk}/renew", {"active": "1"})
    assert other.status_code == 409 and other.json()["code"] == "review-lease-not-held"


def test_managers_see_what_awaits_evidence_and_the_feed_carries_the_request(
    queue: Queue, reviewer: Any, manager: Any
) -> None:
    from verification.actors.services.actors import token_issue

    verification = queue.unknown("waiting")
    review_claim(user=reviewer, verification=verification)
    review_request_evidence(
        user=reviewer, verification=verification, rationale="the baseline is missing", request_key=new_request_key()
    )
    page = _client(manager).get("/queue/awaiting-evidence/").content.decode()
    assert f'data-awaiting="{verification.pk}"' in page and "the baseline is missing" in page and "waiting" in page
    _, raw = token_issue(actor=queue.world.owner.actor, boundary="feed-reader", scopes=["events:read"])
    feed = Client().get("/v1/events", headers={"Authorization": f"Bearer {raw}"})
    assert feed.status_code == 200
    kinds = [event["kind"] for event in feed.json()["events"]]
    assert kinds[-1] == "verification.evidence_requested"


# --- the decision's security-log entry ----------------------------------------------------------------------------


@pytest.mark.django_db(transaction=True)
def test_the_decision_and_its_log_entry_are_written_in_one_transaction_without_a_savepoint(
    queue: Queue, reviewer: Any
) -> None:
    from django.test.utils import CaptureQueriesContext

    from verification.actors.services.actors import actor_for_user
    from verification.trust.models import SecurityLogEntry

    verification = queue.unknown()
    review_claim(user=reviewer, verification=verification)
    actor_for_user(reviewer)  # a first decision makes the reviewer's actor (get_or_create: its own savepoints)
    with CaptureQueriesContext(connection) as captured:
        decision = decide(reviewer, verification, "FAIL")
    statements = [q["sql"] for q in captured.captured_queries]
    assert not [sql for sql in statements if "SAVEPOINT" in sql], "\n".join(s[:120] for s in statements)
    entry = SecurityLogEntry.objects.get(kind="decision", target=str(verification.pk))
    assert entry.user == reviewer and entry.detail == {"action": "FAIL", "receipt": decision.receipt_id}


def test_a_decision_whose_log_entry_fails_is_not_recorded(
    queue: Queue, reviewer: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    from django.db import DatabaseError

    from verification.compiled import queue as queue_write
    from verification.trust.services import security_log

    verification = queue.unknown()
    review_claim(user=reviewer, verification=verification)

    def refused_entry(entries: Any) -> None:
        # The entry's INSERT as the database refuses it (a NOT NULL column left empty), queued with the decision's
        # other writes as the real one is: the refusal comes when they are sent, and undoes them all.
        (entry,) = entries
        assert entry.kind == "decision"
        sql = "INSERT INTO verification_securitylogentry (kind) VALUES (NULL)"
        queue_write(connection.alias, sql, [], rows=False, then=None)

    monkeypatch.setattr(security_log, "_INSERT_ENTRY", refused_entry)
    receipts = Receipt.objects.count()
    with pytest.raises(DatabaseError):
        decide(reviewer, verification, "FAIL")
    assert Receipt.objects.count() == receipts
    assert not ReviewDecision.objects.filter(verification=verification).exists()


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_a_decision_in_its_own_transaction_commits_with_its_writes(
    queue: Queue, reviewer: Any, round_trips: list[str]
) -> None:
    """As a request makes it: the lock with its reads, then every write and the COMMIT, in one round trip
    (``compiled.atomic_batched``); the decision is committed (another connection reads it)."""
    from django.db import connections

    from verification.actors.services.actors import actor_for_user

    verification = queue.unknown()
    review_claim(user=reviewer, verification=verification)
    actor_for_user(reviewer)
    round_trips.clear()
    decision = decide(reviewer, verification, "FAIL")
    sent = list(round_trips)
    assert sent == ["pipeline", "pipeline"], sent  # no COMMIT of its own
    other = connections.create_connection(connection.alias)
    try:
        with other.cursor() as cursor:
            cursor.execute("SELECT human_decided FROM verification_verification WHERE id = %s", [verification.pk])
            assert cursor.fetchone() == (True,)
            cursor.execute("SELECT count(*) FROM verification_receipt WHERE content_hash = %s", [decision.receipt_id])
            assert cursor.fetchone() == (1,)
    finally:
        other.close()


@pytest.mark.postgres
def test_a_decision_is_two_round_trips(queue: Queue, reviewer: Any, round_trips: list[str]) -> None:
    """The decision's receipt, its head's columns, its record and security-log entry, the lease's end and the event
    go to the database together (``compiled.writes_batched``), after the lock sent with every read the decision makes
    (the rails' too: ``cycle_workers.workers_of_verification_query``)."""
    from verification.actors.services.actors import actor_for_user
    from verification.trust.models import SecurityLogEntry

    verification = queue.unknown()
    review_claim(user=reviewer, verification=verification)
    actor_for_user(reviewer)  # a first decision makes the reviewer's actor
    round_trips.clear()
    decision = decide(reviewer, verification, "FAIL")
    sent = list(round_trips)
    # The lock with every read after it (the chain's head, the lease, the rails' cycle workers), then every write.
    assert sent == ["pipeline", "pipeline"], sent
    assert decision.pk is not None and decision.receipt_id is not None
    assert Verification.objects.get(pk=verification.pk).human_decided
    assert SecurityLogEntry.objects.filter(kind="decision", target=str(verification.pk)).count() == 1
    assert not ReviewLease.objects.filter(verification=verification, released_at__isnull=True).exists()
    assert Event.objects.filter(verification=verification, kind="verification.decided").count() == 1
