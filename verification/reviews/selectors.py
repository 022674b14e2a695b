"""Reads of the reviewer queue and of one item's review page (issue 5 §2, §3; SPEC §2, §3, §4, §6, §7, §12).

The queue is ``selectors.review_queue`` (flagged verifications no human decision has superseded, resolved at
``now``) minus what a person need not look at any more: a verification superseded by a newer one of its subject (a
re-run, SPEC §7: the newer one is in the queue if it is flagged) and one a reviewer sent back for more evidence.
Ordering, filters, counts and the cursor are all done in the database over the indexed head columns, so a page costs
the same few queries whatever the queue's length.
"""

from __future__ import annotations

import math
import uuid
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any, Final

from django.conf import settings
from django.core.cache import cache
from django.db.models import (
    BooleanField,
    Case,
    Count,
    DateTimeField,
    Exists,
    Expression,
    F,
    IntegerField,
    OuterRef,
    Q,
    QuerySet,
    Subquery,
    Sum,
    UUIDField,
    Value,
    When,
)
from django.db.models.functions import Coalesce

from verification import cursors
from verification.errors import ServiceError
from verification.evidence import storage
from verification.evidence.models import Evidence, VerificationEvidence
from verification.kernel.canonical import loads_strict
from verification.kernel.determination import Outcome
from verification.kernel.evaluation import read_outcome
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
from verification.kernel.verdicts import Authority, Verdict
from verification.kernel.verifier import VerificationReport, verify_report
from verification.records.models import QueueBacklogMember, QueueReasonCount
from verification.reviews.models import ReviewAction, ReviewDecision, ReviewLease
from verification.runs.models import ArrivedResult, Verification
from verification.runs.read_state import read_annotations, read_columns, read_q, shown_authority
from verification.runs.selectors import rubric_criteria
from verification.trust.models import Receipt, ReceiptKind
from verification.trust.selectors import head_of, proof_for, receipt_payload, trusted_keys, untrusted_head

# --- the queue -------------------------------------------------------------------------------------------------------

#: Queue order (issue 5 §2): MISMATCH, then semantic cited_conflict, then other flagged, then UNKNOWN, then NOT_RUN.
RANK_MISMATCH: Final = 0
RANK_CITED_CONFLICT: Final = 1
RANK_OTHER: Final = 2
RANK_UNKNOWN: Final = 3
RANK_NOT_RUN: Final = 4
RANK_NAMES: Final[dict[int, str]] = {
    RANK_MISMATCH: "MISMATCH",
    RANK_CITED_CONFLICT: "semantic cited_conflict",
    RANK_OTHER: "other flagged",
    RANK_UNKNOWN: "UNKNOWN",
    RANK_NOT_RUN: "NOT_RUN",
}

#: Age filter: older than this.
AGES: Final[dict[str, timedelta]] = {
    "1h": timedelta(hours=1),
    "1d": timedelta(days=1),
    "7d": timedelta(days=7),
}
AUTHORITIES: Final = tuple(a.value for a in Authority)
QUEUE_FILTERS: Final = frozenset({"reason", "authority", "age", "subject"})
MAX_SUBJECT_CHARS: Final = 200


def superseded_q() -> Exists:
    return Exists(Verification.objects.filter(supersedes=OuterRef("pk")))


def evidence_requested() -> Exists:
    return Exists(ReviewDecision.objects.filter(verification=OuterRef("pk"), action=ReviewAction.MORE_EVIDENCE))


def lease_free(now: datetime) -> Q:
    """No lease is held on the verification at ``now`` (never claimed, released, or run out)."""
    return (
        Q(review_lease__isnull=True)
        | Q(review_lease__released_at__isnull=False)
        | Q(review_lease__expires_at__lte=now)
    )


