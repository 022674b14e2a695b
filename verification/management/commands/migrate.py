"""``migrate``, run as the tables' owner when one is configured (SPEC §8 "Least privilege in the database").

With ``REVIEWPORTAL_MIGRATE_DATABASE_URL`` set, ``--database`` defaults to the ``owner`` alias (the application role
of ``DATABASE_URL`` may not change the schema, and ``db_roles.OwnerMigrationsRouter`` allows migrations nowhere
else); without it, to ``default`` as in Django.
"""

from __future__ import annotations

from typing import Any

from django.core.management.commands.migrate import Command as MigrateCommand

from verification import db_roles


class Command(MigrateCommand):
    def add_arguments(self, parser: Any) -> None:
        super().add_arguments(parser)
        parser.set_defaults(database=db_roles.migrate_alias())

    def handle(self, *args: Any, **options: Any) -> None:
        with db_roles.migrating(options["database"]):
            super().handle(*args, **options)
