"""The strict fields and serializer every API body is built from, the wire vocabularies and the error body."""

from __future__ import annotations

import base64
import binascii
import contextlib
import threading
from collections.abc import Iterator, Mapping
from datetime import datetime
from typing import Any, Final

from django.conf import settings
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers
from rest_framework.exceptions import ErrorDetail, ValidationError

from verification.api.errors import ApiError
from verification.kernel import limits
from verification.kernel.criteria import CRITERION_ID_PATTERN
from verification.kernel.digests import is_digest
from verification.kernel.expressions import SYMBOL_PATTERN, is_symbol
from verification.kernel.reasons import Reason

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


class _Reused(threading.local):
    """Per thread, one bound instance of each serializer class, reused by ``validated_data_of`` and
    ``represented``."""

    def __init__(self) -> None:
        self.idle: dict[type[serializers.Serializer], serializers.Serializer] = {}  # type: ignore[type-arg]


_REUSED: Final = _Reused()

#: The state ``Serializer.is_valid``, ``.data`` and their properties leave on an instance; cleared before and after
#: the instance is used.
_PER_CALL_STATE: Final = ("initial_data", "_validated_data", "_errors", "_data")


@contextlib.contextmanager
def _reused(serializer_class: type[serializers.Serializer]) -> Iterator[serializers.Serializer]:  # type: ignore[type-arg]
    """A bound ``serializer_class`` with no per-call state, for one call; kept for the thread's next call after it.

    A new serializer deep-copies its whole declared field tree (nested serializers included) before it reads a byte:
    1.4-2.1 ms for a submission against 0.2 ms for its validation, ~2 ms of a verification's view. The bound tree
    holds no per-call state and these serializers take no context, so each thread keeps one instance per class; a
    nested call (the instance already in use) builds its own."""
    serializer = _REUSED.idle.pop(serializer_class, None)
    if serializer is None:
        serializer = serializer_class()
    for name in _PER_CALL_STATE:
        serializer.__dict__.pop(name, None)
    try:
        yield serializer
    finally:
        for name in _PER_CALL_STATE:  # hold no reference to the body, the instance or their values between calls
            serializer.__dict__.pop(name, None)
        serializer.instance = None
        _REUSED.idle[serializer_class] = serializer


def validated_data_of(serializer_class: type[serializers.Serializer], data: Any) -> dict[str, Any]:  # type: ignore[type-arg]
    """``serializer_class(data=data)``'s validated data, or the ``ValidationError`` that
    ``is_valid(raise_exception=True)`` raises: the one way API bodies are validated (issue 15; ``_reused``)."""
    with _reused(serializer_class) as serializer:
        serializer.initial_data = data
        serializer.is_valid(raise_exception=True)
        return dict(serializer.validated_data)


def represented(serializer_class: type[serializers.Serializer], instance: Any) -> dict[str, Any]:  # type: ignore[type-arg]
    """``serializer_class(instance).data``, as a plain dict (issue 15; ``_reused``)."""
    with _reused(serializer_class) as serializer:
        serializer.instance = instance
        return dict(serializer.data)


class EmptySerializer(StrictSerializer):
    """An empty JSON object: who does it comes from the token, what it applies to from the URL."""


@extend_schema_field({"type": "string", "pattern": CRITERION_ID_PATTERN, "maxLength": 128})
class CriterionIdField(StrictCharField):
    """A criterion id as the registrar takes it (``kernel.criteria``)."""


class ErrorBodySerializer(serializers.Serializer):  # type: ignore[type-arg]
    code = serializers.ChoiceField(choices=REASON_CODES, help_text="a registered reason code (SPEC §11)")
    message = serializers.CharField(help_text="the registry's explanation, then the specific detail")
    details = serializers.DictField(
        child=serializers.JSONField(),
        help_text="context by code, e.g. fields (path -> messages), required_scope, limit_bytes, verification_id",
    )


class ErrorResponseSerializer(serializers.Serializer):  # type: ignore[type-arg]
    error = ErrorBodySerializer()
