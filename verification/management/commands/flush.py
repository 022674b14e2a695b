"""``flush``, guarded: receipts and pin-log entries are append-only (SPEC §7).

Under the test suite (``settings.TESTING``) the test runner's teardown calls this command to empty every table; on
SQLite that is ``DELETE FROM``, which the append-only trigger lets through only inside ``purge_allowed()``; on
PostgreSQL it is TRUNCATE, run as the owner with the guards asleep (``db_roles.truncate_allowed``). Outside the test
suite, flushing a database that holds receipts or pin-log entries is refused.
"""

from __future__ import annotations

from typing import Any

from django.apps import apps
from django.conf import settings
from django.core.management.base import CommandError
from django.core.management.commands.flush import Command as FlushCommand
from django.db import DEFAULT_DB_ALIAS, connections

from verification import db_guards, db_roles


class Command(FlushCommand):
    help = FlushCommand.help + " Refused outside the test suite when append-only records exist."

    def handle(self, **options: Any) -> None:
        connection = connections[options.get("database") or DEFAULT_DB_ALIAS]
        if not getattr(settings, "TESTING", False):
            held = _append_only_rows(connection)
            if held:
                raise CommandError(
                    f"append-only: refusing to flush {', '.join(held)}; append-only records are never "
                    "deleted (drop the whole database instead if you truly mean to start over)"
                )
            super().handle(**options)
            return
        connection.ensure_connection()
        db_guards.register_sqlite_function(connection)  # a connection opened before the signal was connected
        # PostgreSQL: flush is TRUNCATE, which the BEFORE TRUNCATE guards and the application role's grants refuse.
        with db_guards.purge_allowed(), db_roles.truncate_allowed(connection):
            super().handle(**options)


def _append_only_tables() -> list[str]:
    """Every append-only table: the tables of all ``AppendOnlyModel`` models (receipts, the pin log, and later ones)."""
    return sorted(m._meta.db_table for m in apps.get_models() if issubclass(m, db_guards.AppendOnlyModel))


def _append_only_rows(connection: Any) -> list[str]:
    existing = set(connection.introspection.table_names())
    held = []
    with connection.cursor() as cursor:
        for table in _append_only_tables():
            if table in existing:
                cursor.execute(f"SELECT 1 FROM {connection.ops.quote_name(table)} LIMIT 1")  # noqa: S608 - fixed names
                if cursor.fetchone() is not None:
                    held.append(table)
    return held
