"""Submitting (idempotency, the submission hash, body checks), running once, operational failure, and the reads
(status, list, events, review queue) of issue 4 §1–§2."""

from __future__ import annotations

import hashlib
import threading
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from django.conf import settings
from django.db import OperationalError, connection
from django.utils import timezone

from tests.verification.service_world import (
    CONFIG_AFTER,
    NOTES,
    OTHER_DIGEST,
    World,
    digest_entry,
    head_payload,
    inline,
    view_of,
)
from verification import tasks
from verification.errors import NotFound, ServiceError
from verification.evidence.models import Evidence, VerificationEvidence
from verification.kernel.canonical import canonicalize
from verification.kernel.digests import sha256_digest
from verification.kernel.reasons import Reason
from verification.reviews.selectors import review_queue
from verification.runs.models import Event, Verification
from verification.runs.selectors import events_after, verification_list
from verification.runs.services import run as services
from verification.runs.services import submit as submit_services
from verification.runs.services.run import verification_mark_failed, verification_run
from verification.runs.services.submit import verification_add_evidence, verification_submit
from verification.trust.models import Receipt

pytestmark = pytest.mark.django_db

#: One setting, not a setting and a constant (issue 13 item 5).
MAX_INLINE_EVIDENCE_BYTES = settings.REVIEWPORTAL_API_MAX_INLINE_EVIDENCE_BYTES


@pytest.fixture
def world(signing_key: Any) -> World:
    world = World.build()
    world.contract(digest_entry())
    return world


def submit(world: World, body: dict[str, Any], key: str | None) -> tuple[Verification, bool]:
    return verification_submit(
        actor=world.agent.actor, token=world.agent.token, task=world.task, body=body, idempotency_key=key
    )


# --- the submission hash and idempotency (SPEC §7, issue 4 §3) -----------------------------------------------------


def test_the_submission_hash_is_recomputable_from_the_request_log(world: World) -> None:
    body = {"task": str(world.task.pk), "evidence": [inline("notes", NOTES)], "wait_ms": 2500}
    verification, created = submit(world, body, None)
    assert created
    # What a client computes: drop wait_ms, replace each content_base64 by sha256:<hex> of its bytes, RFC 8785.
    expected = {"task": str(world.task.pk), "evidence": [{"symbol": "notes", "content_base64": sha256_digest(NOTES)}]}
    assert verification.submission_hash == hashlib.sha256(canonicalize(expected)).hexdigest()
    assert verification.body == expected  # stored without the inline bytes
    evidence = Evidence.objects.get()
    assert (evidence.digest, evidence.admitted_by) == (sha256_digest(NOTES), world.agent.actor)
    assert evidence.trust_tier == "claimant"


def test_the_same_key_and_body_give_the_same_verification(world: World) -> None:
    body = {"evidence": [inline("notes", NOTES)], "wait_ms": 0}
    first, created = submit(world, body, "key-1")
    again, created_again = submit(world, {**body, "wait_ms": 30000}, "key-1")  # transport fields do not count
    assert created and not created_again and again.pk == first.pk
    assert Verification.objects.count() == 1


def test_the_same_key_with_another_body_is_a_conflict(world: World) -> None:
    first, _ = submit(world, {"evidence": [inline("notes", NOTES)]}, "key-1")
    with pytest.raises(ServiceError) as exc:
        submit(world, {"evidence": [inline("notes", CONFIG_AFTER)]}, "key-1")
    assert exc.value.reason is Reason.IDEMPOTENCY_CONFLICT and exc.value.http_status == 409
    assert exc.value.details["verification_id"] == str(first.pk)
    assert Verification.objects.count() == 1


