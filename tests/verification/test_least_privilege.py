"""Least privilege in the database (SPEC §8): every append-only table refuses UPDATE, DELETE and TRUNCATE twice over.

First line, PostgreSQL with the two roles (the PostgreSQL pass of .ci/run): the application role of DATABASE_URL
holds SELECT and INSERT only, so it is refused by privilege (SQLSTATE 42501) before any trigger runs. Second line,
the triggers: even the tables' owner gets the guard's error. Everything is parametrised over the one registry,
``db_guards.APPEND_ONLY_TABLES``; a table added to an ``AppendOnlyModel`` and not to the registry fails the first test.
SQLite has no TRUNCATE statement: there the DELETE guard is the whole story (``DELETE FROM`` without a WHERE).
"""

from __future__ import annotations

import io
from typing import Any

import pytest
from django.apps import apps
from django.core.management import call_command
from django.core.management.base import CommandError
from django.db import IntegrityError, ProgrammingError, connection, transaction
from django.utils import timezone

from tests.conftest import owner_cursor, split_roles
from verification import db_guards, db_roles
from verification.actors.services.actors import actor_for_user
from verification.kernel.findings import Finding as KernelFinding
from verification.kernel.findings import FindingKind
from verification.reviews.models import ReviewDecision
from verification.reviews.services.findings import finding_raise
from verification.trust.models import AuditLeaf, AuditRecordLeaf, AuditRun
from verification.trust.services.security_log import security_log_record

pytestmark = pytest.mark.django_db

TABLES = db_guards.APPEND_ONLY_TABLES
OPERATIONS = ("UPDATE", "DELETE", "TRUNCATE")


def _model(table: str) -> Any:
    return next(m for m in apps.get_models() if m._meta.db_table == table)


def _statement(operation: str, table: str) -> str:
    pk = _model(table)._meta.pk.column
    if operation == "UPDATE":
        return f'UPDATE "{table}" SET "{pk}" = "{pk}"'  # noqa: S608 - names from the registry
    if operation == "DELETE":
        return f'DELETE FROM "{table}"'  # noqa: S608
    return f'TRUNCATE "{table}" CASCADE'


def _count(table: str) -> int:
    with connection.cursor() as cursor:
        cursor.execute(f'SELECT count(*) FROM "{table}"')  # noqa: S608
        row = cursor.fetchone()
    assert row is not None
    return int(row[0])


@pytest.fixture
def every_table_has_a_row(chain: Any, django_user_model: Any) -> None:
    """One row (at least) in every append-only table, so that row triggers have something to fire on."""
    verification, _ = chain  # receipts; the signing key's pin entry
    finding_raise(  # a finding, its event, the event feed
        finding=KernelFinding(kind=FindingKind.TAMPER, refs=("chain", str(verification.pk)), detail="test"),
        verification=verification,
    )
    user = django_user_model.objects.create_user(username="rowmaker", password="x" * 20)
    ReviewDecision(
        verification=verification, user=user, actor=actor_for_user(user), action="MORE_EVIDENCE",
        rationale="rows for the guard tests", request_key="k" * 32,
    ).save()
    security_log_record(kind="key-pin", user=user, target="k")
    AuditLeaf(position=0, verification=verification, seq=0, content_hash="a" * 64).save()
    AuditRecordLeaf(position=1, kind="pin-log", ref=1, digest="b" * 64, added_at=timezone.now()).save()
    AuditRun(started_at=timezone.now(), finished_at=timezone.now()).save()
    for table in TABLES:
        assert _count(table) > 0, table


def test_the_registry_is_every_append_only_model() -> None:
    models = {m._meta.db_table for m in apps.get_models() if issubclass(m, db_guards.AppendOnlyModel)}
    assert set(TABLES) == models
    assert len(TABLES) == len(set(TABLES))


@pytest.mark.parametrize("table", TABLES)
def test_every_registered_table_has_its_guards(table: str) -> None:
    names = db_guards.installed_triggers(connection)
    expected = db_guards.trigger_names(connection.vendor, table)
    assert expected <= names
    if connection.vendor == "postgresql":
        assert f"{table}_no_truncate" in expected


@pytest.mark.parametrize("operation", OPERATIONS)
@pytest.mark.parametrize("table", TABLES)
def test_the_owner_is_refused_by_the_trigger(every_table_has_a_row: None, table: str, operation: str) -> None:
    if operation == "TRUNCATE" and connection.vendor == "sqlite":
        pytest.skip("SQLite has no TRUNCATE statement; DELETE FROM without a WHERE is refused by the DELETE guard")
    before = {t: _count(t) for t in TABLES}
    with pytest.raises(IntegrityError) as excinfo, owner_cursor() as cursor:
        if operation == "TRUNCATE":  # TRUNCATE refuses while deferred foreign-key checks are pending: run them now
            cursor.execute("SET CONSTRAINTS ALL IMMEDIATE")
        cursor.execute(_statement(operation, table))
    if connection.vendor == "postgresql":
        assert f"append-only: {operation} on {table} refused" in str(excinfo.value)
    else:
        verb = "updated" if operation == "UPDATE" else "deleted"
        assert f"append-only: {table} rows cannot be {verb}" in str(excinfo.value)
    assert {t: _count(t) for t in TABLES} == before


