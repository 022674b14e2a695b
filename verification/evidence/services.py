"""Admitting evidence (SPEC §4): bytes into the content-addressed store, facts into the database.

The admission source comes from the admitting actor's kind, never from a label; the trust tier is derived by the
kernel (``evidence.derive_trust_tier``); a detached source signature makes an item T1 only if it verifies under a
key pinned for ``evidence-source`` (SPEC §8), and an invalid one is refused (``source-signature-invalid``).
"""

from __future__ import annotations

import base64
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime
from typing import Any, Final

from django.db import transaction
from django.utils import timezone

from verification.actors.models import Actor, ActorKind, ApiToken
from verification.actors.services.actors import PORTAL_ACTOR_NAME, require_token_of
from verification.compiled import Insert
from verification.errors import ServiceError
from verification.evidence import storage
from verification.evidence.models import Evidence
from verification.kernel import limits
from verification.kernel.evidence import (
    AdmissionSource,
    EvidenceType,
    Mutability,
    TrustTier,
    derive_trust_tier,
)
from verification.kernel.keys import verify_evidence_signature
from verification.kernel.reasons import Reason
from verification.runs.models import Claim, Task
from verification.trust.models import PinPurpose
from verification.trust.selectors import trusted_keys

MAX_MEDIA_TYPE: Final = 200
MAX_CUSTODY: Final = 300

#: SPEC §4 "admission source", from the admitting actor's kind (never from the request).
_ADMISSION_BY_KIND: Final[dict[str, AdmissionSource]] = {
    ActorKind.COLLECTOR: AdmissionSource.COLLECTOR,
    ActorKind.HUMAN: AdmissionSource.HUMAN,
    ActorKind.EXTERNAL_VERIFIER: AdmissionSource.IMPORTED,
}


def admission_source_of(actor: Actor) -> AdmissionSource:
    """Collector, human, imported (external verifier); everyone else admits as the producer side."""
    return _ADMISSION_BY_KIND.get(actor.kind, AdmissionSource.PRODUCER)


def tier_for(evidence: Evidence, *, producer: Actor | None, claimants: frozenset[str] = frozenset()) -> TrustTier:
    """The kernel's tier of a stored item against a given producer: the producer's own admission is claimant (T3)."""
    admitter = evidence.admitted_by
    is_producer = (producer is not None and admitter.pk == producer.pk) or admitter.name in claimants
    return derive_trust_tier(
        computed_by_portal=admitter.name == PORTAL_ACTOR_NAME,
        source_signature_verified=evidence.source_verified,
        admission=AdmissionSource(evidence.admission_source),
        admitting_actor_is_producer=is_producer,
    )


def _aware(value: datetime | None, what: str) -> datetime | None:
    if value is not None and (not isinstance(value, datetime) or timezone.is_naive(value)):
        raise ServiceError(Reason.INVALID_REQUEST, f"{what} must be a timezone-aware time")
    if value is not None:
        try:  # SPEC §3: numbers at the boundary (kernel.limits)
            limits.moment(value)
        except limits.OutOfRange as exc:
            fields = {what: [str(exc)]}
            raise ServiceError(Reason.INVALID_REQUEST, f"{what} {exc}", details={"fields": fields}) from None
    return value


def _verify_source(digest: str, signature: bytes | None, key_id: str | None) -> bool:
    if signature is None and not key_id:
        return False
    if signature is None or not key_id or not isinstance(signature, (bytes, bytearray)):
        raise ServiceError(
            Reason.SOURCE_SIGNATURE_INVALID, "a source signature comes with its source_key_id", status=422
        )
    trusted = trusted_keys(PinPurpose.EVIDENCE_SOURCE).get(key_id)
    if trusted is None:
        raise ServiceError(
            Reason.SOURCE_SIGNATURE_INVALID, f"{key_id} is not pinned for evidence-source", status=422
        )
    if trusted.revoked:
        raise ServiceError(Reason.SOURCE_SIGNATURE_INVALID, f"{key_id} was revoked", status=422)
    if not verify_evidence_signature(trusted.key, digest, bytes(signature)):
        raise ServiceError(
            Reason.SOURCE_SIGNATURE_INVALID, f"the signature does not verify under {key_id}", status=422
        )
    return True


