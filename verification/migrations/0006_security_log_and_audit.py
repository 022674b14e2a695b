"""The security log and the continuous audit (issue 7 §4, §5): security log entries, the audit's Merkle-tree leaf
positions and audit runs, all append-only with their database guards (the SQL is ``verification.db_guards``')."""

import django.db.models.deletion
import django.utils.timezone
from django.conf import settings
from django.db import migrations, models

TABLES = ("verification_securitylogentry", "verification_auditleaf", "verification_auditrun")


def install_guards(apps, schema_editor):
    from verification import db_guards

    db_guards.install_guards(schema_editor.connection, TABLES)


def uninstall_guards(apps, schema_editor):
    from verification import db_guards

    with schema_editor.connection.cursor() as cursor:
        for sql in db_guards.uninstall_sql(schema_editor.connection.vendor, TABLES):
            if "DROP FUNCTION" not in sql:  # other tables' triggers still use the shared function
                cursor.execute(sql)


class Migration(migrations.Migration):

    dependencies = [
        ('verification', '0005_review_queue'),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.CreateModel(
            name='AuditRun',
            fields=[
                ('id', models.BigAutoField(primary_key=True, serialize=False)),
                ('started_at', models.DateTimeField()),
                ('finished_at', models.DateTimeField()),
                ('chains', models.PositiveIntegerField(default=0)),
                ('receipts', models.PositiveBigIntegerField(default=0)),
                ('tree_size', models.PositiveBigIntegerField(default=0)),
                ('root_hash', models.CharField(blank=True, default='', max_length=64)),
                ('checkpoint_size', models.PositiveBigIntegerField(blank=True, null=True)),
                ('consistent', models.BooleanField(null=True)),
                ('checkpoint_written', models.BooleanField(default=False)),
                ('ok', models.BooleanField(default=True)),
                ('problems', models.JSONField(default=list)),
                ('findings_raised', models.PositiveIntegerField(default=0)),
            ],
            options={
                'ordering': ('-id',),
            },
        ),
        migrations.CreateModel(
            name='SecurityLogEntry',
            fields=[
                ('id', models.BigAutoField(primary_key=True, serialize=False)),
                ('kind', models.CharField(db_index=True, max_length=32)),
                ('created_at', models.DateTimeField(db_index=True, default=django.utils.timezone.now)),
                ('actor_label', models.CharField(max_length=200)),
                ('target', models.CharField(blank=True, db_index=True, default='', max_length=300)),
                ('ip_address', models.GenericIPAddressField(blank=True, null=True)),
                ('detail', models.JSONField(blank=True, default=dict)),
                ('user', models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.PROTECT, related_name='+', to=settings.AUTH_USER_MODEL)),
            ],
            options={
                'verbose_name_plural': 'security log entries',
                'ordering': ('-id',),
            },
        ),
        migrations.CreateModel(
            name='AuditLeaf',
            fields=[
                ('position', models.PositiveBigIntegerField(primary_key=True, serialize=False)),
                ('seq', models.PositiveIntegerField()),
                ('content_hash', models.CharField(max_length=64)),
                ('added_at', models.DateTimeField(default=django.utils.timezone.now)),
                ('verification', models.ForeignKey(on_delete=django.db.models.deletion.PROTECT, related_name='+', to='verification.verification')),
            ],
            options={
                'ordering': ('position',),
                'constraints': [models.UniqueConstraint(fields=('verification', 'seq'), name='auditleaf_unique_receipt')],
            },
        ),
        migrations.RunPython(install_guards, uninstall_guards),
    ]
