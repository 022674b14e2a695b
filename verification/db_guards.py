"""Append-only, enforced in code and in the database (SPEC §7: "Nothing edits or deletes one").

In code: ``AppendOnlyModel`` refuses ``save()`` of an existing row and ``delete()``; its queryset refuses
``update()`` and ``delete()`` (and so ``bulk_update``). Every refusal is an ``AppendOnlyError`` carrying the
registry code ``append-only``.

In the database: BEFORE UPDATE and BEFORE DELETE triggers on every append-only table, and on PostgreSQL a BEFORE
TRUNCATE trigger too (SPEC §8 "Least privilege in the database": the triggers are the second line behind the
application role's grants, ``verification.db_roles``).
- PostgreSQL: one trigger function that raises ``restrict_violation`` (Django maps it to ``IntegrityError``), fired
  per row for UPDATE and DELETE and per statement for TRUNCATE. The test runner's flush truncates with
  ``session_replication_role = replica`` (superuser only), under which ordinary triggers do not fire.
- SQLite: ``RAISE(ABORT, 'append-only: ...')`` (an ``IntegrityError``). Django's flush on SQLite is ``DELETE FROM``,
  so the DELETE trigger carries ``WHEN NOT reviewportal_purge_allowed()``: a SQL function this module registers on
  every SQLite connection Django opens. It answers 0 unless the current thread is inside ``purge_allowed()``, which
  only the ``flush`` command enters, and only under ``settings.TESTING``. A raw ``sqlite3`` client has no such
  function, so its DELETE fails with "no such function" (fail closed); UPDATE is refused unconditionally.

- SQLite has no TRUNCATE statement (``DELETE FROM`` without a WHERE is its nearest, and the DELETE trigger sees it).

SQLite drops a table's triggers when Django rebuilds the table (``ALTER`` by copy in a later migration), so the
triggers are installed by the migrations (``0002``, ``0004``-``0006``, ``0009`` for TRUNCATE) and re-installed
idempotently after every ``migrate`` (post_migrate). ``APPEND_ONLY_TABLES`` is the one list of guarded tables: the
migrations, the re-install, the grants of ``db_roles`` and the parametrised database tests all read it.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, Final, TypeVar

from django.db import models
from django.db.backends.base.base import BaseDatabaseWrapper
from django.db.backends.signals import connection_created
from django.db.models.signals import post_migrate

from verification.kernel.errors import KernelError
from verification.kernel.reasons import Reason

PURGE_FUNCTION: Final = "reviewportal_purge_allowed"
PG_FUNCTION: Final = "reviewportal_refuse_append_only_change"
#: The guard triggers of one table on PostgreSQL: ``<table>_append_only`` (UPDATE, DELETE) and ``<table>_no_truncate``.
PG_SUFFIXES: Final = ("append_only", "no_truncate")

#: THE registry of append-only tables (db_table names): one entry per ``AppendOnlyModel`` (a test checks both agree).
#: The triggers, their re-install after every migrate, the application role's grants (``db_roles``: SELECT and
#: INSERT only) and the parametrised database tests all read this tuple.
APPEND_ONLY_TABLES: Final = (
    "verification_receipt",  # migration 0002
    "verification_pinentry",  # 0002
    "verification_finding",  # 0004
    "verification_findingevent",  # 0004
    "verification_event",  # 0004
    "verification_reviewdecision",  # 0005
    "verification_securitylogentry",  # 0006
    "verification_auditleaf",  # 0006
    "verification_auditrun",  # 0006
    "verification_auditrecordleaf",  # 0012
)


class AppendOnlyError(KernelError):
    """An attempt to edit or delete an append-only record (receipt, pin-log entry). Reason: ``append-only``."""

    def __init__(self, detail: str) -> None:
        super().__init__(Reason.APPEND_ONLY, detail)


# --- in code -------------------------------------------------------------------------------------------------------

_M = TypeVar("_M", bound=models.Model)


class AppendOnlyQuerySet(models.QuerySet[_M]):
    """A queryset that can read and insert, never update or delete."""

    def update(self, **kwargs: Any) -> int:
        raise AppendOnlyError(f"{self.model.__name__}: a queryset update would edit records")

    def delete(self) -> tuple[int, dict[str, int]]:
        raise AppendOnlyError(f"{self.model.__name__}: a queryset delete would remove records")

    # ``update_or_create`` and ``bulk_update`` reach ``update()``; refuse them by name too, for a clearer message.
    def bulk_update(self, objs: Any, fields: Any, batch_size: int | None = None) -> int:
        raise AppendOnlyError(f"{self.model.__name__}: bulk_update would edit records")

    def update_or_create(self, defaults: Any = None, create_defaults: Any = None, **kwargs: Any) -> tuple[_M, bool]:
        raise AppendOnlyError(f"{self.model.__name__}: update_or_create could edit a record")


class AppendOnlyModel(models.Model):
    """Abstract base: rows are inserted once and never changed (SPEC §7)."""

    objects = AppendOnlyQuerySet.as_manager()

    class Meta:
        abstract = True

    def save(self, *args: Any, **kwargs: Any) -> None:
        if not self._state.adding:
            raise AppendOnlyError(f"{type(self).__name__} {self.pk}: an existing record cannot be saved again")
        if kwargs.get("force_update") or kwargs.get("update_fields") is not None:
            raise AppendOnlyError(f"{type(self).__name__}: save(force_update/update_fields) would edit a record")
        # Always an INSERT: with a natural primary key Django would otherwise try an UPDATE first.
        kwargs["force_insert"] = True
        super().save(*args, **kwargs)

    def delete(self, *args: Any, **kwargs: Any) -> tuple[int, dict[str, int]]:
        raise AppendOnlyError(f"{type(self).__name__} {self.pk}: records cannot be deleted")


# --- the purge permission (SQLite flush under the test runner) -----------------------------------------------------

_purge = threading.local()


def _purge_allowed_sql() -> int:
    return 1 if getattr(_purge, "allowed", False) else 0


@contextmanager
def purge_allowed() -> Iterator[None]:
    """Let this thread's DELETEs through the SQLite guard. Only ``flush`` under ``settings.TESTING`` enters it."""
    from django.conf import settings

    if not getattr(settings, "TESTING", False):
        raise AppendOnlyError("purging append-only tables is allowed only to the test runner's flush")
    previous = getattr(_purge, "allowed", False)
    _purge.allowed = True
    try:
        yield
    finally:
        _purge.allowed = previous


