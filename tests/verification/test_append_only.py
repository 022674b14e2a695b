"""Receipts and pin-log entries are append-only, in code and in the database (SPEC §7)."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from django.db import IntegrityError, connection, transaction

from tests.conftest import as_owner, owner_cursor
from tests.verification.conftest import issue_chain
from verification import db_guards
from verification.db_guards import AppendOnlyError
from verification.kernel.reasons import Reason
from verification.trust.models import PinEntry, Receipt

TABLES = {"receipt": "verification_receipt", "pin entry": "verification_pinentry"}


def _sample(table: str) -> tuple[str, Any]:
    """(primary key column, a primary key) of a row of ``table``."""
    if table == "verification_receipt":
        return "content_hash", Receipt.objects.values_list("content_hash", flat=True).first()
    return "id", PinEntry.objects.values_list("id", flat=True).first()


# --- in code ---------------------------------------------------------------------------------------------------------


def test_a_stored_receipt_cannot_be_saved_again_or_deleted(chain: tuple[Any, list[Any]]) -> None:
    _, (run, _, _) = chain
    run.verdict = "PASS"
    with pytest.raises(AppendOnlyError) as excinfo:
        run.save()
    assert excinfo.value.reason is Reason.APPEND_ONLY
    with pytest.raises(AppendOnlyError):
        run.delete()
    fresh = Receipt.objects.get(pk=run.pk)
    assert fresh.verdict == "PENDING"


@pytest.mark.parametrize("model", [Receipt, PinEntry])
def test_querysets_cannot_update_or_delete(chain: tuple[Any, list[Any]], model: Any) -> None:
    before = list(model.objects.values_list("pk", flat=True))
    assert before
    with pytest.raises(AppendOnlyError):
        model.objects.all().delete()
    with pytest.raises(AppendOnlyError):
        model.objects.filter(pk=before[0]).update(created_at=None)
    with pytest.raises(AppendOnlyError):
        model.objects.bulk_update(list(model.objects.all()), ["created_at"])
    with pytest.raises(AppendOnlyError):
        model.objects.update_or_create(pk=before[0], defaults={})
    assert list(model.objects.values_list("pk", flat=True)) == before


def test_a_pin_entry_cannot_be_edited(signing_key: Any) -> None:
    entry = PinEntry.objects.get()
    entry.note = "edited"
    with pytest.raises(AppendOnlyError):
        entry.save()
    with pytest.raises(AppendOnlyError):
        entry.save(update_fields=["note"])
    with pytest.raises(AppendOnlyError):
        entry.delete()
    assert PinEntry.objects.get().note == "the portal's own signing key"


def test_save_always_inserts(signing_key: Any, make_verification: Any) -> None:
    """A natural primary key must not make Django try an UPDATE of an existing row first."""
    receipt = issue_chain(make_verification())[0]
    copy = Receipt.objects.get(pk=receipt.pk)
    copy._state.adding = True
    with pytest.raises(IntegrityError), transaction.atomic():
        copy.save()


# --- in the database ----------------------------------------------------------------------------------------------


def _raw_refused(sql: str, params: list[Any]) -> str:
    """The trigger's refusal, as the tables' owner (the application role would be refused by privilege first)."""
    with pytest.raises(IntegrityError) as excinfo, owner_cursor() as cursor:
        cursor.execute(sql, params)
    return str(excinfo.value)


@pytest.mark.parametrize("table", TABLES.values())
def test_raw_sql_update_and_delete_are_refused_by_the_database(chain: tuple[Any, list[Any]], table: str) -> None:
    column, pk = _sample(table)
    count = Receipt.objects.count() + PinEntry.objects.count()
    message = _raw_refused(f'UPDATE "{table}" SET "created_at" = "created_at" WHERE "{column}" = %s', [pk])  # noqa: S608
    assert "append-only" in message
    message = _raw_refused(f'DELETE FROM "{table}" WHERE "{column}" = %s', [pk])  # noqa: S608
    assert "append-only" in message
    message = _raw_refused(f'DELETE FROM "{table}"', [])  # noqa: S608
    assert "append-only" in message
    assert Receipt.objects.count() + PinEntry.objects.count() == count


@pytest.mark.postgres
@pytest.mark.parametrize("table", TABLES.values())
def test_postgres_triggers_refuse_update_and_delete(chain: tuple[Any, list[Any]], table: str) -> None:
    assert connection.vendor == "postgresql"
    assert f"{table}_append_only" in db_guards.installed_triggers(connection)
    column, pk = _sample(table)
    message = _raw_refused(f'UPDATE "{table}" SET "created_at" = now() WHERE "{column}" = %s', [pk])  # noqa: S608
    assert f"append-only: UPDATE on {table} refused" in message
    message = _raw_refused(f'DELETE FROM "{table}" WHERE "{column}" = %s', [pk])  # noqa: S608
    assert f"append-only: DELETE on {table} refused" in message


@pytest.mark.postgres
def test_postgres_refuses_even_an_update_that_changes_nothing(chain: tuple[Any, list[Any]]) -> None:
    message = _raw_refused('UPDATE "verification_receipt" SET "seq" = "seq"', [])
    assert "append-only" in message


def test_sqlite_triggers_are_installed_and_refuse(chain: tuple[Any, list[Any]]) -> None:
    if connection.vendor != "sqlite":
        pytest.skip("the SQLite triggers are checked when the suite runs on SQLite")
    names = db_guards.installed_triggers(connection)
    for table in TABLES.values():
        assert {f"{table}_no_update", f"{table}_no_delete"} <= names


def test_a_raw_sqlite_client_cannot_delete_without_the_purge_function(tmp_path: Path) -> None:
    """Fail closed: outside Django the DELETE trigger's function does not exist, so every DELETE errors."""
    raw = sqlite3.connect(tmp_path / "raw.sqlite3")
    try:
        raw.execute("CREATE TABLE verification_pinentry (id INTEGER PRIMARY KEY, note TEXT NOT NULL)")
        for sql in db_guards.install_sql("sqlite", ("verification_pinentry",)):
            raw.execute(sql)
        raw.execute("INSERT INTO verification_pinentry (note) VALUES ('kept')")
        raw.commit()
        with pytest.raises(sqlite3.OperationalError, match="no such function: reviewportal_purge_allowed"):
            raw.execute("DELETE FROM verification_pinentry")
        with pytest.raises(sqlite3.IntegrityError, match="append-only"):
            raw.execute("UPDATE verification_pinentry SET note = 'x'")
        assert raw.execute("SELECT note FROM verification_pinentry").fetchall() == [("kept",)]
    finally:
        raw.close()


