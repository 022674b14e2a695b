"""Evidence: its six axes, computed independence, server-derived trust tiers, freshness, policy, citations (SPEC §4).

Everything here is computed from recorded structure handed in by the caller; nothing a submitter labels is taken
at its word, and the clock is always an argument (``now``).
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from enum import StrEnum
from typing import Any, Final

from verification.kernel.errors import InvariantError
from verification.kernel.reasons import Reason

# --- the six axes (SPEC §4) ----------------------------------------------------------------------------------------


class EvidenceType(StrEnum):
    ARTIFACT = "artifact"
    OBSERVATION = "observation"
    ATTESTATION = "attestation"
    REVIEW = "review"
    IMPORT = "import"


class AdmissionSource(StrEnum):
    PRODUCER = "producer"
    COLLECTOR = "collector"
    REVIEWER = "reviewer"
    HUMAN = "human"
    IMPORTED = "imported"


class Independence(StrEnum):
    INDEPENDENT = "independent"
    SELF_ATTESTED = "self_attested"
    DERIVED = "derived"
    UNKNOWN = "unknown"


class Mutability(StrEnum):
    IMMUTABLE = "immutable"
    VERSIONED = "versioned"
    MUTABLE = "mutable"


class Freshness(StrEnum):
    FRESH = "fresh"
    STALE = "stale"
    EXPIRED = "expired"
    UNKNOWN = "unknown"


class Accessibility(StrEnum):
    ACCESSIBLE = "accessible"
    INACCESSIBLE = "inaccessible"
    REDACTED = "redacted"
    UNKNOWN = "unknown"


class TrustTier(StrEnum):
    """Server-derived trust tiers (SPEC §4; second seed). T0 is the strongest, T3 the weakest."""

    T0 = "deterministic"
    T1 = "source_attested"
    T2 = "third_party"
    T3 = "claimant"

    @property
    def rank(self) -> int:
        """0 for T0 (strongest) … 3 for T3 (weakest)."""
        return _TIER_ORDER.index(self)

    def meets(self, minimum: TrustTier) -> bool:
        """True when this tier is at least as strong as ``minimum``."""
        return self.rank <= minimum.rank


_TIER_ORDER: Final[tuple[TrustTier, ...]] = (TrustTier.T0, TrustTier.T1, TrustTier.T2, TrustTier.T3)


def parse_trust_tier(value: object) -> TrustTier | None:
    """A tier from its wire value (``"source_attested"``) or its name (``"T1"``); None for anything else."""
    if isinstance(value, TrustTier):
        return value
    if isinstance(value, str):
        for tier in TrustTier:
            if value in (tier.value, tier.name):
                return tier
    return None


# --- independence, computed from structure (SPEC §4) ---------------------------------------------------------------


@dataclass(frozen=True)
class Answer:
    """One of the three independence questions, with its basis: the recorded ids it was decided from
    (``actor:…``, ``boundary:…``, ``custody:…``). ``value`` None means an input was missing or unnamed.
    """

    value: bool | None
    basis: tuple[str, ...] = ()

    @property
    def decided(self) -> bool:
        """True only for an answer that has both a value and a basis; anything else counts as no basis."""
        return self.value is not None and bool(self.basis)

    def as_payload(self) -> dict[str, Any]:
        return {"value": self.value, "basis": list(self.basis)}


@dataclass(frozen=True)
class IndependenceAssessment:
    """The computed independence of one evidence item, with the basis of each of its three answers."""

    independence: Independence
    actor_distinct: Answer
    boundary_distinct: Answer
    custody_distinct: Answer
    declared: str | None = None  # what the submitter said, kept as its claim only; never consulted

    def as_payload(self) -> dict[str, Any]:
        return {
            "independence": self.independence.value,
            "actor_distinct": self.actor_distinct.as_payload(),
            "boundary_distinct": self.boundary_distinct.as_payload(),
            "custody_distinct": self.custody_distinct.as_payload(),
            "declared": self.declared,
        }


def _named(value: str | None) -> str | None:
    # SPEC §1: an actor without a stable identity (None, blank) is unnamed and never distinct from anyone.
    # The same rule serves custody records: an unnamed custody is no basis for "distinct".
    return value if isinstance(value, str) and value.strip() else None


def _ids(values: frozenset[str]) -> frozenset[str]:
    return frozenset(v for v in values if isinstance(v, str) and v.strip())


def assess_independence(
    *,
    producer_actor: str | None,
    admitting_actor: str | None,
    producer_boundaries: frozenset[str],
    admitting_boundaries: frozenset[str],
    producer_custody: str | None,
    evidence_custody: str | None,
    derived: bool = False,
    declared: str | None = None,
) -> IndependenceAssessment:
    """Compute independence from recorded structure (SPEC §4); ``declared`` is recorded and ignored."""
    producer, admitter = _named(producer_actor), _named(admitting_actor)
    if producer is None or admitter is None:
        actor = Answer(None)
    else:
        actor = Answer(producer != admitter, (f"actor:{producer}", f"actor:{admitter}"))

    p_bounds, a_bounds = _ids(producer_boundaries), _ids(admitting_boundaries)
    if not p_bounds or not a_bounds:
        boundary = Answer(None)
    else:
        basis = tuple(f"boundary:{b}" for b in sorted(p_bounds | a_bounds))
        boundary = Answer(p_bounds.isdisjoint(a_bounds), basis)

    p_custody, e_custody = _named(producer_custody), _named(evidence_custody)
    if p_custody is None or e_custody is None:
        custody = Answer(None)
    else:
        custody = Answer(p_custody != e_custody, (f"custody:{p_custody}", f"custody:{e_custody}"))

    answers = (actor, boundary, custody)
    if derived is True:
        # Computed by the portal from other evidence.
        value = Independence.DERIVED
    elif actor.decided and actor.value is False:
        # The producer's own evidence, whatever it declared.
        value = Independence.SELF_ATTESTED
    elif all(a.decided and a.value is True for a in answers):
        value = Independence.INDEPENDENT
    else:
        # Any answer without a basis → unknown (SPEC §4). A *distinct* actor that shares the producer's boundary
        # or custody is not independent, but it is not "the producer's own" either, so it is not self_attested:
        # we answer unknown, and the "no" with its basis stays on record in the assessment.
        value = Independence.UNKNOWN
    return IndependenceAssessment(value, actor, boundary, custody, declared if isinstance(declared, str) else None)


# --- trust tiers, derived by the server (SPEC §4) ------------------------------------------------------------------


def derive_trust_tier(
    *,
    computed_by_portal: bool,
    source_signature_verified: bool,
    admission: AdmissionSource,
    admitting_actor_is_producer: bool,
) -> TrustTier:
    """The server's tier for an item. There is no input for a claimed tier: a signed proof never upgrades one.

    ``source_signature_verified`` is the caller's result of verifying a detached Ed25519 signature under a key
    pinned for the ``evidence-source`` purpose (SPEC §8), with the binding checked.
    """
    if computed_by_portal is True:
        return TrustTier.T0
    if source_signature_verified is True:
        return TrustTier.T1
    if admission is AdmissionSource.COLLECTOR and admitting_actor_is_producer is False:
        return TrustTier.T2
    return TrustTier.T3


# --- freshness, computed when read (SPEC §4) -----------------------------------------------------------------------


def is_aware(value: object) -> bool:
    """True for a timezone-aware datetime (the only kind the kernel compares)."""
    return isinstance(value, datetime) and value.tzinfo is not None and value.utcoffset() is not None


def freshness(
    *,
    collected_at: datetime | None,
    max_age: timedelta | None,
    expires_at: datetime | None,
    now: datetime,
) -> Freshness:
    """Fresh, stale, expired or unknown at ``now``.

    Order: a known expiry at or before ``now`` → EXPIRED (a definite fact, even when the collection time is
    unknown); no collection time → UNKNOWN; collected after ``now`` (clock skew) → UNKNOWN; older than ``max_age``
    → STALE; else FRESH. Naive datetimes cannot be compared honestly, so they answer UNKNOWN (fail closed).
    """
    if not is_aware(now) or (expires_at is not None and not is_aware(expires_at)):
        return Freshness.UNKNOWN
    if expires_at is not None and now >= expires_at:
        return Freshness.EXPIRED
    if collected_at is None or not is_aware(collected_at) or collected_at > now:
        return Freshness.UNKNOWN
    if max_age is not None and now - collected_at > max_age:
        return Freshness.STALE
    return Freshness.FRESH


# --- evidence policy (SPEC §4) -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class EvidencePolicy:
    """What a criterion requires of the evidence it cites."""

    min_trust_tier: TrustTier | None = None
    max_age: timedelta | None = None

    def __post_init__(self) -> None:
        if self.min_trust_tier is not None and not isinstance(self.min_trust_tier, TrustTier):
            raise InvariantError(Reason.MALFORMED_RUBRIC, f"min_trust_tier={self.min_trust_tier!r}")
        if self.max_age is not None and (not isinstance(self.max_age, timedelta) or self.max_age <= timedelta(0)):
            raise InvariantError(Reason.MALFORMED_RUBRIC, f"max_age must be a positive duration: {self.max_age!r}")


@dataclass(frozen=True)
class EvidenceFacts:
    """The recorded facts about one cited item that an evidence policy reads.

    ``max_age`` is the item's own allowed age, if it has one; the stricter of it and the policy's applies.
    """

    evidence_id: str
    trust_tier: TrustTier
    collected_at: datetime | None
    expires_at: datetime | None = None
    accessibility: Accessibility = Accessibility.UNKNOWN
    max_age: timedelta | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.evidence_id, str) or not self.evidence_id:
            raise InvariantError(Reason.MALFORMED_RECORD, "an evidence item needs an id")
        if not isinstance(self.trust_tier, TrustTier):
            raise InvariantError(Reason.MALFORMED_RECORD, f"trust_tier={self.trust_tier!r}")
        if not isinstance(self.accessibility, Accessibility):
            raise InvariantError(Reason.MALFORMED_RECORD, f"accessibility={self.accessibility!r}")


def _item_reason(policy: EvidencePolicy | None, item: EvidenceFacts, now: datetime) -> Reason | None:
    # Precedence within one item: redacted, inaccessible (or not known to be accessible), then trust tier,
    # then expired, stale, freshness unknown. What cannot be read is reported before what it would weigh.
    if item.accessibility is Accessibility.REDACTED:
        return Reason.EVIDENCE_REDACTED
    if item.accessibility is not Accessibility.ACCESSIBLE:
        return Reason.EVIDENCE_INACCESSIBLE
    if policy is not None and policy.min_trust_tier is not None and not item.trust_tier.meets(policy.min_trust_tier):
        return Reason.BELOW_TRUST_TIER
    ages = [a for a in (item.max_age, policy.max_age if policy is not None else None) if a is not None]
    max_age = min(ages) if ages else None
    state = freshness(collected_at=item.collected_at, max_age=max_age, expires_at=item.expires_at, now=now)
    if state is Freshness.EXPIRED:
        return Reason.EVIDENCE_EXPIRED
    if state is Freshness.STALE:
        return Reason.EVIDENCE_STALE
    unreadable_expiry = item.expires_at is not None and not is_aware(item.expires_at)
    if state is Freshness.UNKNOWN and (max_age is not None or unreadable_expiry or not is_aware(now)):
        # An age applies, or the expiry cannot be compared, and it cannot be established: never treated as fresh.
        return Reason.EVIDENCE_FRESHNESS_UNKNOWN
    return None


@dataclass(frozen=True)
class PolicyFailure:
    """Why a criterion's cited evidence fails its policy, and which item (the first by evidence id) decided."""

    reason: Reason
    evidence_id: str