@pytest.mark.postgres
@pytest.mark.parametrize("operation", OPERATIONS)
@pytest.mark.parametrize("table", TABLES)
def test_the_application_role_is_refused_by_privilege(every_table_has_a_row: None, table: str, operation: str) -> None:
    if not split_roles():
        pytest.skip("needs the two roles: set REVIEWPORTAL_MIGRATE_DATABASE_URL (the owner) beside DATABASE_URL")
    before = {t: _count(t) for t in TABLES}
    with pytest.raises(ProgrammingError) as excinfo, transaction.atomic(), connection.cursor() as cursor:
        cursor.execute(_statement(operation, table))
    assert excinfo.value.__cause__ is not None
    assert excinfo.value.__cause__.sqlstate == "42501"  # insufficient_privilege, before any trigger
    assert f"permission denied for table {table}" in str(excinfo.value)
    assert {t: _count(t) for t in TABLES} == before


@pytest.mark.postgres
def test_the_application_role_owns_nothing_and_reads_and_inserts_only_where_it_must() -> None:
    if not split_roles():
        pytest.skip("needs the two roles: set REVIEWPORTAL_MIGRATE_DATABASE_URL (the owner) beside DATABASE_URL")
    role = db_roles.app_role()
    with connection.cursor() as cursor:
        cursor.execute("SELECT current_user, rolsuper FROM pg_roles WHERE rolname = current_user")
        assert cursor.fetchone() == (role, False)
        cursor.execute("SELECT count(*) FROM pg_tables WHERE schemaname = 'public' AND tableowner = current_user")
        assert cursor.fetchone() == (0,)
        for table in TABLES:
            cursor.execute(
                "SELECT has_table_privilege(%s, 'SELECT'), has_table_privilege(%s, 'INSERT'), "
                "has_table_privilege(%s, 'UPDATE'), has_table_privilege(%s, 'DELETE'), "
                "has_table_privilege(%s, 'TRUNCATE')",
                [table] * 5,
            )
            assert cursor.fetchone() == (True, True, False, False, False), table
        cursor.execute(
            "SELECT has_table_privilege('verification_verification', 'UPDATE'), "
            "has_table_privilege('django_migrations', 'INSERT'), has_table_privilege('django_session', 'DELETE'), "
            "has_schema_privilege('public', 'CREATE')"
        )
        assert cursor.fetchone() == (True, False, True, False)


def test_privileges_follow_the_registry() -> None:
    for table in TABLES:
        assert db_roles.privileges_for(table) == "SELECT, INSERT"
    assert db_roles.privileges_for("django_migrations") == "SELECT"
    assert db_roles.privileges_for("verification_verification") == "SELECT, INSERT, UPDATE, DELETE"


@pytest.mark.postgres
def test_db_grants_prints_the_grants_from_the_registry() -> None:
    out = io.StringIO()
    # The test database through ``default`` (the owner alias is not this test's): the same tables either way.
    call_command("db_grants", "--print", "--role", "someone_app", "--database", "default", stdout=out)
    lines = out.getvalue().splitlines()
    assert lines[:3] == [
        'GRANT USAGE ON SCHEMA public TO "someone_app";',
        'REVOKE ALL ON ALL TABLES IN SCHEMA public FROM "someone_app";',
        'REVOKE ALL ON ALL SEQUENCES IN SCHEMA public FROM "someone_app";',
    ]
    for table in TABLES:
        assert f'GRANT SELECT, INSERT ON "{table}" TO "someone_app";' in lines
    assert 'GRANT SELECT ON "django_migrations" TO "someone_app";' in lines
    assert 'GRANT SELECT, INSERT, UPDATE, DELETE ON "verification_verification" TO "someone_app";' in lines
    assert lines[-1] == 'GRANT USAGE, SELECT ON ALL SEQUENCES IN SCHEMA public TO "someone_app";'


def test_db_grants_refuses_names_it_would_have_to_escape_and_other_databases() -> None:
    if connection.vendor == "postgresql":
        with pytest.raises(CommandError, match="lower-case letters"):
            call_command(
                "db_grants", "--print", "--role", 'x"; DROP TABLE y; --', "--database", "default", stdout=io.StringIO()
            )
    else:
        with pytest.raises(CommandError, match="grants are for PostgreSQL"):
            call_command("db_grants", "--print", "--role", "app", "--database", "default", stdout=io.StringIO())


@pytest.mark.postgres
def test_db_grants_refuses_a_superuser_or_an_owner_as_the_application_role() -> None:
    with connection.cursor() as cursor:
        cursor.execute("SELECT tableowner FROM pg_tables WHERE tablename = 'verification_receipt'")
        row = cursor.fetchone()
    assert row is not None
    with pytest.raises(db_roles.GrantsError, match="superuser|owns"):
        db_roles.check_role(connection, row[0])


@pytest.mark.filterwarnings("ignore:Overriding setting DATABASES")
def test_migrate_runs_on_the_owner_alias_when_one_is_configured(settings: Any) -> None:
    from verification.management.commands.migrate import Command

    expected = "owner" if split_roles() else "default"
    assert db_roles.migrate_alias() == expected
    assert Command().create_parser("manage.py", "migrate").parse_args([]).database == expected
    databases = dict(settings.DATABASES)
    databases.pop("owner", None)
    settings.DATABASES = databases
    assert db_roles.migrate_alias() == "default"
    assert db_roles.owner_role() is None


def test_the_router_sends_a_data_migration_to_the_alias_being_migrated() -> None:
    router = db_roles.OwnerMigrationsRouter()
    assert router.db_for_write(ReviewDecision) is None
    with db_roles.migrating("owner"):
        assert router.db_for_read(ReviewDecision) == "owner"
        assert router.db_for_write(ReviewDecision) == "owner"
    assert router.db_for_read(ReviewDecision) is None
