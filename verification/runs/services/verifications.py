"""Submitting and running verifications (issue 4 §1–§2; SPEC §1–§7, §9, §10).

``verification_submit`` records a submission against its subject (the task and its current cycle) and that cycle's
accepted contract, then enqueues ``verification_run`` (Celery; eager without a broker). ``verification_run`` loads
the stored facts, builds the kernel's records, calls ``kernel.evaluation.evaluate_run`` and issues receipt seq 0
(kind ``run``). ``result_deliver`` accepts a result that a PENDING criterion awaits and appends a ``result``
receipt superseding the head. Every rule is the kernel's; this module only gathers facts and stores outcomes.

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
import time
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any, Final

from django.db import IntegrityError, transaction
from django.db.models import Exists, F, OuterRef, Subquery
from django.utils import timezone

from verification.actors.models import Actor, ActorKind, ApiToken
from verification.actors.ownership import require_worker_of
from verification.actors.services.actors import boundaries_for, kernel_actor, portal_service_actor, require_token_of
from verification.errors import NotFound, ServiceError
from verification.evidence import storage
from verification.evidence.models import Baseline, ChangeManifest, Evidence, FrozenCase, VerificationEvidence
from verification.evidence.services import evidence_admit_many, tier_for
from verification.kernel import actors as kactors
from verification.kernel.baselines import Baseline as KernelBaseline
from verification.kernel.baselines import is_authoritative
from verification.kernel.canonical import canonicalize, loads_strict
from verification.kernel.chain import format_created_at
from verification.kernel.contracts import first_claim_at, subject_key
from verification.kernel.criteria import Criterion, CriterionKind, RegisteredRubric
from verification.kernel.errors import InvariantError, KernelError
from verification.kernel.evaluation import (
    ArrivedResult as KernelArrived,
)
from verification.kernel.evaluation import (
    BoundEvidence,
    RunContext,
    RunResult,
    evaluate_run,
    outcome_payload,
    read_outcome,
    result_may_arrive,
)
from verification.kernel.evidence import (
    Accessibility,
    Citation,
    EvidenceFacts,
    artifact_text,
    assess_independence,
)
from verification.kernel.findings import (
    VerificationRecord,
    detect_disagreements,
    disagreement_finding,
    evidence_integrity_findings,
)
from verification.kernel.integrity import StoredItem
from verification.kernel.rails import ChangeManifest as KernelManifest
from verification.kernel.rails import check_change_manifest
from verification.kernel.reasons import Reason
from verification.kernel.semantic import parse_judgment, route
from verification.kernel.verdicts import Authority, Check, Verdict
from verification.records import metrics
from verification.reviews.services.findings import finding_raise
from verification.runs import run_signal
from verification.runs.cycle_workers import cycle_workers
from verification.runs.models import ArrivedResult, Task, TaskCycle, Verification
from verification.runs.read_state import phases_record
from verification.runs.selectors import contract_of, current_cycle, rubric_criteria
from verification.runs.services import events
from verification.runs.services.tasks import baseline_secret
from verification.runs.submissions import Binding, Submission, submission_of
from verification.trust.models import Receipt, ReceiptKind
from verification.trust.selectors import head_of
from verification.trust.services.receipts import receipt_issue, receipt_issue_held

logger = logging.getLogger(__name__)

MAX_RESULTS: Final = 256
MAX_IDEMPOTENCY_KEY: Final = 200
MAX_DETAIL: Final = 500
#: Attempts of an operational failure before the run is recorded as failed (SPEC §3).
MAX_ATTEMPTS: Final = 3

#: The rubric_hash of a verification whose cycle had no accepted contract when it was submitted (SPEC §1).
NO_CONTRACT_HASH: Final = "0" * 64
#: Without a contract there are no criteria to judge; one placeholder criterion carries the code so the outcome is
#: UNKNOWN ``no-accepted-contract`` (the kernel answers it for every criterion when the contract is missing).
NO_CONTRACT_CRITERION: Final = Criterion(id="contract", kind=CriterionKind.IMPORTED, description="no accepted contract")

RESULT_FIELDS: Final = frozenset({"criterion", "verdict", "detail", "evidence", "authority", "claims"})
IMPORTED_VERDICTS: Final = frozenset({Verdict.PASS, Verdict.FAIL, Verdict.UNKNOWN, Verdict.NOT_RUN})



def _invalid(detail: str, **details: Any) -> ServiceError:
    return ServiceError(Reason.INVALID_REQUEST, detail, details=details)


# --- parsing a submission --------------------------------------------------------------------------------------------


#: The typed submission the API's serializers build (the one validation layer, ``verification.runs.submissions``).
_Binding = Binding
_Submission = Submission


def _unknown_fields(entry: Mapping[str, Any], allowed: frozenset[str], where: str) -> None:
    unknown = sorted(str(k) for k in entry if k not in allowed)
    if unknown:
        raise ServiceError(Reason.UNKNOWN_FIELD, f"{where}: unknown fields {unknown}", details={"fields": unknown})


def _refuse_mismatch(results: Sequence[tuple[str, Mapping[str, Any]]]) -> None:
    """SPEC §2: only the oracle seam authors MISMATCH; an imported result cannot bring one (a rule, not a shape)."""
    for index, (_, entry) in enumerate(results):
        if entry.get("verdict") == Verdict.MISMATCH.value:
            raise ServiceError(
                Reason.MISMATCH_NOT_FROM_ORACLE, f"results[{index}]: an imported result cannot be MISMATCH", status=422
            )


def _claims_of(verification: Verification, facts: _Facts | None = None) -> list[Any]:
    """SPEC §5: the submitter's claims, then the claims inside the imported results (in the submission or delivered
    later, in arrival order); the kernel classifies them all alike. Results are read only when the contract has an
    imported criterion (a run without one costs no query)."""
    listed = (verification.body or {}).get("claims", [])
    claims = list(listed) if isinstance(listed, list) else []
    imported = [c.id for c in facts.criteria if c.kind is CriterionKind.IMPORTED] if facts is not None else []
    if imported:
        bodies = (
            ArrivedResult.objects.filter(verification=verification, criterion_id__in=imported)
            .order_by("received_at", "id")
            .values_list("body", flat=True)
        )
        for body in bodies:
            inside = body.get("claims") if isinstance(body, Mapping) else None
            claims.extend(inside if isinstance(inside, list) else ())
    return claims


def _check_imported_body(entry: Mapping[str, Any], where: str) -> None:
    verdict = entry.get("verdict")
    if verdict == Verdict.MISMATCH.value:
        # SPEC §2: only the oracle seam authors MISMATCH; an imported result cannot bring one.
        raise ServiceError(
            Reason.MISMATCH_NOT_FROM_ORACLE, f"{where}: an imported result cannot be MISMATCH", status=422
        )
    if not isinstance(verdict, str) or verdict not in {v.value for v in IMPORTED_VERDICTS}:
        raise _invalid(f"{where}.verdict is one of {sorted(v.value for v in IMPORTED_VERDICTS)}")
    if "detail" in entry and not isinstance(entry["detail"], str):
        raise _invalid(f"{where}.detail is text")
    cited = entry.get("evidence", [])
    if not isinstance(cited, list) or not all(isinstance(s, str) for s in cited):
        raise _invalid(f"{where}.evidence is a list of bound symbols")


def _expected_author(kind: CriterionKind) -> ActorKind:
    return ActorKind.SEMANTIC_WORKER if kind is CriterionKind.SEMANTIC else ActorKind.EXTERNAL_VERIFIER


def _check_author(actor: Actor, criterion: Criterion | None, criterion_id: str, *, kind: CriterionKind) -> None:
    """SPEC §1: a semantic judgment comes from a semantic worker's token, an imported result from an external
    verifier's; the criterion must be of that kind in the contract."""
    if actor.kind != _expected_author(kind):
        raise ServiceError(
            Reason.ACTOR_CANNOT_AUTHOR_RESULT,
            f"a {actor.kind} cannot deliver a {kind.value} result",
            status=403,
        )
    if criterion is not None and criterion.kind is not kind:
        raise _invalid(f"criterion {criterion_id!r} is not a {kind.value} criterion of the contract")