def _build(
    *,
    actor: Actor,
    boundary: str,
    claimed: Callable[[], bool],
    content: bytes,
    evidence_type: str = "artifact",
    media_type: str = "text/plain",
    collected_at: datetime | None = None,
    max_age_seconds: int | None = None,
    expires_at: datetime | None = None,
    custody: str = "",
    task: Task | None = None,
    source_signature: bytes | None = None,
    source_key_id: str | None = None,
    mutability: str = "immutable",
) -> Evidence:
    """An unsaved item, its bytes put in the store: evidence_admit's checks and derivations. ``claimed`` is asked
    only when the answer matters (an admitter that is not the producer side).

    Store ``content`` by its sha256 and record the item with its six axes' inputs (SPEC §4).

    ``collected_at`` None means unknown (freshness is then unknown, which fails any ``max_age`` policy: fail
    closed). ``custody`` defaults to the admitting token's boundary. Refusals: ``invalid-request`` (bad type,
    media type, age, times), ``source-signature-invalid`` (422).
    """
    if not isinstance(content, (bytes, bytearray)):
        raise ServiceError(Reason.INVALID_REQUEST, "evidence content is bytes")
    try:
        kind = EvidenceType(evidence_type)
        mutable = Mutability(mutability)
    except ValueError:
        raise ServiceError(Reason.INVALID_REQUEST, f"unknown evidence_type {evidence_type!r} or mutability") from None
    if not isinstance(media_type, str) or not media_type.strip() or len(media_type) > MAX_MEDIA_TYPE:
        raise ServiceError(Reason.INVALID_REQUEST, "media_type is a non-blank string")
    if max_age_seconds is not None:
        try:  # SPEC §3: numbers at the boundary (kernel.limits)
            limits.duration_seconds(max_age_seconds)
        except limits.OutOfRange as exc:
            fields = {"max_age_seconds": [str(exc)]}
            raise ServiceError(Reason.INVALID_REQUEST, f"max_age_seconds {exc}", details={"fields": fields}) from None
    _aware(collected_at, "collected_at")
    _aware(expires_at, "expires_at")
    if not isinstance(custody, str) or len(custody) > MAX_CUSTODY:
        raise ServiceError(Reason.INVALID_REQUEST, f"custody is at most {MAX_CUSTODY} characters")
    data = bytes(content)
    digest = storage.put(data)
    verified = _verify_source(digest, source_signature, source_key_id)
    source = admission_source_of(actor)
    evidence = Evidence(
        digest=digest,
        size=len(data),
        media_type=media_type.strip(),
        evidence_type=kind.value,
        admission_source=source.value,
        mutability=mutable.value,
        collected_at=collected_at,
        max_age_seconds=max_age_seconds,
        expires_at=expires_at,
        custody=custody.strip() or (f"boundary:{boundary}" if boundary else ""),
        admitted_by=actor,
        admitted_boundary=boundary,
        source_key_id=source_key_id or "",
        source_signature=base64.b64encode(bytes(source_signature)).decode("ascii") if source_signature else "",
        source_verified=verified,
        task=task,
    )
    # SPEC §4: derived by the server at admission (a run derives it again against its own producer).
    evidence.trust_tier = derive_trust_tier(
        computed_by_portal=actor.name == PORTAL_ACTOR_NAME,
        source_signature_verified=verified,
        admission=source,
        admitting_actor_is_producer=source is AdmissionSource.PRODUCER or (task is not None and claimed()),
    ).value
    return evidence


@transaction.atomic
def evidence_admit(
    *,
    actor: Actor,
    token: ApiToken | None,
    content: bytes,
    evidence_type: str = "artifact",
    media_type: str = "text/plain",
    collected_at: datetime | None = None,
    max_age_seconds: int | None = None,
    expires_at: datetime | None = None,
    custody: str = "",
    task: Task | None = None,
    source_signature: bytes | None = None,
    source_key_id: str | None = None,
    mutability: str = "immutable",
) -> Evidence:
    """Store ``content`` by its sha256 and record the item with its six axes' inputs (SPEC §4).

    ``collected_at`` None means unknown (freshness is then unknown, which fails any ``max_age`` policy: fail
    closed). ``custody`` defaults to the admitting token's boundary. Refusals: ``invalid-request`` (bad type,
    media type, age, times), ``source-signature-invalid`` (422).
    """
    boundary = require_token_of(actor, token)
    evidence = _build(
        actor=actor, boundary=boundary, claimed=lambda: _claimed(task, actor), content=content,
        evidence_type=evidence_type, media_type=media_type, collected_at=collected_at,
        max_age_seconds=max_age_seconds, expires_at=expires_at, custody=custody, task=task,
        source_signature=source_signature, source_key_id=source_key_id, mutability=mutability,
    )
    evidence.save()
    return evidence


def _claimed(task: Task | None, actor: Actor) -> bool:
    return task is not None and Claim.objects.filter(task=task, actor=actor).exists()


#: Inline items' rows: an INSERT built once (``compiled.Insert``), not per submission.
_INSERT_EVIDENCE: Final = Insert(Evidence)


def evidence_admit_many(
    *, actor: Actor, token: ApiToken | None, items: Sequence[Mapping[str, Any]], task: Task | None
) -> list[Evidence]:
    """``evidence_admit`` for several inline items of one submission: the same checks per item, at most one claim
    query and one INSERT for all of them (the caller's transaction holds them). ``items`` are keyword arguments of
    ``evidence_admit`` without actor, token and task."""
    boundary = require_token_of(actor, token)
    known: list[bool] = []

    def claimed() -> bool:
        if not known:
            known.append(_claimed(task, actor))
        return known[0]

    built = [_build(actor=actor, boundary=boundary, claimed=claimed, task=task, **item) for item in items]
    return _INSERT_EVIDENCE(built)


@transaction.atomic
def evidence_redact(*, evidence: Evidence, reason: str, by: Actor | None = None) -> Evidence:
    """Redact an item: its bytes leave the store when no other item holds them; runs then answer
    ``evidence-redacted`` for it (SPEC §2, §4). The record stays."""
    if not isinstance(reason, str) or not reason.strip():
        raise ServiceError(Reason.INVALID_REQUEST, "a redaction says why")
    locked = Evidence.objects.select_for_update().get(pk=evidence.pk)
    if locked.redacted_at is None:
        locked.redacted_at = timezone.now()
        locked.redaction_reason = reason.strip()
        locked.save(update_fields=["redacted_at", "redaction_reason"])
        if not Evidence.objects.filter(digest=locked.digest, redacted_at__isnull=True).exists():
            storage.remove(locked.digest)
    return locked
