"""Dashboard rollups kept by the database (issue 6 §3): counts that stay the same size however many records there are.

The dashboards aggregate rollup tables (``verification.models``: ``QueueBacklogMember``/``QueueBacklogCount``,
``DecisionDayCount``, ``DecisionDelay``, ``VerificationDayCount``, ``FindingDayCount``, ``OpenFindingCount``) instead of
the records, so a page costs the same with a thousand verifications or a million. The rollups are written by
triggers on the records' tables, in the statement that changes the record, so every writer keeps them right: the
services, ``bulk_create``, a data migration, raw SQL. ``rebuild`` recomputes them from the records in set-based
statements (the migration that creates them runs it; ``manage.py rebuild_rollups`` runs it by hand, and the tests
compare it with what the triggers kept).

The SQL is in ``rollups_sql`` (the tables, the vendors' dialects, the shared pieces and the rebuild's statements) and
``rollups_triggers`` (what each trigger does, per vendor, and their install and uninstall statements); this module
runs them: ``rebuild``, ``install``, ``ensure_installed`` and the migrations' ``install_and_rebuild``/``uninstall``.

SQLite drops a table's triggers when a later migration rebuilds the table, so ``ensure_installed`` runs after every
``migrate``: it re-installs missing triggers and then rebuilds, because changes made while they were missing were
not counted.
"""

from __future__ import annotations

from typing import Any

from django.db import transaction
from django.db.backends.base.base import BaseDatabaseWrapper

from verification.records.rollups_sql import MEMBER, PREFIX, READ_PHASE, ROLLUP_TABLES, rebuild_sql
from verification.records.rollups_triggers import install_sql, trigger_names, uninstall_sql

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
    """The tables this version's SQL reads and writes exist, in this version's shape (the members' spans, 0015, with
    their exact instants, 0017)."""
    if not {*ROLLUP_TABLES, READ_PHASE} <= set(connection.introspection.table_names()):
        return False
    with connection.cursor() as cursor:
        columns = {c.name for c in connection.introspection.get_table_description(cursor, MEMBER)}
    return "until_at" in columns


def install_if_ready(connection: BaseDatabaseWrapper) -> None:
    """Replace the trigger functions with this version's, without a rebuild: for a migration that changes how the
    triggers run but not what they count. Nothing before the rollup tables are in this version's shape."""
    if _schema_ready(connection):
        install(connection)


def reinstall(apps: Any, schema_editor: Any) -> None:
    """The forward step of a migration that changes how the triggers run, not what they count (``install_if_ready``);
    its backward step is ``RunPython.noop`` (the earlier functions counted the same)."""
    install_if_ready(schema_editor.connection)


def install_and_rebuild(apps: Any, schema_editor: Any) -> None:
    """The migration's forward step. Nothing while the rollup tables are not yet in this version's shape (migrations
    0008, 0014 and 0015 run this module as it is now, before 0017 gives the members' spans their instants): the
    migration that completes them runs it again, and the rebuild then counts every record written meanwhile."""
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