def queue_rank() -> Case:
    """The queue's order as one expression over the head columns (issue 5 §2), without ``now`` so that it can be
    indexed (migration 0007's partial expression index serves ORDER BY rank, submitted_at, id). A head is ranked by
    its signed outcome: a PENDING head (in the queue only once a deadline passed and it reads flagged) ranks with
    UNKNOWN, the default expiry verdict."""
    return Case(
        When(verdict=Verdict.MISMATCH.value, then=Value(RANK_MISMATCH)),
        When(reason=Reason.SEMANTIC_CITED_CONFLICT.value, then=Value(RANK_CITED_CONFLICT)),
        When(verdict__in=[Verdict.UNKNOWN.value, Verdict.PENDING.value], then=Value(RANK_UNKNOWN)),
        When(verdict=Verdict.NOT_RUN.value, then=Value(RANK_NOT_RUN)),
        default=Value(RANK_OTHER),
        output_field=IntegerField(),
    )


#: The rows the queue index covers: every head that can be in the queue at some ``now``: an outcome no person
#: decided, flagged as issued or with a PENDING deadline (after which it may read flagged, SPEC §2, §3).
QUEUE_INDEX_CONDITION: Final = Q(verdict__isnull=False, human_decided=False) & (
    Q(flagged=True) | Q(pending_until__isnull=False)
)


def queue_member_q(now: datetime) -> Q:
    """SPEC §3: the review queue is exactly the verifications that *read* as flagged at ``now`` (``read_state``, the
    single read's definition) and that no person decided, minus (issue 5 §2) one superseded by a re-run and one sent
    back for more evidence. The queue, ``in_queue``, its counts, the backlog and History's ``in_review`` all use it."""
    return QUEUE_INDEX_CONDITION & read_q(now, flagged=True) & ~Q(superseded_q()) & ~Q(evidence_requested())


def queue_reason(now: datetime) -> Coalesce:
    """A queue item's reason as read at ``now`` (the empty code for none)."""
    return Coalesce(read_annotations(now)["read_reason"], Value(""))


def queue_items(*, now: datetime) -> QuerySet[Verification]:
    """The reviewer queue at ``now`` (``queue_member_q``), in queue order, annotated with ``queue_reason`` (the
    reason as read) and ``queue_rank``."""
    return (
        Verification.objects.filter(queue_member_q(now))
        .select_related("task", "submitted_by")
        .annotate(queue_reason=queue_reason(now), queue_rank=queue_rank())
        .order_by("queue_rank", "submitted_at", "id")
    )


def in_queue(verification: Verification, *, now: datetime) -> bool:
    return queue_items(now=now).filter(pk=verification.pk).exists()


def claimable(*, now: datetime) -> QuerySet[Verification]:
    """Queue items nobody holds at ``now``, in queue order (the claim service takes the first)."""
    return queue_items(now=now).filter(lease_free(now))


def _bad(detail: str) -> ServiceError:
    return ServiceError(Reason.INVALID_REQUEST, detail)


def filter_queue(
    queryset: QuerySet[Verification], filters: Mapping[str, str], *, now: datetime
) -> QuerySet[Verification]:
    """Apply the queue's filters: ``reason`` (a registry code), ``authority`` (the chain holds a check or result of
    that authority), ``age`` (older than 1h, 1d or 7d), ``subject`` (a task id, or text in its title or reference).
    Empty values are ignored; anything else is ``invalid-request``."""
    unknown = sorted(set(filters) - QUEUE_FILTERS)
    if unknown:
        raise _bad(f"unknown filters {unknown}")
    reason = (filters.get("reason") or "").strip()
    if reason:
        try:
            queryset = queryset.filter(queue_reason=Reason(reason).value)
        except ValueError:
            raise _bad(f"reason {reason!r} is not a registered code") from None
    authority = (filters.get("authority") or "").strip()
    if authority:
        if authority not in AUTHORITIES:
            raise _bad(f"authority is one of {', '.join(AUTHORITIES)}")
        # Canonical JSON (RFC 8785) has no spaces: every check, result and issuer of that authority reads so.
        marker = f'"authority":"{authority}"'
        marked = Receipt.objects.filter(verification=OuterRef("pk"), envelope__contains=marker)
        queryset = queryset.filter(Exists(marked))
    age = (filters.get("age") or "").strip()
    if age:
        if age not in AGES:
            raise _bad(f"age is one of {', '.join(AGES)}")
        queryset = queryset.filter(submitted_at__lte=now - AGES[age])
    subject = (filters.get("subject") or "").strip()[:MAX_SUBJECT_CHARS]
    if subject:
        try:
            queryset = queryset.filter(task_id=uuid.UUID(subject))
        except ValueError:
            queryset = queryset.filter(Q(task__title__icontains=subject) | Q(task__external_ref__icontains=subject))
    return queryset


