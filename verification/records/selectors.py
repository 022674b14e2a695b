"""Reads of verdict history, subject timelines, findings and the managers' dashboards (issue 6 §1–§3).

Everything here is a read (STYLE §9): the history filters the indexed head columns of ``Verification`` (the signed
receipts stay the truth, the columns are their query caches); a page costs the same few queries whatever the table
holds (the page, its head receipts, its decisions). Dashboards are aggregate queries computed in the database, never
rows loaded into Python: the number of rows that reach Python is bounded by the period's days or the reviewers, not
by the verifications.

Vocabulary (shared by the filters, the page, the CSV/JSON Lines export and the tests):

- *state* — one label per verification, the first that applies: ``failed``/``queued``/``running`` (no outcome yet,
  SPEC §3 lifecycle), ``superseded`` (a newer verification of the subject exists, SPEC §7), ``decided`` (a person's
  decision is the head), ``awaiting_evidence`` (a reviewer asked for more evidence, issue 5 §3), ``in_review`` (in the
  reviewer queue: flagged or an expired PENDING, SPEC §3), ``running`` (an unexpired PENDING decides the fold),
  ``succeeded`` (a clean automated outcome).
- *authority* — of the head receipt, i.e. who issued the verdict that stands: ``deterministic`` (the portal's run),
  ``semantic``/``imported`` (a delivered result), ``human`` (a reviewer's decision).
- *verdict*, *determination*, *flagged*, *reason* — of the head as issued, except that a PENDING past its deadline
  reads as expired (SPEC §2: resolved when read): ``reason=pending-expired`` and ``flagged=true`` find it.
"""

from __future__ import annotations

import base64
import binascii
import math
import uuid
from collections import defaultdict
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, time, timedelta
from typing import Any, Final

from django.contrib.auth import get_user_model
from django.db import connection
from django.db.models import (
    Case,
    CharField,
    Count,
    Exists,
    F,
    OuterRef,
    Q,
    QuerySet,
    Subquery,
    Sum,
    Value,
    When,
)
from django.db.models.functions import Coalesce
from django.utils import timezone

from verification.actors.services.actors import PORTAL_ACTOR_NAME
from verification.errors import ServiceError
from verification.evidence.models import Evidence
from verification.kernel import limits
from verification.kernel.findings import FindingKind
from verification.kernel.reasons import Reason, explain
from verification.kernel.verdicts import Authority, Verdict
from verification.records.models import (
    DecisionDayCount,
    DecisionDelay,
    FindingDayCount,
    OpenFindingCount,
    QueueBacklogCount,
    VerificationDayCount,
)
from verification.reviews.models import Finding, FindingAction, FindingEvent, ReviewAction, ReviewDecision
from verification.reviews.selectors import edge_in_hour_q, evidence_requested, queue_items, spans_hour_q, superseded_q
from verification.runs.models import Task, TaskCycle, Verification
from verification.runs.read_state import decided_by, read_annotations, read_columns, read_q, shown_authority
from verification.trust.models import Receipt
from verification.trust.selectors import receipt_payload

# --- vocabulary ------------------------------------------------------------------------------------------------------

HISTORY_FILTERS: Final = frozenset(
    {"determination", "verdict", "authority", "flagged", "reason", "reviewer", "state", "since", "until", "subject"}
)
NO_DETERMINATION: Final = "none"
DETERMINATIONS: Final = ("met", "not_met", "partial", "cannot_determine", NO_DETERMINATION)
VERDICTS: Final = tuple(v.value for v in Verdict)
AUTHORITIES: Final = tuple(a.value for a in Authority)
STATE_FAILED: Final = "failed"
STATE_QUEUED: Final = "queued"
STATE_RUNNING: Final = "running"
STATE_SUPERSEDED: Final = "superseded"
STATE_DECIDED: Final = "decided"
STATE_AWAITING: Final = "awaiting_evidence"
STATE_IN_REVIEW: Final = "in_review"
STATE_SUCCEEDED: Final = "succeeded"
STATES: Final = (
    STATE_QUEUED,
    STATE_RUNNING,
    STATE_SUCCEEDED,
    STATE_FAILED,
    STATE_IN_REVIEW,
    STATE_AWAITING,
    STATE_DECIDED,
    STATE_SUPERSEDED,
)
STATE_LABELS: Final[dict[str, str]] = {
    STATE_QUEUED: "queued",
    STATE_RUNNING: "running",
    STATE_SUCCEEDED: "succeeded",
    STATE_FAILED: "failed",
    STATE_IN_REVIEW: "in the review queue",
    STATE_AWAITING: "awaiting evidence",
    STATE_DECIDED: "decided by a person",
    STATE_SUPERSEDED: "superseded by a re-run",
}
MAX_PAGE: Final = 200
MAX_TEXT_CHARS: Final = 200


