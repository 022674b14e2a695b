"""Reads of a subject's timeline (issue 6 §2): every cycle, verification and receipt, with supersession, as domain
records (the page's words, labels and anchors: ``reviewportal.history.presenters.timeline_view``)."""

from __future__ import annotations

import uuid
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from verification.kernel.reasons import Reason
from verification.records.selectors_history import state_expression
from verification.reviews.models import Finding, ReviewAction, ReviewDecision
from verification.runs.models import Task, TaskCycle, Verification
from verification.trust.models import Receipt
from verification.trust.selectors import receipt_payload


@dataclass
class TimelineReceiptEntry:
    """One receipt on the timeline: what it said, who issued it with what authority, why, and what it superseded."""

    verification_id: uuid.UUID
    seq: int
    content_hash: str
    kind: str
    verdict: str
    determination: str | None
    authority: str
    actor: str
    decided_by: str
    created_at: datetime
    reason: str
    rationale: str
    supersedes: str | None
    #: Where the receipt it supersedes stands on this timeline: its verification and seq (None: not on it).
    supersedes_at: tuple[uuid.UUID, int] | None = None
    superseded_by: list[str] = field(default_factory=list)

    @property
    def superseded(self) -> bool:
        return bool(self.superseded_by)


@dataclass
class TimelineRequest:
    """A reviewer's "needs more evidence" (no receipt: SPEC §9 issues none without a verdict)."""

    user: str
    rationale: str
    created_at: datetime


@dataclass
class TimelineVerificationEntry:
    verification: Verification
    position: int  # its number on the subject, 1 the first recorded
    state: str
    receipts: Sequence[TimelineReceiptEntry]
    requests: list[TimelineRequest]
    findings: list[Finding]
    superseded_by: uuid.UUID | None


@dataclass
class TimelineCycleEntry:
    number: int
    opened_at: datetime | None
    verifications: Sequence[TimelineVerificationEntry]


@dataclass
class SubjectTimeline:
    task: Task
    cycles: Sequence[TimelineCycleEntry]
    receipt_count: int


def _actor_id(value: Any) -> str:
    if isinstance(value, Mapping):
        return str(value.get("id", ""))
    return str(value or "")


def subject_timeline(task: Task, *, now: datetime) -> SubjectTimeline:
    """Every cycle, verification and receipt of ``task`` in order, with supersession (SPEC §7: a fail, a repair and
    a pass all stay on record). Five queries whatever the subject holds: cycles, verifications, receipts, reviewers'
    actions, findings."""
    cycles = {c.number: c.opened_at for c in TaskCycle.objects.filter(task=task)}
    verifications = list(
        Verification.objects.filter(task=task)
        .select_related("submitted_by")
        .annotate(row_state=state_expression(now))
        .order_by("cycle", "created_at", "id")
    )
    ids = [v.pk for v in verifications]
    receipts = list(Receipt.objects.filter(verification_id__in=ids).order_by("verification_id", "seq")) if ids else []
    actions = (
        list(ReviewDecision.objects.filter(verification_id__in=ids).select_related("user").order_by("id"))
        if ids
        else []
    )
    findings = list(Finding.objects.filter(verification_id__in=ids).order_by("id")) if ids else []
    by_receipt = {d.receipt_id: d for d in actions if d.receipt_id}
    where: dict[str, tuple[uuid.UUID, int]] = {r.content_hash: (r.verification_id, r.seq) for r in receipts}
    successors = {v.supersedes_id: v.pk for v in verifications if v.supersedes_id}
    items: dict[uuid.UUID, list[TimelineReceiptEntry]] = defaultdict(list)
    timeline_receipts: dict[str, TimelineReceiptEntry] = {}
    from verification.trust import root as trust

    trusted = trust.trusted_keys("proof-signing")
    for r in receipts:
        payload = receipt_payload(r)
        if r.key_id not in trusted:  # SPEC §8: no verdict from a key only the database vouches for
            untrusted = Reason.KEY_NOT_IN_PIN_JOURNAL.value
            payload = {**payload, "verdict": "", "determination": None, "reason": untrusted}
        decision = by_receipt.get(r.content_hash)
        supersedes = payload.get("supersedes_receipt_id")
        item = TimelineReceiptEntry(
            verification_id=r.verification_id,
            seq=r.seq,
            content_hash=r.content_hash,
            kind=r.kind,
            verdict=(r.verdict or str(payload.get("verdict") or "")) if r.key_id in trusted else "",
            determination=(r.determination or payload.get("determination")) if r.key_id in trusted else None,
            authority=r.authority or str(payload.get("authority") or ""),
            actor=r.actor or _actor_id(payload.get("actor")),
            decided_by=decision.user.get_username() if decision is not None else "",
            created_at=r.created_at,
            reason=str(payload.get("reason") or ""),
            rationale=str(payload.get("rationale") or ""),
            supersedes=supersedes if isinstance(supersedes, str) else None,
            supersedes_at=where.get(supersedes) if isinstance(supersedes, str) else None,
        )
        items[r.verification_id].append(item)
        timeline_receipts[r.content_hash] = item
    for item in timeline_receipts.values():
        if item.supersedes and item.supersedes in timeline_receipts:
            timeline_receipts[item.supersedes].superseded_by.append(item.content_hash)
    requests: dict[uuid.UUID, list[TimelineRequest]] = defaultdict(list)
    for d in actions:
        if d.action == ReviewAction.MORE_EVIDENCE:
            requests[d.verification_id].append(TimelineRequest(d.user.get_username(), d.rationale, d.created_at))
    by_verification: dict[uuid.UUID, list[Finding]] = defaultdict(list)
    for f in findings:
        if f.verification_id is not None:
            by_verification[f.verification_id].append(f)
    grouped: dict[int, list[TimelineVerificationEntry]] = defaultdict(list)
    for position, v in enumerate(verifications, start=1):
        grouped[v.cycle or 1].append(
            TimelineVerificationEntry(
                verification=v,
                position=position,
                state=str(getattr(v, "row_state", "")),
                receipts=items.get(v.pk, []),
                requests=requests.get(v.pk, []),
                findings=by_verification.get(v.pk, []),
                superseded_by=successors.get(v.pk),
            )
        )
    numbers = sorted(set(cycles) | set(grouped)) or [1]
    return SubjectTimeline(
        task=task,
        cycles=[TimelineCycleEntry(n, cycles.get(n), grouped.get(n, [])) for n in numbers],
        receipt_count=len(receipts),
    )