COUNTS_CACHE_KEY: Final = "verification.review_queue.counts"


def _hour(moment: datetime) -> int:
    """Whole hours since the Unix epoch (the rollups' hour)."""
    return math.floor(moment.timestamp() / 3600)


def _hour_start(hour: int) -> datetime:
    return datetime.fromtimestamp(hour * 3600, tz=UTC)


def spans_hour_q(hour: int) -> Q:
    """Member spans (``QueueBacklogMember`` and its counts) that cover the whole of ``hour``: no edge inside it."""
    return Q(due_hour__lt=hour, until_hour__gt=hour)


def edge_in_hour_q(hour: int) -> Q:
    """Verifications with a member span starting or ending inside ``hour``: their membership during it is read from
    the queue itself (``queue_items``), never from the counts (where no span of theirs covers the whole hour)."""
    edges = QueueBacklogMember.objects.filter(Q(due_hour=hour) | Q(until_hour=hour)).values("verification_id")
    return Q(pk__in=edges)


def count_queue_reasons(*, now: datetime) -> list[tuple[str, int]]:
    """How many queue items there are per reason as read at ``now`` (``queue_items``' ``queue_reason``), most first.

    From the rollup the database keeps (``rollups``: each span of a verification's time line in which it reads as a
    member, counted per reason as read and the hours the span starts and ends in), whose size follows the reasons and
    the hours, not the items: the spans that cover the whole current hour count from the rollup; the verifications
    with a span edge inside the current hour (a PENDING deadline falling in it) are counted from the queue itself,
    exactly. A verification is in one of the two, never both. Two queries whatever the queue's length.
    """
    now_hour = _hour(now)
    rows = (
        QueueReasonCount.objects.filter(spans_hour_q(now_hour))
        .values("reason")
        .annotate(total=Sum("n"))
        .values_list("reason", "total")
    )
    totals: Counter[str] = Counter()
    for code, n in rows:
        totals[str(code)] += int(n or 0)
    due_now = queue_items(now=now).filter(edge_in_hour_q(now_hour))
    for row in due_now.order_by().values("queue_reason").annotate(n=Count("pk")):
        totals[str(row["queue_reason"])] += int(row["n"])
    return sorted(((code, n) for code, n in totals.items() if n), key=lambda pair: (-pair[1], pair[0]))


def queue_counts(*, now: datetime, cached: bool = True) -> list[tuple[str, int]]:
    """How many queue items there are per reason (as read), most first (``count_queue_reasons``: from the rollup,
    two queries whatever the queue's length).

    The result may be kept for ``REVIEWPORTAL_QUEUE_COUNTS_SECONDS`` (0 turns it off): a summary a few seconds old,
    while the list itself is always read now. A decision drops the cached counts (``forget_queue_counts``).
    """
    seconds = int(getattr(settings, "REVIEWPORTAL_QUEUE_COUNTS_SECONDS", 5))
    if cached and seconds > 0:
        hit = cache.get(COUNTS_CACHE_KEY)
        if hit is not None:
            return [(str(code), int(n)) for code, n in hit]
    counts = count_queue_reasons(now=now)
    if cached and seconds > 0:
        cache.set(COUNTS_CACHE_KEY, counts, seconds)
    return counts


