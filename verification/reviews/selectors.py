"""Reads of the reviewer queue (issue 5 §2, §3; SPEC §2, §3); one item's review page is ``item_selectors``.

The queue is ``review_queue`` (flagged verifications no human decision has superseded, resolved at
``now``) minus what a person need not look at any more: a verification superseded by a newer one of its subject (a
re-run, SPEC §7: the newer one is in the queue if it is flagged) and one a reviewer sent back for more evidence.
Ordering, filters, counts and the cursor are all done in the database over the indexed head columns, so a page costs
the same few queries whatever the queue's length.
"""

from __future__ import annotations

import functools
import math
import uuid
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
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
from django.utils import timezone

from verification import cursors
from verification.compiled import Compiled, Probe, Related
from verification.errors import ServiceError
from verification.kernel.canonical import loads_strict
from verification.kernel.determination import Outcome
from verification.kernel.evaluation import read_outcome
from verification.kernel.reasons import Reason
from verification.kernel.verdicts import Authority, Verdict
from verification.records.models import QueueBacklogMember, QueueReasonCount
from verification.reviews.models import ReviewAction, ReviewDecision, ReviewLease
from verification.runs.models import Verification
from verification.runs.read_state import read_annotations, read_q, shown_authority
from verification.trust.models import Receipt

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


def review_queue(*, now: datetime) -> QuerySet[Verification]:
    """The review queue (SPEC §3): every flagged verification that no human decision has superseded, oldest first.

    Flagged as read at ``now``: a head that was PENDING and whose deadline has passed reads as its expiry verdict,
    which is always flagged (it cannot be a clean deterministic outcome), so it is in the queue too.
    """
    expired = Q(verdict=Verdict.PENDING.value, pending_until__lte=now)
    return (
        Verification.objects.filter(verdict__isnull=False, human_decided=False)
        .filter(Q(flagged=True) | expired)
        .select_related("task", "submitted_by")
        .order_by("submitted_at", "id")
    )


def superseded_q() -> Exists:
    return Exists(Verification.objects.filter(supersedes=OuterRef("pk")))


def evidence_requested() -> Exists:
    return Exists(ReviewDecision.objects.filter(verification=OuterRef("pk"), action=ReviewAction.MORE_EVIDENCE))


