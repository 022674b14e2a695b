"""Submitting verifications (issue 4 §1; SPEC §1, §7).

``verification_submit`` records a submission against its subject (the task and its current cycle) and that cycle's
accepted contract, then enqueues ``verification_run`` (Celery; eager without a broker; ``services.run``). An
``Idempotency-Key`` per actor replays the same verification. ``verification_add_evidence`` submits again with more
evidence, superseding a verification that waits for it.

The submission body, validated once by the API's serializers into a typed ``verification.runs.submissions.Submission``
(a raw body from an in-process caller goes through the same serializers; these services check only the rules that
are not about wire shape)::

    {
      "task": "<task id>",                       # optional here; must name ``task`` when present
      "evidence": [                              # each binds an item to a symbol the rubric's criteria name
        {"symbol": "notes", "evidence_id": "<uuid from POST /v1/evidence>"},
        {"symbol": "log", "content_base64": "<standard base64>", "media_type": "text/plain",
         "evidence_type": "artifact", "collected_at": "<RFC 3339>", "max_age_seconds": 3600,
         "expires_at": "<RFC 3339>", "as_manifest": false}
      ],
      "judgments": [                             # semantic workers' tokens only (SPEC §6)
        {"criterion": "tests-green", "outcome": "cited_support", "typed_predicate": "...", "case_digest": "sha256:…",
         "citations": [{"evidence_id", "start", "end", "quote", "quote_hash"}], "rationale": "..."}
      ],
      "results": [                               # external verifiers' tokens only; never PASS-capable
        {"criterion": "ext-scan", "verdict": "FAIL", "detail": "...", "evidence": ["log"], "authority": "..."}
      ],
      "wait_ms": 0                               # transport only: not stored, not hashed
    }

``submission_hash`` = sha256 hex of the RFC 8785 bytes of that body without ``wait_ms``, where each
``content_base64`` value is replaced by ``sha256:<hex>`` of the decoded bytes. A body ``authority`` is kept only as
the submitter's claim: the authority of every result is assigned from the token's actor kind (SPEC §1).

The *producer* of a verification (the actor whose work it is, for rails 3–5) is the submitter when it claimed the
task in this cycle or nobody did; otherwise the cycle's first claimant (``CycleWorkers.producer_of``). The workers
of the cycle — claimants and submitters — come from ``verification.runs.cycle_workers`` (SPEC §1).
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import uuid
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any, Final

from django.db import IntegrityError, transaction
from django.db.models import OuterRef, QuerySet, Subquery
from django.utils import timezone

from verification import metrics
from verification.actors.models import Actor, ApiToken
from verification.actors.services.actors import require_token_of
from verification.compiled import Compiled, Insert, Probe, atomic_batched, pipelined
from verification.errors import NotFound, ServiceError
from verification.evidence.models import Evidence, VerificationEvidence
from verification.evidence.selectors import evidence_by_ids
from verification.evidence.services import evidence_admit_many
from verification.kernel.canonical import canonicalize
from verification.kernel.criteria import CriterionKind
from verification.kernel.reasons import Reason
from verification.runs.cycle_workers import cycle_workers
from verification.runs.models import ContractAcceptance, Task, TaskCycle, Verification
from verification.runs.ownership import require_worker_of
from verification.runs.selectors import contract_from_rows, contract_of, contracts_query, current_cycle, rubric_criteria
from verification.runs.services.body_rules import check_author, invalid, refuse_mismatch
from verification.runs.services.results import results_arrived
from verification.runs.services.run import seq0
from verification.runs.submissions import Binding, Submission, submission_of

logger = logging.getLogger(__name__)


MAX_IDEMPOTENCY_KEY: Final = 200


#: The rubric_hash of a verification whose cycle had no accepted contract when it was submitted (SPEC §1).
NO_CONTRACT_HASH: Final = "0" * 64


def _check_key(idempotency_key: str | None) -> str | None:
    if idempotency_key is None:
        return None
    if (
        not isinstance(idempotency_key, str)
        or not 1 <= len(idempotency_key) <= MAX_IDEMPOTENCY_KEY
        or not idempotency_key.isascii()
        or not idempotency_key.isprintable()
    ):
        raise invalid(f"Idempotency-Key is 1-{MAX_IDEMPOTENCY_KEY} printable ASCII characters")
    return idempotency_key


def _replay(actor: Actor, key: str, submission_hash: str) -> Verification | None:
    existing = Verification.objects.filter(submitted_by=actor, idempotency_key=key).first()
    if existing is None:
        return None
    if existing.submission_hash != submission_hash:
        raise ServiceError(
            Reason.IDEMPOTENCY_CONFLICT,
            "this Idempotency-Key was used for a different body",
            status=409,
            details={"verification_id": str(existing.pk)},
        )
    return existing


def verification_enqueue(*, verification_id: str | uuid.UUID) -> bool:
    """Publish the run of a committed verification; True when the broker took it.

    The row is the record that the run is owed (a verification with no seq-0 receipt and no ``failed_at``), so a
    publish that fails (broker down) is logged and answered False, never raised: the submission stays acknowledged
    and the sweeper (``services.sweeper``) publishes it again. The run is idempotent, so a second message is harmless.
    """
    from verification import tasks  # the task module imports this one

    try:
        tasks.verification_run.delay(str(verification_id))
    except Exception as exc:  # whatever the transport raised: the committed row waits for the sweeper
        logger.warning(
            "verification %s: publishing its run failed (%r); the sweeper will enqueue it", verification_id, exc
        )
        return False
    return True


def _enqueue(verification_id: uuid.UUID) -> None:
    verification_enqueue(verification_id=verification_id)


def _replayed(verification: Verification) -> Verification:
    """A replay of an Idempotency-Key: the same verification; if it has not run (and not failed), its run is
    published again (the first message may be lost: a broker restart, a publish that failed after commit)."""
    metrics.count_submission(created=False)
    if verification.failed_at is None and seq0(verification.pk) is None:
        transaction.on_commit(lambda: _enqueue(verification.pk))
    return verification


def _cycle_and_latest_query(task_pk: uuid.UUID) -> QuerySet[Task, tuple[Any, Any]]:
    top = TaskCycle.objects.filter(task=OuterRef("pk")).order_by("-number").values("number")[:1]
    latest = Verification.objects.filter(task=OuterRef("pk"), cycle=OuterRef("cycle_now")).order_by(
        "-created_at", "-id"
    )
    return (
        Task.objects.filter(pk=task_pk)
        .annotate(cycle_now=Subquery(top))
        .annotate(latest_id=Subquery(latest.values("pk")[:1]))
        .values_list("cycle_now", "latest_id")
    )


#: Compiled once (``verification.compiled``): building it through the ORM cost several times running it.
_CYCLE_AND_LATEST: Final = Compiled(
    "cycle-and-latest",
    Task,
    _cycle_and_latest_query,
    {"task_pk": Probe.key_of(Task)},
    prepared=True,
)


#: The superseded verification waits for evidence no more (compiled once: every submission after the first sends it).
#: Only a row that was waiting is written: rewriting one that was not (the usual case: it met its contract) made a new
#: version of the whole row, and a dead one for vacuum, on every submission, to store the value it already held.
_NOT_AWAITING: Final = Compiled(
    "not-awaiting",
    Verification,
    lambda verification_pk: Verification.objects.filter(pk=verification_pk, awaiting_evidence=True),
    {"verification_pk": Probe.key_of(Verification)},
    update=lambda verification_pk: {"awaiting_evidence": False},
    prepared=True,
)


#: A submission's verification row and its bindings: INSERTs built once (``compiled.Insert``), not per call (the
#: results it carries: ``results.results_arrived``).
_INSERT_VERIFICATION: Final = Insert(Verification)
_INSERT_BINDINGS: Final = Insert(VerificationEvidence)


def _cycle_and_latest(task: Task) -> tuple[int, uuid.UUID | None, ContractAcceptance | None]:
    """The task's current cycle (``selectors.current_cycle``) and its latest verification, in one query, and that
    cycle's contract (``selectors.contract_of``), read after it in the same round trip (the task's acceptances of
    every cycle: the kernel's rule keeps the cycle's); the latest comes back as its primary key (a new submission
    supersedes it: only its id is written)."""
    rows, contracts = pipelined((_CYCLE_AND_LATEST, {"task_pk": task.pk}), contracts_query(task.pk))
    row = rows[0] if rows else None
    cycle = int(row[0]) if row is not None and row[0] is not None else 1
    latest_id = row[1] if row is not None else None
    return cycle, latest_id, contract_from_rows(cycle, contracts)


def _evidence_key(digests: Sequence[str]) -> str:
    return hashlib.sha256(canonicalize(sorted(digests))).hexdigest()


def _create(
    *,
    actor: Actor,
    token: ApiToken | None,
    boundary: str,
    task: Task,
    submission: Submission,
    idempotency_key: str | None,
    supersedes_id: uuid.UUID | None,
    extra_bindings: Sequence[tuple[str, Evidence, bool]] = (),
    now: datetime,
    cycle_contract: tuple[int, ContractAcceptance | None] | None = None,
) -> Verification:
    """The submission's rows, queued in the caller's batch (``compiled.atomic_batched``: they go to the server together,
    with its COMMIT). ``cycle_contract``: the subject's current cycle and that cycle's contract (or None), when the
    caller read them; else they are read here."""
    if cycle_contract is None:
        cycle = current_cycle(task)
        contract = contract_of(task, cycle)
    else:
        cycle, contract = cycle_contract
    rubric = contract.rubric if contract is not None else None
    registered = rubric_criteria(rubric) if rubric is not None else None
    for kind, listed in ((CriterionKind.SEMANTIC, submission.judgments), (CriterionKind.IMPORTED, submission.results)):
        for criterion_id, _ in listed:
            check_author(
                actor,
                registered.criterion(criterion_id) if registered is not None else None,
                criterion_id,
                kind=kind,
            )
            if registered is not None and registered.criterion(criterion_id) is None:
                raise invalid(f"criterion {criterion_id!r} is not in the contract")
    bound: list[tuple[str, Evidence, bool]] = list(extra_bindings)
    # Items bound by id: one query for all of them; inline items: admitted together (one INSERT).
    by_id = evidence_by_ids([b.evidence_id for b in submission.bindings if b.evidence_id is not None])
    for binding in submission.bindings:
        if binding.evidence_id is not None and binding.evidence_id not in by_id:
            raise NotFound(f"no evidence {binding.evidence_id}", evidence_id=str(binding.evidence_id))
    inline_items = [b for b in submission.bindings if b.evidence_id is None]
    admitted = iter(
        evidence_admit_many(
            actor=actor,
            token=token,
            task=task,
            items=[
                {
                    "content": b.content or b"",
                    "evidence_type": b.evidence_type,
                    "media_type": b.media_type,
                    "collected_at": b.collected_at,
                    "max_age_seconds": b.max_age_seconds,
                    "expires_at": b.expires_at,
                }
                for b in inline_items
            ],
        )
    )
    for binding in submission.bindings:
        evidence = by_id[binding.evidence_id] if binding.evidence_id is not None else next(admitted)
        bound = [b for b in bound if b[0] != binding.symbol]
        bound.append((binding.symbol, evidence, binding.as_manifest))
    (verification,) = _INSERT_VERIFICATION(
        [
            Verification(
                rubric_hash=rubric.rubric_hash if rubric is not None else NO_CONTRACT_HASH,
                submission_hash=submission.submission_hash,
                task=task,
                cycle=cycle,
                rubric=rubric,
                submitted_by=actor,
                submitted_boundary=boundary,
                body=submission.stored_body,
                idempotency_key=idempotency_key,
                submitted_at=now,
                created_at=now,
                supersedes_id=supersedes_id,
                evidence_key=_evidence_key([e.digest for _, e, _ in bound]),
            )
        ]
    )
    _INSERT_BINDINGS(
        [
            VerificationEvidence(verification=verification, symbol=symbol, evidence=evidence, as_manifest=manifest)
            for symbol, evidence, manifest in bound
        ]
    )
    results_arrived(
        verification=verification,
        actor=actor,
        boundary=boundary,
        received_at=now,
        results=(*submission.judgments, *submission.results),
    )
    if supersedes_id is not None:
        _NOT_AWAITING.run_later(verification_pk=supersedes_id)
    return verification


@atomic_batched()  # the submission's rows go with the COMMIT, in one round trip
def verification_submit(
    *,
    actor: Actor,
    token: ApiToken | None,
    task: Task,
    body: Mapping[str, Any],
    idempotency_key: str | None,
    now: datetime | None = None,
) -> tuple[Verification, bool]:
    """Record a submission for ``task``'s current cycle and its contract, and enqueue its run (on commit).

    Returns ``(verification, created)``. The same ``Idempotency-Key`` (per actor) with the same body gives back the
    same verification (``created`` False); with a different body ``idempotency-conflict`` (409). Refusals:
    ``invalid-request``/``unknown-field``/``bad-base64`` (400), ``payload-too-large`` (413), ``not-found`` (an
    unknown evidence id, 404), ``actor-cannot-author-result`` (403: judgments from a non-semantic-worker, results
    from a non-external-verifier), ``mismatch-not-from-oracle`` (422).
    """
    boundary = require_token_of(actor, token)
    key = _check_key(idempotency_key)
    submission = submission_of(body)  # validated by the API's serializers (issue 13 item 5)
    if submission.task_ref is not None and submission.task_ref != str(task.pk):
        raise invalid("body.task names another task than the one submitted to")
    refuse_mismatch(submission.results)
    if key is not None:
        replayed = _replay(actor, key, submission.submission_hash)
        if replayed is not None:
            return _replayed(replayed), False
    when = now or timezone.now()
    cycle, latest_id, contract = _cycle_and_latest(task)
    try:
        # A savepoint only when an Idempotency-Key can lose a race (an IntegrityError then replays the winner).
        with transaction.atomic() if key is not None else contextlib.nullcontext():
            verification = _create(
                actor=actor,
                token=token,
                boundary=boundary,
                task=task,
                submission=submission,
                idempotency_key=key,
                supersedes_id=latest_id,
                now=when,
                cycle_contract=(cycle, contract),
            )
    except IntegrityError:
        if key is None:
            raise
        replayed = _replay(actor, key, submission.submission_hash)  # a concurrent request with the same key won
        if replayed is None:
            raise
        return _replayed(replayed), False
    transaction.on_commit(lambda: _enqueue(verification.pk))
    transaction.on_commit(lambda: metrics.count_submission(created=True))
    return verification, True


@atomic_batched()  # the new verification's rows go with the COMMIT, as a submission's do
def verification_add_evidence(
    *,
    actor: Actor,
    token: ApiToken | None,
    verification: Verification,
    body: Mapping[str, Any],
    now: datetime | None = None,
) -> Verification:
    """More evidence for a verification waiting for it: a new verification of the same subject, with the old
    bindings and the new ones (a new binding of a symbol replaces the old), whose first receipt supersedes the old
    head (SPEC §7). ``not-awaiting-evidence`` (409) when it met its contract, is still running, or was superseded;
    ``not-a-worker-of-this-cycle`` (403) for a caller that neither submitted it nor works on its cycle (SPEC §1).
    Judgments and results are not carried over: they were about the old evidence.
    """
    boundary = require_token_of(actor, token)
    locked = Verification.objects.select_for_update().filter(pk=verification.pk).first()
    if locked is None:
        raise NotFound(f"no verification {verification.pk}", verification_id=str(verification.pk))
    task = locked.task
    if task is not None and locked.cycle is not None:
        # SPEC §1 ownership: only its submitter or a worker of its cycle adds evidence (403, nothing written).
        require_worker_of(actor, locked, cycle_workers(task, locked.cycle))
    if task is None or not locked.awaiting_evidence or Verification.objects.filter(supersedes=locked).exists():
        raise ServiceError(
            Reason.NOT_AWAITING_EVIDENCE, f"verification {locked.pk} is not waiting for evidence", status=409
        )
    more = submission_of(body, more_evidence=True)  # validated by the API's serializers (issue 13 item 5)
    old = [
        (row.symbol, row.evidence, row.as_manifest)
        for row in VerificationEvidence.objects.filter(verification=locked).select_related("evidence")
    ]
    new_symbols = {binding.symbol for binding in more.bindings}
    kept = [(s, e, m) for s, e, m in old if s not in new_symbols]
    # The stored body and hash also name the superseded verification: the same evidence twice is two submissions.
    stored = {
        "task": str(task.pk),
        "evidence": [{"symbol": s, "evidence_id": str(e.pk), "as_manifest": m} for s, e, m in kept]
        + list(more.stored_body.get("evidence", [])),
        "supersedes": str(locked.pk),
    }
    submission = Submission(
        tuple(Binding(symbol=s, evidence_id=e.pk, as_manifest=m) for s, e, m in kept) + more.bindings,
        (),
        (),
        stored,
        hashlib.sha256(canonicalize(stored)).hexdigest(),
    )
    created = _create(
        actor=actor,
        token=token,
        boundary=boundary,
        task=task,
        submission=submission,
        idempotency_key=None,
        supersedes_id=locked.pk,
        now=now or timezone.now(),
    )
    transaction.on_commit(lambda: _enqueue(created.pk))
    return created
