"""Drop the indexes of the pipeline's tables that no query uses (issue 15).

A verification's INSERT and its head's UPDATE (not a HOT update: it changes indexed columns) wrote an entry in each of
the verification table's 23 indexes, and each receipt in each of 18; most came from ``db_index=True`` (and, on
PostgreSQL, the ``varchar_pattern_ops`` twin Django adds for a LIKE that is never asked). What stays serves a query:

- ``verification``: the task is found through ``verification_subject_idx`` (task, cycle), a superseding row through
  the partial ``verification_superseding_idx`` (0007); ``evidence_key`` is written, never filtered. The verdict,
  determination and reason keep their plain indexes (the history filters) and lose the LIKE twins, as the rubric's.
- ``receipt``: every query finds receipts by verification (and seq: the unique index serves both) or by content hash
  (the primary key); the payload copies (kind, verdict, determination, authority, actor) are read, never filtered;
  the key keeps its index (receipts counted per key), not its LIKE twin, nor the content hash its.
- ``verificationevidence``: by verification through the unique (verification, symbol).
- ``event``: the kind keeps its plain index, not its LIKE twin.

Nothing is rebuilt and no row changes. On SQLite, changing ``db_index`` through ``AlterField`` rebuilds the table,
which would drop the append-only guard triggers with it, so the state changes alone and the database only drops the
indexes (``DROP INDEX IF EXISTS``, by the names Django gave them). Reversible: the reverse creates them again.
"""

from django.db import migrations, models

#: Per model: (field, whole) — ``whole``: the field's index and its LIKE twin go; else only the twin (PostgreSQL).
DROPPED = {
    "verification": (
        ("evidence_key", True),
        ("task", True),
        ("supersedes", True),
        ("verdict", False),
        ("determination", False),
        ("reason", False),
        ("rubric", False),
    ),
    "receipt": (
        ("kind", True),
        ("verdict", True),
        ("determination", True),
        ("authority", True),
        ("actor", True),
        ("verification", True),
        ("supersedes_receipt", True),
        ("key", False),
        ("content_hash", False),
    ),
    "verificationevidence": (("verification", True),),
    "event": (("kind", False),),
}


def _names(schema_editor, model, field, whole):
    table, column = model._meta.db_table, field.column
    names = [schema_editor._create_index_name(table, [column], suffix="")] if whole else []
    if schema_editor.connection.vendor == "postgresql":
        names.append(schema_editor._create_index_name(table, [column], suffix="_like"))
    return names


def drop(apps, schema_editor):
    quote = schema_editor.quote_name
    for model_name, fields in DROPPED.items():
        model = apps.get_model("verification", model_name)
        for name, whole in fields:
            for index in _names(schema_editor, model, model._meta.get_field(name), whole):
                schema_editor.execute(f"DROP INDEX IF EXISTS {quote(index)}")


def create(apps, schema_editor):
    """The reverse: the indexes the state before this migration declares (``db_index``), created again."""
    postgresql = schema_editor.connection.vendor == "postgresql"
    for model_name, fields in DROPPED.items():
        model = apps.get_model("verification", model_name)
        for name, whole in fields:
            field = model._meta.get_field(name)
            if whole:
                for statement in schema_editor._field_indexes_sql(model, field):
                    schema_editor.execute(statement)
            elif postgresql:
                statement = schema_editor._create_like_index_sql(model, field)
                if statement is not None:
                    schema_editor.execute(statement)


def _unindexed_fk(to, related_name, *, null=False):
    """A PROTECT foreign key as the models declare it after this migration: ``db_index=False``."""
    optional = {"null": True, "blank": True} if null else {}
    return models.ForeignKey(
        to=to, related_name=related_name, on_delete=models.deletion.PROTECT, db_index=False, **optional
    )


def _text(max_length, *, null=True, **extra):
    optional = {"null": True, "blank": True} if null else {}
    return models.CharField(max_length=max_length, **optional, **extra)


class Migration(migrations.Migration):
    dependencies = [("verification", "0019_rollup_triggers_generic_plans")]

    operations = [
        migrations.SeparateDatabaseAndState(
            database_operations=[migrations.RunPython(drop, create)],
            state_operations=[
                migrations.AlterField(
                    "verification", "evidence_key", models.CharField(blank=True, default="", max_length=64)
                ),
                migrations.AlterField(
                    "verification", "task", _unindexed_fk("verification.task", "verifications", null=True)
                ),
                migrations.AlterField(
                    "verification",
                    "supersedes",
                    _unindexed_fk("verification.verification", "superseded_by", null=True),
                ),
                migrations.AlterField(
                    "receipt",
                    "kind",
                    _text(16, null=False, choices=[("run", "run"), ("result", "result"), ("decision", "decision")]),
                ),
                migrations.AlterField("receipt", "verdict", _text(16)),
                migrations.AlterField("receipt", "determination", _text(32)),
                migrations.AlterField("receipt", "authority", _text(32)),
                migrations.AlterField("receipt", "actor", _text(200)),
                migrations.AlterField(
                    "receipt", "verification", _unindexed_fk("verification.verification", "receipts")
                ),
                migrations.AlterField(
                    "receipt", "supersedes_receipt", _unindexed_fk("verification.receipt", "superseded_by", null=True)
                ),
                migrations.AlterField(
                    "verificationevidence", "verification", _unindexed_fk("verification.verification", "bindings")
                ),
            ],
        )
    ]