# --- submitting ------------------------------------------------------------------------------------------------------


def _check_key(idempotency_key: str | None) -> str | None:
    if idempotency_key is None:
        return None
    if (
        not isinstance(idempotency_key, str)
        or not 1 <= len(idempotency_key) <= MAX_IDEMPOTENCY_KEY
        or not idempotency_key.isascii()
        or not idempotency_key.isprintable()
    ):
        raise _invalid(f"Idempotency-Key is 1-{MAX_IDEMPOTENCY_KEY} printable ASCII characters")
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
    if verification.failed_at is None and _seq0(verification.pk) is None:
        transaction.on_commit(lambda: _enqueue(verification.pk))
    return verification


def _cycle_and_latest(task: Task) -> tuple[int, Verification | None]:
    """The task's current cycle (``selectors.current_cycle``) and its latest verification, in one query; the latest
    comes back as a reference by primary key (a new submission supersedes it: only its id is written)."""
    top = TaskCycle.objects.filter(task=OuterRef("pk")).order_by("-number").values("number")[:1]
    latest = Verification.objects.filter(task=OuterRef("pk"), cycle=OuterRef("cycle_now")).order_by(
        "-created_at", "-id"
    )
    row = (
        Task.objects.filter(pk=task.pk)
        .annotate(cycle_now=Subquery(top))
        .annotate(latest_id=Subquery(latest.values("pk")[:1]))
        .values_list("cycle_now", "latest_id")
        .first()
    )
    cycle = int(row[0]) if row is not None and row[0] is not None else 1
    latest_id = row[1] if row is not None else None
    return cycle, (Verification(id=latest_id) if latest_id is not None else None)


