"""Concurrent appends to one chain are serialized: seq 0..n-1, valid links (SPEC §7)."""

from __future__ import annotations

import threading
from typing import Any

import pytest
from django.db import IntegrityError, connection, transaction

from verification.kernel.verifier import verify_strict
from verification.models import Receipt
from verification.selectors import head_of, proof_for, trusted_keys
from verification.services.receipts import receipt_issue

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