def _bad(detail: str) -> ServiceError:
    return ServiceError(Reason.INVALID_REQUEST, detail)


def _explain(code: str | None) -> str:
    try:
        return explain(Reason(code)) if code else ""
    except ValueError:
        return ""


# --- annotations over the head columns ------------------------------------------------------------------------------


def _head_column(column: str) -> Subquery:
    """One column of the head receipt (the highest seq: the unique (verification, seq) index answers it)."""
    return Subquery(Receipt.objects.filter(verification=OuterRef("pk")).order_by("-seq").values(column)[:1])


def _decider() -> Subquery:
    """The username of the reviewer whose PASS or FAIL is the latest decision on the verification."""
    return Subquery(
        ReviewDecision.objects.filter(verification=OuterRef("pk"), receipt__isnull=False)
        .order_by("-id")
        .values("user__username")[:1]
    )


def _decision_rationale() -> Subquery:
    """The rationale of that same latest PASS or FAIL (issue 14: the exports carry it)."""
    return Subquery(
        ReviewDecision.objects.filter(verification=OuterRef("pk"), receipt__isnull=False)
        .order_by("-id")
        .values("rationale")[:1]
    )


def state_expression(now: datetime) -> Case:
    """The *state* of a verification at ``now`` as one SQL expression (see the module docstring for the order).

    ``in_review`` is exactly the reviewer queue (``review_selectors.queue_member_q``): an outcome, not superseded, not
    decided, no evidence requested, and read as flagged at ``now``; ``running`` with an outcome: it reads PENDING.
    """
    no_outcome = Q(verdict__isnull=True)
    return Case(
        When(no_outcome & Q(failed_at__isnull=False), then=Value(STATE_FAILED)),
        When(no_outcome & Q(attempts=0), then=Value(STATE_QUEUED)),
        When(no_outcome, then=Value(STATE_RUNNING)),
        When(superseded_q(), then=Value(STATE_SUPERSEDED)),
        When(human_decided=True, then=Value(STATE_DECIDED)),
        When(evidence_requested(), then=Value(STATE_AWAITING)),
        When(read_q(now, flagged=True), then=Value(STATE_IN_REVIEW)),
        When(read_q(now, verdict=Verdict.PENDING.value), then=Value(STATE_RUNNING)),
        default=Value(STATE_SUCCEEDED),
        output_field=CharField(),
    )


def state_q(state: str, now: datetime) -> Q:
    """The rows whose ``state_expression`` is ``state``, as plain predicates (the planner estimates these from column
    statistics and can walk the keyset index; a filter on the CASE expression it cannot estimate)."""
    outcome = Q(verdict__isnull=False)
    live = outcome & ~Q(superseded_q())
    undecided = live & Q(human_decided=False)
    open_ = undecided & ~Q(evidence_requested())
    flagged = read_q(now, flagged=True)  # as read (read_state), like the queue
    running = read_q(now, verdict=Verdict.PENDING.value)
    states: dict[str, Q] = {
        STATE_FAILED: Q(verdict__isnull=True, failed_at__isnull=False),
        STATE_QUEUED: Q(verdict__isnull=True, failed_at__isnull=True, attempts=0),
        STATE_RUNNING: Q(verdict__isnull=True, failed_at__isnull=True, attempts__gt=0) | (open_ & running),
        STATE_SUPERSEDED: outcome & Q(superseded_q()),
        STATE_DECIDED: live & Q(human_decided=True),
        STATE_AWAITING: undecided & Q(evidence_requested()),
        STATE_IN_REVIEW: open_ & flagged,
        STATE_SUCCEEDED: open_ & ~flagged & ~running,
    }
    return states[state]


def _head_authority_is(authority: str) -> Exists:
    """The head receipt (no later one in its chain) has ``authority``: a semi-join the planner can estimate."""
    later = Receipt.objects.filter(verification=OuterRef("verification"), seq__gt=OuterRef("seq"))
    return Exists(Receipt.objects.filter(verification=OuterRef("pk"), authority=authority).filter(~Exists(later)))


