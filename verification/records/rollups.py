"""Dashboard rollups kept by the database (issue 6 §3): counts that stay the same size however many records there are.

The dashboards aggregate rollup tables (``verification.models``: ``QueueBacklogMember``/``QueueBacklogCount``,
``DecisionDayCount``, ``DecisionDelay``, ``VerificationDayCount``, ``FindingDayCount``, ``OpenFindingCount``) instead of
the records, so a page costs the same with a thousand verifications or a million. The rollups are written by
triggers on the records' tables, in the statement that changes the record, so every writer keeps them right: the
services, ``bulk_create``, a data migration, raw SQL. ``rebuild`` recomputes them from the records in set-based
statements (the migration that creates them runs it; ``manage.py rebuild_rollups`` runs it by hand, and the tests
compare it with what the triggers kept).

What the triggers do, once per row on SQLite (``TRIGGERS``: row triggers) and once per statement over its transition
tables on PostgreSQL (``PG_TRIGGERS``, set-based); the shared pieces of SQL differ only in the vendor's date and time
functions (``_Dialect``):

- a verification inserted or updated in a queue column (verdict, flagged, human_decided, pending_until,
  submitted_at, supersedes, reason), or its read phases (``ReadPhase``) inserted, changed or deleted: *refresh* its
  queue membership, and that of the verification it supersedes (a re-run takes the old one out of the queue).
  Refresh = take its ``QueueBacklogMember`` rows out of their counts, recompute them from the verification as it is
  now, and count them in again. Membership is the queue's definition (``review_selectors.queue_member_q``: reads as
  flagged, ``read_state``) without the clock: what a head reads as changes only at its PENDING deadlines, so its
  time line is cut there into spans (the head columns before ``pending_until``, then each stored phase, or the
  unrecorded-expiry rule where none is stored) and each span in which it reads flagged is one member row, with its
  reason as read and the hours it starts (``due_hour``, -1: from the beginning) and ends in (``until_hour``,
  ``FOREVER``: never). A dashboard sums the spans that cover the whole current hour from the counts and counts the
  queue items with a span edge inside the current hour itself, exactly (``review_selectors.edge_in_hour_q``).
- a verification inserted, or updated in ``created_at`` or ``automated_verdict``: its day's completed and abstained
  counts lose the old row's share and gain the new one's.
- a review decision: its day, reviewer and action count +1; a PASS or FAIL (it has a receipt) adds its delay from
  submission; its verification's membership is refreshed ("needs more evidence" takes it out of the queue).
- a finding: its kind's open count +1. A finding event: ``raised`` and ``closed`` count per day; a finding's first
  ``closed`` event takes one from its kind's open count.
- a verification's ``submitted_at`` changed: its decisions' delays are recomputed. A verification deleted (one
  without receipts or decisions; the others are protected): as if its row changed to nothing.

Decisions, findings and their events are append-only (the database guards refuse UPDATE and DELETE), so they have
only INSERT triggers. The test runner's flush empties the rollups with everything else (on SQLite the DELETE trigger
stands aside while ``db_guards.purge_allowed`` is on).

SQLite drops a table's triggers when a later migration rebuilds the table, so ``ensure_installed`` runs after every
``migrate``: it re-installs missing triggers and then rebuilds, because changes made while they were missing were
not counted.
"""

# ruff: noqa: S608 - every statement here is built from this module's own constants (table names, SQL fragments); no values

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Final

from django.db import transaction
from django.db.backends.base.base import BaseDatabaseWrapper

from verification.db_guards import PURGE_FUNCTION
from verification.kernel.reasons import Reason
from verification.kernel.verdicts import Verdict

PREFIX: Final = "reviewportal_rollup_"
#: ``due_hour`` of a span that starts before any hour (the head as issued), ``until_hour`` of one that never ends.
SINCE_EVER: Final = -1
FOREVER: Final = 10**12

# Table names (``verification.models``); literal here so the SQL reads as SQL, checked against the models by a test.
VERIFICATION: Final = "verification_verification"
READ_PHASE: Final = "verification_readphase"
DECISION: Final = "verification_reviewdecision"
FINDING: Final = "verification_finding"
FINDING_EVENT: Final = "verification_findingevent"
MEMBER: Final = "verification_queuebacklogmember"
BACKLOG: Final = "verification_queuebacklogcount"
REASONS: Final = "verification_queuereasoncount"
DECISION_DAY: Final = "verification_decisiondaycount"
DELAY: Final = "verification_decisiondelay"
VERIFICATION_DAY: Final = "verification_verificationdaycount"
FINDING_DAY: Final = "verification_findingdaycount"
OPEN_FINDINGS: Final = "verification_openfindingcount"
ROLLUP_TABLES: Final = (MEMBER, BACKLOG, REASONS, DECISION_DAY, DELAY, VERIFICATION_DAY, FINDING_DAY, OPEN_FINDINGS)