def _evidence_key(digests: Sequence[str]) -> str:
    return hashlib.sha256(canonicalize(sorted(digests))).hexdigest()


def _create(
    *,
    actor: Actor,
    token: ApiToken | None,
    boundary: str,
    task: Task,
    submission: _Submission,
    idempotency_key: str | None,
    supersedes: Verification | None,
    extra_bindings: Sequence[tuple[str, Evidence, bool]] = (),
    now: datetime,
    cycle: int | None = None,
) -> Verification:
    cycle = current_cycle(task) if cycle is None else cycle
    contract = contract_of(task, cycle)
    rubric = contract.rubric if contract is not None else None
    registered = rubric_criteria(rubric) if rubric is not None else None
    for kind, listed in ((CriterionKind.SEMANTIC, submission.judgments), (CriterionKind.IMPORTED, submission.results)):
        for criterion_id, _ in listed:
            _check_author(
                actor,
                registered.criterion(criterion_id) if registered is not None else None,
                criterion_id,
                kind=kind,
            )
            if registered is not None and registered.criterion(criterion_id) is None:
                raise _invalid(f"criterion {criterion_id!r} is not in the contract")
    bound: list[tuple[str, Evidence, bool]] = list(extra_bindings)
    # Items bound by id: one query for all of them; inline items: admitted together (one INSERT).
    by_id = {e.pk: e for e in Evidence.objects.filter(pk__in=[b.evidence_id for b in submission.bindings])} \
        if any(b.evidence_id is not None for b in submission.bindings) else {}
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
    verification = Verification.objects.create(
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
        supersedes=supersedes,
        evidence_key=_evidence_key([e.digest for _, e, _ in bound]),
    )
    VerificationEvidence.objects.bulk_create(
        VerificationEvidence(verification=verification, symbol=symbol, evidence=evidence, as_manifest=manifest)
        for symbol, evidence, manifest in bound
    )
    ArrivedResult.objects.bulk_create(
        ArrivedResult(
            verification=verification,
            criterion_id=cid,
            actor=actor,
            boundary=boundary,
            body=dict(body),
            received_at=now,
        )
        for cid, body in (*submission.judgments, *submission.results)
    )
    if supersedes is not None:
        Verification.objects.filter(pk=supersedes.pk).update(awaiting_evidence=False)
    return verification


@transaction.atomic
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
        raise _invalid("body.task names another task than the one submitted to")
    _refuse_mismatch(submission.results)
    if key is not None:
        replayed = _replay(actor, key, submission.submission_hash)
        if replayed is not None:
            return _replayed(replayed), False
    when = now or timezone.now()
    cycle, latest = _cycle_and_latest(task)
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
                supersedes=latest,
                now=when,
                cycle=cycle,
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


@transaction.atomic
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
    submission = _Submission(
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
        supersedes=locked,
        now=now or timezone.now(),
    )
    transaction.on_commit(lambda: _enqueue(created.pk))
    return created


# --- running ---------------------------------------------------------------------------------------------------------


