"""Reads of verifications, tasks and rubrics: the single read, the API list, the task's cycle."""

from __future__ import annotations

import enum
import threading
import uuid
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any, Final

from django.db.models import Exists, Max, OuterRef, Q, QuerySet
from django.utils import timezone

from verification import cursors
from verification.actors.models import Actor
from verification.compiled import Compiled, Probe, Related, pipelined
from verification.errors import ServiceError
from verification.kernel.canonical import loads_strict
from verification.kernel.contracts import Claim as KernelClaim
from verification.kernel.contracts import ContractAcceptance as KernelAcceptance
from verification.kernel.contracts import current_contract
from verification.kernel.criteria import RegisteredRubric, register_rubric
from verification.kernel.determination import Determination, Outcome, Status
from verification.kernel.evaluation import read_outcome
from verification.kernel.reasons import Reason
from verification.kernel.verdicts import Verdict
from verification.runs.models import Claim, ContractAcceptance, Event, Rubric, Task, TaskCycle, Verification
from verification.runs.read_state import read_q
from verification.trust.models import Receipt
from verification.trust.selectors import head_from_rows, head_of, head_query, receipt_payload


def _key(value: str | uuid.UUID) -> uuid.UUID | None:
    """A record's id as a UUID, or None for a string that is not one (the record does not exist)."""
    try:
        return value if isinstance(value, uuid.UUID) else uuid.UUID(str(value))
    except ValueError:
        return None


def verification_get(verification_id: str | uuid.UUID) -> Verification | None:
    """The verification with this id, or None (also for a string that is not a UUID)."""
    pk = _key(verification_id)
    return Verification.objects.filter(pk=pk).first() if pk is not None else None


#: A verification with its submitter and contract rubric (what its API view reads), from one row.
_VERIFICATION_ROW: Final = Related(Verification, ("submitted_by", "rubric"))


def _verification_query(verification_pk: uuid.UUID) -> QuerySet[Verification, tuple[object, ...]]:
    return Verification.objects.filter(pk=verification_pk).values_list(*_VERIFICATION_ROW.columns())


#: ``verification_read``'s query compiled once: a wait_ms submission reads it when its run's announcement wakes it.
_VERIFICATION_READ: Final = Compiled(
    "verification-read",
    Verification,
    _verification_query,
    {"verification_pk": Probe.key_of(Verification)},
    prepared=True,
)


def verification_read(verification_pk: uuid.UUID) -> Verification | None:
    """The verification as committed now, with ``submitted_by`` and ``rubric`` loaded (as ``select_related`` would),
    in one statement compiled once; None when there is none."""
    return _VERIFICATION_ROW.first(_VERIFICATION_READ.rows(verification_pk=verification_pk))


def verification_and_head(verification_id: str | uuid.UUID) -> tuple[Verification, Receipt | None] | None:
    """``verification_read`` and the head receipt (``head_of``), both compiled once and sent in ONE round trip
    (``compiled.pipelined``; the head read after the verification's, as when they were sent one by one): what the
    API's view of a verification reads (its GET, a submission's answer, each wake-up of a wait_ms submission). None
    when there is none (also for a string that is not a UUID)."""
    pk = _key(verification_id)
    if pk is None:
        return None
    rows, head_rows = pipelined((_VERIFICATION_READ, {"verification_pk": pk}), head_query(pk))
    verification = _VERIFICATION_ROW.first(rows)
    return None if verification is None else (verification, head_from_rows(head_rows))


#: ``task_get``'s read, compiled once and sent prepared: every submission names its task.
_TASK_ROW: Final = Related(Task)
_TASK_READ: Final = Compiled(
    "task-read",
    Task,
    lambda task_pk: Task.objects.filter(pk=task_pk).values_list(*_TASK_ROW.columns()),
    {"task_pk": Probe.key_of(Task)},
    prepared=True,
)


def task_get(task_id: str | uuid.UUID) -> Task | None:
    """The task with this id, or None (also for a string that is not a UUID)."""
    pk = _key(task_id)
    return _TASK_ROW.first(_TASK_READ.rows(task_pk=pk)) if pk is not None else None


def current_cycle(task: Task) -> int:
    """The task's current cycle: the highest cycle number (a task always has its first)."""
    number = TaskCycle.objects.filter(task=task).aggregate(top=Max("number"))["top"]
    return int(number) if number is not None else 1


def kernel_claims(task: Task) -> tuple[KernelClaim, ...]:
    """Every claim of the task (all cycles: the kernel keeps those of the cycle it asks about) as kernel records."""
    rows = Claim.objects.filter(task=task).select_related("actor").order_by("claimed_at", "id")
    return tuple(KernelClaim(row.actor.name, row.cycle, row.claimed_at) for row in rows)


#: A contract acceptance with its rubric and acceptor, as ``select_related`` would load them, in one row.
_CONTRACT_RELATED: Final = Related(ContractAcceptance, ("rubric", "accepted_by"))


def _contracts_query(task_pk: uuid.UUID) -> QuerySet[ContractAcceptance, tuple[object, ...]]:
    return (
        ContractAcceptance.objects.filter(task_id=task_pk)
        .order_by("accepted_at", "id")
        .values_list(*_CONTRACT_RELATED.columns())
    )