def lease_free(now: datetime) -> Q:
    """No lease is held on the verification at ``now`` (never claimed, released, or run out)."""
    return (
        Q(review_lease__isnull=True) | Q(review_lease__released_at__isnull=False) | Q(review_lease__expires_at__lte=now)
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
    """Verifications with a member span starting or ending inside ``hour``: the backlog (``backlog_by_age``) reads
    their membership during it from the queue itself, never from the counts (where no span of theirs covers the whole
    hour)."""
    edges = QueueBacklogMember.objects.filter(member_edge_q(hour)).values("verification_id")
    return Q(pk__in=edges)


def member_edge_q(hour: int) -> Q:
    """Member spans (``QueueBacklogMember``) that start or end inside ``hour``."""
    return Q(due_hour=hour) | Q(until_hour=hour)


def member_at_q(now: datetime) -> Q:
    """Member spans whose exact instants hold ``now``: ``due_at <= now < until_at`` (NULL: from the beginning, for
    ever), the comparisons ``read_state.read_q`` makes with the same instants (``pending_until``, a phase's
    ``starts_at`` and ``ends_at``)."""
    return (Q(due_at__isnull=True) | Q(due_at__lte=now)) & (Q(until_at__isnull=True) | Q(until_at__gt=now))


def _reason_counts_query(*, now: datetime, hour: int) -> QuerySet[Any]:
    """``count_queue_reasons``' two sources as one ``UNION ALL`` of (reason, count) rows: the rollup's spans that cover
    the whole of ``hour``, then the member spans with an edge inside ``hour`` that hold ``now``, per reason as read."""
    spans = (
        QueueReasonCount.objects.filter(spans_hour_q(hour))
        .values("reason")
        .annotate(total=Sum("n"))
        .values_list("reason", "total")
    )
    edges = (
        QueueBacklogMember.objects.filter(member_edge_q(hour) & member_at_q(now))
        .order_by()
        .values("reason")
        .annotate(n=Count("pk"))
        .values_list("reason", "n")
    )
    return spans.union(edges, all=True)


#: ``_reason_counts_query`` compiled once (``verification.compiled``): building it through the ORM on every queue
#: page and review page cost more than running it.
_REASON_COUNTS: Final = Compiled(
    "queue-reason-counts",
    QueueReasonCount,
    _reason_counts_query,
    {
        "now": Probe.instant(QueueBacklogMember._meta.get_field("due_at")),
        "hour": Probe(1_000_061, 1_000_062),
    },
)


def count_queue_reasons(*, now: datetime) -> list[tuple[str, int]]:
    """How many queue items there are per reason as read at ``now`` (``queue_items``' ``queue_reason``), most first.

    From the rollup the database keeps (``rollups``: each span of a verification's time line in which it reads as a
    member, with its reason as read, its exact start and end and the hours they fall in), never from the queue: the
    spans that cover the whole current hour are summed from their counts (``QueueReasonCount``, whose size follows
    the reasons and the hours, not the items); the spans with an edge inside the current hour (a PENDING deadline
    falling in it) are counted from the members themselves (``QueueBacklogMember``: those whose [``due_at``,
    ``until_at``) holds ``now``), a few rows read through their hour indexes. A verification's spans do not overlap,
    so each member row, and each queue item, is counted at most once. One statement whatever the queue's length
    (``_reason_counts_query``).
    """
    totals: Counter[str] = Counter()
    for code, n in _REASON_COUNTS.rows(now=now, hour=_hour(now)):
        totals[str(code)] += int(n or 0)
    return sorted(((code, n) for code, n in totals.items() if n), key=lambda pair: (-pair[1], pair[0]))


def queue_counts(*, now: datetime, cached: bool = True) -> list[tuple[str, int]]:
    """How many queue items there are per reason (as read), most first (``count_queue_reasons``: from the rollup,
    one query whatever the queue's length).

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
class QueueItem:
    """One queue item as read at ``now``: the verification (with its task and lease loaded), its queue rank and reason
    as read, the verdict as read (``read_state``), the authority that decided it (``shown_authority``), the lease held
    on it now (None when nobody holds it) and its head's signed payload (empty without a head), whose automated
    outcome as read (``outcome``: None without a head, or for a head that does not read back) is read when asked."""

    verification: Verification
    rank: int
    reason: str
    verdict: str
    authority: str
    lease: ReviewLease | None
    payload: Mapping[str, Any]
    now: datetime

    @functools.cached_property
    def outcome(self) -> Outcome | None:
        return outcome_as_read(self.payload, self.now)

    @property
    def semantic(self) -> bool:
        """Whether a criterion of the head's outcome as read is semantic (model output). Reading an outcome never
        makes a criterion semantic, so a payload that names none is not read (issue 15: reading each row's outcome
        was a tenth of the queue page's time, for this one badge)."""
        criteria = self.payload.get("criteria", ())
        named = isinstance(criteria, Sequence) and any(isinstance(c, Mapping) and c.get("semantic") for c in criteria)
        if not named:
            return False
        outcome = self.outcome
        return outcome is not None and any(c.semantic for c in outcome.criteria)


@dataclass(frozen=True)
class QueueSlice:
    """One page of the queue (``queue_slice``): its items, the cursor of the next page, the counts per reason."""

    items: list[QueueItem]
    next_cursor: str | None
    counts: list[tuple[str, int]]


def _head_column(column: str) -> Subquery:
    """A column of the verification's head receipt (its chain's last entry), read with the queue page's row."""
    return Subquery(Receipt.objects.filter(verification=OuterRef("pk")).order_by("-seq").values(column)[:1])


def _head_of(v: Verification) -> tuple[Mapping[str, Any], str]:
    """The signed payload of ``v``'s head and its authority, from the envelope the page's row read (``head_envelope``,
    ``head_authority``; nothing when it has no receipt)."""
    envelope = getattr(v, "head_envelope", None)
    if not envelope:
        return {}, ""
    payload = loads_strict(envelope).get("payload")
    return (payload if isinstance(payload, Mapping) else {}), getattr(v, "head_authority", None) or ""


def outcome_as_read(payload: Mapping[str, Any] | None, now: datetime) -> Outcome | None:
    """A signed run payload's outcome as read at ``now`` (SPEC §2); None when there is none or it does not read back
    (the page shows such a head by its columns, and the review page says why)."""
    if not payload or "criteria" not in payload:
        return None
    try:
        return read_outcome(payload, now=now)
    except Exception:
        return None


def _held(lease: ReviewLease | None, now: datetime) -> ReviewLease | None:
    if lease is None or lease.released_at is not None or lease.expires_at <= now:
        return None
    return lease


#: A queue page's row: the verification with its task, submitter, lease and the lease's holder (``select_related``'s),
#: then its reason and rank as read (``queue_items``' annotations) and its head receipt's envelope and authority.
_PAGE_ROW: Final = Related(Verification, ("task", "submitted_by", "review_lease", "review_lease__holder"))
_PAGE_EXTRA: Final = ("queue_reason", "queue_rank", "head_envelope", "head_authority", "read_verdict")


def _page_queryset(*, now: datetime, filters: Mapping[str, str], at: Cursor | None) -> QuerySet[Verification]:
    """The queue from ``at`` on (``queue_items``, ``filter_queue``), with what a page shows of each item."""
    # Each item's head receipt comes with its row (two lookups by the receipts' (verification, seq) index per item):
    # a statement of its own for the page's heads cost more to plan and send than these cost to run (issue 15).
    queryset = (
        filter_queue(queue_items(now=now), filters, now=now)
        .select_related("task", "review_lease", "review_lease__holder")
        .annotate(head_envelope=_head_column("envelope"), head_authority=_head_column("authority"))
        # The verdict as read (``read_state``'s one definition), with the row: a page past PENDING deadlines read
        # their phases in a query of their own (``read_columns``), which the first page, with none, did not.
        .annotate(read_verdict=read_annotations(now)["read_verdict"])
    )
    if at is not None:
        queryset = queryset.filter(RowAfter(queue_rank(), F("submitted_at"), F("id"), after=at))
    return queryset


@functools.cache
def _compiled_page(limit: int, after: bool) -> Compiled:
    """The unfiltered page's query, compiled on first use per page length and first page or not, and kept
    (``verification.compiled``): building the queue's conditions and annotations through the ORM cost more than
    running the statement (issue 15)."""

    def build(*, now: datetime, **cursor: Any) -> QuerySet[Any]:
        at = Cursor(**cursor) if after else None
        page = _page_queryset(now=now, filters={}, at=at)
        return page.values_list(*_PAGE_ROW.columns(), *_PAGE_EXTRA)[: limit + 1]

    probes = {"now": Probe.instant(ReviewLease._meta.get_field("expires_at"))}
    if after:
        probes |= {
            "rank": Probe(1_000_051, 1_000_052),
            "submitted_at": Probe.instant(Verification._meta.get_field("submitted_at")),
            "pk": Probe.key_of(Verification),
        }
    # Prepared (once per connection), its constants written as literals: the plan is the queue index's order whatever
    # ``now`` and the cursor are, and the server took ~6.5 ms to plan the statement (its joins' orders) against ~1 ms
    # to run it at 100,000 items. With its constants as literals, the generic plan reads the queue index (the rank is
    # an expression of them) as a plan for the values does, so after five executions PostgreSQL keeps it and stops
    # planning the statement (issue 15).
    return Compiled(f"queue-page-{limit}-{after}", Verification, build, probes, prepared=True, literals=True)


def _page_of(*, now: datetime, filters: Mapping[str, str], cursor: str | None, limit: int) -> list[Verification]:
    """Up to ``limit + 1`` queue items from ``cursor`` on, ``filters`` applied: the unfiltered page by its compiled
    query, loaded as ``select_related`` loads them; a filtered one through the ORM."""
    at = Cursor.decode(cursor) if cursor else None
    if set(filters) - QUEUE_FILTERS or any((value or "").strip() for value in filters.values()):
        return list(_page_queryset(now=now, filters=filters, at=at)[: limit + 1])
    arguments: dict[str, Any] = {"now": now}
    if at is not None:
        arguments |= {"rank": at.rank, "submitted_at": at.submitted_at, "pk": at.pk}
    page = []
    for row in _compiled_page(limit, at is not None).rows(**arguments):
        verification: Verification = _PAGE_ROW.root(row)
        for name, value in zip(_PAGE_EXTRA, row[_PAGE_ROW.width :], strict=True):
            setattr(verification, name, value)  # as the ORM sets its annotations
        page.append(verification)
    return page


def queue_slice(*, now: datetime, filters: Mapping[str, str], cursor: str | None, limit: int) -> QueueSlice:
    """One page of the queue (keyset pagination on rank, submitted_at, id) with the counts per reason.

    Two queries whatever the queue's length: the page (each item's head receipt and verdict as read in its row) and
    the counts; nothing per row.
    """
    page = _page_of(now=now, filters=filters, cursor=cursor, limit=limit)
    more = len(page) > limit
    page = page[:limit]
    items = []
    for v in page:
        payload, head_authority = _head_of(v)
        # issue 14: the verdict as read (read_state, as the history reads it) and the head's authority, as History
        # shows them: one derivation, the same words on both pages.
        items.append(
            QueueItem(
                verification=v,
                rank=int(v.queue_rank),  # type: ignore[attr-defined]
                reason=str(v.queue_reason),  # type: ignore[attr-defined]
                verdict=v.read_verdict or "",  # type: ignore[attr-defined]
                authority=shown_authority(human_decided=v.human_decided, head_authority=head_authority),
                lease=_held(getattr(v, "review_lease", None), now),
                payload=payload,
                now=now,
            )
        )
    next_cursor = None
    if more and page:
        last = page[-1]
        next_cursor = Cursor(int(last.queue_rank), last.submitted_at, last.pk).encode()  # type: ignore[attr-defined]
    return QueueSlice(items=items, next_cursor=next_cursor, counts=queue_counts(now=now))


def active_lease(verification: Verification, *, now: datetime) -> ReviewLease | None:
    return _held(ReviewLease.objects.select_related("holder").filter(verification=verification).first(), now)


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


def leases_held_by_user(*, now: datetime | None = None) -> dict[Any, int]:
    """How many review leases each user holds at ``now`` (unreleased, unexpired), by user id."""
    when = now or timezone.now()
    return dict(
        ReviewLease.objects.filter(released_at__isnull=True, expires_at__gt=when)
        .values_list("holder_id")
        .annotate(n=Count("verification"))
    )


def leases_held(user: Any, *, now: datetime | None = None) -> list[ReviewLease]:
    when = now or timezone.now()
    return list(
        ReviewLease.objects.filter(holder=user, released_at__isnull=True, expires_at__gt=when)
        .select_related("verification", "verification__task")
        .order_by("expires_at")
    )
