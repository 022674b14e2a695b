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
