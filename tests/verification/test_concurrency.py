"""Concurrent appends to one chain are serialized: seq 0..n-1, valid links (SPEC §7)."""

from __future__ import annotations

import threading
from typing import Any

import pytest
from django.db import IntegrityError, connection, transaction

from verification.kernel.verifier import verify_strict
from verification.trust.models import Receipt
from verification.trust.selectors import head_of, proof_for, trusted_keys
from verification.trust.services.receipts import receipt_issue

THREADS = 8
PER_THREAD = 6


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_eight_threads_appending_to_one_chain_produce_a_valid_chain(signing_key: Any, make_verification: Any) -> None:
    verification = make_verification()
    start = threading.Barrier(THREADS)
    errors: list[BaseException] = []

    def append(thread: int) -> None:
        try:
            start.wait(timeout=30)
            for n in range(PER_THREAD):
                receipt_issue(verification=verification, kind="run", payload={"thread": thread, "n": n})
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)
        finally:
            connection.close()

    workers = [threading.Thread(target=append, args=(i,)) for i in range(THREADS)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(timeout=120)
    assert not errors, errors
    receipts = list(Receipt.objects.filter(verification=verification).order_by("seq"))
    assert [r.seq for r in receipts] == list(range(THREADS * PER_THREAD))
    assert [r.prev_hash for r in receipts] == [None] + [r.content_hash for r in receipts[:-1]]
    head = head_of(verification)
    assert head is not None
    report = verify_strict(
        proof_for(verification),
        keys=trusted_keys("proof-signing"),
        trusted_head=head.content_hash,
        expected_verification_id=str(verification.id),
        expected_submission_hash=verification.submission_hash,
    )
    assert report.entries_verified == THREADS * PER_THREAD


def test_the_database_refuses_a_second_receipt_at_the_same_seq(chain: tuple[Any, list[Any]]) -> None:
    """The unique (verification, seq) constraint backs the row lock up."""
    verification, receipts = chain
    duplicate = Receipt(
        content_hash="f" * 64,
        verification=verification,
        seq=1,
        key_id=receipts[1].key_id,
        prev_hash=receipts[0].content_hash,
        signature=receipts[1].signature,
        envelope=receipts[1].envelope,
        created_at=receipts[1].created_at,
        kind="run",
    )
    with pytest.raises(IntegrityError), transaction.atomic():
        duplicate.save()
    assert Receipt.objects.filter(verification=verification).count() == 3


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_an_append_that_waited_for_the_lock_sees_the_receipt_committed_meanwhile(
    signing_key: Any, make_verification: Any
) -> None:
    """The head is read after the lock is granted, by a statement with its own snapshot (never a stale head)."""
    verification = make_verification()
    first_inside = threading.Event()
    release_first = threading.Event()
    results: dict[str, Any] = {}

    def first() -> None:
        try:
            with transaction.atomic():
                results["first"] = receipt_issue(verification=verification, kind="run", payload={"n": 1})
                first_inside.set()
                release_first.wait(timeout=30)  # hold the row lock while the second append waits for it
        except BaseException as exc:  # noqa: BLE001 - reported below
            results["first_error"] = exc
        finally:
            first_inside.set()
            connection.close()

    def second() -> None:
        try:
            results["second"] = receipt_issue(verification=verification, kind="run", payload={"n": 2})
        except BaseException as exc:  # noqa: BLE001 - reported below
            results["second_error"] = exc
        finally:
            connection.close()

    one = threading.Thread(target=first)
    one.start()
    assert first_inside.wait(timeout=30)
    two = threading.Thread(target=second)
    two.start()
    two.join(timeout=0.5)
    assert two.is_alive(), "the second append must wait for the first one's lock"
    release_first.set()
    one.join(timeout=30)
    two.join(timeout=30)
    assert "first_error" not in results and "second_error" not in results, results
    assert results["second"].seq == 1
    assert results["second"].prev_hash == results["first"].content_hash
