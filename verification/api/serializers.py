"""Request and response bodies of the API: every field named and typed (issue 4 §3), so the OpenAPI schema is
concrete and schemathesis checks mean something.

Request serializers are *validators*: they refuse unknown fields (``unknown-field``), wrong types (no coercion of
numbers into strings or strings into numbers: ``invalid-request``) and bad base64 (``bad-base64``). Where a body is
hashed (a rubric's ``rubric_hash``, a submission's ``submission_hash``) the service receives the body exactly as
parsed, never the serializer's output, so a client can recompute the hash from what it sent (SPEC §7).

No request body names the actor, the authority, the cycle or the contract: those come from the token and the
stored task (SPEC §1). The only exception is ``authority`` in an imported result, kept as the submitter's claim.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Mapping
from datetime import datetime
from typing import Any, Final

from django.conf import settings
from drf_spectacular.utils import PolymorphicProxySerializer, extend_schema_field
from rest_framework import serializers
from rest_framework.exceptions import ErrorDetail, ValidationError

from verification.api.errors import ApiError, status_for, validation_error
from verification.errors import ServiceError
from verification.kernel import limits
from verification.kernel.claims import MAX_CLAIMS
from verification.kernel.criteria import CRITERION_ID_PATTERN
from verification.kernel.digests import is_digest
from verification.kernel.expressions import EXPRESSION_PATTERN, OBSERVABLE_CONTENT_DIGEST, SYMBOL_PATTERN, is_symbol
from verification.kernel.reasons import Reason
from verification.runs.submissions import Binding, Submission, build

MAX_WAIT_MS: Final = 30_000
INLINE_ONLY: Final = frozenset({"media_type", "evidence_type", "collected_at", "max_age_seconds", "expires_at"})
MAX_EVIDENCE_ITEMS: Final = 64
MAX_RESULTS: Final = 64
MAX_CITATIONS: Final = 64
MAX_TEXT: Final = 10_000
ID_MAX: Final = 200

#: What an external verifier may send; MISMATCH is accepted here so the service refuses it with its own code.
IMPORTED_VERDICTS: Final = ("PASS", "FAIL", "MISMATCH", "UNKNOWN", "NOT_RUN")
SEMANTIC_OUTCOMES: Final = ("cited_conflict", "cited_support", "unknown_uncited", "ungrounded", "abstain", "escalate")
EVIDENCE_TYPES: Final = ("artifact", "observation", "attestation", "review", "import")
MUTABILITIES: Final = ("immutable", "versioned", "mutable")
CRITERION_KINDS: Final = ("digest", "unchanged", "semantic", "imported")
TRUST_TIERS: Final = ("deterministic", "source_attested", "third_party", "claimant")
DETERMINATIONS: Final = ("met", "not_met", "cannot_determine", "partial")
STATUSES: Final = ("queued", "running", "succeeded", "failed")
#: Every code an error may carry: the registry's (SPEC §11).
REASON_CODES: Final = tuple(reason.value for reason in Reason)


def max_inline_bytes() -> int:
    return int(settings.REVIEWPORTAL_API_MAX_INLINE_EVIDENCE_BYTES)


# --- strict fields: the wire type or a refusal, never a coercion -----------------------------------------------------


class StrictCharField(serializers.CharField):
    """Text only (a number is not text); no whitespace trimming: what was sent is what is validated."""

    def __init__(self, **kwargs: Any) -> None:
        kwargs.setdefault("trim_whitespace", False)
        super().__init__(**kwargs)

    def to_internal_value(self, data: Any) -> str:
        if not isinstance(data, str):
            self.fail("invalid")
        return str(super().to_internal_value(data))


class StrictIntegerField(serializers.IntegerField):
    """A JSON integer only (not a bool, not a float, not a numeric string)."""

    def to_internal_value(self, data: Any) -> int:
        if isinstance(data, bool) or not isinstance(data, int):
            self.fail("invalid")
        return int(data)


class StrictFloatField(serializers.FloatField):
    """A JSON number (not a bool, not a string)."""

    def to_internal_value(self, data: Any) -> float:
        if isinstance(data, bool) or not isinstance(data, int | float):
            self.fail("invalid")
        return float(super().to_internal_value(data))


class DurationSecondsField(StrictIntegerField):
    """Whole seconds, 1 to 100 years (SPEC §3 "Numbers at the boundary"; the range is ``kernel.limits``')."""

    def __init__(self, **kwargs: Any) -> None:
        kwargs.setdefault("min_value", limits.DURATION_MIN_SECONDS)
        kwargs.setdefault("max_value", limits.DURATION_MAX_SECONDS)
        super().__init__(**kwargs)


@extend_schema_field(
    {"type": "number", "minimum": 0, "exclusiveMinimum": True, "maximum": limits.WEIGHT_MAX, "format": "double"}
)
class WeightField(StrictFloatField):
    """A finite weight above 0 and at most 10^6 (SPEC §3; ``kernel.limits``)."""

    def __init__(self, **kwargs: Any) -> None:
        kwargs.setdefault("max_value", limits.WEIGHT_MAX)
        super().__init__(**kwargs)

    def to_internal_value(self, data: Any) -> float:
        if isinstance(data, bool) or not isinstance(data, int | float):
            self.fail("invalid")
        try:
            return limits.weight(data)
        except limits.OutOfRange as exc:
            raise ValidationError(str(exc)) from None


class StrictUUIDField(serializers.UUIDField):
    """A UUID as text (not a number: REST framework's field would take an integer too)."""

    def to_internal_value(self, data: Any) -> Any:
        if not isinstance(data, str):
            self.fail("invalid", value=data)
        return super().to_internal_value(data)


class StrictBooleanField(serializers.BooleanField):
    """``true`` or ``false`` only."""

    def to_internal_value(self, data: Any) -> bool:
        if not isinstance(data, bool):
            self.fail("invalid")
        return data


class StrictChoiceField(serializers.ChoiceField):
    """One of the listed strings (no coercion of other types)."""

    def to_internal_value(self, data: Any) -> Any:
        if not isinstance(data, str):
            self.fail("invalid_choice", input=data)
        return super().to_internal_value(data)


#: Years 1970..9999 (SPEC §3 "Numbers at the boundary", ``kernel.limits``) as a pattern beside ``format: date-time``.
DATE_TIME_PATTERN: Final = r"^(19[7-9][0-9]|[2-9][0-9]{3})-"


@extend_schema_field({"type": "string", "format": "date-time", "pattern": DATE_TIME_PATTERN})
class StrictDateTimeField(serializers.DateTimeField):
    """An RFC 3339 timestamp with a UTC offset or ``Z``; a naive time is refused (the clock is never guessed)."""

    def to_internal_value(self, value: Any) -> datetime:
        if not isinstance(value, str):
            self.fail("invalid", format="RFC 3339 with a time zone")
        try:
            parsed = datetime.fromisoformat(value)
        except ValueError:
            self.fail("invalid", format="RFC 3339 with a time zone")
        if parsed.tzinfo is None or parsed.utcoffset() is None:
            self.fail("invalid", format="RFC 3339 with a time zone (Z or +hh:mm)")
        try:  # SPEC §3: between 1970 and 9999 in UTC after the offset
            return limits.moment(parsed)
        except limits.OutOfRange as exc:
            raise ValidationError(str(exc)) from None


DIGEST_PATTERN: Final = r"^sha256:[0-9a-f]{64}$"
RUBRIC_HASH_PATTERN: Final = r"^(sha256:)?[0-9a-f]{64}$"
#: Canonical standard base64 (RFC 4648 §4): padded, and the bits below the last character's share are zero, so one
#: byte string has one spelling. ``decode_base64`` is what checks it; this publishes the same grammar.
BASE64_PATTERN: Final = r"^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/][AQgw]==|[A-Za-z0-9+/]{2}[AEIMQUYcgkosw048]=)?$"


def base64_length(decoded: int) -> int:
    """The length of the canonical base64 of ``decoded`` bytes."""
    return 4 * ((decoded + 2) // 3)


@extend_schema_field({"type": "string", "pattern": DIGEST_PATTERN})
class DigestField(StrictCharField):
    """``sha256:<64 lowercase hex>``."""

    def to_internal_value(self, data: Any) -> str:
        value = super().to_internal_value(data)
        if not is_digest(value):
            raise ValidationError('expected "sha256:" followed by 64 lowercase hex digits')
        return value


@extend_schema_field({"type": "string", "pattern": RUBRIC_HASH_PATTERN})
class Hex64Field(StrictCharField):
    """64 lowercase hex digits, optionally prefixed ``sha256:`` (a rubric hash)."""

    def to_internal_value(self, data: Any) -> str:
        value = super().to_internal_value(data)
        bare = value.removeprefix("sha256:")
        if len(bare) != 64 or any(c not in "0123456789abcdef" for c in bare):
            raise ValidationError("expected 64 lowercase hex digits")
        return bare


@extend_schema_field({"type": "string", "pattern": SYMBOL_PATTERN, "maxLength": 64})
class SymbolField(StrictCharField):
    """An evidence symbol as the expression grammar defines it (SPEC §5)."""

    def to_internal_value(self, data: Any) -> str:
        value = super().to_internal_value(data)
        if not is_symbol(value):
            raise ValidationError("not a valid evidence symbol")
        return value


def decode_base64(value: str, *, field: str, limit: int) -> bytes:
    """Standard base64 (RFC 4648 §4, padded, no line breaks) → bytes; ``bad-base64`` or 413 beyond ``limit``."""
    if base64_length(limit) < len(value):
        raise ApiError(
            Reason.PAYLOAD_TOO_LARGE,
            f"{field}: more than {limit} bytes once decoded",
            details={"field": field, "limit_bytes": limit},
        )
    try:
        content = binascii.a2b_base64(value.encode("ascii"), strict_mode=True)
    except (binascii.Error, UnicodeEncodeError, ValueError):
        content = None
    # Canonical only: one spelling per byte string (no excess padding, no stray bits in the last character).
    if content is None or base64.b64encode(content).decode("ascii") != value:
        message = ErrorDetail("not canonical standard base64 (RFC 4648 §4, padded)", code=Reason.BAD_BASE64.value)
        raise ValidationError(message)
    if len(content) > limit:
        raise ApiError(
            Reason.PAYLOAD_TOO_LARGE,
            f"{field}: {len(content)} bytes once decoded; the limit is {limit}",
            details={"field": field, "limit_bytes": limit},
        )
    return content


@extend_schema_field(
    {
        "type": "string",
        "format": "byte",
        "pattern": BASE64_PATTERN,
        "maxLength": base64_length(settings.REVIEWPORTAL_API_MAX_INLINE_EVIDENCE_BYTES),
        "description": "canonical standard base64; more than the limit decoded is 413 payload-too-large",
    }
)
class Base64Field(StrictCharField):
    """Standard base64; decoded to bytes, at most ``REVIEWPORTAL_API_MAX_INLINE_EVIDENCE_BYTES`` (else 413)."""

    def __init__(self, **kwargs: Any) -> None:
        kwargs.setdefault("allow_blank", True)
        super().__init__(**kwargs)

    def run_validation(self, data: Any = serializers.empty) -> Any:
        text = super().run_validation(data)  # a missing optional field never gets here (SkipField)
        return decode_base64(text, field=self.field_name or "", limit=max_inline_bytes())


# --- the strict base -----------------------------------------------------------------------------------------------


class StrictSerializer(serializers.Serializer):  # type: ignore[type-arg]
    """Refuses any key it does not declare, at every depth (``unknown-field``)."""

    def to_internal_value(self, data: Any) -> Any:
        if isinstance(data, Mapping):
            unknown = sorted(str(k) for k in data if k not in self.fields or self.fields[str(k)].read_only)
            if unknown:
                raise ValidationError(
                    {name: [ErrorDetail("unknown field", code=Reason.UNKNOWN_FIELD.value)] for name in unknown}
                )
        return super().to_internal_value(data)


class EmptySerializer(StrictSerializer):
    """An empty JSON object: who does it comes from the token, what it applies to from the URL."""


# --- rubrics (SPEC §5) ---------------------------------------------------------------------------------------------


TIER_NAMES: Final = (*TRUST_TIERS, "T0", "T1", "T2", "T3")


@extend_schema_field({"type": "string", "pattern": CRITERION_ID_PATTERN, "maxLength": 128})
class CriterionIdField(StrictCharField):
    """A criterion id as the registrar takes it (``kernel.criteria``)."""


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


# --- tasks, claims, contracts, links, manifests, baselines (SPEC §1) ---------------------------------------------


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


# --- evidence (SPEC §4) ----------------------------------------------------------------------------------------------


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


# --- verifications (issue 4 §3) ---------------------------------------------------------------------------------------


class BoundByIdSerializer(StrictSerializer):
    """A binding to admitted evidence (the schema's first shape of an evidence binding)."""

    symbol = SymbolField(max_length=128)
    evidence_id = StrictUUIDField(help_text="an id from POST /v1/evidence")
    as_manifest = StrictBooleanField(required=False, help_text="the submitter binds it as its own change manifest")


class BoundInlineSerializer(StrictSerializer):
    """A binding to inline bytes (the schema's second shape of an evidence binding)."""

    symbol = SymbolField(max_length=128)
    content_base64 = Base64Field(help_text="inline bytes, standard base64; at most 1 MiB decoded")
    media_type = StrictCharField(required=False, max_length=200, help_text="default text/plain")
    evidence_type = StrictChoiceField(choices=EVIDENCE_TYPES, required=False)
    collected_at = StrictDateTimeField(required=False, allow_null=True)
    max_age_seconds = DurationSecondsField(required=False, allow_null=True)
    expires_at = StrictDateTimeField(required=False, allow_null=True)
    as_manifest = StrictBooleanField(required=False, help_text="the submitter binds it as its own change manifest")


class EvidenceBindingSerializer(StrictSerializer):
    """Binds an evidence symbol of the contract to admitted evidence (``evidence_id``) or to inline bytes."""

    symbol = SymbolField(max_length=128)
    evidence_id = StrictUUIDField(required=False, help_text="an id from POST /v1/evidence")
    content_base64 = Base64Field(required=False, help_text="inline bytes, standard base64; at most 1 MiB decoded")
    media_type = StrictCharField(required=False, max_length=200, help_text="inline bytes only; default text/plain")
    evidence_type = StrictChoiceField(choices=EVIDENCE_TYPES, required=False, help_text="inline bytes only")
    collected_at = StrictDateTimeField(required=False, allow_null=True, help_text="inline bytes only")
    max_age_seconds = DurationSecondsField(required=False, allow_null=True, help_text="inline bytes only")
    expires_at = StrictDateTimeField(required=False, allow_null=True, help_text="inline bytes only")
    as_manifest = StrictBooleanField(required=False, help_text="the submitter binds it as its own change manifest")

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        if ("evidence_id" in attrs) == ("content_base64" in attrs):
            raise ValidationError("give exactly one of evidence_id and content_base64")
        inline_only = sorted(set(attrs) & INLINE_ONLY)
        if inline_only and "evidence_id" in attrs:
            raise ValidationError(f"{', '.join(inline_only)} describe inline content only")
        return attrs


@extend_schema_field(
    PolymorphicProxySerializer(
        component_name="EvidenceBindingShape",
        serializers=[BoundByIdSerializer, BoundInlineSerializer],
        resource_type_field_name=None,
        many=True,
    )
)
class BindingsField(serializers.ListField):
    """A list of evidence bindings; the schema describes each item as exactly one of the two shapes (what
    ``EvidenceBindingSerializer.validate`` enforces)."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(child=EvidenceBindingSerializer(), max_length=MAX_EVIDENCE_ITEMS, **kwargs)


def bindings_field(**kwargs: Any) -> BindingsField:
    return BindingsField(**kwargs)


class CitationSerializer(StrictSerializer):
    evidence_id = StrictCharField(max_length=ID_MAX)
    start = StrictIntegerField(min_value=0, max_value=limits.OFFSET_MAX, help_text="code-point offset")
    end = StrictIntegerField(min_value=0, max_value=limits.OFFSET_MAX, help_text="code-point offset, exclusive")
    quote = StrictCharField(allow_blank=True, max_length=MAX_TEXT)
    quote_hash = StrictCharField(max_length=100, help_text='"sha256:" + hex(sha256(utf8(quote)))')


class JudgmentFieldsMixin(StrictSerializer):
    outcome = StrictChoiceField(choices=SEMANTIC_OUTCOMES)
    citations = serializers.ListField(child=CitationSerializer(), required=False, max_length=MAX_CITATIONS)
    case_digest = StrictCharField(
        required=False, allow_null=True, max_length=100, help_text="the digest of the task's frozen evaluation case"
    )
    typed_predicate = StrictCharField(required=False, allow_null=True, max_length=MAX_TEXT)
    rationale = StrictCharField(required=False, allow_blank=True, max_length=MAX_TEXT)


class SemanticJudgmentSerializer(JudgmentFieldsMixin):
    """A semantic worker's judgment of one criterion (SPEC §6); the authority ``semantic`` comes from the token."""

    criterion = StrictCharField(max_length=128)


class ClaimSerializer(StrictSerializer):
    """A submitter's own assertion about evidence (SPEC §5): it binds and answers, it never decides."""

    symbol = StrictCharField(max_length=128, help_text="the evidence symbol the claim is about")
    observable = StrictCharField(max_length=200, help_text="evidence.content-digest is the one decidable observable")
    expression = StrictCharField(max_length=MAX_TEXT, help_text='(= <symbol> "sha256:<64 lowercase hex>")')


class ImportedResultSerializer(StrictSerializer):
    """An external verifier's result (authority ``imported`` from the token; never PASS-capable, SPEC §2)."""

    criterion = StrictCharField(max_length=128)
    verdict = StrictChoiceField(
        choices=IMPORTED_VERDICTS, help_text="MISMATCH is refused: only the oracle seam authors one (SPEC §2)"
    )
    detail = StrictCharField(required=False, allow_blank=True, max_length=MAX_TEXT)
    evidence = serializers.ListField(
        child=SymbolField(max_length=128), required=False, max_length=MAX_EVIDENCE_ITEMS,
        help_text="the bound symbols the result relied on",
    )
    authority = StrictCharField(
        required=False, allow_null=True, max_length=200, help_text="kept only as the submitter's claim; decides nothing"
    )
    claims = serializers.ListField(
        child=ClaimSerializer(), required=False, max_length=MAX_CLAIMS,
        help_text="the verifier's own claims about evidence (SPEC §5): classified like a submission's, never deciding",
    )


class ClaimResultSerializer(serializers.Serializer):  # type: ignore[type-arg]
    symbol = serializers.CharField()
    observable = serializers.CharField()
    expression = serializers.CharField()
    verdict = serializers.ChoiceField(choices=("PASS", "FAIL", "UNKNOWN"))
    reason = serializers.CharField(help_text="a registered reason code")
    evidence_id = serializers.CharField(allow_null=True)
    detail = serializers.CharField(allow_blank=True)


class VerificationRequestSerializer(StrictSerializer):
    task = StrictCharField(max_length=ID_MAX, help_text="the subject; its current cycle and contract are the server's")
    evidence = bindings_field(required=False)
    judgments = serializers.ListField(
        child=SemanticJudgmentSerializer(), required=False, max_length=MAX_RESULTS,
        help_text="semantic workers' tokens with the results:write scope only",
    )
    results = serializers.ListField(
        child=ImportedResultSerializer(), required=False, max_length=MAX_RESULTS,
        help_text="external verifiers' tokens with the results:write scope only",
    )
    claims = serializers.ListField(
        child=ClaimSerializer(), required=False, max_length=MAX_CLAIMS,
        help_text="the submitter's own claims (SPEC §5): each answers PASS/FAIL or UNKNOWN with its code",
    )
    wait_ms = StrictIntegerField(
        required=False, min_value=0, max_value=MAX_WAIT_MS,
        help_text="bounded sync: wait up to this long for the result (200), else 202 with Location; not hashed",
    )

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        _each_symbol_once(attrs)
        for name in ("judgments", "results"):
            criteria = [entry["criterion"] for entry in attrs.get(name, ())]
            twice = sorted({c for c in criteria if criteria.count(c) > 1})
            if twice:
                raise ValidationError({name: [f"criterion {twice[0]!r} appears twice"]})
        return attrs


class MoreEvidenceRequestSerializer(StrictSerializer):
    evidence = bindings_field(min_length=1)
    wait_ms = StrictIntegerField(required=False, min_value=0, max_value=MAX_WAIT_MS)

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        _each_symbol_once(attrs)
        return attrs


def _each_symbol_once(attrs: Mapping[str, Any]) -> None:
    symbols = [binding["symbol"] for binding in attrs.get("evidence", ())]
    if len(set(symbols)) != len(symbols):
        raise ValidationError({"evidence": ["each symbol is bound once"]})


def binding_of(attrs: Mapping[str, Any]) -> Binding:
    """A validated binding as the services take it (decoded bytes, aware datetimes, a UUID)."""
    fields = ("media_type", "evidence_type", "collected_at", "max_age_seconds", "expires_at", "as_manifest")
    return Binding(
        symbol=attrs["symbol"],
        evidence_id=attrs.get("evidence_id"),
        content=attrs.get("content_base64"),
        **{name: attrs[name] for name in fields if attrs.get(name) is not None},
    )


def submission_from_validated(raw: Mapping[str, Any], data: Mapping[str, Any]) -> Submission:
    """The typed submission of a body that ``VerificationRequestSerializer`` (or ``MoreEvidenceRequestSerializer``)
    validated: ``raw`` is the body as parsed (what is hashed), ``data`` the serializer's values."""
    return build(
        raw,
        bindings=[binding_of(b) for b in data.get("evidence", ())],
        judgments=_with_raw(data, raw, "judgments"),
        results=_with_raw(data, raw, "results"),
    )


def _with_raw(data: Mapping[str, Any], raw: Mapping[str, Any], name: str) -> list[tuple[str, dict[str, Any]]]:
    """(criterion, the entry as sent): results are stored as they arrived."""
    return [(v["criterion"], dict(r)) for v, r in zip(data.get(name, ()), raw.get(name, ()), strict=True)]


#: In-process callers that send no ``task`` (the service is given the task) still go through the one serializer.
_IN_PROCESS_TASK: Final = "in-process"


def submission_from_body(body: Any, *, more_evidence: bool = False) -> Submission:
    """``body`` validated by the API's serializers, as a ``Submission``: the parser ``VerificationConfig.ready``
    installs for ``verification.runs.submissions.submission_of``; a refusal is a ``ServiceError`` with the code and
    status the API answers."""
    if more_evidence:
        serializer: StrictSerializer = MoreEvidenceRequestSerializer(data=body)
    else:
        data = {"task": _IN_PROCESS_TASK, **body} if isinstance(body, Mapping) else body
        serializer = VerificationRequestSerializer(data=data)
    try:
        serializer.is_valid(raise_exception=True)
    except ValidationError as exc:
        reason, detail, details = validation_error(exc.detail)
        raise ServiceError(reason, detail, status=status_for(reason), details=details) from None
    except ApiError as exc:
        raise ServiceError(exc.reason, exc.text, status=exc.status_code, details=exc.extra) from None
    return submission_from_validated(body, serializer.validated_data)


class ResultRequestSerializer(StrictSerializer):
    """A result for a PENDING criterion: a judgment (``outcome``, from a semantic worker's token) or a verdict (from
    an external verifier's token). Which one the criterion takes is the contract's; who may deliver it, the token's."""

    criterion = StrictCharField(max_length=128)
    outcome = StrictChoiceField(choices=SEMANTIC_OUTCOMES, required=False)
    citations = serializers.ListField(child=CitationSerializer(), required=False, max_length=MAX_CITATIONS)
    case_digest = StrictCharField(required=False, allow_null=True, max_length=100)
    typed_predicate = StrictCharField(required=False, allow_null=True, max_length=MAX_TEXT)
    rationale = StrictCharField(required=False, allow_blank=True, max_length=MAX_TEXT)
    verdict = StrictChoiceField(choices=IMPORTED_VERDICTS, required=False)
    detail = StrictCharField(required=False, allow_blank=True, max_length=MAX_TEXT)
    evidence = serializers.ListField(child=SymbolField(max_length=128), required=False, max_length=MAX_EVIDENCE_ITEMS)
    authority = StrictCharField(required=False, allow_null=True, max_length=200, help_text="a claim only")
    claims = serializers.ListField(
        child=ClaimSerializer(), required=False, max_length=MAX_CLAIMS,
        help_text="an imported result's own claims about evidence (SPEC §5)",
    )

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        if ("outcome" in attrs) == ("verdict" in attrs):
            raise ValidationError("give exactly one of outcome (a semantic judgment) and verdict (an imported result)")
        judgment = {"outcome", "citations", "case_digest", "typed_predicate", "rationale"} & set(attrs)
        imported = {"verdict", "detail", "evidence", "authority", "claims"} & set(attrs)
        if judgment and imported:
            raise ValidationError(f"judgment fields {sorted(judgment)} and result fields {sorted(imported)} do not mix")
        return attrs


#: How the schema describes a result delivery: exactly one of the two shapes (what ``ResultRequestSerializer.validate``
#: enforces), so generated bodies are the ones the endpoint takes.
RESULT_REQUEST: Final = PolymorphicProxySerializer(
    component_name="ResultDelivery",
    serializers=[SemanticJudgmentSerializer, ImportedResultSerializer],
    resource_type_field_name=None,
    many=False,
)


class CaseRequestSerializer(StrictSerializer):
    content = StrictCharField(max_length=1_000_000, help_text="the evaluation case text; its digest is sha256 of UTF-8")


# --- responses: records -----------------------------------------------------------------------------------------------


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


class CaseResponseSerializer(serializers.Serializer):  # type: ignore[type-arg]
    task = serializers.UUIDField(source="task_id")
    digest = serializers.CharField()
    frozen_by = serializers.CharField(source="frozen_by.name")
    frozen_at = serializers.DateTimeField()


# --- responses: errors ------------------------------------------------------------------------------------------------


class ErrorBodySerializer(serializers.Serializer):  # type: ignore[type-arg]
    code = serializers.ChoiceField(
        choices=REASON_CODES, help_text="a registered reason code (SPEC §11)"
    )
    message = serializers.CharField(help_text="the registry's explanation, then the specific detail")
    details = serializers.DictField(
        child=serializers.JSONField(),
        help_text="context by code, e.g. fields (path -> messages), required_scope, limit_bytes, verification_id",
    )


class ErrorResponseSerializer(serializers.Serializer):  # type: ignore[type-arg]
    error = ErrorBodySerializer()


# --- responses: verifications (the second seed's shape, plus ours) ----------------------------------------------------

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


# --- responses: the event feed ----------------------------------------------------------------------------------------

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
