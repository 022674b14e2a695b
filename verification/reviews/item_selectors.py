"""Reads of one queue item's review page (issue 5 §3; SPEC §2, §4, §6, §7, §12).

Its head as read now, the automated outcome beneath a decision, its evidence rechecked now over the stored bytes,
the semantic judgments with their citations resolved, the chain verified strictly, its lease, decisions and findings.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from django.db.models import (
    QuerySet,
)

from verification.evidence import storage
from verification.evidence.models import Evidence, VerificationEvidence
from verification.kernel.determination import Outcome
from verification.kernel.evidence import (
    Accessibility,
    Citation,
    Freshness,
    artifact_text,
    freshness,
    resolve_citation,
)
from verification.kernel.integrity import IntegrityEntry, StoredItem, recheck
from verification.kernel.reasons import Reason, explain
from verification.kernel.verifier import VerificationReport, verify_report
from verification.reviews.models import Finding, ReviewDecision, ReviewLease
from verification.reviews.selectors import _as_read, _explain, active_lease, in_queue
from verification.runs.models import ArrivedResult, Verification
from verification.runs.selectors import rubric_criteria
from verification.trust.models import Receipt, ReceiptKind
from verification.trust.selectors import head_of, proof_for, receipt_payload, trusted_keys, untrusted_head


@dataclass(frozen=True)
class Segment:
    """A piece of an artifact's text; ``marked`` when a citation covers it (shown in <mark>, always escaped)."""

    text: str
    marked: bool


@dataclass(frozen=True)
class CitationView:
    evidence_id: str
    start: Any
    end: Any
    quote: str
    quote_hash: str
    resolves: bool
    reason: str | None
    reason_text: str


@dataclass
class EvidenceView:
    id: str
    symbol: str
    digest: str
    size: int
    media_type: str
    evidence_type: str
    admission_source: str
    independence: str
    independence_basis: list[str]
    mutability: str
    freshness: str
    accessibility: str
    trust_tier: str
    admitted_by: str
    integrity: str  # intact, missing, changed, redacted: recomputed now over the stored bytes
    integrity_reason: str | None
    text: str | None
    segments: list[Segment] = field(default_factory=list)
    citations: list[CitationView] = field(default_factory=list)


@dataclass(frozen=True)
class CheckView:
    criterion: str
    authority: str
    verdict: str
    reason: str
    reason_text: str
    detail: str
    deadline: str | None
    on_expiry: str | None
    stored_verdict: str  # as signed (PENDING stays PENDING in the receipt)


@dataclass(frozen=True)
class CriterionView:
    criterion: str
    kind: str
    hard: bool
    semantic: bool
    verdict: str
    reason: str
    reason_text: str
    authority: str
    checks: list[CheckView]


@dataclass(frozen=True)
class JudgmentView:
    criterion: str
    actor: str
    outcome: str
    rationale: str
    citations: list[CitationView]


@dataclass(frozen=True)
class ChainLine:
    seq: int | None
    kind: str
    verdict: str
    authority: str
    actor: str
    created_at: str
    content_hash: str
    key_id: str
    ok: bool
    status: str
    reason: str | None
    reason_text: str
    supersedes: str | None


@dataclass
class ReviewView:
    verification: Verification
    now: datetime
    head: Receipt | None
    head_kind: str
    verdict: str
    determination: str | None
    reason: str | None
    reason_text: str
    flagged: bool
    flag_reason: str | None
    status: str
    criteria: list[CriterionView]
    evidence: list[EvidenceView]
    judgments: list[JudgmentView]
    chain: list[ChainLine]
    chain_ok: bool
    chain_reason: str | None
    chain_reason_text: str
    lease: ReviewLease | None
    decisions: list[ReviewDecision]
    in_queue: bool
    superseded_by: Verification | None
    decision_payload: Mapping[str, Any] | None


def segments(text: str, spans: Sequence[tuple[int, int]]) -> list[Segment]:
    """Split ``text`` into plain and marked pieces; overlapping or touching spans merge; bad spans are ignored."""
    good = sorted((s, e) for s, e in spans if isinstance(s, int) and isinstance(e, int) and 0 <= s < e <= len(text))
    merged: list[list[int]] = []
    for start, end in good:
        if merged and start <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], end)
        else:
            merged.append([start, end])
    out: list[Segment] = []
    at = 0
    for start, end in merged:
        if start > at:
            out.append(Segment(text[at:start], False))
        out.append(Segment(text[start:end], True))
        at = end
    if at < len(text) or not out:
        out.append(Segment(text[at:], False))
    return out


