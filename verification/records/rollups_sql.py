"""The SQL of the dashboard rollups (``rollups``): the tables, the two vendors' dialects, the pieces every trigger and
the rebuild share, and the rebuild's statements.

The pieces differ between the vendors only in their date and time functions (``Dialect``): a trigger body on SQLite
(``rollups_triggers.TRIGGERS``, once per row) and on PostgreSQL (``rollups_triggers.PG_TRIGGERS``, once per statement
over its transition tables) is built from the same pieces as ``rebuild_sql``: the member spans
(``_queue_member_select``, which ``refresh_membership`` runs) and the outcome shares (``completed``/``abstained``,
which ``count_outcome`` adds), so a count kept by a trigger and one recomputed by the rebuild follow one definition.
"""

# ruff: noqa: S608 - every statement here is built from this module's own constants (table names, SQL fragments); no values

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Final

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
    "verdict",
    "flagged",
    "human_decided",
    "pending_until",
    "submitted_at",
    "supersedes_id",
    "reason",
)
ABSTAIN_COLUMNS: Final = ("created_at", "automated_verdict")
#: The automated verdicts whose determination is ``cannot_determine`` (SPEC §3): the ABSTAIN path.
ABSTAIN_VERDICTS: Final = (Verdict.UNKNOWN.value, Verdict.NOT_RUN.value)
_PENDING: Final = Verdict.PENDING.value
_EXPIRED: Final = Reason.PENDING_EXPIRED.value


@dataclass(frozen=True)
class Dialect:
    vendor: str
    hour: Callable[[str], str]  # whole hours since the epoch of a timestamp
    day: Callable[[str], str]  # its UTC calendar day
    seconds_between: Callable[[str, str], str]  # later - earlier, in seconds (a float)
    greatest: str  # the larger of two values


POSTGRESQL: Final = Dialect(
    vendor="postgresql",
    hour=lambda ts: f"CAST(FLOOR(EXTRACT(EPOCH FROM {ts}) / 3600) AS bigint)",
    day=lambda ts: f"CAST(({ts} AT TIME ZONE 'UTC') AS date)",
    seconds_between=lambda later, earlier: f"CAST(EXTRACT(EPOCH FROM ({later} - {earlier})) AS double precision)",
    greatest="GREATEST",
)
# SQLite keeps Django's datetimes as UTC text 'YYYY-MM-DD HH:MM:SS[.ffffff]'. Its date functions round fractions of
# a second (23:59:59.9999995 would be the next day), so the whole seconds and the date are cut out of the text.
SQLITE: Final = Dialect(
    vendor="sqlite",
    hour=lambda ts: f"(CAST(STRFTIME('%s', SUBSTR({ts}, 1, 19)) AS INTEGER) / 3600)",
    day=lambda ts: f"SUBSTR({ts}, 1, 10)",
    seconds_between=lambda later, earlier: f"((JULIANDAY({later}) - JULIANDAY({earlier})) * 86400.0)",
    greatest="MAX",
)


def dialect(vendor: str) -> Dialect:
    if vendor == "postgresql":
        return POSTGRESQL
    if vendor == "sqlite":
        return SQLITE
    raise NotImplementedError(f"dashboard rollups are not written for {vendor!r}")


# --- the statements --------------------------------------------------------------------------------------------------


def may_be_member(row: str) -> str:
    """What ``row``'s own columns must hold for it to have any member row (``_queue_member_select``'s every branch
    requires it): a verdict, no human decision, and flagged or a PENDING deadline. A row without it has none."""
    return (
        f"({row}.verdict IS NOT NULL AND NOT {row}.human_decided "
        f"AND ({row}.flagged OR {row}.pending_until IS NOT NULL))"
    )


