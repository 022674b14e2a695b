"""``manage.py rebuild_rollups``: recompute the dashboards' rollups from the records (``verification.records.rollups``).

The triggers keep the rollups as records are written, so this is for repair: after a restore of some tables, or to
check them. It reinstalls any missing trigger first, then recounts everything in one transaction (on PostgreSQL the
rollup tables are locked meanwhile: the dashboards keep reading, writers wait for the recount).
"""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError
from django.db import connections, transaction

from verification.records import rollups
from verification.records.rollups_sql import ROLLUP_TABLES
from verification.records.rollups_triggers import trigger_names


class Command(BaseCommand):
    help = "Recompute the dashboards' rollup tables from the records (and reinstall any missing trigger)."

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("--database", default="default", help="the database alias (default: default)")

    def handle(self, *args: Any, **options: Any) -> None:
        connection = connections[options["database"]]
        try:
            with transaction.atomic(using=connection.alias):
                reinstalled = rollups.ensure_installed(connection)
                if not reinstalled:
                    rollups.rebuild(connection)
        except NotImplementedError as exc:
            raise CommandError(str(exc)) from None
        missing = trigger_names(connection.vendor) - rollups.installed(connection)
        if missing:
            raise CommandError(f"rollup tables missing or triggers not installed: {sorted(missing)}; run migrate")
        self.stdout.write(
            ("triggers reinstalled; " if reinstalled else "")
            + "rollups recomputed: "
            + ", ".join(f"{table} {n}" for table, n in _counts(connection))
        )


def _counts(connection: Any) -> list[tuple[str, int]]:
    with connection.cursor() as cursor:
        out = []
        for table in ROLLUP_TABLES:
            cursor.execute(f"SELECT COUNT(*) FROM {table}")  # noqa: S608 - the module's own table names
            out.append((table, int(cursor.fetchone()[0])))
        return out
