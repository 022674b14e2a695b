"""Verification answers: the second seed's shape plus ours, and the list's page and filters."""

from __future__ import annotations

from typing import Final

from rest_framework import serializers

from verification.api.serializers.base import DETERMINATIONS, ID_MAX, STATUSES, TRUST_TIERS, StrictSerializer
from verification.api.serializers.submissions import ClaimResultSerializer

RESULT_VERDICTS: Final = ("PASS", "FAIL", "MISMATCH", "UNKNOWN", "NOT_RUN", "PENDING")


LIST_PAGE_MAX: Final = 200


class EvidenceSpanSerializer(serializers.Serializer):  # type: ignore[type-arg]
    evidence_id = serializers.CharField()
    trust_tier = serializers.ChoiceField(choices=TRUST_TIERS, allow_null=True, help_text="server-derived (SPEC §4)")
    sha256 = serializers.CharField(allow_null=True)
    symbol = serializers.CharField(allow_null=True)
    start = serializers.IntegerField(required=False, allow_null=True, help_text="a cited span only")
    end = serializers.IntegerField(required=False, allow_null=True, help_text="a cited span only")
    quote_hash = serializers.CharField(required=False, allow_null=True, help_text="a cited span only")


class CriterionResultSerializer(serializers.Serializer):  # type: ignore[type-arg]
    criterion = serializers.CharField()
    primitive = serializers.CharField(help_text="e.g. content_digest@1, semantic_judge@1, imported_result@1")
    determination = serializers.ChoiceField(choices=DETERMINATIONS, allow_null=True)
    rationale = serializers.CharField()
    evidence_spans = EvidenceSpanSerializer(many=True)
    flagged = serializers.BooleanField()
    verdict = serializers.ChoiceField(choices=RESULT_VERDICTS, help_text="the kernel verdict, read now")
    reason = serializers.CharField(help_text="a registered reason code")
    authority = serializers.CharField(help_text="deterministic, human, semantic or imported: assigned, never declared")
    hard = serializers.BooleanField()
    deadline = serializers.CharField(allow_null=True, help_text="a PENDING check's deadline (RFC 3339)")
    on_expiry = serializers.CharField(allow_null=True, help_text="its verdict after the deadline")


class VerdictSerializer(serializers.Serializer):  # type: ignore[type-arg]
    results = CriterionResultSerializer(many=True)


class VerificationResponseSerializer(serializers.Serializer):  # type: ignore[type-arg]
    """The second seed's shape; the automation gate is status succeeded, determination met, flagged false, and a
    proof that verifies against the request you expected."""

    id = serializers.UUIDField()
    status = serializers.ChoiceField(choices=STATUSES)
    determination = serializers.ChoiceField(choices=DETERMINATIONS, allow_null=True)
    score = serializers.FloatField(allow_null=True)
    confidence = serializers.FloatField(allow_null=True)
    flagged = serializers.BooleanField()
    flag_reason = serializers.CharField(allow_null=True)
    submission_hash = serializers.CharField()
    proof_ref = serializers.CharField()
    verdict = VerdictSerializer()
    kernel_verdict = serializers.ChoiceField(choices=RESULT_VERDICTS, allow_null=True)
    reason = serializers.CharField(allow_null=True)
    reason_text = serializers.CharField(allow_null=True)
    task = serializers.UUIDField(allow_null=True)
    cycle = serializers.IntegerField(allow_null=True)
    rubric_hash = serializers.CharField()
    submitted_at = serializers.CharField(help_text="RFC 3339 UTC")
    submitted_by = serializers.CharField(allow_null=True)
    attempts = serializers.IntegerField()
    last_error = serializers.CharField(allow_null=True)
    head_receipt_id = serializers.CharField(allow_null=True)
    head_receipt_kind = serializers.CharField(allow_null=True)
    supersedes = serializers.UUIDField(allow_null=True)
    awaiting_evidence = serializers.BooleanField()
    human_decided = serializers.BooleanField()
    claims = ClaimResultSerializer(many=True, help_text="the submission's claims as they answered (SPEC §5)")


class VerificationPageSerializer(serializers.Serializer):  # type: ignore[type-arg]
    results = VerificationResponseSerializer(many=True)
    next_cursor = serializers.CharField(allow_null=True, help_text="pass as cursor for the next page; null at the end")


class VerificationListQuerySerializer(StrictSerializer):
    task = serializers.CharField(required=False, max_length=ID_MAX)
    cycle = serializers.IntegerField(required=False, min_value=0)
    status = serializers.ChoiceField(choices=STATUSES, required=False)
    determination = serializers.ChoiceField(choices=DETERMINATIONS, required=False)
    verdict = serializers.ChoiceField(choices=RESULT_VERDICTS, required=False)
    flagged = serializers.ChoiceField(choices=("true", "false"), required=False)
    submitted_by = serializers.CharField(required=False, max_length=ID_MAX)
    rubric_hash = serializers.CharField(required=False, max_length=ID_MAX)
    cursor = serializers.CharField(required=False, max_length=500)
    limit = serializers.IntegerField(required=False, min_value=1, max_value=LIST_PAGE_MAX)