#: The columns whose change can move a verification into or out of the queue.
#: (``reason`` moves it between the per-reason counts.)
QUEUE_COLUMNS: Final = (
    "verdict", "flagged", "human_decided", "pending_until", "submitted_at", "supersedes_id", "reason"
)
ABSTAIN_COLUMNS: Final = ("created_at", "automated_verdict")
#: The automated verdicts whose determination is ``cannot_determine`` (SPEC §3): the ABSTAIN path.
ABSTAIN_VERDICTS: Final = (Verdict.UNKNOWN.value, Verdict.NOT_RUN.value)
_PENDING: Final = Verdict.PENDING.value
_EXPIRED: Final = Reason.PENDING_EXPIRED.value


@dataclass(frozen=True)
class _Dialect:
    vendor: str
    hour: Callable[[str], str]  # whole hours since the epoch of a timestamp
    day: Callable[[str], str]  # its UTC calendar day
    seconds_between: Callable[[str, str], str]  # later - earlier, in seconds (a float)
    greatest: str  # the larger of two values


_POSTGRESQL: Final = _Dialect(
    vendor="postgresql",
    hour=lambda ts: f"CAST(FLOOR(EXTRACT(EPOCH FROM {ts}) / 3600) AS bigint)",
    day=lambda ts: f"CAST(({ts} AT TIME ZONE 'UTC') AS date)",
    seconds_between=lambda later, earlier: f"CAST(EXTRACT(EPOCH FROM ({later} - {earlier})) AS double precision)",
    greatest="GREATEST",
)
# SQLite keeps Django's datetimes as UTC text 'YYYY-MM-DD HH:MM:SS[.ffffff]'. Its date functions round fractions of
# a second (23:59:59.9999995 would be the next day), so the whole seconds and the date are cut out of the text.
_SQLITE: Final = _Dialect(
    vendor="sqlite",
    hour=lambda ts: f"(CAST(STRFTIME('%s', SUBSTR({ts}, 1, 19)) AS INTEGER) / 3600)",
    day=lambda ts: f"SUBSTR({ts}, 1, 10)",
    seconds_between=lambda later, earlier: f"((JULIANDAY({later}) - JULIANDAY({earlier})) * 86400.0)",
    greatest="MAX",
)


def _dialect(vendor: str) -> _Dialect:
    if vendor == "postgresql":
        return _POSTGRESQL
    if vendor == "sqlite":
        return _SQLITE
    raise NotImplementedError(f"dashboard rollups are not written for {vendor!r}")


# --- the statements --------------------------------------------------------------------------------------------------


def _queue_member_select(d: _Dialect, where: str) -> str:
    """The member rows (spans read as flagged) of the verifications ``v`` that ``where`` selects, as
    ``review_selectors.queue_member_q`` and ``read_state.read_q`` define them, cut at the PENDING deadlines instead of
    compared to a clock: (1) the head columns until ``pending_until`` (for ever without one); (2) from it on, each
    stored phase, from its start (not before ``pending_until``) to its end; (3) from ``pending_until`` to the first
    phase that holds a later instant (for ever without one), the unrecorded-expiry rule: a PENDING head reads flagged,
    ``pending-expired``, any other its columns."""
    base = (
        f"{where} AND v.verdict IS NOT NULL AND NOT v.human_decided "
        "AND (v.flagged OR v.pending_until IS NOT NULL) "
        f"AND NOT EXISTS (SELECT 1 FROM {VERIFICATION} w WHERE w.supersedes_id = v.id) "
        f"AND NOT EXISTS (SELECT 1 FROM {DECISION} r WHERE r.verification_id = v.id AND r.action = 'MORE_EVIDENCE')"
    )
    submitted = d.hour("v.submitted_at")
    deadline = d.hour("v.pending_until")
    later = "(p.ends_at IS NULL OR p.ends_at > v.pending_until)"  # a phase that holds an instant past the deadline
    first = f"(SELECT MIN(p.starts_at) FROM {READ_PHASE} p WHERE p.verification_id = v.id AND {later})"
    return (
        f"SELECT v.id, {submitted}, {SINCE_EVER}, COALESCE({deadline}, {FOREVER}), COALESCE(v.reason, '') "
        f"FROM {VERIFICATION} v WHERE {base} AND v.flagged "
        "UNION ALL "
        f"SELECT v.id, {submitted}, {d.greatest}({d.hour('p.starts_at')}, {deadline}), "
        f"COALESCE({d.hour('p.ends_at')}, {FOREVER}), COALESCE(p.reason, '') "
        f"FROM {VERIFICATION} v JOIN {READ_PHASE} p ON p.verification_id = v.id "
        f"WHERE {base} AND v.pending_until IS NOT NULL AND p.flagged AND {later} "
        "UNION ALL "
        f"SELECT v.id, {submitted}, {deadline}, COALESCE({d.hour(first)}, {FOREVER}), "
        f"CASE WHEN v.verdict = '{_PENDING}' THEN '{_EXPIRED}' ELSE COALESCE(v.reason, '') END "
        f"FROM {VERIFICATION} v WHERE {base} AND v.pending_until IS NOT NULL "
        f"AND (v.verdict = '{_PENDING}' OR v.flagged) AND COALESCE({first} > v.pending_until, TRUE)"
    )


