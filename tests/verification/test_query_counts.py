"""Queries per verification (issue 15): a constant, whatever the number of evidence items.

``verification_submit`` and ``verification_run`` of a digest rubric with 1 and with 10 inline evidence items (one
digest criterion per item) send the same number of statements to the database, counted with Django's
``CaptureQueriesContext`` (every statement, statements sent past the ORM's cursor included), on SQLite and on
PostgreSQL. The issue's count leaves out the transaction's open and close (BEGIN/COMMIT in production; here, inside
the test's transaction, the SAVEPOINT and RELEASE SAVEPOINT standing for them), so the test does too; every other
statement counts. The bounds are what the pipeline does now (was 15/51 and 35/44 for 1/10 items, then 6 and 24, then
6 and 9): the submit's 6 statements (the issue's 6 met), the run's 8 (the issue's 10 met: see RUN_BOUND).
"""

from __future__ import annotations

from typing import Any

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from tests.verification.service_world import World, digest_entry, inline
from verification.evidence.models import VerificationEvidence
from verification.kernel.digests import sha256_digest
from verification.runs.services.run import verification_run
from verification.runs.services.submit import verification_submit
from verification.runs.services.tasks import task_create
from verification.trust.models import Receipt

pytestmark = pytest.mark.django_db

#: Statements of ``verification_submit``, the transaction's open and close left out.
SUBMIT_BOUND = 6
#: Statements of ``verification_run`` on both databases, the transaction's open and close left out: the attempt's
#: UPDATE, the locking SELECT, the post-lock SELECT (chain, key, gates), the cycle's workers (one statement: claims,
#: submitters, links, boundaries, contract, current cycle), the bindings, the receipt's INSERT, the head's UPDATE, the
#: event's INSERT (with the feed's lock). No read phases' DELETE: seq 0 is the first head, and only a head writes them.
RUN_BOUND = 8

#: The transaction's open and close as ``CaptureQueriesContext`` sees them inside the test's transaction.
_TRANSACTION_CONTROL = ("SAVEPOINT ", "RELEASE SAVEPOINT ", "ROLLBACK TO SAVEPOINT ")


def _statements(captured: CaptureQueriesContext) -> list[str]:
    return [q["sql"] for q in captured.captured_queries if not q["sql"].startswith(_TRANSACTION_CONTROL)]


def _counts(world: World, items: int) -> tuple[int, int, Any, Any]:
    contents = [f"item {i}\n".encode() for i in range(items)]
    world.contract(*[digest_entry(f"d{i}", literal=sha256_digest(c), symbol=f"e{i}") for i, c in enumerate(contents)])
    body = {"evidence": [inline(f"e{i}", c) for i, c in enumerate(contents)]}
    world.submit_and_run(body)  # a verification before: the next one supersedes it, as in steady use
    with CaptureQueriesContext(connection) as submitted:
        verification, created = verification_submit(
            actor=world.agent.actor, token=world.agent.token, task=world.task, body=body, idempotency_key=None
        )
    assert created and VerificationEvidence.objects.filter(verification=verification).count() == items
    with CaptureQueriesContext(connection) as ran:
        receipt = verification_run(verification_id=verification.pk)
    assert receipt is not None and receipt.verdict == "PASS"
    assert Receipt.objects.filter(verification=verification).count() == 1
    return len(_statements(submitted)), len(_statements(ran)), ran, submitted


def test_submit_and_run_send_the_same_number_of_queries_for_1_and_10_items(signing_key: Any) -> None:
    world = World.build()
    one_submit, one_run, _, sub = _counts(world, 1)
    world.task = task_create(actor=world.owner.actor, title="ten items")
    ten_submit, ten_run, ran, _ = _counts(world, 10)
    shown = "\n".join(sql[:120] for sql in _statements(ran))
    assert (one_submit, one_run) == (ten_submit, ten_run), shown
    assert one_submit <= SUBMIT_BOUND, "\n".join(sql[:100] for sql in _statements(sub))
    assert one_run <= RUN_BOUND, shown
