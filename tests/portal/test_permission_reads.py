"""A user's permissions in one read (issue 15; ``reviewportal.access.PermissionsInOneRead``): their own and their
groups' together in ONE statement per request, with Django's ``ModelBackend``'s answers."""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.contrib.auth.backends import ModelBackend
from django.contrib.auth.models import Permission
from django.db import connection
from django.test.utils import CaptureQueriesContext

from reviewportal.access import PermissionsInOneRead
from verification.actors.roles import ADMINISTER_KEYS, DECIDE_VERIFICATION, REVIEW_QUEUE

pytestmark = pytest.mark.django_db


def _fresh(user: Any) -> Any:
    """The user as a request loads it: nothing cached."""
    return get_user_model().objects.get(pk=user.pk)


def test_a_reviewers_permissions_are_read_once_for_every_check(reviewer: Any) -> None:
    user = _fresh(reviewer)
    with CaptureQueriesContext(connection) as captured:
        assert user.has_perm(REVIEW_QUEUE) and user.has_perm(DECIDE_VERIFICATION)
        assert not user.has_perm(ADMINISTER_KEYS) and user.has_perm(REVIEW_QUEUE)
    assert len(captured.captured_queries) == 1, [q["sql"] for q in captured.captured_queries]


@pytest.mark.parametrize("role", ["reviewer", "manager", "admin"])
def test_the_same_permissions_as_djangos_model_backend(make_user: Any, role: str) -> None:
    user = make_user(f"someone-{role}", role)
    own = Permission.objects.get(content_type__app_label="reviewportal", codename="administer_keys")
    user.user_permissions.add(own)  # held directly, beside the group's
    ours = PermissionsInOneRead().get_all_permissions(_fresh(user))
    assert ours == ModelBackend().get_all_permissions(_fresh(user))
    assert ADMINISTER_KEYS in ours


def test_a_superuser_holds_every_permission_and_an_inactive_user_none(make_user: Any) -> None:
    boss = make_user("boss", None)
    boss.is_superuser = True
    boss.save()
    every = {
        f"{app}.{codename}" for app, codename in Permission.objects.values_list("content_type__app_label", "codename")
    }
    assert PermissionsInOneRead().get_all_permissions(_fresh(boss)) == every
    gone = make_user("gone", "reviewer")
    gone.is_active = False
    gone.save()
    assert PermissionsInOneRead().get_all_permissions(_fresh(gone)) == set()
    assert not _fresh(gone).has_perm(REVIEW_QUEUE)


def test_the_user_read_gives_model_backends_answers(make_user: Any) -> None:
    """``get_user`` (compiled once): the same user, field for field, as ``ModelBackend``; None for an unknown id and
    for a user who may not sign in (deactivated)."""
    someone = make_user("someone", "reviewer")
    ours, django = PermissionsInOneRead().get_user(someone.pk), ModelBackend().get_user(someone.pk)
    assert ours is not None and django is not None
    fields = [f.attname for f in get_user_model()._meta.concrete_fields]
    assert [getattr(ours, name) for name in fields] == [getattr(django, name) for name in fields]
    assert PermissionsInOneRead().get_user(someone.pk + 1000) is None
    someone.is_active = False
    someone.save()
    assert PermissionsInOneRead().get_user(someone.pk) is None and ModelBackend().get_user(someone.pk) is None


def test_an_expired_or_unknown_session_reads_as_none_and_its_key_is_forgotten(reviewer: Any) -> None:
    from datetime import timedelta

    from django.contrib.sessions.models import Session
    from django.utils import timezone

    from reviewportal.sessions import SessionStore

    store = SessionStore()
    store["n"] = 1
    store.save(must_create=True)
    key = store.session_key
    again = SessionStore(session_key=key)
    assert again["n"] == 1 and again.stored_expiry is not None  # read by the compiled statement, with its end
    Session.objects.filter(session_key=key).update(expire_date=timezone.now() - timedelta(seconds=1))
    expired = SessionStore(session_key=key)
    assert expired.get("n") is None and expired.session_key is None and expired.stored_expiry is None
    unknown = SessionStore(session_key="x" * 32)
    assert unknown.get("n") is None and unknown.session_key is None
