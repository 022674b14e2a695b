"""Writes sent together (issue 15; ``compiled.writes_batched``): inside a block, the writes queued through
``compiled.queue`` go to PostgreSQL in one pipelined round trip when the block ends, or before any other statement;
what the block does is what it did statement by statement. A run sends its receipt, head columns and event in one
round trip; a submission its evidence, verification, bindings and flag. In a transaction of their own
(``compiled.atomic_batched``) that round trip carries the COMMIT too."""

from __future__ import annotations

import json
import uuid
from typing import Any

import psycopg
import pytest
from django.db import IntegrityError, connection, connections, transaction
from django.test.utils import CaptureQueriesContext

from tests.verification.service_world import World, digest_entry, inline
from verification.compiled import Insert, atomic_batched, queue, send_unsynced, writes_batched
from verification.kernel.digests import sha256_digest
from verification.runs.models import Event, Verification
from verification.runs.services.run import verification_run
from verification.runs.services.submit import verification_submit
from verification.trust.models import Receipt

pytestmark = pytest.mark.django_db

_EVENTS = Insert(Event)
KIND = "finding.raised"


def _event(n: int) -> Event:
    return Event(kind=KIND, payload={"n": n})


@pytest.mark.postgres
def test_queued_writes_go_together_when_the_block_ends(round_trips: list[str]) -> None:
    with transaction.atomic(), writes_batched():
        first, second = _EVENTS([_event(1)])[0], _EVENTS([_event(2)])[0]
        assert first.id is None and second.id is None  # queued, not sent
        assert round_trips == []
    assert round_trips == ["pipeline"]
    assert first.id is not None and second.id is not None and first.id < second.id  # in the order queued
    payloads = Event.objects.filter(kind=KIND).order_by("id").values_list("payload", flat=True)
    assert list(payloads) == [{"n": 1}, {"n": 2}]


@pytest.mark.postgres
def test_a_read_inside_the_block_sees_every_write_queued_before_it() -> None:
    with transaction.atomic(), writes_batched():
        (event,) = _EVENTS([_event(1)])
        assert Event.objects.filter(kind=KIND).count() == 1  # Django's cursor sends the queue first
        assert event.id is not None
        (later,) = _EVENTS([_event(2)])
        assert later.id is None
    assert Event.objects.filter(kind=KIND).count() == 2


@pytest.mark.postgres
def test_a_write_the_server_refuses_raises_djangos_error_and_nothing_stays() -> None:
    before = Event.objects.count()
    with pytest.raises(IntegrityError), transaction.atomic(), writes_batched():
        _EVENTS([_event(1)])
        queue(connection.alias, "INSERT INTO verification_event (kind) VALUES (NULL)", [], rows=False, then=None)
    assert Event.objects.count() == before


@pytest.mark.postgres
def test_an_exception_caught_inside_the_transaction_keeps_what_was_queued_before_it() -> None:
    with transaction.atomic():
        try:
            with writes_batched():
                _EVENTS([_event(1)])
                raise RuntimeError("after the write")
        except RuntimeError:
            pass
        assert Event.objects.filter(kind=KIND).count() == 1  # as statement by statement


@pytest.mark.postgres
def test_a_savepoint_rolled_back_inside_the_block_undoes_only_what_was_queued_in_it() -> None:
    """Django's ROLLBACK TO SAVEPOINT goes through its cursor, so what was queued inside the savepoint is sent first
    and undone with it; what was queued before it stays, as statement by statement."""
    with transaction.atomic(), writes_batched():
        _EVENTS([_event(1)])
        try:
            with transaction.atomic():
                _EVENTS([_event(2)])
                raise RuntimeError("undo the savepoint")
        except RuntimeError:
            pass
        _EVENTS([_event(3)])
    payloads = Event.objects.filter(kind=KIND).order_by("id").values_list("payload", flat=True)
    assert list(payloads) == [{"n": 1}, {"n": 3}]


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_outside_a_transaction_each_write_goes_at_once() -> None:
    with writes_batched():
        (event,) = _EVENTS([_event(1)])
        assert event.id is not None


