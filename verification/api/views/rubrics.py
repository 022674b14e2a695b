"""``/v1/rubrics``: registering a rubric (idempotent by its hash)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from drf_spectacular.utils import extend_schema
from rest_framework.request import Request
from rest_framework.response import Response

from verification.api.serializers.rubrics import RubricRequestSerializer, RubricResponseSerializer
from verification.api.views.common import (
    TOKEN_ONLY,
    WRITE_ERRORS,
    ApiView,
    error_responses,
    scopes_text,
    write_of,
)
from verification.kernel.criteria import rubric_hash
from verification.kernel.errors import KernelError
from verification.runs.models import Rubric
from verification.runs.services import rubrics as rubric_services


class RubricsView(ApiView):
    required_scopes = {"POST": "rubrics:write"}

    @extend_schema(
        operation_id="rubrics_register",
        summary="Register a rubric",
        description=(
            "Registers a rubric and returns its `rubric_hash` (sha256 hex of the canonical JSON as sent) and the "
            "falsifiability witnesses the registrar ran. Obligations that cannot fail are refused "
            "(422 `obligation-not-falsifiable`, `details.sub_reason`). Registering the same document again returns "
            "the stored rubric (200). " + scopes_text("rubrics:write")
        ),
        request=RubricRequestSerializer,
        responses={201: RubricResponseSerializer, 200: RubricResponseSerializer, **error_responses(*WRITE_ERRORS)},
        auth=TOKEN_ONLY,
    )
    def post(self, request: Request) -> Response:
        write = write_of(request, RubricRequestSerializer)
        known = _registered_already(write.raw)
        rubric = rubric_services.rubric_register(actor=write.actor, document=write.raw)
        body = RubricResponseSerializer(
            {
                "rubric_hash": rubric.rubric_hash,
                "name": rubric.name,
                "criteria": len(write.raw.get("criteria", ())),
                "witnesses": rubric.witnesses,
                "created": not known,
            }
        ).data
        return Response(body, status=200 if known else 201)


def _registered_already(document: Mapping[str, Any]) -> bool:
    """Whether the document's hash is registered already (200 rather than 201); False when it has no hash."""
    try:
        digest = rubric_hash(document)
    except KernelError:
        return False
    return Rubric.objects.filter(rubric_hash=digest).exists()
