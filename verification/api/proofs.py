"""Proof endpoints (SPEC §7): the proof document and the head envelope of a verification.

Authenticated: an API token with the ``verifications:read`` scope (``Authorization: Bearer rpt_...``, checked by
``verification.api.authentication``), or a Django session of a staff user or a member of the admin group. Errors are
JSON ``{"error": {"code", "message", "details"}}`` with a registry code.
"""

from __future__ import annotations

from typing import Any

from django.http import HttpRequest, HttpResponse, JsonResponse
from django.views.decorators.http import require_safe

from verification.actors.roles import ADMIN
from verification.kernel.reasons import Reason, explain
from verification.runs.models import Verification
from verification.runs.selectors import verification_get
from verification.trust.selectors import head_of, proof_for

#: verification.actors.roles.ADMIN (the verification app does not import the portal).
ADMIN_GROUP = ADMIN
NO_STORE = "private, no-store"
#: The scope an API token needs to read proofs (the API's read scope).
PROOF_SCOPE = "verifications:read"


def error_response(status: int, code: Reason, message: str = "", details: dict[str, Any] | None = None) -> JsonResponse:
    """The API's error shape, with the registry's words when no message is given (SPEC §11)."""
    body = {"error": {"code": code.value, "message": message or explain(code), "details": details or {}}}
    response = JsonResponse(body, status=status)
    response["Cache-Control"] = NO_STORE
    return response


def _may_read_proofs(user: Any) -> bool:
    if getattr(user, "is_superuser", False) or getattr(user, "is_staff", False):
        return True
    return bool(user.groups.filter(name=ADMIN_GROUP).exists())


def _unauthenticated(message: str = "") -> JsonResponse:
    from verification.api.errors import WWW_AUTHENTICATE

    response = error_response(401, Reason.NOT_AUTHENTICATED, message)
    response["WWW-Authenticate"] = WWW_AUTHENTICATE  # RFC 9110: a 401 names its challenge
    return response


def _token_refusal(request: HttpRequest) -> JsonResponse | None:
    """An API token (``Authorization: Bearer``) must hold ``verifications:read``: None when it does (SPEC §1)."""
    from verification.api.authentication import authenticate_bearer
    from verification.api.errors import ApiError, message_for

    try:
        found = authenticate_bearer(request)
    except ApiError as exc:
        return _unauthenticated(message_for(exc.reason, exc.text))
    if found is None:
        return _unauthenticated()
    if not found[1].has_scope(PROOF_SCOPE):
        return error_response(403, Reason.SCOPE_DENIED, details={"required_scope": PROOF_SCOPE})
    return None


def _verification_for(request: HttpRequest, verification_id: str) -> Verification | JsonResponse:
    """The access helper: 401 anonymous, 403 without the role or scope, 404 unknown; else the verification.

    A bearer token is checked first (scope ``verifications:read``); otherwise the staff session as before.
    """
    user = request.user
    if request.META.get("HTTP_AUTHORIZATION"):
        refused = _token_refusal(request)
        if refused is not None:
            return refused
    elif not user.is_authenticated or not user.is_active:
        return _unauthenticated()
    elif not _may_read_proofs(user):
        return error_response(403, Reason.PERMISSION_DENIED)
    verification = verification_get(verification_id)
    if verification is None:
        return error_response(404, Reason.NOT_FOUND, details={"verification_id": verification_id})
    return verification


@require_safe
def proof(request: HttpRequest, verification_id: str) -> HttpResponse:
    """The proof document, with the server-served ``proof_head_hash``."""
    found = _verification_for(request, verification_id)
    if isinstance(found, JsonResponse):
        return found
    document = proof_for(found)
    if document is None:
        return error_response(404, Reason.NOT_FOUND, "this verification has no receipts yet",
                              {"verification_id": verification_id})
    response = JsonResponse(document)
    response["Cache-Control"] = NO_STORE
    return response


@require_safe
def proof_envelope(request: HttpRequest, verification_id: str) -> HttpResponse:
    """The head entry's envelope: exactly the signed canonical bytes, as ``application/json``."""
    found = _verification_for(request, verification_id)
    if isinstance(found, JsonResponse):
        return found
    head = head_of(found)
    if head is None:
        return error_response(404, Reason.NOT_FOUND, "this verification has no receipts yet",
                              {"verification_id": verification_id})
    response = HttpResponse(head.envelope.encode("utf-8"), content_type="application/json")
    response["ETag"] = f'"{head.content_hash}"'
    response["Cache-Control"] = NO_STORE
    return response
