"""Writes sent together (issue 15; ``compiled.writes_batched``): inside a block, the writes queued through
``compiled.queue`` go to PostgreSQL in one pipelined round trip when the block ends, or before any other statement;
what the block does is what it did statement by statement. A run sends its receipt, head columns and event in one
round trip; a submission its evidence, verification, bindings and flag."""

from __future__ import annotations

from typing import Any

import pytest
from django.db import IntegrityError, connection, transaction

from tests.verification.service_world import World, digest_entry, inline
from verification.compiled import Insert, queue, send_unsynced, writes_batched
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


@pytest.mark.postgres
def test_a_run_sends_its_reads_and_its_writes_in_three_round_trips(signing_key: Any, round_trips: list[str]) -> None:
    world, body = _world()
    verification, _ = verification_submit(
        actor=world.agent.actor, token=world.agent.token, task=world.task, body=body, idempotency_key=None
    )
    round_trips.clear()
    receipt = verification_run(verification_id=verification.pk)
    sent = list(round_trips)
    assert receipt is not None and receipt.verdict == "PASS"
    assert Receipt.objects.filter(verification=verification).count() == 1
    assert Event.objects.filter(verification=verification, kind="verification.finished").count() == 1
    assert Verification.objects.get(pk=verification.pk).verdict == "PASS"
    # The attempt's UPDATE (committed on its own), the lock with every read after it (the chain's state, the cycle's
    # workers, the bindings), then the receipt, the head columns and the event.
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
    assert round_trips[1:] == ["SELECT 2"]  # the transaction is open: the statement alone
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
