"""One verification run, from stored facts to the payload of its receipt (SPEC §1–§5, §7, §9).

The Django layer loads the records (criteria of the cycle's contract, bound evidence with its stored bytes,
claims, links, baselines, the results that arrived) and hands them here as plain data; this module applies
every rule in order and returns the outcome and the receipt payload. It is on the hard-gate decision path, so it
never imports the semantic module: semantic judgments arrive already routed (``semantic.route``) as checks.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from verification.kernel.actors import Actor
from verification.kernel.baselines import Baseline
from verification.kernel.claims import BoundBytes, ClaimResult, evaluate_claims, flag_contradicted
from verification.kernel.contracts import Claim, first_claim_at
from verification.kernel.criteria import (
    Criterion,
    CriterionKind,
    evaluate_digest,
    evaluate_unchanged,
    to_unknown,
)
from verification.kernel.determination import (
    NEEDS_REVIEW_PREFIX,
    CriterionResult,
    Determination,
    Outcome,
    criterion_result,
    roll_up,
)
from verification.kernel.errors import InvariantError, KernelError
from verification.kernel.evidence import Citation, EvidenceFacts, IndependenceAssessment, policy_failure
from verification.kernel.integrity import IntegrityEntry, IntegrityProof, IntegrityStatus, StoredItem, recheck
from verification.kernel.payloads import outcome_payload
from verification.kernel.rails import (
    ChangeManifest,
    Link,
    check_change_manifest,
    check_contract_acceptor,
    check_verifier,
)
from verification.kernel.reasons import Reason
from verification.kernel.verdicts import Authority, Check, ExpiryVerdict, Origin, Pending, Verdict


@dataclass(frozen=True)
class BoundEvidence:
    """One evidence item bound to a symbol of the submission, with what the store holds for it now."""

    symbol: str
    facts: EvidenceFacts
    stored: StoredItem
    independence: IndependenceAssessment | None = None
    manifest: ChangeManifest | None = None

    def __post_init__(self) -> None:
        if self.facts.evidence_id != self.stored.evidence_id:
            raise InvariantError(Reason.MALFORMED_RECORD, "facts and stored bytes name different evidence")

    @property
    def evidence_id(self) -> str:
        return self.facts.evidence_id


@dataclass(frozen=True)
class ArrivedResult:
    """A semantic or imported result that arrived for a criterion, with the actor whose token delivered it.

    ``check`` is already routed (semantic) or relayed (imported); its authority was assigned from the actor's
    kind by the caller, never from a body field.
    """

    criterion_id: str
    verifier: Actor
    check: Check
    citations: tuple[Citation, ...] = ()


@dataclass(frozen=True)
class RunContext:
    """The stored facts of the subject that the rails and the oracle seam read (SPEC §1, §9)."""

    subject: str
    cycle: int
    contract_rubric_hash: str | None
    claims: tuple[Claim, ...]
    links: tuple[Link, ...]
    workers: tuple[Actor, ...]
    producer: Actor | None
    service_actor: Actor
    baselines: Mapping[str, Baseline]
    baseline_secret: bytes
    submitted_at: datetime
    now: datetime
    #: Who accepted the cycle's contract (SPEC §1); if it is among the workers, every check answers UNKNOWN.
    contract_acceptor: str | None = None


@dataclass(frozen=True)
class RunResult:
    outcome: Outcome
    integrity: IntegrityProof
    findings: tuple[IntegrityEntry, ...]
    citations: tuple[Citation, ...] = field(default=())
    claims: tuple[ClaimResult, ...] = field(default=())  # SPEC §5: the submitter's own claims, as they answered


def _deterministic(criterion: Criterion, ctx: RunContext, bound: Mapping[str, BoundEvidence]) -> Check:
    symbol = criterion.symbol or ""
    item = bound.get(symbol)
    if item is None:
        return Check(criterion.id, Authority.DETERMINISTIC, Verdict.UNKNOWN, Reason.EVIDENCE_NOT_BOUND, detail=symbol)
    content = None if item.stored.redacted else item.stored.content
    if criterion.kind is CriterionKind.DIGEST:
        equality = criterion.equality
        if equality is None:  # a registered digest criterion always parses; fail closed all the same
            return Check(criterion.id, Authority.DETERMINISTIC, Verdict.UNKNOWN, Reason.MALFORMED_EXPRESSION)
        check = evaluate_digest(criterion.id, equality.digest, content, evidence_id=item.evidence_id)
    else:
        producer = ctx.producer
        started = first_claim_at(cycle=ctx.cycle, claims=ctx.claims) or ctx.submitted_at
        check = evaluate_unchanged(
            criterion.id,
            content,
            ctx.baselines.get(symbol),
            evidence_id=item.evidence_id,
            secret=ctx.baseline_secret,
            subject=ctx.subject,
            artifact_key=symbol,
            producer_actor=producer.actor_id if producer is not None else None,
            producer_boundaries=producer.boundaries if producer is not None else frozenset(),
            first_claim_at=started,
        )
    # SPEC §4: evidence below the tier, stale, expired, inaccessible or redacted makes the criterion UNKNOWN.
    failure = policy_failure(criterion.policy, [item.facts], ctx.now)
    if failure is not None and check.verdict is not Verdict.UNKNOWN:
        check = to_unknown(check, failure.reason, failure.evidence_id)
    # SPEC §9 rail 4: a producer's account of what changed is not evidence.
    if item.manifest is not None:
        refusal = check_change_manifest(criterion_id=criterion.id, manifest=item.manifest)
        if refusal is not None:
            check = to_unknown(check, refusal.reason, refusal.detail)
    return check


def _awaited(criterion: Criterion, ctx: RunContext, arrived: ArrivedResult | None) -> Check:
    authority = Authority.SEMANTIC if criterion.kind is CriterionKind.SEMANTIC else Authority.IMPORTED
    if arrived is None:
        pending = criterion.pending(ctx.submitted_at)
        if pending is not None:
            # SPEC §2: PENDING until its result arrives; resolved when read, never written back.
            return Check(criterion.id, authority, Verdict.PENDING, Reason.RESULT_AWAITED, pending=pending)
        return Check(criterion.id, authority, Verdict.NOT_RUN, Reason.NO_RESULT)
    return _arrived_check(criterion.id, authority, ctx, arrived)


def _arrived_check(criterion_id: str, authority: Authority, ctx: RunContext, arrived: ArrivedResult) -> Check:
    check = arrived.check
    if (
        arrived.criterion_id != criterion_id
        or check.criterion != criterion_id
        or check.authority is not authority
        or check.verdict is Verdict.PENDING
    ):
        raise InvariantError(Reason.MALFORMED_RECORD, f"result for {criterion_id}: wrong criterion/authority/verdict")
    # SPEC §9: the rails run on the identity of whoever performed the verification.
    refusal = check_verifier(
        verifier=arrived.verifier, cycle=ctx.cycle, claims=ctx.claims, links=ctx.links, workers=ctx.workers
    )
    if refusal is not None:
        return to_unknown(check, refusal.reason, f"rail {refusal.rail}: {refusal.detail}")
    return check


def _cited_policy(criterion: Criterion, check: Check, ctx: RunContext, bound: Mapping[str, BoundEvidence]) -> Check:
    """SPEC §4 for a semantic or imported result: the criterion's evidence policy applies to the evidence it cites.

    Cited items that the run did not bind have no facts here; the integrity gate already makes them UNKNOWN.
    """
    facts = {item.evidence_id: item.facts for item in bound.values()}
    cited = [facts[e] for e in check.evidence_ids if e in facts]
    failure = policy_failure(criterion.policy, cited, ctx.now)
    if failure is not None and check.verdict not in (Verdict.UNKNOWN, Verdict.NOT_RUN):
        return to_unknown(check, failure.reason, failure.evidence_id)
    return check


def evaluate_run(
    *,
    criteria: Sequence[Criterion],
    ctx: RunContext,
    bound: Mapping[str, BoundEvidence],
    arrived: Mapping[str, ArrivedResult],
    claims: Sequence[Mapping[str, Any]] = (),
) -> RunResult:
    """Evaluate every criterion of the contract over the stored facts, fold, and roll up (issued, not read).

    Order: contract gate (§1), integrity recheck of every bound item (§2), each criterion by kind (§5) under the
    evidence policy (§4) and the rails (§9), then the roll-up with its PASS gate (§2, §3).
    """
    integrity = recheck(item.stored for item in bound.values())
    results: list[CriterionResult] = []
    service_refusal = check_verifier(
        verifier=ctx.service_actor, cycle=ctx.cycle, claims=ctx.claims, links=ctx.links, workers=ctx.workers
    )
    # SPEC §1: the acceptor of the contract never becomes a worker of its cycle; if it did, nothing is judged.
    acceptor_refusal = check_contract_acceptor(
        acceptor=ctx.contract_acceptor, cycle=ctx.cycle, claims=ctx.claims, workers=ctx.workers
    )
    citations: list[Citation] = []
    for criterion in criteria:
        if ctx.contract_rubric_hash is None:
            # SPEC §1: without an accepted contract every check answers UNKNOWN.
            check = Check(criterion.id, Authority.DETERMINISTIC, Verdict.UNKNOWN, Reason.NO_ACCEPTED_CONTRACT)
        elif criterion.kind in (CriterionKind.DIGEST, CriterionKind.UNCHANGED):
            check = _deterministic(criterion, ctx, bound)
            if service_refusal is not None:
                check = to_unknown(check, service_refusal.reason, service_refusal.detail)
        else:
            result = arrived.get(criterion.id)
            check = _awaited(criterion, ctx, result)
            if result is not None:
                citations.extend(result.citations)
                check = _cited_policy(criterion, check, ctx, bound)
        if acceptor_refusal is not None and ctx.contract_rubric_hash is not None:
            detail = f"rail {acceptor_refusal.rail}: {acceptor_refusal.detail}"
            check = to_unknown(check, acceptor_refusal.reason, detail)
        results.append(
            criterion_result(
                criterion.id,
                hard=criterion.hard,
                weight=criterion.weight,
                checks=(check,),
                semantic=criterion.kind is CriterionKind.SEMANTIC,
            )
        )
    outcome = roll_up(results, integrity=integrity, now=None)
    # SPEC §5: claims bind and answer; a contradicted one flags for review and changes nothing else.
    answered = evaluate_claims(claims, {
        symbol: BoundBytes(item.evidence_id, None if item.stored.redacted else item.stored.content)
        for symbol, item in bound.items()
    })
    outcome = flag_contradicted(outcome, [c.as_payload() for c in answered])
    findings = tuple(e for e in integrity.entries if e.raises_finding)
    return RunResult(
        outcome=outcome, integrity=integrity, findings=findings, citations=tuple(citations), claims=answered
    )


# --- reading a receipt payload back (SPEC §2: PENDING resolved when read; written by ``kernel.payloads``) ---------


def _check_from_payload(doc: Mapping[str, Any]) -> Check:
    pending = None
    if doc.get("deadline") is not None:
        pending = Pending(
            deadline=datetime.fromisoformat(str(doc["deadline"])),
            on_expiry=ExpiryVerdict(str(doc["on_expiry"])),
        )
    return Check(
        criterion=str(doc["criterion"]),
        authority=Authority(str(doc["authority"])),
        verdict=Verdict(str(doc["verdict"])),
        reason=Reason(str(doc["reason"])),
        origin=Origin(str(doc.get("origin", Origin.EVALUATOR.value))),
        pending=pending,
        evidence_ids=tuple(str(e) for e in doc.get("evidence_ids", ())),
        detail=str(doc.get("detail", "")),
    )


def integrity_from_payload(
    entries: Sequence[Mapping[str, Any]], *, redacted: frozenset[str] = frozenset()
) -> IntegrityProof:
    """Rebuild an integrity proof from a receipt payload's ``integrity_proof`` list."""
    out = []
    for e in entries:
        evidence_id, recorded, recomputed = str(e["evidence_id"]), str(e["recorded"]), e.get("recomputed")
        if evidence_id in redacted:
            status = IntegrityStatus.REDACTED
        elif recomputed is None:
            status = IntegrityStatus.MISSING
        elif recomputed == recorded:
            status = IntegrityStatus.INTACT
        else:
            status = IntegrityStatus.CHANGED
        out.append(IntegrityEntry(evidence_id, recorded, None if recomputed is None else str(recomputed), status))
    return IntegrityProof(tuple(sorted(out, key=lambda x: x.evidence_id)))


