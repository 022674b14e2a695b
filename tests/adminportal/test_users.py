"""Users and tokens (issue 7 §3): create users and set roles; deactivating a user releases their leases and revokes
their API tokens at once; tokens are shown once, listed with actor, boundary and scopes, and revoked."""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.test import Client
from django.urls import reverse

from tests.portal.conftest import Queue
from verification.actors.models import Actor, ApiToken
from verification.actors.services import users
from verification.actors.services.actors import actor_for_user, token_authenticate, token_issue
from verification.kernel.errors import KernelError
from verification.kernel.reasons import Reason
from verification.reviews.models import ReviewLease
from verification.reviews.selectors import claimable
from verification.reviews.services.claims import review_claim
from verification.trust.models import SecurityLogEntry

pytestmark = pytest.mark.django_db


@pytest.fixture
def admin(admin_user: Any, signing_key: Any) -> Client:
    client = Client()
    client.force_login(admin_user)
    return client


def test_an_admin_creates_a_user_with_roles(admin: Client, admin_user: Any) -> None:
    response = admin.post(
        reverse("adminportal:user-create"),
        {"username": "nina", "password": "a long enough passphrase 42", "roles": ["reviewer", "manager"]},
    )
    assert response.status_code == 302
    nina = get_user_model().objects.get(username="nina")
    assert nina.check_password("a long enough passphrase 42")
    assert users.roles_of(nina) == ["manager", "reviewer"]
    assert Actor.objects.get(user=nina).name == "user:nina"
    entry = SecurityLogEntry.objects.get(kind="user-create")
    assert entry.user == admin_user and entry.target == "nina" and entry.detail["roles"] == ["manager", "reviewer"]


def test_a_weak_password_or_a_taken_name_is_refused(admin: Client, admin_user: Any, reviewer: Any) -> None:
    weak = admin.post(reverse("adminportal:user-create"), {"username": "olga", "password": "short"})
    assert 'data-field-error="password"' in weak.content.decode()  # issue 14: web words beside the field
    with pytest.raises(KernelError) as refused:  # the service (and so the API) keeps its code
        users.user_create(by=admin_user, username="olga", password="short", roles=[])
    assert refused.value.reason is Reason.INVALID_REQUEST
    assert not get_user_model().objects.filter(username="olga").exists()
    taken = admin.post(
        reverse("adminportal:user-create"), {"username": reviewer.username, "password": "a long enough passphrase 42"}
    )
    assert 'data-refusal="actor-name-taken"' in taken.content.decode()
    assert not get_user_model().objects.filter(username="olga").exists()


def test_roles_are_set_and_an_admin_cannot_drop_their_own(admin: Client, admin_user: Any, reviewer: Any) -> None:
    response = admin.post(reverse("adminportal:user-roles", args=[reviewer.pk]), {"roles": ["manager"]})
    assert response.status_code == 302
    assert users.roles_of(reviewer) == ["manager"]
    entry = SecurityLogEntry.objects.get(kind="user-roles")
    assert entry.detail == {"user": reviewer.pk, "before": ["reviewer"], "after": ["manager"]}
    refused = admin.post(reverse("adminportal:user-roles", args=[admin_user.pk]), {"roles": ["reviewer"]})
    assert refused.status_code == 302  # Post/Redirect/Get: the user's page shows the refusal
    assert 'data-refusal="permission-denied"' in admin.get(refused["Location"]).content.decode()
    assert users.roles_of(admin_user) == ["admin"]


def test_deactivating_a_user_ends_their_lease_token_and_session_at_once(
    admin: Client, admin_user: Any, reviewer: Any, reviewer2: Any, queue: Queue
) -> None:
    item = queue.unknown("held by rita")
    review_claim(user=reviewer, verification=item)
    token, raw = token_issue(actor=actor_for_user(reviewer), boundary="rita-laptop", scopes=["verifications:read"])
    session = Client()
    session.force_login(reviewer)
    assert session.get(reverse("portal:queue")).status_code == 200
    assert token_authenticate(raw) is not None
    assert item.pk not in set(claimable(now=_now()).values_list("pk", flat=True))

    page = admin.get(reverse("adminportal:user-deactivate", args=[reviewer.pk])).content.decode()
    assert "data-consequences" in page and token.prefix in page
    response = admin.post(
        reverse("adminportal:user-deactivate", args=[reviewer.pk]), {"reason": "left the team", "confirm": "on"}
    )

    assert response.status_code == 302
    reviewer.refresh_from_db()
    assert not reviewer.is_active
    lease = ReviewLease.objects.get(verification=item)
    assert lease.released_at is not None and lease.end_reason == "user-deactivated"
    assert item.pk in set(claimable(now=_now()).values_list("pk", flat=True))  # back in the queue for others
    assert ApiToken.objects.get(pk=token.pk).revoked_at is not None
    assert token_authenticate(raw) is None
    api = Client().get("/v1/verifications", HTTP_AUTHORIZATION=f"Bearer {raw}")
    assert api.status_code == 401
    after = session.get(reverse("portal:queue"))
    assert after.status_code == 302 and after["Location"].startswith("/accounts/login/")
    review_claim(user=reviewer2, verification=item)  # another reviewer can take it now
    entry = SecurityLogEntry.objects.get(kind="user-deactivate")
    assert entry.detail["leases_released"] == 1 and entry.detail["tokens_revoked"] == 1
    assert entry.detail["reason"] == "left the team"
    assert SecurityLogEntry.objects.filter(kind="token-revoke", user=admin_user).count() == 1


