"""The PostgreSQL rollup trigger functions plan their statements once per session (``plan_cache_mode =
force_generic_plan``, ``rollups_triggers._PG_FUNCTION_SETTINGS``) instead of on every call (issue 15): a one-row UPDATE
of a verification spent ~1.5 ms planning its trigger's statements. What they count is unchanged, so nothing is
rebuilt; the functions are replaced (``CREATE OR REPLACE``)."""

from django.db import migrations

from verification.records import rollups


class Migration(migrations.Migration):
    dependencies = [("verification", "0018_rollup_triggers_skip_non_members")]

    operations = [migrations.RunPython(rollups.reinstall, migrations.RunPython.noop)]
