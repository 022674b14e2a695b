"""One derivation of the read-time state of a verification, for the single read and for every filter (SPEC §3).

The definition is the kernel's: ``evaluation.read_outcome(payload, now)`` (a PENDING check past its deadline answers
its expiry verdict). Its answer changes only at the head's PENDING deadlines, so ``kernel.read_phases`` lists the
outcome from each deadline on and ``phases_record`` stores them (``ReadPhase``) beside the head columns, in the
transaction that appends the receipt. ``read_q`` is the one SQL form of "reads as …": the head columns before
``pending_until``, the phase holding ``now`` from it on. A person's decision clears ``pending_until``, so its head
columns hold for ever. ``read_columns`` is the same answer for rows already loaded (pages and exports).

A row past ``pending_until`` with no phase holding ``now`` (written around the services: a bulk import, a restore
without phases) reads, if its head is PENDING, as that PENDING expired with the default expiry verdict (SPEC §2:
UNKNOWN, so flagged, ``pending-expired``: a person looks); any other head as its columns. Every reader (``read_q``,
``read_annotations``, ``read_columns``, the queue and its rollups) applies this same rule.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Final

from django.db import connections, router
from django.db.models import BooleanField, Case, Exists, F, OuterRef, Q, Subquery, Value, When

from verification.compiled import Insert, queue
from verification.kernel.determination import NEEDS_REVIEW_PREFIX, Determination
from verification.kernel.read_phases import read_phases
from verification.kernel.reasons import Reason
from verification.kernel.verdicts import Verdict
from verification.runs.models import ReadPhase, Verification

#: The head columns that a phase also holds; the only names ``read_q`` filters on.
READ_FIELDS: Final = ("verdict", "determination", "flagged", "flag_reason", "reason")


@dataclass(frozen=True)
class ReadColumns:
    """The head's read state at one instant, column by column."""

    verdict: str | None
    determination: str | None
    flagged: bool
    flag_reason: str | None
    reason: str | None
    expired: bool  # some PENDING deadline of the head has passed


#: What a PENDING head past ``pending_until`` without a recorded phase reads as (the module docstring).
UNRECORDED_EXPIRY: Final = ReadColumns(
    verdict=Verdict.UNKNOWN.value,
    determination=Determination.CANNOT_DETERMINE.value,
    flagged=True,
    flag_reason=NEEDS_REVIEW_PREFIX + Reason.PENDING_EXPIRED.value,
    reason=Reason.PENDING_EXPIRED.value,
    expired=True,
)


#: A head's phases: an INSERT built once per row count (``compiled.Insert``).
_INSERT_PHASES: Final = Insert(ReadPhase)


def _phases_delete(verification: Verification) -> None:
    """Delete the stored phases of ``verification``: queued in the caller's batch (``compiled.writes_batched``), so it
    goes with the head's other writes instead of sending them first and taking a round trip of its own."""
    alias = router.db_for_write(ReadPhase)
    conn = connections[alias]
    field = ReadPhase._meta.get_field("verification")
    quote = conn.ops.quote_name
    sql = f"DELETE FROM {quote(ReadPhase._meta.db_table)} WHERE {quote(field.column)} = %s"  # noqa: S608 - the model's names
    queue(alias, sql, [field.get_db_prep_value(verification.pk, conn)], rows=False, then=None)


def phases_record(verification: Verification, payload: Mapping[str, Any], *, first_head: bool = False) -> None:
    """Replace the stored phases of ``verification`` by those of its new head's ``payload`` (a run or result), the
    DELETE and the INSERT queued with the head's other writes. ``first_head``: the payload is seq 0's, so no phase is
    stored yet (phases are written with a head) and no DELETE is sent."""
    if not first_head:
        _phases_delete(verification)
    if "criteria" not in payload:
        return
    _INSERT_PHASES(
        [
            ReadPhase(
                verification=verification,
                starts_at=p.starts_at,
                ends_at=p.ends_at,
                verdict=p.outcome.verdict.value,
                determination=p.outcome.determination.value if p.outcome.determination is not None else None,
                flagged=p.outcome.flagged,
                flag_reason=p.outcome.flag_reason,
                reason=p.outcome.reason.value if p.outcome.reason is not None else None,
            )
            for p in read_phases(payload)
        ]
    )


def as_issued_q(now: datetime) -> Q:
    """The rows whose head columns are their read state at ``now`` (no PENDING deadline has passed)."""
    return Q(pending_until__isnull=True) | Q(pending_until__gt=now)


def expired_q(now: datetime) -> Q:
    """The rows with a PENDING deadline at or before ``now``: their read state is a stored phase."""
    return Q(pending_until__lte=now)


