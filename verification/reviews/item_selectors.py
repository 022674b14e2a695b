"""Reads of one queue item's review page (issue 5 §3; SPEC §2, §4, §6, §7, §12).

Its head, the automated outcome beneath a decision (as read now), its bound evidence read now (the stored bytes
rechecked against the digest recorded at admission), the semantic judgments that arrived, the chain verified strictly,
its lease and decisions. The page's view models are ``reviewportal.portal.presenters``.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Final

from django.db.models import BooleanField, ExpressionWrapper, OuterRef, QuerySet, Subquery

from verification.compiled import Compiled, Probe, Related, pipelined
from verification.errors import NotFound
from verification.evidence.models import VerificationEvidence
from verification.evidence.selectors import EvidenceRead, read_evidence
from verification.kernel.determination import Outcome
from verification.kernel.evidence import Freshness, freshness
from verification.kernel.verifier import VerificationReport, verify_report
from verification.reviews.models import ReviewDecision, ReviewLease
from verification.reviews.selectors import _held, outcome_as_read, queue_member_q
from verification.runs.cycle_workers import CycleWorkers, workers_from_rows, workers_of_verification_query
from verification.runs.models import ArrivedResult, Task, Verification
from verification.runs.selectors import rubric_criteria
from verification.trust.models import Receipt, ReceiptKind
from verification.trust.selectors import proof_of_rows, proof_read, receipt_payload, trusted_keys, untrusted_head


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
    #: Read for a ``reviewer`` (``review_item_of``): the cycle's workers with that reviewer's actor and boundaries,
    #: what the decision rails are judged on (``decisions.decision_bar``); None otherwise, or for an item with no
    #: subject.
    workers: CycleWorkers | None = None


def _pk(verification_id: Any) -> uuid.UUID | None:
    try:
        return verification_id if isinstance(verification_id, uuid.UUID) else uuid.UUID(str(verification_id))
    except ValueError:
        return None


#: The field that gives ``now`` its database form in the compiled query (any timestamp column would do).
_AT_FIELD: Final = ReviewLease._meta.get_field("expires_at")
#: The head receipt's columns the page reads (the others stay deferred).
_HEAD_COLUMNS: Final = ("content_hash", "seq", "key_id", "envelope", "created_at", "kind", "supersedes_receipt_id")


#: The item and what the page shows of it, as ``select_related`` would load them: its task, submitter and rubric, its
#: lease and the lease's holder.
_SUBJECT_RELATED: Final = Related(
    Verification, ("task", "submitted_by", "rubric", "review_lease", "review_lease__holder")
)


def _subject_query(*, verification_pk: Any, now: datetime) -> QuerySet[Any]:
    """The review page's item as ONE row: the verification and its relations (``_SUBJECT_RELATED``); whether it is in
    the queue at ``now`` (``queue_member_q``, the queue's one definition); the newer verification that supersedes it
    (a re-run); its head receipt's columns (``_HEAD_COLUMNS``)."""
    newer = Verification.objects.filter(supersedes=OuterRef("pk")).order_by("created_at", "id").values("pk")[:1]
    head = Receipt.objects.filter(verification_id=OuterRef("pk")).order_by("-seq")
    return (
        Verification.objects.filter(pk=verification_pk)
        .annotate(
            r_member=ExpressionWrapper(queue_member_q(now), output_field=BooleanField()),
            r_newer=Subquery(newer),
            **{f"r_head_{name}": Subquery(head.values(name)[:1]) for name in _HEAD_COLUMNS},
        )
        .values_list(
            *_SUBJECT_RELATED.columns(), "r_member", "r_newer", *(f"r_head_{name}" for name in _HEAD_COLUMNS)
        )
    )


#: ``_subject_query`` compiled once (``verification.compiled``): building the membership condition through the ORM
#: cost more than running the statement.
_SUBJECT: Final = Compiled(
    "review-subject",
    Verification,
    _subject_query,
    {
        "verification_pk": Probe.key_of(Verification),
        "now": Probe.instant(_AT_FIELD),
    },
)


@dataclass(frozen=True)
class _Subject:
    verification: Verification
    head: Receipt | None
    lease: ReviewLease | None
    in_queue: bool
    newer_pk: Any


def _subject(rows: list[tuple[Any, ...]], now: datetime) -> _Subject | None:
    """The item of ``_SUBJECT``'s row; None when there is no row (no such verification)."""
    if not rows:
        return None
    width = _SUBJECT_RELATED.width
    loaded = _SUBJECT_RELATED.load(rows[0])
    verification, lease = loaded[""], loaded["review_lease"]
    assert isinstance(verification, Verification)  # noqa: S101 - the row's own primary key is never null
    member, newer_pk, *head_values = rows[0][width:]
    head = None
    if head_values[0] is not None:  # a loaded receipt with these columns (the others deferred), in from_db's order
        read = {"verification_id": verification.pk, **dict(zip(_HEAD_COLUMNS, head_values, strict=True))}
        names = [f.attname for f in Receipt._meta.concrete_fields if f.attname in read]
        head = Receipt.from_db(Receipt.objects.db, names, [read[name] for name in names])
    held = _held(lease, now) if isinstance(lease, ReviewLease) else None
    return _Subject(verification, head, held, bool(member), newer_pk)


# The page's other reads, each compiled once (``verification.compiled``) and sent prepared: a lookup by the
# verification's key whose plan does not depend on it; compiling them through the ORM on every page cost more than
# running them (issue 15: the review page opens every "Next item" and follows every decision).

def _of_verification(name: str, model: type[Any], related: Related, *order: str) -> Compiled:
    """``model``'s rows of one verification in ``order``, each with ``related``'s relations, compiled once."""
    return Compiled(
        name,
        model,
        lambda verification_pk: model.objects.filter(verification_id=verification_pk)
        .order_by(*order)
        .values_list(*related.columns()),
        {"verification_pk": Probe.key_of(Verification)},
        prepared=True,
    )


#: A binding with its item and the item's admitter, as ``select_related`` would load them, from one row; an arrived
#: result with its actor; a decision with the reviewer and the receipt it signed.
_BINDING_RELATED: Final = Related(VerificationEvidence, ("evidence", "evidence__admitted_by"))
_JUDGMENT_RELATED: Final = Related(ArrivedResult, ("actor",))
_DECISION_RELATED: Final = Related(ReviewDecision, ("user", "receipt"))
_BINDINGS: Final = _of_verification("review-bindings", VerificationEvidence, _BINDING_RELATED, "symbol")
_JUDGMENTS: Final = _of_verification("review-judgments", ArrivedResult, _JUDGMENT_RELATED, "received_at", "id")
_DECISIONS: Final = _of_verification("review-decisions", ReviewDecision, _DECISION_RELATED, "id")


def bound_evidence(payload: Mapping[str, Any], now: datetime, rows: list[tuple[Any, ...]]) -> list[BoundEvidence]:
    """The items bound to the verification (``rows``: ``_BINDINGS``' rows, by symbol), each read now
    (``read_evidence``)."""
    signed = {str(e.get("id")): e for e in payload.get("evidence", ())}
    out: list[BoundEvidence] = []
    for row in rows:
        binding = _BINDING_RELATED.root(row)
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
    if not semantic:  # no semantic criterion: nothing to show, nothing to read
        return []
    arrived = _JUDGMENT_RELATED.all(_JUDGMENTS.rows(verification_pk=verification.pk))
    return [row for row in arrived if row.criterion_id in semantic]


def verify_chain(
    verification: Verification, head: Receipt | None, rows: list[tuple[Any, ...]]
) -> VerificationReport | None:
    """The chain so far (``rows``: ``proof_read``'s), verified strictly (SPEC §7): the pinned proof-signing keys and
    the stored head."""
    proof = proof_of_rows(verification, rows)
    if proof is None:
        return None
    return verify_report(
        proof,
        keys=trusted_keys("proof-signing"),
        trusted_head=head.content_hash if head is not None else None,
        expected_verification_id=str(verification.pk),
        expected_submission_hash=verification.submission_hash,
    )


def review_item_of(verification_id: Any, *, now: datetime, reviewer: Any = None) -> ReviewItem | None:
    """Everything the review page shows about one verification, read at ``now`` (issue 5 §3); None when there is no
    such verification (also for a string that is not a UUID). The item, its relations, its head, its lease and its
    queue facts come in one compiled statement (``_subject_query``), sent with the reads of its bindings, its chain
    and its decisions in ONE round trip on PostgreSQL (``compiled.pipelined``): they need only its key. With
    ``reviewer`` (a portal user who may decide), the cycle's workers and that reviewer's actor go in the same round
    trip (``ReviewItem.workers``: the decision rails' read)."""
    pk = _pk(verification_id)
    if pk is None:
        return None
    queries = [
        (_SUBJECT, {"verification_pk": pk, "now": now}),
        (_BINDINGS, {"verification_pk": pk}),
        proof_read(pk),
        (_DECISIONS, {"verification_pk": pk}),
    ]
    if reviewer is not None:
        queries.append(workers_of_verification_query(pk, reviewer))
    subject_rows, binding_rows, chain_rows, decision_rows, *workers_rows = pipelined(*queries)
    subject = _subject(subject_rows, now)
    if subject is None:
        return None
    verification, head = subject.verification, subject.head
    workers = None
    if workers_rows and verification.task_id is not None and verification.cycle is not None:
        workers = workers_from_rows(Task(pk=verification.task_id), verification.cycle, workers_rows[0])
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
    newer = subject.newer_pk
    return ReviewItem(
        verification=verification,
        now=now,
        head=head,
        decision_payload=decision_payload,
        automated_payload=automated_payload,
        outcome=outcome,
        untrusted_head=head is not None and untrusted_head(head),
        criterion_kinds=kinds,
        evidence=bound_evidence(automated_payload, now, binding_rows),
        judgments=semantic_judgments(verification, outcome),
        chain=verify_chain(verification, head, chain_rows),
        lease=subject.lease,
        decisions=_DECISION_RELATED.all(decision_rows),
        in_queue=subject.in_queue,
        superseded_by=Verification.objects.filter(pk=newer).first() if newer is not None else None,
        workers=workers,
    )


def review_item(verification: Verification, *, now: datetime) -> ReviewItem:
    """``review_item_of`` for a verification at hand (read again, with everything the page shows of it)."""
    item = review_item_of(verification.pk, now=now)
    if item is None:
        raise NotFound(f"no verification {verification.pk}", verification_id=str(verification.pk))
    return item
