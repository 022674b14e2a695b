"""The dashboard rollups' triggers (``rollups``) and the statements that install and remove them, built from
``rollups_sql``'s shared pieces.

What the triggers do, once per row on SQLite (``TRIGGERS``: row triggers) and once per statement over its transition
tables on PostgreSQL (``PG_TRIGGERS``, set-based); the shared pieces of SQL differ only in the vendor's date and time
functions (``rollups_sql.Dialect``):

- a verification inserted or updated in a queue column (verdict, flagged, human_decided, pending_until,
  submitted_at, supersedes, reason), or its read phases (``ReadPhase``) inserted, changed or deleted: *refresh* its
  queue membership, and that of the verification it supersedes (a re-run takes the old one out of the queue).
  Refresh = take its ``QueueBacklogMember`` rows out of their counts, recompute them from the verification as it is
  now, and count them in again. Membership is the queue's definition (``review_selectors.queue_member_q``: reads as
  flagged, ``read_state``) without the clock: what a head reads as changes only at its PENDING deadlines, so its
  time line is cut there into spans (the head columns before ``pending_until``, then each stored phase, or the
  unrecorded-expiry rule where none is stored) and each span in which it reads flagged is one member row, with its
  reason as read, its exact start and end (``due_at``, ``until_at``; NULL: from the beginning, for ever) and the hours
  they fall in (``due_hour``, -1: from the beginning; ``until_hour``, ``FOREVER``: never). The queue's counts sum the
  spans that cover the whole current hour from the counts and count the member rows with an edge inside the current
  hour whose instants hold ``now`` (``review_selectors.count_queue_reasons``); the backlog counts the queue items
  with such an edge from the queue itself (``review_selectors.edge_in_hour_q``).
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
"""

# ruff: noqa: S608 - every statement here is built from this module's own constants (table names, SQL fragments); no values

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Final

from verification.db_guards import PURGE_FUNCTION
from verification.records.rollups_sql import (
    ABSTAIN_COLUMNS,
    DECISION,
    DECISION_DAY,
    DELAY,
    FINDING,
    FINDING_DAY,
    FINDING_EVENT,
    MEMBER,
    OPEN_FINDINGS,
    POSTGRESQL,
    PREFIX,
    QUEUE_COLUMNS,
    READ_PHASE,
    SQLITE,
    VERIFICATION,
    VERIFICATION_DAY,
    Dialect,
    abstained,
    completed,
    count_outcome,
    dialect,
    may_be_member,
    refresh_membership,
)

# --- SQLite: row triggers ------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Trigger:
    name: str
    table: str
    event: str  # INSERT, UPDATE or DELETE
    when_changed: tuple[str, ...]  # UPDATE: fire only when one of these columns changed
    body: Callable[[Dialect], list[str]]


def _on_verification_insert(d: Dialect) -> list[str]:
    return [
        *refresh_membership(d, "= NEW.id"),
        *refresh_membership(d, "= NEW.supersedes_id"),
        count_outcome(d, "NEW", 1),
    ]


def _on_verification_queue_change(d: Dialect) -> list[str]:
    return [
        *refresh_membership(d, "= NEW.id"),
        *refresh_membership(d, "= OLD.supersedes_id"),
        *refresh_membership(d, "= NEW.supersedes_id"),
    ]


def _on_verification_outcome_change(d: Dialect) -> list[str]:
    return [count_outcome(d, "OLD", -1), count_outcome(d, "NEW", 1)]


def _on_verification_submitted_change(d: Dialect) -> list[str]:
    return [
        f"UPDATE {DELAY} SET seconds = {d.seconds_between(f'{DELAY}.decided_at', 'NEW.submitted_at')} "
        f"WHERE decision_id IN (SELECT r.id FROM {DECISION} r WHERE r.verification_id = NEW.id)"
    ]


def _on_verification_delete(d: Dialect) -> list[str]:
    """A verification without receipts or decisions can be deleted (the others are protected): it leaves the queue,
    the one it superseded comes back, and its outcome leaves its day."""
    return [
        *refresh_membership(d, "= OLD.id"),
        *refresh_membership(d, "= OLD.supersedes_id"),
        count_outcome(d, "OLD", -1),
    ]


