"""Task bodies: tasks, claims, contracts, links, change manifests, baselines and frozen cases."""

from __future__ import annotations

from typing import Any

from rest_framework import serializers

from verification.api.serializers.base import (
    ID_MAX,
    DigestField,
    Hex64Field,
    StrictBooleanField,
    StrictCharField,
    StrictSerializer,
    SymbolField,
)


class TaskRequestSerializer(StrictSerializer):
    title = StrictCharField(max_length=500)
    external_ref = StrictCharField(required=False, allow_blank=True, max_length=500)


class ContractRequestSerializer(StrictSerializer):
    rubric_hash = Hex64Field(help_text="a registered rubric's hash")


class LinkRequestSerializer(StrictSerializer):
    task = StrictCharField(max_length=ID_MAX)
    commit_id = StrictCharField(max_length=ID_MAX)
    committing_actor = StrictCharField(
        max_length=ID_MAX, allow_blank=True, help_text="an actor's name; an unknown name is recorded as unnamed"
    )
    superseded = StrictBooleanField(required=False)


class ManifestRequestSerializer(StrictSerializer):
    task = StrictCharField(max_length=ID_MAX)
    evidence_id = StrictCharField(max_length=ID_MAX, help_text="the admitted evidence holding the manifest")


class BaselineRequestSerializer(StrictSerializer):
    task = StrictCharField(max_length=ID_MAX)
    artifact_key = SymbolField(max_length=128, help_text="the evidence symbol the baseline stands for")
    digest = DigestField()


class CaseRequestSerializer(StrictSerializer):
    content = StrictCharField(max_length=1_000_000, help_text="the evaluation case text; its digest is sha256 of UTF-8")


class TaskResponseSerializer(serializers.Serializer):  # type: ignore[type-arg]
    id = serializers.UUIDField()
    title = serializers.CharField()
    external_ref = serializers.CharField()
    cycle = serializers.IntegerField(help_text="the current cycle (1 for a new task)")
    created_by = serializers.CharField(allow_null=True)
    created_at = serializers.DateTimeField()


class CycleResponseSerializer(serializers.Serializer):  # type: ignore[type-arg]
    task = serializers.UUIDField(source="task_id")
    cycle = serializers.IntegerField(source="number")
    opened_by = serializers.CharField(source="opened_by.name", allow_null=True, default=None)
    opened_at = serializers.DateTimeField()


class ClaimResponseSerializer(serializers.Serializer):  # type: ignore[type-arg]
    id = serializers.IntegerField()
    task = serializers.UUIDField(source="task_id")
    cycle = serializers.IntegerField()
    actor = serializers.CharField(source="actor.name")
    boundary = serializers.CharField()
    claimed_at = serializers.DateTimeField()


class ContractResponseSerializer(serializers.Serializer):  # type: ignore[type-arg]
    id = serializers.IntegerField()
    task = serializers.UUIDField(source="task_id")
    cycle = serializers.IntegerField()
    rubric_hash = serializers.CharField(source="rubric_id")
    accepted_by = serializers.CharField(source="accepted_by.name")
    accepted_at = serializers.DateTimeField()


class LinkResponseSerializer(serializers.Serializer):  # type: ignore[type-arg]
    id = serializers.IntegerField()
    task = serializers.UUIDField(source="task_id")
    commit_id = serializers.CharField()
    committing_actor = serializers.CharField(source="committing_actor_name", help_text="as reported")
    committing_actor_known = serializers.SerializerMethodField(
        help_text="false: the name is no actor we know, so the committer counts as unnamed"
    )
    superseded = serializers.BooleanField()
    reported_by = serializers.CharField(source="reported_by.name")
    created_at = serializers.DateTimeField()

    def get_committing_actor_known(self, obj: Any) -> bool:
        return obj.committing_actor_id is not None


class ManifestResponseSerializer(serializers.Serializer):  # type: ignore[type-arg]
    id = serializers.IntegerField()
    task = serializers.UUIDField(source="task_id")
    evidence_id = serializers.UUIDField()
    reported_by = serializers.CharField(source="reported_by.name")
    reported_boundary = serializers.CharField()
    created_at = serializers.DateTimeField()


class BaselineResponseSerializer(serializers.Serializer):  # type: ignore[type-arg]
    id = serializers.IntegerField()
    task = serializers.UUIDField(source="task_id")
    cycle = serializers.IntegerField()
    artifact_key = serializers.CharField()
    digest = serializers.CharField()
    captured_at = serializers.DateTimeField()
    reporter = serializers.CharField(source="reporter.name")


class CaseResponseSerializer(serializers.Serializer):  # type: ignore[type-arg]
    task = serializers.UUIDField(source="task_id")
    digest = serializers.CharField()
    frozen_by = serializers.CharField(source="frozen_by.name")
    frozen_at = serializers.DateTimeField()
