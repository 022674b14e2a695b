"""Queue membership read the one way (SPEC §3, issue 13): a head is a queue member while it *reads* as flagged
(``read_state``), so the rollups keep each verification's member spans (``QueueBacklogMember``: the head columns until
its first PENDING deadline, then each stored read phase) counted per (submission hour, span hours) and per (reason,
span hours); the triggers also follow ``ReadPhase``. The rollup tables are derived, so they are dropped, created in
their new shape and rebuilt from the records. The queue's partial indexes (migrations 0007 and 0008) are rebuilt with
the condition that now covers every head with a PENDING deadline (it may read flagged once one passes)."""

import importlib

from django.db import migrations, models

from verification.records import rollups


def _queue_index_migrations():
    return [
        importlib.import_module("verification.migrations.0007_review_queue_index"),
        importlib.import_module("verification.migrations.0008_dashboard_rollups"),
    ]


def _queue_indexes():
    first, second = _queue_index_migrations()
    # 0007: the queue order; 0008: the queue by submission time (its other index, PENDING deadlines, is unchanged).
    return [first._indexes()[0], second._indexes()[0]]


def rebuild_queue_indexes(apps, schema_editor):
    model = apps.get_model("verification", "Verification")
    for index in _queue_indexes():
        schema_editor.remove_index(model, index)
        schema_editor.add_index(model, index)


def _count(name, key, doc):
    return migrations.CreateModel(
        name=name,
        fields=[
            ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name="ID")),
            *[
                (field, models.CharField(max_length=64) if field == "reason" else models.BigIntegerField())
                for field in key
            ],
            ("n", models.IntegerField(default=0)),
        ],
        options={"constraints": [models.UniqueConstraint(fields=key, name=doc)]},
    )


class Migration(migrations.Migration):
    dependencies = [
        ("verification", "0014_queue_reason_counts"),
    ]

    operations = [
        migrations.RunPython(rollups.uninstall, migrations.RunPython.noop),
        migrations.DeleteModel(name="QueueBacklogMember"),
        migrations.DeleteModel(name="QueueBacklogCount"),
        migrations.DeleteModel(name="QueueReasonCount"),
        migrations.CreateModel(
            name="QueueBacklogMember",
            fields=[
                ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name="ID")),
                ("verification_id", models.UUIDField(db_index=True)),
                ("submitted_hour", models.BigIntegerField()),
                ("due_hour", models.BigIntegerField(db_index=True)),
                ("until_hour", models.BigIntegerField(db_index=True)),
                ("reason", models.CharField(default="", max_length=64)),
            ],
        ),
        _count("QueueBacklogCount", ("submitted_hour", "due_hour", "until_hour"), "queuebacklogcount_key"),
        _count("QueueReasonCount", ("reason", "due_hour", "until_hour"), "queuereasoncount_key"),
        migrations.RunPython(rebuild_queue_indexes, migrations.RunPython.noop),
        migrations.RunPython(rollups.install_and_rebuild, rollups.uninstall),
    ]
