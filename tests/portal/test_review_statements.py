"""Statements per reviewer action (issue 15: "every reviewer action at a third of Label Studio's time"): the review
page and the decision POST send a constant number of statements to the database, whatever the number of evidence
items bound to the item and of receipts in its chain, on SQLite and on PostgreSQL.

Counted with Django's ``CaptureQueriesContext`` over the whole request (session, user and permissions included),
leaving out the transaction's open and close (inside the test's transaction: SAVEPOINT and RELEASE SAVEPOINT), as
tests/verification/test_query_counts.py does. The bounds are what the requests do now (before issue 15's work on
them, in the same test: review page 22; decision POST 28 on SQLite, 27 on PostgreSQL; the page it redirects to 24;
then 12, 19/18 and 12 before the session's save per request, the second permission read and the view's read of the
decided item went).
"""

from __future__ import annotations

import re
from typing import Any

import pytest
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext

from tests.portal.conftest import Queue
from tests.verification.service_world import CONFIG_AFTER, LOG, NOTES, inline, unchanged_entry
from verification.evidence.models import VerificationEvidence
from verification.reviews.models import ReviewDecision
from verification.reviews.services.claims import review_claim
from verification.runs.models import Verification
from verification.trust.models import Receipt

pytestmark = pytest.mark.django_db

#: The review page of a held item: the session and the user; their permissions (one read: ``PermissionsInOneRead``);
#: the item with its task, submitter, rubric, lease, head and queue facts (membership, a re-run) in one statement; the
#: bindings; the chain; the decisions (these four in one round trip on PostgreSQL: ``compiled.pipelined``); the rails
#: (one statement); the queue's counts (one). No save of the session: it
#: is written when changed or when its idle-expiry would move by more than a minute (reviewportal/sessions.py), no
#: longer on every request. The arrived results are read only for an item with semantic criteria: one more.
REVIEW_PAGE_BOUND = 9
REVIEW_PAGE_SEMANTIC_BOUND = REVIEW_PAGE_BOUND + 1
#: The decision POST (FAIL), which also claims and opens the next item (``claims``' statements, not counted apart):
#: the session, the user and its permissions; the lock and the read after it (replay, lease, head, membership, key:
#: pipelined in one round trip on PostgreSQL; the view reads nothing before them); the rails; the receipt; the head
#: columns; the record and its security-log entry; the lease's end; the event (on PostgreSQL the feed's lock and the
#: INSERT in one statement, no savepoint of its own); the next claim (``claims``: on SQLite statement by statement);
#: the session's save (the review loop's progress changed it).
DECIDE_BOUND = {"sqlite": 17, "postgresql": 15}

_TRANSACTION_CONTROL = ("SAVEPOINT ", "RELEASE SAVEPOINT ", "ROLLBACK TO SAVEPOINT ")
_REQUEST_KEY = re.compile(r'name="request_key" value="([^"]+)"')


def _statements(captured: CaptureQueriesContext) -> list[str]:
    return [q["sql"] for q in captured.captured_queries if not q["sql"].startswith(_TRANSACTION_CONTROL)]


def _item(queue: Queue, evidence: int) -> Verification:
    """An UNKNOWN item (missing baseline) with ``evidence`` items bound."""
    contents = [("config", CONFIG_AFTER), ("notes", NOTES), ("log", LOG)]
    extra = [(f"extra{i}", f"item {i}\n".encode()) for i in range(max(0, evidence - len(contents)))]
    body = {"evidence": [inline(symbol, data) for symbol, data in [*contents, *extra][:evidence]]}
    queue._task(f"{evidence} items")
    queue.world.contract(unchanged_entry())
    verification, _ = queue.world.submit_and_run(body)
    assert VerificationEvidence.objects.filter(verification=verification).count() == evidence
    return queue._done(verification)


def _counted(client: Client, call: Any) -> tuple[Any, list[str]]:
    with CaptureQueriesContext(connection) as captured:
        response = call(client)
    return response, _statements(captured)


def _review_and_decide(reviewer: Any, verification: Verification) -> tuple[list[str], list[str], list[str]]:
    """The statements of the held item's review page, of a FAIL decided from it (which claims the next item), and of
    the next item's page that the decision redirects to."""
    review_claim(user=reviewer, verification=verification)  # a claim, or the renewal of the one "Next item" took
    client = Client()
    client.force_login(reviewer)
    client.get(f"/review/{verification.pk}/")  # a first page: the reviewer's actor is created (once per user)
    page, review = _counted(client, lambda c: c.get(f"/review/{verification.pk}/"))
    assert page.status_code == 200
    key = _REQUEST_KEY.search(page.content.decode())
    assert key is not None
    posted, decide = _counted(
        client,
        lambda c: c.post(
            f"/review/{verification.pk}/decide",
            {"request_key": key.group(1), "verdict": "FAIL", "rationale": "the output does not match"},
        ),
    )
    assert posted.status_code == 302 and "#refusal" not in posted.headers["Location"]
    assert "/review/" in posted.headers["Location"]  # the next item, claimed
    assert ReviewDecision.objects.filter(verification=verification).count() == 1
    after, following = _counted(client, lambda c: c.get(posted.headers["Location"]))
    assert after.status_code == 200 and b"data-progress-last" in after.content
    return review, decide, following