_MEMBER_COLUMNS: Final = "verification_id, submitted_hour, due_hour, until_hour, reason"
_BACKLOG_KEY: Final = ("submitted_hour", "due_hour", "until_hour")
_REASONS_KEY: Final = ("reason", "due_hour", "until_hour")


def _refresh_membership(d: _Dialect, ids: str) -> list[str]:
    """Recompute the membership of the verifications whose id is ``ids`` (``= NEW.id`` on SQLite, ``= ANY(rp_ids)``
    on PostgreSQL; a NULL changes nothing): their member rows leave their counts, are recomputed, and count again."""
    out = []
    for table, key in ((BACKLOG, _BACKLOG_KEY), (REASONS, _REASONS_KEY)):
        columns = ", ".join(key)
        out.append(
            f"UPDATE {table} SET n = {table}.n - x.k FROM (SELECT {columns}, COUNT(*) AS k FROM {MEMBER} "
            f"WHERE verification_id {ids} GROUP BY {columns}) x WHERE "
            + " AND ".join(f"{table}.{column} = x.{column}" for column in key)
        )
    out += [
        f"DELETE FROM {MEMBER} WHERE verification_id {ids}",
        f"INSERT INTO {MEMBER} ({_MEMBER_COLUMNS}) " + _queue_member_select(d, f"v.id {ids}"),
    ]
    for table, key in ((BACKLOG, _BACKLOG_KEY), (REASONS, _REASONS_KEY)):
        columns = ", ".join(key)
        out.append(
            f"INSERT INTO {table} ({columns}, n) SELECT {columns}, COUNT(*) FROM {MEMBER} "
            f"WHERE verification_id {ids} GROUP BY {columns} "
            f"ON CONFLICT ({columns}) DO UPDATE SET n = {table}.n + excluded.n"
        )
    return out


def _completed(row: str) -> str:
    verdict = f"{row}.automated_verdict"
    return f"(CASE WHEN {verdict} IS NOT NULL AND {verdict} <> '{_PENDING}' THEN 1 ELSE 0 END)"


def _abstained(row: str) -> str:
    verdicts = ", ".join(f"'{v}'" for v in ABSTAIN_VERDICTS)
    return f"(CASE WHEN {row}.automated_verdict IN ({verdicts}) THEN 1 ELSE 0 END)"


def _count_outcome(d: _Dialect, row: str, sign: int) -> str:
    """Add (``sign`` 1) or take away (-1) ``row``'s share (``NEW`` or ``OLD``) of its day's outcome counts."""
    return (
        f"INSERT INTO {VERIFICATION_DAY} (day, completed, abstained) "
        f"SELECT {d.day(f'{row}.created_at')}, {sign} * {_completed(row)}, {sign} * {_abstained(row)} "
        f"WHERE {_completed(row)} = 1 "
        f"ON CONFLICT (day) DO UPDATE SET completed = {VERIFICATION_DAY}.completed + excluded.completed, "
        f"abstained = {VERIFICATION_DAY}.abstained + excluded.abstained"
    )


# --- SQLite: row triggers ------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Trigger:
    name: str
    table: str
    event: str  # INSERT, UPDATE or DELETE
    when_changed: tuple[str, ...]  # UPDATE: fire only when one of these columns changed
    body: Callable[[_Dialect], list[str]]


def _on_verification_insert(d: _Dialect) -> list[str]:
    return [
        *_refresh_membership(d, "= NEW.id"),
        *_refresh_membership(d, "= NEW.supersedes_id"),
        _count_outcome(d, "NEW", 1),
    ]


def _on_verification_queue_change(d: _Dialect) -> list[str]:
    return [
        *_refresh_membership(d, "= NEW.id"),
        *_refresh_membership(d, "= OLD.supersedes_id"),
        *_refresh_membership(d, "= NEW.supersedes_id"),
    ]