def _on_decision_insert(d: Dialect) -> list[str]:
    return [
        f"INSERT INTO {DECISION_DAY} (day, user_id, action, n) "
        f"SELECT {d.day('NEW.created_at')}, NEW.user_id, NEW.action, 1 WHERE NEW.user_id IS NOT NULL "
        f"ON CONFLICT (day, user_id, action) DO UPDATE SET n = {DECISION_DAY}.n + excluded.n",
        f"INSERT INTO {DELAY} (decision_id, decided_at, seconds) "
        f"SELECT NEW.id, NEW.created_at, {d.seconds_between('NEW.created_at', 'v.submitted_at')} "
        f"FROM {VERIFICATION} v WHERE v.id = NEW.verification_id AND NEW.receipt_id IS NOT NULL",
        *refresh_membership(d, "= NEW.verification_id"),
    ]


def _on_phase_insert(d: Dialect) -> list[str]:
    return refresh_membership(d, "= NEW.verification_id")


def _on_phase_update(d: Dialect) -> list[str]:
    return [*refresh_membership(d, "= OLD.verification_id"), *refresh_membership(d, "= NEW.verification_id")]


def _on_phase_delete(d: Dialect) -> list[str]:
    return refresh_membership(d, "= OLD.verification_id")


def _on_finding_insert(d: Dialect) -> list[str]:
    return [
        f"INSERT INTO {OPEN_FINDINGS} (kind, n) SELECT NEW.kind, 1 WHERE NEW.kind IS NOT NULL "
        f"ON CONFLICT (kind) DO UPDATE SET n = {OPEN_FINDINGS}.n + excluded.n",
    ]


def _on_finding_event_insert(d: Dialect) -> list[str]:
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


def _pg_refresh_membership(d: Dialect, keep: str = "") -> list[str]:
    """``refresh_membership`` for every id in ``rp_ids`` at once.

    First the verifications' rows are locked (NO KEY UPDATE: what an UPDATE of them takes anyway, and no obstacle to
    a receipt's foreign key), so two transactions refreshing one verification take turns, and the second reads the
    member row the first left (each statement of a trigger function reads what is committed when it starts). Without
    it, a decision and a re-run arriving at once (neither of which updates the verification's row) could both take the
    same member out of its count.

    ``keep``: a condition on ``x`` (an id) that ids must meet to be refreshed, judged after the lock (so it reads what
    a refresh that held the lock before left). With no id left, the refresh's statements are not run: a run's outcome
    that is no queue member, before or after, costs the rollups nothing but its day's count (issue 15)."""
    refresh = "; ".join(refresh_membership(d, f"= ANY({_PG_IDS})"))
    return [
        f"PERFORM 1 FROM {VERIFICATION} WHERE id = ANY({_PG_IDS}) ORDER BY id FOR NO KEY UPDATE",
        *([f"{_PG_IDS} := ARRAY(SELECT x FROM unnest({_PG_IDS}) AS ids (x) WHERE {keep})"] if keep else []),
        f"IF cardinality({_PG_IDS}) > 0 THEN {refresh}; END IF",
    ]


def _pg_count_outcomes(d: Dialect, shares: str) -> str:
    """Add the signed shares (``shares``: rows of created_at, automated_verdict, sign) to their days' counts."""
    return (
        f"INSERT INTO {VERIFICATION_DAY} (day, completed, abstained) "
        f"SELECT {d.day('s.created_at')}, SUM(s.sign * {completed('s')}), SUM(s.sign * {abstained('s')}) "
        f"FROM ({shares}) s GROUP BY {d.day('s.created_at')} "
        f"HAVING SUM(s.sign * {completed('s')}) <> 0 OR SUM(s.sign * {abstained('s')}) <> 0 "
        f"ON CONFLICT (day) DO UPDATE SET completed = {VERIFICATION_DAY}.completed + excluded.completed, "
        f"abstained = {VERIFICATION_DAY}.abstained + excluded.abstained"
    )


def _pg_ids(select: str) -> str:
    return f"{_PG_IDS} := ARRAY(SELECT DISTINCT x FROM ({select}) AS ids (x) WHERE x IS NOT NULL)"


def _pg_changed(columns: tuple[str, ...]) -> str:
    return " OR ".join(f"o.{c} IS DISTINCT FROM n.{c}" for c in columns)


_PG_PAIRS: Final = "new_rows n JOIN old_rows o ON o.id = n.id"


