"""The unfiltered queue page by its compiled query (issue 15; ``selectors._page_of``): the same items, in the same
order, with the same columns, relations (task, submitter, lease and holder, or none) and reason and rank as the ORM's
``select_related`` query, on the first page and after a cursor, on SQLite and PostgreSQL."""

from __future__ import annotations

import re
import uuid
from datetime import timedelta
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
        (v.head_envelope, v.head_authority, v.read_verdict),  # type: ignore[attr-defined]
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




def _generic_plan(sql: str, params: list[Any]) -> str:
    """The server's generic plan of ``sql`` prepared (planned without its parameters' values), sorting only where no
    index gives the order (``enable_sort`` off: a test database is too small for the costs to decide)."""
    from django.db import connection, transaction

    from verification import pgwire

    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute("SET LOCAL plan_cache_mode = force_generic_plan")
        cursor.execute("SET LOCAL enable_sort = off")
        cursor.execute(f"PREPARE rp_test_page AS {pgwire._convert(sql)[0].decode()}")
        values = ", ".join(connection.ops.compose_sql("%s", [p]) for p in params)
        cursor.execute(f"EXPLAIN EXECUTE rp_test_page ({values})")
        plan = "\n".join(row[0] for row in cursor.fetchall())
        cursor.execute("DEALLOCATE rp_test_page")
    return plan


@pytest.mark.postgres
def test_the_page_statement_keeps_its_constants_as_literals_and_its_generic_plan_reads_the_queue_index(
    queue: Queue,
) -> None:
    """Prepared, the page is planned once per connection only if the server's generic plan (planned without the
    arguments' values) is as good as a plan for them: its constants must be literals, so the rank (an expression of
    them) matches the queue index's and the page is read in that index's order, not sorted (issue 15)."""
    from verification.compiled import Compiled

    queue.unknown("one")
    now = timezone.now()
    for after in (False, True):
        arguments: dict[str, Any] = {"now": now}
        if after:
            arguments |= {"rank": 0, "submitted_at": now - timedelta(days=400), "pk": uuid.UUID(int=0)}
        page = selectors._compiled_page(50, after)
        sql, params = page.statement(**arguments)
        # Only the arguments are parameters (``now`` at each of its places); the constants are in the text.
        assert len(params) == re.findall(r"%%|%s", sql).count("%s") and all(p in arguments.values() for p in params)
        assert "'MISMATCH'" in sql and "'cited-conflict'" in sql
        plan = _generic_plan(sql, params)
        assert "verification_review_queue_idx" in plan and "Sort" not in plan, plan
        # The same statement with its constants as parameters: its generic plan cannot read the index's order.
        control = Compiled("control", Verification, page._build, page._probes, prepared=True)
        assert "Sort" in _generic_plan(*control.statement(**arguments))