def register_sqlite_function(connection: BaseDatabaseWrapper) -> None:
    """Register ``reviewportal_purge_allowed()`` on a SQLite connection (idempotent)."""
    if connection.vendor != "sqlite" or connection.connection is None:
        return
    # Not deterministic: SQLite must call it on every row, never fold it to a constant.
    connection.connection.create_function(PURGE_FUNCTION, 0, _purge_allowed_sql)


def _on_connection_created(sender: Any, connection: BaseDatabaseWrapper, **kwargs: Any) -> None:
    register_sqlite_function(connection)


def connect_signals() -> None:
    """Register the SQLite function on every new connection and re-check the triggers after every migrate.

    Called when ``verification.models`` is imported (app loading), before any connection is opened.
    """
    connection_created.connect(_on_connection_created, dispatch_uid="verification.db_guards.sqlite_purge_function")
    post_migrate.connect(_post_migrate_reinstall, dispatch_uid="verification.db_guards.reinstall")


# --- in the database -----------------------------------------------------------------------------------------------


def _sqlite_sql(table: str) -> list[str]:
    return [
        f'CREATE TRIGGER IF NOT EXISTS "{table}_no_update" BEFORE UPDATE ON "{table}" '
        f"BEGIN SELECT RAISE(ABORT, 'append-only: {table} rows cannot be updated'); END",
        f'CREATE TRIGGER IF NOT EXISTS "{table}_no_delete" BEFORE DELETE ON "{table}" '
        f"WHEN NOT {PURGE_FUNCTION}() "
        f"BEGIN SELECT RAISE(ABORT, 'append-only: {table} rows cannot be deleted'); END",
    ]


