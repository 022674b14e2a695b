"""The reviewer queue's claims: claiming with a lease, renewing, releasing, skipping, "next item" (issue 5; SPEC §3).

A lease is one ``ReviewLease`` row per verification, written by one conditional upsert that must change exactly one
row: it inserts a new lease, or takes over one that was released or ran out, and changes nothing while another
reviewer holds it. ``review_claim_next`` picks the first unclaimed queue item with ``SELECT … FOR UPDATE SKIP LOCKED``
on PostgreSQL (concurrent claimers skip each other's candidates instead of queueing on them), in the same statement
as the upsert and the security-log entry; on SQLite the IMMEDIATE write transaction serializes claimers, which run
the same steps one statement at a time. Either way the upsert's row count is the arbiter, so no two reviewers ever
hold the same item (tests/portal/test_claims.py proves it with 20 threads).

Only an item the reviewer may decide is claimed: the decision rails (``_rail_refusal``, SPEC §9) live here, and
``review_bar`` reads them before any lease; ``decisions`` runs them again under the row lock. "Next item" judges its
candidate by the rails' SQL form first (issue 15: ``cycle_workers.rails_certainly_refuse`` and ``rails_uncertain``,
one prepared query, on PostgreSQL in the claim's own round trip): certainly barred, passed over; certainly allowed,
leased without the rails in Python; otherwise the exact rails decide.
"""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Any, Final

from django.conf import settings
from django.db import connection, transaction
from django.utils import timezone

from verification import pgwire
from verification.actors.models import Actor
from verification.actors.roles import DECIDE_VERIFICATION
from verification.actors.services.actors import actor_for_user, kernel_actor
from verification.compiled import Compiled, Probe, exchange
from verification.errors import NotFound, PermissionRefused, ServiceError
from verification.kernel import actors as kactors
from verification.kernel.errors import DecisionRefused, KernelError
from verification.kernel.rails import check_approval_cycle, check_verifier
from verification.kernel.reasons import Reason
from verification.reviews.models import ReviewLease
from verification.reviews.selectors import claimable, in_queue
from verification.reviews.services.claim_sql import (
    NOW_PROBES,
    flag,
    inlined,
    judge_in_sql,
    judge_params,
    judge_sql,
    judged,
)
from verification.runs.cycle_workers import CycleWorkers, cycle_workers
from verification.runs.models import Task, Verification
from verification.trust.services import security_log

DECIDE_PERMISSION: Final = DECIDE_VERIFICATION
#: How many lost races ``review_claim_next`` tolerates in one call (each one is another claimer's progress).
CLAIM_ATTEMPTS: Final = 1000

#: Why a lease ended (``ReviewLease.end_reason``).
END_DECIDED: Final = "decided"
END_RELEASED: Final = "released"
END_EVIDENCE_REQUESTED: Final = "evidence-requested"
END_SKIPPED: Final = "skipped"
#: The longest skip reason kept on the security log.
MAX_SKIP_REASON_CHARS: Final = 500


def lease_duration() -> timedelta:
    return timedelta(seconds=int(getattr(settings, "REVIEWPORTAL_LEASE_SECONDS", 900)))


def _require_reviewer(user: Any) -> None:
    if user is None or not getattr(user, "is_authenticated", False) or not user.is_active:
        raise PermissionRefused("only a signed-in reviewer may do this")
    if not user.has_perm(DECIDE_PERMISSION):
        raise PermissionRefused(f"{user.get_username()} may read the queue but not decide")


def _now(now: datetime | None) -> datetime:
    when = now or timezone.now()
    if timezone.is_naive(when):
        raise ServiceError(Reason.INVALID_REQUEST, "now must be timezone-aware")
    return when


def _lease_held(verification_pk: Any, user: Any, now: datetime) -> ReviewLease | None:
    return ReviewLease.objects.filter(
        verification_id=verification_pk, holder=user, released_at__isnull=True, expires_at__gt=now
    ).first()


def _not_held(detail: str) -> ServiceError:
    return ServiceError(Reason.REVIEW_LEASE_NOT_HELD, detail, status=409)


