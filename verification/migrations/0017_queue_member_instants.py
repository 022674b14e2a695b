"""The queue's member spans keep their exact instants (issue 15): ``QueueBacklogMember.due_at`` and ``until_at``, the
span [``due_at``, ``until_at``) whose hours ``due_hour`` and ``until_hour`` are (NULL: from the beginning, for ever).
The queue's counts then count the spans with an edge inside the current hour from the members themselves, not from
the queue. The triggers are replaced by this version's (they write the instants) and the rollups rebuilt, which fills
the instants of the rows already there."""

from django.db import migrations, models

from verification.records import rollups


class Migration(migrations.Migration):
    dependencies = [("verification", "0016_rollup_triggers_skip_idle_statements")]

    operations = [
        migrations.AddField(model_name="queuebacklogmember", name="due_at", field=models.DateTimeField(null=True)),
        migrations.AddField(model_name="queuebacklogmember", name="until_at", field=models.DateTimeField(null=True)),
        migrations.RunPython(rollups.install_and_rebuild, rollups.uninstall),
    ]
