"""Reads of the verdict history: its vocabulary, filters and pages (issue 6 §1).

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

import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import date, datetime
from typing import Any, Final

from django.contrib.auth import get_user_model
from django.db.models import (
    Case,
    CharField,
    Exists,
    OuterRef,
    Q,
    QuerySet,
    Subquery,
    Value,
    When,
)

from verification import cursors
from verification.actors.services.actors import PORTAL_ACTOR_NAME
from verification.kernel import limits
from verification.kernel.reasons import Reason
from verification.kernel.verdicts import Authority, Verdict
from verification.records.read_helpers import bad_request, check_limit, start_of_day
from verification.reviews.models import ReviewDecision
from verification.reviews.selectors import evidence_requested, superseded_q
from verification.runs.models import Verification
from verification.runs.read_state import decided_by, read_columns, read_q, shown_authority
from verification.trust.models import Receipt

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
MAX_TEXT_CHARS: Final = 200


def head_column(column: str) -> Subquery:
    """One column of the head receipt (the highest seq: the unique (verification, seq) index answers it)."""
    return Subquery(Receipt.objects.filter(verification=OuterRef("pk")).order_by("-seq").values(column)[:1])


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


def _day(value: str, name: str) -> date:
    try:  # SPEC §3: dates 1970..9999 (kernel.limits)
        return limits.day(value)
    except limits.OutOfRange as exc:
        raise bad_request(f"{name} {exc}") from None


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
        raise bad_request(f"unknown filters {unknown}")
    queryset = Verification.objects.all()
    value = (filters.get("determination") or "").strip()
    if value:
        if value not in DETERMINATIONS:
            raise bad_request(f"determination is one of {', '.join(DETERMINATIONS)}")
        # SPEC §3: determination, verdict, flagged and reason as read at ``now`` (read_state: the API's derivation).
        queryset = queryset.filter(read_q(now, determination=None if value == NO_DETERMINATION else value))
    value = (filters.get("verdict") or "").strip()
    if value:
        if value not in VERDICTS:
            raise bad_request(f"verdict is one of {', '.join(VERDICTS)}")
        queryset = queryset.filter(read_q(now, verdict=value))
    value = (filters.get("authority") or "").strip()
    if value:
        if value not in AUTHORITIES:
            raise bad_request(f"authority is one of {', '.join(AUTHORITIES)}")
        if value == Authority.HUMAN.value:
            queryset = queryset.filter(human_decided=True)
        else:
            queryset = queryset.filter(Q(human_decided=False) & Q(_head_authority_is(value)))
    value = (filters.get("flagged") or "").strip()
    if value:
        if value not in ("true", "false"):
            raise bad_request("flagged is true or false")
        queryset = queryset.filter(read_q(now, flagged=value == "true"))
    value = (filters.get("reason") or "").strip()
    if value:
        try:
            code = Reason(value)
        except ValueError:
            raise bad_request(f"reason {value!r} is not a registered code") from None
        queryset = queryset.filter(read_q(now, reason=code.value))
    value = (filters.get("reviewer") or "").strip()
    if value:
        decided = ReviewDecision.objects.filter(verification=OuterRef("pk"), user__username=value[:MAX_TEXT_CHARS])
        queryset = queryset.filter(Exists(decided))
    value = (filters.get("state") or "").strip()
    if value:
        if value not in STATES:
            raise bad_request(f"state is one of {', '.join(STATES)}")
        queryset = queryset.filter(state_q(value, now))
    since = (filters.get("since") or "").strip()
    until = (filters.get("until") or "").strip()
    if since:
        queryset = queryset.filter(created_at__gte=start_of_day(_day(since, "since")))
    after = limits.day_after(_day(until, "until")) if until else None
    if after is not None:
        queryset = queryset.filter(created_at__lt=start_of_day(after))
    value = (filters.get("subject") or "").strip()[:MAX_TEXT_CHARS]
    if value:
        queryset = queryset.filter(_subject_q(value))
    return queryset.order_by("-created_at", "-id")


@dataclass(frozen=True)
class HistoryEntry:
    """One verification as read at ``now``: its state, the head as read (SPEC §2: an expired PENDING reads as
    expired), the authority that stands, who decided it and the head receipt (the page's words are the portal's:
    ``reviewportal.history.presenters.HistoryRow``)."""

    verification: Verification
    state: str
    verdict: str
    pending_expired: bool
    determination: str | None
    flagged: bool
    reason: str
    authority: str
    decided_by: str
    head_receipt_id: str
    head_kind: str


@dataclass(frozen=True)
class HistoryEntries:
    """One keyset page of ``history_queryset``: its entries, and the cursor of the next page (None: the last)."""

    rows: list[HistoryEntry]
    next_cursor: str | None


def history_page(*, filters: Mapping[str, str], cursor: str | None, limit: int, now: datetime) -> HistoryEntries:
    """One page of the history (keyset pagination on created_at, id; newest first).

    Four queries whatever the table holds: the page's ids, its rows (with their state and head id), their head
    receipts, and the reviewers' decisions on them.
    """
    check_limit(limit)
    queryset = history_queryset(filters=filters, now=now)
    if cursor:
        created_at, pk = cursors.decode(cursor, datetime, uuid.UUID)
        queryset = queryset.filter(Q(created_at__lt=created_at) | Q(created_at=created_at, id__lt=pk))
    # First the page's ids alone (the keyset index walked in order, the filters checked row by row, no join), then
    # those rows with what the page shows: a join or a per-row expression never changes how the page is found.
    ids = list(queryset.values_list("pk", flat=True)[: limit + 1])
    more = len(ids) > limit
    ids = ids[:limit]
    found = (
        {
            v.pk: v
            for v in Verification.objects.filter(pk__in=ids)
            .select_related("task")
            .annotate(row_state=state_expression(now), head_hash=head_column("content_hash"))
        }
        if ids
        else {}
    )
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
            HistoryEntry(
                verification=v,
                state=str(getattr(v, "row_state", "")),
                verdict=state.verdict or "",
                pending_expired=expired,
                determination=state.determination,
                flagged=state.flagged,
                reason=reason,
                authority=shown_authority(human_decided=v.human_decided, head_authority=authority),
                decided_by=decided_by(person=deciders.get(v.pk), head_actor=actor, portal_actor=PORTAL_ACTOR_NAME),
                head_receipt_id=head_hash,
                head_kind=kind,
            )
        )
    next_cursor = cursors.encode(page[-1].created_at, page[-1].pk) if more and page else None
    return HistoryEntries(rows=rows, next_cursor=next_cursor)


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
