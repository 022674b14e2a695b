"""The portal's one access decorator factory (issue 5 §1, issue 6, issue 7): each area's ``access.py`` names its
checks and builds its decorators here.

Built on Django's ``user_passes_test`` the way ``permission_required(raise_exception=True)`` is, with one difference:
anonymous users are sent to the login page (302), signed-in users who fail the check get 403. The services check
again; permission names come from ``verification.actors.roles``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Final, TypeVar

from django.contrib.auth import get_user_model
from django.contrib.auth.backends import ModelBackend
from django.contrib.auth.decorators import user_passes_test
from django.contrib.auth.models import Permission
from django.core.exceptions import PermissionDenied
from django.db.models import Q
from django.http import HttpResponse

from verification.compiled import Compiled, Probe, Related, pipelined

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


_User = get_user_model()
#: The signed-in user's row (every concrete column, as ``ModelBackend.get_user``'s ``get`` reads it).
_USER_ROW: Final = Related(_User)
_USER_KEY: Final = Probe(1_000_007, 1_000_008, _User._meta.pk)
_PERMISSION_COLUMNS: Final = ("content_type__app_label", "codename")

# The reads every signed-in request makes, each compiled once and sent prepared (``verification.compiled``): compiling
# them through the ORM on every request cost more than running them (issue 15, the reviewer actions).
_USER: Final = Compiled(
    "auth-user",
    _User,
    lambda user_pk: _User._default_manager.filter(pk=user_pk).values_list(*_USER_ROW.columns()),
    {"user_pk": _USER_KEY},
    prepared=True,
)
_PERMISSIONS_HELD: Final = Compiled(
    "auth-permissions-held",
    Permission,
    lambda user_pk: Permission.objects.filter(Q(user=user_pk) | Q(group__user=user_pk))
    .values_list(*_PERMISSION_COLUMNS)
    .order_by(),
    {"user_pk": _USER_KEY},
    prepared=True,
)
_EVERY_PERMISSION: Final = Compiled(
    "auth-permissions-all",
    Permission,
    lambda: Permission.objects.values_list(*_PERMISSION_COLUMNS).order_by(),
    {},
    prepared=True,
)


class PermissionsInOneRead(ModelBackend):
    """Django's ``ModelBackend`` (``AUTHENTICATION_BACKENDS``) reading a user's permissions in ONE statement, their
    own and their groups' together, where Django's sends one for each (issue 15: two reads on every page). The same
    answers, cached on the user for the request as Django caches them (``_perm_cache``); a superuser holds every
    permission. The user and the permissions are read by statements compiled once."""

    def get_user(self, user_id: Any) -> Any:
        """``ModelBackend.get_user``: the user with this id, or None when there is none or it may not sign in. Its
        permissions are read with it, in the same round trip (``compiled.pipelined``), and cached on it for the
        request as ``get_all_permissions`` caches them: every page checks one (a superuser's, every permission, are
        left to ``get_all_permissions``)."""
        user_rows, held = pipelined((_USER, {"user_pk": user_id}), (_PERMISSIONS_HELD, {"user_pk": user_id}))
        user = _USER_ROW.first(user_rows)
        if user is None or not self.user_can_authenticate(user):
            return None
        if not user.is_superuser:
            user._perm_cache = {f"{app}.{codename}" for app, codename in held}
        return user

    def get_all_permissions(self, user_obj: Any, obj: Any = None) -> set[str]:
        if not user_obj.is_active or user_obj.is_anonymous or obj is not None:
            return set()
        if not hasattr(user_obj, "_perm_cache"):
            rows = _EVERY_PERMISSION.rows() if user_obj.is_superuser else _PERMISSIONS_HELD.rows(user_pk=user_obj.pk)
            user_obj._perm_cache = {f"{app}.{codename}" for app, codename in rows}
        return user_obj._perm_cache  # type: ignore[no-any-return]