def _on_verification_outcome_change(d: _Dialect) -> list[str]:
    return [_count_outcome(d, "OLD", -1), _count_outcome(d, "NEW", 1)]


def _on_verification_submitted_change(d: _Dialect) -> list[str]:
    return [
        f"UPDATE {DELAY} SET seconds = {d.seconds_between(f'{DELAY}.decided_at', 'NEW.submitted_at')} "
        f"WHERE decision_id IN (SELECT r.id FROM {DECISION} r WHERE r.verification_id = NEW.id)"
    ]


def _on_verification_delete(d: _Dialect) -> list[str]:
    """A verification without receipts or decisions can be deleted (the others are protected): it leaves the queue,
    the one it superseded comes back, and its outcome leaves its day."""
    return [
        *_refresh_membership(d, "= OLD.id"),
        *_refresh_membership(d, "= OLD.supersedes_id"),
        _count_outcome(d, "OLD", -1),
    ]


def _on_decision_insert(d: _Dialect) -> list[str]:
    return [
        f"INSERT INTO {DECISION_DAY} (day, user_id, action, n) "
        f"SELECT {d.day('NEW.created_at')}, NEW.user_id, NEW.action, 1 WHERE NEW.user_id IS NOT NULL "
        f"ON CONFLICT (day, user_id, action) DO UPDATE SET n = {DECISION_DAY}.n + excluded.n",
        f"INSERT INTO {DELAY} (decision_id, decided_at, seconds) "
        f"SELECT NEW.id, NEW.created_at, {d.seconds_between('NEW.created_at', 'v.submitted_at')} "
        f"FROM {VERIFICATION} v WHERE v.id = NEW.verification_id AND NEW.receipt_id IS NOT NULL",
        *_refresh_membership(d, "= NEW.verification_id"),
    ]


def _on_phase_insert(d: _Dialect) -> list[str]:
    return _refresh_membership(d, "= NEW.verification_id")


def _on_phase_update(d: _Dialect) -> list[str]:
    return [*_refresh_membership(d, "= OLD.verification_id"), *_refresh_membership(d, "= NEW.verification_id")]


def _on_phase_delete(d: _Dialect) -> list[str]:
    return _refresh_membership(d, "= OLD.verification_id")


def _on_finding_insert(d: _Dialect) -> list[str]:
    return [
        f"INSERT INTO {OPEN_FINDINGS} (kind, n) SELECT NEW.kind, 1 WHERE NEW.kind IS NOT NULL "
        f"ON CONFLICT (kind) DO UPDATE SET n = {OPEN_FINDINGS}.n + excluded.n",
    ]


def _on_finding_event_insert(d: _Dialect) -> list[str]:
    return [
        f"INSERT INTO {FINDING_DAY} (day, action, n) "
        f"SELECT {d.day('NEW.created_at')}, NEW.action, 1 WHERE NEW.action IN ('raised', 'closed') "
        f"ON CONFLICT (day, action) DO UPDATE SET n = {FINDING_DAY}.n + excluded.n",
        f"UPDATE {OPEN_FINDINGS} SET n = {OPEN_FINDINGS}.n - 1 "
        f"WHERE NEW.action = 'closed' AND kind = (SELECT f.kind FROM {FINDING} f WHERE f.id = NEW.finding_id) "
        f"AND NOT EXISTS (SELECT 1 FROM {FINDING_EVENT} e "
        "WHERE e.finding_id = NEW.finding_id AND e.action = 'closed' AND e.id <> NEW.id)",
    ]


TRIGGERS: Final = (
    _Trigger(f"{PREFIX}verification_insert", VERIFICATION, "INSERT", (), _on_verification_insert),
    _Trigger(f"{PREFIX}verification_queue", VERIFICATION, "UPDATE", QUEUE_COLUMNS, _on_verification_queue_change),
    _Trigger(f"{PREFIX}verification_outcome", VERIFICATION, "UPDATE", ABSTAIN_COLUMNS, _on_verification_outcome_change),
    _Trigger(
        f"{PREFIX}verification_submitted", VERIFICATION, "UPDATE", ("submitted_at",), _on_verification_submitted_change
    ),
    _Trigger(f"{PREFIX}verification_delete", VERIFICATION, "DELETE", (), _on_verification_delete),
    _Trigger(f"{PREFIX}decision_insert", DECISION, "INSERT", (), _on_decision_insert),
    _Trigger(f"{PREFIX}phase_insert", READ_PHASE, "INSERT", (), _on_phase_insert),
    _Trigger(f"{PREFIX}phase_update", READ_PHASE, "UPDATE", (), _on_phase_update),
    _Trigger(f"{PREFIX}phase_delete", READ_PHASE, "DELETE", (), _on_phase_delete),
    _Trigger(f"{PREFIX}finding_insert", FINDING, "INSERT", (), _on_finding_insert),
    _Trigger(f"{PREFIX}finding_event_insert", FINDING_EVENT, "INSERT", (), _on_finding_event_insert),
)