# --- filters ---------------------------------------------------------------------------------------------------------


def _day(value: str, name: str) -> date:
    try:  # SPEC §3: dates 1970..9999 (kernel.limits)
        return limits.day(value)
    except limits.OutOfRange as exc:
        raise _bad(f"{name} {exc}") from None


def _start_of(day: date) -> datetime:
    return timezone.make_aware(datetime.combine(day, time.min), timezone.get_current_timezone())


def _subject_q(subject: str) -> Q:
    """A task id or verification id, or text in the task's title or external reference."""
    try:
        pk = uuid.UUID(subject)
    except ValueError:
        return Q(task__title__icontains=subject) | Q(task__external_ref__icontains=subject)
    return Q(task_id=pk) | Q(pk=pk)


def clean_filters(raw: Mapping[str, Any]) -> dict[str, str]:
    """The known filters of ``raw`` (a query dict or a mapping), stripped; empty values dropped."""
    out: dict[str, str] = {}
    for name in sorted(HISTORY_FILTERS):
        value = raw.get(name)
        if isinstance(value, str) and value.strip():
            out[name] = value.strip()[:MAX_TEXT_CHARS]
    return out


def history_queryset(*, filters: Mapping[str, str], now: datetime) -> QuerySet[Verification]:
    """Every verification matching ``filters``, newest first (``-created_at, -id``: the keyset index).

    Filters (all optional; empty values are ignored): ``determination`` (or ``none``), ``verdict``, ``authority``,
    ``flagged`` (true/false), ``reason`` (a registry code), ``reviewer`` (a username with a decision or request on
    it), ``state``, ``since``/``until`` (dates, inclusive, on ``created_at``), ``subject`` (see ``_subject_q``).
    An unknown filter or a bad value is ``invalid-request``.
    """
    unknown = sorted(set(filters) - HISTORY_FILTERS)
    if unknown:
        raise _bad(f"unknown filters {unknown}")
    queryset = Verification.objects.all()
    value = (filters.get("determination") or "").strip()
    if value:
        if value not in DETERMINATIONS:
            raise _bad(f"determination is one of {', '.join(DETERMINATIONS)}")
        # SPEC §3: determination, verdict, flagged and reason as read at ``now`` (read_state: the API's derivation).
        queryset = queryset.filter(read_q(now, determination=None if value == NO_DETERMINATION else value))
    value = (filters.get("verdict") or "").strip()
    if value:
        if value not in VERDICTS:
            raise _bad(f"verdict is one of {', '.join(VERDICTS)}")
        queryset = queryset.filter(read_q(now, verdict=value))
    value = (filters.get("authority") or "").strip()
    if value:
        if value not in AUTHORITIES:
            raise _bad(f"authority is one of {', '.join(AUTHORITIES)}")
        if value == Authority.HUMAN.value:
            queryset = queryset.filter(human_decided=True)
        else:
            queryset = queryset.filter(Q(human_decided=False) & Q(_head_authority_is(value)))
    value = (filters.get("flagged") or "").strip()
    if value:
        if value not in ("true", "false"):
            raise _bad("flagged is true or false")
        queryset = queryset.filter(read_q(now, flagged=value == "true"))
    value = (filters.get("reason") or "").strip()
    if value:
        try:
            code = Reason(value)
        except ValueError:
            raise _bad(f"reason {value!r} is not a registered code") from None
        queryset = queryset.filter(read_q(now, reason=code.value))
    value = (filters.get("reviewer") or "").strip()
    if value:
        decided = ReviewDecision.objects.filter(verification=OuterRef("pk"), user__username=value[:MAX_TEXT_CHARS])
        queryset = queryset.filter(Exists(decided))
    value = (filters.get("state") or "").strip()
    if value:
        if value not in STATES:
            raise _bad(f"state is one of {', '.join(STATES)}")
        queryset = queryset.filter(state_q(value, now))
    since = (filters.get("since") or "").strip()
    until = (filters.get("until") or "").strip()
    if since:
        queryset = queryset.filter(created_at__gte=_start_of(_day(since, "since")))
    after = limits.day_after(_day(until, "until")) if until else None
    if after is not None:
        queryset = queryset.filter(created_at__lt=_start_of(after))
    value = (filters.get("subject") or "").strip()[:MAX_TEXT_CHARS]
    if value:
        queryset = queryset.filter(_subject_q(value))
    return queryset.order_by("-created_at", "-id")


