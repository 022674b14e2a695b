"""The PostgreSQL rollup triggers refresh only the verifications whose membership can move (issue 15): a new row only
if its own columns may make it a member (a submission, with no verdict yet, cannot be one), the row it supersedes only
if it has member rows (judged after its lock), a changed row only if it may be a member before or after, and the rows
it supersedes only when that link changed; with nothing to refresh, the refresh's statements are skipped. A run whose
outcome is not a queue member (a clean PASS) no longer pays them twice. What they count is unchanged, so nothing is
rebuilt; the functions are replaced (``CREATE OR REPLACE``)."""

from django.db import migrations

from verification.records import rollups


class Migration(migrations.Migration):
    dependencies = [("verification", "0017_queue_member_instants")]

    operations = [migrations.RunPython(rollups.reinstall, migrations.RunPython.noop)]
