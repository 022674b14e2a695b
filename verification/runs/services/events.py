"""The event feed (``GET /v1/events?after=CURSOR``): an ordered, append-only log of state changes.

``Event.id`` is the cursor. Ids are allocated and committed in the same order: on PostgreSQL every emitter takes
one transaction-scoped advisory lock right before its insert and holds it to commit, so no reader that has seen id
``n`` can later find an id below ``n`` appear (a plain sequence would allow that). Emit events last in a
transaction, so the lock is held only for the commit. SQLite serializes writers already.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from typing import Any, Final

from django.db import connection, transaction

from verification.compiled import queue
from verification.runs.models import Event, Verification

_EVENT_FEED_LOCK: Final = 8_200_308_002  # pg_advisory_xact_lock key of the event feed (any fixed bigint)

VERIFICATION_FINISHED: Final = "verification.finished"  # a receipt gave it a determination
VERIFICATION_PENDING: Final = "verification.pending"  # a receipt was issued with a PENDING check deciding the fold
VERIFICATION_FAILED: Final = "verification.failed"  # operational failure after the last attempt (no receipt)
VERIFICATION_DECIDED: Final = "verification.decided"  # a person's decision (emitted by the review issue)
EVIDENCE_REQUESTED: Final = "verification.evidence_requested"  # a reviewer asked for more evidence (issue 5)
RESULT_RECEIVED: Final = "result.received"  # a semantic or imported result arrived for a pending criterion
FINDING_RAISED: Final = "finding.raised"

KINDS: Final = frozenset(
    {
        VERIFICATION_FINISHED,
        VERIFICATION_PENDING,
        VERIFICATION_FAILED,
        VERIFICATION_DECIDED,
        RESULT_RECEIVED,
        FINDING_RAISED,
        EVIDENCE_REQUESTED,
    }
)


def _lock_feed() -> None:
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_advisory_xact_lock(%s)", [_EVENT_FEED_LOCK])


def event_append(
    *, kind: str, verification: Verification | None = None, payload: Mapping[str, Any] | None = None
) -> Event:
    """``event_emit`` inside a transaction the caller holds (no savepoint of its own: one round trip less on the
    run path). Call it as the last write of that transaction, like ``event_emit``."""
    if not connection.in_atomic_block:
        raise RuntimeError("event_append runs inside the caller's transaction")
    if kind not in KINDS:
        raise ValueError(f"unknown event kind {kind!r}")
    if connection.vendor != "postgresql":
        return Event.objects.create(kind=kind, verification=verification, payload=dict(payload or {}))
    return _insert_locked(Event(kind=kind, verification=verification, payload=dict(payload or {})))


def _insert_locked(event: Event) -> Event:
    """On PostgreSQL, the feed's lock and the insert in ONE statement: the lock is taken by the materialized CTE
    before the row, and so its id, is made (``nextval`` runs when the row is built from the CTE's one row), and held
    to commit like ``_lock_feed``'s. The values are prepared by their model fields, as ``Model.save`` would."""
    fields, sql = _locked_insert()
    values = [f.get_db_prep_save(f.pre_save(event, add=True), connection) for f in fields]
    # Queued with the transaction's other writes inside ``writes_batched`` (the last of them: the lock is then held
    # for the commit only); its id is set when it is sent.
    queue(connection.alias, sql, [_EVENT_FEED_LOCK, *values], rows=True, then=functools.partial(_set_id, event))
    event._state.adding, event._state.db = False, connection.alias
    return event


def _set_id(event: Event, rows: list[tuple[int]]) -> None:
    ((event.id,),) = rows


@functools.cache
def _locked_insert() -> tuple[tuple[Any, ...], str]:
    """``_insert_locked``'s fields and SQL (PostgreSQL), built once; sent prepared (``compiled.send``)."""
    fields = tuple(f for f in Event._meta.concrete_fields if f.name != "id")
    quote = connection.ops.quote_name
    columns = ", ".join(quote(f.column) for f in fields)
    placeholders = ", ".join(["%s"] * len(fields))
    sql = (
        "WITH feed AS MATERIALIZED (SELECT pg_advisory_xact_lock(%s)) "  # noqa: S608 - names from the model
        f"INSERT INTO {quote(Event._meta.db_table)} ({columns}) SELECT {placeholders} FROM feed RETURNING id"
    )
    return fields, sql


@transaction.atomic
def event_emit(
    *, kind: str, verification: Verification | None = None, payload: Mapping[str, Any] | None = None
) -> Event:
    """Append one event. Call it as the last write of its transaction (see the module docstring)."""
    if kind not in KINDS:
        raise ValueError(f"unknown event kind {kind!r}")
    _lock_feed()
    return Event.objects.create(kind=kind, verification=verification, payload=dict(payload or {}))