def forget_queue_counts() -> None:
    cache.delete(COUNTS_CACHE_KEY)


@dataclass(frozen=True)
class Cursor:
    """The queue's keyset cursor: the last row's (rank, submitted_at, id); on the wire ``verification.cursors``."""

    rank: int
    submitted_at: datetime
    pk: uuid.UUID

    def encode(self) -> str:
        return cursors.encode(self.rank, self.submitted_at, self.pk)

    @classmethod
    def decode(cls, raw: str) -> Cursor:
        """``invalid-request`` for anything that is not a cursor this server issued."""
        rank, submitted_at, pk = cursors.decode(raw, int, datetime, uuid.UUID)
        return cls(rank, submitted_at, pk)


class RowAfter(Expression):
    """``(rank, submitted_at, id) > (cursor's)`` as one SQL row comparison (issue 15): the database seeks the queue
    index (migration 0007: the same three expressions, in that order) to the cursor and reads on from there, where the
    equivalent OR of three conditions made it walk the index from the start and drop every earlier row. Row values are
    standard SQL (PostgreSQL; SQLite since 3.15)."""

    conditional = True
    output_field = BooleanField()

    def __init__(self, rank: Any, submitted_at: Any, pk: Any, *, after: Cursor) -> None:
        super().__init__()
        self.lhs = [rank, submitted_at, pk]
        self.rhs = [
            Value(int(after.rank), output_field=IntegerField()),
            Value(after.submitted_at, output_field=DateTimeField()),
            Value(after.pk, output_field=UUIDField()),
        ]

    def get_source_expressions(self) -> list[Any]:
        return [*self.lhs, *self.rhs]

    def set_source_expressions(self, exprs: Sequence[Any]) -> None:
        self.lhs, self.rhs = list(exprs[:3]), list(exprs[3:])

    def as_sql(self, compiler: Any, connection: Any) -> tuple[str, list[Any]]:
        sides: list[str] = []
        params: list[Any] = []
        for side in (self.lhs, self.rhs):
            parts = []
            for expression in side:
                sql, more = compiler.compile(expression)
                parts.append(sql)
                params.extend(more)
            sides.append("(" + ", ".join(parts) + ")")
        return f"{sides[0]} > {sides[1]}", params


@dataclass(frozen=True)
class QueueRow:
    """One queue row as shown: who, why (the code as read and its words), which authority, how old, who holds it."""

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

    @property
    def rank_name(self) -> str:
        return RANK_NAMES[self.rank]

    @property
    def age_text(self) -> str:
        seconds = int(self.age.total_seconds())
        if seconds < 3600:
            return f"{seconds // 60} min"
        if seconds < 86400:
            return f"{seconds // 3600} h"
        return f"{seconds // 86400} d"


@dataclass(frozen=True)
class QueuePage:
    rows: list[QueueRow]
    next_cursor: str | None
    counts: list[tuple[str, int]]
    total: int


def _explain(code: str) -> str:
    try:
        return explain(Reason(code))
    except ValueError:
        return ""


def _head_hash() -> Subquery:
    return Subquery(Receipt.objects.filter(verification=OuterRef("pk")).order_by("-seq").values("content_hash")[:1])


def _heads(page: Sequence[Verification]) -> dict[uuid.UUID, tuple[Mapping[str, Any], str]]:
    """The signed payloads of the heads of ``page`` and their authority: one query whatever the page holds."""
    if not page:
        return {}
    heads = Verification.objects.filter(pk__in=[v.pk for v in page]).annotate(head=_head_hash()).values("head")
    rows = Receipt.objects.filter(content_hash__in=heads).values_list("verification_id", "envelope", "authority")
    out: dict[uuid.UUID, tuple[Mapping[str, Any], str]] = {}
    for verification_id, envelope, authority in rows:
        payload = loads_strict(envelope).get("payload")
        out[verification_id] = (payload if isinstance(payload, Mapping) else {}), authority or ""
    return out