def _lease_upsert(source: str) -> str:
    """The lease's conditional upsert: insert the rows ``source`` gives (a ``VALUES`` list, or a ``SELECT``), or take
    over a released or run-out lease; change nothing while another reviewer holds it. Its last parameter is ``now``
    (the run-out test; ``_lease_values`` ends with it). One statement, the same on PostgreSQL and SQLite: its row
    count is the arbiter of every race."""
    table = connection.ops.quote_name(ReviewLease._meta.db_table)
    return (
        f"INSERT INTO {table} (verification_id, holder_id, claimed_at, expires_at, released_at, end_reason) "  # noqa: S608
        f"{source} "
        "ON CONFLICT (verification_id) DO UPDATE SET holder_id = excluded.holder_id, "
        "claimed_at = excluded.claimed_at, expires_at = excluded.expires_at, released_at = NULL, end_reason = '' "
        f"WHERE {table}.released_at IS NOT NULL OR {table}.expires_at <= %s"
    )


def _lease_values(user: Any, now: datetime) -> list[Any]:
    """The upsert's parameters after the verification: holder, claimed_at and expires_at of a lease claimed at
    ``now``, then ``now`` for the run-out test; in the database's form."""
    field = ReviewLease._meta.get_field
    return [
        user.pk,
        field("claimed_at").get_db_prep_value(now, connection),
        field("expires_at").get_db_prep_value(now + lease_duration(), connection),
        field("expires_at").get_db_prep_value(now, connection),
    ]


def _take_lease(verification_pk: Any, user: Any, now: datetime) -> bool:
    """Insert the lease, or take over a released or run-out one; False when someone holds it (no row changed)."""
    values = [
        ReviewLease._meta.get_field("verification").get_db_prep_value(verification_pk, connection),
        *_lease_values(user, now),
    ]
    with connection.cursor() as cursor:
        cursor.execute(_lease_upsert("VALUES (%s, %s, %s, %s, NULL, '')"), values)
        return cursor.rowcount == 1


#: A candidate as the claim query returns it: the verification's pk, its task's pk and its cycle.
_Candidate = tuple[Any, Any, Any]
#: A query as SQL text: the text, its parameters, and where ``now`` goes in them (the claim query's only argument).
_ClaimSQL = tuple[str, tuple[Any, ...], tuple[int, ...]]

#: The claim query's SQL per (connection alias, vendor): compiled once from ``claimable`` (so it is exactly the queue's
#: membership and order), then run with ``now`` put in its parameters; see ``_claim_sql``.
_CLAIM_SQL: dict[tuple[str, str], _ClaimSQL | None] = {}


_PROBES: Final = NOW_PROBES


def _claim_queryset(now: datetime, exclude: frozenset[Any] = frozenset()) -> Any:
    """The first claimable item at ``now`` as a candidate. The rails are not in it: a candidate is judged after the
    pick (``claim_sql.judged``), on its own row (as conditions of the scan, the rails' subqueries would be planned for
    the whole queue: PostgreSQL hashes them over every row of their tables, ~125 ms at 100,000 verifications)."""
    candidates = claimable(now=now)
    if exclude:
        candidates = candidates.exclude(pk__in=sorted(exclude, key=str))
    if connection.features.has_select_for_update_skip_locked:
        # PostgreSQL: lock the candidate row, skipping rows other claimers (or a decision) hold right now.
        candidates = candidates.select_for_update(skip_locked=True, of=("self",))
    return candidates.values_list("pk", "task_id", "cycle")[:1]