def test_the_review_page_and_the_decision_send_as_many_statements_for_1_and_for_8_evidence_items(
    queue: Queue, reviewer: Any
) -> None:
    one, many = _item(queue, 1), _item(queue, 8)
    queue.unknown("next in line")  # so that each decision below claims and opens a next item
    one_review, one_decide, one_next = _review_and_decide(reviewer, one)  # its "Next item" claims ``many``
    many_review, many_decide, many_next = _review_and_decide(reviewer, many)
    assert len(many_review) == len(one_review) <= REVIEW_PAGE_BOUND, "\n".join(many_review)
    assert len(many_decide) == len(one_decide) <= DECIDE_BOUND[connection.vendor], "\n".join(many_decide)
    # The page a decision redirects to: the review page of the next item.
    assert len(many_next) == len(one_next) <= REVIEW_PAGE_BOUND, "\n".join(many_next)


def test_the_review_page_sends_as_many_statements_for_a_longer_chain(queue: Queue, reviewer: Any) -> None:
    """A grounded semantic judgment appends a result receipt: two receipts against one, one judgment against none
    (the judged item's page also reads its arrived results: one statement more, whatever their number)."""
    plain = queue.unknown("one receipt")
    judged = queue.cited_conflict("two receipts")
    assert Receipt.objects.filter(verification=plain).count() == 1
    assert Receipt.objects.filter(verification=judged).count() == 2
    counts = []
    for verification in (plain, judged):
        review_claim(user=reviewer, verification=verification)
        client = Client()
        client.force_login(reviewer)
        client.get(f"/review/{verification.pk}/")
        page, statements = _counted(client, lambda c, v=verification: c.get(f"/review/{v.pk}/"))
        assert page.status_code == 200
        counts.append(len(statements))
    assert counts[0] <= REVIEW_PAGE_BOUND and counts[1] == counts[0] + 1 <= REVIEW_PAGE_SEMANTIC_BOUND, counts


def test_the_review_page_sends_its_item_bindings_chain_and_decisions_together(
    queue: Queue, reviewer: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The four reads that need only the item's key go in one ``compiled.pipelined`` call (one round trip on
    PostgreSQL; one after the other on SQLite), with the decision rails' read for a reviewer, and the page shows what
    each read."""
    from verification.reviews import item_selectors

    sent: list[list[str]] = []
    real = item_selectors.pipelined

    def spy(*queries: Any) -> Any:
        sent.append([query.name for query, _ in queries])
        return real(*queries)

    monkeypatch.setattr(item_selectors, "pipelined", spy)
    item = _item(queue, 2)
    review_claim(user=reviewer, verification=item)
    client = Client()
    client.force_login(reviewer)
    page = client.get(f"/review/{item.pk}/")
    assert page.status_code == 200
    assert sent == [
        ["review-subject", "review-bindings", "proof-rows", "review-decisions", "cycle-workers-of-verification"]
    ]
    body = page.content.decode()
    assert body.count("data-chain-entry=") == Receipt.objects.filter(verification=item).count()
    for binding in VerificationEvidence.objects.filter(verification=item):
        assert binding.symbol in body


@pytest.mark.postgres
def test_the_review_page_reads_the_rails_with_the_item_in_one_round_trip(
    queue: Queue, reviewer: Any, round_trips: list[str]
) -> None:
    """For a user who may decide, the decision rails' read (the cycle's workers with the reviewer's actor) goes in
    the item's round trip (``review_item_of(reviewer=)``), and its answer is the one ``cycle_workers`` gives."""
    from django.utils import timezone

    from verification.reviews.item_selectors import review_item_of
    from verification.runs.cycle_workers import cycle_workers

    verification = queue.unknown()
    review_claim(user=reviewer, verification=verification)
    client = Client()
    client.force_login(reviewer)
    client.get(f"/review/{verification.pk}/")  # a first page: the reviewer's actor is created (once per user)
    round_trips.clear()
    page = client.get(f"/review/{verification.pk}/")
    assert page.status_code == 200
    sent = list(round_trips)
    # The session; the user with its permissions; the item with its bindings, chain, decisions and the rails' read;
    # the queue's counts. Nothing else.
    assert len(sent) == 4 and sent[1:3] == ["pipeline", "pipeline"], sent
    item = review_item_of(verification.pk, now=timezone.now(), reviewer=reviewer)
    assert item is not None and item.workers is not None
    assert item.workers == cycle_workers(verification.task, verification.cycle, reviewer=reviewer)
    assert review_item_of(verification.pk, now=timezone.now()).workers is None  # only when asked
