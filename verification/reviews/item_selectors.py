"""Reads of one queue item's review page (issue 5 §3; SPEC §2, §4, §6, §7, §12).

Its head, the automated outcome beneath a decision (as read now), its bound evidence read now (the stored bytes
rechecked against the digest recorded at admission), the semantic judgments that arrived, the chain verified strictly,
its lease and decisions. The page's view models are ``reviewportal.portal.presenters``.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, Final

from django.db.models import BooleanField, ExpressionWrapper, OuterRef, QuerySet, Subquery

from verification.compiled import Compiled, Probe
from verification.evidence.models import VerificationEvidence
from verification.evidence.selectors import EvidenceRead, read_evidence
from verification.kernel.determination import Outcome
from verification.kernel.evidence import Freshness, freshness
from verification.kernel.verifier import VerificationReport, verify_report
from verification.reviews.models import ReviewDecision, ReviewLease
from verification.reviews.selectors import _held, active_lease, outcome_as_read, queue_member_q
from verification.runs.models import ArrivedResult, Verification
from verification.runs.selectors import rubric_criteria
from verification.trust.models import Receipt, ReceiptKind
from verification.trust.selectors import head_of, proof_for, receipt_payload, trusted_keys, untrusted_head


@dataclass(frozen=True)
class BoundEvidence:
    """An item bound to the verification, read now: its binding (symbol and item), the read (integrity recomputed
    over the stored bytes, accessibility, text), its freshness at ``now`` and its entry in the automated payload's
    ``evidence`` list as signed (empty when the payload has none)."""

    binding: VerificationEvidence
    read: EvidenceRead
    freshness: Freshness | str
    signed: Mapping[str, Any]


@dataclass(frozen=True)
class ReviewItem:
    """One queue item read at ``now``.

    ``payload`` is the head's signed payload; under a decision ``decision_payload`` is that payload and
    ``automated_payload`` the run receipt it superseded (otherwise the head's own); ``outcome`` is the automated
    payload as read at ``now``. ``judgments`` are the arrived results of its semantic criteria, in arrival order.
    """

    verification: Verification
    now: datetime
    head: Receipt | None
    decision_payload: Mapping[str, Any] | None
    automated_payload: Mapping[str, Any]
    outcome: Outcome | None
    untrusted_head: bool
    criterion_kinds: Mapping[str, str]
    evidence: list[BoundEvidence]
    judgments: list[ArrivedResult]
    chain: VerificationReport | None
    lease: ReviewLease | None
    decisions: list[ReviewDecision]
    in_queue: bool
    superseded_by: Verification | None


def _pk(verification_id: Any) -> uuid.UUID | None:
    try:
        return verification_id if isinstance(verification_id, uuid.UUID) else uuid.UUID(str(verification_id))
    except ValueError:
        return None


def review_subject(verification_id: Any) -> Verification | None:
    """The verification of a review page, or None (also for a string that is not a UUID), with what the page shows
    of it read in the same query: its task, its submitter, its rubric and its lease with the holder."""
    pk = _pk(verification_id)
    if pk is None:
        return None
    related = ("task", "submitted_by", "rubric", "review_lease", "review_lease__holder")
    return Verification.objects.select_related(*related).filter(pk=pk).first()


def _lease(verification: Verification, now: datetime) -> ReviewLease | None:
    """The lease held on ``verification`` at ``now``: the one ``review_subject`` read with it, else read now."""
    if not Verification._meta.get_field("review_lease").is_cached(verification):
        return active_lease(verification, now=now)
    try:
        lease = verification.review_lease
    except ReviewLease.DoesNotExist:
        return None
    return _held(lease, now)


def _queue_facts_query(*, verification_pk: Any, now: datetime) -> QuerySet[Any]:
    """Whether the verification is in the queue at ``now`` (``queue_member_q``, the queue's one definition) and the
    pk of the newer verification that supersedes it (a re-run), as one row."""
    newer = Verification.objects.filter(supersedes=OuterRef("pk")).order_by("created_at", "id").values("pk")[:1]
    return (
        Verification.objects.filter(pk=verification_pk)
        .annotate(
            r_member=ExpressionWrapper(queue_member_q(now), output_field=BooleanField()),
            r_newer=Subquery(newer),
        )
        .values_list("r_member", "r_newer")
    )


#: The field that gives ``now`` its database form in the compiled queries (any timestamp column would do).
_AT_FIELD: Final = ReviewLease._meta.get_field("expires_at")
#: ``_queue_facts_query`` compiled once (``verification.compiled``): building the membership condition through the ORM
#: cost more than running the statement.
_QUEUE_FACTS: Final = Compiled(
    "review-queue-facts",
    Verification,
    _queue_facts_query,
    {
        "verification_pk": Probe(uuid.UUID(int=0xC0FFEE51), uuid.UUID(int=0xC0FFEE52), Verification._meta.pk),
        "now": Probe(datetime(2001, 1, 1, tzinfo=UTC), datetime(2002, 2, 2, tzinfo=UTC), _AT_FIELD),
    },
)


def _queue_facts(verification: Verification, now: datetime) -> tuple[bool, Verification | None]:
    """In the queue at ``now``, and the verification that supersedes it (``_queue_facts_query``)."""
    rows = _QUEUE_FACTS.rows(verification_pk=verification.pk, now=now)
    if not rows:
        return False, None
    member, newer_pk = rows[0]
    superseded_by = Verification.objects.filter(pk=newer_pk).first() if newer_pk is not None else None
    return bool(member), superseded_by


def bound_evidence(verification: Verification, payload: Mapping[str, Any], now: datetime) -> list[BoundEvidence]:
    """The items bound to ``verification``, by symbol, each read now (``read_evidence``)."""
    signed = {str(e.get("id")): e for e in payload.get("evidence", ())}
    bindings = (
        VerificationEvidence.objects.filter(verification=verification)
        .select_related("evidence", "evidence__admitted_by")
        .order_by("symbol")
    )
    out: list[BoundEvidence] = []
    for binding in bindings:
        evidence = binding.evidence
        fresh = freshness(
            collected_at=evidence.collected_at,
            max_age=timedelta(seconds=evidence.max_age_seconds) if evidence.max_age_seconds else None,
            expires_at=evidence.expires_at,
            now=now,
        )
        out.append(BoundEvidence(binding, read_evidence(evidence), fresh, signed.get(str(evidence.pk), {})))
    return out


def semantic_judgments(verification: Verification, outcome: Outcome | None) -> list[ArrivedResult]:
    """The results that arrived for the semantic criteria of ``outcome``, oldest first."""
    semantic = {c.criterion_id for c in outcome.criteria if c.semantic} if outcome is not None else set()
    rows = ArrivedResult.objects.filter(verification=verification).select_related("actor").order_by("received_at", "id")
    return [row for row in rows if row.criterion_id in semantic]


def verify_chain(verification: Verification, head: Receipt | None) -> VerificationReport | None:
    """The chain so far, verified strictly (SPEC §7): the pinned proof-signing keys and the stored head."""
    proof = proof_for(verification)
    if proof is None:
        return None
    return verify_report(
        proof,
        keys=trusted_keys("proof-signing"),
        trusted_head=head.content_hash if head is not None else None,
        expected_verification_id=str(verification.pk),
        expected_submission_hash=verification.submission_hash,
    )


def review_item(verification: Verification, *, now: datetime) -> ReviewItem:
    """Everything the review page shows about one verification, read at ``now`` (issue 5 §3)."""
    head = head_of(verification)
    payload: Mapping[str, Any] = receipt_payload(head) if head is not None else {}
    decision_payload = payload if head is not None and head.kind == ReceiptKind.DECISION else None
    # The automated outcome beneath: the head's, or (under a decision) the receipt it superseded.
    automated_payload = payload
    if decision_payload is not None and head is not None and head.supersedes_receipt_id:
        superseded = Receipt.objects.filter(content_hash=head.supersedes_receipt_id).first()
        automated_payload = receipt_payload(superseded) if superseded is not None else {}
    outcome = outcome_as_read(automated_payload, now)
    kinds: dict[str, str] = {}
    if outcome is not None and verification.rubric is not None:
        kinds = {c.id: c.kind.value for c in rubric_criteria(verification.rubric).criteria}
    evidence = bound_evidence(verification, automated_payload, now)
    member, superseded_by = _queue_facts(verification, now)
    return ReviewItem(
        verification=verification,
        now=now,
        head=head,
        decision_payload=decision_payload,
        automated_payload=automated_payload,
        outcome=outcome,
        untrusted_head=head is not None and untrusted_head(head),
        criterion_kinds=kinds,
        evidence=evidence,
        judgments=semantic_judgments(verification, outcome),
        chain=verify_chain(verification, head),
        lease=_lease(verification, now),
        decisions=list(
            ReviewDecision.objects.filter(verification=verification).select_related("user", "receipt").order_by("id")
        ),
        in_queue=member,
        superseded_by=superseded_by,
    )
