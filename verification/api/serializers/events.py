"""The event feed's bodies: each event, a page of them and the feed's query."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from rest_framework import serializers

from verification.api.serializers.base import StrictSerializer
from verification.api.serializers.verifications import LIST_PAGE_MAX

EVENT_KINDS: Final = (
    "verification.finished",
    "verification.pending",
    "verification.failed",
    "verification.decided",
    "result.received",
    "finding.raised",
)


class EventPayloadSerializer(serializers.Serializer):  # type: ignore[type-arg]
    """What each kind carries (fields not listed for a kind are absent); unlisted fields pass through unchanged."""

    verification_id = serializers.CharField(required=False)
    receipt_id = serializers.CharField(required=False)
    seq = serializers.IntegerField(required=False)
    receipt_kind = serializers.CharField(required=False)
    verdict = serializers.CharField(required=False, allow_null=True)
    determination = serializers.CharField(required=False, allow_null=True)
    flagged = serializers.BooleanField(required=False)
    reason = serializers.CharField(required=False, allow_null=True)
    flag_reason = serializers.CharField(required=False, allow_null=True)
    attempts = serializers.IntegerField(required=False)
    error = serializers.CharField(required=False, allow_null=True)
    criterion = serializers.CharField(required=False)
    actor = serializers.CharField(required=False)
    finding_id = serializers.IntegerField(required=False)
    kind = serializers.CharField(required=False, help_text="finding.raised: the finding's kind")
    refs = serializers.ListField(child=serializers.CharField(), required=False)

    def to_representation(self, instance: Any) -> Any:
        shown = super().to_representation(instance)
        extra = {k: v for k, v in instance.items() if k not in self.fields} if isinstance(instance, Mapping) else {}
        return {**extra, **shown}


class EventSerializer(serializers.Serializer):  # type: ignore[type-arg]
    id = serializers.IntegerField(help_text="the cursor")
    kind = serializers.ChoiceField(choices=EVENT_KINDS)
    verification_id = serializers.UUIDField(allow_null=True)
    created_at = serializers.DateTimeField()
    payload = EventPayloadSerializer()


class EventPageSerializer(serializers.Serializer):  # type: ignore[type-arg]
    events = EventSerializer(many=True)
    next_after = serializers.IntegerField(help_text="pass as after to continue")


class EventsQuerySerializer(StrictSerializer):
    after = serializers.IntegerField(required=False, min_value=0)
    limit = serializers.IntegerField(required=False, min_value=1, max_value=LIST_PAGE_MAX)
