"""The reviewer queue (issue 5): review leases, and reviewer decisions (append-only, with their database guards)."""

import django.db.models.deletion
import django.utils.timezone
from django.conf import settings
from django.db import migrations, models


TABLES = ("verification_reviewdecision",)


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
        ('verification', '0004_portal_actor_and_record_guards'),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.CreateModel(
            name='ReviewLease',
            fields=[
                ('verification', models.OneToOneField(on_delete=django.db.models.deletion.PROTECT, primary_key=True, related_name='review_lease', serialize=False, to='verification.verification')),
                ('claimed_at', models.DateTimeField()),
                ('expires_at', models.DateTimeField(db_index=True)),
                ('released_at', models.DateTimeField(blank=True, null=True)),
                ('end_reason', models.CharField(blank=True, default='', max_length=32)),
                ('holder', models.ForeignKey(on_delete=django.db.models.deletion.PROTECT, related_name='+', to=settings.AUTH_USER_MODEL)),
            ],
            options={
                'ordering': ('expires_at',),
            },
        ),
        migrations.CreateModel(
            name='ReviewDecision',
            fields=[
                ('id', models.BigAutoField(primary_key=True, serialize=False)),
                ('request_key', models.CharField(max_length=64, unique=True)),
                ('action', models.CharField(choices=[('PASS', 'pass'), ('FAIL', 'fail'), ('MORE_EVIDENCE', 'needs more evidence')], max_length=16)),
                ('rationale', models.TextField()),
                ('cited_evidence_ids', models.JSONField(default=list)),
                ('created_at', models.DateTimeField(default=django.utils.timezone.now)),
                ('actor', models.ForeignKey(on_delete=django.db.models.deletion.PROTECT, related_name='+', to='verification.actor')),
                ('receipt', models.OneToOneField(blank=True, null=True, on_delete=django.db.models.deletion.PROTECT, related_name='review_decision', to='verification.receipt')),
                ('user', models.ForeignKey(on_delete=django.db.models.deletion.PROTECT, related_name='+', to=settings.AUTH_USER_MODEL)),
                ('verification', models.ForeignKey(on_delete=django.db.models.deletion.PROTECT, related_name='review_decisions', to='verification.verification')),
            ],
            options={
                'ordering': ('id',),
                'indexes': [models.Index(fields=['verification', 'action'], name='reviewdecision_action_idx')],
                'constraints': [models.CheckConstraint(condition=models.Q(models.Q(('action', 'MORE_EVIDENCE'), ('receipt__isnull', True)), models.Q(('action__in', ['PASS', 'FAIL']), ('receipt__isnull', False)), _connector='OR'), name='reviewdecision_receipt_iff_verdict'), models.CheckConstraint(condition=models.Q(('rationale', ''), _negated=True), name='reviewdecision_rationale_not_blank')],
            },
        ),
        migrations.RunPython(install_guards, uninstall_guards),
    ]