_PG_FUNCTION_SQL: Final = f"""
CREATE OR REPLACE FUNCTION {PG_FUNCTION}() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'append-only: % on % refused', TG_OP, TG_TABLE_NAME USING ERRCODE = 'restrict_violation';
END
$$
"""


def _pg_sql(table: str) -> list[str]:
    trigger = f"{table}_append_only"
    truncate = f"{table}_no_truncate"
    return [
        f'DROP TRIGGER IF EXISTS "{trigger}" ON "{table}"',
        f'CREATE TRIGGER "{trigger}" BEFORE UPDATE OR DELETE ON "{table}" '
        f"FOR EACH ROW EXECUTE FUNCTION {PG_FUNCTION}()",
        # TRUNCATE fires no row trigger: a statement trigger of its own (SPEC §8).
        f'DROP TRIGGER IF EXISTS "{truncate}" ON "{table}"',
        f'CREATE TRIGGER "{truncate}" BEFORE TRUNCATE ON "{table}" FOR EACH STATEMENT EXECUTE FUNCTION {PG_FUNCTION}()',
    ]


def install_sql(vendor: str, tables: tuple[str, ...] = APPEND_ONLY_TABLES) -> list[str]:
    """The statements that install the guards on ``tables`` for a database vendor (idempotent)."""
    if vendor == "sqlite":
        return [sql for table in tables for sql in _sqlite_sql(table)]
    if vendor == "postgresql":
        return [_PG_FUNCTION_SQL] + [sql for table in tables for sql in _pg_sql(table)]
    raise NotImplementedError(f"append-only guards are not written for {vendor!r}; refusing to run without them")


def uninstall_sql(vendor: str, tables: tuple[str, ...] = APPEND_ONLY_TABLES) -> list[str]:
    if vendor == "sqlite":
        return [f'DROP TRIGGER IF EXISTS "{t}_{suffix}"' for t in tables for suffix in ("no_update", "no_delete")]
    if vendor == "postgresql":
        drops = [f'DROP TRIGGER IF EXISTS "{t}_{suffix}" ON "{t}"' for t in tables for suffix in PG_SUFFIXES]
        return drops + [f"DROP FUNCTION IF EXISTS {PG_FUNCTION}()"]
    return []


def trigger_names(vendor: str, table: str) -> set[str]:
    """The names of the guard triggers of ``table`` on ``vendor``."""
    if vendor == "sqlite":
        return {f"{table}_no_update", f"{table}_no_delete"}
    return {f"{table}_{suffix}" for suffix in PG_SUFFIXES}


def install_guards(connection: BaseDatabaseWrapper, tables: tuple[str, ...] = APPEND_ONLY_TABLES) -> None:
    """Install the triggers on those of ``tables`` that exist and miss one (idempotent, cheap when present)."""
    existing = set(connection.introspection.table_names())
    present = installed_triggers(connection)
    missing = tuple(t for t in tables if t in existing and not trigger_names(connection.vendor, t) <= present)
    if not missing:
        return
    register_sqlite_function(connection)
    with connection.cursor() as cursor:
        for sql in install_sql(connection.vendor, missing):
            cursor.execute(sql)


def installed_triggers(connection: BaseDatabaseWrapper) -> set[str]:
    """The names of the append-only triggers present (for tests and a health check)."""
    with connection.cursor() as cursor:
        if connection.vendor == "sqlite":
            cursor.execute("SELECT name FROM sqlite_master WHERE type = 'trigger'")
        elif connection.vendor == "postgresql":
            cursor.execute("SELECT tgname FROM pg_trigger WHERE NOT tgisinternal")
        else:
            return set()
        return {row[0] for row in cursor.fetchall()}


def _post_migrate_reinstall(sender: Any, using: str = "default", **kwargs: Any) -> None:
    """A table rebuilt by a later SQLite migration loses its triggers: put them back after every migrate."""
    from django.db import connections

    if getattr(sender, "label", None) != "verification":
        return
    install_guards(connections[using])