def _claim_sql() -> _ClaimSQL | None:
    """The first claimable item's query as SQL text, its parameters, and which of them are ``now``.

    ``claimable`` uses ``now`` only as a plain parameter (never in the SQL text), so the text is compiled once per
    connection and vendor: compiled at two probe instants, the parameters that differ are exactly ``now``'s, and each
    must be the vendor's own form of its probe (else None is cached and the caller compiles the queryset each time).
    Compiled in a transaction of its own (Django compiles ``select_for_update`` only inside one); it runs no query."""
    key = (connection.alias, connection.vendor)
    if key in _CLAIM_SQL:
        return _CLAIM_SQL[key]
    with transaction.atomic():
        compiled = [_claim_queryset(p).query.get_compiler(using=connection.alias).as_sql() for p in _PROBES]
    (sql, first), (sql2, second) = compiled
    positions = tuple(i for i, (a, b) in enumerate(zip(first, second, strict=True)) if a != b)
    adapt = connection.ops.adapt_datetimefield_value
    if (
        sql != sql2
        or not positions
        or any(first[i] != adapt(_PROBES[0]) or second[i] != adapt(_PROBES[1]) for i in positions)
    ):
        _CLAIM_SQL[key] = None
    elif connection.vendor == "postgresql":
        _CLAIM_SQL[key] = inlined(sql, first, positions)
    else:
        _CLAIM_SQL[key] = (sql, tuple(first), positions)
    return _CLAIM_SQL[key]


def _claim_params(params: tuple[Any, ...], positions: tuple[int, ...], now: datetime) -> list[Any]:
    values = list(params)
    stamp = connection.ops.adapt_datetimefield_value(now)
    for i in positions:
        values[i] = stamp
    return values


def _candidate(row: Sequence[Any]) -> _Candidate:
    """A candidate from the claim query's row, in Python's types (the cursor of the compiled query gives raw ones)."""
    field = Verification._meta.get_field
    return field("id").to_python(row[0]), field("task").to_python(row[1]), field("cycle").to_python(row[2])


def _first_claimable(now: datetime, exclude: frozenset[Any] = frozenset()) -> _Candidate | None:
    """The first claimable queue item at ``now`` (locked with SKIP LOCKED on PostgreSQL), or None; never one in
    ``exclude`` (items this reviewer skipped or was barred from: compiled each time, not cached)."""
    compiled = None if exclude else _claim_sql()
    if compiled is None:
        found = _claim_queryset(now, exclude).first()
        return None if found is None else _candidate(found)
    sql, params, positions = compiled
    with connection.cursor() as cursor:
        cursor.execute(sql, _claim_params(params, positions, now))
        row = cursor.fetchone()
    return None if row is None else _candidate(row)


class _Barred(Exception):
    """Raised inside a claim attempt's transaction when the rails bar the reviewer from the candidate: rolls back."""

    def __init__(self, pk: Any) -> None:
        super().__init__(pk)
        self.pk = pk


def _barred(user: Any, candidate: _Candidate) -> bool:
    """The exact rails (``_rails_over``) for ``user``'s actor on a candidate the SQL form could not vouch for: True
    when they bar it. One query: ``cycle_workers`` reads the reviewer's actor and its boundaries with the candidate's
    workers (a user without an actor yet gets one, ``actor_for_user``, as on every path)."""
    _, task_pk, cycle = candidate
    if task_pk is None or cycle is None:
        return True  # not a queue item (the claim query never offers one): nothing to decide
    # The claim query returned the subject; no second read of the row. The rails read the task by its pk only.
    found = cycle_workers(Task(pk=task_pk), cycle, reviewer=user)
    verifier = found.verifier
    if found.reviewer is None or verifier is None:  # the user's first claim: its actor is created now
        verifier = kernel_actor(actor_for_user(user))
    return _rails_over(found, verifier) is not None


def _claim_in_steps(user: Any, now: datetime, exclude: frozenset[Any]) -> tuple[Any, bool]:
    """One attempt, statement by statement in one transaction: (the candidate or None, whether this claim took it).
    The candidate (locked) is judged by the rails' SQL form, and by the exact rails where that cannot vouch for it,
    before the lease is written; a barred one raises ``_Barred``."""
    with transaction.atomic():
        candidate = _first_claimable(now, exclude)
        if candidate is None:
            return None, False
        pk = candidate[0]
        refused, sure = judged(pk, user) if judge_in_sql() else (False, False)
        if refused or (not sure and _barred(user, candidate)):
            raise _Barred(pk)
        if not _take_lease(pk, user, now):
            return pk, False
        # issue 7 §4; in this transaction: no claim without its entry, no entry without its claim.
        security_log.review_lease_recorded(kind="claim", user=user, verification_id=pk, savepoint=False)
        return pk, True


