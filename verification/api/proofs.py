"""Proof endpoints (SPEC §7): the proof document and the head envelope of a verification, as API views.

They go through the API's one authentication (``Authorization: Bearer rpt_...`` or a portal session), one permission
(``permissions.ReadsProofs``: a token with ``verifications:read``, or the session of a staff user or an admin), the
API's throttle and its one error body (``api.errors``). The answer is JSON whatever the ``Accept`` header says, never
cached (``Cache-Control: private, no-store``).
"""

from __future__ import annotations

from typing import Any, Final

from django.http import HttpResponse
from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response

from verification.api.errors import ApiError
from verification.api.permissions import ReadsProofs
from verification.api.renderers import ApiJSONRenderer, JSONText
from verification.api.serializers.base import ErrorResponseSerializer
from verification.api.views.common import ApiView
from verification.kernel.reasons import Reason
from verification.runs.models import Verification
from verification.runs.selectors import verification_get
from verification.trust.selectors import head_of, proof_text

#: The scope an API token needs to read proofs (the API's read scope).
PROOF_SCOPE: Final = "verifications:read"
HEX64: Final = r"^[0-9a-f]{64}$"


# --- response shapes -----------------------------------------------------------------------------------------------


class ProofEntrySerializer(serializers.Serializer):  # type: ignore[type-arg]
    seq = serializers.IntegerField(min_value=0)
    key_id = serializers.RegexField(r"^ed25519-[0-9a-f]{16}$")
    algo = serializers.ChoiceField(choices=("ed25519",))
    format = serializers.ChoiceField(choices=("acretix-verify/proof/2",))
    prev_hash = serializers.RegexField(HEX64, allow_null=True, help_text="null at seq 0")
    content_hash = serializers.RegexField(HEX64, help_text="sha256 hex of the envelope's UTF-8 bytes")
    signature = serializers.CharField(help_text="standard base64 of Ed25519 over the signing domain + content hash")
    envelope = serializers.CharField(help_text="the canonical JSON (RFC 8785) of the signed body, as a string")


class ProofSerializer(serializers.Serializer):  # type: ignore[type-arg]
    verification_id = serializers.UUIDField()
    format = serializers.ChoiceField(choices=("acretix-verify/proof/2",))
    signing_domain = serializers.ChoiceField(choices=("acretix-verify/proof-sig/2:",))
    jwks_uri = serializers.CharField()
    proof_head_hash = serializers.RegexField(HEX64, help_text="informational: verify against your trusted head")
    entries = ProofEntrySerializer(many=True)


class EnvelopeSerializer(serializers.Serializer):  # type: ignore[type-arg]
    """The head entry's signed body, byte for byte as signed (SPEC §7)."""

    format = serializers.CharField()
    algo = serializers.CharField()
    key_id = serializers.CharField()
    verification_id = serializers.CharField()
    seq = serializers.IntegerField(min_value=0)
    rubric_hash = serializers.CharField()
    submission_hash = serializers.CharField()
    prev_hash = serializers.CharField(allow_null=True)
    payload = serializers.DictField(child=serializers.JSONField(), help_text="the receipt payload (SPEC §7)")
    created_at = serializers.CharField(help_text="RFC 3339 UTC with Z")


def _error(text: str) -> OpenApiResponse:
    return OpenApiResponse(ErrorResponseSerializer, description=text)


PROOF_ERRORS: Final = {
    401: _error("no credentials, or a malformed, unknown or revoked token (not-authenticated)"),
    403: _error("the token lacks verifications:read (scope-denied), or the session is not staff (permission-denied)"),
    404: _error("no such verification, or it has no receipts yet (not-found)"),
    405: _error("method-not-allowed: GET and HEAD only"),
}


# --- the views -------------------------------------------------------------------------------------------------------


def _verification(verification_id: str) -> Verification:
    """The verification named in the path; 404 ``not-found`` (after the access check, which the permission made)."""
    verification = verification_get(verification_id)
    if verification is None:
        raise ApiError(Reason.NOT_FOUND, details={"verification_id": verification_id})
    return verification


def _no_receipts(verification_id: str) -> ApiError:
    return ApiError(
        Reason.NOT_FOUND, "this verification has no receipts yet", details={"verification_id": verification_id}
    )


class ProofReadView(ApiView):
    """Read by a token with ``verifications:read`` or by a staff or admin session (``permissions.ReadsProofs``)."""

    required_scopes = {"GET": PROOF_SCOPE}
    permission_classes = [ReadsProofs]


class ProofView(ProofReadView):
    renderer_classes = [ApiJSONRenderer]  # the proof is written as JSON text (``proof_text``) and served as it is

    @extend_schema(
        operation_id="verifications_proof",
        summary="The proof document of a verification (SPEC §7)",
        description=(
            "Every receipt of the verification's chain, in seq order; verify it offline against your trusted head, "
            "the pinned keys, the expected verification id and submission hash. Needs `verifications:read` or a staff "
            "session."
        ),
        responses={200: ProofSerializer, **PROOF_ERRORS},
    )
    def get(self, request: Request, verification_id: str) -> Response:
        """The proof document, with the server-served ``proof_head_hash``."""
        text = proof_text(_verification(verification_id))
        if text is None:
            raise _no_receipts(verification_id)
        return Response(JSONText(text))


class ProofEnvelopeView(ProofReadView):
    @extend_schema(
        operation_id="verifications_proof_envelope",
        summary="The head entry's envelope: exactly the signed canonical bytes",
        description="`ETag` is the quoted content hash. Needs `verifications:read` or a staff session.",
        responses={
            200: OpenApiResponse(EnvelopeSerializer, description="the signed body, as signed"),
            **PROOF_ERRORS,
        },
    )
    def get(self, request: Request, verification_id: str) -> Any:
        """The head entry's envelope: the signed canonical bytes as they are, never re-rendered."""
        head = head_of(_verification(verification_id))
        if head is None:
            raise _no_receipts(verification_id)
        response = HttpResponse(head.envelope.encode("utf-8"), content_type="application/json")
        response["ETag"] = f'"{head.content_hash}"'
        return response