@dataclass
class _Facts:
    """What a run reads, loaded once: the kernel's inputs plus what the receipt payload reports about them."""

    task: Task
    subject: str
    criteria: tuple[Criterion, ...]
    registered: RegisteredRubric | None
    ctx: RunContext
    bound: dict[str, BoundEvidence]
    arrived: dict[str, KernelArrived]
    evidence_rows: dict[str, Evidence]
    evidence_payload: list[dict[str, Any]]
    arrived_payload: list[dict[str, Any]]
    digests: frozenset[str]
    citations: list[Citation] = field(default_factory=list)
    portal: Actor | None = None  # the portal's service actor, read once per run


def _baselines(
    task: Task, cycle: int, *, subject: str, secret: bytes, producer: kactors.Actor | None, started: datetime
) -> dict[str, KernelBaseline]:
    """Per artifact, the first authoritative baseline of the cycle (the kernel decides), else the latest (so the
    receipt names the specific cause of ``missing-baseline``)."""
    chosen: dict[str, KernelBaseline] = {}
    rows = Baseline.objects.filter(task=task, cycle=cycle).select_related("reporter").order_by("captured_at", "id")
    for row in rows:
        record = KernelBaseline(
            subject=subject,
            artifact_key=row.artifact_key,
            digest=row.digest,
            captured_at=row.captured_at,
            reporter_actor=row.reporter.name,
            reporter_boundaries=frozenset(row.reporter_boundaries),
            reporter_is_collector=row.reporter_is_collector,
            capture_token=row.capture_token,
        )
        current = chosen.get(row.artifact_key)
        if current is not None and _authoritative(current, subject, secret, producer, started):
            continue
        chosen[row.artifact_key] = record
    return chosen


def _authoritative(
    baseline: KernelBaseline, subject: str, secret: bytes, producer: kactors.Actor | None, started: datetime
) -> bool:
    return (
        is_authoritative(
            baseline,
            secret=secret,
            subject=subject,
            artifact_key=baseline.artifact_key,
            producer_actor=producer.actor_id if producer is not None else None,
            producer_boundaries=producer.boundaries if producer is not None else frozenset(),
            first_claim_at=started,
        )
        is None
    )


def _manifest_reports(bindings: Sequence[VerificationEvidence], task: Task) -> dict[uuid.UUID, list[kactors.Actor]]:
    """Per bound item (not bound as a manifest), the reporters of its change-manifest reports, oldest first, as
    kernel actors with their boundaries: two queries whatever the number of items."""
    wanted = [b.evidence_id for b in bindings if not b.as_manifest]
    if not wanted:
        return {}
    reports = list(
        ChangeManifest.objects.filter(evidence_id__in=wanted, task=task)
        .select_related("reported_by")
        .order_by("created_at", "id")
    )
    boundaries = boundaries_for(r.reported_by for r in reports)
    out: dict[uuid.UUID, list[kactors.Actor]] = {}
    for r in reports:
        out.setdefault(r.evidence_id, []).append(kernel_actor(r.reported_by, boundaries[r.reported_by.pk]))
    return out


def _manifest(
    binding: VerificationEvidence, reporters: Sequence[kactors.Actor], producer: kactors.Actor
) -> KernelManifest | None:
    evidence_id = str(binding.evidence_id)
    if binding.as_manifest:
        # The submitter bound it as its own account of what changed: producer-declared (rail 4).
        return KernelManifest(evidence_id, reported_by=producer, producer=producer, producer_declared=True)
    if not reporters:
        return None
    candidates = [KernelManifest(evidence_id, reported_by=r, producer=producer) for r in reporters]
    for candidate in candidates:
        if check_change_manifest(criterion_id="-", manifest=candidate) is None:
            return candidate  # one independent observation of it is enough
    return candidates[-1]


def _imported_check(criterion_id: str, body: Mapping[str, Any], by_symbol: Mapping[str, str]) -> Check:
    """An external verifier's result as a check. Its authority is ``imported`` because of who sent it (SPEC §1);
    the body's own ``authority`` is kept as the sender's claim in ``detail`` and decides nothing."""
    verdict = Verdict(str(body.get("verdict")))
    cited = tuple(sorted({by_symbol[s] for s in body.get("evidence", []) if s in by_symbol}))
    detail = str(body.get("detail", ""))[:MAX_DETAIL]
    declared = kactors.record_declared_authority(body.get("authority"))
    if declared is not None:
        detail = f"{detail} (claimed authority {declared!r}, ignored)".strip()
    return Check(criterion_id, Authority.IMPORTED, verdict, Reason.IMPORTED_RESULT, evidence_ids=cited, detail=detail)