# --- the history page ------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Cursor:
    """The keyset position after the last row shown: (created_at, id), newest first."""

    created_at: datetime
    pk: uuid.UUID

    def encode(self) -> str:
        text = f"{self.created_at.isoformat()}|{self.pk}"
        return base64.urlsafe_b64encode(text.encode("utf-8")).decode("ascii").rstrip("=")

    @classmethod
    def decode(cls, raw: str) -> Cursor:
        try:
            text = base64.urlsafe_b64decode(raw + "=" * (-len(raw) % 4)).decode("utf-8")
            when, pk = text.split("|")
            parsed = datetime.fromisoformat(when)
            if parsed.tzinfo is None:
                raise ValueError("naive")
            return cls(parsed, uuid.UUID(pk))
        except (ValueError, UnicodeDecodeError, binascii.Error):
            raise _bad("cursor is not one this server issued") from None


@dataclass(frozen=True)
class HistoryRow:
    """One verification as the history shows it: what stands, who decided it, with what authority, and why."""

    verification: Verification
    state: str
    verdict: str
    pending_expired: bool
    determination: str | None
    flagged: bool
    reason: str
    reason_text: str
    authority: str
    decided_by: str
    head_receipt_id: str
    head_kind: str

    @property
    def state_label(self) -> str:
        return STATE_LABELS.get(self.state, self.state)


@dataclass(frozen=True)
class HistoryPage:
    rows: list[HistoryRow]
    next_cursor: str | None


def history_page(
    *, filters: Mapping[str, str], cursor: str | None, limit: int, now: datetime
) -> HistoryPage:
    """One page of the history (keyset pagination on created_at, id; newest first).

    Four queries whatever the table holds: the page's ids, its rows (with their state and head id), their head
    receipts, and the reviewers' decisions on them.
    """
    if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= MAX_PAGE:
        raise _bad(f"limit is 1-{MAX_PAGE}")
    queryset = history_queryset(filters=filters, now=now)
    if cursor:
        at = Cursor.decode(cursor)
        queryset = queryset.filter(Q(created_at__lt=at.created_at) | Q(created_at=at.created_at, id__lt=at.pk))
    # First the page's ids alone (the keyset index walked in order, the filters checked row by row, no join), then
    # those rows with what the page shows: a join or a per-row expression never changes how the page is found.
    ids = list(queryset.values_list("pk", flat=True)[: limit + 1])
    more = len(ids) > limit
    ids = ids[:limit]
    found = {
        v.pk: v
        for v in Verification.objects.filter(pk__in=ids)
        .select_related("task")
        .annotate(row_state=state_expression(now), head_hash=_head_column("content_hash"))
    } if ids else {}
    page = [found[pk] for pk in ids if pk in found]
    hashes = [h for v in page if (h := getattr(v, "head_hash", None))]
    heads: dict[str, tuple[str, str, str]] = {}
    if hashes:
        heads = {
            content_hash: (kind, authority or "", actor or "")
            for content_hash, kind, authority, actor in Receipt.objects.filter(content_hash__in=hashes).values_list(
                "content_hash", "kind", "authority", "actor"
            )
        }
    deciders: dict[uuid.UUID, str] = {}
    if page:
        for verification_id, username in (
            ReviewDecision.objects.filter(verification_id__in=[v.pk for v in page], receipt__isnull=False)
            .order_by("id")
            .values_list("verification_id", "user__username")
        ):
            deciders[verification_id] = username
    rows = []
    read = read_columns(page, now=now)
    for v in page:
        head_hash = str(getattr(v, "head_hash", None) or "")
        kind, authority, actor = heads.get(head_hash, ("", "", ""))
        state = read[v.pk]
        expired = state.expired
        reason = state.reason or ""
        rows.append(
            HistoryRow(
                verification=v,
                state=str(getattr(v, "row_state", "")),
                verdict=state.verdict or "",
                pending_expired=expired,
                determination=state.determination,
                flagged=state.flagged,
                reason=reason,
                reason_text=_explain(reason),
                authority=shown_authority(human_decided=v.human_decided, head_authority=authority),
                decided_by=decided_by(person=deciders.get(v.pk), head_actor=actor, portal_actor=PORTAL_ACTOR_NAME),
                head_receipt_id=head_hash,
                head_kind=kind,
            )
        )
    next_cursor = Cursor(page[-1].created_at, page[-1].pk).encode() if more and page else None
    return HistoryPage(rows=rows, next_cursor=next_cursor)