# --- PostgreSQL: statement-level triggers over transition tables ------------------------------------------------------
#
# The same rollups, kept once per statement instead of once per row: a statement's changed rows are its transition
# tables (``new_rows``, ``old_rows``), and each count is adjusted by one grouped upsert. A bulk write (an INSERT …
# SELECT of 100,000 rows) then costs a few set-based statements, not 100,000 trigger calls that each rewrite the same
# counter rows (whose old versions pile up until the transaction ends). PostgreSQL allows no column list or WHEN on
# such triggers, so an UPDATE trigger compares the old and new rows itself.

_PG_IDS: Final = "rp_ids"  # the plpgsql variable holding the verification ids whose membership is refreshed


def _pg_refresh_membership(d: _Dialect) -> list[str]:
    """``_refresh_membership`` for every id in ``rp_ids`` at once.

    First the verifications' rows are locked (NO KEY UPDATE: what an UPDATE of them takes anyway, and no obstacle to
    a receipt's foreign key), so two transactions refreshing one verification take turns, and the second reads the
    member row the first left (each statement of a trigger function reads what is committed when it starts). Without
    it, a decision and a re-run arriving at once (neither of which updates the verification's row) could both take the
    same member out of its count."""
    return [
        f"PERFORM 1 FROM {VERIFICATION} WHERE id = ANY({_PG_IDS}) ORDER BY id FOR NO KEY UPDATE",
        *_refresh_membership(d, f"= ANY({_PG_IDS})"),
    ]


def _pg_count_outcomes(d: _Dialect, shares: str) -> str:
    """Add the signed shares (``shares``: rows of created_at, automated_verdict, sign) to their days' counts."""
    return (
        f"INSERT INTO {VERIFICATION_DAY} (day, completed, abstained) "
        f"SELECT {d.day('s.created_at')}, SUM(s.sign * {_completed('s')}), SUM(s.sign * {_abstained('s')}) "
        f"FROM ({shares}) s GROUP BY {d.day('s.created_at')} "
        f"HAVING SUM(s.sign * {_completed('s')}) <> 0 OR SUM(s.sign * {_abstained('s')}) <> 0 "
        f"ON CONFLICT (day) DO UPDATE SET completed = {VERIFICATION_DAY}.completed + excluded.completed, "
        f"abstained = {VERIFICATION_DAY}.abstained + excluded.abstained"
    )


def _pg_ids(select: str) -> str:
    return f"{_PG_IDS} := ARRAY(SELECT DISTINCT x FROM ({select}) AS ids (x) WHERE x IS NOT NULL)"


def _pg_changed(columns: tuple[str, ...]) -> str:
    return " OR ".join(f"o.{c} IS DISTINCT FROM n.{c}" for c in columns)


_PG_PAIRS: Final = "new_rows n JOIN old_rows o ON o.id = n.id"


def _pg_on_verification_insert(d: _Dialect) -> list[str]:
    return [
        _pg_ids("SELECT id FROM new_rows UNION ALL SELECT supersedes_id FROM new_rows"),
        *_pg_refresh_membership(d),
        _pg_count_outcomes(d, "SELECT created_at, automated_verdict, 1 AS sign FROM new_rows"),
    ]


def _pg_on_verification_update(d: _Dialect) -> list[str]:
    moved = f"FROM {_PG_PAIRS} WHERE {_pg_changed(QUEUE_COLUMNS)}"
    outcome = f"FROM {_PG_PAIRS} WHERE {_pg_changed(ABSTAIN_COLUMNS)}"
    return [
        _pg_ids(
            f"SELECT n.id {moved} UNION ALL SELECT o.supersedes_id {moved} UNION ALL SELECT n.supersedes_id {moved}"
        ),
        *_pg_refresh_membership(d),
        _pg_count_outcomes(
            d,
            f"SELECT o.created_at, o.automated_verdict, -1 AS sign {outcome} "
            f"UNION ALL SELECT n.created_at, n.automated_verdict, 1 AS sign {outcome}",
        ),
        f"UPDATE {DELAY} t SET seconds = {d.seconds_between('t.decided_at', 'n.submitted_at')} "
        f"FROM {DECISION} r, {_PG_PAIRS} "
        "WHERE t.decision_id = r.id AND r.verification_id = n.id AND o.submitted_at IS DISTINCT FROM n.submitted_at",
    ]


