"""Claiming queue items with a lease (issue 5 §2): atomic, exclusive, renewable, ended by decision, release or expiry.

The PostgreSQL tests race real threads (each its own connection) through ``review_claim_next``'s
``SELECT … FOR UPDATE SKIP LOCKED`` and conditional upsert: no item is ever held twice.
"""

from __future__ import annotations

import threading
from collections import Counter
from datetime import timedelta
from typing import Any

import pytest
from django.contrib.auth.models import Group
from django.db import connection
from django.utils import timezone

from tests.portal.conftest import PASSWORD, Queue, ensure_roles
from verification.errors import ServiceError
from verification.kernel.reasons import Reason
from verification.reviews.models import ReviewLease
from verification.reviews.selectors import claimable, queue_items
from verification.reviews.services.claims import (
    lease_duration,
    review_claim,
    review_claim_next,
    review_release,
    review_renew,
)
from verification.runs.models import Verification

pytestmark = pytest.mark.django_db


def test_next_item_claims_the_first_unclaimed_item_in_queue_order(queue: Queue, reviewer: Any, reviewer2: Any) -> None:
    unknown = queue.unknown()
    mismatch = queue.mismatch()
    assert review_claim_next(user=reviewer) == mismatch  # MISMATCH first
    assert review_claim_next(user=reviewer2) == unknown  # the first is held: the next one
    assert review_claim_next(user=reviewer2) is None  # nothing unclaimed is left
    lease = ReviewLease.objects.get(verification=mismatch)
    assert lease.holder == reviewer and lease.released_at is None
    assert lease.expires_at - lease.claimed_at == lease_duration() == timedelta(minutes=15)


def test_a_lease_ends_on_expiry(queue: Queue, reviewer: Any, reviewer2: Any) -> None:
    item = queue.unknown()
    now = timezone.now()
    assert review_claim_next(user=reviewer, now=now) == item
    assert review_claim_next(user=reviewer2, now=now + timedelta(minutes=14)) is None
    later = now + timedelta(minutes=15, seconds=1)
    assert item in claimable(now=later)
    assert review_claim_next(user=reviewer2, now=later) == item
    assert ReviewLease.objects.get(verification=item).holder == reviewer2
    with pytest.raises(ServiceError) as info:
        review_renew(user=reviewer, verification=item, now=later)
    assert info.value.reason is Reason.REVIEW_LEASE_NOT_HELD


def test_a_lease_ends_on_release_and_is_renewable_while_held(queue: Queue, reviewer: Any, reviewer2: Any) -> None:
    item = queue.unknown()
    now = timezone.now()
    review_claim(user=reviewer, verification=item, now=now)
    renewed = review_renew(user=reviewer, verification=item, now=now + timedelta(minutes=10))
    assert renewed.expires_at == now + timedelta(minutes=25)
    assert review_claim_next(user=reviewer2, now=now + timedelta(minutes=20)) is None
    assert review_release(user=reviewer2, verification=item) is False  # not theirs to release
    assert review_release(user=reviewer, verification=item) is True
    assert review_release(user=reviewer, verification=item) is False  # idempotent
    assert review_claim_next(user=reviewer2) == item


def test_claiming_a_held_item_is_refused_and_claiming_it_again_renews(
    queue: Queue, reviewer: Any, reviewer2: Any
) -> None:
    item = queue.unknown()
    now = timezone.now()
    review_claim(user=reviewer, verification=item, now=now)
    with pytest.raises(ServiceError) as info:
        review_claim(user=reviewer2, verification=item, now=now)
    assert info.value.reason is Reason.REVIEW_LEASE_NOT_HELD
    again = review_claim(user=reviewer, verification=item, now=now + timedelta(minutes=5))
    assert again.holder == reviewer and again.expires_at == now + timedelta(minutes=20)


def test_only_queue_items_can_be_claimed(queue: Queue, reviewer: Any) -> None:
    clean = queue.clean_pass()
    with pytest.raises(ServiceError) as info:
        review_claim(user=reviewer, verification=clean)
    assert info.value.reason is Reason.NOT_IN_REVIEW_QUEUE
    assert review_claim_next(user=reviewer) is None
    assert not ReviewLease.objects.exists()


def test_the_lease_length_is_configurable(queue: Queue, reviewer: Any, settings: Any) -> None:
    settings.REVIEWPORTAL_LEASE_SECONDS = 120
    item = queue.unknown()
    review_claim_next(user=reviewer)
    lease = ReviewLease.objects.get(verification=item)
    assert lease.expires_at - lease.claimed_at == timedelta(seconds=120)