def reviewer_choices() -> list[str]:
    """Usernames of the people who may decide (the reviewer filter's choices): one query on the users' table."""
    user_model = get_user_model()
    return list(
        user_model.objects.filter(
            Q(is_superuser=True)
            | Q(
                groups__permissions__codename="decide_verification",
                groups__permissions__content_type__app_label="reviewportal",
            )
        )
        .order_by(user_model.USERNAME_FIELD)
        .values_list(user_model.USERNAME_FIELD, flat=True)
        .distinct()
    )


def export_rows(*, filters: Mapping[str, str], now: datetime) -> QuerySet[Any]:
    """The filtered history as value tuples in ``EXPORT_COLUMNS`` order, newest first (for a streamed export).

    The state, the head's authority and id, and the decider are computed per row by the database.
    """
    queryset = history_queryset(filters=filters, now=now).annotate(
        row_state=state_expression(now),
        head_hash=_head_column("content_hash"),
        head_authority=_head_column("authority"),
        decider=Coalesce(_decider(), _head_column("actor")),
        decision_rationale=Case(
            When(human_decided=True, then=_decision_rationale()), default=Value(""), output_field=CharField()
        ),
        **read_annotations(now),
        task_title=Coalesce(F("task__title"), Value("")),
    )
    return queryset.values_list(*EXPORT_SOURCE)


#: Columns of the CSV and JSON Lines exports, and the queryset values each comes from.
EXPORT_COLUMNS: Final = (
    "verification_id",
    "task_id",
    "subject",
    "cycle",
    "created_at",
    "state",
    "verdict",
    "pending_expired",
    "determination",
    "flagged",
    "flag_reason",
    "reason",
    "authority",
    "human_decided",
    "decided_by",
    "rationale",
    "head_receipt_id",
    "supersedes",
)
EXPORT_SOURCE: Final = (
    "id",
    "task_id",
    "task_title",
    "cycle",
    "created_at",
    "row_state",
    "read_verdict",
    "read_expired",
    "read_determination",
    "read_flagged",
    "read_flag_reason",
    "read_reason",
    "head_authority",
    "human_decided",
    "decider",
    "decision_rationale",
    "head_hash",
    "supersedes_id",
)


# --- a subject's timeline -------------------------------------------------------------------------------------------


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
    receipts = list(
        Receipt.objects.filter(verification_id__in=ids).order_by("verification_id", "seq")
    ) if ids else []
    actions = list(
        ReviewDecision.objects.filter(verification_id__in=ids).select_related("user").order_by("id")
    ) if ids else []
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
            reason_text=_explain(reason),
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


# --- findings (SPEC §10) ---------------------------------------------------------------------------------------------

FINDING_KINDS: Final = tuple(k.value for k in FindingKind)
FINDING_OPEN: Final = "open"
FINDING_ACKNOWLEDGED: Final = "acknowledged"
FINDING_CLOSED: Final = "closed"
FINDING_STATES: Final = (FINDING_OPEN, FINDING_ACKNOWLEDGED, FINDING_CLOSED)
FINDING_FILTERS: Final = frozenset({"kind", "state"})
_STATE_OF_ACTION: Final = {
    FindingAction.RAISED.value: FINDING_OPEN,
    FindingAction.ACKNOWLEDGED.value: FINDING_ACKNOWLEDGED,
    FindingAction.CLOSED.value: FINDING_CLOSED,
}


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
    actions = set(FindingEvent.objects.filter(finding=finding).values_list("action", flat=True))
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
        raise _bad(f"unknown filters {unknown}")
    if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= MAX_PAGE:
        raise _bad(f"limit is 1-{MAX_PAGE}")
    queryset = Finding.objects.annotate(state=finding_state_expression())
    kind = (filters.get("kind") or "").strip()
    if kind:
        if kind not in FINDING_KINDS:
            raise _bad(f"kind is one of {', '.join(FINDING_KINDS)}")
        queryset = queryset.filter(kind=kind)
    state = (filters.get("state") or "").strip()
    if state:
        if state not in FINDING_STATES:
            raise _bad(f"state is one of {', '.join(FINDING_STATES)}")
        queryset = queryset.filter(state=state)
    if cursor:
        try:
            queryset = queryset.filter(id__lt=int(cursor))
        except ValueError:
            raise _bad("cursor is not one this server issued") from None
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
        rows=page, next_cursor=str(page[-1].pk) if more and page else None, counts=sorted(counts)
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
class FindingView:
    finding: Finding
    state: str
    reason_text: str
    events: list[FindingEvent]
    receipts: list[InvolvedReceipt]
    missing_receipts: list[str]
    verifications: list[Verification]
    evidence: list[Evidence]
    other_refs: list[str]

    @property
    def closed(self) -> bool:
        return self.state == FINDING_CLOSED


