"""Per-token API throttling (issue 13 item 6): REST framework's rate throttle keyed by the caller, not the address.

A request with a bearer token counts against that token; a portal session against its user; anything else (no
credentials: refused anyway, or the public schema) against the client address. The rate is
``REST_FRAMEWORK["DEFAULT_THROTTLE_RATES"]["token"]`` (``REVIEWPORTAL_API_RATE``, docs/configuration.md); the counts
live in the configured cache (``CACHES["default"]``: Redis when ``REVIEWPORTAL_CACHE_URL`` names one). Over the rate the
answer is 429 ``rate-limited`` with ``Retry-After`` (``api.errors``).
"""

from __future__ import annotations

from typing import Any

from rest_framework.request import Request
from rest_framework.settings import api_settings
from rest_framework.throttling import SimpleRateThrottle


class TokenRateThrottle(SimpleRateThrottle):
    scope = "token"

    def get_rate(self) -> str | None:
        """Read when the throttle is made, not when the class was (so a changed setting applies at once)."""
        rates: dict[str, str] = api_settings.DEFAULT_THROTTLE_RATES
        return rates.get(self.scope)

    def get_cache_key(self, request: Request, view: Any) -> str:
        credentials = request.auth
        token = getattr(credentials, "token", None)
        user = getattr(request, "user", None)
        if token is not None:
            ident = f"token:{token.pk}"
        elif user is not None and getattr(user, "is_authenticated", False):
            ident = f"user:{user.pk}"
        else:
            ident = f"addr:{self.get_ident(request)}"
        return self.cache_format % {"scope": self.scope, "ident": ident}
