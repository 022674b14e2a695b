"""The reviewer queue's and the review page's view models (STYLE "The layers"), built from what
``verification.reviews.selectors`` (the queue) and ``verification.reviews.item_selectors`` (one item) return.

The attribute names are the templates' (``templates/portal/``).
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from html import escape as _html_escape
from typing import Any, Final

from django.urls import reverse
from django.utils import timezone
from django.utils.safestring import SafeString, mark_safe

from reviewportal.presenters import Segment, explain_code, segments
from verification.evidence.selectors import EvidenceRead, resolve_recorded_citation
from verification.kernel.determination import Outcome
from verification.kernel.evidence import Freshness
from verification.kernel.reasons import Reason
from verification.kernel.verifier import VerificationReport
from verification.reviews.item_selectors import BoundEvidence, ReviewItem, review_item, review_item_of
from verification.reviews.models import ReviewDecision, ReviewLease
from verification.reviews.selectors import RANK_NAMES, QueueItem, queue_slice
from verification.runs.cycle_workers import CycleWorkers
from verification.runs.models import ArrivedResult, Verification
from verification.trust.models import Receipt

# --- the queue -------------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class QueueRow:
    """One queue row as shown: who, why (the code as read and its words), which authority, how old, who holds it.

    Each cell's text is made here and the template reads one attribute per cell (issue 15: chained lookups and
    filters over 50 rows were a third of the queue page's time)."""

    verification: Verification
    rank: int
    reason: str
    reason_text: str
    verdict: str  # as read
    authority: str  # of the criterion that decides the head's verdict, as read
    semantic: bool
    age: timedelta
    holder: Any  # the user holding it, or None
    lease_expires_at: datetime | None
    url: str  # its review page
    short_id: str  # the first 8 characters of its id
    submitted_iso: str  # when it was submitted, ISO 8601 in the current time zone

    @property
    def pk(self) -> str:
        return str(self.verification.pk)

    @property
    def title(self) -> str:
        """Its task's title, or "(no task)"."""
        task = self.verification.task
        return (task.title if task is not None else "") or "(no task)"

    @property
    def cycle_text(self) -> str:
        return str(self.verification.cycle) if self.verification.cycle else "–"

    @property
    def holder_pk(self) -> Any:
        return self.holder.pk if self.holder is not None else None

    @property
    def holder_name(self) -> str:
        return self.holder.get_username() if self.holder is not None else ""

    @property
    def lease_until(self) -> str:
        """When the holder's lease runs out, HH:MM in the current time zone ("" when nobody holds it)."""
        return timezone.localtime(self.lease_expires_at).strftime("%H:%M") if self.lease_expires_at else ""

    @property
    def rank_name(self) -> str:
        return RANK_NAMES[self.rank]

    @property
    def rank_note(self) -> str:
        """The rank's name when it is not the verdict's (an expired PENDING ranks as such), else empty."""
        name = self.rank_name
        return "" if name == self.verdict else name

    @property
    def verdict_class(self) -> str:
        return self.verdict.lower()

    @property
    def authority_text(self) -> str:
        return self.authority or "–"

    @property
    def age_text(self) -> str:
        seconds = int(self.age.total_seconds())
        if seconds < 3600:
            return f"{seconds // 60} min"
        if seconds < 86400:
            return f"{seconds // 3600} h"
        return f"{seconds // 86400} d"


#: One queue row's markup: ``str.format`` over values each escaped by ``_escaped`` (markup pieces are made below).
_ROW: Final = (
    '<tr data-queue-row="{pk}" aria-selected="false" class="rank-{rank}">\n'
    '<td>\n<a data-open href="{url}">{title}</a>\n'
    '<div class="muted small">cycle {cycle} · <code>{short_id}</code></div>\n</td>\n'
    '<td><code>{reason}</code><div class="small">{reason_text}</div></td>\n'
    '<td data-label="Verdict"><span class="verdict verdict-{verdict_class}">{verdict}</span>{rank_note}</td>\n'
    '<td data-label="Authority">{authority}{badge}</td>\n'
    '<td data-label="Age" title="submitted {submitted}">{age}</td>\n'
    '<td data-label="Held by">{held}</td>\n'
    "</tr>\n"
)
_MODEL_BADGE: Final = '<div class="badge model">model output</div>'
_UNCLAIMED: Final = '<span class="muted">unclaimed</span>'


def _escaped(value: Any) -> str:
    """``conditional_escape`` without its lazy-string wrapper (the half of its cost): markup (``__html__``) as it
    is, anything else ``html.escape``d as Django's ``escape`` does it (``&``, ``<``, ``>``, ``"``, ``'``)."""
    html = getattr(value, "__html__", None)
    return str(html()) if html is not None else _html_escape(str(value))