def _uuid(text: str) -> uuid.UUID | None:
    try:
        return uuid.UUID(text)
    except ValueError:
        return None


def finding_view(finding: Finding) -> FindingView:
    """A finding with what it is about: its receipts, verifications and evidence, and its event history."""
    events = list(FindingEvent.objects.filter(finding=finding).select_related("actor", "actor__user").order_by("id"))
    actions = {e.action for e in events}
    if FindingAction.CLOSED.value in actions:
        state = FINDING_CLOSED
    elif FindingAction.ACKNOWLEDGED.value in actions:
        state = FINDING_ACKNOWLEDGED
    else:
        state = FINDING_OPEN
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
    return FindingView(
        finding=finding,
        state=state,
        reason_text=_explain(finding.reason),
        events=events,
        receipts=receipts,
        missing_receipts=[r for r in receipt_refs if r not in found],
        verifications=verifications,
        evidence=evidence,
        other_refs=[r for r in refs if r not in known],
    )


# --- dashboards (issue 6 §3) -----------------------------------------------------------------------------------------

PERIODS: Final[dict[str, int]] = {"7d": 7, "30d": 30, "90d": 90}
DEFAULT_PERIOD: Final = "30d"
#: Queue backlog buckets: (key, label, lower bound of age, upper bound or None).
AGE_BUCKETS: Final = (
    ("lt1h", "under 1 hour", timedelta(0), timedelta(hours=1)),
    ("lt1d", "1 hour – 1 day", timedelta(hours=1), timedelta(days=1)),
    ("lt7d", "1 – 7 days", timedelta(days=1), timedelta(days=7)),
    ("ge7d", "7 days or more", timedelta(days=7), None),
)


@dataclass(frozen=True)
class Period:
    key: str
    days: int
    start: datetime  # inclusive: midnight (current time zone) of the first day
    end: datetime  # exclusive: midnight after the last day (today): the days are counted whole
    first_day: date
    last_day: date

    @property
    def day_list(self) -> list[date]:
        return [self.first_day + timedelta(days=i) for i in range((self.last_day - self.first_day).days + 1)]


def period_of(key: str | None, *, now: datetime) -> Period:
    """The last ``days`` calendar days up to ``now``, today included, each counted whole (the rollups count per day;
    at the current time nothing is recorded after ``now`` anyway); ``invalid-request`` for an unknown key."""
    chosen = key or DEFAULT_PERIOD
    if chosen not in PERIODS:
        raise _bad(f"period is one of {', '.join(PERIODS)}")
    days = PERIODS[chosen]
    last = timezone.localtime(now).date()
    first = last - timedelta(days=days - 1)
    return Period(chosen, days, _start_of(first), _start_of(last + timedelta(days=1)), first, last)


def _hour(moment: datetime) -> int:
    """Whole hours since the Unix epoch (the rollups' hour)."""
    return math.floor(moment.timestamp() / 3600)


def _hour_start(hour: int) -> datetime:
    return datetime.fromtimestamp(hour * 3600, tz=UTC)


def _age_bucket(moment: datetime, now: datetime) -> str | None:
    """The bucket of an item submitted at ``moment`` (None: submitted after ``now``)."""
    for key, _, low, high in AGE_BUCKETS:
        if moment <= now - low and (high is None or moment > now - high):
            return key
    return None