def _pg_on_verification_insert(d: Dialect) -> list[str]:
    """A new row is refreshed only if its own columns may make it a member (``may_be_member``: a new submission, with
    no verdict yet, cannot be one); the row it supersedes only if it has member rows (being superseded can only take
    it out of the queue), judged after the lock."""
    return [
        _pg_ids(f"SELECT n.id FROM new_rows n WHERE {may_be_member('n')} UNION ALL SELECT supersedes_id FROM new_rows"),
        *_pg_refresh_membership(
            d,
            keep=f"x IN (SELECT id FROM new_rows) OR EXISTS (SELECT 1 FROM {MEMBER} m WHERE m.verification_id = x)",
        ),
        _pg_count_outcomes(d, "SELECT created_at, automated_verdict, 1 AS sign FROM new_rows"),
    ]


def _pg_on_verification_update(d: Dialect) -> list[str]:
    """A changed row is refreshed only if it may be a member before or after (``may_be_member``: the member rows it
    has were made from its old columns); the rows it supersedes, before and after, only if that link changed (their
    membership reads whether something supersedes them, nothing else of this row)."""
    moved = f"FROM {_PG_PAIRS} WHERE ({_pg_changed(QUEUE_COLUMNS)})"
    outcome = f"FROM {_PG_PAIRS} WHERE {_pg_changed(ABSTAIN_COLUMNS)}"
    relinked = f"{moved} AND o.supersedes_id IS DISTINCT FROM n.supersedes_id"
    return [
        _pg_ids(
            f"SELECT n.id {moved} AND ({may_be_member('o')} OR {may_be_member('n')}) "
            f"UNION ALL SELECT o.supersedes_id {relinked} UNION ALL SELECT n.supersedes_id {relinked}"
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


def _pg_on_verification_delete(d: Dialect) -> list[str]:
    return [
        _pg_ids("SELECT id FROM old_rows UNION ALL SELECT supersedes_id FROM old_rows"),
        *_pg_refresh_membership(d),
        _pg_count_outcomes(d, "SELECT created_at, automated_verdict, -1 AS sign FROM old_rows"),
    ]


def _pg_on_decision_insert(d: Dialect) -> list[str]:
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


def _pg_on_phase_change(rows: str) -> Callable[[Dialect], list[str]]:
    """A statement that inserted, changed or deleted read phases refreshes their verifications (``rows``: the
    transition tables it has)."""

    def body(d: Dialect) -> list[str]:
        return [
            _pg_ids(" UNION ALL ".join(f"SELECT verification_id FROM {r}" for r in rows.split())),
            *_pg_refresh_membership(d),
        ]

    return body


def _pg_on_finding_insert(d: Dialect) -> list[str]:
    return [
        f"INSERT INTO {OPEN_FINDINGS} (kind, n) SELECT kind, COUNT(*) FROM new_rows WHERE kind IS NOT NULL "
        f"GROUP BY kind ON CONFLICT (kind) DO UPDATE SET n = {OPEN_FINDINGS}.n + excluded.n",
    ]


def _pg_on_finding_event_insert(d: Dialect) -> list[str]:
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
    body: Callable[[Dialect], list[str]]
    #: A condition under which the body has nothing to do (its statements would all touch no row): the function
    #: returns before running them. A statement-level trigger fires for every statement, also one that changed no
    #: column the rollups read (a run's attempt count) or no row at all (a DELETE of no read phase), and the body's
    #: statements cost ~0.4 ms even then.
    nothing_to_do: str = ""


_NEW: Final = "NEW TABLE AS new_rows"
_OLD: Final = "OLD TABLE AS old_rows"
#: The columns whose change any statement of ``_pg_on_verification_update`` acts on (the membership refresh, the
#: outcome counts, the decision delays); an UPDATE that changed none of them leaves every rollup as it was.
_UPDATE_READS: Final = (*QUEUE_COLUMNS, *ABSTAIN_COLUMNS, "submitted_at")


def _none_in(rows: str) -> str:
    return f"NOT EXISTS (SELECT 1 FROM {rows})"


PG_TRIGGERS: Final = (
    _StatementTrigger(
        f"{PREFIX}verification_insert", VERIFICATION, "INSERT", _NEW, _pg_on_verification_insert, _none_in("new_rows")
    ),
    _StatementTrigger(
        f"{PREFIX}verification_update",
        VERIFICATION,
        "UPDATE",
        f"{_OLD} {_NEW}",
        _pg_on_verification_update,
        f"NOT EXISTS (SELECT 1 FROM {_PG_PAIRS} WHERE {_pg_changed(tuple(dict.fromkeys(_UPDATE_READS)))})",
    ),
    _StatementTrigger(
        f"{PREFIX}verification_delete", VERIFICATION, "DELETE", _OLD, _pg_on_verification_delete, _none_in("old_rows")
    ),
    _StatementTrigger(
        f"{PREFIX}decision_insert", DECISION, "INSERT", _NEW, _pg_on_decision_insert, _none_in("new_rows")
    ),
    _StatementTrigger(
        f"{PREFIX}phase_insert", READ_PHASE, "INSERT", _NEW, _pg_on_phase_change("new_rows"), _none_in("new_rows")
    ),
    _StatementTrigger(
        f"{PREFIX}phase_update",
        READ_PHASE,
        "UPDATE",
        f"{_OLD} {_NEW}",
        _pg_on_phase_change("old_rows new_rows"),
        _none_in("new_rows"),
    ),
    _StatementTrigger(
        f"{PREFIX}phase_delete", READ_PHASE, "DELETE", _OLD, _pg_on_phase_change("old_rows"), _none_in("old_rows")
    ),
    _StatementTrigger(f"{PREFIX}finding_insert", FINDING, "INSERT", _NEW, _pg_on_finding_insert),
    _StatementTrigger(f"{PREFIX}finding_event_insert", FINDING_EVENT, "INSERT", _NEW, _pg_on_finding_event_insert),
)


def trigger_names(vendor: str) -> set[str]:
    return {t.name for t in (PG_TRIGGERS if vendor == "postgresql" else TRIGGERS)}


#: How each function's statements are planned. PL/pgSQL keeps a plan per statement for the session, but with the
#: default (``auto``) a statement over the ids (``= ANY(rp_ids)``) was planned afresh on every call: its generic plan,
#: costed for an array of unknown length, never looked cheaper than a custom one. Planning the refresh's statements
#: cost ~1.5 ms of the 1.7-2.5 ms a one-row UPDATE of a verification spent in its trigger (their execution: 0.25 ms);
#: with generic plans, kept for the session and re-planned when the tables' statistics change, it is ~0.3 ms (issue 15:
#: every run, decision and re-run updates a verification). The statements look rows up by key, so one plan serves.
_PG_FUNCTION_SETTINGS: Final = "SET plan_cache_mode = force_generic_plan"


def _pg_install_sql() -> list[str]:
    out: list[str] = []
    for trigger in PG_TRIGGERS:
        body = "".join(f"    {sql};\n" for sql in trigger.body(POSTGRESQL))
        if trigger.nothing_to_do:
            body = f"    IF {trigger.nothing_to_do} THEN\n        RETURN NULL;\n    END IF;\n{body}"
        out += [
            f"CREATE OR REPLACE FUNCTION {trigger.name}() RETURNS trigger LANGUAGE plpgsql {_PG_FUNCTION_SETTINGS} "
            "AS $$\n"
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
        body = "".join(f"{sql}; " for sql in trigger.body(SQLITE))
        out += [
            f'DROP TRIGGER IF EXISTS "{trigger.name}"',
            f'CREATE TRIGGER "{trigger.name}" AFTER {trigger.event} ON "{trigger.table}" FOR EACH ROW '
            + (f"WHEN {when} " if when else "")
            + f"BEGIN {body}END",
        ]
    return out


def install_sql(vendor: str) -> list[str]:
    """The statements that install every rollup trigger (idempotent: each replaces its own)."""
    dialect(vendor)  # refuses a vendor without rollups
    return _pg_install_sql() if vendor == "postgresql" else _sqlite_install_sql()


def uninstall_sql(vendor: str) -> list[str]:
    if vendor == "postgresql":
        return [
            sql
            for t in PG_TRIGGERS
            for sql in (f'DROP TRIGGER IF EXISTS "{t.name}" ON "{t.table}"', f"DROP FUNCTION IF EXISTS {t.name}()")
        ]
    return [f'DROP TRIGGER IF EXISTS "{t.name}"' for t in TRIGGERS]
