"""Reads of findings (SPEC §10): their state, the filtered list and one finding with what it is about."""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Final

from django.db.models import (
    Case,
    CharField,
    Count,
    Exists,
    OuterRef,
    Value,
    When,
)

from verification import cursors
from verification.evidence.models import Evidence
from verification.kernel.findings import FindingKind
from verification.records.read_helpers import bad_request, check_limit
from verification.reviews.models import Finding, FindingAction, FindingEvent
from verification.runs.models import Verification
from verification.trust.models import Receipt

FINDING_KINDS: Final = tuple(k.value for k in FindingKind)
FINDING_OPEN: Final = "open"
FINDING_ACKNOWLEDGED: Final = "acknowledged"
FINDING_CLOSED: Final = "closed"
FINDING_STATES: Final = (FINDING_OPEN, FINDING_ACKNOWLEDGED, FINDING_CLOSED)
FINDING_FILTERS: Final = frozenset({"kind", "state"})


def finding_state_expression() -> Case:
    """A finding's state is its events': closed once a person closed it, else acknowledged once acknowledged, else
    open. (Only people acknowledge and close, with a rationale: ``services.findings``.)"""
    closed = Exists(FindingEvent.objects.filter(finding=OuterRef("pk"), action=FindingAction.CLOSED))
    acknowledged = Exists(FindingEvent.objects.filter(finding=OuterRef("pk"), action=FindingAction.ACKNOWLEDGED))
    return Case(
        When(closed, then=Value(FINDING_CLOSED)),
        When(acknowledged, then=Value(FINDING_ACKNOWLEDGED)),
        default=Value(FINDING_OPEN),
        output_field=CharField(),
    )


def finding_state(finding: Finding) -> str:
    return _state_of(set(FindingEvent.objects.filter(finding=finding).values_list("action", flat=True)))


def _state_of(actions: set[str]) -> str:
    """The state ``finding_state_expression`` gives a finding whose events' actions are ``actions``."""
    if FindingAction.CLOSED.value in actions:
        return FINDING_CLOSED
    if FindingAction.ACKNOWLEDGED.value in actions:
        return FINDING_ACKNOWLEDGED
    return FINDING_OPEN


def finding_get(finding_id: Any) -> Finding | None:
    try:
        pk = int(finding_id)
    except (TypeError, ValueError):
        return None
    return Finding.objects.filter(pk=pk).first()


@dataclass(frozen=True)
class FindingsPage:
    rows: list[Finding]
    next_cursor: str | None
    counts: list[tuple[str, str, int]]  # (kind, state, n)


def findings_page(*, filters: Mapping[str, str], cursor: str | None, limit: int) -> FindingsPage:
    """Findings newest first, filtered by ``kind`` and ``state``, keyset-paginated on id; with counts per kind and
    state (one aggregate). Three queries whatever the table holds."""
    unknown = sorted(set(filters) - FINDING_FILTERS)
    if unknown:
        raise bad_request(f"unknown filters {unknown}")
    check_limit(limit)
    queryset = Finding.objects.annotate(state=finding_state_expression())
    kind = (filters.get("kind") or "").strip()
    if kind:
        if kind not in FINDING_KINDS:
            raise bad_request(f"kind is one of {', '.join(FINDING_KINDS)}")
        queryset = queryset.filter(kind=kind)
    state = (filters.get("state") or "").strip()
    if state:
        if state not in FINDING_STATES:
            raise bad_request(f"state is one of {', '.join(FINDING_STATES)}")
        queryset = queryset.filter(state=state)
    if cursor:
        (after,) = cursors.decode(cursor, int)
        queryset = queryset.filter(id__lt=after)
    page = list(queryset.select_related("verification", "verification__task").order_by("-id")[: limit + 1])
    more = len(page) > limit
    page = page[:limit]
    counts = [
        (row["kind"], row["state"], row["n"])
        for row in Finding.objects.annotate(state=finding_state_expression())
        .order_by()
        .values("kind", "state")
        .annotate(n=Count("pk"))
    ]
    return FindingsPage(
        rows=page, next_cursor=cursors.encode(page[-1].pk) if more and page else None, counts=sorted(counts)
    )


@dataclass(frozen=True)
class InvolvedReceipt:
    content_hash: str
    verification_id: uuid.UUID
    seq: int
    kind: str
    verdict: str
    authority: str
    created_at: datetime


@dataclass
class FindingFacts:
    """A finding with what it is about: its state, events, the receipts it names (and those it names that no longer
    exist), the verifications and evidence it refers to, and its other references."""

    finding: Finding
    state: str
    events: list[FindingEvent]
    receipts: list[InvolvedReceipt]
    missing_receipts: list[str]
    verifications: list[Verification]
    evidence: list[Evidence]
    other_refs: list[str]


def _uuid(text: str) -> uuid.UUID | None:
    try:
        return uuid.UUID(text)
    except ValueError:
        return None


def finding_facts(finding: Finding) -> FindingFacts:
    """A finding with what it is about: its receipts, verifications and evidence, and its event history."""
    events = list(FindingEvent.objects.filter(finding=finding).select_related("actor", "actor__user").order_by("id"))
    state = _state_of({e.action for e in events})
    receipt_refs = [str(r) for r in finding.receipt_refs or [] if isinstance(r, str)]
    receipts = [
        InvolvedReceipt(
            r.content_hash, r.verification_id, r.seq, r.kind, r.verdict or "", r.authority or "", r.created_at
        )
        for r in Receipt.objects.filter(content_hash__in=receipt_refs).order_by("created_at", "seq")
    ]
    found = {r.content_hash for r in receipts}
    refs = [str(r) for r in finding.refs or []]
    ids = {u for r in refs if (u := _uuid(r)) is not None}
    verification_ids = set(ids)
    if finding.verification_id is not None:
        verification_ids.add(finding.verification_id)
    verifications = list(
        Verification.objects.filter(pk__in=verification_ids).select_related("task").order_by("created_at", "id")
    )
    evidence_ids = set(ids)
    if finding.evidence_id is not None:
        evidence_ids.add(finding.evidence_id)
    evidence = list(Evidence.objects.filter(pk__in=evidence_ids).order_by("admitted_at", "id"))
    known = {str(v.pk) for v in verifications} | {str(e.pk) for e in evidence} | found
    return FindingFacts(
        finding=finding,
        state=state,
        events=events,
        receipts=receipts,
        missing_receipts=[r for r in receipt_refs if r not in found],
        verifications=verifications,
        evidence=evidence,
        other_refs=[r for r in refs if r not in known],
    )
