"""Running verifications (issue 4 §2; SPEC §3, §7): the locked, idempotent run that signs seq 0, and the failed mark.

``verification_run`` loads the stored facts (``services.facts``), builds the kernel's records, calls
``kernel.evaluation.evaluate_run`` and issues receipt seq 0 (kind ``run``); what the outcome becomes (payload, head
columns, findings, events) is ``services.outcome``. Every rule is the kernel's; this module only gathers facts and
stores outcomes. Results that arrive later for a PENDING criterion are ``services.results``.
"""

from __future__ import annotations

import functools
import time
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Final

from django.db import transaction
from django.db.models import Exists, F, OuterRef, QuerySet, Subquery
from django.utils import timezone

from verification import metrics
from verification.actors.services.actors import portal_service_actor
from verification.compiled import Compiled, Probe, Related, atomic_batched, pipelined
from verification.errors import NotFound
from verification.evidence.models import VerificationEvidence
from verification.kernel.errors import InvariantError
from verification.kernel.evaluation import (
    evaluate_run,
)
from verification.kernel.reasons import Reason
from verification.kernel.verdicts import Authority
from verification.runs import run_signal
from verification.runs.cycle_workers import CycleWorkers, workers_from_rows, workers_query
from verification.runs.models import Verification
from verification.runs.services import events
from verification.runs.services.facts import (
    bindings_from_rows,
    bindings_query,
    claims_of,
    gate_annotations,
    load_facts,
)
from verification.runs.services.outcome import outcome_annotations, record_outcome, run_payload
from verification.trust.models import Receipt, ReceiptKind, SigningKey
from verification.trust.services.receipts import HeldChain, receipt_issue_held

#: Attempts of an operational failure before the run is recorded as failed (SPEC §3).
MAX_ATTEMPTS: Final = 3


def _after_lock_query(verification_pk: uuid.UUID) -> QuerySet[Verification, dict[str, Any]]:
    chain_of = Receipt.objects.filter(verification_id=OuterRef("pk"))
    return Verification.objects.filter(pk=verification_pk).values(
        seq0=Subquery(chain_of.filter(seq=0).order_by().values("content_hash")[:1]),
        key_id=Subquery(SigningKey.objects.filter(status=SigningKey.Status.ACTIVE).order_by().values("key_id")[:1]),
        previous=Subquery(
            Receipt.objects.filter(verification_id=OuterRef("supersedes_id"))
            .order_by("-seq")
            .values("content_hash")[:1]
        ),
        **gate_annotations(),
        **outcome_annotations(),
    )


#: ``_after_lock_query`` compiled once (``verification.compiled``): building it through the ORM cost more than running
#: it.
_AFTER_LOCK: Final = Compiled(
    "after-lock",
    Verification,
    _after_lock_query,
    {"verification_pk": Probe.key_of(Verification)},
    prepared=True,
)


@functools.cache
def _after_lock_names() -> tuple[str, ...]:
    return tuple(_after_lock_query(uuid.UUID(int=0)).query.annotation_select)


def _attempt_query(verification_pk: uuid.UUID, when: datetime) -> QuerySet[Verification]:
    """The verification whose run is owed (no seq 0 yet, not failed): the row the attempt is counted on."""
    return Verification.objects.filter(pk=verification_pk, failed_at__isnull=True).exclude(
        Exists(Receipt.objects.filter(verification_id=OuterRef("pk"), seq=0))
    )


#: Counting an attempt, compiled once.
_COUNT_ATTEMPT: Final = Compiled(
    "count-attempt",
    Verification,
    _attempt_query,
    {
        "verification_pk": Probe.key_of(Verification),
        "when": Probe.instant(Verification._meta.get_field("started_at")),
    },
    update=lambda verification_pk, when: {"attempts": F("attempts") + 1, "started_at": when},
    returning=("task_id", "cycle"),  # the subject, never changed after the submission: the run's reads go with its lock
    prepared=True,
)


def after_lock(verification_pk: uuid.UUID) -> dict[str, Any]:
    """Everything the run reads about the locked verification's surroundings, in ONE statement sent after the lock
    was granted (under READ COMMITTED its snapshot then sees every commit before the lock; the locking statement's
    could not): seq 0's id if the chain has begun, the active signing key, the head of the superseded chain, and the
    gates of the fact reads (``facts.gate_annotations``) and of the outcome's (``outcome.outcome_annotations``)."""
    rows = _AFTER_LOCK.rows(verification_pk=verification_pk)
    if not rows:
        raise NotFound(f"no verification {verification_pk}", verification_id=str(verification_pk))
    return dict(zip(_after_lock_names(), rows[0], strict=True))


