"""What a run's result becomes: the receipt payload (SPEC §7), the head's query caches, findings and events."""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from datetime import datetime
from typing import Any, Final

from django.db.models import Exists, OuterRef, QuerySet, Subquery

from verification.actors.models import Actor
from verification.compiled import Compiled, Probe
from verification.kernel.canonical import loads_strict
from verification.kernel.evaluation import (
    RunResult,
    outcome_payload,
)
from verification.kernel.findings import (
    VerificationRecord,
    detect_disagreements,
    disagreement_finding,
    evidence_integrity_findings,
)
from verification.kernel.verdicts import Authority, Verdict
from verification.reviews.services.findings import finding_raise
from verification.runs.models import Verification
from verification.runs.read_state import phases_record
from verification.runs.services import events
from verification.runs.services.facts import Facts
from verification.trust.models import Receipt
from verification.trust.selectors import head_of


def _disagreeing(verification: Any) -> QuerySet[Verification]:
    """The verifications that may disagree with ``verification`` (a row or an outer reference): the same subject,
    rubric and evidence digests, an automated verdict other than PENDING (SPEC §10)."""
    ref = verification if isinstance(verification, Verification) else None

    def of(name: str) -> Any:
        return getattr(ref, name) if ref is not None else OuterRef(name)

    return (
        Verification.objects.filter(
            task_id=of("task_id"),
            cycle=of("cycle"),
            rubric_hash=of("rubric_hash"),
            evidence_key=of("evidence_key"),
            automated_verdict__isnull=False,
        )
        .exclude(pk=of("pk"))
        .exclude(automated_verdict=Verdict.PENDING.value)
    )


def outcome_annotations() -> dict[str, Any]:
    """What ``record_outcome`` needs to know before it writes, as annotations of the run's post-lock statement:
    whether a later verification supersedes this one, and the least and greatest automated verdict of the ones that
    may disagree with it (when both equal the run's verdict, none can: the query for them is not sent)."""
    others = _disagreeing(None).order_by().values("automated_verdict")
    return {
        "superseded": Exists(Verification.objects.filter(supersedes=OuterRef("pk"))),
        "others_least": Subquery(others.order_by("automated_verdict")[:1]),
        "others_greatest": Subquery(others.order_by("-automated_verdict")[:1]),
    }


def run_payload(
    facts: Facts,
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


def head_row(verification_pk: uuid.UUID, **_: Any) -> QuerySet[Verification]:
    """The verification whose head columns a compiled UPDATE sets (``_HEAD_COLUMNS``; a decision's, in
    ``reviews.services.decisions``)."""
    return Verification.objects.filter(pk=verification_pk)


def _head_values(verification_pk: uuid.UUID, **columns: Any) -> dict[str, Any]:
    return {**columns, "automated_verdict": columns["verdict"], "started_at": None, "last_error": ""}


_V = Verification._meta
#: The head columns as arguments of a compiled UPDATE (``verification.compiled``), with the verification's key.
HEAD_PROBES: Final = {
    "verification_pk": Probe.key_of(Verification),
    "verdict": Probe("PROBE-1", "PROBE-2", _V.get_field("verdict")),
    "determination": Probe("probe-1", "probe-2", _V.get_field("determination")),
    "flagged": Probe(True, False, _V.get_field("flagged")),
    "flag_reason": Probe("probe-3", "probe-4", _V.get_field("flag_reason")),
    "reason": Probe("probe-5", "probe-6", _V.get_field("reason")),
    "pending_until": Probe.instant(_V.get_field("pending_until")),
    "awaiting_evidence": Probe(True, False, _V.get_field("awaiting_evidence")),
}
#: The head columns' UPDATE, compiled once (``verification.compiled``); a None value is sent as a NULL parameter.
_HEAD_COLUMNS: Final = Compiled("head-columns", Verification, head_row, HEAD_PROBES, update=_head_values, prepared=True)


def record_outcome(
    verification: Verification,
    facts: Facts,
    result: RunResult,
    receipt: Receipt,
    gates: Mapping[str, Any] | None = None,
) -> None:
    """Update the query caches of the head (the receipt stays the truth), raise findings, emit the events.
    ``gates``: ``outcome_annotations`` as the caller read them after its lock (else they are read here); the run of
    seq 0 passes them, a later result does not."""
    outcome = result.outcome
    running = outcome.status_running
    determination = outcome.determination.value if outcome.determination is not None else None
    if gates is None:
        superseded = Verification.objects.filter(supersedes=verification).exists()
    else:
        superseded = bool(gates["superseded"])
    _HEAD_COLUMNS.run_later(
        verification_pk=verification.pk,
        verdict=outcome.verdict.value,
        determination=determination,
        flagged=outcome.flagged,
        flag_reason=outcome.flag_reason,
        reason=outcome.reason.value if outcome.reason is not None else None,
        pending_until=_pending_until(result),
        awaiting_evidence=not running and determination != "met" and not superseded,
    )
    # SPEC §3: what the head reads as after each PENDING deadline, for the list filters (read_state.read_q).
    phases_record(verification, loads_strict(receipt.envelope)["payload"], first_head=receipt.seq == 0)
    # SPEC §2, §10: gone or changed bytes raise an evidence-integrity finding (a redaction does not).
    for finding in evidence_integrity_findings(proof=result.integrity, subject=facts.subject):
        finding_raise(
            finding=finding,
            subject=facts.subject,
            verification=verification,
            evidence=facts.evidence_rows.get(finding.refs[1]),
            receipt_refs=[receipt.content_hash],
        )
    if gates is None or {gates["others_least"], gates["others_greatest"]} - {None, outcome.verdict.value}:
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


def _raise_disagreements(verification: Verification, facts: Facts, verdict: Verdict, receipt: Receipt) -> None:
    """SPEC §10: another verification of the subject, same rubric and evidence digests, different automated verdict.

    Only verifications whose verdict differs can disagree with this one, so only those are loaded (bounded).
    """
    if verdict is Verdict.PENDING:
        return
    others = list(_disagreeing(verification).exclude(automated_verdict=verdict.value).order_by("created_at", "id")[:20])
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