def test_on_sqlite_or_anywhere_each_write_goes_at_once_without_a_batch() -> None:
    if connection.vendor == "postgresql":
        pytest.skip("the batch is PostgreSQL's (pipeline mode)")
    with transaction.atomic(), writes_batched():
        (event,) = _EVENTS([_event(1)])
        assert event.id is not None


def _world() -> tuple[World, dict[str, Any]]:
    world = World.build()
    content = b"notes\n"
    world.contract(digest_entry("d", literal=sha256_digest(content), symbol="notes"))
    body = {"evidence": [inline("notes", content)]}
    world.submit_and_run(body)  # the next submission supersedes a verification, as in steady use
    return world, body


@pytest.mark.postgres
def test_a_submission_reads_in_one_round_trip_and_writes_in_another(signing_key: Any, round_trips: list[str]) -> None:
    world, body = _world()
    round_trips.clear()
    verification, created = verification_submit(
        actor=world.agent.actor, token=world.agent.token, task=world.task, body=body, idempotency_key=None
    )
    sent = list(round_trips)
    # The subject's current cycle with its latest verification and the task's contracts, then every row at once:
    # the evidence, the verification, its binding, the superseded one's flag.
    assert created and sent == ["pipeline", "pipeline"], sent
    assert Verification.objects.filter(pk=verification.pk).exists()
    assert not Verification.objects.get(pk=verification.supersedes_id).awaiting_evidence


def _row_version(pk: Any) -> str:
    with connection.cursor() as cursor:
        cursor.execute("SELECT ctid::text FROM verification_verification WHERE id = %s", [pk])
        return str(cursor.fetchone()[0])


@pytest.mark.postgres
def test_a_submission_rewrites_the_superseded_row_only_when_it_was_waiting_for_evidence(signing_key: Any) -> None:
    """Superseding a verification that met its contract leaves its row as it was (no new version of it); one that
    waited for evidence (it did not meet it) waits no more."""
    world, body = _world()
    met = Verification.objects.filter(task=world.task).get()
    assert met.determination == "met" and not met.awaiting_evidence
    before = _row_version(met.pk)
    verification, _ = verification_submit(
        actor=world.agent.actor, token=world.agent.token, task=world.task, body=body, idempotency_key=None
    )
    assert verification.supersedes_id == met.pk and _row_version(met.pk) == before
    world.run(verification)
    failing = {"evidence": [inline("notes", b"other notes\n")]}
    waiting, _ = world.submit_and_run(failing)
    waiting.refresh_from_db()
    assert waiting.determination == "not_met" and waiting.awaiting_evidence
    before = _row_version(waiting.pk)
    again, _ = verification_submit(
        actor=world.agent.actor, token=world.agent.token, task=world.task, body=body, idempotency_key=None
    )
    waiting.refresh_from_db()
    assert again.supersedes_id == waiting.pk and not waiting.awaiting_evidence and _row_version(waiting.pk) != before


def _submit_then_run(world: World, body: dict[str, Any], round_trips: list[str]) -> tuple[Verification, Any, list[str]]:
    """Submit ``body`` to the world's task, then run it: (verification, receipt, the run's round trips alone)."""
    verification, _ = verification_submit(
        actor=world.agent.actor, token=world.agent.token, task=world.task, body=body, idempotency_key=None
    )
    round_trips.clear()
    receipt = verification_run(verification_id=verification.pk)
    return verification, receipt, list(round_trips)


@pytest.mark.postgres
def test_a_run_sends_its_reads_and_its_writes_in_three_round_trips(signing_key: Any, round_trips: list[str]) -> None:
    world, body = _world()
    verification, receipt, sent = _submit_then_run(world, body, round_trips)
    assert receipt is not None and receipt.verdict == "PASS"
    assert Receipt.objects.filter(verification=verification).count() == 1
    assert Event.objects.filter(verification=verification, kind="verification.finished").count() == 1
    assert Verification.objects.get(pk=verification.pk).verdict == "PASS"
    # The attempt's UPDATE (committed on its own), the lock with every read after it (the chain's state, the cycle's
    # workers, the bindings), then the receipt, the head columns and the event.
    assert len(sent) == 3 and sent[1:] == ["pipeline", "pipeline"], sent