#: The verification the run locks, with what the run reads of it (``select_related``'s three relations). Not the
#: verification it supersedes: the run needs only its id (a column of this row) and the receipt it reads after the
#: lock; loading it made the statement 4,385 bytes, past psycopg's 4,096 for caching a statement's parsed form.
_LOCKED: Final = Related(Verification, ("task", "rubric", "submitted_by"))


def _lock_query(verification_pk: uuid.UUID) -> QuerySet[Verification, tuple[Any, ...]]:
    return (
        Verification.objects.select_for_update(of=("self",))
        .filter(pk=verification_pk)
        .values_list(*_LOCKED.columns())
    )


_LOCK: Final = Compiled(
    "run-lock",
    Verification,
    _lock_query,
    {"verification_pk": Probe.key_of(Verification)},
    prepared=True,
)


@dataclass(frozen=True)
class RunRead:
    """What the run reads after its lock: ``after_lock``'s answer, and (read with it) the cycle's workers and the
    verification's bindings, or None when they are left to ``load_facts``."""

    state: dict[str, Any]
    workers: CycleWorkers | None = None
    bindings: list[VerificationEvidence] | None = None
    #: The rows of the caller's own reads sent with the lock (``lock_and_read(also=...)``), in their order.
    also: tuple[list[tuple[Any, ...]], ...] = ()


def lock_and_read(
    verification_pk: uuid.UUID,
    subject: tuple[Any, Any] | None = None,
    also: Sequence[tuple[Compiled, Mapping[str, Any]]] = (),
) -> tuple[Verification, RunRead]:
    """``SELECT … FOR UPDATE OF`` the verification (its relations read in the same statement, not locked),
    ``after_lock``'s read and, given the verification's ``subject`` (task pk, cycle), the cycle's workers and the
    verification's bindings: all compiled once and sent in ONE round trip on PostgreSQL with the transaction's BEGIN
    (``compiled.pipelined``: the server runs the reads after the lock is granted, so their snapshots see every commit
    before it); ``Verification.DoesNotExist`` when there is none. A subject that is not the locked row's (it never
    changes; but the lock decides) leaves the workers and bindings to ``load_facts``. ``also``: more compiled reads
    to send after the lock in the same round trip (a late result's head and arrived result); their rows come back in
    ``RunRead.also``."""
    queries = [(_LOCK, {"verification_pk": verification_pk}), (_AFTER_LOCK, {"verification_pk": verification_pk})]
    queries += list(also)
    task_pk, cycle = subject if subject is not None else (None, None)
    if task_pk is not None and cycle is not None:
        queries += [workers_query(task_pk, cycle), bindings_query(verification_pk)]
    lock_rows, rows, *answered = pipelined(*queries)
    extra, more = tuple(answered[: len(also)]), answered[len(also) :]
    if not lock_rows:
        raise Verification.DoesNotExist(f"no verification {verification_pk}")
    if not rows:  # pragma: no cover - the row is locked
        raise NotFound(f"no verification {verification_pk}", verification_id=str(verification_pk))
    locked: Verification = _LOCKED.root(lock_rows[0])
    state = dict(zip(_after_lock_names(), rows[0], strict=True))
    if not more or (locked.task_id, locked.cycle) != (task_pk, cycle):
        return locked, RunRead(state, also=extra)
    workers_rows, binding_rows = more
    workers, bindings = workers_from_rows(locked.task, cycle, workers_rows), bindings_from_rows(binding_rows)
    return locked, RunRead(state, workers, bindings, also=extra)


def run_locked(verification: Verification, *, now: datetime, read: RunRead | None = None) -> Receipt:
    """Evaluate and sign seq 0 of ``verification``, whose row the caller holds locked and whose chain is empty.
    ``read``: what the caller read after its lock (``lock_and_read``; else ``after_lock`` is read here)."""
    read = read if read is not None else RunRead(after_lock(verification.pk))
    state = read.state
    if state["seq0"] is not None:
        raise InvariantError(Reason.MALFORMED_RECORD, f"verification {verification.pk} has run already")
    facts = load_facts(verification, now=now, gates=state, workers=read.workers, bindings=read.bindings)
    result = evaluate_run(
        criteria=facts.criteria,
        ctx=facts.ctx,
        bound=facts.bound,
        arrived=facts.arrived,
        claims=claims_of(verification, facts),
    )
    previous = state["previous"] if verification.supersedes_id is not None else None
    payload = run_payload(
        facts,
        result,
        issuer=facts.portal or portal_service_actor(),
        authority=Authority.DETERMINISTIC,
        supersedes_receipt_id=previous,
    )
    # Inside verification_run's (or result_deliver's) transaction, without a savepoint of its own; the lock is held
    # and the chain was read after it (seq 0: no previous entry).
    held = HeldChain(key_id=state["key_id"], seq=0, prev_hash=None, supersedes=previous)
    receipt = receipt_issue_held(verification=verification, kind=ReceiptKind.RUN, payload=payload, held=held)
    record_outcome(verification, facts, result, receipt, gates=state)
    return receipt


