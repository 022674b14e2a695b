"""The event feed's order lock (services/events.py): an event appended on the run path holds it to commit.

On PostgreSQL ``event_append`` takes the feed's transaction-scoped advisory lock in the INSERT itself (one statement);
the test looks in ``pg_locks`` for it after the insert and before commit, and checks the row is the one stored.
"""

from __future__ import annotations

import pytest
from django.db import connection, transaction

from verification.runs.models import Event
from verification.runs.services import events

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.postgres]


def _feed_lock_held() -> bool:
    key = events._EVENT_FEED_LOCK
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND pid = pg_backend_pid() "
            "AND granted AND classid = %s AND objid = %s",
            [key >> 32, key & 0xFFFFFFFF],
        )
        (count,) = cursor.fetchone()
    return count == 1


def test_event_append_takes_the_feed_lock_in_its_insert_and_holds_it_to_commit() -> None:
    with transaction.atomic():
        assert not _feed_lock_held()
        event = events.event_append(kind=events.FINDING_RAISED, payload={"n": 1, "text": "é"})
        assert _feed_lock_held()
        assert event.pk is not None and not event._state.adding
    assert not _feed_lock_held()
    stored = Event.objects.get(pk=event.pk)
    assert (stored.kind, stored.payload, stored.verification_id) == (events.FINDING_RAISED, {"n": 1, "text": "é"}, None)
    assert stored.created_at == event.created_at
