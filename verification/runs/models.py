"""Verifications, their tasks, cycles, claims, links, contracts, rubrics, results and events."""

from __future__ import annotations

import uuid

from django.db import models
from django.db.models import Q
from django.utils import timezone

from verification.actors.models import Actor
from verification.db_guards import AppendOnlyModel
from verification.kernel.digests import HEX64_MAX


class Verification(models.Model):
    """One verification of a subject. Its chain of receipts is ``receipts``; the head is the last receipt."""

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    rubric_hash = models.CharField(max_length=HEX64_MAX)
    submission_hash = models.CharField(max_length=HEX64_MAX)
    created_at = models.DateTimeField(default=timezone.now)

    # --- the subject and the submission (issue 4 §1; SPEC §1). Nullable: the receipts tests build bare rows. -----
    # No index of its own: ``verification_subject_idx`` (task, cycle) serves a lookup by task (migration 0020).
    task = models.ForeignKey(
        "Task", on_delete=models.PROTECT, null=True, blank=True, related_name="verifications", db_index=False
    )
    cycle = models.PositiveIntegerField(null=True, blank=True)  # the task's cycle when it was submitted
    rubric = models.ForeignKey(  # the cycle's accepted contract at submission; None: no accepted contract
        "Rubric", on_delete=models.PROTECT, null=True, blank=True, related_name="verifications"
    )
    submitted_by = models.ForeignKey(
        "Actor", on_delete=models.PROTECT, null=True, blank=True, related_name="verifications_submitted"
    )
    submitted_boundary = models.CharField(max_length=200, blank=True, default="")  # the token's boundary
    body = models.JSONField(default=dict, blank=True)  # the submission minus transport fields and inline bytes
    idempotency_key = models.CharField(max_length=200, null=True, blank=True)
    submitted_at = models.DateTimeField(default=timezone.now)  # PENDING deadlines run from here (SPEC §2)
    supersedes = models.ForeignKey(  # the previous verification of the same subject (SPEC §7: a re-run)
        # Indexed by ``verification_superseding_idx`` (migration 0007: only the rows that supersede one).
        "self", on_delete=models.PROTECT, null=True, blank=True, related_name="superseded_by", db_index=False
    )
    awaiting_evidence = models.BooleanField(default=False)

    # --- operational state of the run (SPEC §3 lifecycle, derived when read: selectors.verification_status) ------
    attempts = models.PositiveIntegerField(default=0)
    started_at = models.DateTimeField(null=True, blank=True)  # the latest attempt began
    last_error = models.TextField(blank=True, default="")
    failed_at = models.DateTimeField(null=True, blank=True)

    # --- query caches of the chain head's signed outcome, as issued (not as read: PENDING expires when read).
    # The receipt is the truth; these columns only let lists and the review queue filter without parsing envelopes.
    # ``services.outcome`` updates them in the same transaction that appends a receipt.
    verdict = models.CharField(max_length=16, null=True, blank=True, db_index=True)
    determination = models.CharField(max_length=32, null=True, blank=True, db_index=True)
    flagged = models.BooleanField(default=False, db_index=True)
    flag_reason = models.CharField(max_length=200, null=True, blank=True)
    reason = models.CharField(max_length=64, null=True, blank=True, db_index=True)
    human_decided = models.BooleanField(default=False, db_index=True)
    pending_until = models.DateTimeField(null=True, blank=True)  # the earliest PENDING deadline of the head
    automated_verdict = models.CharField(max_length=16, null=True, blank=True)  # of the latest run/result receipt
    evidence_key = models.CharField(max_length=HEX64_MAX, blank=True, default="")  # sha256 of digests; never filtered

    class Meta:
        ordering = ("-created_at",)
        indexes = [
            models.Index(fields=["task", "cycle"], name="verification_subject_idx"),
            models.Index(fields=["created_at", "id"], name="verification_keyset_idx"),
        ]
        constraints = [
            models.UniqueConstraint(
                fields=["submitted_by", "idempotency_key"],
                condition=Q(idempotency_key__isnull=False),
                name="verification_idempotency_key_per_actor",
            ),
            models.CheckConstraint(
                condition=Q(rubric_hash__regex=r"^[0-9a-f]{64}$"), name="verification_rubric_hash_hex64"
            ),
            models.CheckConstraint(
                condition=Q(submission_hash__regex=r"^[0-9a-f]{64}$"), name="verification_submission_hash_hex64"
            ),
        ]

    def __str__(self) -> str:
        return f"verification {self.id}"


class ReadPhase(models.Model):
    """What the head reads as from one PENDING deadline on (SPEC §3: derived when read, the same way when filtered).

    A query cache like the head columns above, written with them from ``kernel.read_phases`` by
    ``verification.runs.read_state``;
    lists filter on it through ``read_state.read_q`` only. Before ``pending_until`` the
    head columns hold the read state; from it on, the phase whose [starts_at, ends_at) holds ``now``.
    """

    verification = models.ForeignKey(Verification, on_delete=models.CASCADE, related_name="read_phases")
    starts_at = models.DateTimeField()
    ends_at = models.DateTimeField(null=True, blank=True)
    verdict = models.CharField(max_length=16)
    determination = models.CharField(max_length=32, null=True, blank=True)
    flagged = models.BooleanField(default=False)
    flag_reason = models.CharField(max_length=200, null=True, blank=True)
    reason = models.CharField(max_length=64, null=True, blank=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["verification", "starts_at"], name="readphase_key")]