def _held_by(row: QueueRow, viewer_pk: Any) -> str:
    if not row.holder_name:
        return _UNCLAIMED
    who = "<strong>you</strong>" if row.holder_pk == viewer_pk else _escaped(row.holder_name)
    return f'{who}<div class="muted small">until {_escaped(row.lease_until)}</div>'


def queue_rows_html(rows: Sequence[QueueRow], *, viewer_pk: Any) -> SafeString:
    """The queue table's rows (the ``<tbody>`` of ``templates/portal/_queue_list.html``) for the reviewer
    ``viewer_pk`` ("you" on the rows they hold), built here as Django's admin builds its change list's cells
    (``admin_list.items_for_result``): every value escaped, one string per row. Through the template engine, 50 rows
    of 15 cells took 13 of the queue page's 16 ms of rendering (~20 µs a cell), and the page is what every reviewer's
    browser asks for every 10 seconds (issue 15). ``tests/portal/test_queue.py`` holds them equal to the template's
    markup."""
    e = _escaped
    return mark_safe(  # noqa: S308 - every value is escaped by _escaped; the rest is this module's constant markup
        "".join(
            _ROW.format(
                pk=e(row.pk),
                rank=e(row.rank),
                url=e(row.url),
                title=e(row.title),
                cycle=e(row.cycle_text),
                short_id=e(row.short_id),
                reason=e(row.reason),
                reason_text=e(row.reason_text),
                verdict_class=e(row.verdict_class),
                verdict=e(row.verdict),
                rank_note=f'<div class="muted small">{e(row.rank_note)}</div>' if row.rank_note else "",
                authority=e(row.authority_text),
                badge=_MODEL_BADGE if row.semantic else "",
                submitted=e(row.submitted_iso),
                age=e(row.age_text),
                held=_held_by(row, viewer_pk),
            )
            for row in rows
        )
    )


@dataclass(frozen=True)
class QueuePage:
    rows: list[QueueRow]
    next_cursor: str | None
    counts: list[tuple[str, int]]
    total: int


#: A verification id that stands for the row's own in its review page's address (``review_url``).
_URL_PROBE: Final = uuid.UUID(int=0xF00D)


def review_url() -> Callable[[Any], str]:
    """The review page's address of a verification id: reversed once, not once per row (issue 15: 50 ``{% url %}``
    tags took a tenth of the queue page's time)."""
    head, _, tail = reverse("portal:review", args=[_URL_PROBE]).rpartition(str(_URL_PROBE))
    return lambda pk: f"{head}{pk}{tail}"


def _queue_row(item: QueueItem, now: datetime, url_of: Callable[[Any], str]) -> QueueRow:
    v, lease = item.verification, item.lease
    return QueueRow(
        verification=v,
        rank=item.rank,
        reason=item.reason,
        reason_text=explain_code(item.reason),
        verdict=item.verdict,
        authority=item.authority,
        semantic=item.semantic,
        age=max(now - v.submitted_at, timedelta(0)),
        holder=lease.holder if lease is not None else None,
        lease_expires_at=lease.expires_at if lease is not None else None,
        url=url_of(v.pk),
        short_id=str(v.pk)[:8],
        submitted_iso=timezone.localtime(v.submitted_at).isoformat(),
    )


def queue_page(*, now: datetime, filters: Mapping[str, str], cursor: str | None, limit: int) -> QueuePage:
    """One page of the queue as shown (``queue_slice``: keyset pagination, two queries whatever its length)."""
    read = queue_slice(now=now, filters=filters, cursor=cursor, limit=limit)
    url_of = review_url()
    return QueuePage(
        rows=[_queue_row(item, now, url_of) for item in read.items],
        next_cursor=read.next_cursor,
        counts=read.counts,
        total=sum(n for _, n in read.counts),
    )


# --- one item --------------------------------------------------------------------------------------------------------


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
    workers: CycleWorkers | None = None  # read for a reviewer (``review_view_of``): the decision rails' read


def _citation(raw: Mapping[str, Any], reads: Mapping[str, EvidenceRead]) -> CitationView:
    resolved = resolve_recorded_citation(raw, reads)
    citation, failure = resolved.citation, resolved.failure
    return CitationView(
        evidence_id=citation.evidence_id,
        start=citation.start,
        end=citation.end,
        quote=citation.quote,
        quote_hash=citation.quote_hash,
        resolves=failure is None,
        reason=failure.value if failure is not None else None,
        reason_text=explain_code(failure),
    )


def _criteria(payload: Mapping[str, Any], outcome: Outcome, kinds: Mapping[str, str]) -> list[CriterionView]:
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
                    reason_text=explain_code(k.reason),
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
                reason_text=explain_code(c.reason),
                authority=c.authority.value,
                checks=checks,
            )
        )
    return out


