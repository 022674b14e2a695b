"""Rubric bodies: the criteria (one shape per kind), evidence policy and the registration's answer."""

from __future__ import annotations

from typing import Any, Final

from drf_spectacular.utils import PolymorphicProxySerializer, extend_schema_field
from rest_framework import serializers

from verification.api.serializers.base import (
    CRITERION_KINDS,
    MAX_TEXT,
    TRUST_TIERS,
    CriterionIdField,
    DurationSecondsField,
    StrictBooleanField,
    StrictCharField,
    StrictChoiceField,
    StrictSerializer,
    SymbolField,
    WeightField,
)
from verification.kernel.expressions import EXPRESSION_PATTERN, OBSERVABLE_CONTENT_DIGEST

TIER_NAMES: Final = (*TRUST_TIERS, "T0", "T1", "T2", "T3")


class EvidencePolicySerializer(StrictSerializer):
    min_trust_tier = StrictChoiceField(
        choices=TIER_NAMES, required=False, allow_null=True, help_text="T0..T3 or deterministic, ..."
    )
    max_age_seconds = DurationSecondsField(required=False, allow_null=True)


class RubricCriterionSerializer(StrictSerializer):
    id = CriterionIdField(max_length=128)
    kind = StrictChoiceField(choices=CRITERION_KINDS)
    hard = StrictBooleanField(required=False, help_text="default true")
    weight = WeightField(required=False, help_text="a finite number above 0, at most 10^6; default 1")
    observable = StrictCharField(
        required=False, allow_null=True, help_text="only evidence.content-digest is decidable (SPEC §5)"
    )
    expression = StrictCharField(
        required=False, allow_null=True, max_length=MAX_TEXT, help_text='(= <symbol> "sha256:<64 hex>")'
    )
    symbol = StrictCharField(required=False, allow_null=True, max_length=128)
    policy = EvidencePolicySerializer(required=False, allow_null=True)
    deadline_seconds = DurationSecondsField(required=False, allow_null=True)
    on_expiry = StrictCharField(required=False, allow_null=True, help_text="UNKNOWN (default), FAIL or NOT_RUN")
    description = StrictCharField(required=False, allow_blank=True, max_length=MAX_TEXT)


EXPIRY_VERDICTS: Final = ("UNKNOWN", "FAIL", "NOT_RUN")


@extend_schema_field({"type": "string", "pattern": EXPRESSION_PATTERN, "maxLength": MAX_TEXT})
class ExpressionField(StrictCharField):
    """The decidable expression (``kernel.expressions``); anything else is refused at registration (422)."""


DIGEST_KIND: Final = ("digest",)


UNCHANGED_KIND: Final = ("unchanged",)


AWAITED_KINDS: Final = ("semantic", "imported")


def kind_field(*values: str) -> StrictChoiceField:
    """A choice among ``values``, published inline (no shared enum component: each shape names its own kinds)."""
    field_class = extend_schema_field({"type": "string", "enum": list(values)})(
        type("KindField", (StrictChoiceField,), {})
    )
    field: StrictChoiceField = field_class(choices=values)
    return field


class _CriterionCommon(StrictSerializer):
    id = CriterionIdField(max_length=128)
    hard = StrictBooleanField(required=False, help_text="default true")
    weight = WeightField(required=False, help_text="a finite number above 0, at most 10^6; default 1")
    policy = EvidencePolicySerializer(required=False, allow_null=True)
    description = StrictCharField(required=False, allow_blank=True, max_length=MAX_TEXT)


class DigestCriterionSerializer(_CriterionCommon):
    """``digest``: the one decidable observable and its expression (SPEC §5); witnessed at registration."""

    kind = kind_field(*DIGEST_KIND)
    observable = StrictChoiceField(choices=(OBSERVABLE_CONTENT_DIGEST,))
    expression = ExpressionField(max_length=MAX_TEXT, help_text='(= <symbol> "sha256:<64 hex>")')


class UnchangedCriterionSerializer(_CriterionCommon):
    """``unchanged``: the oracle seam over the bound artifact's authoritative baseline (SPEC §5)."""

    kind = kind_field(*UNCHANGED_KIND)
    symbol = SymbolField(max_length=128)


class AwaitedCriterionSerializer(_CriterionCommon):
    """``semantic`` / ``imported`` answered when the result arrives, without a deadline."""

    kind = kind_field(*AWAITED_KINDS)


class PendingCriterionSerializer(AwaitedCriterionSerializer):
    """``semantic`` / ``imported`` PENDING until its result arrives or ``deadline_seconds`` pass (SPEC §2)."""

    deadline_seconds = DurationSecondsField()
    on_expiry = StrictChoiceField(choices=EXPIRY_VERDICTS)


#: The schema's criterion: exactly one of the shapes the registrar accepts (the registrar refuses the rest, 422).
CRITERION_SHAPES: Final = PolymorphicProxySerializer(
    component_name="Criterion",
    serializers=[
        DigestCriterionSerializer,
        UnchangedCriterionSerializer,
        AwaitedCriterionSerializer,
        PendingCriterionSerializer,
    ],
    resource_type_field_name=None,
    many=True,
)


@extend_schema_field(CRITERION_SHAPES)
class CriteriaField(serializers.ListField):
    def __init__(self, **kwargs: Any) -> None:
        super().__init__(child=RubricCriterionSerializer(), min_length=1, max_length=256, **kwargs)


class RubricRequestSerializer(StrictSerializer):
    """The rubric document; its ``rubric_hash`` is the sha256 of its canonical JSON (RFC 8785) as sent."""

    name = StrictCharField(max_length=200)
    description = StrictCharField(required=False, allow_blank=True, max_length=MAX_TEXT)
    criteria = CriteriaField()


class WitnessSerializer(serializers.Serializer):  # type: ignore[type-arg]
    criterion_id = serializers.CharField()
    witness_digest = serializers.CharField(help_text="sha256 of the bytes the registrar ran the predicate over")
    outcome = serializers.CharField(help_text="FAIL: the obligation can fail")


class RubricResponseSerializer(serializers.Serializer):  # type: ignore[type-arg]
    rubric_hash = serializers.CharField()
    name = serializers.CharField()
    criteria = serializers.IntegerField(help_text="the number of criteria")
    witnesses = WitnessSerializer(many=True)
    created = serializers.BooleanField(help_text="false when the same rubric was registered before")