@pytest.mark.postgres
def test_a_pending_run_sends_its_read_phases_with_its_other_writes(signing_key: Any, round_trips: list[str]) -> None:
    """A run that leaves a criterion PENDING stores the head's read phases (``read_state.phases_record``): queued with
    the receipt, the head columns and the event, not sent before them in round trips of their own."""
    from tests.verification.service_world import LOG, NOTES, imported_entry
    from verification.runs.models import ReadPhase

    world = World.build()
    world.contract(digest_entry(), imported_entry(deadline_seconds=60, on_expiry="UNKNOWN"))
    body = {"evidence": [inline("notes", NOTES), inline("log", LOG)]}
    world.submit_and_run(body)
    verification, receipt, sent = _submit_then_run(world, body, round_trips)
    assert receipt is not None and receipt.verdict == "PENDING"
    assert ReadPhase.objects.filter(verification=verification).count() >= 1  # its phases were stored
    assert len(sent) == 3 and sent[1:] == ["pipeline", "pipeline"], sent


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_an_unsynced_statement_commits_on_its_own_without_waiting_for_the_disk() -> None:
    """``send_unsynced`` (a run's attempt count): its own transaction with ``synchronous_commit`` off, visible at once;
    the setting does not outlive it."""
    rows = send_unsynced(connection.alias, "SELECT current_setting('synchronous_commit')", [])
    assert rows == [("off",)]
    with connection.cursor() as cursor:
        cursor.execute("SHOW synchronous_commit")
        assert cursor.fetchone() == ("on",)
    inserted = send_unsynced(
        connection.alias,
        "INSERT INTO verification_event (kind, payload, created_at) VALUES (%s, '{}', now()) RETURNING id",
        [KIND],
    )
    assert inserted is not None and Event.objects.filter(pk=inserted[0][0]).exists()  # committed: another read sees it


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_an_unsynced_statement_leaves_nothing_in_the_server_log() -> None:
    """The setting is made without a notice: ``SET LOCAL`` outside ``BEGIN`` made the server log a WARNING ("SET LOCAL
    can only be used in transaction blocks") for every run's attempt."""
    connection.ensure_connection()
    notices: list[str] = []
    pg = connection.connection

    def heard(diagnostic: Any) -> None:
        notices.append(f"{diagnostic.severity}: {diagnostic.message_primary}")

    pg.add_notice_handler(heard)
    try:
        with connection.cursor() as cursor:  # the handler hears what the server says (checked, so this test can fail)
            cursor.execute("DO $$ BEGIN RAISE WARNING 'heard'; END $$")
        assert notices == ["WARNING: heard"]
        notices.clear()
        assert send_unsynced(connection.alias, "SELECT current_setting('synchronous_commit')", []) == [("off",)]
    finally:
        pg.remove_notice_handler(heard)
    assert notices == []


@pytest.mark.postgres
def test_inside_a_transaction_an_unsynced_statement_is_left_to_the_caller() -> None:
    with transaction.atomic():
        assert send_unsynced(connection.alias, "SELECT 1", []) is None
        with connection.cursor() as cursor:
            cursor.execute("SHOW synchronous_commit")
            assert cursor.fetchone() == ("on",)


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_the_statement_that_opens_a_transaction_goes_with_its_begin(round_trips: list[str]) -> None:
    from verification.compiled import send

    connection.ensure_connection()  # a new connection's own setup is not what is counted
    round_trips.clear()
    with transaction.atomic():
        send(connection.alias, "SELECT 1", [], prepared=True, rows=True)
        sent = list(round_trips)
        send(connection.alias, "SELECT 2", [], prepared=True, rows=True)
    assert sent == ["pipeline"]  # BEGIN and SELECT 1 together
    assert round_trips[1:] == ["SELECT 2", "COMMIT"]  # the transaction is open: the statement alone; then COMMIT
    with transaction.atomic():  # an UPDATE that opens its transaction answers its count of rows, as alone
        Event.objects.create(kind=KIND, payload={})
    from verification.runs.models import Task

    Task.objects.create(title="counted")
    for changed in (False, True):
        with transaction.atomic():
            sql = "UPDATE verification_task SET title = title WHERE %s"
            assert send(connection.alias, sql, [changed], prepared=True, rows=False) == int(changed)
    with transaction.atomic():
        assert send(connection.alias, "SELECT count(*) FROM verification_event", [], prepared=True, rows=True) == [(1,)]


