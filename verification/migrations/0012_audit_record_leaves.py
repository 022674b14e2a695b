"""AuditRecordLeaf: findings, finding events, security-log and pin-log entries as leaves of the audit's tree (SPEC §8),
append-only with its database guards (``db_guards``)."""

from django.db import migrations, models

TABLES = ("verification_auditrecordleaf",)


def install_guards(apps, schema_editor):
    from verification import db_guards

    db_guards.install_guards(schema_editor.connection, TABLES)


def uninstall_guards(apps, schema_editor):
    from verification import db_guards

    with schema_editor.connection.cursor() as cursor:
        for sql in db_guards.uninstall_sql(schema_editor.connection.vendor, TABLES):
            cursor.execute(sql)


class Migration(migrations.Migration):
    dependencies = [
        ("verification", "0013_read_phases"),
    ]

    operations = [
        migrations.CreateModel(
            name="AuditRecordLeaf",
            fields=[
                ("position", models.PositiveBigIntegerField(primary_key=True, serialize=False)),
                ("kind", models.CharField(max_length=16)),
                ("ref", models.BigIntegerField()),
                ("digest", models.CharField(max_length=64)),
                ("added_at", models.DateTimeField()),
            ],
            options={"ordering": ("position",)},
        ),
        migrations.AddConstraint(
            model_name="auditrecordleaf",
            constraint=models.UniqueConstraint(fields=("kind", "ref"), name="auditrecordleaf_one_per_record"),
        ),
        migrations.RunPython(install_guards, uninstall_guards),
    ]