class Rubric(models.Model):
    """A registered rubric (SPEC §5), referenced by ``rubric_hash`` (sha256 hex of its canonical JSON).

    ``document`` is the canonical JSON text that was hashed; ``witnesses`` the falsifiability witnesses the
    registrar ran (one per ``digest`` obligation).
    """

    rubric_hash = models.CharField(primary_key=True, max_length=HEX64_MAX)
    name = models.CharField(max_length=200)
    document = models.TextField()
    witnesses = models.JSONField(default=list)
    registered_by = models.ForeignKey(Actor, on_delete=models.PROTECT, null=True, blank=True, related_name="+")
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ("created_at",)
        constraints = [
            models.CheckConstraint(condition=Q(rubric_hash__regex=r"^[0-9a-f]{64}$"), name="rubric_hash_hex64"),
        ]

    def __str__(self) -> str:
        return f"{self.name} ({self.rubric_hash[:12]})"


class Task(models.Model):
    """A task: the subject of verifications, together with its current cycle (SPEC §1)."""

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    title = models.CharField(max_length=300)
    external_ref = models.CharField(max_length=300, blank=True, default="")
    created_by = models.ForeignKey(Actor, on_delete=models.PROTECT, null=True, blank=True, related_name="+")
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ("-created_at",)

    def __str__(self) -> str:
        return f"task {self.id}: {self.title}"


class TaskCycle(models.Model):
    """One cycle of a task. The current cycle is the highest number; reopening adds one (SPEC §1)."""

    task = models.ForeignKey(Task, on_delete=models.PROTECT, related_name="cycles")
    number = models.PositiveIntegerField()
    opened_at = models.DateTimeField(default=timezone.now)
    opened_by = models.ForeignKey(Actor, on_delete=models.PROTECT, null=True, blank=True, related_name="+")

    class Meta:
        ordering = ("task", "number")
        constraints = [models.UniqueConstraint(fields=["task", "number"], name="taskcycle_unique_number")]

    def __str__(self) -> str:
        return f"{self.task_id}@{self.number}"


class Claim(models.Model):
    """A claim of a task in one cycle, reported by the claiming actor's own token (SPEC §1)."""

    task = models.ForeignKey(Task, on_delete=models.PROTECT, related_name="claims")
    cycle = models.PositiveIntegerField()
    actor = models.ForeignKey(Actor, on_delete=models.PROTECT, related_name="claims")
    boundary = models.CharField(max_length=200)  # the claiming token's boundary
    claimed_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ("claimed_at", "id")
        indexes = [models.Index(fields=["task", "cycle"], name="claim_task_cycle_idx")]

    def __str__(self) -> str:
        return f"claim of {self.task_id}@{self.cycle} by {self.actor_id}"


class Link(models.Model):
    """A commit anchoring the work of a task, with its committing actor, as reported by a collector (SPEC §1, rail 2).

    ``committing_actor`` None: the reported name is not an actor we know, so the committer is unnamed.
    """

    task = models.ForeignKey(Task, on_delete=models.PROTECT, related_name="links")
    commit_id = models.CharField(max_length=200)
    committing_actor = models.ForeignKey(
        Actor, on_delete=models.PROTECT, null=True, blank=True, related_name="commits"
    )
    committing_actor_name = models.CharField(max_length=200, blank=True, default="")  # as reported
    reported_by = models.ForeignKey(Actor, on_delete=models.PROTECT, related_name="+")
    reported_boundary = models.CharField(max_length=200)
    superseded = models.BooleanField(default=False)
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ("created_at", "id")

    def __str__(self) -> str:
        return f"link {self.commit_id} of {self.task_id}"


class ContractAcceptance(models.Model):
    """A registered rubric accepted as the contract of one cycle (SPEC §1): one per cycle, never changed."""

    task = models.ForeignKey(Task, on_delete=models.PROTECT, related_name="contracts")
    cycle = models.PositiveIntegerField()
    rubric = models.ForeignKey(Rubric, on_delete=models.PROTECT, related_name="acceptances")
    accepted_by = models.ForeignKey(Actor, on_delete=models.PROTECT, related_name="+")
    accepted_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ("accepted_at", "id")
        indexes = [models.Index(fields=["task", "cycle"], name="contract_task_cycle_idx")]
        constraints = [models.UniqueConstraint(fields=["task", "cycle"], name="contract_one_per_cycle")]

    def __str__(self) -> str:
        return f"contract {self.rubric_id[:12]} for {self.task_id}@{self.cycle}"


class ArrivedResult(models.Model):
    """A semantic judgment or imported result that arrived for one criterion of a verification.

    ``actor`` and ``boundary`` come from the delivering token; the authority is assigned from the actor's kind when
    the run reads it (SPEC §1), so nothing in ``body`` (e.g. a claimed ``authority``) decides anything.
    """

    verification = models.ForeignKey(Verification, on_delete=models.PROTECT, related_name="arrived_results")
    criterion_id = models.CharField(max_length=128)
    actor = models.ForeignKey(Actor, on_delete=models.PROTECT, related_name="+")
    boundary = models.CharField(max_length=200)
    body = models.JSONField(default=dict)
    received_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ("received_at", "id")
        constraints = [
            models.UniqueConstraint(fields=["verification", "criterion_id"], name="arrivedresult_one_per_criterion")
        ]

    def __str__(self) -> str:
        return f"result for {self.criterion_id} of {self.verification_id}"


class Event(AppendOnlyModel):
    """The ordered feed of state changes (``GET /v1/events?after=``); ``id`` is the cursor.

    Inserts are serialized to commit in id order (``services.events.event_emit``), so a reader never sees a later
    id before an earlier one.
    """

    id = models.BigAutoField(primary_key=True)
    kind = models.CharField(max_length=64, db_index=True)
    verification = models.ForeignKey(
        Verification, on_delete=models.PROTECT, null=True, blank=True, related_name="events"
    )
    payload = models.JSONField(default=dict)
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ("id",)

    def __str__(self) -> str:
        return f"event {self.id} {self.kind}"
