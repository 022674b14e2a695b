"""What one "Next item" claim sends to the database (issue 15): a fixed number of statements, on both databases.

PostgreSQL: the claim (pick with SKIP LOCKED, lease, security-log entry: one data-modifying ``WITH``) and the rails'
SQL form on the lease just taken, pipelined in one round trip, then COMMIT. SQLite: the pick, the judgement, the lease
and the entry, one after the other in the IMMEDIATE transaction. The exact rails (``cycle_workers``) are read only
where the SQL form cannot vouch for the candidate, or where it does not judge (a PostgreSQL connection that prepares
nothing): then they decide every candidate, and barred items are still never leased.
"""

from __future__ import annotations

from typing import Any

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from tests.portal.conftest import Queue
from verification.actors.models import Actor
from verification.actors.services.actors import actor_for_user
from verification.reviews.models import ReviewLease
from verification.reviews.services import claims
from verification.reviews.services.claims import review_claim_next_id
from verification.runs.models import Claim
from verification.trust.models import SecurityLogEntry

pytestmark = pytest.mark.django_db

#: The test's own transaction: Django's savepoints around each atomic block inside it, not the claim's statements.
_BOOKKEEPING = ("SAVEPOINT", "RELEASE SAVEPOINT", "ROLLBACK TO SAVEPOINT")


def _statements(queries: CaptureQueriesContext) -> list[str]:
    """Each statement sent, savepoints left out."""
    sent = [q["sql"].lstrip() for q in queries.captured_queries]
    return [sql for sql in sent if not sql.upper().startswith(_BOOKKEEPING)]


def _first_words(sent: list[str]) -> list[str]:
    return [sql.split()[0].upper() for sql in sent]


def _claim_counted(queue: Queue, reviewer: Any) -> tuple[Any, list[str]]:
    """The second of two claims (the first compiles the queries: no statement either way), with the statements it
    sent."""
    first, second = queue.unknown("first"), queue.unknown("second")
    actor_for_user(reviewer)  # a claimer with an actor (a first claim creates it: one more statement, once)
    assert review_claim_next_id(user=reviewer) == first.pk
    with CaptureQueriesContext(connection) as queries:
        got = review_claim_next_id(user=reviewer)
    assert got == second.pk
    assert ReviewLease.objects.get(verification=second).holder == reviewer
    assert SecurityLogEntry.objects.filter(kind="claim", user=reviewer, target=str(second.pk)).count() == 1
    return got, _statements(queries)


def test_one_next_item_claim_sends_a_fixed_number_of_statements(queue: Queue, reviewer: Any) -> None:
    _, sent = _claim_counted(queue, reviewer)
    if connection.vendor == "postgresql":
        assert _first_words(sent) == ["WITH", "SELECT"]  # the claim and its judgement, pipelined
    else:
        assert _first_words(sent) == ["SELECT", "SELECT", "INSERT", "INSERT"]  # pick, judgement, lease, entry
    assert "claim_refused" in sent[1] and "w_src" not in "".join(sent)  # the judgement, not the rails' workers


def test_where_the_sql_form_does_not_judge_the_exact_rails_decide_every_candidate(
    queue: Queue, reviewer: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """As on a PostgreSQL connection that prepares no statement (``claim_sql.judge_in_sql``): no judgement is sent,
    the exact rails read the candidate's workers (one more statement) and decide; an item the reviewer worked on is
    still passed over and never leased."""
    monkeypatch.setattr(claims, "judge_in_sql", lambda: False)
    _, sent = _claim_counted(queue, reviewer)
    assert "w_src" in sent[1] and "claim_refused" not in "".join(sent)  # the rails' workers, no judgement
    if connection.vendor == "postgresql":
        assert _first_words(sent) == ["WITH", "(SELECT"]  # the claim, then the rails' one query (a UNION ALL)
    else:
        assert _first_words(sent) == ["SELECT", "SELECT", "INSERT", "INSERT"]  # pick, the rails' query, lease, entry
    own = queue.self_review_trap(reviewer, title="own work")
    assert review_claim_next_id(user=reviewer) is None
    assert not ReviewLease.objects.filter(verification=own).exists()
    assert not SecurityLogEntry.objects.filter(kind="claim", target=str(own.pk)).exists()


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_outside_a_transaction_a_claim_is_begin_statements_commit_and_nothing_barred_is_kept(
    queue: Queue, reviewer: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """As a request claims (no transaction block open): BEGIN, the claim and its judgement in one round trip, then
    COMMIT. An item the SQL form bars, and one it cannot vouch for that the exact rails refuse, are rolled back: no
    lease, no log entry; the plain item after them is leased."""
    from tests.reviews.test_claim_filter import _count_rails

    first, second = queue.unknown("first"), queue.unknown("second")
    actor_for_user(reviewer)
    assert review_claim_next_id(user=reviewer) == first.pk
    with CaptureQueriesContext(connection) as queries:
        assert review_claim_next_id(user=reviewer) == second.pk
    assert _first_words(_statements(queries)) == ["WITH", "SELECT"]  # BEGIN and COMMIT sent by hand, not logged
    assert ReviewLease.objects.get(verification=second).holder == reviewer

    barred = queue.self_review_trap(reviewer, title="own work")
    odd = queue.unknown("a claimant named by a tab")
    Claim.objects.create(task=odd.task, cycle=odd.cycle, actor=Actor.objects.create(name="\t", kind="agent"))
    plain = queue.unknown("plain")
    runs = _count_rails(monkeypatch)
    assert review_claim_next_id(user=reviewer) == plain.pk
    assert runs == [odd.task_id]  # the exact rails ran on the item the SQL form could not vouch for, only
    for item in (barred, odd):
        assert not ReviewLease.objects.filter(verification=item).exists()
        assert not SecurityLogEntry.objects.filter(kind="claim", target=str(item.pk)).exists()
    assert SecurityLogEntry.objects.filter(kind="claim", user=reviewer, target=str(plain.pk)).count() == 1
