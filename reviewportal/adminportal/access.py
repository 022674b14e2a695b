"""Who may open which admin page (issue 7; SPEC §0: admins). One permission per section, from the admin role
(``verification.actors.roles``); the services check again.

Anonymous users are sent to the login page (302); signed-in users without the permission get 403.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import wraps
from typing import Any, Final, TypeVar

from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponse

ADMINISTER_KEYS: Final = "reviewportal.administer_keys"
ADMINISTER_USERS: Final = "reviewportal.administer_users"
INSPECT_CHAINS: Final = "reviewportal.inspect_chains"
INSPECT_EVIDENCE: Final = "reviewportal.inspect_evidence"
VIEW_SECURITY_LOG: Final = "reviewportal.view_security_log"
ADMIN_PERMISSIONS: Final = (ADMINISTER_KEYS, ADMINISTER_USERS, INSPECT_CHAINS, INSPECT_EVIDENCE, VIEW_SECURITY_LOG)

View = TypeVar("View", bound=Callable[..., HttpResponse])


def has(user: Any, permission: str) -> bool:
    return bool(user.is_authenticated and user.is_active and user.has_perm(permission))


def is_admin(user: Any) -> bool:
    """Holds any of the admin permissions (may open the admin home page)."""
    return any(has(user, p) for p in ADMIN_PERMISSIONS)


def sections(user: Any) -> list[tuple[str, str]]:
    """The admin sections ``user`` may open: (url name, label)."""
    out = []
    for permission, names in (
        (ADMINISTER_KEYS, [("adminportal:keys", "Keys")]),
        (
            INSPECT_CHAINS,
            [
                ("adminportal:verify-proof", "Verify a proof"),
                ("adminportal:audit", "Audit"),
                ("adminportal:operations", "Operations"),
            ],
        ),
        (INSPECT_EVIDENCE, [("adminportal:evidence", "Evidence")]),
        (ADMINISTER_USERS, [("adminportal:users", "Users"), ("adminportal:tokens", "API tokens")]),
        (VIEW_SECURITY_LOG, [("adminportal:security-log", "Security log")]),
    ):
        if has(user, permission):
            out.extend(names)
    return out


def _requiring(check: Callable[[Any], bool]) -> Callable[[View], View]:
    def decorator(view: View) -> View:
        @wraps(view)
        def wrapped(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
            if not check(request.user):
                raise PermissionDenied
            return view(request, *args, **kwargs)

        return login_required(wrapped)  # type: ignore[return-value]

    return decorator


def requires(permission: str) -> Callable[[View], View]:
    return _requiring(lambda user: has(user, permission))


admin_required = _requiring(is_admin)
keys_admin = requires(ADMINISTER_KEYS)
users_admin = requires(ADMINISTER_USERS)
chains_inspector = requires(INSPECT_CHAINS)
evidence_inspector = requires(INSPECT_EVIDENCE)
security_log_reader = requires(VIEW_SECURITY_LOG)