def _queue_member_select(d: Dialect, where: str) -> str:
    """The member rows (spans read as flagged) of the verifications ``v`` that ``where`` selects, as
    ``review_selectors.queue_member_q`` and ``read_state.read_q`` define them, cut at the PENDING deadlines instead of
    compared to a clock: (1) the head columns until ``pending_until`` (for ever without one); (2) from it on, each
    stored phase, from its start (not before ``pending_until``) to its end; (3) from ``pending_until`` to the first
    phase that holds a later instant (for ever without one), the unrecorded-expiry rule: a PENDING head reads flagged,
    ``pending-expired``, any other its columns.

    Each row is (verification, submission hour, start hour, end hour, reason as read, start, end): the span is
    [start, end) exactly (a NULL start: from the beginning; a NULL end: for ever), the instants ``read_q`` compares
    ``now`` with (``pending_until``, a phase's ``starts_at`` and ``ends_at``), and the hours are theirs."""
    base = (
        f"{where} AND {may_be_member('v')} "
        f"AND NOT EXISTS (SELECT 1 FROM {VERIFICATION} w WHERE w.supersedes_id = v.id) "
        f"AND NOT EXISTS (SELECT 1 FROM {DECISION} r WHERE r.verification_id = v.id AND r.action = 'MORE_EVIDENCE')"
    )
    submitted = d.hour("v.submitted_at")
    deadline = d.hour("v.pending_until")
    later = "(p.ends_at IS NULL OR p.ends_at > v.pending_until)"  # a phase that holds an instant past the deadline
    first = f"(SELECT MIN(p.starts_at) FROM {READ_PHASE} p WHERE p.verification_id = v.id AND {later})"
    starts = f"{d.greatest}(p.starts_at, v.pending_until)"  # both NOT NULL here (SQLite: its MAX of the UTC text)
    return (
        f"SELECT v.id, {submitted}, {SINCE_EVER}, COALESCE({deadline}, {FOREVER}), COALESCE(v.reason, ''), "
        "NULL, v.pending_until "
        f"FROM {VERIFICATION} v WHERE {base} AND v.flagged "
        "UNION ALL "
        f"SELECT v.id, {submitted}, {d.hour(starts)}, COALESCE({d.hour('p.ends_at')}, {FOREVER}), "
        f"COALESCE(p.reason, ''), {starts}, p.ends_at "
        f"FROM {VERIFICATION} v JOIN {READ_PHASE} p ON p.verification_id = v.id "
        f"WHERE {base} AND v.pending_until IS NOT NULL AND p.flagged AND {later} "
        "UNION ALL "
        f"SELECT v.id, {submitted}, {deadline}, COALESCE({d.hour(first)}, {FOREVER}), "
        f"CASE WHEN v.verdict = '{_PENDING}' THEN '{_EXPIRED}' ELSE COALESCE(v.reason, '') END, "
        f"v.pending_until, {first} "
        f"FROM {VERIFICATION} v WHERE {base} AND v.pending_until IS NOT NULL "
        f"AND (v.verdict = '{_PENDING}' OR v.flagged) AND COALESCE({first} > v.pending_until, TRUE)"
    )


_MEMBER_COLUMNS: Final = "verification_id, submitted_hour, due_hour, until_hour, reason, due_at, until_at"
_BACKLOG_KEY: Final = ("submitted_hour", "due_hour", "until_hour")
_REASONS_KEY: Final = ("reason", "due_hour", "until_hour")


def refresh_membership(d: Dialect, ids: str) -> list[str]:
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


def completed(row: str) -> str:
    verdict = f"{row}.automated_verdict"
    return f"(CASE WHEN {verdict} IS NOT NULL AND {verdict} <> '{_PENDING}' THEN 1 ELSE 0 END)"


def abstained(row: str) -> str:
    verdicts = ", ".join(f"'{v}'" for v in ABSTAIN_VERDICTS)
    return f"(CASE WHEN {row}.automated_verdict IN ({verdicts}) THEN 1 ELSE 0 END)"


def count_outcome(d: Dialect, row: str, sign: int) -> str:
    """Add (``sign`` 1) or take away (-1) ``row``'s share (``NEW`` or ``OLD``) of its day's outcome counts."""
    return (
        f"INSERT INTO {VERIFICATION_DAY} (day, completed, abstained) "
        f"SELECT {d.day(f'{row}.created_at')}, {sign} * {completed(row)}, {sign} * {abstained(row)} "
        f"WHERE {completed(row)} = 1 "
        f"ON CONFLICT (day) DO UPDATE SET completed = {VERIFICATION_DAY}.completed + excluded.completed, "
        f"abstained = {VERIFICATION_DAY}.abstained + excluded.abstained"
    )


def rebuild_sql(vendor: str) -> list[str]:
    """Recompute every rollup from the records: empty them, then one set-based INSERT … SELECT each."""
    d = dialect(vendor)
    return [
        *(f"DELETE FROM {table}" for table in ROLLUP_TABLES),
        f"INSERT INTO {MEMBER} ({_MEMBER_COLUMNS}) " + _queue_member_select(d, "1 = 1"),
        *(
            f"INSERT INTO {table} ({', '.join(key)}, n) "
            f"SELECT {', '.join(key)}, COUNT(*) FROM {MEMBER} GROUP BY {', '.join(key)}"
            for table, key in ((BACKLOG, _BACKLOG_KEY), (REASONS, _REASONS_KEY))
        ),
        f"INSERT INTO {VERIFICATION_DAY} (day, completed, abstained) "
        f"SELECT {d.day('v.created_at')}, SUM({completed('v')}), SUM({abstained('v')}) FROM {VERIFICATION} v "
        f"WHERE {completed('v')} = 1 GROUP BY {d.day('v.created_at')}",
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