def test_a_request_that_loses_the_race_for_its_key_gets_the_winners_verification(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two requests with one Idempotency-Key at once: both look for the key before either has written, so the later
    one's INSERT meets the unique index; it is undone alone (its savepoint) and the winner's verification replayed,
    with nothing of the loser kept (its evidence included) and no second verification."""
    _lose_the_race_for_a_key(world, monkeypatch)


@pytest.mark.django_db(transaction=True)
def test_a_request_that_loses_the_race_for_its_key_in_its_own_transaction_gets_the_winners_verification(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The same, the submission's transaction its own (as in a request): on PostgreSQL its writes wait in a batch
    sent with its COMMIT (``compiled.atomic_batched``), and the savepoint's release sends them first, so the unique
    index still refuses them inside the savepoint."""
    _lose_the_race_for_a_key(world, monkeypatch)


def _lose_the_race_for_a_key(world: World, monkeypatch: pytest.MonkeyPatch) -> None:
    body = {"evidence": [inline("notes", NOTES)]}
    winner, _ = submit(world, body, "key-1")
    evidence_before = Evidence.objects.count()
    looked = []
    replay = submit_services._replay

    def not_yet_written(actor: Any, key: str, submission_hash: str) -> Verification | None:
        looked.append(key)
        return None if len(looked) == 1 else replay(actor, key, submission_hash)  # the first look saw no winner

    monkeypatch.setattr(submit_services, "_replay", not_yet_written)
    again, created = submit(world, body, "key-1")
    assert len(looked) == 2  # the look before the write, and the replay after the unique index refused it
    assert not created and again.pk == winner.pk
    assert Verification.objects.count() == 1
    assert Evidence.objects.count() == evidence_before


def test_keys_are_per_actor(world: World) -> None:
    body = {"evidence": [inline("notes", NOTES)]}
    mine, _ = submit(world, body, "key-1")
    theirs, created = verification_submit(
        actor=world.collector.actor, token=world.collector.token, task=world.task, body=body, idempotency_key="key-1"
    )
    assert created and theirs.pk != mine.pk


@pytest.mark.parametrize(
    ("body", "reason", "status"),
    [
        ({"evidence": [], "rubric": {"name": "mine"}}, Reason.UNKNOWN_FIELD, 400),
        ({"evidence": [{"symbol": "notes", "content_base64": "not base64!"}]}, Reason.BAD_BASE64, 400),
        ({"evidence": [{"symbol": "notes"}]}, Reason.INVALID_REQUEST, 400),
        ({"evidence": [{"symbol": "1bad", "content_base64": "AA=="}]}, Reason.INVALID_REQUEST, 400),
        ({"evidence": [inline("notes", b"a"), inline("notes", b"b")]}, Reason.INVALID_REQUEST, 400),
        ({"evidence": [{"symbol": "notes", "content_base64": "AA==", "trust_tier": "T0"}]}, Reason.UNKNOWN_FIELD, 400),
        ({"evidence": [inline("notes", b"a", collected_at="yesterday")]}, Reason.INVALID_REQUEST, 400),
        ({"task": "00000000-0000-0000-0000-000000000000"}, Reason.INVALID_REQUEST, 400),
        ({"results": [{"criterion": "notes-digest", "verdict": "FAIL"}]}, Reason.ACTOR_CANNOT_AUTHOR_RESULT, 403),
        ({"evidence": [inline("notes", b"x" * (MAX_INLINE_EVIDENCE_BYTES + 1))]}, Reason.PAYLOAD_TOO_LARGE, 413),
    ],
)
def test_malformed_submissions_are_refused_with_a_precise_code(
    world: World, body: dict[str, Any], reason: Reason, status: int
) -> None:
    with pytest.raises(ServiceError) as exc:
        submit(world, body, None)
    assert (exc.value.reason, exc.value.http_status) == (reason, status)
    assert Verification.objects.count() == 0 and Evidence.objects.count() == 0


def test_an_unknown_evidence_id_is_not_found(world: World) -> None:
    with pytest.raises(NotFound):
        submit(world, {"evidence": [{"symbol": "notes", "evidence_id": "7d0d3c52-3a5b-4b8f-9f53-6a8f5d7d7c11"}]}, None)


def test_a_revoked_token_cannot_submit(world: World) -> None:
    from verification.actors.services.actors import token_revoke

    token_revoke(token=world.agent.token)
    world.agent.token.refresh_from_db()
    with pytest.raises(ServiceError) as exc:
        submit(world, {"evidence": [inline("notes", NOTES)]}, None)
    assert exc.value.reason is Reason.NOT_AUTHENTICATED


# --- one chain, however often it runs (issue 4 §2) -----------------------------------------------------------------


def test_running_twice_yields_one_chain(world: World) -> None:
    verification, _ = submit(world, {"evidence": [inline("notes", NOTES)]}, None)
    first = verification_run(verification_id=verification.pk)
    second = verification_run(verification_id=str(verification.pk))
    assert first is not None and second == first
    assert list(Receipt.objects.filter(verification=verification).values_list("seq", flat=True)) == [0]
    verification.refresh_from_db()
    assert verification.attempts == 1  # the second call found seq 0 before counting an attempt
    assert Event.objects.filter(kind="verification.finished").count() == 1


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_concurrent_runs_of_one_verification_yield_one_seq0(signing_key: Any, monkeypatch: Any) -> None:
    monkeypatch.setattr(submit_services, "_enqueue", lambda pk: None)  # committed, but left queued: the threads run it
    world = World.build()
    world.contract(digest_entry())
    verification, _ = submit(world, {"evidence": [inline("notes", NOTES)]}, None)
    threads_count = 6
    barrier = threading.Barrier(threads_count)
    found: list[Any] = []
    errors: list[BaseException] = []

    def run() -> None:
        try:
            barrier.wait(timeout=30)
            found.append(verification_run(verification_id=verification.pk))
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)
        finally:
            connection.close()

    threads = [threading.Thread(target=run) for _ in range(threads_count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert not errors, errors
    assert len(found) == threads_count and len({r.content_hash for r in found}) == 1
    assert list(Receipt.objects.filter(verification=verification).values_list("seq", flat=True)) == [0]
    assert Event.objects.filter(kind="verification.finished").count() == 1


def test_a_verification_without_a_subject_cannot_run(world: World, make_verification: Any) -> None:
    bare = make_verification()
    with pytest.raises(Exception) as exc:
        verification_run(verification_id=bare.pk)
    assert getattr(exc.value, "reason", None) is Reason.MALFORMED_RECORD
    bare.refresh_from_db()
    assert bare.attempts == 1 and "malformed-record" in bare.last_error


def test_an_unknown_id_is_not_found(world: World) -> None:
    with pytest.raises(NotFound):
        verification_run(verification_id="b3f0c1de-0000-4000-8000-000000000000")
    with pytest.raises(NotFound):
        verification_run(verification_id="not-a-uuid")


# --- operational failure: 3 attempts, then failed, no receipt (SPEC §3) -----------------------------------------------


def test_an_operational_failure_is_retried_then_recorded_as_failed(world: World, monkeypatch: Any) -> None:
    verification, _ = submit(world, {"evidence": [inline("notes", NOTES)]}, None)
    calls: list[str] = []

    def database_down(*, verification_id: Any, now: Any = None) -> Any:
        calls.append(str(verification_id))
        raise OperationalError("could not connect to server")

    monkeypatch.setattr(services, "verification_run", database_down)
    monkeypatch.setattr(tasks, "EAGER_BACKOFF_SECONDS", 0.0)
    result = tasks.verification_run.apply(args=[str(verification.pk)])
    assert result.successful() and result.result is None
    assert len(calls) == services.MAX_ATTEMPTS
    verification.refresh_from_db()
    assert verification.failed_at is not None and "OperationalError" in verification.last_error
    view = view_of(verification, timezone.now())
    assert (view["status"], view["determination"], view["last_error"]) == ("failed", None, verification.last_error)
    assert not Receipt.objects.filter(verification=verification).exists()
    event = Event.objects.get(kind="verification.failed")
    assert event.payload["reason"] == "run-failed"
    # A failed verification is not run again by a late redelivery: a new attempt is a new submission.
    monkeypatch.undo()
    assert verification_run(verification_id=verification.pk) is None
    assert not Receipt.objects.filter(verification=verification).exists()


def test_the_broker_path_raises_for_a_retry_and_records_failure_on_the_last_attempt(
    world: World, monkeypatch: Any
) -> None:
    verification, _ = submit(world, {"evidence": [inline("notes", NOTES)]}, None)

    def database_down(*, verification_id: Any, now: Any = None) -> Any:
        raise OperationalError("could not connect to server")

    monkeypatch.setattr(services, "verification_run", database_down)
    task = tasks.verification_run
    task.push_request(retries=0, is_eager=False, called_directly=False)
    try:
        with pytest.raises(Exception):  # noqa: B017 - Celery's Retry or the OperationalError itself
            task.run(str(verification.pk))
    finally:
        task.pop_request()
    verification.refresh_from_db()
    assert verification.failed_at is None
    task.push_request(retries=services.MAX_ATTEMPTS - 1, is_eager=False, called_directly=False)
    try:
        assert task.run(str(verification.pk)) is None
    finally:
        task.pop_request()
    verification.refresh_from_db()
    assert verification.failed_at is not None


def test_a_defect_is_recorded_as_failed_at_once(world: World, monkeypatch: Any) -> None:
    verification, _ = submit(world, {"evidence": [inline("notes", NOTES)]}, None)

    def defect(*, verification_id: Any, now: Any = None) -> Any:
        raise ZeroDivisionError("bug")

    monkeypatch.setattr(services, "verification_run", defect)
    assert tasks.verification_run.apply(args=[str(verification.pk)]).result is None
    verification.refresh_from_db()
    assert verification.failed_at is not None and "ZeroDivisionError" in verification.last_error


def test_mark_failed_does_not_touch_a_verification_with_a_receipt(world: World) -> None:
    verification, _ = world.submit_and_run({"evidence": [inline("notes", NOTES)]})
    assert verification_mark_failed(verification_id=verification.pk, error="late") is False
    verification.refresh_from_db()
    assert verification.failed_at is None


# --- more evidence: a new verification of the same subject (issue 4 §3, SPEC §7) ----------------------------------


def test_more_evidence_makes_a_new_verification_whose_first_receipt_supersedes_the_old_head(signing_key: Any) -> None:
    world = World.build()
    world.contract(digest_entry(), digest_entry("other", literal=sha256_digest(CONFIG_AFTER), symbol="config"))
    old, old_head = world.submit_and_run({"evidence": [inline("notes", NOTES)]})
    assert (old.reason, old.awaiting_evidence) == ("evidence-not-bound", True)
    new = verification_add_evidence(
        actor=world.agent.actor,
        token=world.agent.token,
        verification=old,
        body={"evidence": [inline("config", CONFIG_AFTER)]},
    )
    assert (new.task_id, new.cycle, new.supersedes_id) == (old.task_id, old.cycle, old.pk)
    assert sorted(VerificationEvidence.objects.filter(verification=new).values_list("symbol", flat=True)) == [
        "config",
        "notes",
    ]
    world.run(new)
    new.refresh_from_db()
    assert new.determination == "met"
    assert head_payload(new)["supersedes_receipt_id"] == old_head.content_hash
    old.refresh_from_db()
    assert old.awaiting_evidence is False
    with pytest.raises(ServiceError) as exc:
        verification_add_evidence(actor=world.agent.actor, token=world.agent.token, verification=old, body={})
    assert exc.value.reason is Reason.NOT_AWAITING_EVIDENCE and exc.value.http_status == 409


def test_a_met_verification_is_not_waiting_for_evidence(world: World) -> None:
    verification, _ = world.submit_and_run({"evidence": [inline("notes", NOTES)]})
    with pytest.raises(ServiceError) as exc:
        verification_add_evidence(
            actor=world.agent.actor, token=world.agent.token, verification=verification, body={"evidence": []}
        )
    assert exc.value.reason is Reason.NOT_AWAITING_EVIDENCE


# --- reads: list, events, review queue --------------------------------------------------------------------------------


def test_the_list_pages_by_keyset_and_filters(world: World) -> None:
    t0 = datetime(2026, 1, 1, tzinfo=UTC)
    made = [world.submit({"evidence": [inline("notes", NOTES)]}, now=t0 + timedelta(seconds=i)) for i in range(5)]
    world.run(made[0])
    page, cursor = verification_list(actor=world.agent.actor, filters={}, cursor=None, limit=2)
    assert [v.pk for v in page] == [made[4].pk, made[3].pk] and cursor is not None
    page, cursor = verification_list(actor=world.agent.actor, filters={}, cursor=cursor, limit=2)
    assert [v.pk for v in page] == [made[2].pk, made[1].pk]
    page, cursor = verification_list(actor=world.agent.actor, filters={}, cursor=cursor, limit=2)
    assert [v.pk for v in page] == [made[0].pk] and cursor is None
    succeeded, _ = verification_list(actor=None, filters={"status": "succeeded"}, cursor=None, limit=10)
    queued, _ = verification_list(actor=None, filters={"status": "queued"}, cursor=None, limit=10)
    assert [v.pk for v in succeeded] == [made[0].pk] and len(queued) == 4
    filters = {"determination": "met", "task": str(world.task.pk)}
    met, _ = verification_list(actor=None, filters=filters, cursor=None, limit=10)
    assert [v.pk for v in met] == [made[0].pk]
    for filters, cursor_text in (({"colour": "red"}, None), ({"flagged": "maybe"}, None), ({}, "garbage!")):
        with pytest.raises(ServiceError):
            verification_list(actor=None, filters=filters, cursor=cursor_text, limit=10)


def test_events_come_in_id_order_after_a_cursor(world: World) -> None:
    for _ in range(3):
        world.submit_and_run({"evidence": [inline("notes", NOTES)]})
    everything = events_after(cursor=None, limit=50)
    assert [e.kind for e in everything] == ["verification.finished"] * 3
    ids = [e.id for e in everything]
    assert ids == sorted(ids)
    assert [e.id for e in events_after(cursor=ids[0], limit=50)] == ids[1:]
    assert events_after(cursor=ids[-1], limit=50) == []
    with pytest.raises(ServiceError):
        events_after(cursor=-1, limit=10)


def test_the_review_queue_holds_the_flagged_that_no_person_decided(signing_key: Any) -> None:
    world = World.build()
    world.contract(digest_entry(literal=OTHER_DIGEST), digest_entry("soft", hard=False))
    clean_fail, _ = world.submit_and_run({"evidence": [inline("notes", NOTES)]})  # deterministic not_met: no flag
    unknown, _ = world.submit_and_run({"evidence": []})  # evidence-not-bound: flagged
    queue = list(review_queue(now=timezone.now()))
    assert queue == [Verification.objects.get(pk=unknown.pk)]
    assert clean_fail.flagged is False
    Verification.objects.filter(pk=unknown.pk).update(human_decided=True)  # what a person's decision will set
    assert list(review_queue(now=timezone.now())) == []


# --- the embedded default: no broker, the run happens eagerly on commit ------------------------------------------


def test_without_a_broker_the_run_happens_eagerly_when_the_submission_commits(
    world: World, monkeypatch: Any, django_capture_on_commit_callbacks: Any
) -> None:
    from reviewportal.celery import app

    monkeypatch.setitem(app.conf, "task_always_eager", True)
    with django_capture_on_commit_callbacks(execute=True) as callbacks:
        verification, _ = submit(world, {"evidence": [inline("notes", NOTES)]}, None)
        assert not Receipt.objects.filter(verification=verification).exists()  # not before the commit
    # The run is enqueued by exactly one on-commit callback (others count metrics and wake waiters).
    assert [cb for cb in callbacks if "_enqueue" in cb.__code__.co_names] == [callbacks[0]]
    verification.refresh_from_db()
    assert list(Receipt.objects.filter(verification=verification).values_list("seq", flat=True)) == [0]
    assert (verification.attempts, verification.determination) == (1, "met")
    assert view_of(verification, timezone.now())["status"] == "succeeded"
