"""The public key endpoints (SPEC §7, §8): no authentication, public material only.

- ``/.well-known/acretix-verify/keys.json``: the JWKS of every active and retired key; never a revoked one, never
  a private member.
- ``/.well-known/acretix-verify/revoked.json``: the revoked keys with time and reason.
"""

from __future__ import annotations

from django.http import HttpRequest, JsonResponse
from django.views.decorators.http import require_safe

from verification.trust.selectors import jwks_document, revoked_document

#: Keys change only at rotation; revocation must travel faster, so its list is cached for a shorter time.
KEYS_CACHE_CONTROL = "public, max-age=300"
REVOKED_CACHE_CONTROL = "public, max-age=60"


@require_safe
def keys_json(request: HttpRequest) -> JsonResponse:
    response = JsonResponse(jwks_document())
    response["Cache-Control"] = KEYS_CACHE_CONTROL
    response["Access-Control-Allow-Origin"] = "*"  # public keys: any verifier may fetch them from a browser
    return response


@require_safe
def revoked_json(request: HttpRequest) -> JsonResponse:
    response = JsonResponse(revoked_document())
    response["Cache-Control"] = REVOKED_CACHE_CONTROL
    response["Access-Control-Allow-Origin"] = "*"
    return response
