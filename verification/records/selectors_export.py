"""Reads for the history exports (issue 6 §4): the filtered history as value tuples, column by column."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any, Final

from django.db.models import (
    Case,
    CharField,
    F,
    OuterRef,
    QuerySet,
    Subquery,
    Value,
    When,
)
from django.db.models.functions import Coalesce

from verification.records.selectors_history import head_column, history_queryset, state_expression
from verification.reviews.models import ReviewDecision
from verification.runs.read_state import read_annotations


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


def export_rows(*, filters: Mapping[str, str], now: datetime) -> QuerySet[Any]:
    """The filtered history as value tuples in ``EXPORT_COLUMNS`` order, newest first (for a streamed export).

    The state, the head's authority and id, and the decider are computed per row by the database.
    """
    queryset = history_queryset(filters=filters, now=now).annotate(
        row_state=state_expression(now),
        head_hash=head_column("content_hash"),
        head_authority=head_column("authority"),
        decider=Coalesce(_decider(), head_column("actor")),
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


def utc_stamp(now: datetime) -> str:
    """``YYYYMMDDTHHMMSSZ`` for file names."""
    return now.astimezone(UTC).strftime("%Y%m%dT%H%M%SZ")
