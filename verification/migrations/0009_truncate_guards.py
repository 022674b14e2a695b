"""TRUNCATE refused on every append-only table on PostgreSQL (SPEC §8 "Least privilege in the database": the triggers
stay as a second line behind the application role's grants, and refuse TRUNCATE too).

The tables are the one registry, ``verification.db_guards.APPEND_ONLY_TABLES``; the SQL is ``db_guards``'. A
``BEFORE TRUNCATE ... FOR EACH STATEMENT`` trigger per table, beside the row triggers of 0002/0004/0005/0006 (which
are dropped and created again, idempotently). SQLite has no TRUNCATE statement: nothing to add there (its DELETE
trigger already sees ``DELETE FROM`` without a WHERE), the re-check only puts back any trigger that is missing.
"""

from django.db import migrations


def install(apps, schema_editor):
    from verification import db_guards

    db_guards.install_guards(schema_editor.connection, db_guards.APPEND_ONLY_TABLES)


def uninstall(apps, schema_editor):
    """Back to the row triggers alone."""
    from verification import db_guards

    if schema_editor.connection.vendor != "postgresql":
        return
    with schema_editor.connection.cursor() as cursor:
        for table in db_guards.APPEND_ONLY_TABLES:
            cursor.execute(f'DROP TRIGGER IF EXISTS "{table}_no_truncate" ON "{table}"')


class Migration(migrations.Migration):
    dependencies = [
        ("verification", "0008_dashboard_rollups"),
    ]

    operations = [
        migrations.RunPython(install, uninstall),
    ]
