"""Scope checks (issue 4 §3): each endpoint names the scope each method needs; the token must hold it.

No credentials → 401 ``not-authenticated``; a token without the scope → 403 ``scope-denied``; a portal session
asking for anything but a read → 403 ``permission-denied`` (writes need a token bound to an actor).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from rest_framework.permissions import BasePermission
from rest_framework.request import Request

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


class HasScope(BasePermission):
    """The view's ``required_scopes`` maps each HTTP method to the scope it needs; a method not listed is refused."""

    def has_permission(self, request: Request, view: Any) -> bool:
        required: Mapping[str, str] = getattr(view, "required_scopes", {})
        method = request.method or ""
        scope = required.get(method) or (required.get("GET") if method in ("HEAD", "OPTIONS") else None)
        if scope is None:
            credentials(request)  # unauthenticated first: 401 before anything else is revealed
            raise ApiError(Reason.METHOD_NOT_ALLOWED, f"{method} is not allowed here")
        require_scope(request, scope)
        return True