#: The task's contract acceptances, every cycle's (one per cycle; the kernel's rule keeps the asked cycle's),
#: compiled once (``verification.compiled``): every submission reads them.
_CONTRACTS: Final = Compiled(
    "task-contracts", ContractAcceptance, _contracts_query, {"task_pk": Probe.key_of(Task)}, prepared=True
)


def contract_of(task: Task, cycle: int) -> ContractAcceptance | None:
    """The contract of the cycle: its latest acceptance by the kernel's rule (``contracts.current_contract``)."""
    return contract_from_rows(cycle, _CONTRACTS.rows(task_pk=task.pk))


def contracts_query(task_pk: uuid.UUID) -> tuple[Compiled, dict[str, Any]]:
    """``contract_of``'s query and its arguments, for a caller that sends it with others (``compiled.pipelined``):
    the task's acceptances of every cycle, so that it need not know the cycle first."""
    return _CONTRACTS, {"task_pk": task_pk}


def contract_from_rows(cycle: int, rows: list[tuple[Any, ...]]) -> ContractAcceptance | None:
    """The contract of ``cycle`` among ``contracts_query``'s rows (the kernel's rule keeps that cycle's)."""
    return contract_among(cycle, _CONTRACT_RELATED.all(rows))


def contract_among(cycle: int, rows: list[ContractAcceptance]) -> ContractAcceptance | None:
    """The contract of ``cycle`` among its acceptances ``rows`` (in ``accepted_at``, ``id`` order, each with its
    ``accepted_by``), by the kernel's rule; for a caller that read them already (``cycle_workers``)."""
    records = [KernelAcceptance(row.rubric_id, row.accepted_by.name, row.cycle, row.accepted_at) for row in rows]
    chosen = current_contract(cycle=cycle, acceptances=records)
    if chosen is None:
        return None
    return rows[max(i for i, r in enumerate(records) if r is chosen)]


_RUBRIC_CACHE_MAX = 512


_rubric_lock = threading.Lock()


_rubric_cache: dict[str, RegisteredRubric] = {}


def rubric_get(rubric_hash: str) -> Rubric | None:
    return Rubric.objects.filter(rubric_hash=rubric_hash).first() if isinstance(rubric_hash, str) else None


def rubric_criteria(rubric: Rubric) -> RegisteredRubric:
    """The parsed criteria of a stored rubric, re-validated by the kernel once per process (a rubric never changes)."""
    with _rubric_lock:
        cached = _rubric_cache.get(rubric.rubric_hash)
    if cached is not None:
        return cached
    registered = register_rubric(loads_strict(rubric.document))
    with _rubric_lock:
        if len(_rubric_cache) >= _RUBRIC_CACHE_MAX:
            _rubric_cache.clear()
        _rubric_cache[rubric.rubric_hash] = registered
    return registered


MAX_PAGE: Final = 200


class Unread(enum.Enum):
    """The type of ``UNREAD``."""

    UNREAD = "unread"


#: A head receipt not read yet (``head_outcome`` reads it): None is a read head, the chain being empty.
UNREAD: Final = Unread.UNREAD


def head_outcome(
    verification: Verification, *, now: datetime, head: Receipt | None | Unread = UNREAD
) -> tuple[Receipt | None, Outcome | None]:
    """The head receipt and its outcome as read at ``now`` (PENDING past its deadline expires; nothing is written).
    ``head``: the head as the caller read it (``verification_and_head``, ``heads_of``); else it is read here.

    The outcome is None without a head, or for a head whose payload is not a run/result outcome.
    """
    if head is UNREAD:
        head = head_of(verification)
    if head is None:
        return None, None
    payload = receipt_payload(head)
    if "criteria" not in payload:
        return head, None
    return head, read_outcome(payload, now=now)


def verification_status(verification: Verification, *, head: Receipt | None, outcome: Outcome | None) -> str:
    """The lifecycle, derived when read (SPEC §3): queued → running → succeeded | failed.

    No receipt: ``failed`` after the last attempt failed, ``queued`` before any attempt, else ``running`` (an
    attempt in progress or waiting to be retried). With a receipt: ``running`` while an unexpired PENDING decides the
    fold, else ``succeeded``.
    """
    if head is None:
        if verification.failed_at is not None:
            return Status.FAILED.value
        return Status.QUEUED.value if verification.attempts == 0 else Status.RUNNING.value
    if outcome is not None and outcome.status_running:
        return Status.RUNNING.value
    return Status.SUCCEEDED.value


def latest_automated(verification: Verification) -> Receipt | None:
    """The latest receipt of the chain that holds criteria (a run or a result), or None."""
    return latest_automated_of([verification.pk])[verification.pk]


