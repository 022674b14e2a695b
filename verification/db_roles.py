"""Least privilege in the database (SPEC §8): the application role and the owner role on PostgreSQL.

Two roles, two URLs (docs/database-roles.md):
- ``DATABASE_URL`` (alias ``default``): the application role the web process and the workers use. It owns nothing;
  on append-only tables (``db_guards.APPEND_ONLY_TABLES``) it may only SELECT and INSERT, on ``django_migrations``
  only SELECT, on every other table SELECT, INSERT, UPDATE and DELETE, and use the sequences.
- ``REVIEWPORTAL_MIGRATE_DATABASE_URL`` (alias ``owner``, when set): the role that owns the tables. Only ``migrate``
  uses it (our ``migrate`` command picks the alias by default, ``OwnerMigrationsRouter`` keeps data migrations on
  it), and ``manage.py db_grants`` grants the application role its rights with it.

When the second URL is unset, ``default`` is used for everything, as before (SQLite, ``make run``, a single-role
PostgreSQL). The append-only triggers stay as a second line either way (``db_guards``).
"""

from __future__ import annotations

import re
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, Final

from django.conf import settings
from django.db import DEFAULT_DB_ALIAS
from django.db.backends.base.base import BaseDatabaseWrapper

from verification.db_guards import APPEND_ONLY_TABLES

OWNER_ALIAS: Final = "owner"
ROLE_NAME: Final = re.compile(r"[a-z_][a-z0-9_]{0,62}")
#: Tables the application role may only read (Django's record of applied migrations: only ``migrate`` writes it).
READ_ONLY_TABLES: Final = ("django_migrations",)
APPEND_ONLY_PRIVILEGES: Final = "SELECT, INSERT"
READ_ONLY_PRIVILEGES: Final = "SELECT"
MUTABLE_PRIVILEGES: Final = "SELECT, INSERT, UPDATE, DELETE"


class GrantsError(Exception):
    """The grants cannot be applied as asked (unsupported database, the application role is the owner, ...)."""


def owner_configured() -> bool:
    """True when a separate owner connection (``REVIEWPORTAL_MIGRATE_DATABASE_URL``) is configured."""
    return OWNER_ALIAS in settings.DATABASES


def migrate_alias() -> str:
    """The alias migrations run on: the owner's when configured, else ``default``."""
    return OWNER_ALIAS if owner_configured() else DEFAULT_DB_ALIAS


def app_role() -> str | None:
    """The application role's name (the user of ``DATABASE_URL``), if it names one."""
    user = settings.DATABASES[DEFAULT_DB_ALIAS].get("USER")
    return str(user) if user else None


def owner_role() -> str | None:
    """The owner role's name when it differs from the application role; ``None`` when one role does everything."""
    if not owner_configured():
        return None
    user = settings.DATABASES[OWNER_ALIAS].get("USER")
    return str(user) if user and str(user) != app_role() else None


_migrating = threading.local()


@contextmanager
def migrating(alias: str) -> Iterator[None]:
    """While ``migrate`` runs on ``alias``, ORM queries without an explicit ``using()`` go there too (the router)."""
    previous = getattr(_migrating, "alias", None)
    _migrating.alias = alias
    try:
        yield
    finally:
        _migrating.alias = previous


class OwnerMigrationsRouter:
    """While ``migrate`` runs (on the owner alias, which our ``migrate`` command picks by default when configured), a
    data migration that forgets ``.using(schema_editor.connection.alias)`` still reads and writes the database being
    migrated, as the owner, not through the application role's connection.

    It answers nothing about ``allow_migrate``: both aliases name the same tables (the test runner's flush lists them
    through ``default``). ``migrate --database default`` under the split fails closed instead: the application role
    may not create or alter tables, nor record a migration (it may only read ``django_migrations``)."""

    def db_for_read(self, model: Any, **hints: Any) -> str | None:
        return getattr(_migrating, "alias", None)

    def db_for_write(self, model: Any, **hints: Any) -> str | None:
        return getattr(_migrating, "alias", None)


# --- the grants ------------------------------------------------------------------------------------------------------


def _quote(connection: BaseDatabaseWrapper, name: str) -> str:
    return str(connection.ops.quote_name(name))


def privileges_for(table: str) -> str:
    """What the application role may do on ``table`` (SPEC §8): read and insert on append-only tables, nothing but
    read on the migrations record, read and write elsewhere."""
    if table in APPEND_ONLY_TABLES:
        return APPEND_ONLY_PRIVILEGES
    if table in READ_ONLY_TABLES:
        return READ_ONLY_PRIVILEGES
    return MUTABLE_PRIVILEGES


def _role(role: str) -> str:
    """A role name this module will write into SQL: lower-case letters, digits and ``_`` only."""
    if not ROLE_NAME.fullmatch(role):
        raise GrantsError(f"role name {role!r}: lower-case letters, digits and _ (at most 63, no leading digit)")
    return role


