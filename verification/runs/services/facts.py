"""The facts a run reads (SPEC §1-§6), loaded once: workers, baselines, manifests, evidence, arrived results."""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any, Final

from django.db import DEFAULT_DB_ALIAS
from django.db.models import Exists, OuterRef, Subquery

from verification.actors.models import Actor, ActorKind, ApiToken
from verification.actors.services.actors import (
    PORTAL_ACTOR_NAME,
    PORTAL_BOUNDARY,
    boundaries_for,
    kernel_actor,
    portal_service_actor,
)
from verification.compiled import Compiled, Probe, Related
from verification.evidence import storage
from verification.evidence.models import Baseline, ChangeManifest, Evidence, FrozenCase, VerificationEvidence
from verification.evidence.services import tier_for
from verification.kernel import actors as kactors
from verification.kernel.baselines import Baseline as KernelBaseline
from verification.kernel.baselines import is_authoritative
from verification.kernel.chain import format_created_at
from verification.kernel.contracts import first_claim_at, subject_key
from verification.kernel.criteria import Criterion, CriterionKind, RegisteredRubric
from verification.kernel.errors import InvariantError
from verification.kernel.evaluation import (
    ArrivedResult as KernelArrived,
)
from verification.kernel.evaluation import (
    BoundEvidence,
    RunContext,
)
from verification.kernel.evidence import (
    Accessibility,
    Citation,
    EvidenceFacts,
    artifact_text,
    assess_independence,
)
from verification.kernel.integrity import StoredItem
from verification.kernel.rails import ChangeManifest as KernelManifest
from verification.kernel.rails import check_change_manifest
from verification.kernel.reasons import Reason
from verification.kernel.semantic import parse_judgment, route
from verification.kernel.verdicts import Authority, Check, Verdict
from verification.runs.cycle_workers import CycleWorkers, cycle_workers
from verification.runs.models import ArrivedResult, Task, Verification
from verification.runs.selectors import rubric_criteria
from verification.runs.services.tasks import baseline_secret

MAX_DETAIL: Final = 500


#: Without a contract there are no criteria to judge; one placeholder criterion carries the code so the outcome is
#: UNKNOWN ``no-accepted-contract`` (the kernel answers it for every criterion when the contract is missing).
NO_CONTRACT_CRITERION: Final = Criterion(id="contract", kind=CriterionKind.IMPORTED, description="no accepted contract")


def claims_of(verification: Verification, facts: Facts | None = None) -> list[Any]:
    """SPEC §5: the submitter's claims, then the claims inside the imported results (in the submission or delivered
    later, in arrival order); the kernel classifies them all alike. Results are read only when the contract has an
    imported criterion (a run without one costs no query)."""
    listed = (verification.body or {}).get("claims", [])
    claims = list(listed) if isinstance(listed, list) else []
    imported = [c.id for c in facts.criteria if c.kind is CriterionKind.IMPORTED] if facts is not None else []
    if imported and (facts is None or facts.has_arrived):
        bodies = (
            ArrivedResult.objects.filter(verification=verification, criterion_id__in=imported)
            .order_by("received_at", "id")
            .values_list("body", flat=True)
        )
        for body in bodies:
            inside = body.get("claims") if isinstance(body, Mapping) else None
            claims.extend(inside if isinstance(inside, list) else ())
    return claims


@dataclass
class Facts:
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
    has_arrived: bool = True  # False: the run's gates found no arrived result (none is read again)


#: What the run's post-lock statement (``services.run``) also answers, so that a read with nothing to find is not
#: sent: whether the cycle has baselines, the task change-manifest reports, the verification arrived results, and
#: the portal's service actor (its pk and kind, and whether it holds tokens: it never should).
GATES: Final = ("has_baselines", "has_manifests", "has_arrived", "portal_pk", "portal_kind", "portal_tokens")


def gate_annotations() -> dict[str, Any]:
    """The ``GATES`` as annotations of a ``Verification`` query (one subquery each, no rows loaded)."""
    portal = Actor.objects.filter(name=PORTAL_ACTOR_NAME).order_by()
    return {
        "has_baselines": Exists(Baseline.objects.filter(task=OuterRef("task"), cycle=OuterRef("cycle"))),
        "has_manifests": Exists(ChangeManifest.objects.filter(task=OuterRef("task"))),
        "has_arrived": Exists(ArrivedResult.objects.filter(verification=OuterRef("pk"))),
        "portal_pk": Subquery(portal.values("pk")[:1]),
        "portal_kind": Subquery(portal.values("kind")[:1]),
        "portal_tokens": Exists(ApiToken.objects.filter(actor__name=PORTAL_ACTOR_NAME)),
    }


