"""Evidence bodies: an admitted item, inline in base64, and its record."""

from __future__ import annotations

from typing import Any

from rest_framework import serializers
from rest_framework.exceptions import ValidationError

from verification.api.serializers.base import (
    EVIDENCE_TYPES,
    ID_MAX,
    MUTABILITIES,
    TRUST_TIERS,
    Base64Field,
    DurationSecondsField,
    StrictCharField,
    StrictChoiceField,
    StrictDateTimeField,
    StrictSerializer,
    decode_base64,
)


class EvidenceRequestSerializer(StrictSerializer):
    content_base64 = Base64Field(help_text="the bytes, standard base64; at most 1 MiB decoded")
    media_type = StrictCharField(required=False, max_length=200)
    evidence_type = StrictChoiceField(choices=EVIDENCE_TYPES, required=False)
    mutability = StrictChoiceField(choices=MUTABILITIES, required=False)
    collected_at = StrictDateTimeField(required=False, allow_null=True)
    max_age_seconds = DurationSecondsField(required=False, allow_null=True)
    expires_at = StrictDateTimeField(required=False, allow_null=True)
    custody = StrictCharField(required=False, allow_blank=True, max_length=300)
    task = StrictCharField(required=False, allow_null=True, max_length=ID_MAX)
    source_signature_base64 = StrictCharField(
        required=False, allow_null=True, max_length=200, help_text="detached Ed25519 signature over the bytes"
    )
    source_key_id = StrictCharField(required=False, allow_null=True, max_length=64)

    def validate_source_signature_base64(self, value: str | None) -> bytes | None:
        return None if value is None else decode_base64(value, field="source_signature_base64", limit=128)

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        if (attrs.get("source_signature_base64") is None) != (attrs.get("source_key_id") is None):
            raise ValidationError("source_signature_base64 and source_key_id come together")
        return attrs


class EvidenceResponseSerializer(serializers.Serializer):  # type: ignore[type-arg]
    id = serializers.UUIDField()
    digest = serializers.CharField(help_text="sha256:<hex> of the bytes, recorded at admission")
    size = serializers.IntegerField()
    media_type = serializers.CharField()
    evidence_type = serializers.CharField()
    admission_source = serializers.CharField(help_text="from the admitting actor's kind, never from the request")
    mutability = serializers.CharField()
    trust_tier = serializers.ChoiceField(choices=TRUST_TIERS, help_text="derived by the server (SPEC §4)")
    collected_at = serializers.DateTimeField(allow_null=True)
    max_age_seconds = serializers.IntegerField(allow_null=True)
    expires_at = serializers.DateTimeField(allow_null=True)
    custody = serializers.CharField()
    admitted_by = serializers.CharField(source="admitted_by.name")
    admitted_at = serializers.DateTimeField()
    source_key_id = serializers.CharField()
    source_verified = serializers.BooleanField()
    task = serializers.UUIDField(source="task_id", allow_null=True)
