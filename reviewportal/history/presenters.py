"""What a finding's page shows in words (issue 14): its subject as the task's title and cycle instead of a raw
``<task uuid>@<cycle>``, and a detail without ``recomputed None`` (the bytes were gone: nothing to recompute)."""

from __future__ import annotations

import re
import uuid
from dataclasses import dataclass
from typing import Final

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
