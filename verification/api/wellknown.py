"""The public key endpoints (SPEC §7, §8): no authentication, public material only.

- ``/.well-known/acretix-verify/keys.json``: the JWKS of every active and retired key; never a revoked one, never
  a private member.
- ``/.well-known/acretix-verify/revoked.json``: the revoked keys with time and reason.

REST framework views (so the OpenAPI schema describes them) without the API's authentication, permission or
throttle: anyone may fetch them, from anywhere.
"""

from __future__ import annotations

from typing import Any, Final

from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from verification.api.serializers.base import ErrorResponseSerializer
from verification.trust.selectors import jwks_document, revoked_document

#: Keys change only at rotation; revocation must travel faster, so its list is cached for a shorter time.
KEYS_CACHE_CONTROL: Final = "public, max-age=300"
REVOKED_CACHE_CONTROL: Final = "public, max-age=60"
KEY_ID: Final = r"^ed25519-[0-9a-f]{16}$"


class PublicView(APIView):
    # No authentication class, permission or throttle; JSON whatever the Accept header (the API's negotiation). No
    # docstring: the schema would take it as the description of the views that have none.

    authentication_classes: list[Any] = []
    permission_classes: list[Any] = []
    throttle_classes: list[Any] = []
    metadata_class = None

    def perform_authentication(self, request: Request) -> None:
        """Nothing here: REST framework would replace the session's user with AnonymousUser on the Django request."""


def _public(document: dict[str, Any], cache_control: str) -> Response:
    response = Response(document)
    response["Cache-Control"] = cache_control
    response["Access-Control-Allow-Origin"] = "*"  # public keys: any verifier may fetch them from a browser
    return response


# --- response shapes -----------------------------------------------------------------------------------------------


class JwkSerializer(serializers.Serializer):  # type: ignore[type-arg]
    kty = serializers.ChoiceField(choices=("OKP",))
    crv = serializers.ChoiceField(choices=("Ed25519",))
    x = serializers.RegexField(r"^[A-Za-z0-9_-]{43}$", help_text="the raw public key, unpadded base64url")
    kid = serializers.RegexField(KEY_ID)
    use = serializers.ChoiceField(choices=("sig",))
    alg = serializers.ChoiceField(choices=("EdDSA",))


class JwksSerializer(serializers.Serializer):  # type: ignore[type-arg]
    keys = JwkSerializer(many=True)


class RevokedKeySerializer(serializers.Serializer):  # type: ignore[type-arg]
    kid = serializers.RegexField(KEY_ID)
    revoked_at = serializers.CharField(help_text="RFC 3339")
    reason = serializers.CharField(allow_blank=True)


class RevokedSerializer(serializers.Serializer):  # type: ignore[type-arg]
    revoked = RevokedKeySerializer(many=True)


NOT_ALLOWED: Final = OpenApiResponse(ErrorResponseSerializer, description="method-not-allowed: GET and HEAD only")


# --- the views -------------------------------------------------------------------------------------------------------


class KeysView(PublicView):
    @extend_schema(
        operation_id="keys_jwks",
        summary="The portal's public keys (JWKS)",
        description="Active and retired keys of the trust root; never a revoked one, never a private member.",
        responses={200: JwksSerializer, 405: NOT_ALLOWED},
        auth=[],
    )
    def get(self, request: Request) -> Response:
        return _public(jwks_document(), KEYS_CACHE_CONTROL)


class RevokedView(PublicView):
    @extend_schema(
        operation_id="keys_revoked",
        summary="The portal's revoked keys, with time and reason",
        responses={200: RevokedSerializer, 405: NOT_ALLOWED},
        auth=[],
    )
    def get(self, request: Request) -> Response:
        return _public(revoked_document(), REVOKED_CACHE_CONTROL)