def _race(reviewers: list[Any]) -> list[Any]:
    """Every reviewer claims the next item at the same instant, each on its own connection."""
    start = threading.Barrier(len(reviewers))
    results: list[Any] = [None] * len(reviewers)

    def claim(index: int) -> None:
        try:
            start.wait(timeout=30)
            got = review_claim_next(user=reviewers[index])
            results[index] = got.pk if got is not None else None
        except BaseException as exc:  # noqa: BLE001 - reported by the assertions
            results[index] = exc
        finally:
            connection.close()

    threads = [threading.Thread(target=claim, args=(i,)) for i in range(len(reviewers))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    errors = [r for r in results if isinstance(r, BaseException)]
    assert not errors, errors
    return results


def _reviewers(django_user_model: Any, n: int) -> list[Any]:
    ensure_roles()
    group = Group.objects.get(name="reviewer")
    users = []
    for i in range(n):
        user = django_user_model.objects.create_user(username=f"reviewer-{i:02d}", password=PASSWORD)
        user.groups.add(group)
        users.append(user)
    return users


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("items", [30, 8])
def test_twenty_reviewers_claiming_at_once_never_hold_the_same_item(
    queue: Queue, django_user_model: Any, items: int
) -> None:
    made = [queue.unknown(f"item {i}") for i in range(items)]
    reviewers = _reviewers(django_user_model, 20)
    results = _race(reviewers)
    claimed = [r for r in results if r is not None]
    assert len(claimed) == min(20, items)  # SKIP LOCKED: nobody waits on another's candidate, nobody goes empty-handed
    assert len(set(claimed)) == len(claimed), Counter(claimed).most_common(3)
    leases = {lease.verification_id: lease.holder_id for lease in ReviewLease.objects.all()}
    assert len(leases) == len(claimed)
    for reviewer, got in zip(reviewers, results, strict=True):
        if got is not None:
            assert leases[got] == reviewer.pk
    # In queue order: the oldest items went first.
    in_order = list(queue_items(now=timezone.now()).values_list("pk", flat=True))
    assert set(claimed) == set(in_order[: len(claimed)])
    assert set(claimed) <= {v.pk for v in made}
    assert Verification.objects.count() == items


def test_next_item_keeps_going_past_many_lost_races(
    queue: Queue, reviewer: Any, reviewer2: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each lost race is another reviewer's claim; "Next item" answers None only when no candidate is left.

    The claim statement by statement (SQLite's, and PostgreSQL's when the claim query cannot be compiled once): the
    rival's lease is committed between the pick and the upsert. The one-statement claim is raced below."""
    from verification.reviews.services import claims as reviews
    from verification.trust.models import SecurityLogEntry

    monkeypatch.setattr(reviews, "_claim_sql", lambda: None)  # the query compiled each time: statement by statement
    items = [queue.unknown() for _ in range(13)]
    real_take = reviews._take_lease
    lost: list[Any] = []

    def rival_wins(pk: Any, user: Any, now: Any) -> bool:
        if user == reviewer and len(lost) < 12:  # reviewer2 commits its lease on this candidate first
            assert real_take(pk, reviewer2, now)
            lost.append(pk)
            return real_take(pk, user, now)  # the conditional upsert changes nothing: lost
        return real_take(pk, user, now)

    monkeypatch.setattr(reviews, "_take_lease", rival_wins)
    got = review_claim_next(user=reviewer)
    assert len(lost) == 12 and len(set(lost)) == 12  # more than the old 8 attempts, never the same item twice
    assert got is not None and got not in lost and got in items
    assert ReviewLease.objects.get(verification=got).holder == reviewer
    assert SecurityLogEntry.objects.filter(kind="claim", user=reviewer, target=str(got.pk)).count() == 1
    assert review_claim_next(user=reviewer) is None  # now nothing unclaimed is left


@pytest.mark.postgres
def test_the_one_statement_claim_writes_nothing_when_its_candidate_is_held(
    queue: Queue, reviewer: Any, reviewer2: Any
) -> None:
    """PostgreSQL claims in one statement: pick with SKIP LOCKED, upsert the lease, log the lease taken. When the
    candidate turns out to be held (a rival committed its lease after the statement's snapshot: here the pick is
    pointed at a held item, as that stale snapshot would see it), the upsert changes nothing, so the statement writes
    no lease and no log entry and answers "lost"; "Next item" then takes the next candidate."""
    from verification.reviews.services import claims as reviews
    from verification.trust.models import SecurityLogEntry

    first, second = queue.unknown("first"), queue.unknown("second")
    assert reviews._claim_sql() is not None  # what review_claim_next runs here is the one-statement claim
    now = timezone.now()
    assert reviews._take_lease(first.pk, reviewer2, now)  # the rival's lease, committed
    held = ReviewLease.objects.get(verification=first)
    stale_pick, params = Verification.objects.filter(pk=first.pk).values_list("pk")[:1].query.sql_with_params()
    assert reviews._claim_in_one_statement(reviewer, now, (stale_pick, tuple(params), ())) == (first.pk, False)
    after = ReviewLease.objects.get(verification=first)
    assert (after.holder_id, after.claimed_at, after.expires_at) == (held.holder_id, held.claimed_at, held.expires_at)
    assert not SecurityLogEntry.objects.filter(kind="claim").exists()

    assert review_claim_next(user=reviewer) == second
    entries = SecurityLogEntry.objects.filter(kind="claim").values_list(
        "user_id", "target", "actor_label", "ip_address", "detail"
    )
    assert list(entries) == [(reviewer.pk, str(second.pk), f"user: {reviewer.get_username()}", None, {})]
    assert review_claim_next(user=reviewer) is None