def policy_failure(
    policy: EvidencePolicy | None, items: Sequence[EvidenceFacts], now: datetime
) -> PolicyFailure | None:
    """The first failing item by evidence id under ``policy``, with its reason; None when every item satisfies it.

    Redaction, accessibility and expiry are checked even without a policy (``None``): evidence that cannot be
    read, or has expired, is never weighed.
    """
    for item in sorted(items, key=lambda i: i.evidence_id):
        reason = _item_reason(policy, item, now)
        if reason is not None:
            return PolicyFailure(reason, item.evidence_id)
    return None


def apply_policy(policy: EvidencePolicy | None, items: Sequence[EvidenceFacts], now: datetime) -> Reason | None:
    """The reason that makes a criterion UNKNOWN under ``policy`` (SPEC §4), or None; see ``policy_failure``."""
    failure = policy_failure(policy, items, now)
    return None if failure is None else failure.reason


# --- citations and spans (SPEC §4) ---------------------------------------------------------------------------------


def quote_hash(quote: str) -> str:
    """``"sha256:" + hex(sha256(utf8(quote)))``. A quote that is not valid UTF-8 text (lone surrogate) has none."""
    return "sha256:" + hashlib.sha256(quote.encode("utf-8")).hexdigest()


@dataclass(frozen=True)
class Citation:
    """A span of an admitted artifact's text: ``start``/``end`` are code-point offsets, ``end`` exclusive.

    Not validated on construction on purpose: whatever a submitter sent must reach ``resolve_citation`` and
    answer with a code, never crash.
    """

    evidence_id: str
    start: int
    end: int
    quote: str
    quote_hash: str

    def as_payload(self) -> dict[str, Any]:
        return {
            "evidence_id": self.evidence_id,
            "start": self.start,
            "end": self.end,
            "quote": self.quote,
            "quote_hash": self.quote_hash,
        }