def _now() -> Any:
    from django.utils import timezone

    return timezone.now()


def test_an_admin_cannot_deactivate_themselves(admin: Client, admin_user: Any) -> None:
    refused = admin.post(
        reverse("adminportal:user-deactivate", args=[admin_user.pk]), {"reason": "oops", "confirm": "on"}
    )
    assert refused.status_code == 403
    admin_user.refresh_from_db()
    assert admin_user.is_active


def test_reactivation_restores_sign_in_but_not_revoked_tokens(admin: Client, admin_user: Any, reviewer: Any) -> None:
    _, raw = token_issue(actor=actor_for_user(reviewer), boundary="b", scopes=["events:read"])
    users.user_deactivate(by=admin_user, user=reviewer, reason="on leave")
    assert admin.post(reverse("adminportal:user-reactivate", args=[reviewer.pk])).status_code == 302
    reviewer.refresh_from_db()
    assert reviewer.is_active and token_authenticate(raw) is None


def test_a_token_is_shown_once_and_listed_with_actor_boundary_and_scopes(admin: Client, admin_user: Any) -> None:
    admin.post(reverse("adminportal:actor-create"), {"name": "ci-collector", "kind": "collector"})
    collector = Actor.objects.get(name="ci-collector")
    assert collector.kind == "collector"
    response = admin.post(
        reverse("adminportal:token-create"),
        {"actor": "ci-collector", "boundary": "ci-runner-7", "scopes": ["baselines:write", "links:write"]},
    )
    # Post/Redirect/Get (issue 14): the secret is shown once, on the tokens page, from a one-time store
    assert response.status_code == 302 and response["Location"] == "/admin/tokens/#token-created"
    shown = admin.get(reverse("adminportal:tokens"))
    assert "no-store" in shown["Cache-Control"]
    page = shown.content.decode()
    token = ApiToken.objects.get(actor=collector)
    raw = page.split("<code data-token-plaintext>")[1].split("</code>")[0]
    assert raw.startswith(token.prefix) and token_authenticate(raw) == token
    assert (token.boundary, token.scopes, token.created_by) == ("ci-runner-7", ["baselines:write", "links:write"],
                                                                admin_user)
    listing = admin.get(reverse("adminportal:tokens")).content.decode()  # a reload: no secret, no second token
    assert raw not in listing and f"{token.prefix}…" in listing and "ci-runner-7" in listing
    assert "data-token-plaintext" not in listing and ApiToken.objects.filter(actor=collector).count() == 1
    assert "baselines:write, links:write" in listing
    issued = SecurityLogEntry.objects.get(kind="token-issue", target=token.prefix)
    assert issued.user == admin_user and issued.detail["boundary"] == "ci-runner-7"
    assert raw not in str(issued.detail)

    unconfirmed = admin.post(reverse("adminportal:token-revoke", args=[token.pk]))
    assert unconfirmed.status_code == 200 and b"data-consequences" in unconfirmed.content
    assert token_authenticate(raw) == token  # nothing revoked without the confirmation
    confirmed = admin.post(reverse("adminportal:token-revoke", args=[token.pk]), {"confirm": "yes"})
    assert confirmed.status_code == 302
    assert token_authenticate(raw) is None
    assert SecurityLogEntry.objects.filter(kind="token-revoke", target=token.prefix, user=admin_user).exists()


def test_token_refusals_carry_their_code(admin: Client) -> None:
    admin.post(reverse("adminportal:actor-create"), {"name": "scanner", "kind": "external_verifier"})
    no_scope = admin.post(reverse("adminportal:token-create"), {"actor": "scanner", "boundary": "x", "scopes": []})
    assert no_scope.status_code == 302 and not ApiToken.objects.exists()  # the form requires a scope
    unknown = admin.post(
        reverse("adminportal:token-create"),
        {"actor": "nobody-here", "boundary": "x", "scopes": ["events:read"]},
        follow=True,
    )
    assert 'data-refusal="not-found"' in unknown.content.decode()
    portal = admin.post(
        reverse("adminportal:token-create"), {"actor": "portal", "boundary": "x", "scopes": ["events:read"]},
        follow=True,
    )
    assert 'data-refusal="not-found"' in portal.content.decode()  # the portal's own actor is not offered


def test_the_services_check_permission_as_well(reviewer: Any, manager: Any) -> None:
    for by in (reviewer, manager):
        with pytest.raises(KernelError) as refused:
            users.user_create(by=by, username="x", password="a long enough passphrase 42", roles=[])
        assert refused.value.reason is Reason.PERMISSION_DENIED
        with pytest.raises(KernelError):
            users.user_deactivate(by=by, user=reviewer, reason="x")
        with pytest.raises(KernelError):
            users.token_create(by=by, actor=actor_for_user(reviewer), boundary="b", scopes=["events:read"])