def _load(verification: Verification, *, now: datetime) -> _Facts:
    task = verification.task
    cycle = verification.cycle
    if task is None or cycle is None:
        raise InvariantError(Reason.MALFORMED_RECORD, f"verification {verification.pk} has no subject to run")
    subject = subject_key(task_id=str(task.pk), cycle=cycle)
    portal = portal_service_actor()
    # SPEC §1: who worked on this cycle (claimants and submitters), their boundaries, the link committers and the
    # contract's acceptor come from the one selector; no rule here keeps its own idea of who did the work.
    found = cycle_workers(task, cycle)
    claims = found.claims
    workers = found.workers
    producer_row = found.producer_of(verification.submitted_by)
    # The producer is one of the workers, whose boundaries cycle_workers read already.
    producer = (
        next((w for a, w in zip(found.actors, workers, strict=True) if a.pk == producer_row.pk), None)
        or kernel_actor(producer_row)
        if producer_row is not None
        else None
    )
    links = found.links
    registered = rubric_criteria(verification.rubric) if verification.rubric is not None else None
    criteria = registered.criteria if registered is not None else (NO_CONTRACT_CRITERION,)
    secret = baseline_secret()
    started = first_claim_at(cycle=cycle, claims=claims) or verification.submitted_at
    baselines = _baselines(task, cycle, subject=subject, secret=secret, producer=producer, started=started)
    worker_names = found.names

    bound: dict[str, BoundEvidence] = {}
    evidence_rows: dict[str, Evidence] = {}
    evidence_payload: list[dict[str, Any]] = []
    texts: dict[str, str] = {}
    by_symbol: dict[str, str] = {}
    unnamed = kactors.Actor(None, kactors.ActorKind.AGENT)
    producer_custody = f"boundary:{verification.submitted_boundary}" if verification.submitted_boundary else None
    bindings = list(
        VerificationEvidence.objects.filter(verification=verification)
        .select_related("evidence", "evidence__admitted_by")
        .order_by("symbol")
    )
    reporters = _manifest_reports(bindings, task)
    for binding in bindings:
        evidence = binding.evidence
        evidence_id = str(evidence.pk)
        redacted = evidence.redacted_at is not None
        content = None if redacted else storage.read(evidence.digest)  # read NOW: gone bytes are None (SPEC §2)
        if redacted:
            accessibility = Accessibility.REDACTED
        else:
            accessibility = Accessibility.ACCESSIBLE if content is not None else Accessibility.INACCESSIBLE
        tier = tier_for(evidence, producer=producer_row, claimants=worker_names)
        facts = EvidenceFacts(
            evidence_id=evidence_id,
            trust_tier=tier,
            collected_at=evidence.collected_at,
            expires_at=evidence.expires_at,
            accessibility=accessibility,
            max_age=timedelta(seconds=evidence.max_age_seconds) if evidence.max_age_seconds else None,
        )
        independence = assess_independence(
            producer_actor=producer.actor_id if producer is not None else None,
            admitting_actor=evidence.admitted_by.name,
            producer_boundaries=producer.boundaries if producer is not None else frozenset(),
            admitting_boundaries=frozenset({evidence.admitted_boundary}) if evidence.admitted_boundary else frozenset(),
            producer_custody=producer_custody,
            evidence_custody=evidence.custody or None,
        )
        bound[binding.symbol] = BoundEvidence(
            symbol=binding.symbol,
            facts=facts,
            stored=StoredItem(evidence_id, evidence.digest, content, redacted=redacted),
            independence=independence,
            manifest=_manifest(binding, reporters.get(binding.evidence_id, ()), producer or unnamed),
        )
        evidence_rows[evidence_id] = evidence
        by_symbol[binding.symbol] = evidence_id
        text = artifact_text(content) if accessibility is Accessibility.ACCESSIBLE else None
        if text is not None:
            texts[evidence_id] = text
        evidence_payload.append(
            {
                "id": evidence_id,
                "symbol": binding.symbol,
                "sha256": evidence.digest,
                "trust_tier": tier.value,
                "independence": independence.as_payload(),
                "admitted_by": evidence.admitted_by.name,
                "admission_source": evidence.admission_source,
            }
        )

    arrived: dict[str, KernelArrived] = {}
    arrived_payload: list[dict[str, Any]] = []
    kinds = {c.id: c.kind for c in criteria} if registered is not None else {}
    rows = ArrivedResult.objects.filter(verification=verification).select_related("actor").order_by("received_at", "id")
    for row in rows:
        kind = kinds.get(row.criterion_id)
        if kind not in (CriterionKind.SEMANTIC, CriterionKind.IMPORTED):
            continue  # kept on record; nothing in the contract awaits it
        verifier = kernel_actor(row.actor)
        try:
            authority = kactors.authority_for(verifier.kind)  # SPEC §1: from the token's actor kind, never the body
        except InvariantError:
            continue
        expected = Authority.SEMANTIC if kind is CriterionKind.SEMANTIC else Authority.IMPORTED
        if authority is not expected:
            continue  # refused at intake; a row written otherwise cannot author this criterion
        citations: tuple[Citation, ...] = ()
        if kind is CriterionKind.SEMANTIC:
            judgment = parse_judgment(row.body, criterion_id=row.criterion_id)
            frozen = (
                judgment.case_digest
                if judgment.case_digest and FrozenCase.objects.filter(task=task, digest=judgment.case_digest).exists()
                else None
            )
            check = route(judgment, frozen_case_digest=frozen, artifacts=texts).check
            citations = judgment.citations
        else:
            check = _imported_check(row.criterion_id, row.body, by_symbol)
        arrived[row.criterion_id] = KernelArrived(row.criterion_id, verifier, check, citations)
        arrived_payload.append(
            {
                "criterion": row.criterion_id,
                "actor": {"id": row.actor.name, "kind": row.actor.kind},
                "authority": authority.value,
                "declared_authority": kactors.record_declared_authority(row.body.get("authority")),
                "received_at": format_created_at(row.received_at),
            }
        )

    ctx = RunContext(
        subject=subject,
        cycle=cycle,
        contract_rubric_hash=verification.rubric_id,
        claims=claims,
        links=links,
        workers=workers,
        producer=producer,
        service_actor=kernel_actor(portal),
        baselines=baselines,
        baseline_secret=secret,
        submitted_at=verification.submitted_at,
        now=now,
        contract_acceptor=found.acceptor_id,
    )
    return _Facts(
        task=task,
        subject=subject,
        criteria=tuple(criteria),
        registered=registered,
        ctx=ctx,
        bound=bound,
        arrived=arrived,
        evidence_rows=evidence_rows,
        evidence_payload=evidence_payload,
        arrived_payload=arrived_payload,
        digests=frozenset(e.digest for e in evidence_rows.values()),
        portal=portal,
    )


