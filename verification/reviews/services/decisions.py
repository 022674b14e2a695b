"""The reviewer's decisions: PASS, FAIL or "needs more evidence" on a held queue item (issue 5; SPEC §2, §9).

``review_decide`` locks the verification row, then: the reviewer must hold the lease (``claims``); the head must not
be decided already; the approval must be of the current cycle (``stale-cycle``); the rails run with the reviewer's
human actor as the verifier, its boundaries those of its API tokens (rail 1–3: ``worker-self-verification``,
``verifier-authored-work``, ``shared-execution-boundary``, ``unnamed-actor``) — a refused reviewer's lease is released
so the item goes back to others; then the kernel's ``decision.decide`` over the head as read now, with the integrity
recheck of exactly the cited items (SPEC §2). An accepted PASS or FAIL appends a ``decision`` receipt with human
authority (its payload: ``kernel.payloads.decision_payload``) that supersedes the head, updates the head columns (the
queue drops it), records the ``ReviewDecision`` and emits ``verification.decided``. "Needs more evidence" records the
request, marks the verification as waiting for evidence and emits ``verification.evidence_requested``; the re-run
that new evidence brings (a new verification, ``verification_add_evidence``) is back in the queue if it is flagged.

**Once.** Every decision form carries a nonce (``request_key``). The record is unique on it and written under the
verification's row lock, so a double click or a replayed POST gets the first one's result and no second receipt.
"""

from __future__ import annotations

import secrets
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Final

from django.db import transaction
from django.db.models import BooleanField, Exists, ExpressionWrapper, OuterRef, QuerySet, Subquery

from verification.actors.models import Actor
from verification.actors.services.actors import actor_for_user, kernel_actor
from verification.compiled import Compiled, Insert, Probe, Related, atomic_batched, pipelined
from verification.errors import NotFound, ServiceError
from verification.evidence import storage
from verification.evidence.models import Evidence, VerificationEvidence
from verification.kernel.contracts import subject_key
from verification.kernel.decision import decide
from verification.kernel.determination import Outcome
from verification.kernel.errors import DecisionRefused, KernelError
from verification.kernel.evaluation import read_outcome
from verification.kernel.findings import evidence_integrity_findings
from verification.kernel.integrity import StoredItem, recheck
from verification.kernel.payloads import decision_payload
from verification.kernel.reasons import Reason
from verification.kernel.verdicts import Verdict
from verification.reviews.models import ReviewAction, ReviewDecision, ReviewLease
from verification.reviews.selectors import forget_queue_counts, queue_member_q
from verification.reviews.services.claims import (
    END_DECIDED,
    END_EVIDENCE_REQUESTED,
    _end_lease,
    _not_held,
    _now,
    _rail_refusal,
    _rails_over,
    _require_reviewer,
    end_lease_later,
    review_bar,
)
from verification.reviews.services.findings import finding_raise
from verification.runs.cycle_workers import (
    CycleWorkers,
    cycle_workers,
    workers_from_rows,
    workers_of_verification_query,
)
from verification.runs.models import Task, Verification
from verification.runs.services import events
from verification.runs.services.outcome import HEAD_PROBES, head_row
from verification.trust.models import Receipt, ReceiptKind, SigningKey
from verification.trust.selectors import receipt_payload
from verification.trust.services import security_log
from verification.trust.services.receipts import HeldChain, receipt_issue_held

MAX_RATIONALE_CHARS: Final = 10_000
REQUEST_KEY_BYTES: Final = 24
MAX_CITED: Final = 64


def new_request_key() -> str:
    """A fresh nonce for one decision form (43 URL-safe characters)."""
    return secrets.token_urlsafe(REQUEST_KEY_BYTES)


@dataclass(frozen=True)
class _Refused:
    """A refusal decided under the row lock, raised after the transaction (so what it records is kept)."""

    error: KernelError
    release: bool


def _action(value: object) -> ReviewAction:
    try:
        return ReviewAction(str(value))
    except ValueError:
        raise DecisionRefused(Reason.DECISION_VERDICT_NOT_ALLOWED, f"verdict={value!r}") from None


def _check_key(request_key: object) -> str:
    if not isinstance(request_key, str) or not 16 <= len(request_key) <= 64 or not request_key.isascii():
        raise ServiceError(Reason.INVALID_REQUEST, "the form's request key is missing or malformed; reload the page")
    return request_key


