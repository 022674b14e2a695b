"""The dashboards' rollups
(``verification.records.rollups``): what the triggers keep equals what ``rebuild`` recomputes from
the records, the triggers come back (with a recount) when something removed them, and the portal refuses a time zone
the daily counts do not match. Their agreement with each dashboard's definition is ``test_dashboard_consistency``'s.
"""

from __future__ import annotations

import re
from datetime import timedelta
from typing import Any

import pytest
from django.core import checks
from django.db import connection
from django.utils import timezone

from tests.conftest import as_owner, owner_cursor
from tests.history.conftest import Bulk, Story, decide
from tests.portal.conftest import Queue
from verification import models
from verification.actors.services.actors import actor_for_user
from verification.records import rollups, rollups_sql, rollups_triggers
from verification.reviews.services.findings import finding_close
from verification.runs.models import Verification

pytestmark = pytest.mark.django_db

HOUR = timedelta(hours=1)
ROLLUP_MODELS = (
    models.QueueBacklogMember,
    models.QueueBacklogCount,
    models.QueueReasonCount,
    models.DecisionDayCount,
    models.DecisionDelay,
    models.VerificationDayCount,
    models.FindingDayCount,
    models.OpenFindingCount,
)


def snapshot() -> dict[str, set[tuple[Any, ...]]]:
    """Every rollup table's rows (counters at zero left out: a count that went back to nothing is no row)."""
    out: dict[str, set[tuple[Any, ...]]] = {}
    for model in ROLLUP_MODELS:
        fields = [f.attname for f in model._meta.concrete_fields if f.attname != "id"]
        rows = model.objects.values_list(*fields)
        counters = [i for i, name in enumerate(fields) if name in ("n", "completed", "abstained")]
        kept = {
            tuple(round(v, 3) if isinstance(v, float) else v for v in row)
            for row in rows
            if not counters or any(row[i] for i in counters)
        }
        out[model._meta.db_table] = kept
    return out


def varied_records(queue: Queue, bulk: Bulk, story: Story, reviewer: Any, manager: Any) -> None:
    """Records through the services, ``bulk_create``, queryset updates and a delete."""
    now = timezone.now()
    flagged = {"verdict": "UNKNOWN", "automated_verdict": "UNKNOWN", "determination": "cannot_determine",
               "flagged": True, "reason": "missing-baseline"}
    bulk.add(3, start=now - 5 * HOUR, **flagged)
    bulk.add(2, start=now - timedelta(days=9), step=HOUR, **flagged)
    pending = bulk.add(3, start=now - 2 * HOUR, verdict="PENDING", automated_verdict="PENDING", determination=None,
                       pending_until=now + HOUR)
    bulk.add(4, start=now - timedelta(days=2))
    Verification.objects.filter(pk=pending[0].pk).update(pending_until=now - HOUR)
    Verification.objects.filter(pk=pending[1].pk).update(verdict="UNKNOWN", automated_verdict="UNKNOWN", flagged=True)
    Verification.objects.filter(pk=pending[2].pk).delete()
    item = queue.unknown("decided later")
    decide(reviewer, item, "FAIL", rationale="wrong", now=timezone.now())
    finding_close(actor=actor_for_user(manager), finding=story.integrity_finding, rationale="restored")


def test_the_table_names_in_the_sql_are_the_models() -> None:
    tables = {model._meta.db_table for model in ROLLUP_MODELS}
    assert tables == set(rollups_sql.ROLLUP_TABLES)
    assert models.Verification._meta.db_table == rollups_sql.VERIFICATION
    assert models.ReviewDecision._meta.db_table == rollups_sql.DECISION
    assert models.Finding._meta.db_table == rollups_sql.FINDING
    assert models.FindingEvent._meta.db_table == rollups_sql.FINDING_EVENT


def test_what_the_triggers_keep_is_what_a_rebuild_recomputes(
    queue: Queue, bulk: Bulk, story: Story, reviewer: Any, manager: Any
) -> None:
    varied_records(queue, bulk, story, reviewer, manager)
    kept = snapshot()
    assert kept[rollups_sql.MEMBER] and kept[rollups_sql.BACKLOG]
    assert kept[rollups_sql.DECISION_DAY] and kept[rollups_sql.DELAY]
    assert kept[rollups_sql.VERIFICATION_DAY] and kept[rollups_sql.FINDING_DAY] and kept[rollups_sql.OPEN_FINDINGS]
    rollups.rebuild(connection)
    assert snapshot() == kept


def test_the_triggers_are_in_place_and_come_back_with_a_recount(queue: Queue, bulk: Bulk) -> None:
    names = rollups_triggers.trigger_names(connection.vendor)
    assert rollups.installed(connection) == names
    assert not rollups.ensure_installed(connection)  # nothing missing: nothing done
    with owner_cursor() as cursor:  # triggers are the owner's to drop and create (SPEC §8)
        for sql in rollups_triggers.uninstall_sql(connection.vendor):
            cursor.execute(sql)
    assert not rollups.installed(connection)
    bulk.add(2, start=timezone.now() - HOUR, verdict="MISMATCH", automated_verdict="MISMATCH",
             determination="cannot_determine", flagged=True, reason="baseline-changed")
    assert not models.QueueBacklogMember.objects.exists()  # written while nothing kept count
    with as_owner():
        assert rollups.ensure_installed(connection)
    assert rollups.installed(connection) == names
    assert models.QueueBacklogMember.objects.count() == 2  # the recount found them


