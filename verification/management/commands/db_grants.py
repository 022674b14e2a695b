"""``manage.py db_grants``: the application role's rights on PostgreSQL (SPEC §8; docs/database-roles.md).

``--print`` shows the statements, ``--apply`` runs them as the owner (the ``owner`` alias of
``REVIEWPORTAL_MIGRATE_DATABASE_URL`` when set, else ``--database``). ``--create-role NAME`` creates the role first
(LOGIN only; give it a password or a certificate yourself). The role defaults to the user of ``DATABASE_URL``.
Idempotent: every table right of the role is revoked and granted again from ``db_guards.APPEND_ONLY_TABLES``.
"""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError
from django.db import connections

from verification import db_roles


class Command(BaseCommand):
    help = "Print or apply the application role's grants (SELECT/INSERT only on append-only tables)."

    def add_arguments(self, parser: Any) -> None:
        action = parser.add_mutually_exclusive_group(required=True)
        action.add_argument("--print", action="store_true", dest="print_only", help="print the statements")
        action.add_argument("--apply", action="store_true", help="run them as the owner role")
        parser.add_argument("--role", help="the application role (default: the user of DATABASE_URL)")
        parser.add_argument("--create-role", metavar="NAME", help="create this role (LOGIN only) and grant to it")
        parser.add_argument("--database", default=None, help="the owner's alias (default: the migrate alias)")

    def handle(self, *args: Any, **options: Any) -> None:
        alias = options["database"] or db_roles.migrate_alias()
        connection = connections[alias]
        role = options["create_role"] or options["role"] or db_roles.app_role()
        if not role:
            raise CommandError("no role: pass --role NAME (DATABASE_URL names no user)")
        if connection.vendor != "postgresql":
            raise CommandError(f"grants are for PostgreSQL; the {alias!r} database is {connection.vendor}")
        create = bool(options["create_role"])
        try:
            if options["print_only"]:
                statements = (db_roles.create_role_sql(connection, role) if create else []) + db_roles.grant_sql(
                    connection, role
                )
            else:
                statements = db_roles.apply_grants(connection, role, create=create)
        except db_roles.GrantsError as exc:
            raise CommandError(str(exc)) from None
        for sql in statements:
            self.stdout.write(sql + ";")
        if not options["print_only"]:
            self.stderr.write(f"db_grants: {len(statements)} statements applied for role {role!r} on {alias!r}")
