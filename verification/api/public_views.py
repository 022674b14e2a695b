"""The proof and well-known key endpoints as REST framework views, so the OpenAPI schema describes them (issue 13
item 4). Each delegates to its function in ``verification.api.proofs`` / ``verification.api.wellknown``, which
keep their own access rules (a bearer token with ``verifications:read`` or a staff session for proofs; nothing for
the public keys): no authentication class, permission or throttle of the API runs in front of them, and the answer
is whatever the function answers (JSON whatever the ``Accept`` header says, as before).
"""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import serializers
from rest_framework.negotiation import BaseContentNegotiation
from rest_framework.request import Request
from rest_framework.views import APIView

from verification.api import proofs as views_proofs
from verification.api import wellknown as views_wellknown
from verification.api.serializers.base import ErrorResponseSerializer

HEX64 = r"^[0-9a-f]{64}$"


class FirstRenderer(BaseContentNegotiation):
    """These endpoints answer JSON whatever the client accepts (never 406): the functions render it themselves."""

    def select_parser(self, request: Request, parsers: Any) -> Any:
        return parsers[0] if parsers else None

    def select_renderer(self, request: Request, renderers: Any, format_suffix: Any = None) -> Any:
        return renderers[0], renderers[0].media_type


class PublicView(APIView):
    authentication_classes: list[Any] = []
    permission_classes: list[Any] = []
    throttle_classes: list[Any] = []
    content_negotiation_class = FirstRenderer
    metadata_class = None

    def perform_authentication(self, request: Request) -> None:
        """Nothing here: REST framework would replace the session's user with AnonymousUser on the Django request
        that the function reads (it authenticates by itself)."""


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


class JwkSerializer(serializers.Serializer):  # type: ignore[type-arg]
    kty = serializers.ChoiceField(choices=("OKP",))
    crv = serializers.ChoiceField(choices=("Ed25519",))
    x = serializers.RegexField(r"^[A-Za-z0-9_-]{43}$", help_text="the raw public key, unpadded base64url")
    kid = serializers.RegexField(r"^ed25519-[0-9a-f]{16}$")
    use = serializers.ChoiceField(choices=("sig",))
    alg = serializers.ChoiceField(choices=("EdDSA",))


class JwksSerializer(serializers.Serializer):  # type: ignore[type-arg]
    keys = JwkSerializer(many=True)


class RevokedKeySerializer(serializers.Serializer):  # type: ignore[type-arg]
    kid = serializers.RegexField(r"^ed25519-[0-9a-f]{16}$")
    revoked_at = serializers.CharField(help_text="RFC 3339")
    reason = serializers.CharField(allow_blank=True)


class RevokedSerializer(serializers.Serializer):  # type: ignore[type-arg]
    revoked = RevokedKeySerializer(many=True)


def _error(text: str) -> OpenApiResponse:
    return OpenApiResponse(ErrorResponseSerializer, description=text)


PROOF_ERRORS = {
    401: _error("no credentials, or a malformed, unknown or revoked token (not-authenticated)"),
    403: _error("the token lacks verifications:read (scope-denied), or the session is not staff (permission-denied)"),
    404: _error("no such verification, or it has no receipts yet (not-found)"),
    405: _error("method-not-allowed: GET and HEAD only"),
}
PROOF_AUTH = [{"bearerAuth": []}, {"portalSession": []}]


# --- the views -------------------------------------------------------------------------------------------------------


class ProofView(PublicView):
    @extend_schema(
        operation_id="verifications_proof",
        summary="The proof document of a verification (SPEC §7)",
        description=(
            "Every receipt of the verification's chain, in seq order; verify it offline against your trusted head, "
            "the pinned keys, the expected verification id and submission hash. Needs `verifications:read` or a staff "
            "session."
        ),
        responses={200: ProofSerializer, **PROOF_ERRORS},
        auth=PROOF_AUTH,
    )
    def get(self, request: Request, verification_id: str) -> Any:
        return views_proofs.proof(request._request, verification_id)


class ProofEnvelopeView(PublicView):
    @extend_schema(
        operation_id="verifications_proof_envelope",
        summary="The head entry's envelope: exactly the signed canonical bytes",
        description="`ETag` is the quoted content hash. Needs `verifications:read` or a staff session.",
        responses={
            200: OpenApiResponse(EnvelopeSerializer, description="the signed body, as signed"),
            **PROOF_ERRORS,
        },
        auth=PROOF_AUTH,
    )
    def get(self, request: Request, verification_id: str) -> Any:
        return views_proofs.proof_envelope(request._request, verification_id)


class KeysView(PublicView):
    @extend_schema(
        operation_id="keys_jwks",
        summary="The portal's public keys (JWKS)",
        description="Active and retired keys of the trust root; never a revoked one, never a private member.",
        responses={200: JwksSerializer, 405: PROOF_ERRORS[405]},
        auth=[],
    )
    def get(self, request: Request) -> Any:
        return views_wellknown.keys_json(request._request)


class RevokedView(PublicView):
    @extend_schema(
        operation_id="keys_revoked",
        summary="The portal's revoked keys, with time and reason",
        responses={200: RevokedSerializer, 405: PROOF_ERRORS[405]},
        auth=[],
    )
    def get(self, request: Request) -> Any:
        return views_wellknown.revoked_json(request._request)
