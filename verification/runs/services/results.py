"""Results that arrive later (SPEC §2 PENDING): delivery, re-evaluation and the ``result`` receipt."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import datetime
from typing import Any, Final

from django.db.models import QuerySet
from django.utils import timezone

from verification.actors.models import Actor, ApiToken
from verification.actors.services.actors import require_token_of
from verification.compiled import Compiled, Insert, Probe, atomic_batched
from verification.errors import NotFound, ServiceError
from verification.kernel import actors as kactors
from verification.kernel.canonical import canonicalize, loads_strict
from verification.kernel.criteria import CriterionKind
from verification.kernel.errors import InvariantError, KernelError
from verification.kernel.evaluation import (
    evaluate_run,
    read_outcome,
    result_may_arrive,
)
from verification.kernel.reasons import Reason
from verification.runs.models import ArrivedResult, Verification
from verification.runs.selectors import rubric_criteria
from verification.runs.services import events
from verification.runs.services.body_rules import (
    RESULT_FIELDS,
    check_author,
    check_imported_body,
    invalid,
    unknown_fields,
)
from verification.runs.services.facts import claims_of, load_facts
from verification.runs.services.outcome import record_outcome, run_payload
from verification.runs.services.run import RunRead, lock_and_read, run_locked
from verification.trust.models import Receipt, ReceiptKind
from verification.trust.selectors import head_from_rows, head_query
from verification.trust.services.receipts import HeldChain, receipt_issue_held

#: The arrived results' INSERT, built once (``compiled.Insert``).
_INSERT_RESULTS: Final = Insert(ArrivedResult)


def results_arrived(
    *,
    verification: Verification,
    actor: Actor,
    boundary: str,
    received_at: datetime,
    results: Iterable[tuple[str, Mapping[str, Any]]],
) -> None:
    """Record results (criterion id, body) that ``actor`` sent from ``boundary`` for ``verification``: queued in the
    caller's batch (``compiled.writes_batched``), so they go with its next read (which sees them) or its COMMIT. A
    submission's judgments and results, and a late result (``result_deliver``)."""
    _INSERT_RESULTS(
        [
            ArrivedResult(
                verification=verification,
                criterion_id=criterion_id,
                actor=actor,
                boundary=boundary,
                body=dict(body),
                received_at=received_at,
            )
            for criterion_id, body in results
        ]
    )


def _head_payload(receipt: Receipt) -> Mapping[str, Any]:
    payload = loads_strict(receipt.envelope)["payload"]
    if not isinstance(payload, Mapping):  # pragma: no cover - receipt_issue signs mappings only
        raise InvariantError(Reason.MALFORMED_RECORD, "a receipt payload is an object")
    return payload


def _arrived_query(verification_pk: Any, criterion_id: str) -> QuerySet[ArrivedResult, tuple[Any, ...]]:
    found = ArrivedResult.objects.filter(verification_id=verification_pk, criterion_id=criterion_id)
    return found.values_list("pk")[:1]


#: Whether a criterion of a verification has its result already (compiled once; read with a late result's lock).
_ARRIVED: Final = Compiled(
    "arrived-result",
    ArrivedResult,
    _arrived_query,
    {
        "verification_pk": Probe.key_of(Verification),
        "criterion_id": Probe("probe-1", "probe-2", ArrivedResult._meta.get_field("criterion_id")),
    },
    prepared=True,
)


