"""The portal's one access decorator factory (issue 5 §1, issue 6, issue 7): each area's ``access.py`` names its
checks and builds its decorators here.

Built on Django's ``user_passes_test`` the way ``permission_required(raise_exception=True)`` is, with one difference:
anonymous users are sent to the login page (302), signed-in users who fail the check get 403. The services check
again; permission names come from ``verification.actors.roles``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

from django.contrib.auth.backends import ModelBackend
from django.contrib.auth.decorators import user_passes_test
from django.contrib.auth.models import Permission
from django.core.exceptions import PermissionDenied
from django.db.models import Q
from django.http import HttpResponse

View = TypeVar("View", bound=Callable[..., HttpResponse])


def has_permission(user: Any, permission: str) -> bool:
    """An active, signed-in user holding ``permission`` (a ``verification.actors.roles`` name)."""
    return bool(user.is_authenticated and user.is_active and user.has_perm(permission))


def requiring(check: Callable[[Any], bool]) -> Callable[[View], View]:
    """A view decorator: anonymous -> login page (302); signed in but ``check(user)`` false -> 403."""

    def passes(user: Any) -> bool:
        if not user.is_authenticated:
            return False  # user_passes_test redirects to the login page
        if not check(user):
            raise PermissionDenied
        return True

    return user_passes_test(passes)  # type: ignore[return-value]


def requires(permission: str) -> Callable[[View], View]:
    """A view decorator for one permission (see ``requiring``)."""
    return requiring(lambda user: has_permission(user, permission))


class PermissionsInOneRead(ModelBackend):
    """Django's ``ModelBackend`` (``AUTHENTICATION_BACKENDS``) reading a user's permissions in ONE statement, their
    own and their groups' together, where Django's sends one for each (issue 15: two reads on every page). The same
    answers, cached on the user for the request as Django caches them (``_perm_cache``); a superuser holds every
    permission."""

    def get_all_permissions(self, user_obj: Any, obj: Any = None) -> set[str]:
        if not user_obj.is_active or user_obj.is_anonymous or obj is not None:
            return set()
        if not hasattr(user_obj, "_perm_cache"):
            held = Permission.objects.all()
            if not user_obj.is_superuser:
                held = held.filter(Q(user=user_obj) | Q(group__user=user_obj))
            rows = held.values_list("content_type__app_label", "codename").order_by()
            user_obj._perm_cache = {f"{app}.{codename}" for app, codename in rows}
        return user_obj._perm_cache  # type: ignore[no-any-return]