def test_the_purge_function_answers_no_outside_a_flush(db: None) -> None:
    if connection.vendor != "sqlite":
        pytest.skip("SQLite only")
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT {db_guards.PURGE_FUNCTION}()")
        assert cursor.fetchone() == (0,)
        with db_guards.purge_allowed():
            cursor.execute(f"SELECT {db_guards.PURGE_FUNCTION}()")
            assert cursor.fetchone() == (1,)
        cursor.execute(f"SELECT {db_guards.PURGE_FUNCTION}()")
        assert cursor.fetchone() == (0,)


def test_the_purge_permission_exists_only_under_the_test_suite(settings: Any) -> None:
    settings.TESTING = False
    with pytest.raises(AppendOnlyError), db_guards.purge_allowed():
        pass  # pragma: no cover - never reached


def test_flush_outside_the_test_suite_refuses_when_receipts_exist(chain: tuple[Any, list[Any]], settings: Any) -> None:
    settings.TESTING = False
    with pytest.raises(CommandError, match="append-only"):
        call_command("flush", interactive=False, verbosity=0)
    assert Receipt.objects.count() == 3


def test_triggers_lost_in_a_table_rebuild_are_put_back_after_migrate(db: None) -> None:
    """SQLite drops a table's triggers when a migration rebuilds the table; post_migrate re-installs them."""
    with owner_cursor() as cursor:
        for sql in db_guards.uninstall_sql(connection.vendor, ("verification_receipt",)):
            if "FUNCTION" not in sql:
                cursor.execute(sql)
    assert not any(name.startswith("verification_receipt") for name in db_guards.installed_triggers(connection))
    from django.apps import apps

    with as_owner():  # migrate runs as the owner (the application role may not create triggers)
        db_guards._post_migrate_reinstall(sender=apps.get_app_config("verification"), using="default")
    names = db_guards.installed_triggers(connection)
    assert any(name.startswith("verification_receipt") for name in names)


# --- the test runner can still empty the tables (transactional tests) ------------------------------------------------
# pytest-django runs transactional tests after the others and keeps their order: the second sees the first's flush.


@pytest.mark.django_db(transaction=True)
def test_transactional_test_writes_receipts(signing_key: Any, make_verification: Any) -> None:
    issue_chain(make_verification())
    assert Receipt.objects.count() == 3
    assert PinEntry.objects.count() == 1


@pytest.mark.django_db(transaction=True)
def test_the_next_transactional_test_starts_empty() -> None:
    assert Receipt.objects.count() == 0
    assert PinEntry.objects.count() == 0
    # ... and the guards are still in place after the flush.
    names = db_guards.installed_triggers(connection)
    for table in db_guards.APPEND_ONLY_TABLES:
        assert db_guards.trigger_names(connection.vendor, table) <= names