def create_role_sql(connection: BaseDatabaseWrapper, role: str) -> list[str]:
    """Create the application role if it does not exist: it can log in and nothing more (no superuser, no CREATEDB,
    no CREATEROLE, NOINHERIT so that no membership granted later lends it privileges without an explicit SET ROLE)."""
    literal = _role(role)
    quoted = _quote(connection, role)
    return [
        "DO $$ BEGIN "  # noqa: S608 - a name checked by _role, quoted
        f"IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = '{literal}') THEN "
        f"CREATE ROLE {quoted} LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE NOINHERIT NOREPLICATION; "
        "END IF; END $$"
    ]


def grant_sql(connection: BaseDatabaseWrapper, role: str) -> list[str]:
    """The statements that give ``role`` exactly its rights on every table of the current schema (idempotent: all
    table rights are revoked first, so a right the registry no longer allows is taken back)."""
    if connection.vendor != "postgresql":
        raise GrantsError(f"grants are written for PostgreSQL only, not {connection.vendor!r}")
    quoted = _quote(connection, _role(role))
    tables = sorted(connection.introspection.table_names(include_views=False))
    statements = [
        f"GRANT USAGE ON SCHEMA public TO {quoted}",
        f"REVOKE ALL ON ALL TABLES IN SCHEMA public FROM {quoted}",
        f"REVOKE ALL ON ALL SEQUENCES IN SCHEMA public FROM {quoted}",
    ]
    statements += [f"GRANT {privileges_for(t)} ON {_quote(connection, t)} TO {quoted}" for t in tables]
    # nextval() for the id columns of every table (the append-only ones too: an INSERT takes the next id).
    statements.append(f"GRANT USAGE, SELECT ON ALL SEQUENCES IN SCHEMA public TO {quoted}")
    return statements


def check_role(connection: BaseDatabaseWrapper, role: str) -> None:
    """Refuse to call a role the application role when it could bypass its grants: a superuser or a table owner."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT rolsuper FROM pg_roles WHERE rolname = %s", [role])
        row = cursor.fetchone()
        if row is None:
            raise GrantsError(f"role {role!r} does not exist; create it first (db_grants --create-role {role})")
        if row[0]:
            raise GrantsError(f"role {role!r} is a superuser: it bypasses every grant, so it cannot be the app role")
        cursor.execute(
            "SELECT count(*) FROM pg_tables WHERE schemaname = 'public' AND tableowner = %s", [role]
        )
        owned = cursor.fetchone()
        if owned is not None and owned[0]:
            raise GrantsError(
                f"role {role!r} owns {owned[0]} tables: an owner may grant itself anything; "
                "the application role must own nothing (run migrations as the owner role)"
            )


def apply_grants(connection: BaseDatabaseWrapper, role: str, *, create: bool = False) -> list[str]:
    """Apply (and return) the statements of ``grant_sql`` on ``connection`` (the owner's), in one transaction."""
    from django.db import transaction

    statements = (create_role_sql(connection, role) if create else []) + grant_sql(connection, role)
    with transaction.atomic(using=connection.alias):
        if create:
            with connection.cursor() as cursor:
                cursor.execute(statements[0])
        check_role(connection, role)
        with connection.cursor() as cursor:
            for sql in statements[1 if create else 0 :]:
                cursor.execute(sql)
    return statements


def _post_migrate_grants(sender: Any, using: str = DEFAULT_DB_ALIAS, **kwargs: Any) -> None:
    """After ``migrate`` on the owner alias, the application role gets its rights on any new table at once (a table a
    migration added would otherwise be out of its reach until someone ran ``db_grants``)."""
    from django.db import connections

    if getattr(sender, "label", None) != "verification" or using != OWNER_ALIAS:
        return
    role = app_role()
    connection = connections[using]
    if role is None or owner_role() is None or connection.vendor != "postgresql":
        return
    apply_grants(connection, role)


def connect_signals() -> None:
    from django.db.models.signals import post_migrate

    post_migrate.connect(_post_migrate_grants, dispatch_uid="verification.db_roles.grants")


# --- the test runner's flush ---------------------------------------------------------------------------------------


@contextmanager
def truncate_allowed(connection: BaseDatabaseWrapper) -> Iterator[None]:
    """Let the test runner's flush TRUNCATE append-only tables on PostgreSQL: as the owner role (the application
    role may not truncate; only the test setup makes it a member of the owner role, ``tests/conftest.py``), and with
    ``session_replication_role = replica`` (a superuser setting) so that the BEFORE TRUNCATE guards do not fire.
    Only ``flush`` under ``settings.TESTING`` enters it."""
    from verification.db_guards import AppendOnlyError

    if not getattr(settings, "TESTING", False):
        raise AppendOnlyError("truncating append-only tables is allowed only to the test runner's flush")
    if connection.vendor != "postgresql":
        yield
        return
    owner = owner_role()
    with connection.cursor() as cursor:
        if owner is not None:
            cursor.execute(f"SET ROLE {_quote(connection, owner)}")
        cursor.execute("SET session_replication_role = replica")
    try:
        yield
    finally:
        with connection.cursor() as cursor:
            cursor.execute("RESET session_replication_role")
            cursor.execute("RESET ROLE")