def _pg_on_verification_delete(d: _Dialect) -> list[str]:
    return [
        _pg_ids("SELECT id FROM old_rows UNION ALL SELECT supersedes_id FROM old_rows"),
        *_pg_refresh_membership(d),
        _pg_count_outcomes(d, "SELECT created_at, automated_verdict, -1 AS sign FROM old_rows"),
    ]


def _pg_on_decision_insert(d: _Dialect) -> list[str]:
    return [
        f"INSERT INTO {DECISION_DAY} (day, user_id, action, n) "
        f"SELECT {d.day('created_at')}, user_id, action, COUNT(*) FROM new_rows WHERE user_id IS NOT NULL "
        f"GROUP BY {d.day('created_at')}, user_id, action "
        f"ON CONFLICT (day, user_id, action) DO UPDATE SET n = {DECISION_DAY}.n + excluded.n",
        f"INSERT INTO {DELAY} (decision_id, decided_at, seconds) "
        f"SELECT r.id, r.created_at, {d.seconds_between('r.created_at', 'v.submitted_at')} "
        f"FROM new_rows r JOIN {VERIFICATION} v ON v.id = r.verification_id WHERE r.receipt_id IS NOT NULL",
        _pg_ids("SELECT verification_id FROM new_rows"),
        *_pg_refresh_membership(d),
    ]


def _pg_on_phase_change(rows: str) -> Callable[[_Dialect], list[str]]:
    """A statement that inserted, changed or deleted read phases refreshes their verifications (``rows``: the
    transition tables it has)."""

    def body(d: _Dialect) -> list[str]:
        return [
            _pg_ids(" UNION ALL ".join(f"SELECT verification_id FROM {r}" for r in rows.split())),
            *_pg_refresh_membership(d),
        ]

    return body


def _pg_on_finding_insert(d: _Dialect) -> list[str]:
    return [
        f"INSERT INTO {OPEN_FINDINGS} (kind, n) SELECT kind, COUNT(*) FROM new_rows WHERE kind IS NOT NULL "
        f"GROUP BY kind ON CONFLICT (kind) DO UPDATE SET n = {OPEN_FINDINGS}.n + excluded.n",
    ]


def _pg_on_finding_event_insert(d: _Dialect) -> list[str]:
    return [
        f"INSERT INTO {FINDING_DAY} (day, action, n) "
        f"SELECT {d.day('created_at')}, action, COUNT(*) FROM new_rows WHERE action IN ('raised', 'closed') "
        f"GROUP BY {d.day('created_at')}, action "
        f"ON CONFLICT (day, action) DO UPDATE SET n = {FINDING_DAY}.n + excluded.n",
        # Findings whose first closing is in this statement: no closing event from before it.
        f"UPDATE {OPEN_FINDINGS} t SET n = t.n - x.k FROM (SELECT f.kind, COUNT(*) AS k "
        f"FROM (SELECT DISTINCT finding_id FROM new_rows WHERE action = 'closed') c "
        f"JOIN {FINDING} f ON f.id = c.finding_id "
        f"WHERE NOT EXISTS (SELECT 1 FROM {FINDING_EVENT} e WHERE e.finding_id = c.finding_id "
        "AND e.action = 'closed' AND e.id NOT IN (SELECT id FROM new_rows)) GROUP BY f.kind) x WHERE t.kind = x.kind",
    ]


@dataclass(frozen=True)
class _StatementTrigger:
    name: str
    table: str
    event: str
    transitions: str  # the REFERENCING clause's tables
    body: Callable[[_Dialect], list[str]]


_NEW: Final = "NEW TABLE AS new_rows"
_OLD: Final = "OLD TABLE AS old_rows"
PG_TRIGGERS: Final = (
    _StatementTrigger(f"{PREFIX}verification_insert", VERIFICATION, "INSERT", _NEW, _pg_on_verification_insert),
    _StatementTrigger(
        f"{PREFIX}verification_update", VERIFICATION, "UPDATE", f"{_OLD} {_NEW}", _pg_on_verification_update
    ),
    _StatementTrigger(f"{PREFIX}verification_delete", VERIFICATION, "DELETE", _OLD, _pg_on_verification_delete),
    _StatementTrigger(f"{PREFIX}decision_insert", DECISION, "INSERT", _NEW, _pg_on_decision_insert),
    _StatementTrigger(f"{PREFIX}phase_insert", READ_PHASE, "INSERT", _NEW, _pg_on_phase_change("new_rows")),
    _StatementTrigger(
        f"{PREFIX}phase_update", READ_PHASE, "UPDATE", f"{_OLD} {_NEW}", _pg_on_phase_change("old_rows new_rows")
    ),
    _StatementTrigger(f"{PREFIX}phase_delete", READ_PHASE, "DELETE", _OLD, _pg_on_phase_change("old_rows")),
    _StatementTrigger(f"{PREFIX}finding_insert", FINDING, "INSERT", _NEW, _pg_on_finding_insert),
    _StatementTrigger(f"{PREFIX}finding_event_insert", FINDING_EVENT, "INSERT", _NEW, _pg_on_finding_event_insert),
)