def _citation(raw: Mapping[str, Any], artifacts: Mapping[str, str]) -> CitationView:
    citation = Citation(
        evidence_id=str(raw.get("evidence_id", "")),
        start=raw.get("start"),  # type: ignore[arg-type]
        end=raw.get("end"),  # type: ignore[arg-type]
        quote=str(raw.get("quote", "")),
        quote_hash=str(raw.get("quote_hash", "")),
    )
    failure = resolve_citation(citation, artifacts)
    return CitationView(
        evidence_id=citation.evidence_id,
        start=citation.start,
        end=citation.end,
        quote=citation.quote,
        quote_hash=citation.quote_hash,
        resolves=failure is None,
        reason=failure.value if failure is not None else None,
        reason_text=explain(failure) if failure is not None else "",
    )


def _criteria(verification: Verification, payload: Mapping[str, Any], outcome: Outcome) -> list[CriterionView]:
    kinds: dict[str, str] = {}
    if verification.rubric is not None:
        kinds = {c.id: c.kind.value for c in rubric_criteria(verification.rubric).criteria}
    stored: dict[tuple[str, int], Mapping[str, Any]] = {}
    for c in payload.get("criteria", ()):
        for index, k in enumerate(c.get("checks", ())):
            stored[(str(c.get("criterion")), index)] = k
    out = []
    for c in outcome.criteria:
        checks = []
        for index, k in enumerate(c.checks):
            signed = stored.get((c.criterion_id, index), {})
            checks.append(
                CheckView(
                    criterion=k.criterion,
                    authority=k.authority.value,
                    verdict=k.verdict.value,
                    reason=k.reason.value,
                    reason_text=explain(k.reason),
                    detail=k.detail,
                    deadline=signed.get("deadline"),
                    on_expiry=signed.get("on_expiry"),
                    stored_verdict=str(signed.get("verdict", k.verdict.value)),
                )
            )
        out.append(
            CriterionView(
                criterion=c.criterion_id,
                kind=kinds.get(c.criterion_id, ""),
                hard=c.hard,
                semantic=c.semantic,
                verdict=c.verdict.value,
                reason=c.reason.value,
                reason_text=explain(c.reason),
                authority=c.authority.value,
                checks=checks,
            )
        )
    return out


def _evidence(
    verification: Verification, payload: Mapping[str, Any], now: datetime
) -> tuple[list[EvidenceView], dict[str, str]]:
    signed = {str(e.get("id")): e for e in payload.get("evidence", ())}
    bindings = (
        VerificationEvidence.objects.filter(verification=verification)
        .select_related("evidence", "evidence__admitted_by")
        .order_by("symbol")
    )
    views: list[EvidenceView] = []
    texts: dict[str, str] = {}
    for binding in bindings:
        evidence: Evidence = binding.evidence
        evidence_id = str(evidence.pk)
        redacted = evidence.redacted_at is not None
        content = None if redacted else storage.read(evidence.digest)
        stored = StoredItem(evidence_id, evidence.digest, content, redacted=redacted)
        entry: IntegrityEntry = recheck([stored]).entries[0]
        if redacted:
            accessibility = Accessibility.REDACTED
        else:
            accessibility = Accessibility.ACCESSIBLE if content is not None else Accessibility.INACCESSIBLE
        fresh = freshness(
            collected_at=evidence.collected_at,
            max_age=timedelta(seconds=evidence.max_age_seconds) if evidence.max_age_seconds else None,
            expires_at=evidence.expires_at,
            now=now,
        )
        item = signed.get(evidence_id, {})
        independence = item.get("independence") or {}
        basis: list[str] = []
        for question in ("actor_distinct", "boundary_distinct", "custody_distinct"):
            answer = independence.get(question) or {}
            value = answer.get("value")
            shown = "unknown" if value is None else ("yes" if value else "no")
            grounds = ", ".join(answer.get("basis") or []) or "no basis"
            basis.append(f"{question.replace('_', ' ')}: {shown} ({grounds})")
        text = artifact_text(content) if entry.recomputed == evidence.digest else None
        if text is not None:
            texts[evidence_id] = text
        views.append(
            EvidenceView(
                id=evidence_id,
                symbol=binding.symbol,
                digest=evidence.digest,
                size=evidence.size,
                media_type=evidence.media_type,
                evidence_type=evidence.evidence_type,
                admission_source=evidence.admission_source,
                independence=str(independence.get("independence", "unknown")),
                independence_basis=basis,
                mutability=evidence.mutability,
                freshness=fresh.value if isinstance(fresh, Freshness) else str(fresh),
                accessibility=accessibility.value,
                trust_tier=str(item.get("trust_tier", evidence.trust_tier)),
                admitted_by=evidence.admitted_by.name,
                integrity=entry.status.value,
                integrity_reason=entry.reason.value if entry.reason is not None else None,
                text=text,
            )
        )
    return views, texts


