"""The history area's view models, built from what ``verification.records``' selectors return (STYLE: the layers).

- ``HistoryRow``/``HistoryPage``: a history entry with its state and reason in words.
- ``FindingView``: a finding's facts with its reason in words.
- ``Timeline`` (``TimelineCycle``, ``TimelineVerification``, ``TimelineReceipt``): a subject's timeline with states
  and reasons in words, the receipt each one supersedes named and an anchor per receipt.
- What a finding's page shows in words (issue 14): its subject as the task's title and cycle instead of a raw
  ``<task uuid>@<cycle>``, and a detail without ``recomputed None`` (the bytes were gone: nothing to recompute).
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, fields
from datetime import datetime
from typing import Any, Final

from verification.records.read_helpers import reason_text_of
from verification.records.selectors_findings import FINDING_CLOSED, FindingFacts, finding_facts
from verification.records.selectors_history import STATE_LABELS, HistoryEntry, history_page
from verification.records.selectors_timeline import (
    SubjectTimeline,
    TimelineCycleEntry,
    TimelineReceiptEntry,
    TimelineVerificationEntry,
    subject_timeline,
)
from verification.reviews.models import Finding
from verification.runs.models import Task
from verification.runs.selectors import task_get

SUBJECT: Final = re.compile(r"^(?P<task>[0-9a-fA-F-]{32,36})@(?P<cycle>\d+)$")


@dataclass(frozen=True)
class Subject:
    raw: str
    title: str  # the task's title, or the raw subject when it names no known task
    task_id: uuid.UUID | None
    cycle: int | None


def subject_words(raw: str) -> Subject:
    match = SUBJECT.match(raw or "")
    if match is None:
        return Subject(raw=raw, title=raw, task_id=None, cycle=None)
    try:
        task_id = uuid.UUID(match["task"])
    except ValueError:
        return Subject(raw=raw, title=raw, task_id=None, cycle=None)
    task = task_get(task_id)
    if task is None:
        return Subject(raw=raw, title=raw, task_id=None, cycle=int(match["cycle"]))
    return Subject(raw=raw, title=task.title or str(task_id), task_id=task.pk, cycle=int(match["cycle"]))


def detail_words(detail: str) -> str:
    """An integrity finding's detail as stored (``missing: recorded sha256:…, recomputed None``) in words."""
    return re.sub(r",? recomputed None\b", "; nothing to recompute (the bytes are gone)", detail or "")


def _fields_of(record: Any) -> dict[str, Any]:
    """A domain record's fields, as they are (no deep copy: they hold model instances)."""
    return {f.name: getattr(record, f.name) for f in fields(record)}


def state_label(state: str) -> str:
    """A history state (``selectors_history.STATE_LABELS``) in words."""
    return STATE_LABELS.get(state, state)


# --- the history -----------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class HistoryRow(HistoryEntry):
    """One verification as the history shows it: what stands, who decided it, with what authority, and why."""

    reason_text: str = ""

    @property
    def state_label(self) -> str:
        return state_label(self.state)

    @classmethod
    def of(cls, entry: HistoryEntry) -> HistoryRow:
        return cls(**_fields_of(entry), reason_text=reason_text_of(entry.reason))


@dataclass(frozen=True)
class HistoryPage:
    rows: list[HistoryRow]
    next_cursor: str | None


def history_rows(*, filters: Mapping[str, str], cursor: str | None, limit: int, now: datetime) -> HistoryPage:
    """One page of the history (``selectors_history.history_page``), its entries in words."""
    entries = history_page(filters=filters, cursor=cursor, limit=limit, now=now)
    return HistoryPage(rows=[HistoryRow.of(entry) for entry in entries.rows], next_cursor=entries.next_cursor)


# --- a finding -------------------------------------------------------------------------------------------------------


@dataclass
class FindingView(FindingFacts):
    """A finding's facts, its reason in words."""

    reason_text: str = ""

    @property
    def closed(self) -> bool:
        return self.state == FINDING_CLOSED


def finding_view(finding: Finding) -> FindingView:
    """A finding with what it is about (``selectors_findings.finding_facts``), its reason in words."""
    facts = finding_facts(finding)
    return FindingView(**_fields_of(facts), reason_text=reason_text_of(finding.reason))


# --- a subject's timeline --------------------------------------------------------------------------------------------


@dataclass
class TimelineReceipt(TimelineReceiptEntry):
    """One receipt as the timeline shows it: its reason in words, the receipt it supersedes named, its anchor."""

    reason_text: str = ""
    supersedes_label: str = ""  # "seq 1", "seq 1 of verification #2"; empty: not on this timeline

    @property
    def anchor(self) -> str:
        return f"r-{self.content_hash[:16]}"


@dataclass
class TimelineVerification(TimelineVerificationEntry):
    receipts: list[TimelineReceipt]

    @property
    def state_label(self) -> str:
        return state_label(self.state)


@dataclass
class TimelineCycle(TimelineCycleEntry):
    verifications: list[TimelineVerification]


@dataclass
class Timeline(SubjectTimeline):
    cycles: list[TimelineCycle]


def _supersedes_label(entry: TimelineReceiptEntry, positions: Mapping[uuid.UUID, int]) -> str:
    if entry.supersedes_at is None:
        return ""
    other, seq = entry.supersedes_at
    return f"seq {seq}" if other == entry.verification_id else f"seq {seq} of verification #{positions[other]}"


def timeline_view(task: Task, *, now: datetime) -> Timeline:
    """A subject's timeline (``selectors_timeline.subject_timeline``: its queries, nothing more) in words."""
    record = subject_timeline(task, now=now)
    positions = {v.verification.pk: v.position for c in record.cycles for v in c.verifications}

    def receipt(entry: TimelineReceiptEntry) -> TimelineReceipt:
        label = _supersedes_label(entry, positions)
        return TimelineReceipt(**_fields_of(entry), reason_text=reason_text_of(entry.reason), supersedes_label=label)

    def verification(entry: TimelineVerificationEntry) -> TimelineVerification:
        return TimelineVerification(**_fields_of(entry) | {"receipts": [receipt(r) for r in entry.receipts]})

    def cycle(entry: TimelineCycleEntry) -> TimelineCycle:
        return TimelineCycle(**_fields_of(entry) | {"verifications": [verification(v) for v in entry.verifications]})

    return Timeline(**_fields_of(record) | {"cycles": [cycle(c) for c in record.cycles]})