def _payload(
    facts: _Facts,
    result: RunResult,
    *,
    issuer: Actor,
    authority: Authority,
    supersedes_receipt_id: str | None,
) -> dict[str, Any]:
    """SPEC §7's payload: kind (set by ``receipt_issue``), the outcome, the checks, who decided and with what
    authority, the evidence with tier and independence, citations, the integrity proof, supersession."""
    outcome = outcome_payload(result.outcome)
    return {
        "subject": {"task": str(facts.task.pk), "cycle": facts.ctx.cycle},
        "contract": facts.ctx.contract_rubric_hash,
        **outcome,
        "checks": [check for criterion in outcome["criteria"] for check in criterion["checks"]],
        "actor": {"id": issuer.name, "kind": issuer.kind},
        "authority": authority.value,
        "evidence": facts.evidence_payload,
        "citations": [c.as_payload() for c in result.citations],
        "claims": [c.as_payload() for c in result.claims],  # SPEC §5: beside the criteria, with verdict and code
        "integrity_proof": result.integrity.as_payload(),
        "results_received": facts.arrived_payload,
        "supersedes_receipt_id": supersedes_receipt_id,
        "rationale": None,
    }


def _pending_until(result: RunResult) -> datetime | None:
    deadlines = [k.pending.deadline for c in result.outcome.criteria for k in c.checks if k.pending is not None]
    return min(deadlines) if deadlines else None