def backlog_by_age(*, now: datetime) -> list[tuple[str, str, int]]:
    """The reviewer queue now, by age since submission: ``(key, label, count)`` per bucket.

    From the rollup (``rollups``: the spans in which a verification reads as a queue member, counted per submission
    hour and the hours a span starts and ends in), whose size follows the hours, not the items: every submission hour
    that lies wholly inside one bucket is summed from the spans covering the whole current hour (one aggregate). The
    hours a bucket boundary cuts (the current hour, and those of now - 1 hour, 1 day and 7 days), and the items with a
    span edge inside the current hour (a PENDING deadline falling in it), are counted from the queue itself, exactly
    (one query over those few hours' rows).
    """
    now_hour = _hour(now)
    split = sorted({_hour(now - low) for _, _, low, _ in AGE_BUCKETS})
    sums: dict[str, Any] = {}
    for key, _, low, high in AGE_BUCKETS:
        # A whole hour h is in a bucket iff its first instant is: h is never a boundary's hour here.
        condition = Q(submitted_hour__lte=_hour(now - low))
        if high is not None:
            condition &= Q(submitted_hour__gt=_hour(now - high))
        sums[key] = Sum("n", filter=condition)
    counted = (
        QueueBacklogCount.objects.filter(spans_hour_q(now_hour), submitted_hour__lt=now_hour)
        .exclude(submitted_hour__in=split)
        .aggregate(**sums)
    )
    result = {key: int(counted[key] or 0) for key, _, _, _ in AGE_BUCKETS}
    # One SELECT per cut hour and one for the deadlines falling due this hour, each a narrow range of its own partial
    # index (migration 0008), joined by UNION (a row in two of them counts once). Separate SELECTs, not one OR, so
    # the planner never trades those ranges for a scan of every flagged row.
    queue = queue_items(now=now).order_by()
    parts = [
        queue.filter(submitted_at__gte=_hour_start(hour), submitted_at__lt=_hour_start(hour + 1)).values_list(
            "pk", "submitted_at"
        )
        for hour in split
    ]
    parts.append(queue.filter(edge_in_hour_q(now_hour)).values_list("pk", "submitted_at"))
    for _, submitted in parts[0].union(*parts[1:]):
        bucket = _age_bucket(submitted, now)
        if bucket is not None:
            result[bucket] += 1
    return [(key, label, result[key]) for key, label, _, _ in AGE_BUCKETS]


@dataclass(frozen=True)
class DayDecisions:
    day: date
    passed: int
    failed: int
    more_evidence: int

    @property
    def total(self) -> int:
        return self.passed + self.failed + self.more_evidence


def _in_period(period: Period, column: str = "created_at") -> Q:
    return Q(**{f"{column}__gte": period.start, f"{column}__lt": period.end})


def _days_of(period: Period) -> Q:
    """The rollup days of a period: its calendar days."""
    return Q(day__gte=period.first_day, day__lte=period.last_day)


def decisions_per_day(*, period: Period) -> list[DayDecisions]:
    """Reviewers' actions per day of the period (PASS, FAIL, needs more evidence); one grouped query over the daily
    rollup (``DecisionDayCount``)."""
    counts: dict[tuple[date, str], int] = {}
    rows = DecisionDayCount.objects.filter(_days_of(period)).order_by().values("day", "action").annotate(n=Sum("n"))
    for row in rows:
        counts[(row["day"], row["action"])] = row["n"]
    return [
        DayDecisions(
            day,
            counts.get((day, ReviewAction.PASS.value), 0),
            counts.get((day, ReviewAction.FAIL.value), 0),
            counts.get((day, ReviewAction.MORE_EVIDENCE.value), 0),
        )
        for day in period.day_list
    ]


@dataclass(frozen=True)
class TimeToDecision:
    count: int
    median_seconds: float | None
    p90_seconds: float | None


def time_to_decision(*, period: Period) -> TimeToDecision:
    """Median and p90 of the time from submission to a person's PASS or FAIL, over decisions made in the period.

    Over ``DecisionDelay`` (one narrow row per decision, its delay computed when it was recorded), read through its
    (decided_at, seconds) index. PostgreSQL: one ``percentile_cont(ARRAY[0.5, 0.9])`` ordered-set aggregate.
    Elsewhere (SQLite): the count, then for each percentile the two ordered values around its position
    (``ORDER BY … LIMIT 2 OFFSET k``), interpolated as ``percentile_cont`` does.
    """
    delays = DecisionDelay.objects.filter(_in_period(period, "decided_at"))
    if connection.vendor == "postgresql":
        inner, params = delays.order_by().values("seconds").query.sql_with_params()
        # One pass: both percentiles from one ordering of the delays (the ORM has no ordered-set aggregate).
        sql = (
            "SELECT COUNT(*), PERCENTILE_CONT(ARRAY[0.5, 0.9]) WITHIN GROUP (ORDER BY delays.seconds) "  # noqa: S608
            f"FROM ({inner}) AS delays"
        )
        with connection.cursor() as cursor:
            cursor.execute(sql, params)
            count, percentiles = cursor.fetchone()
        if not count:
            return TimeToDecision(0, None, None)
        return TimeToDecision(int(count), float(percentiles[0]), float(percentiles[1]))
    n = delays.count()
    if n == 0:
        return TimeToDecision(0, None, None)
    ordered = delays.order_by("seconds").values_list("seconds", flat=True)

    def percentile(fraction: float) -> float:
        position = (n - 1) * fraction
        low = math.floor(position)
        values = [float(v) for v in ordered[low : low + 2]]
        if len(values) == 1 or position == low:
            return values[0]
        return values[0] + (position - low) * (values[1] - values[0])

    return TimeToDecision(n, percentile(0.5), percentile(0.9))


