"""Who is calling (SPEC §1): an API token bound to one actor, or a portal user's session for reads.

``request.user`` stays Django's (the token's actor's user, or AnonymousUser for a machine actor); the actor, the
token and the scopes it grants go on ``request.auth`` as ``ApiCredentials``. Nothing in a request body can change
them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Final

from django.contrib.auth.models import AnonymousUser
from rest_framework.authentication import BaseAuthentication, SessionAuthentication
from rest_framework.request import Request

from verification.actors.roles import VIEW_HISTORY
from verification.api.errors import WWW_AUTHENTICATE, ApiError
from verification.kernel.reasons import Reason

BEARER: Final = "bearer"
#: A token is ``rpt_`` and 43 urlsafe characters; anything much longer is not worth hashing.
MAX_TOKEN_CHARS: Final = 200

#: What a logged-in portal user may read through the API (GET endpoints only); writes need a token.
SESSION_SCOPES: Final = frozenset({"verifications:read", "events:read"})
#: The permission (verification.actors.roles: reviewer, manager and admin all hold it) that opens those reads.
SESSION_READ_PERMISSION: Final = VIEW_HISTORY


@dataclass(frozen=True)
class ApiCredentials:
    """``request.auth`` of an authenticated API request."""

    actor: Any  # verification.actors.models.Actor; None for a portal session (reads only)
    token: Any  # verification.actors.models.ApiToken, or None for a session
    scopes: frozenset[str]
    via: str  # "token" or "session"

    def has_scope(self, scope: str) -> bool:
        return scope in self.scopes


def bearer_credentials(header: str) -> str | None:
    """The raw token of an ``Authorization: Bearer <token>`` header; None when the scheme is not Bearer."""
    scheme, _, value = header.strip().partition(" ")
    if scheme.lower() != BEARER:
        return None
    return value.strip()


def authenticate_bearer(request: Any) -> tuple[Any, ApiCredentials] | None:
    """Authenticate a Django or DRF request by its bearer token; None when it sends none.

    Raises ``ApiError(not-authenticated)`` (401) for a Bearer header whose token is empty, malformed, unknown,
    revoked, or whose actor's user is inactive.
    """
    meta = request.META
    header = meta.get("HTTP_AUTHORIZATION", "")
    if not header:
        return None
    raw = bearer_credentials(header)
    if raw is None:
        return None
    if not raw or len(raw) > MAX_TOKEN_CHARS or not raw.isascii():
        raise ApiError(Reason.NOT_AUTHENTICATED, "malformed bearer token")
    from verification.actors.services.actors import token_authenticate  # the services load the models

    token = token_authenticate(raw)
    if token is None:
        raise ApiError(Reason.NOT_AUTHENTICATED, "unknown or revoked token")
    actor = token.actor
    user = getattr(actor, "user", None)
    if user is None:
        user = AnonymousUser()
    scopes = frozenset(str(s) for s in (token.scopes or ()))
    return user, ApiCredentials(actor=actor, token=token, scopes=scopes, via="token")


class BearerTokenAuthentication(BaseAuthentication):
    """``Authorization: Bearer rpt_...`` → the token's actor (``services.actors.token_authenticate``)."""

    def authenticate(self, request: Request) -> tuple[Any, ApiCredentials] | None:
        return authenticate_bearer(request._request)

    def authenticate_header(self, request: Request) -> str:
        return WWW_AUTHENTICATE


class PortalSessionAuthentication(SessionAuthentication):
    """A logged-in portal user with a role may use the read endpoints (``SESSION_SCOPES``); CSRF for the rest."""

    def authenticate(self, request: Request) -> tuple[Any, ApiCredentials] | None:
        found = super().authenticate(request)
        if found is None:
            return None
        user = found[0]
        scopes = SESSION_SCOPES if user.has_perm(SESSION_READ_PERMISSION) else frozenset()
        # Sessions only read (SESSION_SCOPES), and no read depends on who reads: no actor is looked up or created.
        return user, ApiCredentials(actor=None, token=None, scopes=scopes, via="session")