# --- the writes with the COMMIT (``atomic_batched``) ------------------------------------------------------------------


def _committed_events() -> list[Any]:
    """The events' payloads as another connection reads them: only what was committed."""
    other = connections.create_connection(connection.alias)
    try:
        with other.cursor() as cursor:
            cursor.execute("SELECT payload FROM verification_event WHERE kind = %s ORDER BY id", [KIND])
            return [row[0] if isinstance(row[0], dict) else json.loads(row[0]) for row in cursor]
    finally:
        other.close()


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_a_transactions_writes_go_with_its_commit_in_one_round_trip(round_trips: list[str]) -> None:
    connection.ensure_connection()
    round_trips.clear()
    ran: list[str] = []
    with atomic_batched():
        transaction.on_commit(lambda: ran.append("committed"))
        _EVENTS([_event(1)])
        _EVENTS([_event(2)])
        assert round_trips == []
    assert round_trips == ["pipeline"]  # BEGIN, both INSERTs and the COMMIT: no COMMIT of its own
    assert connection.connection.info.transaction_status == psycopg.pq.TransactionStatus.IDLE
    assert ran == ["committed"]  # the ORM's hooks ran, as after its own commit
    assert _committed_events() == [{"n": 1}, {"n": 2}]


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_a_commit_the_server_refuses_raises_and_keeps_nothing() -> None:
    """A foreign key is checked at COMMIT (deferred): the refusal comes in the batch's round trip, as Django's
    error; the transaction is rolled back, its hooks dropped, and the connection goes on."""
    ran: list[str] = []
    with pytest.raises(IntegrityError), atomic_batched():
        transaction.on_commit(lambda: ran.append("committed"))
        _EVENTS([_event(1)])
        queue(
            connection.alias,
            "INSERT INTO verification_event (kind, verification_id, payload, created_at) "
            "VALUES (%s, %s, '{}', now())",
            [KIND, uuid.uuid4()],  # no such verification
            rows=False,
            then=None,
        )
    assert ran == []
    assert _committed_events() == []
    assert Event.objects.filter(kind=KIND).count() == 0  # the connection is usable
    assert not connection.in_atomic_block


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_a_transaction_marked_for_rollback_is_not_committed_with_its_writes() -> None:
    with atomic_batched():
        _EVENTS([_event(1)])
        try:
            with transaction.atomic(savepoint=False):  # its failure dooms the whole transaction
                raise RuntimeError("inside")
        except RuntimeError:
            pass
    assert _committed_events() == []


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_inside_another_transaction_the_writes_wait_for_its_commit(round_trips: list[str]) -> None:
    connection.ensure_connection()
    with transaction.atomic():
        with atomic_batched():
            _EVENTS([_event(1)])
        assert connection.connection.info.transaction_status == psycopg.pq.TransactionStatus.INTRANS
        assert Event.objects.filter(kind=KIND).count() == 1  # sent when the block ended
        transaction.set_rollback(True)
    assert "COMMIT" not in round_trips
    assert _committed_events() == []


