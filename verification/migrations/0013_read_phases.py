"""ReadPhase: the read state of a head from each PENDING deadline on (SPEC §3), backfilled from the heads; an
evidence item's max_age_seconds as a big integer (up to 100 years, SPEC §3)."""

import django.db.models.deletion
from django.db import migrations, models


def backfill(apps, schema_editor):
    from verification.kernel.canonical import loads_strict
    from verification.kernel.read_phases import read_phases

    verification_model = apps.get_model("verification", "Verification")
    receipt_model = apps.get_model("verification", "Receipt")
    phase_model = apps.get_model("verification", "ReadPhase")
    for v in verification_model.objects.filter(pending_until__isnull=False).iterator():
        head = receipt_model.objects.filter(verification=v).order_by("-seq").first()
        if head is None:
            continue
        payload = loads_strict(head.envelope)["payload"]
        if "criteria" not in payload:
            continue
        phase_model.objects.bulk_create(
            [
                phase_model(
                    verification=v,
                    starts_at=p.starts_at,
                    ends_at=p.ends_at,
                    verdict=p.outcome.verdict.value,
                    determination=p.outcome.determination.value if p.outcome.determination is not None else None,
                    flagged=p.outcome.flagged,
                    flag_reason=p.outcome.flag_reason,
                    reason=p.outcome.reason.value if p.outcome.reason is not None else None,
                )
                for p in read_phases(payload)
            ]
        )


class Migration(migrations.Migration):

    dependencies = [
        ('verification', '0011_contract_one_per_cycle'),
    ]

    operations = [
        migrations.CreateModel(
            name='ReadPhase',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('starts_at', models.DateTimeField()),
                ('ends_at', models.DateTimeField(blank=True, null=True)),
                ('verdict', models.CharField(max_length=16)),
                ('determination', models.CharField(blank=True, max_length=32, null=True)),
                ('flagged', models.BooleanField(default=False)),
                ('flag_reason', models.CharField(blank=True, max_length=200, null=True)),
                ('reason', models.CharField(blank=True, max_length=64, null=True)),
                ('verification', models.ForeignKey(
                    on_delete=django.db.models.deletion.CASCADE,
                    related_name='read_phases',
                    to='verification.verification',
                )),
            ],
            options={
                'constraints': [models.UniqueConstraint(fields=('verification', 'starts_at'), name='readphase_key')],
            },
        ),
        migrations.RunPython(backfill, migrations.RunPython.noop),
        # SPEC §3: an evidence item's allowed age is up to 100 years (kernel.limits), past a 32-bit integer.
        migrations.AlterField(
            model_name='evidence',
            name='max_age_seconds',
            field=models.PositiveBigIntegerField(blank=True, null=True),
        ),
    ]
