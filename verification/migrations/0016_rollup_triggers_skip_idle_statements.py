"""The rollup triggers return at once from a statement that has nothing for them (issue 15): on PostgreSQL a
statement-level trigger fires for every statement, also an UPDATE that changed no column the rollups read (a run's
attempt count, ``awaiting_evidence``) or a DELETE of no row, and its body cost ~0.4 ms even then. The functions are
replaced (``CREATE OR REPLACE``); what they count is unchanged, so nothing is rebuilt."""

from django.db import migrations

from verification.records import rollups


class Migration(migrations.Migration):
    dependencies = [("verification", "0015_queue_reads_as_flagged")]

    operations = [migrations.RunPython(rollups.reinstall, migrations.RunPython.noop)]