#: The one-statement claim's SQL text per claim query text (``_one_statement_sql``).
_ONE_STATEMENT_SQL: dict[tuple[str, str, str], str] = {}


def _one_statement_sql(user: Any, now: datetime, compiled: _ClaimSQL) -> tuple[str, list[Any]]:
    """The one-statement claim (PostgreSQL's data-modifying ``WITH``): pick the candidate with SKIP LOCKED, upsert its
    lease, append the security-log entry for the lease taken, answer (pk, task, cycle, taken). Its text (built once per
    claim query) and its parameters."""
    pick_sql, pick_params, positions = compiled
    log_sql, log_params = security_log.security_log_insert_sql(
        kind="claim", user=user, source="taken", target_column="verification_id", at=now
    )
    key = (connection.alias, pick_sql, log_sql)
    sql = _ONE_STATEMENT_SQL.get(key)
    if sql is None:
        field = ReviewLease._meta.get_field
        quote = connection.ops.quote_name
        holder = f"CAST(%s AS {field('holder').cast_db_type(connection)})"
        stamp = f"CAST(%s AS {field('claimed_at').cast_db_type(connection)})"
        upsert = _lease_upsert(f"SELECT pick.pk, {holder}, {stamp}, {stamp}, NULL, '' FROM pick")  # noqa: S608
        subject = quote(Verification._meta.db_table)
        sql = _ONE_STATEMENT_SQL[key] = (
            # The pick's first column is the verification's pk ("pk": Django's alias); its subject is read beside it.
            f"WITH pick AS ({pick_sql}), "  # noqa: S608 - compiled SQL and names, no values
            f"taken AS ({upsert} RETURNING {quote('verification_id')}), "
            f"logged AS ({log_sql}) "
            f"SELECT pick.pk, v.{quote('task_id')}, v.{quote('cycle')}, EXISTS (SELECT 1 FROM taken) "
            f"FROM pick JOIN {subject} v ON v.{quote('id')} = pick.pk"
        )
    return sql, [*_claim_params(pick_params, positions, now), *_lease_values(user, now), *log_params]


def _send(
    user: Any, now: datetime, compiled: _ClaimSQL, *, begin: bool = False
) -> tuple[_Candidate | None, bool, tuple[bool, bool]]:
    """Send the one-statement claim and, where the SQL form judges (``judge_in_sql``), its judgement of the lease just
    taken (``claim_sql.judged_queryset``, prepared), pipelined: one round trip; with ``begin``, a BEGIN before them
    (the caller then ends the transaction). (The candidate or None, whether it was taken, (refused, sure) of the
    judgement: (False, False), leaving it to the exact rails, without one.)"""
    sql, params = _one_statement_sql(user, now, compiled)
    judge = judge_sql("lease") if judge_in_sql() else None
    statements = [pgwire.Statement(sql, params, True)]
    if judge is not None:
        statements.append(
            pgwire.Statement(judge[0], judge_params(judge, user=user.pk, expires=now + lease_duration()), True)
        )
    answers, _ = exchange(connection, statements, begin=begin)
    row = answers[0][0] if answers[0] else None
    verdicts = {pk: (flag(r), flag(s)) for pk, r, s in answers[1]} if judge is not None else {}
    if row is None:
        return None, False, (False, False)
    candidate = _candidate(row)
    return candidate, bool(row[3]), verdicts.get(candidate[0], (False, False))