def _as_read(payload: Mapping[str, Any] | None, now: datetime) -> Outcome | None:
    if not payload or "criteria" not in payload:
        return None
    try:
        return read_outcome(payload, now=now)
    except Exception:  # a head that does not read back is shown by its columns; the review page says why
        return None


def queue_page(
    *, now: datetime, filters: Mapping[str, str], cursor: str | None, limit: int
) -> QueuePage:
    """One page of the queue (keyset pagination on rank, submitted_at, id) with the counts per reason.

    Four queries whatever the queue's length: the page, its heads, the counts, and nothing per row.
    """
    base = queue_items(now=now)
    queryset = filter_queue(base, filters, now=now).select_related("task", "review_lease", "review_lease__holder")
    if cursor:
        at = Cursor.decode(cursor)
        queryset = queryset.filter(RowAfter(queue_rank(), F("submitted_at"), F("id"), after=at))
    page = list(queryset[: limit + 1])
    more = len(page) > limit
    page = page[:limit]
    heads = _heads(page)
    reads = read_columns(page, now=now)
    rows = []
    for v in page:
        payload, head_authority = heads.get(v.pk, ({}, ""))
        outcome = _as_read(payload, now)
        semantic = outcome is not None and any(c.semantic for c in outcome.criteria)
        # issue 14: the verdict as read (read_state, as the history reads it) and the head's authority, as History
        # shows them: one derivation, the same words on both pages.
        read = reads[v.pk]
        lease = getattr(v, "review_lease", None)
        held = lease is not None and lease.released_at is None and lease.expires_at > now
        rank = int(v.queue_rank)  # type: ignore[attr-defined]
        reason = str(v.queue_reason)  # type: ignore[attr-defined]
        rows.append(
            QueueRow(
                verification=v,
                rank=rank,
                reason=reason,
                reason_text=_explain(reason),
                verdict=read.verdict or "",
                authority=shown_authority(human_decided=v.human_decided, head_authority=head_authority),
                semantic=semantic,
                age=max(now - v.submitted_at, timedelta(0)),
                holder=lease.holder if held and lease is not None else None,
                lease_expires_at=lease.expires_at if held and lease is not None else None,
            )
        )
    next_cursor = None
    if more and page:
        last = page[-1]
        next_cursor = Cursor(int(last.queue_rank), last.submitted_at, last.pk).encode()  # type: ignore[attr-defined]
    counts = queue_counts(now=now)
    return QueuePage(rows=rows, next_cursor=next_cursor, counts=counts, total=sum(n for _, n in counts))


def active_lease(verification: Verification, *, now: datetime) -> ReviewLease | None:
    lease = ReviewLease.objects.select_related("holder").filter(verification=verification).first()
    if lease is None or lease.released_at is not None or lease.expires_at <= now:
        return None
    return lease


def awaiting_evidence_items(*, limit: int = 200) -> list[dict[str, Any]]:
    """Verifications a reviewer sent back for more evidence, newest first, with what happened since (issue 5 §3)."""
    requests = list(
        ReviewDecision.objects.filter(action=ReviewAction.MORE_EVIDENCE)
        .select_related("verification", "verification__task", "user")
        .order_by("-id")[:limit]
    )
    followers = {
        v.supersedes_id: v
        for v in Verification.objects.filter(supersedes_id__in=[r.verification_id for r in requests]).order_by(
            "created_at", "id"
        )
    }
    return [{"request": r, "rerun": followers.get(r.verification_id)} for r in requests]


# --- one item's review page ---------------------------------------------------------------------------------------


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


def _judgments(
    verification: Verification, outcome: Outcome | None, artifacts: Mapping[str, str]
) -> list[JudgmentView]:
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