def _independence_basis(independence: Mapping[str, Any]) -> list[str]:
    basis: list[str] = []
    for question in ("actor_distinct", "boundary_distinct", "custody_distinct"):
        answer = independence.get(question) or {}
        value = answer.get("value")
        shown = "unknown" if value is None else ("yes" if value else "no")
        grounds = ", ".join(answer.get("basis") or []) or "no basis"
        basis.append(f"{question.replace('_', ' ')}: {shown} ({grounds})")
    return basis


def _evidence_view(bound: BoundEvidence) -> EvidenceView:
    evidence, read, item = bound.binding.evidence, bound.read, bound.signed
    independence = item.get("independence") or {}
    fresh = bound.freshness
    return EvidenceView(
        id=str(evidence.pk),
        symbol=bound.binding.symbol,
        digest=evidence.digest,
        size=evidence.size,
        media_type=evidence.media_type,
        evidence_type=evidence.evidence_type,
        admission_source=evidence.admission_source,
        independence=str(independence.get("independence", "unknown")),
        independence_basis=_independence_basis(independence),
        mutability=evidence.mutability,
        freshness=fresh.value if isinstance(fresh, Freshness) else str(fresh),
        accessibility=read.accessibility.value,
        trust_tier=str(item.get("trust_tier", evidence.trust_tier)),
        admitted_by=evidence.admitted_by.name,
        integrity=read.integrity.status.value,
        integrity_reason=read.integrity.reason.value if read.integrity.reason is not None else None,
        text=read.text,
    )


def _judgment_view(row: ArrivedResult, reads: Mapping[str, EvidenceRead]) -> JudgmentView:
    body = row.body if isinstance(row.body, Mapping) else {}
    return JudgmentView(
        criterion=row.criterion_id,
        actor=row.actor.name,
        outcome=str(body.get("outcome", "")),
        rationale=str(body.get("rationale", "")),
        citations=[_citation(c, reads) for c in body.get("citations", ()) if isinstance(c, Mapping)],
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
                reason_text=explain_code(view.reason),
                supersedes=payload.get("supersedes_receipt_id"),
            )
        )
    return lines


def review_page(item: ReviewItem) -> ReviewView:
    """The review page's view of one item as read (``item_selectors.review_item``)."""
    head, outcome, decision_payload = item.head, item.outcome, item.decision_payload
    reads = {str(b.binding.evidence_id): b.read for b in item.evidence}
    evidence = [_evidence_view(b) for b in item.evidence]
    cited = [c for c in item.automated_payload.get("citations", ()) if isinstance(c, Mapping)]
    citations = [_citation(c, reads) for c in cited]
    for view in evidence:
        mine = [c for c in citations if c.evidence_id == view.id]
        view.citations = mine
        if view.text is not None:
            view.segments = segments(view.text, [(c.start, c.end) for c in mine if c.resolves])
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
    if item.untrusted_head:  # SPEC §8: no verdict from a key only the database vouches for
        verdict, determination = "", None
        reason = flag_reason = Reason.KEY_NOT_IN_PIN_JOURNAL.value
        flagged = True
    if head is None:
        status = "queued"
    elif outcome is not None and outcome.status_running and decision_payload is None:
        status = "running"
    else:
        status = "succeeded"
    report = item.chain
    return ReviewView(
        verification=item.verification,
        now=item.now,
        head=head,
        head_kind=head.kind if head is not None else "",
        verdict=verdict,
        determination=determination,
        reason=reason,
        reason_text=explain_code(reason) if reason else "",
        flagged=flagged,
        flag_reason=flag_reason,
        status=status,
        criteria=_criteria(item.automated_payload, outcome, item.criterion_kinds) if outcome is not None else [],
        evidence=evidence,
        judgments=[_judgment_view(row, reads) for row in item.judgments],
        chain=_chain_lines(report),
        chain_ok=report.ok if report is not None else False,
        chain_reason=report.reason.value if report is not None and report.reason is not None else None,
        chain_reason_text=explain_code(report.reason if report is not None else None),
        lease=item.lease,
        decisions=item.decisions,
        in_queue=item.in_queue,
        superseded_by=item.superseded_by,
        decision_payload=decision_payload,
        workers=item.workers,
    )


def review_view(verification: Verification, *, now: datetime) -> ReviewView:
    """Everything the review page shows, read at ``now`` (issue 5 §3)."""
    return review_page(review_item(verification, now=now))


def review_view_of(verification_id: Any, *, now: datetime, reviewer: Any = None) -> ReviewView | None:
    """``review_view`` by id (``item_selectors.review_item_of``); None when there is no such verification. With
    ``reviewer``, the decision rails' read comes with it (``ReviewView.workers``)."""
    item = review_item_of(verification_id, now=now, reviewer=reviewer)
    return review_page(item) if item is not None else None