def seq0(verification_pk: uuid.UUID) -> Receipt | None:
    return Receipt.objects.filter(verification_id=verification_pk, seq=0).first()


def _verification_pk(verification_id: str | uuid.UUID) -> uuid.UUID:
    try:
        return verification_id if isinstance(verification_id, uuid.UUID) else uuid.UUID(str(verification_id))
    except ValueError:
        raise NotFound(f"no verification {verification_id!r}", verification_id=str(verification_id)) from None


def verification_run(*, verification_id: str | uuid.UUID, now: datetime | None = None) -> Receipt | None:
    """Run a verification and issue receipt seq 0 (kind ``run``); idempotent and safe to run concurrently.

    If seq 0 exists it is returned (a redelivered or duplicated task). Otherwise the attempt is counted (committed
    on its own, so a reader sees ``running``), the verification row is locked (``SELECT … FOR UPDATE``), seq 0 is
    looked for again after the lock, and the run is evaluated and signed in that one transaction: two workers on
    the same verification yield one chain. A failed verification (``verification_mark_failed``) is not run again
    (a new attempt is a new submission): None. Operational errors propagate; the Celery task retries them.
    """
    pk = _verification_pk(verification_id)
    when = now or timezone.now()
    # The attempt is counted only when the run is owed (no seq 0 yet, not failed): one statement for the common case,
    # committed on its own (a reader sees ``running`` and the sweeper when it was last attempted) without waiting for
    # the disk: the run's commit, which does wait, flushes it too. A crash of the database server before that loses
    # this record and the run with it; the run is published again (the limit of attempts is the task's own count of
    # retries, ``verification.tasks``, not this column).
    counted = _COUNT_ATTEMPT.rows_unsynced(verification_pk=pk, when=when)
    if not counted:
        existing = seq0(pk)
        if existing is not None:
            metrics.observe_run(status="already-run")
            return existing
        if not Verification.objects.filter(pk=pk).exists():
            raise NotFound(f"no verification {pk}", verification_id=str(pk))
        metrics.observe_run(status="not-owed")
        return None
    started = time.perf_counter()
    try:
        # The receipt, the head columns and the event go together with the COMMIT: one round trip.
        with atomic_batched():
            locked, read = lock_and_read(pk, counted[0])
            if read.state["seq0"] is not None:
                metrics.observe_run(status="already-run")
                return seq0(pk)
            # Wake a wait_ms submission waiting for this run, once committed (nothing to do without a broker).
            transaction.on_commit(lambda: run_signal.announce(pk))
            receipt = run_locked(locked, now=when, read=read)
    except Exception as exc:
        Verification.objects.filter(pk=pk).update(last_error=f"{type(exc).__name__}: {exc}"[:2000])
        raise
    # Counted once committed (reviewportal/metrics.py: the run latency histogram by verdict).
    metrics.observe_run(status="signed", verdict=receipt.verdict or "", seconds=time.perf_counter() - started)
    return receipt


def verification_mark_failed(*, verification_id: str | uuid.UUID, error: str) -> bool:
    """Record an operational failure after the last attempt (SPEC §3): ``failed``, no determination, no receipt.

    True when it was marked now; False when it already had a receipt or was failed already.
    """
    pk = _verification_pk(verification_id)
    with transaction.atomic():
        locked = Verification.objects.select_for_update().filter(pk=pk).first()
        if locked is None or locked.failed_at is not None or seq0(pk) is not None:
            return False
        locked.failed_at = timezone.now()
        locked.last_error = (error or "failed")[:2000]
        locked.started_at = None
        locked.save(update_fields=["failed_at", "last_error", "started_at"])
        events.event_emit(
            kind=events.VERIFICATION_FAILED,
            verification=locked,
            payload={
                "verification_id": str(pk),
                "reason": Reason.RUN_FAILED.value,
                "attempts": locked.attempts,
                "error": locked.last_error,
            },
        )
    metrics.observe_run(status="failed")
    transaction.on_commit(lambda: run_signal.announce(pk))  # failed is finished too: wake its waiters
    return True