def _phase_at(now: datetime) -> Q:
    return Q(starts_at__lte=now) & (Q(ends_at__isnull=True) | Q(ends_at__gt=now))


def _phases_at(now: datetime) -> Any:
    return ReadPhase.objects.filter(verification=OuterRef("pk")).filter(_phase_at(now))


def _unrecorded(now: datetime) -> Q:
    """Past ``pending_until`` with no phase holding ``now``."""
    return expired_q(now) & ~Q(Exists(_phases_at(now)))


def _unrecorded_pending(now: datetime) -> Q:
    return _unrecorded(now) & Q(verdict=Verdict.PENDING.value)


def read_q(now: datetime, **conditions: Any) -> Q:
    """The rows that read, at ``now``, with every column of ``conditions`` equal to its value (None: is null)."""
    unknown = set(conditions) - set(READ_FIELDS)
    if unknown:
        raise ValueError(f"not a read-state column: {sorted(unknown)}")
    phase = _phases_at(now).filter(**conditions)
    as_columns = as_issued_q(now) | (_unrecorded(now) & ~Q(verdict=Verdict.PENDING.value))
    out = (as_columns & Q(**conditions)) | (expired_q(now) & Q(Exists(phase)))
    if all(getattr(UNRECORDED_EXPIRY, name) == value for name, value in conditions.items()):
        out |= _unrecorded_pending(now)
    return out


def read_annotations(now: datetime) -> dict[str, Any]:
    """The read state at ``now`` as SQL expressions ``read_<column>`` and ``read_expired`` (for value exports)."""
    phase = _phases_at(now)
    in_phase = expired_q(now) & Q(Exists(phase))
    unrecorded = _unrecorded_pending(now)
    out: dict[str, Any] = {
        f"read_{name}": Case(
            When(in_phase, then=Subquery(phase.values(name)[:1])),
            When(unrecorded, then=Value(getattr(UNRECORDED_EXPIRY, name))),
            default=F(name),
            output_field=Verification._meta.get_field(name).__class__(null=True),
        )
        for name in READ_FIELDS
    }
    out["read_expired"] = Case(
        When(in_phase | unrecorded, then=Value(True)), default=Value(False), output_field=BooleanField()
    )
    return out


def read_columns(rows: Iterable[Verification], *, now: datetime) -> dict[uuid.UUID, ReadColumns]:
    """The read state at ``now`` of each loaded row (one query for the rows past a deadline)."""
    rows = list(rows)
    expired = {v.pk for v in rows if v.pending_until is not None and v.pending_until <= now}
    found = ReadPhase.objects.filter(verification_id__in=expired).filter(_phase_at(now)) if expired else ()
    phases = {p.verification_id: p for p in found}
    out: dict[uuid.UUID, ReadColumns] = {}
    for v in rows:
        if v.pk in expired and v.pk not in phases and v.verdict == Verdict.PENDING.value:
            out[v.pk] = UNRECORDED_EXPIRY
            continue
        source: Verification | ReadPhase = phases.get(v.pk, v)
        out[v.pk] = ReadColumns(
            verdict=source.verdict,
            determination=source.determination,
            flagged=source.flagged,
            flag_reason=source.flag_reason,
            reason=source.reason,
            expired=v.pk in phases,
        )
    return out


__all__ = [
    "READ_FIELDS",
    "UNRECORDED_EXPIRY",
    "ReadColumns",
    "as_issued_q",
    "expired_q",
    "phases_record",
    "read_annotations",
    "read_columns",
    "read_q",
]


#: What a page says decided an item no person decided (issue 14): the head's issuer is the portal's own verifier.
AUTOMATED_VERIFIER: Final = "automated verifier"


def decided_by(*, person: str | None, head_actor: str, portal_actor: str) -> str:
    """Who decided what a head reads as, in words: the person whose decision it is; the automated verifier when the
    portal's own service issued the head; else the actor that delivered it (an imported result's)."""
    if person:
        return person
    return AUTOMATED_VERIFIER if head_actor in ("", portal_actor) else head_actor


def shown_authority(*, human_decided: bool, head_authority: str) -> str:
    """The authority that decided (the head receipt's, ``human`` once a person decided), the same on every page."""
    return "human" if human_decided else head_authority


def reasons_in_use() -> list[str]:
    """Every reason code some verification reads as, now or after one of its PENDING deadlines (the history's reason
    filter offers these, not the whole registry): one query, a UNION of two DISTINCTs."""
    heads = Verification.objects.exclude(reason__isnull=True).order_by().values_list("reason", flat=True).distinct()
    phases = ReadPhase.objects.exclude(reason__isnull=True).order_by().values_list("reason", flat=True).distinct()
    return sorted({c for c in heads.union(phases) if c})
