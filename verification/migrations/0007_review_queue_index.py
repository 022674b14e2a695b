"""The reviewer queue's order as a partial expression index (issue 5 §2): a queue page walks it in order and stops
after one page, whatever the queue's length; and a partial index of the verifications that supersede another.

The index is built from the very expression the queue orders by (``review_selectors.queue_rank``), so the two cannot
drift apart; it lives outside the model state (the ``Verification`` model belongs to the records issue).
"""

from django.db import migrations, models
from django.db.models import F

INDEX_NAME = "verification_review_queue_idx"
SUPERSEDED_INDEX_NAME = "verification_superseding_idx"


def _indexes():
    from verification.reviews.selectors import QUEUE_INDEX_CONDITION, queue_rank

    return [
        models.Index(queue_rank(), F("submitted_at"), F("id"), condition=QUEUE_INDEX_CONDITION, name=INDEX_NAME),
        # "superseded by a newer verification" is asked of every queue row; only re-runs have a supersedes_id.
        models.Index(fields=["supersedes"], condition=models.Q(supersedes__isnull=False), name=SUPERSEDED_INDEX_NAME),
    ]


def add_index(apps, schema_editor):
    model = apps.get_model("verification", "Verification")
    for index in _indexes():
        schema_editor.add_index(model, index)


def remove_index(apps, schema_editor):
    model = apps.get_model("verification", "Verification")
    for index in _indexes():
        schema_editor.remove_index(model, index)


class Migration(migrations.Migration):
    dependencies = [
        ("verification", "0006_security_log_and_audit"),
    ]

    operations = [
        migrations.RunPython(add_index, remove_index),
    ]