def _record_outcome(verification: Verification, facts: _Facts, result: RunResult, receipt: Receipt) -> None:
    """Update the query caches of the head (the receipt stays the truth), raise findings, emit the events."""
    outcome = result.outcome
    running = outcome.status_running
    determination = outcome.determination.value if outcome.determination is not None else None
    superseded = Verification.objects.filter(supersedes=verification).exists()
    Verification.objects.filter(pk=verification.pk).update(
        verdict=outcome.verdict.value,
        automated_verdict=outcome.verdict.value,
        determination=determination,
        flagged=outcome.flagged,
        flag_reason=outcome.flag_reason,
        reason=outcome.reason.value if outcome.reason is not None else None,
        pending_until=_pending_until(result),
        awaiting_evidence=not running and determination != "met" and not superseded,
        started_at=None,
        last_error="",
    )
    # SPEC §3: what the head reads as after each PENDING deadline, for the list filters (read_state.read_q).
    phases_record(verification, loads_strict(receipt.envelope)["payload"])
    # SPEC §2, §10: gone or changed bytes raise an evidence-integrity finding (a redaction does not).
    for finding in evidence_integrity_findings(proof=result.integrity, subject=facts.subject):
        finding_raise(
            finding=finding,
            subject=facts.subject,
            verification=verification,
            evidence=facts.evidence_rows.get(finding.refs[1]),
            receipt_refs=[receipt.content_hash],
        )
    _raise_disagreements(verification, facts, outcome.verdict, receipt)
    events.event_append(  # the last write of the run's transaction (the caller holds it)
        kind=events.VERIFICATION_PENDING if running else events.VERIFICATION_FINISHED,
        verification=verification,
        payload={
            "verification_id": str(verification.pk),
            "receipt_id": receipt.content_hash,
            "seq": receipt.seq,
            "receipt_kind": receipt.kind,
            "verdict": outcome.verdict.value,
            "determination": determination,
            "flagged": outcome.flagged,
            "reason": outcome.reason.value if outcome.reason is not None else None,
            "flag_reason": outcome.flag_reason,
        },
    )


def _raise_disagreements(verification: Verification, facts: _Facts, verdict: Verdict, receipt: Receipt) -> None:
    """SPEC §10: another verification of the subject, same rubric and evidence digests, different automated verdict.

    Only verifications whose verdict differs can disagree with this one, so only those are loaded (bounded).
    """
    if verdict is Verdict.PENDING:
        return
    others = list(
        Verification.objects.filter(
            task=facts.task,
            cycle=facts.ctx.cycle,
            rubric_hash=verification.rubric_hash,
            evidence_key=verification.evidence_key,
            automated_verdict__isnull=False,
        )
        .exclude(pk=verification.pk)
        .exclude(automated_verdict__in=[verdict.value, Verdict.PENDING.value])
        .order_by("created_at", "id")[:20]
    )
    if not others:
        return

    def record(v: Verification, automated: str) -> VerificationRecord:
        return VerificationRecord(
            verification_id=str(v.pk),
            subject=facts.subject,
            rubric_hash=v.rubric_hash,
            evidence_digests=facts.digests,
            verdict=Verdict(automated),
            authority_of_decision=Authority.DETERMINISTIC,
            superseded_by_human=v.human_decided,
            created_at=v.created_at,
        )

    records = [record(verification, verdict.value), *(record(v, v.automated_verdict or "") for v in others)]
    heads = {str(v.pk): h.content_hash for v in others if (h := head_of(v)) is not None}
    heads[str(verification.pk)] = receipt.content_hash
    for disagreement in detect_disagreements(records):
        if str(verification.pk) not in (disagreement.first_id, disagreement.second_id):
            continue
        finding_raise(
            finding=disagreement_finding(disagreement),
            subject=facts.subject,
            verification=verification,
            receipt_refs=[heads[i] for i in (disagreement.first_id, disagreement.second_id) if i in heads],
        )


def _run_locked(verification: Verification, *, now: datetime) -> Receipt:
    facts = _load(verification, now=now)
    result = evaluate_run(
        criteria=facts.criteria, ctx=facts.ctx, bound=facts.bound, arrived=facts.arrived,
        claims=_claims_of(verification, facts),
    )
    previous = head_of(verification.supersedes) if verification.supersedes is not None else None
    payload = _payload(
        facts,
        result,
        issuer=facts.portal or portal_service_actor(),
        authority=Authority.DETERMINISTIC,
        supersedes_receipt_id=previous.content_hash if previous is not None else None,
    )
    # Inside verification_run's (or result_deliver's) transaction, without a savepoint of its own.
    receipt = receipt_issue_held(
        verification=verification, kind=ReceiptKind.RUN, payload=payload, superseded=previous
    )
    _record_outcome(verification, facts, result, receipt)
    return receipt


