"""Proof endpoints (SPEC §7): the proof document and the head envelope of a verification.

Authenticated. Until API tokens arrive (the API issue), access is a Django session of a staff user or a member of
the admin group. Errors are JSON ``{"error": {"code", "message", "details"}}`` with a registry code.
"""

from __future__ import annotations

from typing import Any

from django.http import HttpRequest, HttpResponse, JsonResponse
from django.views.decorators.http import require_safe

from verification.kernel.reasons import Reason, explain
from verification.models import Verification
from verification.selectors import head_of, proof_for, verification_get

#: reviewportal.roles.ADMIN (the verification app does not import the portal).
ADMIN_GROUP = "admin"
NO_STORE = "private, no-store"


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


def _verification_for(request: HttpRequest, verification_id: str) -> Verification | JsonResponse:
    """The access helper: 401 anonymous, 403 without the role, 404 unknown; else the verification."""
    user = request.user
    if not user.is_authenticated or not user.is_active:
        return error_response(401, Reason.NOT_AUTHENTICATED)
    if not _may_read_proofs(user):
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