def test_installing_drops_a_rollup_trigger_an_earlier_version_left(queue: Queue) -> None:
    stale = f"{rollups_sql.PREFIX}old_version"
    with owner_cursor() as cursor:
        if connection.vendor == "postgresql":
            cursor.execute(
                f"CREATE FUNCTION {stale}() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN RETURN NULL; END $$"
            )
            cursor.execute(
                f'CREATE TRIGGER "{stale}" AFTER INSERT ON {rollups_sql.VERIFICATION} '
                f"FOR EACH STATEMENT EXECUTE FUNCTION {stale}()"
            )
        else:
            cursor.execute(
                f'CREATE TRIGGER "{stale}" AFTER INSERT ON {rollups_sql.VERIFICATION} BEGIN SELECT 1; END'
            )
    assert stale in rollups.installed(connection)
    with as_owner():
        assert rollups.ensure_installed(connection)  # the set differs: reinstalled
    assert rollups.installed(connection) == rollups_triggers.trigger_names(connection.vendor)


def test_a_time_zone_other_than_utc_is_refused(settings: Any) -> None:
    from reviewportal.checks import time_zone_is_utc

    assert time_zone_is_utc() == []
    settings.TIME_ZONE = "Europe/Paris"
    errors = time_zone_is_utc()
    assert [e.id for e in errors] == ["reviewportal.E003"] and errors[0].level == checks.ERROR


def test_the_rebuild_command_recounts_what_was_lost(queue: Queue, bulk: Bulk) -> None:
    from io import StringIO

    from django.core.management import call_command

    bulk.add(3, start=timezone.now() - HOUR, verdict="NOT_RUN", automated_verdict="NOT_RUN",
             determination="cannot_determine", flagged=True, reason="no-result")
    kept = snapshot()
    models.QueueBacklogCount.objects.all().delete()  # a restore that lost a table, say
    models.VerificationDayCount.objects.all().delete()
    out = StringIO()
    call_command("rebuild_rollups", stdout=out)
    assert "rollups recomputed" in out.getvalue() and rollups_sql.BACKLOG in out.getvalue()
    assert snapshot() == kept


def _at_once(items: list[Verification], *works: Any) -> None:
    """Each of ``works`` over ``items`` in its own thread and transaction, the threads meeting at a barrier before
    each item (so each item's writes arrive at the same moment); no thread may fail, and the rollups must equal a
    recount afterwards."""
    import threading

    from django.db import connection as main_connection
    from django.db import transaction

    errors: list[BaseException] = []
    start = threading.Barrier(len(works))

    def run(work: Any) -> None:
        try:
            for item in items:
                start.wait(timeout=30)
                with transaction.atomic():
                    work(item)
        except BaseException as exc:  # noqa: BLE001 - reported by the assertion
            errors.append(exc)
            start.abort()
        finally:
            main_connection.close()

    threads = [threading.Thread(target=run, args=(work,)) for work in works]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    assert not errors, errors
    kept = snapshot()
    rollups.rebuild(connection)
    assert snapshot() == kept


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_a_decision_and_a_re_run_arriving_at_once_are_both_counted_once(
    queue: Queue, bulk: Bulk, reviewer: Any
) -> None:
    """A request for more evidence and a re-run of the same verification, each in its own transaction at the same
    moment: neither updates the verification's row, both refresh its membership. Neither may fail, and the rollups
    must equal a recount afterwards."""
    from verification.reviews.models import ReviewDecision
    from verification.reviews.services.decisions import new_request_key

    items = bulk.add(12, start=timezone.now() - 3 * HOUR, verdict="UNKNOWN", automated_verdict="UNKNOWN",
                     determination="cannot_determine", flagged=True, reason="missing-baseline")
    actor = actor_for_user(reviewer)

    def request_more(item: Verification) -> None:
        ReviewDecision.objects.create(request_key=new_request_key(), verification=item, user=reviewer, actor=actor,
                                      action="MORE_EVIDENCE", rationale="more, please")

    def re_run(item: Verification) -> None:
        Verification.objects.create(rubric_hash=item.rubric_hash, submission_hash=item.submission_hash,
                                    task=item.task, cycle=1, supersedes=item, verdict="UNKNOWN",
                                    automated_verdict="UNKNOWN", determination="cannot_determine", flagged=True,
                                    reason="missing-baseline")

    _at_once(items, request_more, re_run)
    # Every original left the queue (superseded and sent back); every re-run is in it.
    members = set(models.QueueBacklogMember.objects.values_list("verification_id", flat=True))
    assert not members & {v.pk for v in items}
    assert len(members) == len(items)