def _seq0(verification_pk: uuid.UUID) -> Receipt | None:
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
    # The attempt is counted only when the run is owed (no seq 0 yet, not failed): one statement for the common case.
    counted = (
        Verification.objects.filter(pk=pk, failed_at__isnull=True)
        .exclude(Exists(Receipt.objects.filter(verification_id=OuterRef("pk"), seq=0)))
        .update(attempts=F("attempts") + 1, started_at=when)
    )
    if not counted:
        existing = _seq0(pk)
        if existing is not None:
            metrics.observe_run(status="already-run")
            return existing
        if not Verification.objects.filter(pk=pk).exists():
            raise NotFound(f"no verification {pk}", verification_id=str(pk))
        metrics.observe_run(status="not-owed")
        return None
    started = time.perf_counter()
    try:
        with transaction.atomic():
            locked = (
                Verification.objects.select_for_update(of=("self",))
                .select_related("task", "rubric", "submitted_by", "supersedes")
                .get(pk=pk)
            )
            existing = _seq0(pk)
            if existing is not None:
                metrics.observe_run(status="already-run")
                return existing
            receipt = _run_locked(locked, now=when)
            # Wake a wait_ms submission waiting for this run, once committed (nothing to do without a broker).
            transaction.on_commit(lambda: run_signal.announce(pk))
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
        if locked is None or locked.failed_at is not None or _seq0(pk) is not None:
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


# --- results that arrive later (SPEC §2 PENDING) ---------------------------------------------------------------------


def _head_payload(receipt: Receipt) -> Mapping[str, Any]:
    payload = loads_strict(receipt.envelope)["payload"]
    if not isinstance(payload, Mapping):  # pragma: no cover - receipt_issue signs mappings only
        raise InvariantError(Reason.MALFORMED_RECORD, "a receipt payload is an object")
    return payload


@transaction.atomic
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
    locked = (
        Verification.objects.select_for_update(of=("self",)).select_related("task", "rubric", "submitted_by")
        .filter(pk=verification.pk).first()
    )
    if locked is None:
        raise NotFound(f"no verification {verification.pk}", verification_id=str(verification.pk))
    registered = rubric_criteria(locked.rubric) if locked.rubric is not None else None
    criterion = registered.criterion(criterion_id) if registered is not None else None
    if criterion is None or criterion.kind not in (CriterionKind.SEMANTIC, CriterionKind.IMPORTED):
        raise ServiceError(Reason.NOT_PENDING, f"criterion {criterion_id!r} awaits no result", status=409)
    _check_author(actor, criterion, criterion_id, kind=criterion.kind)
    if not isinstance(body, Mapping):
        raise _invalid("the result body is a JSON object")
    if criterion.kind is CriterionKind.IMPORTED:
        _unknown_fields(body, RESULT_FIELDS, "body")
        _check_imported_body(body, "body")
    canonicalize(body)  # strict JSON only (StrictJSONError otherwise)
    head = head_of(locked)
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
    if ArrivedResult.objects.filter(verification=locked, criterion_id=criterion_id).exists():
        raise ServiceError(Reason.NOT_PENDING, f"criterion {criterion_id!r} already has its result", status=409)
    ArrivedResult.objects.create(
        verification=locked,
        criterion_id=criterion_id,
        actor=actor,
        boundary=boundary,
        body=dict(body),
        received_at=when,
    )
    if head is None:
        Verification.objects.filter(pk=locked.pk).update(attempts=locked.attempts + 1)
        receipt = _run_locked(locked, now=when)
    else:
        facts = _load(locked, now=when)
        result = evaluate_run(
            criteria=facts.criteria, ctx=facts.ctx, bound=facts.bound, arrived=facts.arrived,
            claims=_claims_of(locked, facts),
        )
        payload = _payload(
            facts,
            result,
            issuer=actor,
            authority=kactors.authority_for(kactors.ActorKind(actor.kind)),
            supersedes_receipt_id=head.content_hash,
        )
        receipt = receipt_issue(verification=locked, kind=ReceiptKind.RESULT, payload=payload)
        _record_outcome(locked, facts, result, receipt)
    events.event_emit(
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
