"""The queue's counts per reason as a rollup (issue 15): each queue member keeps its reason and the hour of its
PENDING deadline, and ``QueueReasonCount`` counts the members per (reason, due hour, expiry hour), kept by the same
triggers as the backlog (``verification.records.rollups``), which this migration re-installs and then rebuilds from the
records. ``review_selectors.queue_counts`` reads it instead of counting every queued row."""

from django.db import migrations, models

from verification.records import rollups


class Migration(migrations.Migration):
    dependencies = [
        ("verification", "0012_audit_record_leaves"),  # the newest (0012 depends on 0013)
    ]

    operations = [
        migrations.AddField(
            model_name="queuebacklogmember",
            name="reason",
            field=models.CharField(default="", max_length=64),
        ),
        migrations.AddField(
            model_name="queuebacklogmember",
            name="expiry_hour",
            field=models.BigIntegerField(default=0),
        ),
        migrations.CreateModel(
            name="QueueReasonCount",
            fields=[
                ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name="ID")),
                ("reason", models.CharField(max_length=64)),
                ("due_hour", models.BigIntegerField()),
                ("expiry_hour", models.BigIntegerField()),
                ("n", models.IntegerField(default=0)),
            ],
            options={
                "constraints": [
                    models.UniqueConstraint(fields=("reason", "due_hour", "expiry_hour"), name="queuereasoncount_key")
                ],
            },
        ),
        migrations.RunPython(rollups.install_and_rebuild, rollups.uninstall),
    ]
