"""Sessions that end (issue 11 item 7): deactivation deletes a user's sessions, and a lease is renewed only after the
reviewer did something on the page, so an idle reviewer's lease runs out as configured."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.conf import settings
from django.contrib.sessions.models import Session
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from tests.portal.conftest import Queue
from verification.actors.services import users
from verification.kernel.reasons import Reason
from verification.reviews.models import ReviewLease
from verification.reviews.services.claims import review_claim
from verification.trust.models import SecurityLogEntry

pytestmark = pytest.mark.django_db


def _client(user: Any) -> Client:
    client = Client()
    client.force_login(user)
    return client


def _sessions_of(user: Any) -> list[str]:
    return [s.session_key for s in Session.objects.all() if s.get_decoded().get("_auth_user_id") == str(user.pk)]


def test_a_reactivated_users_old_cookie_does_not_work(queue: Queue, admin_user: Any, reviewer: Any) -> None:
    old = _client(reviewer)
    assert old.get(reverse("portal:queue")).status_code == 200
    cookie = old.cookies[settings.SESSION_COOKIE_NAME].value
    admin = _client(admin_user)
    response = admin.post(
        reverse("adminportal:user-deactivate", args=[reviewer.pk]), {"reason": "left the team", "confirm": "on"}
    )
    assert response.status_code == 302
    assert _sessions_of(reviewer) == [] and not Session.objects.filter(session_key=cookie).exists()
    assert len(_sessions_of(admin_user)) == 1  # only theirs
    entry = SecurityLogEntry.objects.filter(kind="user-deactivate").get()
    assert entry.detail["sessions_ended"] == 1
    reviewer.refresh_from_db()
    assert not reviewer.is_active
    users.user_reactivate(by=admin_user, user=reviewer)
    reviewer.refresh_from_db()
    assert reviewer.is_active
    again = old.get(reverse("portal:queue"))  # the same cookie, after the reactivation
    assert again.status_code == 302 and reverse("login") in again["Location"]
    assert old.cookies[settings.SESSION_COOKIE_NAME].value in ("", cookie)
    assert not Session.objects.filter(session_key=cookie).exists()


def test_deactivating_an_inactive_user_still_ends_a_session_left_over(admin_user: Any, reviewer: Any) -> None:
    leftover = _client(reviewer)  # e.g. a session older than this code
    type(reviewer).objects.filter(pk=reviewer.pk).update(is_active=False)
    reviewer.refresh_from_db()
    done = users.user_deactivate(by=admin_user, user=reviewer, reason="again")
    assert done.sessions_ended == 1 and _sessions_of(reviewer) == []
    assert leftover.cookies[settings.SESSION_COOKIE_NAME].value


# --- the lease follows activity ------------------------------------------------------------------------------------


def _claimed(queue: Queue, reviewer: Any) -> tuple[Any, Client, ReviewLease]:
    item = queue.unknown()
    client = _client(reviewer)
    assert client.post(reverse("portal:claim", args=[item.pk])).status_code == 302
    return item, client, ReviewLease.objects.get(verification=item, holder=reviewer, released_at__isnull=True)


@pytest.mark.parametrize("body", [{}, {"active": "0"}, {"active": "yes"}])
def test_a_renewal_without_activity_is_refused_and_extends_nothing(
    queue: Queue, reviewer: Any, body: dict[str, str]
) -> None:
    item, client, lease = _claimed(queue, reviewer)
    soon = timezone.now() + timedelta(seconds=20)
    ReviewLease.objects.filter(pk=lease.pk).update(expires_at=soon)
    response = client.post(reverse("portal:renew", args=[item.pk]), body)
    assert response.status_code == 409
    assert response.json()["code"] == Reason.REVIEW_LEASE_IDLE.value
    lease.refresh_from_db()
    assert lease.expires_at == soon and lease.released_at is None


def test_an_idle_reviewers_lease_runs_out_and_the_item_returns_to_the_queue(
    queue: Queue, reviewer: Any, reviewer2: Any
) -> None:
    item, client, lease = _claimed(queue, reviewer)
    # The page stayed open and idle: its renewals (if any) said no activity; the lease ran out as configured.
    assert client.post(reverse("portal:renew", args=[item.pk])).json()["code"] == "review-lease-idle"
    ReviewLease.objects.filter(pk=lease.pk).update(expires_at=timezone.now() - timedelta(seconds=1))
    taken = review_claim(user=reviewer2, verification=item)
    assert taken.holder_id == reviewer2.pk
    late = client.post(reverse("portal:renew", args=[item.pk]), {"active": "1"})  # too late, even with activity
    assert late.status_code == 409 and late.json()["code"] == "review-lease-not-held"


def test_a_renewal_after_activity_extends_the_lease(queue: Queue, reviewer: Any) -> None:
    item, client, lease = _claimed(queue, reviewer)
    ReviewLease.objects.filter(pk=lease.pk).update(expires_at=timezone.now() + timedelta(seconds=20))
    response = client.post(reverse("portal:renew", args=[item.pk]), {"active": "1"})
    assert response.status_code == 200
    lease.refresh_from_db()
    assert lease.expires_at > timezone.now() + timedelta(minutes=14)