def _redacted_at_issue(payload: Mapping[str, Any], entries: Sequence[Mapping[str, Any]]) -> frozenset[str]:
    """The items of the stored proof that were redacted (not gone) when the receipt was issued.

    The proof's wire shape (SPEC §2: ``{evidence_id, recorded, recomputed}``) records no bytes for a redacted item
    and for a gone one alike; the signed payload tells them apart where it mattered: a check citing the item carries
    ``evidence-redacted``, or, when no check does, the outcome's reason or flag came from the proof's first failure
    (the PASS gate, SPEC §2). Without this, reading a receipt back would turn ``evidence-redacted`` into
    ``missing-evidence-integrity-proof``.
    """
    gone = {str(e["evidence_id"]) for e in entries if e.get("recomputed") is None}
    redacted_code = Reason.EVIDENCE_REDACTED.value
    cited: set[str] = set()
    for c in payload.get("criteria", ()):
        for k in c["checks"]:
            if k.get("reason") == redacted_code:
                cited.update(str(e) for e in k.get("evidence_ids", ()))
    out = gone & cited
    if not cited and (
        payload.get("reason") == redacted_code or payload.get("flag_reason") == NEEDS_REVIEW_PREFIX + redacted_code
    ):
        failing = sorted(str(e["evidence_id"]) for e in entries if e.get("recomputed") != e.get("recorded"))
        if failing and failing[0] in gone:
            out.add(failing[0])
    return frozenset(out)