def latest_automated_of(verification_pks: Sequence[uuid.UUID]) -> dict[uuid.UUID, Receipt | None]:
    """``latest_automated`` of each of these verifications, from ONE read of their chains (a page of the API's list
    whose heads are decisions asked it once per row)."""
    found: dict[uuid.UUID, Receipt | None] = dict.fromkeys(verification_pks)
    if not found:
        return found
    settled: set[uuid.UUID] = set()
    for receipt in Receipt.objects.filter(verification_id__in=list(found)).order_by("verification_id", "-seq"):
        owner = receipt.verification_id
        if owner not in settled and "criteria" in receipt_payload(receipt):
            found[owner] = receipt
            settled.add(owner)
    return found


LIST_FILTERS: Final = frozenset(
    {"task", "cycle", "status", "determination", "verdict", "flagged", "submitted_by", "rubric_hash"}
)


def _bad_filter(detail: str) -> ServiceError:
    return ServiceError(Reason.INVALID_REQUEST, detail)


def _status_filter(queryset: QuerySet[Verification], status: str, now: datetime) -> QuerySet[Verification]:
    has_receipt = Exists(Receipt.objects.filter(verification=OuterRef("pk")))
    pending = read_q(now, verdict=Verdict.PENDING.value)
    queryset = queryset.annotate(_has_receipt=has_receipt)
    if status == Status.QUEUED:
        return queryset.filter(_has_receipt=False, failed_at__isnull=True, attempts=0)
    if status == Status.FAILED:
        return queryset.filter(_has_receipt=False, failed_at__isnull=False)
    if status == Status.SUCCEEDED:
        return queryset.filter(_has_receipt=True).exclude(pending)
    if status == Status.RUNNING:
        return queryset.filter(
            Q(_has_receipt=False, failed_at__isnull=True, attempts__gt=0) | Q(_has_receipt=True) & pending
        )
    raise _bad_filter(f"status is one of {', '.join(s.value for s in Status)}")


def verification_list(
    *,
    actor: Actor | None,
    filters: Mapping[str, str],
    cursor: str | None,
    limit: int,
    now: datetime | None = None,
) -> tuple[list[Verification], str | None]:
    """Verifications newest first, filtered, with keyset pagination on (created_at, id); the next cursor or None.

    Filters (all optional, exact match): ``task``, ``cycle``, ``status`` (derived: queued, running, succeeded,
    failed), ``determination``, ``verdict``, ``flagged`` (true/false), ``submitted_by`` (actor name),
    ``rubric_hash``. Determination, verdict and flagged filter the head as read at ``now`` (``read_state``,
    the same derivation as the API's ``verification_view``). ``invalid-request`` for an unknown
    filter, a bad value or a foreign cursor. Every authenticated reader sees every verification: the portal's
    record is shared (``actor`` is accepted for a later per-tenant rule).
    """
    del actor
    if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= MAX_PAGE:
        raise _bad_filter(f"limit is 1-{MAX_PAGE}")
    unknown = sorted(set(filters) - LIST_FILTERS)
    if unknown:
        raise ServiceError(Reason.UNKNOWN_FIELD, f"unknown filters {unknown}", details={"fields": unknown})
    queryset = Verification.objects.select_related("submitted_by", "rubric")  # what each row's view reads
    for name, value in filters.items():
        if name == "task":
            task = task_get(value)
            if task is None:
                raise _bad_filter("task is a task id")
            queryset = queryset.filter(task=task)
        elif name == "cycle":
            if not str(value).isdigit():
                raise _bad_filter("cycle is a number")
            queryset = queryset.filter(cycle=int(value))
        elif name == "status":
            queryset = _status_filter(queryset, str(value), now or timezone.now())
        elif name == "flagged":
            if value not in ("true", "false"):
                raise _bad_filter("flagged is true or false")
            queryset = queryset.filter(read_q(now or timezone.now(), flagged=value == "true"))
        elif name in ("verdict", "determination"):
            allowed = [v.value for v in (Verdict if name == "verdict" else Determination)]
            if value not in allowed:
                raise _bad_filter(f"{name} is one of {', '.join(allowed)}")
            # SPEC §3: the state as read at this moment (PENDING past its deadline reads as its expiry verdict).
            queryset = queryset.filter(read_q(now or timezone.now(), **{name: value}))
        elif name == "submitted_by":
            queryset = queryset.filter(submitted_by__name=value)
        else:
            queryset = queryset.filter(**{name: value})
    if cursor:
        when, pk = cursors.decode(cursor, datetime, uuid.UUID)  # invalid-request for a cursor not of ours
        queryset = queryset.filter(Q(created_at__lt=when) | Q(created_at=when, id__lt=pk))
    page = list(queryset.order_by("-created_at", "-id")[: limit + 1])
    next_cursor = cursors.encode(page[limit - 1].created_at, page[limit - 1].pk) if len(page) > limit else None
    return page[:limit], next_cursor


def events_after(*, cursor: int | None, limit: int) -> list[Event]:
    """Events with an id above ``cursor`` (None: from the start), oldest first; ids commit in order."""
    if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= MAX_PAGE:
        raise _bad_filter(f"limit is 1-{MAX_PAGE}")
    if cursor is not None and (isinstance(cursor, bool) or not isinstance(cursor, int) or cursor < 0):
        raise _bad_filter("after is a non-negative event id")
    return list(Event.objects.filter(id__gt=cursor or 0).order_by("id")[:limit])