def trigger_names(vendor: str) -> set[str]:
    return {t.name for t in (PG_TRIGGERS if vendor == "postgresql" else TRIGGERS)}


def _pg_install_sql() -> list[str]:
    out: list[str] = []
    for trigger in PG_TRIGGERS:
        body = "".join(f"    {sql};\n" for sql in trigger.body(_POSTGRESQL))
        out += [
            f"CREATE OR REPLACE FUNCTION {trigger.name}() RETURNS trigger LANGUAGE plpgsql AS $$\n"
            f"DECLARE {_PG_IDS} uuid[];\nBEGIN\n{body}    RETURN NULL;\nEND\n$$",
            f'DROP TRIGGER IF EXISTS "{trigger.name}" ON "{trigger.table}"',
            f'CREATE TRIGGER "{trigger.name}" AFTER {trigger.event} ON "{trigger.table}" '
            f"REFERENCING {trigger.transitions} FOR EACH STATEMENT EXECUTE FUNCTION {trigger.name}()",
        ]
    return out


def _sqlite_install_sql() -> list[str]:
    out: list[str] = []
    for trigger in TRIGGERS:
        when = " OR ".join(f"OLD.{c} IS NOT NEW.{c}" for c in trigger.when_changed)  # NULLs compared too
        if trigger.event == "DELETE":  # not while the test runner's flush empties the tables (db_guards)
            when = f"NOT {PURGE_FUNCTION}()"
        body = "".join(f"{sql}; " for sql in trigger.body(_SQLITE))
        out += [
            f'DROP TRIGGER IF EXISTS "{trigger.name}"',
            f'CREATE TRIGGER "{trigger.name}" AFTER {trigger.event} ON "{trigger.table}" FOR EACH ROW '
            + (f"WHEN {when} " if when else "")
            + f"BEGIN {body}END",
        ]
    return out


def install_sql(vendor: str) -> list[str]:
    """The statements that install every rollup trigger (idempotent: each replaces its own)."""
    _dialect(vendor)  # refuses a vendor without rollups
    return _pg_install_sql() if vendor == "postgresql" else _sqlite_install_sql()


def uninstall_sql(vendor: str) -> list[str]:
    if vendor == "postgresql":
        return [
            sql
            for t in PG_TRIGGERS
            for sql in (f'DROP TRIGGER IF EXISTS "{t.name}" ON "{t.table}"', f"DROP FUNCTION IF EXISTS {t.name}()")
        ]
    return [f'DROP TRIGGER IF EXISTS "{t.name}"' for t in TRIGGERS]


def rebuild_sql(vendor: str) -> list[str]:
    """Recompute every rollup from the records: empty them, then one set-based INSERT … SELECT each."""
    d = _dialect(vendor)
    return [
        *(f"DELETE FROM {table}" for table in ROLLUP_TABLES),
        f"INSERT INTO {MEMBER} ({_MEMBER_COLUMNS}) " + _queue_member_select(d, "1 = 1"),
        *(
            f"INSERT INTO {table} ({', '.join(key)}, n) "
            f"SELECT {', '.join(key)}, COUNT(*) FROM {MEMBER} GROUP BY {', '.join(key)}"
            for table, key in ((BACKLOG, _BACKLOG_KEY), (REASONS, _REASONS_KEY))
        ),
        f"INSERT INTO {VERIFICATION_DAY} (day, completed, abstained) "
        f"SELECT {d.day('v.created_at')}, SUM({_completed('v')}), SUM({_abstained('v')}) FROM {VERIFICATION} v "
        f"WHERE {_completed('v')} = 1 GROUP BY {d.day('v.created_at')}",
        f"INSERT INTO {DECISION_DAY} (day, user_id, action, n) "
        f"SELECT {d.day('r.created_at')}, r.user_id, r.action, COUNT(*) FROM {DECISION} r "
        f"GROUP BY {d.day('r.created_at')}, r.user_id, r.action",
        f"INSERT INTO {DELAY} (decision_id, decided_at, seconds) "
        f"SELECT r.id, r.created_at, {d.seconds_between('r.created_at', 'v.submitted_at')} "
        f"FROM {DECISION} r JOIN {VERIFICATION} v ON v.id = r.verification_id WHERE r.receipt_id IS NOT NULL",
        f"INSERT INTO {FINDING_DAY} (day, action, n) "
        f"SELECT {d.day('e.created_at')}, e.action, COUNT(*) FROM {FINDING_EVENT} e "
        f"WHERE e.action IN ('raised', 'closed') GROUP BY {d.day('e.created_at')}, e.action",
        f"INSERT INTO {OPEN_FINDINGS} (kind, n) SELECT f.kind, COUNT(*) FROM {FINDING} f "
        f"WHERE NOT EXISTS (SELECT 1 FROM {FINDING_EVENT} e WHERE e.finding_id = f.id AND e.action = 'closed') "
        "GROUP BY f.kind",
    ]


