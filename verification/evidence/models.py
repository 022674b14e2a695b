"""Evidence, manifests, baselines, frozen cases and a verification's bindings (SPEC §4, §6)."""

from __future__ import annotations

import uuid

from django.db import models
from django.db.models import Q
from django.utils import timezone

from verification.actors.models import Actor
from verification.runs.models import Task, Verification


class Evidence(models.Model):
    """An evidence item: bytes in the content-addressed store
    (``verification.evidence.storage``) and its recorded facts.

    The six axes (SPEC §4): ``evidence_type``, ``admission_source`` and ``mutability`` are stored; independence,
    freshness and accessibility are computed when read from the recorded structure (admitting actor, boundary,
    custody; ``collected_at``/``max_age_seconds``/``expires_at``; the store and ``redacted_at``). ``trust_tier`` is
    the server's derivation at admission; a run derives it again against its own producer.
    """

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    digest = models.CharField(max_length=71, db_index=True)  # sha256:<hex>, recorded at admission
    size = models.PositiveBigIntegerField()
    media_type = models.CharField(max_length=200, default="application/octet-stream")
    evidence_type = models.CharField(max_length=16, default="artifact")
    admission_source = models.CharField(max_length=16)
    mutability = models.CharField(max_length=16, default="immutable")
    collected_at = models.DateTimeField(null=True, blank=True)
    max_age_seconds = models.PositiveBigIntegerField(null=True, blank=True)  # up to 100 years (kernel.limits)
    expires_at = models.DateTimeField(null=True, blank=True)
    custody = models.CharField(max_length=300, blank=True, default="")
    admitted_by = models.ForeignKey(Actor, on_delete=models.PROTECT, related_name="evidence_admitted")
    admitted_boundary = models.CharField(max_length=200, blank=True, default="")
    admitted_at = models.DateTimeField(default=timezone.now)
    source_key_id = models.CharField(max_length=32, blank=True, default="")
    source_signature = models.TextField(blank=True, default="")  # standard base64 of the detached signature
    source_verified = models.BooleanField(default=False)
    trust_tier = models.CharField(max_length=32)
    redacted_at = models.DateTimeField(null=True, blank=True)
    redaction_reason = models.TextField(blank=True, default="")
    task = models.ForeignKey(Task, on_delete=models.PROTECT, null=True, blank=True, related_name="evidence")

    class Meta:
        ordering = ("admitted_at", "id")
        verbose_name_plural = "evidence"
        constraints = [
            models.CheckConstraint(condition=Q(digest__regex=r"^sha256:[0-9a-f]{64}$"), name="evidence_digest_form"),
        ]

    def __str__(self) -> str:
        return f"evidence {self.id} ({self.digest[:19]})"


class ChangeManifest(models.Model):
    """A change manifest (evidence) and who reported it, from authentication (SPEC §1, rail 4)."""

    evidence = models.ForeignKey(Evidence, on_delete=models.PROTECT, related_name="manifests")
    task = models.ForeignKey(Task, on_delete=models.PROTECT, related_name="manifests")
    reported_by = models.ForeignKey(Actor, on_delete=models.PROTECT, related_name="+")
    reported_boundary = models.CharField(max_length=200)
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ("created_at", "id")

    def __str__(self) -> str:
        return f"manifest {self.evidence_id} of {self.task_id}"


class Baseline(models.Model):
    """A baseline captured by the capture step (SPEC §1, rail 5); ``capture_token`` is its HMAC under the server
    secret over every other field (``kernel.criteria.mint_baseline_token``), so no caller can fake one."""

    task = models.ForeignKey(Task, on_delete=models.PROTECT, related_name="baselines")
    cycle = models.PositiveIntegerField()
    artifact_key = models.CharField(max_length=128)
    digest = models.CharField(max_length=71)
    captured_at = models.DateTimeField()
    reporter = models.ForeignKey(Actor, on_delete=models.PROTECT, related_name="+")
    reporter_boundaries = models.JSONField(default=list)
    reporter_is_collector = models.BooleanField()
    capture_token = models.CharField(max_length=100)

    class Meta:
        ordering = ("captured_at", "id")
        indexes = [models.Index(fields=["task", "cycle", "artifact_key"], name="baseline_lookup_idx")]

    def __str__(self) -> str:
        return f"baseline {self.artifact_key} of {self.task_id}@{self.cycle}"


class FrozenCase(models.Model):
    """A frozen evaluation case of a task: a semantic judgment is grounded only when bound to one (SPEC §6)."""

    task = models.ForeignKey(Task, on_delete=models.PROTECT, related_name="frozen_cases")
    digest = models.CharField(max_length=71)
    content = models.TextField()
    frozen_at = models.DateTimeField(default=timezone.now)
    frozen_by = models.ForeignKey(Actor, on_delete=models.PROTECT, related_name="+")

    class Meta:
        ordering = ("frozen_at", "id")
        constraints = [models.UniqueConstraint(fields=["task", "digest"], name="frozencase_unique_digest")]

    def __str__(self) -> str:
        return f"case {self.digest[:19]} of {self.task_id}"


class VerificationEvidence(models.Model):
    """Evidence bound to a symbol of one verification's submission."""

    # Read by verification: ``verificationevidence_unique_symbol`` (verification, symbol) is the index (migration 0020).
    verification = models.ForeignKey(Verification, on_delete=models.PROTECT, related_name="bindings", db_index=False)
    symbol = models.CharField(max_length=128)
    evidence = models.ForeignKey(Evidence, on_delete=models.PROTECT, related_name="bindings")
    as_manifest = models.BooleanField(default=False)  # the submitter bound it as its own change manifest

    class Meta:
        ordering = ("verification", "symbol")
        constraints = [
            models.UniqueConstraint(fields=["verification", "symbol"], name="verificationevidence_unique_symbol")
        ]

    def __str__(self) -> str:
        return f"{self.symbol} = {self.evidence_id}"
