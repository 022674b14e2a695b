"""``/v1/evidence``: admitting an evidence item."""

from __future__ import annotations

from typing import Final

from drf_spectacular.utils import extend_schema
from rest_framework.request import Request
from rest_framework.response import Response

from verification.api.serializers.evidence import EvidenceRequestSerializer, EvidenceResponseSerializer
from verification.api.views.common import (
    TOKEN_ONLY,
    WRITE_ERRORS,
    ApiView,
    created_response,
    error_responses,
    scopes_text,
    task_or_404,
    write_of,
)
from verification.evidence import services as evidence_services

EVIDENCE_OPTIONS: Final = (
    "media_type",
    "evidence_type",
    "mutability",
    "collected_at",
    "max_age_seconds",
    "expires_at",
    "custody",
)


class EvidenceView(ApiView):
    required_scopes = {"POST": "evidence:write"}

    @extend_schema(
        operation_id="evidence_admit",
        summary="Admit evidence",
        description=(
            "Bytes (standard base64, at most 1 MiB decoded) are stored by their sha256. The trust tier is derived by "
            "the server: a detached Ed25519 source signature (`source_signature_base64` + `source_key_id`) that "
            "verifies under a key pinned for `evidence-source` makes the item `source_attested`; one that does not is "
            "refused (422 `source-signature-invalid`). " + scopes_text("evidence:write")
        ),
        request=EvidenceRequestSerializer,
        responses={201: EvidenceResponseSerializer, **error_responses(*WRITE_ERRORS)},
        auth=TOKEN_ONLY,
    )
    def post(self, request: Request) -> Response:
        write = write_of(request, EvidenceRequestSerializer)
        task = task_or_404(write.data["task"]) if write.data.get("task") is not None else None
        options = {name: write.data[name] for name in EVIDENCE_OPTIONS if write.data.get(name) is not None}
        evidence = evidence_services.evidence_admit(
            actor=write.actor,
            token=write.token,
            content=write.data["content_base64"],
            task=task,
            source_signature=write.data.get("source_signature_base64"),
            source_key_id=write.data.get("source_key_id"),
            **options,
        )
        return created_response(EvidenceResponseSerializer(evidence))