def _check_rationale(rationale: object) -> str:
    if not isinstance(rationale, str) or not rationale.strip():
        raise DecisionRefused(Reason.RATIONALE_REQUIRED)
    if len(rationale) > MAX_RATIONALE_CHARS:
        raise ServiceError(Reason.INVALID_REQUEST, f"a rationale is at most {MAX_RATIONALE_CHARS} characters")
    return rationale.strip()


def _replayed(request_key: str, verification: Verification, user: Any, found: Any) -> ReviewDecision | None:
    """The decision an earlier POST of this form recorded (``found``: its pk as the read after the lock saw it)."""
    if found is None:
        return None
    existing = ReviewDecision.objects.select_related("receipt").filter(pk=found, request_key=request_key).first()
    if existing is None:  # pragma: no cover - a decision is never deleted
        return None
    if existing.verification_id != verification.pk or existing.user_id != user.pk:
        raise ServiceError(Reason.IDEMPOTENCY_CONFLICT, "this form was already used for another decision", status=409)
    return existing


#: The verification a decision locks, with its task (read in the same statement, not locked).
_LOCKED: Final = Related(Verification, ("task",))


def _lock_query(*, verification_pk: Any) -> QuerySet[Any]:
    return (
        Verification.objects.select_for_update(of=("self",)).filter(pk=verification_pk).values_list(*_LOCKED.columns())
    )


#: ``SELECT … FOR UPDATE OF`` the verification, compiled once (``verification.compiled``; inside the decision's
#: transaction, where Django compiles ``select_for_update``).
_LOCK: Final = Compiled(
    "decision-lock",
    Verification,
    _lock_query,
    {"verification_pk": Probe.key_of(Verification)},
)


#: The head receipt's columns the decision reads (its payload, kind and place in the chain), in this order.
_HEAD_COLUMNS: Final = ("content_hash", "seq", "kind", "envelope")


def _after_lock_query(*, verification_pk: Any, user_pk: Any, now: datetime, request_key: str) -> QuerySet[Any]:
    """What a decision reads about the locked verification, as ONE statement sent after the lock was granted (under
    READ COMMITTED its snapshot then sees every commit before the lock): the decision this form recorded already, if
    any; whether ``user_pk`` holds the lease at ``now``; the head receipt; queue membership at ``now``
    (``queue_member_q``, the queue's one definition); the active signing key (the chain's next entry is signed with
    it: ``receipts.HeldChain``)."""
    head = Receipt.objects.filter(verification_id=OuterRef("pk")).order_by("-seq")
    lease = ReviewLease.objects.filter(
        verification_id=OuterRef("pk"), holder_id=user_pk, released_at__isnull=True, expires_at__gt=now
    )
    return (
        Verification.objects.filter(pk=verification_pk)
        .annotate(
            d_replayed=Subquery(ReviewDecision.objects.filter(request_key=request_key).values("pk")[:1]),
            d_held=Exists(lease),
            **{f"d_head_{name}": Subquery(head.values(name)[:1]) for name in _HEAD_COLUMNS},
            d_member=ExpressionWrapper(queue_member_q(now), output_field=BooleanField()),
            d_key=Subquery(SigningKey.objects.filter(status=SigningKey.Status.ACTIVE).values("key_id")[:1]),
        )
        .values_list("d_replayed", "d_held", *(f"d_head_{name}" for name in _HEAD_COLUMNS), "d_member", "d_key")
    )


@dataclass(frozen=True)
class _AfterLock:
    replayed: Any
    held: bool
    head: Receipt | None
    in_queue: bool
    key_id: str | None
    #: The rails' read (``cycle_workers`` of the subject, with the reviewer), sent with the lock.
    workers: CycleWorkers | None = None


#: ``_after_lock_query`` compiled once (``verification.compiled``): the queue's membership condition alone cost more to
#: build through the ORM than the whole statement costs to run.
_AFTER_LOCK: Final = Compiled(
    "decision-after-lock",
    Verification,
    _after_lock_query,
    {
        "verification_pk": Probe.key_of(Verification),
        "user_pk": Probe(1_000_031, 1_000_032),
        "now": Probe.instant(ReviewLease._meta.get_field("expires_at")),
        "request_key": Probe("probe-request-key-31", "probe-request-key-32"),
    },
)