def test_an_update_the_trigger_skips_changes_no_column_its_statements_compare() -> None:
    """The update trigger returns at once when no column in ``_UPDATE_READS`` changed (issue 15): that is sound only
    while every old/new comparison its statements make is over such a column."""
    body = " ".join(rollups_triggers._pg_on_verification_update(rollups_sql.dialect("postgresql")))
    compared = set(re.findall(r"o\.(\w+) IS DISTINCT FROM n\.\1", body))
    assert compared  # the body compares old and new rows (else this test reads nothing)
    assert compared <= set(rollups_triggers._UPDATE_READS)
    guard = next(t for t in rollups_triggers.PG_TRIGGERS if t.event == "UPDATE" and t.table == rollups_sql.VERIFICATION)
    assert all(f"o.{column} IS DISTINCT FROM n.{column}" in guard.nothing_to_do for column in compared)


@pytest.mark.postgres
def test_the_installed_functions_return_early_and_still_count_what_moved(queue: Queue) -> None:
    """Migration 0016 installed the guarded functions; an UPDATE of a column the rollups do not read leaves them as
    they were, and one of a column they read is still counted (the same as a recount)."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_get_functiondef(%s::regproc)", [f"{rollups_sql.PREFIX}verification_update"])
        source = cursor.fetchone()[0]
    assert "IF NOT EXISTS (SELECT 1 FROM new_rows n JOIN old_rows o ON o.id = n.id WHERE" in source
    item = queue.unknown("kept in the queue")
    before = snapshot()
    assert before[rollups_sql.MEMBER]
    Verification.objects.filter(pk=item.pk).update(attempts=7, last_error="an attempt, no rollup")
    assert snapshot() == before
    Verification.objects.filter(pk=item.pk).update(verdict="PASS", automated_verdict="PASS", flagged=False)
    moved = snapshot()
    assert moved != before
    rollups.rebuild(connection)
    assert snapshot() == moved


@pytest.mark.postgres
def test_every_installed_function_plans_its_statements_once_per_session() -> None:
    """Migration 0019: each rollup function runs with generic plans (planned once, not on every call)."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT proname, proconfig FROM pg_proc WHERE proname = ANY(%s)",
            [sorted(rollups_triggers.trigger_names("postgresql"))],
        )
        found = dict(cursor.fetchall())
    assert set(found) == rollups_triggers.trigger_names("postgresql")
    assert all(config == ["plan_cache_mode=force_generic_plan"] for config in found.values()), found


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_a_re_run_and_a_verdict_that_makes_the_old_one_a_member_arriving_at_once(queue: Queue, bulk: Bulk) -> None:
    """Migration 0018: the insert trigger refreshes the row it supersedes only if that row has member rows, judged
    after its lock. Here the old row has none when the re-run arrives, and a concurrent UPDATE makes it flagged (a
    member, unless superseded): whichever takes the lock first, the old row must end outside the queue and the
    rollups equal a recount."""
    items = bulk.add(12, start=timezone.now() - 3 * HOUR, verdict="PASS", automated_verdict="PASS",
                     determination="met", flagged=False, reason="digest-match")
    assert not models.QueueBacklogMember.objects.exists()

    def flag(item: Verification) -> None:
        Verification.objects.filter(pk=item.pk).update(verdict="UNKNOWN", automated_verdict="UNKNOWN", flagged=True,
                                                       determination="cannot_determine", reason="missing-baseline")

    def re_run(item: Verification) -> None:
        Verification.objects.create(rubric_hash=item.rubric_hash, submission_hash=item.submission_hash,
                                    task=item.task, cycle=1, supersedes=item, verdict="PASS", automated_verdict="PASS",
                                    determination="met", flagged=False, reason="digest-match")

    _at_once(items, flag, re_run)
    assert Verification.objects.filter(pk__in=[v.pk for v in items], flagged=True).count() == len(items)
    assert not models.QueueBacklogMember.objects.exists()  # every old row superseded, every re-run a clean PASS


@pytest.mark.postgres
def test_a_clean_outcome_and_a_new_submission_leave_the_membership_alone(queue: Queue, bulk: Bulk) -> None:
    """Migration 0018: what may not be a member, before or after, is not refreshed; what may be still is."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_get_functiondef(%s::regproc)", [f"{rollups_sql.PREFIX}verification_insert"])
        source = cursor.fetchone()[0]
    assert "IF cardinality(rp_ids) > 0 THEN" in source
    member = queue.unknown("kept in the queue")
    before = snapshot()
    (fresh,) = bulk.add(1, start=timezone.now(), verdict=None, automated_verdict=None, determination=None,
                        flagged=False, reason=None)
    Verification.objects.filter(pk=fresh.pk).update(verdict="PASS", automated_verdict="PASS", determination="met")
    after_pass = snapshot()
    assert after_pass[rollups_sql.MEMBER] == before[rollups_sql.MEMBER]
    Verification.objects.filter(pk=fresh.pk).update(verdict="FAIL", flagged=True, reason="digest-mismatch")
    Verification.objects.filter(pk=member.pk).update(human_decided=True)
    moved = snapshot()
    assert fresh.pk in {row[0] for row in moved[rollups_sql.MEMBER]}
    assert member.pk not in {row[0] for row in moved[rollups_sql.MEMBER]}
    rollups.rebuild(connection)
    assert snapshot() == moved