def artifact_text(content: bytes | None) -> str | None:
    """An artifact's text for citation: strict UTF-8, or None when there are no bytes or they are not UTF-8.

    An artifact without text cannot be cited: leave it out of the mapping given to ``resolve_citation``, so a
    citation into it answers ``citation-artifact-not-admitted``.
    """
    if content is None:
        return None
    try:
        return bytes(content).decode("utf-8", errors="strict")
    except (UnicodeDecodeError, TypeError, ValueError):
        return None


def resolve_citation(citation: Citation, artifacts: Mapping[str, str]) -> Reason | None:
    """None when the citation resolves, else the first failing reason (SPEC §4). Never raises.

    ``artifacts`` maps each admitted evidence id to its decoded text (see ``artifact_text``); a missing id was not
    admitted. An empty span (``start == end``) cites nothing and is out of range.
    """
    evidence_id = getattr(citation, "evidence_id", None)
    if not isinstance(evidence_id, str):
        return Reason.CITATION_ARTIFACT_NOT_ADMITTED
    text = artifacts.get(evidence_id)
    if not isinstance(text, str):
        return Reason.CITATION_ARTIFACT_NOT_ADMITTED
    start, end = getattr(citation, "start", None), getattr(citation, "end", None)
    if not isinstance(start, int) or not isinstance(end, int) or isinstance(start, bool) or isinstance(end, bool):
        return Reason.CITATION_SPAN_OUT_OF_RANGE
    if not 0 <= start < end <= len(text):
        return Reason.CITATION_SPAN_OUT_OF_RANGE
    quote = getattr(citation, "quote", None)
    if not isinstance(quote, str) or text[start:end] != quote:
        return Reason.CITATION_QUOTE_MISMATCH
    claimed = getattr(citation, "quote_hash", None)
    try:
        expected = quote_hash(quote)
    except UnicodeEncodeError:  # unreachable for text that matched an admitted artifact, kept for totality
        return Reason.CITATION_HASH_MISMATCH
    if not isinstance(claimed, str) or claimed != expected:
        return Reason.CITATION_HASH_MISMATCH
    return None
