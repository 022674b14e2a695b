"""Reads of a subject's timeline (issue 6 §2): every cycle, verification and receipt, with supersession."""

from __future__ import annotations

import uuid
from collections import defaultdict
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from verification.kernel.reasons import Reason
from verification.records.read_helpers import reason_text_of
from verification.records.selectors_history import STATE_LABELS, state_expression
from verification.reviews.models import Finding, ReviewAction, ReviewDecision
from verification.runs.models import Task, TaskCycle, Verification
from verification.trust.models import Receipt
from verification.trust.selectors import receipt_payload


@dataclass
class TimelineReceipt:
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
    reason_text: str
    rationale: str
    supersedes: str | None
    supersedes_label: str
    superseded_by: list[str] = field(default_factory=list)

    @property
    def superseded(self) -> bool:
        return bool(self.superseded_by)

    @property
    def anchor(self) -> str:
        return f"r-{self.content_hash[:16]}"


@dataclass
class TimelineRequest:
    """A reviewer's "needs more evidence" (no receipt: SPEC §9 issues none without a verdict)."""

    user: str
    rationale: str
    created_at: datetime


@dataclass
class TimelineVerification:
    verification: Verification
    state: str
    receipts: list[TimelineReceipt]
    requests: list[TimelineRequest]
    findings: list[Finding]
    superseded_by: uuid.UUID | None

    @property
    def state_label(self) -> str:
        return STATE_LABELS.get(self.state, self.state)


@dataclass
class TimelineCycle:
    number: int
    opened_at: datetime | None
    verifications: list[TimelineVerification]


@dataclass
class Timeline:
    task: Task
    cycles: list[TimelineCycle]
    receipt_count: int


def _actor_id(value: Any) -> str:
    if isinstance(value, Mapping):
        return str(value.get("id", ""))
    return str(value or "")


def subject_timeline(task: Task, *, now: datetime) -> Timeline:
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
    position = {v.pk: i + 1 for i, v in enumerate(verifications)}
    successors = {v.supersedes_id: v.pk for v in verifications if v.supersedes_id}
    items: dict[uuid.UUID, list[TimelineReceipt]] = defaultdict(list)
    timeline_receipts: dict[str, TimelineReceipt] = {}
    from verification.trust import root as trust

    trusted = trust.trusted_keys("proof-signing")
    for r in receipts:
        payload = receipt_payload(r)
        if r.key_id not in trusted:  # SPEC §8: no verdict from a key only the database vouches for
            untrusted = Reason.KEY_NOT_IN_PIN_JOURNAL.value
            payload = {**payload, "verdict": "", "determination": None, "reason": untrusted}
        decision = by_receipt.get(r.content_hash)
        supersedes = payload.get("supersedes_receipt_id")
        label = ""
        if isinstance(supersedes, str) and supersedes in where:
            other, seq = where[supersedes]
            label = f"seq {seq}" if other == r.verification_id else f"seq {seq} of verification #{position[other]}"
        reason = str(payload.get("reason") or "")
        item = TimelineReceipt(
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
            reason=reason,
            reason_text=reason_text_of(reason),
            rationale=str(payload.get("rationale") or ""),
            supersedes=supersedes if isinstance(supersedes, str) else None,
            supersedes_label=label,
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
    grouped: dict[int, list[TimelineVerification]] = defaultdict(list)
    for v in verifications:
        grouped[v.cycle or 1].append(
            TimelineVerification(
                verification=v,
                state=str(getattr(v, "row_state", "")),
                receipts=items.get(v.pk, []),
                requests=requests.get(v.pk, []),
                findings=by_verification.get(v.pk, []),
                superseded_by=successors.get(v.pk),
            )
        )
    numbers = sorted(set(cycles) | set(grouped)) or [1]
    return Timeline(
        task=task,
        cycles=[TimelineCycle(n, cycles.get(n), grouped.get(n, [])) for n in numbers],
        receipt_count=len(receipts),
    )