def _claim_in_one_statement(user: Any, now: datetime, compiled: _ClaimSQL) -> tuple[Any, bool]:
    """One attempt as one statement in the caller's transaction (``_send``): (the candidate's pk or None, whether it
    was taken).

    The upsert's row count is still the arbiter (a lease another claimer committed after this statement's snapshot
    makes the upsert change nothing, so ``taken`` is empty and no entry is written). The judgement came in the same
    round trip: certainly barred raises ``_Barred``, and the caller's rollback undoes the lease and the entry; where
    it cannot vouch, the exact rails run on the candidate, with the subject the statement returned beside it (no
    second read of the row)."""
    candidate, taken, (refused, sure) = _send(user, now, compiled)
    if candidate is None:
        return None, False
    if taken and (refused or (not sure and _barred(user, candidate))):
        raise _Barred(candidate[0])
    return candidate[0], taken


def _claim_in_one_round_trip(user: Any, now: datetime, compiled: _ClaimSQL) -> tuple[Any, bool] | None:
    """One attempt outside any transaction block: BEGIN, the one-statement claim and its judgement in one round trip
    (``_send``), then COMMIT, or ROLLBACK where the judgement does not vouch for the lease taken: certainly barred
    raises ``_Barred``; otherwise None, and the caller goes on statement by statement, where the exact rails decide.
    So a claim is two round trips, against the bare loop's four (BEGIN, pick, upsert, COMMIT), and no Python runs
    between the pick and the judgement. The transaction is this function's own: Django's connection stays in
    autocommit, and every way out ends the transaction."""
    import psycopg

    ended = False

    def end(command: str) -> None:
        nonlocal ended
        with connection.wrap_database_errors, psycopg.Cursor(connection.connection) as cursor:
            cursor.execute(command)
        ended = True

    try:
        candidate, taken, (refused, sure) = _send(user, now, compiled, begin=True)
        if candidate is None or not taken or (sure and not refused):
            end("COMMIT")  # a lease taken, or nothing written (a lost race, nothing left)
            return (None, False) if candidate is None else (candidate[0], taken)
        end("ROLLBACK")
    finally:
        if not ended and connection.connection is not None and not connection.connection.closed:
            with contextlib.suppress(Exception):  # the error that got here is the one to report
                end("ROLLBACK")
    if refused:
        raise _Barred(candidate[0])
    return None


def _claim_attempt(user: Any, now: datetime, exclude: frozenset[Any]) -> tuple[Any, bool]:
    """One attempt at the first claimable item not in ``exclude``: in one statement where the database writes in
    ``WITH`` (PostgreSQL) and the claim query compiled once (in one round trip with its own BEGIN outside a
    transaction block), else statement by statement in a transaction. No lease on an item the rails bar ``user``
    from is committed: the rails' SQL form judges the candidate, and where it cannot vouch for it the exact rails do
    (before the lease is written statement by statement; after the one statement, whose lease and entry a barred
    candidate rolls back). Raises ``_Barred`` with the candidate the rails bar ``user`` from."""
    if connection.vendor == "postgresql" and not exclude:
        compiled = _claim_sql()
        if compiled is not None:
            if connection.get_autocommit() and judge_in_sql():
                done = _claim_in_one_round_trip(user, now, compiled)
                return done if done is not None else _claim_in_steps(user, now, exclude)
            with transaction.atomic():
                return _claim_in_one_statement(user, now, compiled)
    return _claim_in_steps(user, now, exclude)


def review_bar(*, user: Any, verification: Verification) -> KernelError | None:
    """Why ``user`` may not decide ``verification`` (read before any lease or typing), or None.

    ``permission-denied`` for a user who may not decide; then the same rails ``review_decide`` runs (SPEC §9: the
    approval's cycle, and rails 1-3 with the reviewer's human actor as the verifier). Read-only."""
    try:
        _require_reviewer(user)
    except KernelError as exc:
        return exc
    if verification.task_id is None or verification.cycle is None:
        return None  # not a queue item: nothing to decide, nothing to bar
    return _rail_refusal(verification, actor_for_user(user))


