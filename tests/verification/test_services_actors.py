"""Actors and API tokens (SPEC §1): tokens stored hashed, shown once, bound to one actor and boundary, revocable."""

from __future__ import annotations

import hashlib
from typing import Any

import pytest
from django.db import connection

from verification.actors.models import Actor, ApiToken
from verification.actors.services.actors import (
    PORTAL_ACTOR_NAME,
    TOKEN_RE,
    actor_create,
    actor_for_user,
    boundaries_of,
    portal_service_actor,
    token_authenticate,
    token_issue,
    token_revoke,
)
from verification.errors import ServiceError
from verification.kernel.reasons import Reason

pytestmark = pytest.mark.django_db


def test_a_token_is_shown_once_and_stored_only_as_its_sha256() -> None:
    actor = actor_create(name="agent-w", kind="agent")
    token, raw = token_issue(actor=actor, boundary="ctr-worker", scopes=["claims:write", "verifications:write"])
    assert TOKEN_RE.fullmatch(raw)
    stored = ApiToken.objects.get(pk=token.pk)
    assert stored.token_hash == hashlib.sha256(raw.encode()).hexdigest()
    assert stored.prefix == raw[:12] and stored.boundary == "ctr-worker"
    assert stored.scopes == ["claims:write", "verifications:write"]
    # The plaintext is in no column of the row (read back raw from the database, not through the model).
    with connection.cursor() as cursor:
        cursor.execute("SELECT * FROM verification_apitoken WHERE id = %s", [token.pk])
        row = cursor.fetchone()
    assert raw not in [str(value) for value in row]
    assert token_authenticate(raw) == stored


def test_a_revoked_token_is_refused_and_keeps_its_first_revocation() -> None:
    actor = actor_create(name="collector-c", kind="collector")
    token, raw = token_issue(actor=actor, boundary="ctr-collector", scopes=["baselines:write"])
    revoked = token_revoke(token=token)
    assert revoked.revoked_at is not None
    assert token_authenticate(raw) is None
    again = token_revoke(token=token)
    assert again.revoked_at == revoked.revoked_at
    assert ApiToken.objects.get(pk=token.pk).revoked_at == revoked.revoked_at


@pytest.mark.parametrize("raw", ["", "rpt_short", "Bearer rpt_" + "a" * 43, "rpt_" + "a" * 43, "xyz_" + "a" * 43, None])
def test_unknown_or_malformed_tokens_authenticate_nobody(raw: Any) -> None:
    actor = actor_create(name="agent-w", kind="agent")
    token_issue(actor=actor, boundary="ctr-worker", scopes=[])
    assert token_authenticate(raw) is None


def test_a_token_of_an_inactive_user_is_refused(django_user_model: Any) -> None:
    user = django_user_model.objects.create_user(username="rita", password="correct horse battery staple")
    actor = actor_for_user(user)
    _, raw = token_issue(actor=actor, boundary="laptop-rita", scopes=["verifications:read"])
    assert token_authenticate(raw) is not None
    user.is_active = False
    user.save()
    assert token_authenticate(raw) is None


def test_unknown_scopes_and_blank_boundaries_are_refused() -> None:
    actor = actor_create(name="agent-w", kind="agent")
    with pytest.raises(ServiceError) as exc:
        token_issue(actor=actor, boundary="ctr-worker", scopes=["verifications:write", "admin:all"])
    assert exc.value.reason is Reason.UNKNOWN_SCOPE
    with pytest.raises(ServiceError) as exc:
        token_issue(actor=actor, boundary="  ", scopes=[])
    assert exc.value.reason is Reason.INVALID_REQUEST
    assert ApiToken.objects.count() == 0


def test_each_portal_user_is_one_human_actor(django_user_model: Any) -> None:
    user = django_user_model.objects.create_user(username="rita", password="correct horse battery staple")
    first = actor_for_user(user)
    assert (first.name, first.kind, first.user) == ("user:rita", "human", user)
    assert actor_for_user(user) == first
    assert Actor.objects.filter(user=user).count() == 1


def test_actor_names_are_unique_and_kinds_checked() -> None:
    actor_create(name="agent-w", kind="agent")
    with pytest.raises(ServiceError) as exc:
        actor_create(name="agent-w", kind="collector")
    assert exc.value.reason is Reason.ACTOR_NAME_TAKEN and exc.value.http_status == 409
    with pytest.raises(ServiceError) as exc:
        actor_create(name="robot", kind="overlord")
    assert exc.value.reason is Reason.INVALID_REQUEST
    with pytest.raises(ServiceError) as exc:
        actor_create(name="user:mallory", kind="human")  # reserved for portal users
    assert exc.value.reason is Reason.INVALID_REQUEST
    with pytest.raises(ServiceError) as exc:
        actor_create(name=PORTAL_ACTOR_NAME, kind="agent")  # the portal's own actor, even before it exists
    assert exc.value.reason is Reason.ACTOR_NAME_TAKEN


def test_the_portal_service_actor_exists_runs_in_the_portal_boundary_and_holds_no_token() -> None:
    portal = portal_service_actor()
    assert (portal.name, portal.kind) == (PORTAL_ACTOR_NAME, "service")
    assert boundaries_of(portal) == frozenset({"portal"})
    with pytest.raises(ServiceError) as exc:
        token_issue(actor=portal, boundary="anywhere", scopes=[])
    assert exc.value.reason is Reason.PERMISSION_DENIED


def test_an_actors_boundaries_are_those_of_its_tokens_revoked_included() -> None:
    actor = actor_create(name="agent-w", kind="agent")
    first, _ = token_issue(actor=actor, boundary="ctr-1", scopes=[])
    token_issue(actor=actor, boundary="ctr-2", scopes=[])
    token_revoke(token=first)
    assert boundaries_of(actor) == frozenset({"ctr-1", "ctr-2"})