def _portal(gates: Mapping[str, Any] | None) -> tuple[Actor, kactors.Actor]:
    """The portal's service actor and its kernel record, from the gates when they found it (no query): the portal
    authenticates as itself, never with a token, so its only boundary is ``PORTAL_BOUNDARY``; read as before when
    it holds tokens anyway or does not exist yet (``portal_service_actor`` creates it)."""
    if gates is None or gates["portal_pk"] is None or gates["portal_tokens"]:
        portal = portal_service_actor()
        return portal, kernel_actor(portal)
    if gates["portal_kind"] != ActorKind.SERVICE:
        portal_service_actor()  # raises: the actor named portal is not a service
    portal = Actor(pk=gates["portal_pk"], name=PORTAL_ACTOR_NAME, kind=gates["portal_kind"])
    portal._state.adding, portal._state.db = False, DEFAULT_DB_ALIAS
    return portal, kernel_actor(portal, frozenset({PORTAL_BOUNDARY}))


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


#: A binding with its evidence and the evidence's admitting actor, as one row (``verification.compiled``).
_BINDING_RELATED: Final = Related(VerificationEvidence, ("evidence", "evidence__admitted_by"))


def _bindings_query(verification_pk: uuid.UUID) -> Any:
    return (
        VerificationEvidence.objects.filter(verification_id=verification_pk)
        .order_by("symbol")
        .values_list(*_BINDING_RELATED.columns())
    )


_BINDINGS: Final = Compiled(
    "run-bindings",
    VerificationEvidence,
    _bindings_query,
    {"verification_pk": Probe.key_of(Verification)},
    prepared=True,
)


def _bindings(verification_pk: uuid.UUID) -> list[VerificationEvidence]:
    """The verification's bindings in symbol order, each with its evidence and that evidence's ``admitted_by``
    loaded (what ``select_related("evidence", "evidence__admitted_by")`` loads), by a query compiled once."""
    return bindings_from_rows(_BINDINGS.rows(verification_pk=verification_pk))


def bindings_query(verification_pk: uuid.UUID) -> tuple[Compiled, dict[str, Any]]:
    """The bindings' query and its arguments, for a caller that sends it with others (``compiled.pipelined``)."""
    return _BINDINGS, {"verification_pk": verification_pk}


def bindings_from_rows(rows: Sequence[Sequence[Any]]) -> list[VerificationEvidence]:
    """``_bindings``' records from its query's rows."""
    return _BINDING_RELATED.all(rows)


def load_facts(
    verification: Verification,
    *,
    now: datetime,
    gates: Mapping[str, Any] | None = None,
    workers: CycleWorkers | None = None,
    bindings: list[VerificationEvidence] | None = None,
) -> Facts:
    """The facts of ``verification``'s run. ``gates``: the ``GATES`` its caller read after locking the verification
    (``gate_annotations``); a read they found empty is skipped. Without them every read is sent. ``workers`` and
    ``bindings``: ``cycle_workers`` of its subject and its bindings, when the caller read them after its lock (with
    it, in one round trip); else they are read here."""
    task = verification.task
    cycle = verification.cycle
    if task is None or cycle is None:
        raise InvariantError(Reason.MALFORMED_RECORD, f"verification {verification.pk} has no subject to run")
    subject = subject_key(task_id=str(task.pk), cycle=cycle)
    portal, portal_record = _portal(gates)
    # SPEC §1: who worked on this cycle (claimants and submitters), their boundaries, the link committers and the
    # contract's acceptor come from the one selector; no rule here keeps its own idea of who did the work.
    found = workers if workers is not None else cycle_workers(task, cycle)
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
    baselines = (
        _baselines(task, cycle, subject=subject, secret=secret, producer=producer, started=started)
        if gates is None or gates["has_baselines"]
        else {}
    )
    worker_names = found.names

    bound: dict[str, BoundEvidence] = {}
    evidence_rows: dict[str, Evidence] = {}
    evidence_payload: list[dict[str, Any]] = []
    texts: dict[str, str] = {}
    by_symbol: dict[str, str] = {}
    unnamed = kactors.Actor(None, kactors.ActorKind.AGENT)
    producer_custody = f"boundary:{verification.submitted_boundary}" if verification.submitted_boundary else None
    bindings = bindings if bindings is not None else _bindings(verification.pk)
    reporters = _manifest_reports(bindings, task) if gates is None or gates["has_manifests"] else {}
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
    has_arrived = gates is None or bool(gates["has_arrived"])
    rows = (
        ArrivedResult.objects.filter(verification=verification).select_related("actor").order_by("received_at", "id")
        if has_arrived
        else ()  # the gates found none: not even the queryset is built
    )
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
        service_actor=portal_record,
        baselines=baselines,
        baseline_secret=secret,
        submitted_at=verification.submitted_at,
        now=now,
        contract_acceptor=found.acceptor_id,
    )
    return Facts(
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
        has_arrived=has_arrived,
    )