def review_claim_next_id(*, user: Any, now: datetime | None = None, skip: Sequence[Any] = ()) -> Any:
    """Claim the first unclaimed queue item for ``user`` with a lease; its pk, or None when nothing is left to claim.

    Only an item ``user`` may decide is claimed (issue 14): the rails run for ``user`` on each candidate before its
    lease is committed, and a barred candidate is passed over (others may still claim it). Items in ``skip`` (those
    the reviewer skipped this session) are passed over too.

    A lost race (another claimer committed its lease on the candidate after this statement's snapshot) means that
    claimer made progress; the next attempt's fresh snapshot no longer sees that item. So this keeps trying while the
    query still finds a candidate, and never answers "nothing left" while an unheld item remains. Past
    ``CLAIM_ATTEMPTS`` lost races in one call it refuses with ``review-lease-not-held`` (409, try again) rather than
    say the queue is empty.
    """
    _require_reviewer(user)
    when = _now(now)
    exclude = frozenset(Verification._meta.pk.to_python(pk) for pk in skip)
    for _ in range(CLAIM_ATTEMPTS):
        try:
            pk, taken = _claim_attempt(user, when, exclude)
        except _Barred as refused:
            exclude = exclude | {refused.pk}
            continue
        if pk is None:
            return None
        if taken:
            return pk
    raise _not_held(f"{CLAIM_ATTEMPTS} items in a row were taken by other reviewers first; try again")


def review_claim_next(*, user: Any, now: datetime | None = None, skip: Sequence[Any] = ()) -> Verification | None:
    """As ``review_claim_next_id``, returning the claimed verification (with its task) instead of its pk."""
    pk = review_claim_next_id(user=user, now=now, skip=skip)
    return None if pk is None else Verification.objects.select_related("task").get(pk=pk)


@transaction.atomic
def review_claim(*, user: Any, verification: Verification, now: datetime | None = None) -> ReviewLease:
    """Claim one queue item (from its review page). Holding it already renews the lease.

    Refusals: ``not-in-review-queue`` (409) for an item that is not queued, ``review-lease-not-held`` (409) when
    another reviewer holds it.
    """
    _require_reviewer(user)
    when = _now(now)
    locked = Verification.objects.select_for_update().filter(pk=verification.pk).first()
    if locked is None:
        raise NotFound(f"no verification {verification.pk}", verification_id=str(verification.pk))
    if not in_queue(locked, now=when):
        raise ServiceError(Reason.NOT_IN_REVIEW_QUEUE, f"verification {locked.pk}", status=409)
    if _lease_held(locked.pk, user, when) is not None:
        return review_renew(user=user, verification=locked, now=when)
    if not _take_lease(locked.pk, user, when):
        raise _not_held("another reviewer holds this item")
    security_log.review_lease_recorded(kind="claim", user=user, verification_id=locked.pk)  # issue 7 §4
    return ReviewLease.objects.get(verification_id=locked.pk)


@transaction.atomic
def review_renew(*, user: Any, verification: Verification, now: datetime | None = None) -> ReviewLease:
    """Extend the lease ``user`` holds (the open review page does this); ``review-lease-not-held`` (409) otherwise."""
    _require_reviewer(user)
    when = _now(now)
    changed = ReviewLease.objects.filter(
        verification_id=verification.pk, holder=user, released_at__isnull=True, expires_at__gt=when
    ).update(expires_at=when + lease_duration())
    if changed != 1:
        raise _not_held("the lease ran out or was released; claim the item again")
    return ReviewLease.objects.get(verification_id=verification.pk)


#: Ending a reviewer's open lease on an item, compiled once (``verification.compiled``): every decision sends it.
_END_LEASE: Final = Compiled(
    "end-lease",
    ReviewLease,
    lambda verification_pk, holder_pk, now, end_reason: ReviewLease.objects.filter(
        verification_id=verification_pk, holder_id=holder_pk, released_at__isnull=True
    ),
    {
        "verification_pk": Probe.key_of(Verification),
        "holder_pk": Probe(1_000_051, 1_000_052),
        "now": Probe.instant(ReviewLease._meta.get_field("released_at")),
        "end_reason": Probe("probe-end-1", "probe-end-2", ReviewLease._meta.get_field("end_reason")),
    },
    update=lambda verification_pk, holder_pk, now, end_reason: {"released_at": now, "end_reason": end_reason},
    prepared=True,
)