# --- running them ----------------------------------------------------------------------------------------------------


def rebuild(connection: BaseDatabaseWrapper) -> None:
    """Recompute the rollups from the records, in one transaction. On PostgreSQL the rollup tables are locked first
    (EXCLUSIVE: reads go on, writers' triggers wait), so a record written meanwhile is counted exactly once: either
    it committed before the lock and the recount sees it, or its trigger runs after the recount."""
    with transaction.atomic(using=connection.alias), connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            cursor.execute(f"LOCK TABLE {', '.join(ROLLUP_TABLES)} IN EXCLUSIVE MODE")
        for sql in rebuild_sql(connection.vendor):
            cursor.execute(sql)


def _installed(connection: BaseDatabaseWrapper) -> dict[str, str]:
    """The rollup triggers present: name -> table."""
    with connection.cursor() as cursor:
        if connection.vendor == "sqlite":
            cursor.execute(
                "SELECT name, tbl_name FROM sqlite_master WHERE type = 'trigger' AND name LIKE %s", [f"{PREFIX}%"]
            )
        else:
            cursor.execute(
                "SELECT t.tgname, c.relname FROM pg_trigger t JOIN pg_class c ON c.oid = t.tgrelid "
                "WHERE NOT t.tgisinternal AND t.tgname LIKE %s",
                [f"{PREFIX}%"],
            )
        return {name: table for name, table in cursor.fetchall()}


def installed(connection: BaseDatabaseWrapper) -> set[str]:
    """The names of the rollup triggers present."""
    return set(_installed(connection))


def install(connection: BaseDatabaseWrapper) -> None:
    """Install this version's triggers and drop any other rollup trigger (one an earlier version installed)."""
    stale = {
        name: table for name, table in _installed(connection).items() if name not in trigger_names(connection.vendor)
    }
    with connection.cursor() as cursor:
        for name, table in stale.items():
            if connection.vendor == "postgresql":
                cursor.execute(f'DROP TRIGGER IF EXISTS "{name}" ON "{table}"')
                cursor.execute(f"DROP FUNCTION IF EXISTS {name}()")
            else:
                cursor.execute(f'DROP TRIGGER IF EXISTS "{name}"')
        for sql in install_sql(connection.vendor):
            cursor.execute(sql)


def ensure_installed(connection: BaseDatabaseWrapper) -> bool:
    """Install missing triggers and then rebuild (what happened without them was not counted); True if it did.
    Nothing to do before the rollup tables exist (a database migrated to an older state)."""
    if connection.vendor not in ("postgresql", "sqlite"):
        return False
    if not _schema_ready(connection):
        return False
    if installed(connection) == trigger_names(connection.vendor):
        return False
    with transaction.atomic(using=connection.alias):
        install(connection)
        rebuild(connection)
    return True


def _schema_ready(connection: BaseDatabaseWrapper) -> bool:
    """The tables this version's SQL reads and writes exist, in this version's shape (the members' spans, 0015)."""
    if not {*ROLLUP_TABLES, READ_PHASE} <= set(connection.introspection.table_names()):
        return False
    with connection.cursor() as cursor:
        columns = {c.name for c in connection.introspection.get_table_description(cursor, MEMBER)}
    return "until_hour" in columns


def install_and_rebuild(apps: Any, schema_editor: Any) -> None:
    """The migration's forward step. Nothing while the rollup tables are not yet in this version's shape (migrations
    0008 and 0014 run this module as it is now, before 0015 makes the members spans): the migration that completes
    them runs it again, and the rebuild then counts every record written meanwhile."""
    if not _schema_ready(schema_editor.connection):
        return
    with transaction.atomic(using=schema_editor.connection.alias):
        install(schema_editor.connection)
        rebuild(schema_editor.connection)


def uninstall(apps: Any, schema_editor: Any) -> None:
    """The migration's backward step."""
    with schema_editor.connection.cursor() as cursor:
        for sql in uninstall_sql(schema_editor.connection.vendor):
            cursor.execute(sql)
