"""Scope checks (issue 4 §3): each endpoint names the scope each method needs; the token must hold it.

No credentials → 401 ``not-authenticated``; a token without the scope → 403 ``scope-denied``; a portal session
asking for anything but a read → 403 ``permission-denied`` (writes need a token bound to an actor). The proof
endpoints (``ReadsProofs``) take the token's scope as everywhere, but of sessions only staff and admins (SPEC §7).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from rest_framework.permissions import BasePermission
from rest_framework.request import Request

from verification.actors.roles import ADMIN, role_of
from verification.api.authentication import ApiCredentials
from verification.api.errors import ApiError
from verification.kernel.reasons import Reason


def credentials(request: Request) -> ApiCredentials:
    auth = request.auth
    if not isinstance(auth, ApiCredentials):
        raise ApiError(Reason.NOT_AUTHENTICATED)
    return auth


def require_scope(request: Request, scope: str) -> ApiCredentials:
    """The caller's credentials if they grant ``scope``; else 401/403 with the code."""
    creds = credentials(request)
    if creds.has_scope(scope):
        return creds
    details = {"required_scope": scope}
    if creds.via == "session":
        raise ApiError(Reason.PERMISSION_DENIED, "a portal session may only read; use an API token", details=details)
    raise ApiError(Reason.SCOPE_DENIED, f"this endpoint needs the scope {scope}", details=details)


def required_scope(request: Request, view: Any) -> str:
    """The scope the view's ``required_scopes`` names for this method (HEAD and OPTIONS as GET); a method not listed
    is refused: 401 without credentials (before anything else is revealed), else 405."""
    required: Mapping[str, str] = getattr(view, "required_scopes", {})
    method = request.method or ""
    scope = required.get(method) or (required.get("GET") if method in ("HEAD", "OPTIONS") else None)
    if scope is None:
        credentials(request)
        raise ApiError(Reason.METHOD_NOT_ALLOWED, f"{method} is not allowed here")
    return scope


class HasScope(BasePermission):
    """The view's ``required_scopes`` maps each HTTP method to the scope it needs; a method not listed is refused."""

    def has_permission(self, request: Request, view: Any) -> bool:
        require_scope(request, required_scope(request, view))
        return True


def reads_proofs(user: Any) -> bool:
    """A portal user who may read proofs: staff, or the admin role (a superuser counts as admin)."""
    return bool(getattr(user, "is_staff", False)) or role_of(user) == ADMIN


class ReadsProofs(BasePermission):
    """A token holding the view's scope (as ``HasScope``), or the session of a staff user or an admin: a reviewer's
    or manager's session reads the rest of the API (``SESSION_SCOPES``), not proofs (403 ``permission-denied``)."""

    def has_permission(self, request: Request, view: Any) -> bool:
        scope = required_scope(request, view)
        if credentials(request).via != "session":
            require_scope(request, scope)
        elif not reads_proofs(request.user):
            raise ApiError(Reason.PERMISSION_DENIED, "proofs are read by staff and admins, or with an API token")
        return True