def _lease_end_arguments(verification_pk: Any, user: Any, now: datetime, end_reason: str) -> dict[str, Any]:
    return {"verification_pk": verification_pk, "holder_pk": user.pk, "now": now, "end_reason": end_reason[:32]}


def _end_lease(verification_pk: Any, user: Any, now: datetime, end_reason: str) -> bool:
    """End ``user``'s open lease on the item; True when there was one."""
    return _END_LEASE.run(**_lease_end_arguments(verification_pk, user, now, end_reason)) == 1


def end_lease_later(verification_pk: Any, user: Any, now: datetime, end_reason: str) -> None:
    """``_end_lease`` for a caller that does not read the answer (a decision, which holds the lease it ends): queued
    with the caller's other writes (``compiled.writes_batched``)."""
    _END_LEASE.run_later(**_lease_end_arguments(verification_pk, user, now, end_reason))


@transaction.atomic
def review_release(
    *, user: Any, verification: Verification, now: datetime | None = None, end_reason: str = END_RELEASED
) -> bool:
    """Give the item back to the queue; True when ``user`` held a lease on it (idempotent)."""
    _require_reviewer(user)
    released = _end_lease(verification.pk, user, _now(now), end_reason)
    if released:  # issue 7 §4: on the security log
        security_log.review_lease_recorded(
            kind="release", user=user, verification_id=verification.pk, detail={"end_reason": end_reason}
        )
    return released


@transaction.atomic
def review_skip(*, user: Any, verification: Verification, reason: str = "", now: datetime | None = None) -> bool:
    """ "Skip": give the item back to the queue (when ``user`` holds it) and record the skip, with its optional reason,
    on the security log (issue 14). The caller keeps the item out of this reviewer's next claims for the session
    (``review_claim_next_id(skip=...)``). True when a lease was released."""
    _require_reviewer(user)
    text = " ".join(str(reason or "").split())
    if len(text) > MAX_SKIP_REASON_CHARS:
        raise ServiceError(Reason.INVALID_REQUEST, f"a skip reason is at most {MAX_SKIP_REASON_CHARS} characters")
    released = _end_lease(verification.pk, user, _now(now), END_SKIPPED)
    security_log.review_lease_recorded(
        kind="release",
        user=user,
        verification_id=verification.pk,
        detail={"end_reason": END_SKIPPED, "skip_reason": text, "held": released},
    )
    return released


def _rail_refusal(locked: Verification, actor: Actor) -> KernelError | None:
    """Rails 1–3 with the reviewer's human actor as the verifier (SPEC §9); and the approval's cycle (rail 1)."""
    if locked.task_id is None or locked.cycle is None:
        return ServiceError(Reason.NOT_IN_REVIEW_QUEUE, "a verification without a subject", status=409)
    # SPEC §1: the cycle's workers (claimants AND submitters), their boundaries, the link committers and the task's
    # current cycle come from the one selector, exactly as for an automated run. It reads the task by its pk only.
    return _rails_over(cycle_workers(Task(pk=locked.task_id), locked.cycle), kernel_actor(actor))


def _rails_over(found: CycleWorkers, verifier: kactors.Actor) -> KernelError | None:
    """The decision rails over the subject's ``cycle_workers`` with ``verifier`` (the reviewer's kernel record): the
    approval's cycle is the task's current one, then ``check_verifier``."""
    cycle = found.cycle
    stale = check_approval_cycle(approval_cycle=cycle, current_cycle=found.current_cycle)
    if stale is not None:
        return DecisionRefused(stale, f"the verification is of cycle {cycle}; the task has been reopened")
    refusal = check_verifier(
        verifier=verifier, cycle=cycle, claims=found.claims, links=found.links, workers=found.workers
    )
    if refusal is None:
        return None
    return DecisionRefused(refusal.reason, f"rail {refusal.rail}: {refusal.detail}", details={"rail": refusal.rail})
