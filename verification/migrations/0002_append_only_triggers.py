"""Receipts and pin-log entries are append-only in the database (SPEC §7): triggers refusing UPDATE and DELETE.

The SQL lives in ``verification.db_guards`` (one place for the migration, the post_migrate re-check and the tests).
PostgreSQL: a row-level BEFORE UPDATE OR DELETE trigger (TRUNCATE stays possible for the test runner's flush).
SQLite: BEFORE UPDATE and BEFORE DELETE triggers; DELETE passes only inside the test runner's flush.
"""

from django.db import migrations


def install(apps, schema_editor):
    from verification import db_guards

    db_guards.install_guards(schema_editor.connection)


def uninstall(apps, schema_editor):
    from verification import db_guards

    with schema_editor.connection.cursor() as cursor:
        for sql in db_guards.uninstall_sql(schema_editor.connection.vendor):
            cursor.execute(sql)


class Migration(migrations.Migration):
    dependencies = [
        ("verification", "0001_initial"),
    ]

    operations = [
        migrations.RunPython(install, uninstall),
    ]