def _lock_and_read(verification_pk: Any, user: Any, now: datetime, request_key: str) -> tuple[Verification, _AfterLock]:
    """The verification locked for the decision, with its task (``not-found`` when there is none), and what the
    decision reads after the lock (``_after_lock_query``): one round trip on PostgreSQL (``compiled.pipelined``), the
    read's snapshot taken once the lock is granted."""
    lock_rows, rows, workers_rows = pipelined(
        (_LOCK, {"verification_pk": verification_pk}),
        (_AFTER_LOCK, {"verification_pk": verification_pk, "user_pk": user.pk, "now": now, "request_key": request_key}),
        workers_of_verification_query(verification_pk, user),
    )
    if not lock_rows:
        raise NotFound(f"no verification {verification_pk}", verification_id=str(verification_pk))
    locked: Verification = _LOCKED.root(lock_rows[0])
    workers = None
    if locked.task_id is not None and locked.cycle is not None:
        workers = workers_from_rows(Task(pk=locked.task_id), locked.cycle, workers_rows)
    if not rows:  # pragma: no cover - the row is locked
        raise NotFound(f"no verification {locked.pk}", verification_id=str(locked.pk))
    replayed, held, *head_values, member, key_id = rows[0]
    head = None
    if head_values[0] is not None:  # a loaded receipt with only these columns (the others deferred)
        read = {"verification_id": locked.pk, **dict(zip(_HEAD_COLUMNS, head_values, strict=True))}
        names = [f.attname for f in Receipt._meta.concrete_fields if f.attname in read]  # from_db's order
        head = Receipt.from_db(Receipt.objects.db, names, [read[name] for name in names])
    return locked, _AfterLock(replayed, bool(held), head, bool(member), key_id, workers)


def decision_rails(
    user: Any, verification: Verification, found: CycleWorkers | None = None
) -> tuple[Actor, KernelError | None]:
    """``user``'s actor and the decision rails' refusal for it on ``verification`` (None: they allow it): rails 1-3
    with the reviewer's human actor as the verifier and the approval's cycle (SPEC §9; ``claims._rails_over``). One
    query: ``cycle_workers`` reads the reviewer's actor and its tokens' boundaries with the cycle's workers (a user
    without an actor yet gets one, ``actor_for_user``, as on every path); ``found``: that read, when the caller sent
    it with its own (a decision, with its lock)."""
    if verification.task_id is None or verification.cycle is None:  # refused before any rail reads (claims')
        actor = actor_for_user(user)
        return actor, _rail_refusal(verification, actor)
    if found is None:
        found = cycle_workers(Task(pk=verification.task_id), verification.cycle, reviewer=user)
    actor, verifier = found.reviewer, found.verifier
    if actor is None or verifier is None:
        actor = actor_for_user(user)
        verifier = kernel_actor(actor)
    return actor, _rails_over(found, verifier)


def decision_bar(*, user: Any, verification: Verification, found: CycleWorkers | None = None) -> KernelError | None:
    """Why ``user`` may not decide ``verification`` (read before any lease or typing), or None: ``claims.review_bar``'s
    answer, with the rails read in one query (``decision_rails``; ``found``: that read, when the caller sent it with
    its own, the review page's). Read-only apart from a first-time reviewer's actor."""
    if verification.task_id is not None and verification.cycle is not None:
        try:
            _require_reviewer(user)
        except KernelError:
            pass
        else:
            return decision_rails(user, verification, found)[1]
    return review_bar(user=user, verification=verification)  # refused before any rail, or not a queue item


def _prior(head: Receipt, now: datetime) -> tuple[Mapping[str, Any], Outcome]:
    payload = receipt_payload(head)
    if "criteria" not in payload:
        raise ServiceError(Reason.NOT_IN_REVIEW_QUEUE, "the head receipt holds no outcome to decide over", status=409)
    return payload, read_outcome(payload, now=now)


def _cited_items(locked: Verification, cited: Sequence[str]) -> list[StoredItem]:
    """The stored bytes of exactly the cited items, which must be evidence bound to this verification."""
    bound = {
        str(row.evidence_id): row.evidence
        for row in VerificationEvidence.objects.filter(verification=locked).select_related("evidence")
    }
    items = []
    for evidence_id in cited:
        evidence: Evidence | None = bound.get(evidence_id)
        if evidence is None:
            raise DecisionRefused(
                Reason.DECISION_CITES_NO_EVIDENCE, f"{evidence_id} is not evidence of this verification"
            )
        redacted = evidence.redacted_at is not None
        content = None if redacted else storage.read(evidence.digest)  # read now (SPEC §2)
        items.append(StoredItem(evidence_id, evidence.digest, content, redacted=redacted))
    return items