def _judgments(verification: Verification, outcome: Outcome | None, artifacts: Mapping[str, str]) -> list[JudgmentView]:
    semantic = {c.criterion_id for c in outcome.criteria if c.semantic} if outcome is not None else set()
    rows = ArrivedResult.objects.filter(verification=verification).select_related("actor").order_by("received_at", "id")
    out = []
    for row in rows:
        if row.criterion_id not in semantic:
            continue
        body = row.body if isinstance(row.body, Mapping) else {}
        citations = [_citation(c, artifacts) for c in body.get("citations", ()) if isinstance(c, Mapping)]
        out.append(
            JudgmentView(
                criterion=row.criterion_id,
                actor=row.actor.name,
                outcome=str(body.get("outcome", "")),
                rationale=str(body.get("rationale", "")),
                citations=citations,
            )
        )
    return out


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


def _chain_lines(report: VerificationReport | None) -> list[ChainLine]:
    if report is None:
        return []
    lines = []
    for view in report.entries:
        body = view.body if isinstance(view.body, Mapping) else {}
        payload = body.get("payload") if isinstance(body.get("payload"), Mapping) else {}
        actor = payload.get("actor")
        lines.append(
            ChainLine(
                seq=view.seq,
                kind=str(payload.get("kind", "")),
                verdict=str(payload.get("verdict", "")),
                authority=str(payload.get("authority", "")),
                actor=str(actor.get("id", "")) if isinstance(actor, Mapping) else str(actor or ""),
                created_at=str(body.get("created_at", "")),
                content_hash=view.content_hash or "",
                key_id=view.key_id or "",
                ok=view.ok,
                status=view.status.value,
                reason=view.reason.value if view.reason is not None else None,
                reason_text=explain(view.reason) if view.reason is not None else "",
                supersedes=payload.get("supersedes_receipt_id"),
            )
        )
    return lines


def review_view(verification: Verification, *, now: datetime) -> ReviewView:
    """Everything the review page shows, read at ``now`` (issue 5 §3)."""
    head = head_of(verification)
    payload: Mapping[str, Any] = receipt_payload(head) if head is not None else {}
    decision_payload = payload if head is not None and head.kind == ReceiptKind.DECISION else None
    # The automated outcome beneath: the head's, or (under a decision) the receipt it superseded.
    automated_payload = payload
    if decision_payload is not None and head is not None and head.supersedes_receipt_id:
        superseded = Receipt.objects.filter(content_hash=head.supersedes_receipt_id).first()
        automated_payload = receipt_payload(superseded) if superseded is not None else {}
    outcome = _as_read(automated_payload, now)
    evidence, texts = _evidence(verification, automated_payload, now)
    cited = [c for c in automated_payload.get("citations", ()) if isinstance(c, Mapping)]
    citations = [_citation(c, texts) for c in cited]
    for item in evidence:
        mine = [c for c in citations if c.evidence_id == item.id]
        item.citations = mine
        if item.text is not None:
            spans = [(c.start, c.end) for c in mine if c.resolves]
            item.segments = segments(item.text, spans)
    report = verify_chain(verification, head)
    if decision_payload is not None:
        verdict = str(decision_payload.get("verdict", ""))
        determination = decision_payload.get("determination")
        reason: str | None = str(decision_payload.get("reason", Reason.HUMAN_DECISION.value))
        flagged, flag_reason = False, None
    elif outcome is not None:
        verdict = outcome.verdict.value
        determination = outcome.determination.value if outcome.determination is not None else None
        reason = outcome.reason.value if outcome.reason is not None else None
        flagged, flag_reason = outcome.flagged, outcome.flag_reason
    else:
        verdict, determination, reason, flagged, flag_reason = "", None, None, False, None
    if head is not None and untrusted_head(head):  # SPEC §8: no verdict from a key only the database vouches for
        verdict, determination = "", None
        reason = flag_reason = Reason.KEY_NOT_IN_PIN_JOURNAL.value
        flagged = True
    if head is None:
        status = "queued"
    elif outcome is not None and outcome.status_running and decision_payload is None:
        status = "running"
    else:
        status = "succeeded"
    return ReviewView(
        verification=verification,
        now=now,
        head=head,
        head_kind=head.kind if head is not None else "",
        verdict=verdict,
        determination=determination,
        reason=reason,
        reason_text=_explain(reason) if reason else "",
        flagged=flagged,
        flag_reason=flag_reason,
        status=status,
        criteria=_criteria(verification, automated_payload, outcome) if outcome is not None else [],
        evidence=evidence,
        judgments=_judgments(verification, outcome, texts),
        chain=_chain_lines(report),
        chain_ok=report.ok if report is not None else False,
        chain_reason=report.reason.value if report is not None and report.reason is not None else None,
        chain_reason_text=explain(report.reason) if report is not None and report.reason is not None else "",
        lease=active_lease(verification, now=now),
        decisions=list(
            ReviewDecision.objects.filter(verification=verification).select_related("user", "receipt").order_by("id")
        ),
        in_queue=in_queue(verification, now=now),
        superseded_by=Verification.objects.filter(supersedes=verification).order_by("created_at", "id").first(),
        decision_payload=decision_payload,
    )


def findings_of(verification: Verification) -> QuerySet[Finding]:
    return Finding.objects.filter(verification=verification).order_by("id")