def read_outcome(payload: Mapping[str, Any], *, now: datetime) -> Outcome:
    """The outcome of a stored ``run`` or ``result`` receipt as read at ``now`` (PENDING past its deadline expires).

    The payload is the signed one; nothing is written back (SPEC §2).
    """
    entries = payload.get("integrity_proof", ())
    results = [
        criterion_result(
            str(c["criterion"]),
            hard=bool(c["hard"]),
            weight=float(c["weight"]),
            checks=tuple(_check_from_payload(k) for k in c["checks"]),
            semantic=bool(c["semantic"]),
        )
        for c in payload.get("criteria", ())
    ]
    integrity = integrity_from_payload(entries, redacted=_redacted_at_issue(payload, entries))
    return flag_contradicted(roll_up(results, integrity=integrity, now=now), payload.get("claims", ()))


def result_may_arrive(outcome: Outcome, criterion_id: str, *, arrived_at: datetime) -> Pending:
    """Refuse a result nobody awaits or that comes too late (SPEC §2); return the deadline it meets.

    ``outcome`` is the stored outcome, as issued or as read. Refused with ``KernelError``: ``not-pending`` when no
    check of ``criterion_id`` awaits a result (no such criterion, or it is not PENDING: deterministic criteria never
    are); ``pending-expired`` when the result arrives at or after the deadline (or the outcome was read after it).
    An accepted result is then evaluated like any other: run ``evaluate_run`` again with it in ``arrived`` and the
    same ``submitted_at``, so the rails, the evidence policy and the integrity recheck apply, and issue the result as
    a new receipt (kind ``result``) superseding the pending one.
    """
    if arrived_at.tzinfo is None:
        raise InvariantError(Reason.MALFORMED_RECORD, "arrived_at must be timezone-aware")
    checks = [k for c in outcome.criteria if c.criterion_id == criterion_id for k in c.checks]
    if any(k.reason is Reason.PENDING_EXPIRED for k in checks):
        raise KernelError(Reason.PENDING_EXPIRED, f"criterion {criterion_id}: the deadline passed")
    pending = next((k.pending for k in checks if k.pending is not None), None)
    if pending is None:
        raise KernelError(Reason.NOT_PENDING, f"criterion {criterion_id} awaits no result")
    if arrived_at >= pending.deadline:
        raise KernelError(Reason.PENDING_EXPIRED, f"deadline {pending.deadline.isoformat()} passed")
    return pending


def replace_check(outcome: Outcome, check: Check) -> list[CriterionResult]:
    """The criteria of ``outcome`` with ``check`` in place of its criterion's checks (a result that arrived).

    Unguarded: no rails, no policy, no deadline. Check ``result_may_arrive`` first; prefer re-running
    ``evaluate_run`` with the result.
    """
    return [
        criterion_result(c.criterion_id, hard=c.hard, weight=c.weight, checks=(check,), semantic=c.semantic)
        if c.criterion_id == check.criterion
        else c
        for c in outcome.criteria
    ]


__all__ = [
    "ArrivedResult",
    "BoundEvidence",
    "Determination",
    "RunContext",
    "RunResult",
    "evaluate_run",
    "integrity_from_payload",
    "outcome_payload",
    "read_outcome",
    "replace_check",
    "result_may_arrive",
]