def _check_cited(cited_evidence_ids: object) -> tuple[str, ...]:
    if isinstance(cited_evidence_ids, (str, bytes)) or not isinstance(cited_evidence_ids, Sequence):
        raise DecisionRefused(Reason.DECISION_CITES_NO_EVIDENCE, "cited evidence is a list of evidence ids")
    cited = tuple(dict.fromkeys(str(e).strip() for e in cited_evidence_ids))
    if len(cited) > MAX_CITED or any(not e for e in cited):
        raise DecisionRefused(Reason.DECISION_CITES_NO_EVIDENCE, "an evidence id is blank, or too many are cited")
    return cited


def _record(
    request_key: str,
    locked: Verification,
    user: Any,
    actor: Actor,
    action: ReviewAction,
    rationale: str,
    cited: Sequence[str],
    now: datetime,
    receipt: Receipt | None = None,
) -> ReviewDecision:
    """The decision's record (with its receipt for PASS and FAIL) and its security-log entry, inserted with the
    decision's other writes (``compiled.writes_batched``; its id is set when they are sent)."""
    record = ReviewDecision(
        request_key=request_key,
        verification=locked,
        user=user,
        actor=actor,
        action=action.value,
        rationale=rationale,
        cited_evidence_ids=list(cited),
        receipt=receipt,
        created_at=now,
    )
    _INSERT_DECISION([record])
    security_log.decision_logged(record)  # an Insert sends no post_save: the entry is written here, right after it
    return record


#: A decision's row as one INSERT built once (``compiled.Insert``).
_INSERT_DECISION: Final = Insert(ReviewDecision)


#: The decided head's columns, compiled once (``verification.compiled``) and queued with the decision's other writes.
_DECIDED_HEAD: Final = Compiled(
    "decided-head",
    Verification,
    head_row,
    {name: HEAD_PROBES[name] for name in ("verification_pk", "verdict", "determination", "awaiting_evidence")},
    update=lambda verification_pk, verdict, determination, awaiting_evidence: {
        "verdict": verdict,
        "determination": determination,
        "flagged": False,
        "flag_reason": None,
        "reason": Reason.HUMAN_DECISION.value,
        "human_decided": True,
        "pending_until": None,
        "awaiting_evidence": awaiting_evidence,
    },
    prepared=True,
)


def _lease_done(locked: Verification, user: Any, now: datetime, end_reason: str) -> None:
    """End the reviewer's lease on a decided item; the queue's cached counts are stale from here."""
    end_lease_later(locked.pk, user, now, end_reason)
    forget_queue_counts()
    transaction.on_commit(forget_queue_counts)  # and again once committed: a reader in between cached the old


