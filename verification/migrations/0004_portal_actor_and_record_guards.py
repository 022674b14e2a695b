"""The portal's own service actor (SPEC §1: it performs deterministic checks and never claims tasks), and the
append-only guards of findings, finding events and events (SPEC §10; the SQL is ``verification.db_guards``')."""

from django.db import migrations

PORTAL_ACTOR_NAME = "portal"
TABLES = ("verification_finding", "verification_findingevent", "verification_event")


def create_portal_actor(apps, schema_editor):
    Actor = apps.get_model("verification", "Actor")
    Actor.objects.get_or_create(name=PORTAL_ACTOR_NAME, defaults={"kind": "service"})


def install_guards(apps, schema_editor):
    from verification import db_guards

    db_guards.install_guards(schema_editor.connection, TABLES)


def uninstall_guards(apps, schema_editor):
    from verification import db_guards

    with schema_editor.connection.cursor() as cursor:
        for sql in db_guards.uninstall_sql(schema_editor.connection.vendor, TABLES):
            if "DROP FUNCTION" not in sql:  # the receipts' triggers still use the shared function
                cursor.execute(sql)


class Migration(migrations.Migration):
    dependencies = [
        ("verification", "0003_actors_tasks_evidence_findings"),
    ]

    operations = [
        migrations.RunPython(create_portal_actor, migrations.RunPython.noop),
        migrations.RunPython(install_guards, uninstall_guards),
    ]
