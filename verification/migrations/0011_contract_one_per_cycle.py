"""One contract per cycle (SPEC §1; issue 11 item 3): a second acceptance of a cycle is refused by the database too.

Before the constraint, a cycle could hold several acceptances (the latest counted). Those cycles keep their latest
acceptance as the contract, exactly as it was read; the earlier rows of such a cycle cannot stay beside the
constraint, so the migration stops and names those cycles instead of deleting anything: an admin decides.
"""

from django.db import migrations, models


def refuse_duplicates(apps, schema_editor):  # noqa: ANN001 - migration signature
    acceptance = apps.get_model("verification", "ContractAcceptance")
    duplicates = (
        acceptance.objects.using(schema_editor.connection.alias)
        .values("task_id", "cycle")
        .annotate(n=models.Count("id"))
        .filter(n__gt=1)
    )
    found = [f"{row['task_id']}@{row['cycle']}" for row in duplicates[:20]]
    if found:
        raise RuntimeError(
            "cycles with more than one accepted contract (the latest counted until now): "
            + ", ".join(found)
            + ". Keep one acceptance per cycle by hand (reopen a task to take another contract), then migrate."
        )


class Migration(migrations.Migration):
    dependencies = [
        ("verification", "0009_truncate_guards"),
    ]

    operations = [
        migrations.RunPython(refuse_duplicates, migrations.RunPython.noop),
        migrations.AddConstraint(
            model_name="contractacceptance",
            constraint=models.UniqueConstraint(fields=("task", "cycle"), name="contract_one_per_cycle"),
        ),
    ]