@pytest.mark.django_db(transaction=True)
def test_on_any_database_a_batched_transaction_commits_as_atomic_does() -> None:
    ran: list[str] = []
    with atomic_batched():
        transaction.on_commit(lambda: ran.append("committed"))
        _EVENTS([_event(1)])
    assert ran == ["committed"]
    assert list(Event.objects.filter(kind=KIND).values_list("payload", flat=True)) == [{"n": 1}]
    with pytest.raises(RuntimeError), atomic_batched():
        _EVENTS([_event(2)])
        raise RuntimeError("undo")
    assert Event.objects.filter(kind=KIND).count() == 1


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_a_submission_and_its_run_commit_with_their_writes(
    signing_key: Any, round_trips: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """In their own transactions, as the API and the worker call them: a submission is two round trips, a run three,
    neither with a COMMIT of its own."""
    from verification.runs.services import submit

    world, body = _world()
    monkeypatch.setattr(submit, "_enqueue", lambda verification_id: None)  # the run is called below, not on commit
    round_trips.clear()
    verification, created = verification_submit(
        actor=world.agent.actor, token=world.agent.token, task=world.task, body=body, idempotency_key=None
    )
    submitted = list(round_trips)
    round_trips.clear()
    receipt = verification_run(verification_id=verification.pk)
    ran = list(round_trips)
    assert created and submitted == ["pipeline", "pipeline"], submitted
    # The attempt (its own transaction), the lock with every read, then the writes with the COMMIT.
    assert ran == ["pipeline", "pipeline", "pipeline"], ran
    assert receipt is not None and receipt.verdict == "PASS"
    assert Verification.objects.get(pk=verification.pk).verdict == "PASS"
    assert Receipt.objects.filter(verification=verification).count() == 1


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_a_late_result_commits_with_its_writes(signing_key: Any, round_trips: list[str]) -> None:
    """``result_deliver`` in its own transaction, as the API calls it: the ``result`` receipt, the head columns and
    the event go with the COMMIT (the run's twin), not as statements of their own before it."""
    from datetime import timedelta

    from django.utils import timezone

    from tests.verification.service_world import LOG, NOTES, imported_entry
    from verification.runs.services.results import result_deliver

    world = World.build()
    world.contract(digest_entry(), imported_entry(deadline_seconds=60, on_expiry="UNKNOWN"))
    start = timezone.now()
    verification, run = world.submit_and_run({"evidence": [inline("notes", NOTES), inline("log", LOG)]}, now=start)
    round_trips.clear()
    with CaptureQueriesContext(connection) as captured:
        receipt = result_deliver(
            actor=world.external.actor,
            token=world.external.token,
            verification=verification,
            criterion_id="ext-scan",
            body={"criterion": "ext-scan", "verdict": "PASS", "detail": "clean", "evidence": ["log"]},
            now=start + timedelta(seconds=1),
        )
    sent = list(round_trips)
    # No savepoint: the receipt is issued in the delivery's transaction (a savepoint's RELEASE sent it alone).
    assert not [q["sql"] for q in captured.captured_queries if "SAVEPOINT" in q["sql"]]
    assert (receipt.seq, receipt.kind, receipt.prev_hash) == (1, "result", run.content_hash)
    assert Receipt.objects.filter(verification=verification).count() == 2
    assert Event.objects.filter(verification=verification, kind="result.received").count() == 1
    assert Verification.objects.get(pk=verification.pk).verdict == receipt.verdict
    assert "COMMIT" not in sent and sent[-1] == "pipeline", sent  # the writes and the COMMIT: one round trip
    alone = (
        'INSERT INTO "verification_receipt"',
        'UPDATE "verification_verification"',
        'INSERT INTO "verification_event"',
    )
    # None of them sent on its own: a flush of one queued write before a read counts as that statement, not as a
    # pipeline (tests/conftest.py's round_trips), so the head's phases and the outcome's gates are not in between.
    assert not any(s.startswith(alone) for s in sent), sent
    # The lock with the reads after it (the run's: gates, workers, bindings; the head and the criterion's arrived
    # result) in one round trip, the receipt signed on that locked chain; in all 6 round trips (21 before: the fact
    # reads one by one, the chain locked again, a savepoint, the writes flushed early).
    assert sent[0] == "pipeline" and len(sent) == 6, sent