@atomic_batched()  # the receipt, the head columns and the event go with the COMMIT, as a run's do
def result_deliver(
    *,
    actor: Actor,
    token: ApiToken | None,
    verification: Verification,
    criterion_id: str,
    body: Mapping[str, Any],
    now: datetime | None = None,
) -> Receipt:
    """Deliver the result a PENDING criterion awaits; append a ``result`` receipt superseding the head (SPEC §2).

    The deliverer must be of the criterion's kind (a semantic worker for ``semantic``, an external verifier for
    ``imported``: ``actor-cannot-author-result``, 403); the result is then evaluated like any other (rails, policy,
    integrity: ``evaluate_run`` again with the same ``submitted_at``). Refusals (409): ``not-pending`` when no check
    of the criterion awaits a result, ``pending-expired`` when it arrives at or after the deadline. A result for a
    verification whose run has not happened yet is stored and the run is done now (the receipt is then seq 0).
    """
    when = now or timezone.now()
    boundary = require_token_of(actor, token)
    # The lock and, read after it in the same round trip, what the run reads (the gates of its fact reads and of the
    # outcome's, the cycle's workers, the bindings: as the run does, ``run.lock_and_read``), the head and whether this
    # criterion has its result already.
    also = (head_query(verification.pk), (_ARRIVED, {"verification_pk": verification.pk, "criterion_id": criterion_id}))
    try:
        locked, read = lock_and_read(verification.pk, (verification.task_id, verification.cycle), also=also)
    except Verification.DoesNotExist:
        raise NotFound(f"no verification {verification.pk}", verification_id=str(verification.pk)) from None
    head_rows, arrived_rows = read.also
    registered = rubric_criteria(locked.rubric) if locked.rubric is not None else None
    criterion = registered.criterion(criterion_id) if registered is not None else None
    if criterion is None or criterion.kind not in (CriterionKind.SEMANTIC, CriterionKind.IMPORTED):
        raise ServiceError(Reason.NOT_PENDING, f"criterion {criterion_id!r} awaits no result", status=409)
    check_author(actor, criterion, criterion_id, kind=criterion.kind)
    if not isinstance(body, Mapping):
        raise invalid("the result body is a JSON object")
    if criterion.kind is CriterionKind.IMPORTED:
        unknown_fields(body, RESULT_FIELDS, "body")
        check_imported_body(body, "body")
    canonicalize(body)  # strict JSON only (StrictJSONError otherwise)
    head = head_from_rows(head_rows)
    if head is None:
        pending = criterion.pending(locked.submitted_at)
        if pending is None:
            raise ServiceError(
                Reason.NOT_PENDING, f"criterion {criterion_id!r} has no deadline to wait for", status=409
            )
        if when >= pending.deadline:
            raise ServiceError(Reason.PENDING_EXPIRED, f"deadline {pending.deadline.isoformat()} passed", status=409)
    else:
        if head.kind == ReceiptKind.DECISION:
            raise ServiceError(Reason.NOT_PENDING, "a person has decided this verification", status=409)
        try:
            result_may_arrive(read_outcome(_head_payload(head), now=when), criterion_id, arrived_at=when)
        except KernelError as exc:
            raise ServiceError(exc.reason, exc.detail, status=409) from None
    if arrived_rows:
        raise ServiceError(Reason.NOT_PENDING, f"criterion {criterion_id!r} already has its result", status=409)
    results_arrived(
        verification=locked, actor=actor, boundary=boundary, received_at=when, results=[(criterion_id, body)]
    )
    # The gates were read before this result was queued: it is one more arrived result (its queued INSERT is sent
    # before load_facts reads the arrived results, so that read sees it).
    gates = {**read.state, "has_arrived": True}
    read = RunRead(gates, read.workers, read.bindings)
    if head is None:
        Verification.objects.filter(pk=locked.pk).update(attempts=locked.attempts + 1)
        receipt = run_locked(locked, now=when, read=read)
    else:
        facts = load_facts(locked, now=when, gates=gates, workers=read.workers, bindings=read.bindings)
        result = evaluate_run(
            criteria=facts.criteria,
            ctx=facts.ctx,
            bound=facts.bound,
            arrived=facts.arrived,
            claims=claims_of(locked, facts),
        )
        payload = run_payload(
            facts,
            result,
            issuer=actor,
            authority=kactors.authority_for(kactors.ActorKind(actor.kind)),
            supersedes_receipt_id=head.content_hash,
        )
        # In this transaction, without a savepoint of its own (whose RELEASE sent the queued receipt alone), on the
        # chain locked and read above: the next entry after the head, signed with the key active after the lock.
        held = HeldChain(
            key_id=gates["key_id"], seq=head.seq + 1, prev_hash=head.content_hash, supersedes=head.content_hash
        )
        receipt = receipt_issue_held(verification=locked, kind=ReceiptKind.RESULT, payload=payload, held=held)
        record_outcome(locked, facts, result, receipt, gates=gates)
    events.event_append(  # the last write: queued with the others, sent with the COMMIT
        kind=events.RESULT_RECEIVED,
        verification=locked,
        payload={
            "verification_id": str(locked.pk),
            "criterion": criterion_id,
            "actor": actor.name,
            "receipt_id": receipt.content_hash,
        },
    )
    return receipt
