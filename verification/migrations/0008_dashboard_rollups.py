"""Dashboard rollups (issue 6 §3): derived count tables, the triggers that keep them, and a first rebuild from the
records already there (the SQL is ``verification.records.rollups``'); and two partial indexes for the few queue rows the
backlog dashboard counts itself (those submitted in the hours its age boundaries cut, and PENDING deadlines falling
in the current hour), outside the model state like migration 0007's."""

import django.db.models.deletion
from django.conf import settings
from django.db import migrations, models

from verification.records import rollups

QUEUE_AGE_INDEX = "verification_queue_age_idx"
PENDING_DUE_INDEX = "verification_pending_due_idx"


def _indexes():
    from verification.reviews.selectors import QUEUE_INDEX_CONDITION

    return [
        models.Index(fields=["submitted_at"], condition=QUEUE_INDEX_CONDITION, name=QUEUE_AGE_INDEX),
        models.Index(fields=["pending_until"], condition=models.Q(verdict="PENDING"), name=PENDING_DUE_INDEX),
    ]


def add_indexes(apps, schema_editor):
    model = apps.get_model("verification", "Verification")
    for index in _indexes():
        schema_editor.add_index(model, index)


def remove_indexes(apps, schema_editor):
    model = apps.get_model("verification", "Verification")
    for index in _indexes():
        schema_editor.remove_index(model, index)


class Migration(migrations.Migration):

    dependencies = [
        ('verification', '0007_review_queue_index'),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.CreateModel(
            name='OpenFindingCount',
            fields=[
                ('kind', models.CharField(max_length=32, primary_key=True, serialize=False)),
                ('n', models.IntegerField(default=0)),
            ],
        ),
        migrations.CreateModel(
            name='QueueBacklogMember',
            fields=[
                ('verification_id', models.UUIDField(primary_key=True, serialize=False)),
                ('submitted_hour', models.BigIntegerField()),
                ('due_hour', models.BigIntegerField()),
            ],
        ),
        migrations.CreateModel(
            name='VerificationDayCount',
            fields=[
                ('day', models.DateField(primary_key=True, serialize=False)),
                ('completed', models.IntegerField(default=0)),
                ('abstained', models.IntegerField(default=0)),
            ],
        ),
        migrations.CreateModel(
            name='DecisionDelay',
            fields=[
                ('decision_id', models.BigIntegerField(primary_key=True, serialize=False)),
                ('decided_at', models.DateTimeField()),
                ('seconds', models.FloatField()),
            ],
            options={
                'indexes': [models.Index(fields=['decided_at', 'seconds'], name='decisiondelay_period_idx')],
            },
        ),
        migrations.CreateModel(
            name='FindingDayCount',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('day', models.DateField()),
                ('action', models.CharField(max_length=16)),
                ('n', models.IntegerField(default=0)),
            ],
            options={
                'constraints': [models.UniqueConstraint(fields=('day', 'action'), name='findingdaycount_key')],
            },
        ),
        migrations.CreateModel(
            name='QueueBacklogCount',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('submitted_hour', models.BigIntegerField()),
                ('due_hour', models.BigIntegerField()),
                ('n', models.IntegerField(default=0)),
            ],
            options={
                'constraints': [models.UniqueConstraint(fields=('submitted_hour', 'due_hour'), name='queuebacklogcount_key')],
            },
        ),
        migrations.CreateModel(
            name='DecisionDayCount',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('day', models.DateField()),
                ('action', models.CharField(max_length=16)),
                ('n', models.IntegerField(default=0)),
                ('user', models.ForeignKey(on_delete=django.db.models.deletion.PROTECT, related_name='+', to=settings.AUTH_USER_MODEL)),
            ],
            options={
                'constraints': [models.UniqueConstraint(fields=('day', 'user', 'action'), name='decisiondaycount_key')],
            },
        ),
        migrations.RunPython(rollups.install_and_rebuild, rollups.uninstall),
        migrations.RunPython(add_indexes, remove_indexes),
    ]