def _decide_locked(
    *,
    user: Any,
    locked: Verification,
    read: _AfterLock,
    action: ReviewAction,
    rationale: str,
    cited: tuple[str, ...],
    request_key: str,
    now: datetime,
) -> ReviewDecision | _Refused:
    if not read.held:
        return _Refused(_not_held("claim the item before deciding it"), release=False)
    head = read.head
    if head is None:
        return _Refused(ServiceError(Reason.NOT_IN_REVIEW_QUEUE, "it has no receipt yet", status=409), release=True)
    if head.kind == ReceiptKind.DECISION or locked.human_decided:
        return _Refused(ServiceError(Reason.ALREADY_DECIDED, f"receipt {head.content_hash}", status=409), release=True)
    if not read.in_queue:
        return _Refused(ServiceError(Reason.NOT_IN_REVIEW_QUEUE, f"verification {locked.pk}", status=409), release=True)
    actor, refusal = decision_rails(user, locked, read.workers)
    if refusal is not None:
        # SPEC §9: for a person a rail refusal is an error shown to them; no receipt. The item goes to others.
        return _Refused(refusal, release=True)
    prior_payload, prior = _prior(head, now)

    if action is ReviewAction.MORE_EVIDENCE:
        record = _record(request_key, locked, user, actor, action, rationale, cited, now)
        Verification.objects.filter(pk=locked.pk).update(awaiting_evidence=True)
        _lease_done(locked, user, now, END_EVIDENCE_REQUESTED)
        events.event_append(  # the decision's transaction holds it: no savepoint of its own
            kind=events.EVIDENCE_REQUESTED,
            verification=locked,
            payload={
                "verification_id": str(locked.pk),
                "actor": actor.name,
                "reason": Reason.HUMAN_DECISION.value,
                "rationale": rationale,
            },
        )
        return record

    integrity = recheck(_cited_items(locked, cited)) if cited else recheck(())
    try:
        outcome = decide(
            prior=prior,
            verdict=Verdict(action.value),
            cited_evidence_ids=cited,
            integrity=integrity,
            rationale=rationale,
        )
    except DecisionRefused as exc:
        # SPEC §2, §10: bytes found gone or changed while deciding raise an evidence-integrity finding all the same.
        subject = subject_key(task_id=str(locked.task_id), cycle=int(locked.cycle or 1))
        for finding in evidence_integrity_findings(proof=integrity, subject=subject):
            finding_raise(finding=finding, subject=subject, verification=locked, receipt_refs=[head.content_hash])
        return _Refused(exc, release=False)
    payload = decision_payload(
        prior_payload=prior_payload,
        prior=prior,
        outcome=outcome,
        actor_id=actor.name,
        actor_kind=actor.kind,
        superseded_receipt_id=head.content_hash,
        superseded_kind=head.kind,
    )
    # The chain is held: the row lock, and its head and the active key read after it (``_after_lock``).
    held = HeldChain(key_id=read.key_id, seq=head.seq + 1, prev_hash=head.content_hash, supersedes=head.content_hash)
    receipt = receipt_issue_held(
        verification=locked, kind=ReceiptKind.DECISION, payload=payload, created_at=now, superseded=head, held=held
    )
    passed = outcome.verdict is Verdict.PASS
    _DECIDED_HEAD.run_later(
        verification_pk=locked.pk,
        verdict=outcome.verdict.value,
        determination=outcome.determination.value,
        awaiting_evidence=not passed,  # a FAIL may still be repaired with new evidence (a re-run)
    )
    record = _record(request_key, locked, user, actor, action, rationale, outcome.cited_evidence_ids, now, receipt)
    _lease_done(locked, user, now, END_DECIDED)
    events.event_append(  # the last write of the decision's transaction (review_decide holds it)
        kind=events.VERIFICATION_DECIDED,
        verification=locked,
        payload={
            "verification_id": str(locked.pk),
            "receipt_id": receipt.content_hash,
            "seq": receipt.seq,
            "receipt_kind": receipt.kind,
            "verdict": outcome.verdict.value,
            "determination": outcome.determination.value,
            "flagged": False,
            "actor": actor.name,
        },
    )
    return record


def review_decide(
    *,
    user: Any,
    verification: Verification,
    verdict: str,
    rationale: str,
    cited_evidence_ids: Sequence[str],
    request_key: str,
    now: datetime | None = None,
) -> ReviewDecision:
    """Record a reviewer's PASS, FAIL or MORE_EVIDENCE ("needs more evidence") on a queue item they hold.

    Returns the ``ReviewDecision`` (with its ``decision`` receipt for PASS and FAIL). The same ``request_key``
    again returns the first result (one receipt). Refusals carry their code: ``review-lease-not-held``,
    ``already-decided``, ``not-in-review-queue``, ``stale-cycle``, the rails' (``worker-self-verification``,
    ``verifier-authored-work``, ``shared-execution-boundary``, ``unnamed-actor``: the lease is released),
    ``rationale-required``, ``decision-cites-no-evidence``, ``mismatch-needs-new-evidence``,
    ``deterministic-fail-needs-new-evidence`` and the integrity codes of the cited items; ``permission-denied`` for a
    user who may not decide.
    """
    _require_reviewer(user)
    when = _now(now)
    key = _check_key(request_key)
    action = _action(verdict)
    # The decision's rows, its head's columns, its lease's end and its event go with the COMMIT, in one round trip.
    with atomic_batched():
        locked, read = _lock_and_read(verification.pk, user, when, key)
        replayed = _replayed(key, locked, user, read.replayed)
        if replayed is not None:
            return replayed
        text = _check_rationale(rationale)
        cited = _check_cited(cited_evidence_ids)
        result = _decide_locked(
            user=user, locked=locked, read=read, action=action, rationale=text, cited=cited, request_key=key, now=when
        )
    if isinstance(result, ReviewDecision):
        return result
    if result.release:
        _end_lease(verification.pk, user, when, result.error.reason.value)
    raise result.error


def review_request_evidence(
    *, user: Any, verification: Verification, rationale: str, request_key: str, now: datetime | None = None
) -> ReviewDecision:
    """ "Needs more evidence": out of the queue until new evidence brings a re-run (``review_decide`` with
    MORE_EVIDENCE)."""
    return review_decide(
        user=user,
        verification=verification,
        verdict=ReviewAction.MORE_EVIDENCE.value,
        rationale=rationale,
        cited_evidence_ids=(),
        request_key=request_key,
        now=now,
    )
