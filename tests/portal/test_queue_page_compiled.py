"""The unfiltered queue page by its compiled query (issue 15; ``selectors._page_of``): the same items, in the same
order, with the same columns, relations (task, submitter, lease and holder, or none) and reason and rank as the ORM's
``select_related`` query, on the first page and after a cursor, on SQLite and PostgreSQL."""

from __future__ import annotations

from typing import Any

import pytest
from django.utils import timezone

from tests.portal.conftest import Queue
from verification.reviews import selectors
from verification.reviews.services.claims import review_claim
from verification.runs.models import Verification

pytestmark = pytest.mark.django_db


def _shown(v: Verification) -> tuple[Any, ...]:
    """Everything a queue page reads of an item."""
    lease = getattr(v, "review_lease", None)
    return (
        {f.attname: getattr(v, f.attname) for f in Verification._meta.concrete_fields},
        v.queue_reason,  # type: ignore[attr-defined]
        v.queue_rank,  # type: ignore[attr-defined]
        v.task and (v.task.pk, v.task.title),
        v.submitted_by and v.submitted_by.pk,
        lease and (lease.pk, lease.holder.get_username(), lease.expires_at, lease.released_at),
    )


def test_the_compiled_page_loads_what_the_orm_loads(queue: Queue, reviewer: Any) -> None:
    held = queue.unknown("held")
    queue.unknown("free")
    queue.cited_conflict("cited")
    review_claim(user=reviewer, verification=held)
    now = timezone.now()
    compiled = selectors._page_of(now=now, filters={}, cursor=None, limit=2)
    orm = list(selectors._page_queryset(now=now, filters={}, at=None)[:3])
    assert [_shown(v) for v in compiled] == [_shown(v) for v in orm] and len(compiled) == 3
    assert any(getattr(v, "review_lease", None) for v in compiled)  # a lease and its holder loaded
    assert any(getattr(v, "review_lease", None) is None for v in compiled)  # and none where there is none
    last = compiled[1]
    cursor = selectors.Cursor(int(last.queue_rank), last.submitted_at, last.pk)  # type: ignore[attr-defined]
    after = selectors._page_of(now=now, filters={}, cursor=cursor.encode(), limit=2)
    assert [_shown(v) for v in after] == [
        _shown(v) for v in selectors._page_queryset(now=now, filters={}, at=cursor)[:3]
    ]
    assert [v.pk for v in after] == [compiled[2].pk]


def test_a_filtered_page_goes_through_the_orm_and_an_empty_filter_does_not(queue: Queue) -> None:
    item = queue.unknown("only")
    now = timezone.now()
    assert [v.pk for v in selectors._page_of(now=now, filters={"reason": "", "age": " "}, cursor=None, limit=5)] == [
        item.pk
    ]
    reason = str(selectors._page_of(now=now, filters={}, cursor=None, limit=5)[0].queue_reason)  # type: ignore[attr-defined]
    assert [v.pk for v in selectors._page_of(now=now, filters={"reason": reason}, cursor=None, limit=5)] == [item.pk]
    with pytest.raises(Exception, match="unknown filters"):
        selectors._page_of(now=now, filters={"colour": ""}, cursor=None, limit=5)
