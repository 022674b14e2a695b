"""Submission bodies (SPEC §1, §6): evidence bindings, judgments, imported results, claims, delivered results."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from drf_spectacular.utils import PolymorphicProxySerializer, extend_schema_field
from rest_framework import serializers
from rest_framework.exceptions import ValidationError

from verification.api.errors import ApiError, status_for, validation_error
from verification.api.serializers.base import (
    EVIDENCE_TYPES,
    ID_MAX,
    IMPORTED_VERDICTS,
    MAX_TEXT,
    SEMANTIC_OUTCOMES,
    Base64Field,
    DurationSecondsField,
    StrictBooleanField,
    StrictCharField,
    StrictChoiceField,
    StrictDateTimeField,
    StrictIntegerField,
    StrictSerializer,
    StrictUUIDField,
    SymbolField,
    validated_data_of,
)
from verification.errors import ServiceError
from verification.kernel import limits
from verification.kernel.claims import MAX_CLAIMS
from verification.runs.submissions import Binding, Submission, build

MAX_WAIT_MS: Final = 30_000


INLINE_ONLY: Final = frozenset({"media_type", "evidence_type", "collected_at", "max_age_seconds", "expires_at"})


MAX_EVIDENCE_ITEMS: Final = 64


MAX_RESULTS: Final = 64


MAX_CITATIONS: Final = 64


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
        child=SymbolField(max_length=128),
        required=False,
        max_length=MAX_EVIDENCE_ITEMS,
        help_text="the bound symbols the result relied on",
    )
    authority = StrictCharField(
        required=False, allow_null=True, max_length=200, help_text="kept only as the submitter's claim; decides nothing"
    )
    claims = serializers.ListField(
        child=ClaimSerializer(),
        required=False,
        max_length=MAX_CLAIMS,
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
        child=SemanticJudgmentSerializer(),
        required=False,
        max_length=MAX_RESULTS,
        help_text="semantic workers' tokens with the results:write scope only",
    )
    results = serializers.ListField(
        child=ImportedResultSerializer(),
        required=False,
        max_length=MAX_RESULTS,
        help_text="external verifiers' tokens with the results:write scope only",
    )
    claims = serializers.ListField(
        child=ClaimSerializer(),
        required=False,
        max_length=MAX_CLAIMS,
        help_text="the submitter's own claims (SPEC §5): each answers PASS/FAIL or UNKNOWN with its code",
    )
    wait_ms = StrictIntegerField(
        required=False,
        min_value=0,
        max_value=MAX_WAIT_MS,
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
        serializer_class: type[StrictSerializer] = MoreEvidenceRequestSerializer
        data = body
    else:
        serializer_class = VerificationRequestSerializer
        data = {"task": _IN_PROCESS_TASK, **body} if isinstance(body, Mapping) else body
    try:
        validated = validated_data_of(serializer_class, data)
    except ValidationError as exc:
        reason, detail, details = validation_error(exc.detail)
        raise ServiceError(reason, detail, status=status_for(reason), details=details) from None
    except ApiError as exc:
        raise ServiceError(exc.reason, exc.text, status=exc.status_code, details=exc.extra) from None
    return submission_from_validated(body, validated)


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
        child=ClaimSerializer(),
        required=False,
        max_length=MAX_CLAIMS,
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