@dataclass(frozen=True)
class ReviewerCount:
    username: str
    passed: int
    failed: int
    more_evidence: int

    @property
    def total(self) -> int:
        return self.passed + self.failed + self.more_evidence


def reviewer_counts(*, period: Period) -> list[ReviewerCount]:
    """Actions per reviewer in the period, most first; one grouped query over the daily rollup."""
    rows = (
        DecisionDayCount.objects.filter(_days_of(period))
        .order_by()
        .values("user__username")
        .annotate(
            passed=Sum("n", filter=Q(action=ReviewAction.PASS), default=0),
            failed=Sum("n", filter=Q(action=ReviewAction.FAIL), default=0),
            more=Sum("n", filter=Q(action=ReviewAction.MORE_EVIDENCE), default=0),
        )
    )
    out = [ReviewerCount(r["user__username"], r["passed"], r["failed"], r["more"]) for r in rows]
    return sorted((r for r in out if r.total), key=lambda r: (-r.total, r.username))


@dataclass(frozen=True)
class DayAbstains:
    day: date
    completed: int
    abstained: int

    @property
    def share(self) -> float | None:
        return self.abstained / self.completed if self.completed else None


@dataclass(frozen=True)
class AbstainShare:
    days: list[DayAbstains]
    completed: int
    abstained: int

    @property
    def share(self) -> float | None:
        return self.abstained / self.completed if self.completed else None


def abstain_share(*, period: Period) -> AbstainShare:
    """Share of completed automated outcomes that abstained (``cannot_determine``), per day the verification was
    recorded (``created_at``).

    Counted on ``automated_verdict`` (the latest run or result as issued), so a person's later decision does not
    hide the machine's abstain (``rollups.ABSTAIN_VERDICTS``); a still-PENDING outcome is not completed. Read from the
    daily rollup (``VerificationDayCount``): one query over the period's days.
    """
    rows = VerificationDayCount.objects.filter(_days_of(period)).values_list("day", "completed", "abstained")
    by_day = {day: (completed, abstained) for day, completed, abstained in rows}
    days = [DayAbstains(d, *by_day.get(d, (0, 0))) for d in period.day_list]
    return AbstainShare(days, sum(d.completed for d in days), sum(d.abstained for d in days))


@dataclass(frozen=True)
class DayFindings:
    day: date
    opened: int
    closed: int


@dataclass(frozen=True)
class FindingsFlow:
    days: list[DayFindings]
    opened: int
    closed: int
    open_now: int
    by_kind: list[tuple[str, int]]  # open findings per kind, now


def findings_flow(*, period: Period) -> FindingsFlow:
    """Findings raised and closed per day of the period, and how many are open now (per kind): two queries over the
    rollups (``FindingDayCount``, ``OpenFindingCount``)."""
    rows = FindingDayCount.objects.filter(_days_of(period)).values_list("day", "action", "n")
    counts = {(day, action): n for day, action, n in rows}
    days = [
        DayFindings(d, counts.get((d, FindingAction.RAISED.value), 0), counts.get((d, FindingAction.CLOSED.value), 0))
        for d in period.day_list
    ]
    open_rows = OpenFindingCount.objects.filter(n__gt=0).values_list("kind", "n")
    by_kind = sorted(open_rows, key=lambda pair: (-pair[1], pair[0]))
    return FindingsFlow(
        days, sum(d.opened for d in days), sum(d.closed for d in days), sum(n for _, n in by_kind), by_kind
    )


def utc_stamp(now: datetime) -> str:
    """``YYYYMMDDTHHMMSSZ`` for file names."""
    return now.astimezone(UTC).strftime("%Y%m%dT%H%M%SZ")
